"""The EndpointSlice controller (upstream pkg/controller/endpointslice/endpointslice_controller.go).

Per Service with a selector: the pods it selects become endpoints in EndpointSlices named
`<service>-<random>`, labelled `kubernetes.io/service-name` and
`endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`, owned by the Service
(so the garbage collector removes them with it). Pods whose named targetPorts resolve to different
numbers land in different slices. Selector-less and ExternalName Services are left alone: their
slices are the user's (or the mirroring controller's).

Informers: Services (their own key), Pods (every Service in the namespace whose selector matches
the old or new labels), Nodes (a zone label changing, a node appearing that a pod waited for),
EndpointSlices it manages (someone else editing or deleting one is undone).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from controllers.controller_ref_manager import new_controller_ref
from controllers.controller_utils import ensure_indexers
from controllers.endpointslice.reconciler import DEFAULT_MAX_ENDPOINTS_PER_SLICE, DesiredPortSet, plan_slices
from controllers.endpointslice.tracker import EndpointSliceTracker
from controllers.endpointslice.utils import (
    ADDRESS_TYPE_IPV4,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    LABEL_TOPOLOGY_ZONE,
    PortKey,
    TriggerTimeTracker,
    endpoint_ports,
    pod_to_endpoint,
    port_key,
    service_labels,
    services_selecting,
    should_pod_be_in_endpoints,
)
from machinery.api.core_v1 import Node, Pod, Service
from machinery.api.discovery_v1 import Endpoint, EndpointPort, EndpointSlice
from machinery.api.meta import ObjectMeta
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import Informer, SharedInformerFactory, meta_namespace_key, namespace_index
from machinery.selectors import selector_from_set

log = logging.getLogger(__name__)

CONTROLLER_NAME = "endpointslice-controller.k8s.io"  # the managed-by label value
EVENT_COMPONENT = "endpoint-slice-controller"
NAMESPACE_INDEX = "namespace"
SERVICE_NAME_INDEX = "minik8s/endpointSlicesByService"
NODE_MISSING_RETRY = 1.0  # seconds: a pod's node not yet in the cache


def slice_service_index(managed_by: str) -> Any:
    """EndpointSlices managed by `managed_by`, by `<namespace>/<service-name label>`."""
    def index(obj: Any) -> list[str]:
        labels = obj.metadata.labels or {}
        name = labels.get(LABEL_SERVICE_NAME)
        if not name or labels.get(LABEL_MANAGED_BY) != managed_by:
            return []
        return [f"{obj.metadata.namespace}/{name}"]
    return index


@dataclass(frozen=True)
class _CachedEndpoint:
    inputs: tuple[str, str, str | None]  # pod resourceVersion, Service resourceVersion, node zone
    endpoint: Endpoint
    ports: list[EndpointPort]
    key: PortKey


class EndpointSliceController(Controller):
    name = "endpointslice"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5,
                 max_endpoints_per_slice: int = DEFAULT_MAX_ENDPOINTS_PER_SLICE) -> None:
        super().__init__(workers)
        self.client = client
        self.max_endpoints_per_slice = max_endpoints_per_slice
        self.recorder = EventRecorder(client, EVENT_COMPONENT, workers=1)
        self.slice_tracker = EndpointSliceTracker()
        self.trigger_times = TriggerTimeTracker()
        self._endpoints: dict[str, dict[str, _CachedEndpoint]] = {}  # Service key -> pod uid -> its endpoint
        self.services: Informer[Service] = informers.informer_for(Service)
        self.pods: Informer[Pod] = informers.informer_for(Pod)
        self.nodes: Informer[Node] = informers.informer_for(Node)
        self.slices: Informer[EndpointSlice] = informers.informer_for(EndpointSlice)
        ensure_indexers(self.services, {NAMESPACE_INDEX: namespace_index})
        ensure_indexers(self.pods, {NAMESPACE_INDEX: namespace_index})
        ensure_indexers(self.slices, {SERVICE_NAME_INDEX + "/" + CONTROLLER_NAME: slice_service_index(CONTROLLER_NAME)})
        self.watch(self.services)
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_added)
        self.nodes.add_event_handler(self._node_changed, self._node_updated, self._node_changed)
        self.slices.add_event_handler(self._slice_added, self._slice_updated, self._slice_deleted)
        self.informers.extend([self.pods, self.nodes, self.slices])

    # -- event handlers --------------------------------------------------------------------------

    def _services_selecting(self, pod: Pod) -> list[str]:
        in_namespace = self.services.store.by_index(NAMESPACE_INDEX, pod.metadata.namespace or "")
        return [meta_namespace_key(svc) for svc in services_selecting(in_namespace, pod)]

    def _pod_added(self, pod: Pod) -> None:
        for key in self._services_selecting(pod):
            self.queue.add(key)

    def _pod_updated(self, old: Pod, cur: Pod) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        keys = set(self._services_selecting(cur))
        if (old.metadata.labels or {}) != (cur.metadata.labels or {}):
            keys.update(self._services_selecting(old))
        for key in keys:
            self.queue.add(key)

    def _node_changed(self, node: Node) -> None:
        """A node appearing or going changes which pods can be placed: look at every Service again."""
        for svc in self.services.store.list():
            self.queue.add(meta_namespace_key(svc))

    def _node_updated(self, old: Node, cur: Node) -> None:
        zone = LABEL_TOPOLOGY_ZONE
        if (old.metadata.labels or {}).get(zone) != (cur.metadata.labels or {}).get(zone):
            self._node_changed(cur)

    def _owner_key(self, slice_: EndpointSlice) -> str | None:
        keys = slice_service_index(CONTROLLER_NAME)(slice_)
        return keys[0] if keys else None

    def _slice_added(self, slice_: EndpointSlice) -> None:
        key = self._owner_key(slice_)
        if key is not None and not self.slice_tracker.observed(key, slice_):
            self.queue.add(key)  # not our own write showing up: someone else's, or a resync

    def _slice_updated(self, old: EndpointSlice, cur: EndpointSlice) -> None:
        old_key = self._owner_key(old)
        if old_key is not None and old_key != self._owner_key(cur):
            self.queue.add(old_key)  # relabelled away from its Service
        self._slice_added(cur)

    def _slice_deleted(self, slice_: EndpointSlice) -> None:
        key = self._owner_key(slice_)
        if key is not None and not self.slice_tracker.observed(key, slice_, gone=True):
            self.queue.add(key)

    # -- reconcile -------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        service = self.services.store.get(key)
        if service is None:
            # the garbage collector removes its slices (they are owned by the Service)
            self.trigger_times.delete(key)
            self.slice_tracker.forget(key)
            self._endpoints.pop(key, None)
            return None
        spec = service.spec
        if spec is None or spec.type == "ExternalName" or spec.selector is None:
            return None  # services without a selector receive no endpoints from this controller
        if self.slice_tracker.stale(key):
            return 0.1  # our last writes are not in the cache yet: do not act on old state
        selector = selector_from_set(spec.selector)
        pods = [p for p in self.pods.store.by_index(NAMESPACE_INDEX, service.metadata.namespace or "")
                if selector.matches(p.metadata.labels or {})]
        desired, node_missing = self._desired(key, service, pods)
        # slices already being deleted are left to go (upstream dropEndpointSlicesPendingDeletion)
        existing = [s for s in self.slices.store.by_index(SERVICE_NAME_INDEX + "/" + CONTROLLER_NAME, key)
                    if s.metadata.deletion_timestamp is None]
        labels = service_labels(service, CONTROLLER_NAME)
        plan = plan_slices(desired, existing, owner_uid=service.metadata.uid, labels=labels,
                           new_slice=lambda ports: self._new_slice(service, labels, ports),
                           max_per_slice=self.max_endpoints_per_slice,
                           trigger_time=self.trigger_times.compute(key, service, pods))
        try:
            await apply_slice_plan(self.client, self.slices, self.slice_tracker, key,
                                   plan.to_create, plan.to_update, plan.to_delete)
        except Exception as e:
            if not (isinstance(e, ApiError) and (e.is_conflict or e.is_not_found)):
                self.recorder.event(service, "Warning", "FailedToUpdateEndpointSlices",
                                    f"Error updating Endpoint Slices for Service {key}: {e}")
            raise
        return NODE_MISSING_RETRY if node_missing else None

    def _desired(self, key: str, service: Service, pods: list[Pod]) -> tuple[dict[PortKey, DesiredPortSet], bool]:
        """The endpoints per port set; and whether a pod was left out because its node is not known yet
        (upstream leaves it out and looks again)."""
        desired: dict[PortKey, DesiredPortSet] = {}
        node_missing = False
        previous = self._endpoints.get(key, {})
        current: dict[str, _CachedEndpoint] = {}
        for pod in pods:
            if not should_pod_be_in_endpoints(pod, include_terminating=True):
                continue
            node_name = pod.spec.node_name if pod.spec else None
            node = self.nodes.store.get_by_name(node_name) if node_name else None
            if node is None:
                node_missing = True
                continue
            # a pod's endpoint changes only with the pod, the Service or its node's zone: a sync of a
            # Service of a thousand pods after one changed rebuilds one endpoint, not a thousand
            inputs = (pod.metadata.resource_version or "", service.metadata.resource_version or "",
                      (node.metadata.labels or {}).get(LABEL_TOPOLOGY_ZONE))
            cached = previous.get(pod.metadata.uid or "")
            if cached is None or cached.inputs != inputs:
                ports = endpoint_ports(service, pod)
                cached = _CachedEndpoint(inputs, pod_to_endpoint(pod, node, service, ADDRESS_TYPE_IPV4),
                                         ports, port_key(ports))
            current[pod.metadata.uid or ""] = cached
            if cached.endpoint.addresses:
                desired.setdefault(cached.key, DesiredPortSet(cached.ports)).add(cached.endpoint)
        self._endpoints[key] = current
        return desired, node_missing

    def _new_slice(self, service: Service, labels: dict[str, str], ports: list[EndpointPort]) -> EndpointSlice:
        return EndpointSlice(
            metadata=ObjectMeta(generate_name=f"{service.metadata.name}-", namespace=service.metadata.namespace,
                                labels=dict(labels),
                                owner_references=[new_controller_ref(service, "v1", "Service")]),
            address_type=ADDRESS_TYPE_IPV4, endpoints=[], ports=ports)


async def apply_slice_plan(client: ApiClient, slices: Informer[EndpointSlice], tracker: EndpointSliceTracker, key: str,
                           create: list[EndpointSlice], update: list[EndpointSlice],
                           delete: list[EndpointSlice]) -> None:
    """Write a plan: creates, then updates, then deletes (no endpoint missing in between), each write
    remembered until the informer shows it."""
    def seen(written: EndpointSlice) -> None:
        tracker.written(key, written)
        cached = slices.store.get(meta_namespace_key(written))
        if cached is not None and cached.metadata.resource_version == written.metadata.resource_version:
            tracker.observed(key, cached)  # the watch event beat the response

    for fresh in create:
        seen(await client.create(fresh))
    for changed in update:
        seen(await client.update(changed))

    async def remove(doomed: EndpointSlice) -> None:
        try:
            await client.delete(EndpointSlice, doomed.metadata.name or "", doomed.metadata.namespace)
        except ApiError as e:
            if not e.is_not_found:
                raise
        if slices.store.get(meta_namespace_key(doomed)) is not None:
            tracker.deleted(key, doomed)

    await asyncio.gather(*(remove(s) for s in delete))
