"""The EndpointSlice mirroring controller (upstream pkg/controller/endpointslicemirroring).

A Service without a selector gets its endpoints from Endpoints its user writes by hand; kube-proxy
and DNS read only EndpointSlices, so this controller mirrors such Endpoints into slices: per subset,
its addresses (ready) and notReadyAddresses (not ready) with the subset's ports, at most 1000
addresses per subset, labelled `kubernetes.io/service-name` and
`endpointslice.kubernetes.io/managed-by: endpointslicemirroring-controller.k8s.io`, owned by the
Endpoints. It mirrors nothing for a Service with a selector (the EndpointSlice controller serves it),
for Endpoints labelled `endpointslice.kubernetes.io/skip-mirror: "true"`, or without a Service; and
removes what it mirrored when that becomes so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from controllers.controller_ref_manager import new_controller_ref
from controllers.controller_utils import ensure_indexers
from controllers.endpointslice.controller import SERVICE_NAME_INDEX, apply_slice_plan, slice_service_index
from controllers.endpointslice.reconciler import DesiredPortSet, plan_slices
from controllers.endpointslice.tracker import EndpointSliceTracker
from controllers.endpointslice.utils import (
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    LABEL_SKIP_MIRROR,
    LAST_APPLIED_CONFIG,
    LAST_CHANGE_TRIGGER_TIME,
    PortKey,
    address_type_of,
    port_key,
)
from machinery.api.core_v1 import EndpointAddress, Endpoints, Service
from machinery.api.discovery_v1 import Endpoint, EndpointConditions, EndpointPort, EndpointSlice
from machinery.api.meta import ObjectMeta
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import Informer, SharedInformerFactory

log = logging.getLogger(__name__)

CONTROLLER_NAME = "endpointslicemirroring-controller.k8s.io"
EVENT_COMPONENT = "endpoint-slice-mirroring-controller"
MAX_ENDPOINTS_PER_SUBSET = 1000  # upstream --mirroring-max-endpoints-per-subset
LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
INDEX = SERVICE_NAME_INDEX + "/" + CONTROLLER_NAME


def should_mirror(endpoints: Endpoints | None) -> bool:
    if endpoints is None:
        return False
    if LEADER_ANNOTATION in (endpoints.metadata.annotations or {}):
        return False
    return (endpoints.metadata.labels or {}).get(LABEL_SKIP_MIRROR) != "true"


def address_to_endpoint(address: EndpointAddress, ready: bool) -> Endpoint:
    return Endpoint(addresses=[address.ip], conditions=EndpointConditions(ready=ready), target_ref=address.target_ref,
                    node_name=address.node_name, hostname=address.hostname or None)


@dataclass
class MirrorPlan:
    desired: dict[PortKey, DesiredPortSet] = field(default_factory=dict)
    invalid: int = 0  # addresses that are not IPs
    skipped: int = 0  # addresses left out: invalid ones and those past the per-subset limit


def desired_from_endpoints(endpoints: Endpoints, max_per_subset: int = MAX_ENDPOINTS_PER_SUBSET) -> MirrorPlan:
    """The slices' endpoints per port set (reconciler.go's desired calculation): at most `max_per_subset`
    addresses of each subset, ready ones first. Only IPv4 slices are made (the cluster is single-stack
    IPv4): IPv6 addresses are left out as well."""
    plan = MirrorPlan()
    for subset in endpoints.subsets or []:
        ports = [EndpointPort(name=p.name or "", port=p.port, protocol=p.protocol or "TCP", app_protocol=p.app_protocol)
                 for p in subset.ports or []]
        wanted = plan.desired.setdefault(port_key(ports), DesiredPortSet(ports))
        addresses = [*((a, True) for a in subset.addresses or []),
                     *((a, False) for a in subset.not_ready_addresses or [])]
        added = 0
        for address, ready in addresses:
            if added >= max_per_subset:
                break
            family = address_type_of(address.ip)
            if family is None:
                plan.invalid += 1
                log.warning("Address in %s/%s Endpoints is not a valid IP, it will not be mirrored to an "
                            "EndpointSlice: %s", endpoints.metadata.namespace, endpoints.metadata.name, address.ip)
                continue
            added += 1
            if family == "IPv4":
                wanted.add(address_to_endpoint(address, ready))
        plan.skipped += len(addresses) - added
    return plan


def mirrored_labels(endpoints: Endpoints) -> dict[str, str]:
    labels = dict(endpoints.metadata.labels or {})
    labels[LABEL_SERVICE_NAME] = endpoints.metadata.name or ""
    labels[LABEL_MANAGED_BY] = CONTROLLER_NAME
    return labels


def mirrored_annotations(endpoints: Endpoints) -> dict[str, str] | None:
    skip = (LAST_CHANGE_TRIGGER_TIME, LAST_APPLIED_CONFIG)
    out = {k: v for k, v in (endpoints.metadata.annotations or {}).items() if k not in skip}
    return out or None


class EndpointSliceMirroringController(Controller):
    name = "endpointslicemirroring"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5,
                 max_endpoints_per_subset: int = MAX_ENDPOINTS_PER_SUBSET) -> None:
        super().__init__(workers)
        self.client = client
        self.max_endpoints_per_subset = max_endpoints_per_subset
        self.recorder = EventRecorder(client, EVENT_COMPONENT, workers=1)
        self.slice_tracker = EndpointSliceTracker()
        self.services: Informer[Service] = informers.informer_for(Service)
        self.endpoints: Informer[Endpoints] = informers.informer_for(Endpoints)
        self.slices: Informer[EndpointSlice] = informers.informer_for(EndpointSlice)
        ensure_indexers(self.slices, {INDEX: slice_service_index(CONTROLLER_NAME)})
        self.watch(self.services)
        self.watch(self.endpoints)
        self.slices.add_event_handler(self._slice_seen, self._slice_updated, self._slice_gone)
        self.informers.append(self.slices)

    def _slice_seen(self, slice_: EndpointSlice) -> None:
        for key in slice_service_index(CONTROLLER_NAME)(slice_):
            if not self.slice_tracker.observed(key, slice_):
                self.queue.add(key)

    def _slice_updated(self, old: EndpointSlice, cur: EndpointSlice) -> None:
        for key in slice_service_index(CONTROLLER_NAME)(old):
            self.queue.add(key)
        self._slice_seen(cur)

    def _slice_gone(self, slice_: EndpointSlice) -> None:
        for key in slice_service_index(CONTROLLER_NAME)(slice_):
            if not self.slice_tracker.observed(key, slice_, gone=True):
                self.queue.add(key)

    async def reconcile(self, key: str) -> float | None:
        if self.slice_tracker.stale(key):
            return 0.1
        service = self.services.store.get(key)
        endpoints = self.endpoints.store.get(key)
        existing = self.slices.store.by_index(INDEX, key)
        if (service is None or service.spec is None or service.spec.selector is not None
                or endpoints is None or not should_mirror(endpoints)):
            # nothing (more) to mirror: remove what was mirrored
            if existing:
                await apply_slice_plan(self.client, self.slices, self.slice_tracker, key, [], [], existing)
            return None
        mirror = desired_from_endpoints(endpoints, self.max_endpoints_per_subset)
        if mirror.invalid:
            self.recorder.event(endpoints, "Warning", "InvalidIPAddress",
                                f"Skipped {mirror.invalid} invalid IP addresses when mirroring to EndpointSlices")
        if mirror.skipped > mirror.invalid:
            self.recorder.event(endpoints, "Warning", "TooManyAddressesToMirror",
                                f"A max of {self.max_endpoints_per_subset} addresses can be mirrored to EndpointSlices "
                                f"per Endpoints subset. {mirror.skipped} addresses were skipped")
        labels = mirrored_labels(endpoints)
        plan = plan_slices(mirror.desired, existing, owner_uid=endpoints.metadata.uid, labels=labels,
                           new_slice=lambda ports: self._new_slice(endpoints, labels, ports),
                           max_per_slice=self.max_endpoints_per_subset, placeholder=False,
                           trigger_time=(endpoints.metadata.annotations or {}).get(LAST_CHANGE_TRIGGER_TIME))
        # no new slices for Endpoints being deleted
        to_create = plan.to_create if endpoints.metadata.deletion_timestamp is None else []
        try:
            await apply_slice_plan(self.client, self.slices, self.slice_tracker, key,
                                   to_create, plan.to_update, plan.to_delete)
        except ApiError as e:
            if not (e.is_conflict or e.is_not_found):
                self.recorder.event(endpoints, "Warning", "FailedToUpdateEndpointSlices",
                                    f"Error updating Endpoint Slices for Endpoints {key}: {e.message}")
            raise
        return None

    def _new_slice(self, endpoints: Endpoints, labels: dict[str, str], ports: list[EndpointPort]) -> EndpointSlice:
        return EndpointSlice(
            metadata=ObjectMeta(generate_name=f"{endpoints.metadata.name}-", namespace=endpoints.metadata.namespace,
                                labels=dict(labels), annotations=mirrored_annotations(endpoints),
                                owner_references=[new_controller_ref(endpoints, "v1", "Endpoints")]),
            address_type="IPv4", endpoints=[], ports=ports)


