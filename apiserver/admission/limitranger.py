"""The LimitRanger admission plugin (upstream plugin/pkg/admission/limitranger/admission.go), on
new pods and claims of a namespace with LimitRanges (read from the watch cache):

Mutating: a container without a request or limit gets the Container item's defaultRequest and default
(the LimitRange's own defaulting filled those from max and min), and the pod the annotation
`kubernetes.io/limit-ranger: LimitRanger plugin set: cpu, memory request for container app; ...`.
Validating: each Container, Pod (the sum over its containers) and PersistentVolumeClaim item's min,
max and maxLimitRequestRatio, refused with upstream's words:

  pods "x" is forbidden: maximum cpu usage per Container is 500m, but limit is 1
  pods "x" is forbidden: [minimum memory usage per Pod is 64Mi, but request is 32Mi, ...]
"""

from __future__ import annotations

from collections.abc import Callable

from apiserver import errors
from apiserver.admission.interfaces import AdmissionAttributes
from machinery.quantity import Quantity
from machinery.quota import parse_list
from machinery.types import Obj

ANNOTATION = "kubernetes.io/limit-ranger"
MAX_MILLI_VALUE = (1 << 63) // 1000  # resource.MaxMilliValue

LimitRanges = Callable[[str], list[Obj]]  # the namespace's LimitRanges


def _target(a: AdmissionAttributes) -> str | None:
    info = a.store.info
    if a.operation != "CREATE" or a.subresource or a.obj is None or info.group != "":
        return None
    return info.plural if info.plural in ("pods", "persistentvolumeclaims") else None


def _containers(spec: Obj) -> list[tuple[str, Obj]]:
    return [*(("container", c) for c in spec.get("containers") or []),
            *(("init container", c) for c in spec.get("initContainers") or [])]


def default_limit_range_item(item: Obj) -> None:
    """SetDefaults_LimitRangeItem (LimitRange defaulting): a Container item's default limit comes from
    max, its default request from the default limit, then from min."""
    if item.get("type") != "Container":
        return
    default = item.setdefault("default", {})
    request = item.setdefault("defaultRequest", {})
    for key, value in (item.get("max") or {}).items():
        default.setdefault(key, value)
    for key, value in default.items():
        request.setdefault(key, value)
    for key, value in (item.get("min") or {}).items():
        request.setdefault(key, value)


def mutate(a: AdmissionAttributes, ranges: LimitRanges) -> bool:
    """Whether the pod was changed."""
    if _target(a) != "pods":
        return False
    assert a.obj is not None
    requests: dict[str, object] = {}
    limits: dict[str, object] = {}
    for lr in ranges(a.namespace or ""):
        for item in ((lr.get("spec") or {}).get("limits")) or []:
            if item.get("type") == "Container":
                requests.update(item.get("defaultRequest") or {})
                limits.update(item.get("default") or {})
    if not requests and not limits:
        return False
    notes = []
    for kind, container in _containers(a.obj.setdefault("spec", {})):
        resources = container.setdefault("resources", {})
        set_requests, set_limits = [], []
        for key, value in requests.items():
            if key not in (resources.get("requests") or {}):
                resources.setdefault("requests", {})[key] = value
                set_requests.append(key)
        for key, value in limits.items():
            if key not in (resources.get("limits") or {}):
                resources.setdefault("limits", {})[key] = value
                set_limits.append(key)
        name = container.get("name") or ""
        if set_requests:
            notes.append(f"{', '.join(sorted(set_requests))} request for {kind} {name}")
        if set_limits:
            notes.append(f"{', '.join(sorted(set_limits))} limit for {kind} {name}")
    if notes:
        meta = a.obj.setdefault("metadata", {})
        meta.setdefault("annotations", {})[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)
    return bool(notes)


def _min(kind: str, name: str, enforced: Quantity, request: dict[str, Quantity], limit: dict[str, Quantity]) \
        -> str | None:
    req, lim = request.get(name), limit.get(name)
    if req is None:
        return f"minimum {name} usage per {kind} is {enforced}.  No request is specified"
    if req < enforced:
        return f"minimum {name} usage per {kind} is {enforced}, but request is {req}"
    if lim is not None and lim < enforced:
        return f"minimum {name} usage per {kind} is {enforced}, but limit is {lim}"
    return None


def _max(kind: str, name: str, enforced: Quantity, request: dict[str, Quantity], limit: dict[str, Quantity]) \
        -> str | None:
    req, lim = request.get(name), limit.get(name)
    if lim is None:
        return f"maximum {name} usage per {kind} is {enforced}.  No limit is specified"
    if lim > enforced:
        return f"maximum {name} usage per {kind} is {enforced}, but limit is {lim}"
    if req is not None and req > enforced:
        return f"maximum {name} usage per {kind} is {enforced}, but request is {req}"
    return None


def _ratio(kind: str, name: str, enforced: Quantity, request: dict[str, Quantity], limit: dict[str, Quantity]) \
        -> str | None:
    req, lim = request.get(name), limit.get(name)
    if req is None or req.is_zero():
        return (f"{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or "
                f"request is 0")
    if lim is None or lim.is_zero():
        return (f"{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or "
                f"limit is 0")
    observed = lim.value / req.value
    if observed > enforced.value:
        return (f"{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is "
                f"{float(observed):f}")
    return None


def _check(item: Obj, kind: str, request: dict[str, Quantity], limit: dict[str, Quantity], out: list[str]) -> None:
    for key, check in (("min", _min), ("max", _max), ("maxLimitRequestRatio", _ratio)):
        for name, enforced in sorted(parse_list(item.get(key)).items()):
            message = check(kind, name, enforced, request, limit)
            if message is not None:
                out.append(message)


def _pod_totals(spec: Obj, part: str) -> dict[str, Quantity]:
    """podRequests / podLimits: the containers' sum, at least the largest init container's."""
    total: dict[str, Quantity] = {}
    for container in spec.get("containers") or []:
        for name, q in parse_list((container.get("resources") or {}).get(part)).items():
            total[name] = total[name] + q if name in total else q
    for container in spec.get("initContainers") or []:
        for name, q in parse_list((container.get("resources") or {}).get(part)).items():
            if name not in total or q > total[name]:
                total[name] = q
    return total


def validate(a: AdmissionAttributes, ranges: LimitRanges) -> None:
    target = _target(a)
    if target is None:
        return
    assert a.obj is not None
    found: list[str] = []
    spec = a.obj.get("spec") or {}
    for lr in ranges(a.namespace or ""):
        for item in ((lr.get("spec") or {}).get("limits")) or []:
            kind = item.get("type")
            if target == "pods" and kind == "Container":
                for _, container in _containers(spec):
                    resources = container.get("resources") or {}
                    _check(item, "Container", parse_list(resources.get("requests")),
                           parse_list(resources.get("limits")), found)
            elif target == "pods" and kind == "Pod":
                _check(item, "Pod", _pod_totals(spec, "requests"), _pod_totals(spec, "limits"), found)
            elif target == "persistentvolumeclaims" and kind == "PersistentVolumeClaim":
                resources = spec.get("resources") or {}
                _check(item, "PersistentVolumeClaim", parse_list(resources.get("requests")),
                       parse_list(resources.get("limits")), found)
    if found:
        raise errors.forbidden(a.store.info, a.name, found[0] if len(found) == 1 else "[" + ", ".join(found) + "]")
