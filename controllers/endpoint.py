"""The Endpoints controller (upstream pkg/controller/endpoint/endpoints_controller.go), for clients
that still read v1 Endpoints.

Per Service with a selector, an Endpoints object of the same name whose subsets list the selected
pods' IPs: ready pods under `addresses`, the others under `notReadyAddresses` (all under addresses
with publishNotReadyAddresses); terminating pods are left out (unless publishNotReadyAddresses);
ports resolved per pod (named targetPorts), subsets repacked so pods serving the same port set share
one (RepackSubsets). At most 1000 addresses: past that the list is cut, ready ones kept first, and
the Endpoints carry `endpoints.kubernetes.io/over-capacity: truncated`.

Selector-less Services are left alone: their Endpoints are the user's.
"""

from __future__ import annotations

import ipaddress
import logging
import math
from collections.abc import Sequence

from controllers.controller_utils import ensure_indexers, is_pod_ready
from controllers.endpointslice.utils import (
    CLUSTER_IP_NONE,
    LABEL_HEADLESS,
    LAST_CHANGE_TRIGGER_TIME,
    PortNotFound,
    TriggerTimeTracker,
    find_port,
    pod_ips,
    pod_reference,
    services_selecting,
    should_pod_be_in_endpoints,
    should_set_hostname,
)
from machinery.api.core_v1 import EndpointAddress, EndpointPort, Endpoints, EndpointSubset, Pod, Service
from machinery.api.meta import ObjectMeta
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import (
    Informer,
    SharedInformerFactory,
    meta_namespace_key,
    namespace_index,
    split_meta_namespace_key,
)
from machinery.selectors import selector_from_set

log = logging.getLogger(__name__)

EVENT_COMPONENT = "endpoint-controller"
NAMESPACE_INDEX = "namespace"
MAX_CAPACITY = 1000
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
TRUNCATED = "truncated"


# -- subsets (pure) -------------------------------------------------------------------------------


def pod_address(pod: Pod, service: Service) -> EndpointAddress | None:
    """podToEndpointAddressForService: the pod's IPv4 address, its node, a reference to it."""
    ip = next((ip for ip in pod_ips(pod) if ":" not in ip), None)  # validated pod IPs: no ':' is IPv4
    if ip is None:
        return None
    return EndpointAddress(ip=ip, node_name=pod.spec.node_name if pod.spec else None, target_ref=pod_reference(pod),
                           hostname=pod.spec.hostname if pod.spec and should_set_hostname(pod, service) else None)


Entry = tuple[EndpointAddress, bool, EndpointPort | None]  # an address, whether ready, one port it serves


def pod_entries(service: Service, pod: Pod) -> list[Entry]:
    """What one pod adds to the Service's subsets (syncService's loop body): its address once per port
    it serves (named targetPorts resolved in its containers); none for a finished, IP-less or, unless
    publishNotReadyAddresses, terminating pod."""
    spec = service.spec
    assert spec is not None
    publish = bool(spec.publish_not_ready_addresses)
    if not should_pod_be_in_endpoints(pod, include_terminating=publish):
        return []
    address = pod_address(pod, service)
    if address is None:
        return []
    ready = publish or is_pod_ready(pod)
    if not spec.ports:
        # headless without ports: addresses only
        return [(address, ready, None)] if spec.cluster_ip == CLUSTER_IP_NONE else []
    out: list[Entry] = []
    for port in spec.ports:
        try:
            number = find_port(pod, port)
        except PortNotFound:
            continue
        out.append((address, ready, EndpointPort(name=port.name or None, port=number, protocol=port.protocol or "TCP",
                                                 app_protocol=port.app_protocol)))
    return out


def desired_subsets(service: Service, pods: Sequence[Pod]) -> list[EndpointSubset]:
    """The subsets syncService computes, repacked."""
    return repack_subsets([entry for pod in pods for entry in pod_entries(service, pod)])


def _port_id(port: EndpointPort | None) -> tuple[str, int, str, str]:
    if port is None:
        return ("", 0, "", "")
    return (port.name or "", port.port, port.protocol or "", port.app_protocol or "")


def _address_id(address: EndpointAddress) -> tuple[str, str]:
    ref = address.target_ref
    return (address.ip, (ref.uid or ref.name or "") if ref else "")


def repack_subsets(entries: Sequence[Entry]) -> list[EndpointSubset]:
    """endpoints.RepackSubsets: ports served by exactly the same addresses share one subset; addresses
    sorted by IP, subsets by their first port. A pod ready for one port is ready for all (upstream: an
    address listed ready anywhere is ready)."""
    by_port: dict[tuple[str, int, str, str], tuple[EndpointPort | None, dict[tuple[str, str], EndpointAddress]]] = {}
    ready_ids: set[tuple[str, str]] = set()
    for address, ready, port in entries:
        pid = _port_id(port)
        by_port.setdefault(pid, (port, {}))[1].setdefault(_address_id(address), address)
        if ready:
            ready_ids.add(_address_id(address))
    groups: dict[frozenset[tuple[str, str]], tuple[list[EndpointPort], dict[tuple[str, str], EndpointAddress]]] = {}
    for pid in sorted(by_port):
        port, addresses = by_port[pid]
        group = groups.setdefault(frozenset(addresses), ([], addresses))
        if port is not None:
            group[0].append(port)
    out: list[EndpointSubset] = []
    for ports, addresses in groups.values():
        ordered = sorted(addresses.items(), key=lambda item: (_ip_order(item[0][0]), item[0][1]))
        ready_addresses = [a for aid, a in ordered if aid in ready_ids]
        not_ready = [a for aid, a in ordered if aid not in ready_ids]
        out.append(EndpointSubset(addresses=ready_addresses or None, not_ready_addresses=not_ready or None,
                                  ports=ports or None))
    return out


def _ip_order(ip: str) -> tuple[int, ...]:
    """Addresses in numeric order, cheaply: a thousand ipaddress parses cost more than the rest of a sync."""
    if ":" not in ip:
        try:
            return tuple(int(octet) for octet in ip.split("."))
        except ValueError:
            pass
    return (256, int(ipaddress.ip_address(ip)))


def truncate_endpoints(subsets: list[EndpointSubset]) -> bool:
    """truncateEndpoints: keep at most MAX_CAPACITY addresses, ready ones first, each subset keeping its
    share; True when something was cut."""
    total_ready = sum(len(s.addresses or []) for s in subsets)
    total_not_ready = sum(len(s.not_ready_addresses or []) for s in subsets)
    if total_ready + total_not_ready <= MAX_CAPACITY:
        return False
    truncate_ready = total_ready > MAX_CAPACITY
    limit, total = (MAX_CAPACITY, total_ready) if truncate_ready else (MAX_CAPACITY - total_ready, total_not_ready)
    room = limit
    for subset in subsets:
        count = len(subset.addresses or []) if truncate_ready else len(subset.not_ready_addresses or [])
        share = min(math.ceil(count / total * limit), room)
        if truncate_ready:
            subset.addresses = (subset.addresses or [])[:share] or None
            subset.not_ready_addresses = None
            room -= len(subset.addresses or [])
        else:
            subset.not_ready_addresses = (subset.not_ready_addresses or [])[:share] or None
            room -= len(subset.not_ready_addresses or [])
    return True


def endpoints_labels(service: Service) -> dict[str, str] | None:
    labels = {k: v for k, v in (service.metadata.labels or {}).items() if k != LABEL_HEADLESS}
    if service.spec is not None and service.spec.cluster_ip == CLUSTER_IP_NONE:
        labels[LABEL_HEADLESS] = ""
    return labels or None


# -- the controller -------------------------------------------------------------------------------


class EndpointsController(Controller):
    name = "endpoint"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5) -> None:
        super().__init__(workers)
        self.client = client
        self.recorder = EventRecorder(client, EVENT_COMPONENT, workers=1)
        self.trigger_times = TriggerTimeTracker()
        self.services: Informer[Service] = informers.informer_for(Service)
        self.pods: Informer[Pod] = informers.informer_for(Pod)
        self.endpoints: Informer[Endpoints] = informers.informer_for(Endpoints)
        ensure_indexers(self.services, {NAMESPACE_INDEX: namespace_index})
        ensure_indexers(self.pods, {NAMESPACE_INDEX: namespace_index})
        self.watch(self.services)
        # our last write per Service until the informer shows it: a sync on the older cached copy would
        # only earn a 409 Conflict (upstream keeps a staleEndpointsTracker for the same reason)
        self.written: dict[str, Endpoints] = {}
        self._entries: dict[str, dict[str, tuple[tuple[str, str], list[Entry]]]] = {}  # Service -> pod uid -> entries
        # as upstream, only a deletion is put back; edits wait for the next change of the Service or pods
        self.endpoints.add_event_handler(self._endpoints_seen, lambda old, cur: self._endpoints_seen(cur),
                                         self._endpoints_deleted)
        self.informers.append(self.endpoints)
        self.pods.add_event_handler(self._pod_changed, self._pod_updated, self._pod_changed)
        self.informers.append(self.pods)

    def _services_selecting(self, pod: Pod) -> list[str]:
        in_namespace = self.services.store.by_index(NAMESPACE_INDEX, pod.metadata.namespace or "")
        return [meta_namespace_key(svc) for svc in services_selecting(in_namespace, pod)]

    def _pod_changed(self, pod: Pod) -> None:
        for key in self._services_selecting(pod):
            self.queue.add(key)

    def _pod_updated(self, old: Pod, cur: Pod) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        keys = set(self._services_selecting(cur)) | set(self._services_selecting(old))
        for key in keys:
            self.queue.add(key)

    def _endpoints_seen(self, endpoints: Endpoints) -> None:
        key = meta_namespace_key(endpoints)
        written = self.written.get(key)
        if written is not None and written.metadata.resource_version == endpoints.metadata.resource_version:
            del self.written[key]

    def _endpoints_deleted(self, endpoints: Endpoints) -> None:
        key = meta_namespace_key(endpoints)
        self.written.pop(key, None)
        self.queue.add(key)

    async def reconcile(self, key: str) -> float | None:
        namespace, name = split_meta_namespace_key(key)
        service = self.services.store.get(key)
        if service is None:
            # upstream deletes the Endpoints of a deleted Service itself (they carry no owner reference)
            self.trigger_times.delete(key)
            self.written.pop(key, None)
            self._entries.pop(key, None)
            if self.endpoints.store.get(key) is not None:
                try:
                    await self.client.delete(Endpoints, name, namespace)
                except ApiError as e:
                    if not e.is_not_found:
                        raise
            return None
        spec = service.spec
        if spec is None or spec.selector is None:
            return None  # selector-less: the user writes the Endpoints
        selector = selector_from_set(spec.selector)
        pods = [p for p in self.pods.store.by_index(NAMESPACE_INDEX, namespace or "")
                if selector.matches(p.metadata.labels or {})]
        # a pod's entries change only with the pod or the Service: a sync after one of a thousand pods
        # changed builds one pod's, not a thousand
        before = self._entries.get(key, {})
        now: dict[str, tuple[tuple[str, str], list[Entry]]] = {}
        service_version = service.metadata.resource_version or ""
        for pod in pods:
            inputs = (pod.metadata.resource_version or "", service_version)
            known = before.get(pod.metadata.uid or "")
            now[pod.metadata.uid or ""] = known if known is not None and known[0] == inputs \
                else (inputs, pod_entries(service, pod))
        self._entries[key] = now
        subsets = repack_subsets([entry for _, entries in now.values() for entry in entries])
        truncated = truncate_endpoints(subsets)
        labels = endpoints_labels(service)
        current = self.written.get(key) or self.endpoints.store.get(key)
        annotations = dict(current.metadata.annotations or {}) if current is not None else {}
        if truncated:
            annotations[OVER_CAPACITY] = TRUNCATED
        else:
            annotations.pop(OVER_CAPACITY, None)
        trigger = self.trigger_times.compute(key, service, pods)
        if (current is not None and (current.subsets or []) == subsets
                and (current.metadata.labels or None) == labels
                and (current.metadata.annotations or {}).get(OVER_CAPACITY) == annotations.get(OVER_CAPACITY)):
            return None  # nothing to write
        if trigger:
            annotations[LAST_CHANGE_TRIGGER_TIME] = trigger
        else:
            annotations.pop(LAST_CHANGE_TRIGGER_TIME, None)
        try:
            if current is None:
                written = await self.client.create(Endpoints(
                    metadata=ObjectMeta(name=name, namespace=namespace, labels=labels, annotations=annotations or None),
                    subsets=subsets or None))
            else:
                written = await self.client.update(current.model_copy(update={
                    "subsets": subsets or None,
                    "metadata": current.metadata.model_copy(update={"labels": labels,
                                                                    "annotations": annotations or None})}))
        except ApiError as e:
            self.written.pop(key, None)  # read afresh from the cache on the retry
            if not (e.is_conflict or e.is_already_exists or e.is_not_found):
                self.recorder.event(service, "Warning", "FailedToUpdateEndpoint",
                                    f"Failed to update endpoint {key}: {e.message}")
            raise
        cached = self.endpoints.store.get(key)
        if cached is None or cached.metadata.resource_version != written.metadata.resource_version:
            self.written[key] = written  # the informer has not shown it yet
        return None

