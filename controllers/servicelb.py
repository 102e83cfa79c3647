"""The service load-balancer controller, as k3s's ServiceLB (k3s pkg/cloudprovider/servicelb.go) on
the shape of upstream's service controller (staging/src/k8s.io/cloud-provider/controllers/service).

A `type: LoadBalancer` Service without a spec.loadBalancerClass gets, in status.loadBalancer.ingress,
the InternalIP of every Ready node that serves it (ipMode VIP): every Ready, schedulable node for
externalTrafficPolicy Cluster; only those holding a ready endpoint of the Service for Local (as k3s,
whose svclb pods forward only to local endpoints then). kube-proxy makes the Service's port answer
on those addresses, so `kubectl get svc` shows them as EXTERNAL-IP instead of `<pending>`. When the
Service stops being a LoadBalancer (or gets a class of some other implementation) the ingress goes.

Events as upstream's: EnsuringLoadBalancer / EnsuredLoadBalancer, DeletingLoadBalancer /
DeletedLoadBalancer. Written through services/status as system:serviceaccount:kube-system:service-controller.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Sequence

from controllers.controller_utils import ensure_indexers
from controllers.endpointslice.controller import SERVICE_NAME_INDEX
from controllers.endpointslice.utils import LABEL_SERVICE_NAME
from machinery.api.core_v1 import LoadBalancerIngress, Node, Service
from machinery.api.discovery_v1 import EndpointSlice
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import Informer, SharedInformerFactory, meta_namespace_key

log = logging.getLogger(__name__)

EVENT_COMPONENT = "service-controller"
LB_TYPE = "LoadBalancer"
SLICES_BY_SERVICE = SERVICE_NAME_INDEX + "/any"
# k3s: nodes labelled svccontroller.k3s.cattle.io/enablelb=true, when any is, are the only ones used
ENABLE_LB_LABEL = "svccontroller.k3s.cattle.io/enablelb"


def wants_load_balancer(service: Service) -> bool:
    spec = service.spec
    return spec is not None and spec.type == LB_TYPE and not spec.load_balancer_class


def node_is_ready(node: Node) -> bool:
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def internal_ip(node: Node) -> str | None:
    for address in (node.status.addresses if node.status else None) or []:
        if address.type == "InternalIP":
            return address.address
    return None


def serving_nodes(service: Service, nodes: Sequence[Node], slices: Iterable[EndpointSlice]) -> list[Node]:
    """The Ready nodes whose address the Service's load balancer gets."""
    candidates = [n for n in nodes if node_is_ready(n) and not (n.spec and n.spec.unschedulable)]
    enabled = [n for n in candidates if (n.metadata.labels or {}).get(ENABLE_LB_LABEL) == "true"]
    if enabled:
        candidates = enabled
    if service.spec is not None and service.spec.external_traffic_policy == "Local":
        local = {ep.node_name for s in slices for ep in s.endpoints or []
                 if ep.node_name and (ep.conditions is None or ep.conditions.ready is not False)}
        candidates = [n for n in candidates if n.metadata.name in local]
    return candidates


def load_balancer_ingress(service: Service, nodes: Sequence[Node], slices: Iterable[EndpointSlice],
                          ) -> list[LoadBalancerIngress]:
    ips = {ip for n in serving_nodes(service, nodes, slices) if (ip := internal_ip(n)) is not None}
    return [LoadBalancerIngress(ip=ip, ip_mode="VIP") for ip in sorted(ips, key=ipaddress.ip_address)]


def current_ingress(service: Service) -> list[LoadBalancerIngress]:
    status = service.status
    return list((status.load_balancer.ingress if status and status.load_balancer else None) or [])


class ServiceLoadBalancerController(Controller):
    name = "servicelb"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 1) -> None:
        super().__init__(workers)
        self.client = client
        self.recorder = EventRecorder(client, EVENT_COMPONENT, workers=1)
        self.services: Informer[Service] = informers.informer_for(Service)
        self.nodes: Informer[Node] = informers.informer_for(Node)
        self.slices: Informer[EndpointSlice] = informers.informer_for(EndpointSlice)
        ensure_indexers(self.slices, {SLICES_BY_SERVICE: _slices_by_service})
        self.watch(self.services)
        self.nodes.add_event_handler(self._nodes_changed, self._node_updated, self._nodes_changed)
        self.slices.add_event_handler(self._slice_changed, lambda old, cur: self._slice_changed(cur),
                                      self._slice_changed)
        self.informers.extend([self.nodes, self.slices])

    def _load_balancers(self) -> list[Service]:
        return [s for s in self.services.store.list() if wants_load_balancer(s) or current_ingress(s)]

    def _nodes_changed(self, node: Node) -> None:
        for service in self._load_balancers():
            self.queue.add(meta_namespace_key(service))

    def _node_updated(self, old: Node, cur: Node) -> None:
        # heartbeats change the node every few seconds: only readiness, address and schedulability matter
        if (node_is_ready(old), internal_ip(old), bool(old.spec and old.spec.unschedulable), old.metadata.labels) != (
                node_is_ready(cur), internal_ip(cur), bool(cur.spec and cur.spec.unschedulable), cur.metadata.labels):
            self._nodes_changed(cur)

    def _slice_changed(self, slice_: EndpointSlice) -> None:
        for key in _slices_by_service(slice_):
            service = self.services.store.get(key)
            if service is not None and service.spec is not None and service.spec.external_traffic_policy == "Local":
                self.queue.add(key)

    async def reconcile(self, key: str) -> float | None:
        service = self.services.store.get(key)
        if service is None:
            return None
        current = current_ingress(service)
        if wants_load_balancer(service):
            wanted = load_balancer_ingress(service, self.nodes.store.list(),
                                           self.slices.store.by_index(SLICES_BY_SERVICE, key))
            if wanted == current:
                return None
            self.recorder.event(service, "Normal", "EnsuringLoadBalancer", "Ensuring load balancer")
            try:
                await self._write(service, wanted)
            except ApiError as e:
                if not (e.is_conflict or e.is_not_found):
                    self.recorder.event(service, "Warning", "SyncLoadBalancerFailed",
                                        f"Error syncing load balancer: failed to ensure load balancer: {e.message}")
                raise
            self.recorder.event(service, "Normal", "EnsuredLoadBalancer", "Ensured load balancer")
        elif current:
            self.recorder.event(service, "Normal", "DeletingLoadBalancer", "Deleting load balancer")
            await self._write(service, [])
            self.recorder.event(service, "Normal", "DeletedLoadBalancer", "Deleted load balancer")
        return None

    async def _write(self, service: Service, ingress: list[LoadBalancerIngress]) -> None:
        """PATCH services/status; the resourceVersion makes it a compare-and-swap against a stale cache."""
        body = {"metadata": {"resourceVersion": service.metadata.resource_version},
                "status": {"loadBalancer": {"ingress": [i.to_dict() for i in ingress] or None}}}
        await self.client.patch(Service, service.metadata.name or "", body, "merge", service.metadata.namespace,
                                subresource="status", field_manager=EVENT_COMPONENT)


def _slices_by_service(obj: EndpointSlice) -> list[str]:
    """Every slice of a Service, whoever manages it (the controller's or the mirroring controller's)."""
    name = (obj.metadata.labels or {}).get(LABEL_SERVICE_NAME)
    return [f"{obj.metadata.namespace}/{name}"] if name else []

