"""Packing desired endpoints into EndpointSlices with few writes (upstream
staging/src/k8s.io/endpointslice/reconciler.go: reconcileByAddressType, reconcileByPortMapping,
finalize; the mirroring controller's reconciler.go reuses the same steps).

Pure: the desired endpoints grouped by port set, the slices that exist, out comes a plan of slices
to create, update and delete. The steps, as upstream's:
1. a slice not owned by the current owner (a Service deleted and made again), or whose port set
   nobody wants any more, is deleted;
2. per port set, each existing slice keeps the endpoints still wanted (with their new conditions),
   drops the others; a slice that changed is updated, one left empty is deleted;
3. endpoints not yet placed fill the slices being updated anyway, then one unchanged slice that
   has room for all of them, then new slices of at most `max_per_slice`;
4. a create paired with a delete becomes an update of the doomed slice (fewer writes, same names);
5. no endpoints at all: one placeholder slice with no ports and no endpoints stays.
Creates go first, then updates, then deletes, so no endpoint is ever missing in between.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from controllers.endpointslice.utils import EndpointKey, PortKey, endpoint_key, merged_annotations, owned_by, port_key
from machinery.api.discovery_v1 import Endpoint, EndpointPort, EndpointSlice

DEFAULT_MAX_ENDPOINTS_PER_SLICE = 100


@dataclass
class DesiredPortSet:
    """The endpoints that serve one port set, by identity."""

    ports: list[EndpointPort]
    endpoints: dict[EndpointKey, Endpoint] = field(default_factory=dict)

    def add(self, endpoint: Endpoint) -> None:
        self.endpoints.setdefault(endpoint_key(endpoint), endpoint)


@dataclass
class SlicePlan:
    to_create: list[EndpointSlice] = field(default_factory=list)
    to_update: list[EndpointSlice] = field(default_factory=list)
    to_delete: list[EndpointSlice] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.to_create or self.to_update or self.to_delete)


# new_slice(ports) -> an unsaved slice with the owner's generateName, labels and ownerReference
NewSlice = Callable[[list[EndpointPort]], EndpointSlice]


def plan_slices(desired: dict[PortKey, DesiredPortSet], existing: Sequence[EndpointSlice], *, owner_uid: str | None,
                labels: dict[str, str], new_slice: NewSlice, max_per_slice: int = DEFAULT_MAX_ENDPOINTS_PER_SLICE,
                trigger_time: str | None = None, placeholder: bool = True) -> SlicePlan:
    plan = SlicePlan()
    by_ports: dict[PortKey, list[EndpointSlice]] = {}
    for slice_ in sorted(existing, key=lambda s: s.metadata.name or ""):
        key = port_key(slice_.ports)
        if not owned_by(slice_, owner_uid) or key not in desired:
            plan.to_delete.append(slice_)
        else:
            by_ports.setdefault(key, []).append(slice_)
    for key, wanted in desired.items():
        _plan_port_set(plan, wanted, by_ports.get(key, []), labels, new_slice, max_per_slice)

    # no endpoints at all: one placeholder slice (kept if it is there already)
    if placeholder and len(existing) == len(plan.to_delete) and not plan.to_create:
        if len(plan.to_delete) == 1 and _is_placeholder(plan.to_delete[0], owner_uid, labels):
            plan.to_delete.clear()
        else:
            plan.to_create.append(new_slice([]))

    # recycle: rather than delete one slice and create another, rewrite the doomed one
    recyclable = [s for s in plan.to_delete if owned_by(s, owner_uid)]
    while plan.to_create and recyclable:
        doomed = recyclable.pop(0)
        plan.to_delete.remove(doomed)
        fresh = plan.to_create.pop(0)
        plan.to_update.append(fresh.model_copy(update={"metadata": doomed.metadata.model_copy(
            update={"labels": fresh.metadata.labels})}))

    for slice_ in (*plan.to_create, *plan.to_update):
        slice_.metadata.annotations = merged_annotations(slice_.metadata.annotations, trigger_time)
    return plan


def _is_placeholder(slice_: EndpointSlice, owner_uid: str | None, labels: dict[str, str]) -> bool:
    return (owned_by(slice_, owner_uid) and not slice_.endpoints and not slice_.ports
            and (slice_.metadata.labels or {}) == labels)


def _plan_port_set(plan: SlicePlan, wanted: DesiredPortSet, slices: list[EndpointSlice], labels: dict[str, str],
                   new_slice: NewSlice, max_per_slice: int) -> None:
    """reconcileByPortMapping for one port set."""
    remaining = dict(wanted.endpoints)
    updated: list[EndpointSlice] = []
    unchanged: list[EndpointSlice] = []
    for slice_ in slices:
        kept: list[Endpoint] = []
        changed = (slice_.metadata.labels or {}) != labels
        for endpoint in slice_.endpoints or []:
            want = remaining.pop(endpoint_key(endpoint), None)
            if want is None:
                changed = True  # gone (or a duplicate of one placed already)
                continue
            kept.append(want)
            changed = changed or want != endpoint
        if len(kept) > max_per_slice:  # the limit was lowered: the surplus is placed again below
            for endpoint in kept[max_per_slice:]:
                remaining[endpoint_key(endpoint)] = endpoint
            kept, changed = kept[:max_per_slice], True
        if not changed:
            unchanged.append(slice_)
        elif not kept:
            plan.to_delete.append(slice_)
        else:
            updated.append(_rewritten(slice_, kept, labels))

    # fill the slices written anyway first
    for slice_ in updated:
        endpoints = slice_.endpoints or []
        while remaining and len(endpoints) < max_per_slice:
            endpoints.append(remaining.pop(next(iter(remaining))))
        slice_.endpoints = endpoints
    # then one unchanged slice with room for all of what is left (the fullest such slice)
    if remaining:
        for slice_ in sorted(unchanged, key=lambda s: -len(s.endpoints or [])):
            if len(remaining) <= max_per_slice - len(slice_.endpoints or []):
                updated.append(_rewritten(slice_, [*(slice_.endpoints or []), *remaining.values()], labels))
                remaining.clear()
                break
    # and new slices for the rest
    pending = list(remaining.values())
    for start in range(0, len(pending), max_per_slice):
        fresh = new_slice(list(wanted.ports))
        fresh.endpoints = pending[start:start + max_per_slice]
        plan.to_create.append(fresh)
    plan.to_update.extend(updated)


def _rewritten(slice_: EndpointSlice, endpoints: list[Endpoint], labels: dict[str, str]) -> EndpointSlice:
    return slice_.model_copy(update={"endpoints": list(endpoints),
                                     "metadata": slice_.metadata.model_copy(update={"labels": dict(labels)})})
