"""The Priority admission plugin (upstream plugin/pkg/admission/priority/admission.go).

On a new pod it resolves spec.priorityClassName into spec.priority and spec.preemptionPolicy: a
class that does not exist refuses the pod (403 `no PriorityClass with name X was found`); no class
named gives the cluster's globalDefault class (the one of lowest value if several), else priority
0 and PreemptLowerPriority. A pod that states a priority or preemptionPolicy of its own that
differs from what the class says is refused. On PriorityClasses it keeps globalDefault unique
(403 `PriorityClass X is already marked as default. Only one default can exist`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from apiserver import errors
from apiserver.admission.interfaces import AdmissionAttributes
from machinery.api.scheduling_v1 import PREEMPT_LOWER_PRIORITY
from machinery.types import Obj

DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS = 0


@dataclass
class PriorityClasses:
    """How the plugin reads PriorityClasses: one by name (the watch cache, then etcd for a class created a
    moment ago, as upstream's lister falls back to a live lookup) and all of them (the watch cache)."""

    get: Callable[[str], Awaitable[Obj | None]]
    all: Callable[[], list[Obj]]


def default_class(classes: list[Obj]) -> Obj | None:
    """getDefaultPriorityClass: the globalDefault class of lowest value."""
    defaults = [c for c in classes if c.get("globalDefault")]
    return min(defaults, key=lambda c: c.get("value", 0)) if defaults else None


def _is_pod_create(a: AdmissionAttributes) -> bool:
    info = a.store.info
    return a.operation == "CREATE" and info.group == "" and info.plural == "pods" and not a.subresource


async def admit_pod(a: AdmissionAttributes, classes: PriorityClasses) -> None:
    if not _is_pod_create(a) or a.obj is None:
        return
    spec = a.obj.setdefault("spec", {})
    name = spec.get("priorityClassName") or ""
    policy: str | None
    if not name:
        found = default_class(classes.all())
        if found is not None:
            name, priority, policy = found["metadata"]["name"], found.get("value", 0), found.get("preemptionPolicy")
        else:
            priority, policy = DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS, PREEMPT_LOWER_PRIORITY
        if name:
            spec["priorityClassName"] = name
    else:
        found = await classes.get(name)
        if found is None:
            raise errors.forbidden(a.store.info, a.name, f"no PriorityClass with name {name} was found")
        priority, policy = found.get("value", 0), found.get("preemptionPolicy")
    if spec.get("priority") is not None and spec["priority"] != priority:
        raise errors.forbidden(a.store.info, a.name, f"the integer value of priority ({spec['priority']}) must not be "
                               f"provided in pod spec; priority admission controller computed {priority} from the "
                               f"given PriorityClass name")
    spec["priority"] = priority
    if policy is not None:
        if spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy:
            raise errors.forbidden(a.store.info, a.name, f"the string value of PreemptionPolicy "
                                   f"({spec['preemptionPolicy']}) must not be provided in pod spec; priority admission "
                                   f"controller computed {policy} from the given PriorityClass name")
        spec["preemptionPolicy"] = policy


def validate_priority_class(a: AdmissionAttributes, classes: PriorityClasses) -> None:
    info = a.store.info
    if info.group != "scheduling.k8s.io" or info.plural != "priorityclasses" or a.subresource:
        return
    if a.operation not in ("CREATE", "UPDATE") or a.obj is None or not a.obj.get("globalDefault"):
        return
    current = default_class(classes.all())
    if current is not None and (a.operation == "CREATE" or current["metadata"]["name"] != a.name):
        raise errors.forbidden(info, a.name, f"PriorityClass {current['metadata']['name']} is already marked as "
                               f"default. Only one default can exist")
