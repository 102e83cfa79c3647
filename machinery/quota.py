"""Resource quota accounting shared by the quota admission plugin (apiserver) and the resource-quota
controller: what one object uses of a namespace's quota, and which quotas it counts against
(upstream pkg/quota/v1: resources.go Add/Subtract/LessThanOrEqual, evaluator/core/pods.go,
services.go, persistent_volume_claims.go, generic/evaluator.go for `count/<resource>.<group>`).

Objects are wire-form dicts; usage is a `{resource name: Quantity}` mapping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from machinery.quantity import Quantity, parse_quantity
from machinery.types import Obj

Usage = dict[str, Quantity]

ZERO = parse_quantity("0")
ONE = parse_quantity("1")

# the quota names kept from before object-count quotas (resources with a classic name of their own)
CLASSIC_COUNTS = {("", "pods"): "pods", ("", "services"): "services", ("", "configmaps"): "configmaps",
                  ("", "secrets"): "secrets", ("", "persistentvolumeclaims"): "persistentvolumeclaims",
                  ("", "replicationcontrollers"): "replicationcontrollers",
                  ("", "resourcequotas"): "resourcequotas"}
# the compute resources a pod is charged for, and those whose quota makes every container state them
POD_COMPUTE = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory",
               "ephemeral-storage", "requests.ephemeral-storage", "limits.ephemeral-storage")
VALIDATION_SET = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
# upstream's scope names (core/v1 ResourceQuotaScope)
SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
          "CrossNamespacePodAffinity")
SCOPE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def object_count_name(group: str, plural: str) -> str:
    """`count/pods`, `count/deployments.apps` (quota.ObjectCountQuotaResourceNameFor)."""
    return f"count/{plural}.{group}" if group else f"count/{plural}"


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> Usage:
    out = dict(a)
    for key, value in b.items():
        out[key] = out[key] + value if key in out else value
    return out


def subtract(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> Usage:
    out = dict(a)
    for key, value in b.items():
        out[key] = Quantity(out.get(key, ZERO).value - value.value, (out.get(key) or value).format)
    return out


def parse_list(values: Mapping[str, Any] | None) -> Usage:
    """A ResourceList as quantities; a malformed value (validation refuses those) counts as zero."""
    out: Usage = {}
    for key, value in (values or {}).items():
        try:
            out[key] = parse_quantity(value)
        except ValueError:
            out[key] = ZERO
    return out


def format_list(usage: Mapping[str, Quantity]) -> dict[str, str]:
    return {key: str(value) for key, value in sorted(usage.items())}


def pretty(usage: Mapping[str, Quantity]) -> str:
    """prettyPrint: `pods=1,requests.cpu=500m`, sorted by name."""
    return ",".join(f"{key}={value}" for key, value in sorted(usage.items()))


# -- pods -------------------------------------------------------------------------------------


def _container_usage(resources: Obj | None) -> Usage:
    """podComputeUsageHelper for one container's requests and limits."""
    requests = parse_list((resources or {}).get("requests"))
    limits = parse_list((resources or {}).get("limits"))
    out: Usage = {}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = requests[name]
            out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    return out


def _max(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> Usage:
    out = dict(a)
    for key, value in b.items():
        if key not in out or value > out[key]:
            out[key] = value
    return out


def pod_is_terminal(pod: Obj) -> bool:
    """QuotaV1Pod: a pod that has finished (or whose grace period ran out) is no longer charged."""
    return ((pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"))


def pod_usage(pod: Obj) -> Usage:
    """PodUsageFunc: one pod, count/pods, and its compute: the sum over containers, at least the
    largest init container, plus the overhead."""
    spec = pod.get("spec") or {}
    usage: Usage = {"pods": ONE, "count/pods": ONE}
    if pod_is_terminal(pod):
        return {"count/pods": ONE}
    total: Usage = {}
    for container in spec.get("containers") or []:
        total = add(total, _container_usage(container.get("resources")))
    for container in spec.get("initContainers") or []:
        total = _max(total, _container_usage(container.get("resources")))
    overhead = parse_list(spec.get("overhead"))
    if overhead:
        total = add(total, {k: v for name, v in overhead.items()
                            for k in (name, f"requests.{name}", f"limits.{name}") if name in ("cpu", "memory")})
    return add(usage, total)


def pod_missing_constraints(pod: Obj, hard: Iterable[str]) -> str | None:
    """podEvaluator.Constraints: with cpu or memory under quota every container must state it
    (`must specify limits.cpu for: app; requests.memory for: app,side`); None when all do."""
    required = VALIDATION_SET & set(hard)
    if not required:
        return None
    missing: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        stated = set(_container_usage(container.get("resources")))
        for name in required - stated:
            missing.setdefault(name, set()).add(container.get("name") or "")
    if not missing:
        return None
    return "must specify " + "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))


def qos_is_best_effort(pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            for name, value in (resources.get(part) or {}).items():
                if name in ("cpu", "memory") and not parse_list({name: value})[name].is_zero():
                    return False
    return True


def quota_scopes(quota: Obj) -> list[Obj]:
    """spec.scopes (as Exists) and spec.scopeSelector's expressions (getScopeSelectorsFromQuota)."""
    spec = quota.get("spec") or {}
    out = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or []]
    out += list(((spec.get("scopeSelector") or {}).get("matchExpressions")) or [])
    return out


def pod_matches_scope(selector: Obj, pod: Obj) -> bool:
    """podMatchesScopeFunc."""
    spec = pod.get("spec") or {}
    scope = selector.get("scopeName")
    if scope == "Terminating":
        return spec.get("activeDeadlineSeconds") is not None and spec["activeDeadlineSeconds"] >= 0
    if scope == "NotTerminating":
        return spec.get("activeDeadlineSeconds") is None or spec["activeDeadlineSeconds"] < 0
    if scope == "BestEffort":
        return qos_is_best_effort(pod)
    if scope == "NotBestEffort":
        return not qos_is_best_effort(pod)
    if scope == "PriorityClass":
        operator, values = selector.get("operator"), selector.get("values") or []
        name = spec.get("priorityClassName") or ""
        if operator == "Exists":
            return bool(name)
        if operator == "DoesNotExist":
            return not name
        if operator == "In":
            return name in values
        if operator == "NotIn":
            return bool(name) and name not in values
        return False
    if scope == "CrossNamespacePodAffinity":
        return False
    return False


# -- any object ---------------------------------------------------------------------------------


def usage_of(group: str, plural: str, obj: Obj) -> Usage:
    """What one object of group/plural uses: its object count (and classic count name), plus what the
    core evaluators add (pods' compute, services' node ports and load balancers, claims' storage)."""
    count = object_count_name(group, plural)
    if (group, plural) == ("", "pods"):
        return pod_usage(obj)
    usage: Usage = {count: ONE}
    classic = CLASSIC_COUNTS.get((group, plural))
    if classic:
        usage[classic] = ONE
    if (group, plural) == ("", "services"):
        spec = obj.get("spec") or {}
        kind = spec.get("type") or "ClusterIP"
        ports = len(spec.get("ports") or [])
        usage["services.loadbalancers"] = ONE if kind == "LoadBalancer" else ZERO
        usage["services.nodeports"] = parse_quantity(ports) if kind in ("NodePort", "LoadBalancer") else ZERO
    elif (group, plural) == ("", "persistentvolumeclaims"):
        requests = parse_list(((obj.get("spec") or {}).get("resources") or {}).get("requests"))
        if "storage" in requests:
            usage["requests.storage"] = requests["storage"]
        klass = (obj.get("spec") or {}).get("storageClassName")
        if klass:
            usage[f"{klass}.storageclass.storage.k8s.io/persistentvolumeclaims"] = ONE
            if "storage" in requests:
                usage[f"{klass}.storageclass.storage.k8s.io/requests.storage"] = requests["storage"]
    return usage


def quota_matches(quota: Obj, group: str, plural: str, obj: Obj) -> bool:
    """evaluator.Matches: some hard resource is one this object is charged for, and every scope
    matches (only pods have scopes: a scoped quota counts nothing else)."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    if not set(hard) & set(usage_of(group, plural, obj)) and not set(hard) & set(_names_of(group, plural)):
        return False
    scopes = quota_scopes(quota)
    if not scopes:
        return True
    if (group, plural) != ("", "pods"):
        return False
    return all(pod_matches_scope(s, obj) for s in scopes)


def _names_of(group: str, plural: str) -> tuple[str, ...]:
    """Every resource name an object of this kind can be charged under (MatchingResources)."""
    names: tuple[str, ...] = (object_count_name(group, plural),)
    classic = CLASSIC_COUNTS.get((group, plural))
    if classic:
        names += (classic,)
    if (group, plural) == ("", "pods"):
        names += POD_COMPUTE
    elif (group, plural) == ("", "services"):
        names += ("services.loadbalancers", "services.nodeports")
    elif (group, plural) == ("", "persistentvolumeclaims"):
        names += ("requests.storage",)
    return names


def resource_of(name: str) -> tuple[str, str] | None:
    """The (group, plural) a quota resource name counts: `pods`/`requests.cpu` → pods, `count/deployments.apps`
    → (apps, deployments), `services.nodeports` → services; None for names counted from nothing here."""
    if name.startswith("count/"):
        plural, _, group = name[len("count/"):].partition(".")
        return group, plural
    for key, classic in CLASSIC_COUNTS.items():
        if name == classic:
            return key
    if name in POD_COMPUTE:
        return "", "pods"
    if name in ("services.loadbalancers", "services.nodeports"):
        return "", "services"
    if name == "requests.storage" or name.endswith(".storageclass.storage.k8s.io/requests.storage") \
            or name.endswith(".storageclass.storage.k8s.io/persistentvolumeclaims"):
        return "", "persistentvolumeclaims"
    return None


def calculate_usage(quota: Obj, objects_by_resource: Mapping[tuple[str, str], Iterable[Obj]]) -> Usage:
    """The controller's CalculateUsage: for each hard resource, the sum over the matching objects
    (zero when none), restricted to the quota's hard names."""
    hard = set((quota.get("spec") or {}).get("hard") or {})
    used: Usage = {name: ZERO for name in hard}
    for (group, plural), objects in objects_by_resource.items():
        for obj in objects:
            if not quota_matches(quota, group, plural, obj):
                continue
            usage = {k: v for k, v in usage_of(group, plural, obj).items() if k in hard}
            used = add(used, usage)
    return used
