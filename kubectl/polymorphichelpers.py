"""What `expose` learns from the object it exposes, as kubectl's polymorphichelpers do it
(k8s.io/kubectl/pkg/polymorphichelpers: canbeexposed.go, mapbasedselectorforobject.go,
portsforobject.go, protocolsforobject.go): which kinds can be exposed, the pod selector as a
`k=v,...` string, the ports (as strings, in container order) and each port's protocols.

The objects are unstructured (JSON dicts); the kind decides where the pod spec lives.
"""

from __future__ import annotations

from typing import Any

from machinery.types import Obj

# GroupKinds kubectl can expose: core ReplicationController, Service, Pod; apps Deployment, ReplicaSet
EXPOSABLE = {("", "ReplicationController"), ("", "Service"), ("", "Pod"), ("apps", "Deployment"),
             ("apps", "ReplicaSet")}


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def group_kind(group: str, kind: str) -> str:
    """schema.GroupKind.String(): `Node`, `StatefulSet.apps`."""
    return f"{kind}.{group}" if group else kind


def can_be_exposed(group: str, kind: str) -> None:
    """canBeExposed: ValueError `cannot expose a <GroupKind>` for any other kind."""
    if (group, kind) not in EXPOSABLE:
        raise ValueError(f"cannot expose a {group_kind(group, kind)}")


def make_labels(labels: dict[str, str]) -> str:
    """generate.MakeLabels: `k=v` pairs joined by commas (sorted here; Go's map order is random)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _go_expressions(expressions: list[Any]) -> str:
    """%+v of []LabelSelectorRequirement, as the error shows it."""
    parts = [f"{{Key:{_d(e).get('key', '')} Operator:{_d(e).get('operator', '')} "
             f"Values:[{' '.join(str(v) for v in _l(_d(e).get('values')))}]}}" for e in expressions]
    return "[" + " ".join(parts) + "]"


def map_based_selector_for_object(group: str, kind: str, obj: Obj) -> str:
    """mapBasedSelectorForObject: the selector a Service for `obj` takes; ValueError with kubectl's words."""
    meta, spec = _d(obj.get("metadata")), _d(obj.get("spec"))
    if (group, kind) == ("", "ReplicationController"):
        return make_labels(_d(spec.get("selector")))
    if (group, kind) == ("", "Pod"):
        labels = _d(meta.get("labels"))
        if not labels:
            raise ValueError("the pod has no labels and cannot be exposed")
        return make_labels(labels)
    if (group, kind) == ("", "Service"):
        if spec.get("selector") is None:
            raise ValueError("the service has no pod selector set")
        return make_labels(_d(spec.get("selector")))
    if (group, kind) in (("apps", "Deployment"), ("apps", "ReplicaSet")):
        selector = _d(spec.get("selector"))
        if not _d(selector.get("matchLabels")):
            raise ValueError(f"invalid {kind.lower()}: no selectors, therefore cannot be exposed")
        if _l(selector.get("matchExpressions")):
            raise ValueError(f'couldn\'t convert expressions - "{_go_expressions(selector["matchExpressions"])}" '
                             "to map-based selector format")
        return make_labels(_d(selector.get("matchLabels")))
    raise ValueError(f"cannot extract pod selector from {group_kind(group, kind)}")


def _pod_spec(group: str, kind: str, obj: Obj) -> Obj | None:
    spec = _d(obj.get("spec"))
    if (group, kind) == ("", "Pod"):
        return spec
    if (group, kind) in (("", "ReplicationController"), ("apps", "Deployment"), ("apps", "ReplicaSet")):
        return _d(_d(spec.get("template")).get("spec"))
    return None


def ports_for_object(group: str, kind: str, obj: Obj) -> list[str]:
    """portsForObject: the containers' ports (a Service: its ports), as strings, in order, each once."""
    if (group, kind) == ("", "Service"):
        return list(dict.fromkeys(str(p.get("port")) for p in _l(_d(obj.get("spec")).get("ports"))
                                  if isinstance(p, dict)))
    pod_spec = _pod_spec(group, kind, obj)
    if pod_spec is None:
        raise ValueError(f"cannot extract ports from {group_kind(group, kind)}")
    ports = [str(port["containerPort"]) for c in _l(pod_spec.get("containers")) for port in _l(_d(c).get("ports"))
             if isinstance(port, dict) and port.get("containerPort") is not None]
    return list(dict.fromkeys(ports))  # one port for 53/UDP and 53/TCP: its protocols make it two ServicePorts


def protocols_for_object(group: str, kind: str, obj: Obj) -> dict[str, list[str]]:
    """protocolsForObject: port → its protocols (TCP when a port names none), each protocol once."""
    if (group, kind) == ("", "Service"):
        entries = [(str(p.get("port")), p.get("protocol") or "TCP")
                   for p in _l(_d(obj.get("spec")).get("ports")) if isinstance(p, dict)]
    else:
        pod_spec = _pod_spec(group, kind, obj)
        if pod_spec is None:
            raise ValueError(f"cannot extract protocols from {group_kind(group, kind)}")
        entries = [(str(port["containerPort"]), port.get("protocol") or "TCP")
                   for c in _l(pod_spec.get("containers")) for port in _l(_d(c).get("ports"))
                   if isinstance(port, dict) and port.get("containerPort") is not None]
    protocols: dict[str, list[str]] = {}
    for port, protocol in entries:
        known = protocols.setdefault(port, [])
        if protocol not in known:
            known.append(protocol)
    return protocols
