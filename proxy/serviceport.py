"""What the proxier needs of a Service port and its endpoints, read from the API objects.

Follows upstream's pkg/proxy/serviceport.go (BaseServicePortInfo), pkg/proxy/endpoint.go
(BaseEndpointInfo), pkg/proxy/endpointslicecache.go (endpoints of a Service port gathered from all
its slices, deduplicated) and pkg/proxy/topology.go (CategorizeEndpoints: ready endpoints, or
serving-and-terminating ones when none is ready; Local traffic policies).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from machinery.api.core_v1 import Service
from machinery.api.discovery_v1 import EndpointSlice

SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # discovery.LabelServiceName
DEFAULT_CLIENT_IP_TIMEOUT = 10800  # v1.DefaultClientIPServiceAffinitySeconds


@dataclass(frozen=True)
class ServicePortName:
    """ns/name:port of one Service port (upstream's proxy.ServicePortName) with its protocol."""

    namespace: str
    name: str
    port: str  # the port's name; "" for a single unnamed port
    protocol: str  # TCP | UDP | SCTP

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" + (f":{self.port}" if self.port else "")


@dataclass(frozen=True)
class ServicePortInfo:
    name: ServicePortName
    cluster_ip: str
    port: int
    node_port: int = 0
    load_balancer_ips: tuple[str, ...] = ()  # status.loadBalancer.ingress[].ip
    external_ips: tuple[str, ...] = ()
    affinity_timeout: int = 0  # seconds of ClientIP affinity; 0 without
    internal_local: bool = False  # internalTrafficPolicy: Local
    external_local: bool = False  # externalTrafficPolicy: Local (only for NodePort/LoadBalancer)

    @property
    def externally_accessible(self) -> bool:
        return bool(self.node_port or self.load_balancer_ips or self.external_ips)


@dataclass(frozen=True)
class EndpointInfo:
    ip: str
    port: int
    ready: bool = True
    serving: bool = True
    terminating: bool = False
    node_name: str = ""

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}"


def service_ports(service: Service) -> list[ServicePortInfo]:
    """The proxied ports of a Service: none for ExternalName, headless or IP-less ones."""
    spec = service.spec
    meta = service.metadata
    if spec is None or not spec.ports or meta.name is None:
        return []
    if spec.type == "ExternalName" or not spec.cluster_ip or spec.cluster_ip == "None":
        return []
    if ":" in spec.cluster_ip:  # IPv6: this proxier programs IPv4 (iptables) only
        return []
    namespace = meta.namespace or "default"
    affinity = 0
    if spec.session_affinity == "ClientIP":
        config = spec.session_affinity_config
        timeout = config.client_ip.timeout_seconds if config and config.client_ip else None
        affinity = timeout or DEFAULT_CLIENT_IP_TIMEOUT
    external = spec.type in ("NodePort", "LoadBalancer")
    lb_ips: tuple[str, ...] = ()
    if spec.type == "LoadBalancer" and service.status and service.status.load_balancer:
        lb_ips = tuple(i.ip for i in service.status.load_balancer.ingress or () if i.ip and ":" not in i.ip)
    external_ips = tuple(ip for ip in spec.external_ips or () if ":" not in ip)
    result = []
    for port in spec.ports:
        result.append(ServicePortInfo(
            name=ServicePortName(namespace, meta.name, port.name or "", port.protocol or "TCP"),
            cluster_ip=spec.cluster_ip,
            port=port.port,
            node_port=(port.node_port or 0) if external else 0,
            load_balancer_ips=lb_ips,
            external_ips=external_ips,
            affinity_timeout=affinity,
            internal_local=spec.internal_traffic_policy == "Local",
            external_local=(external or bool(external_ips)) and spec.external_traffic_policy == "Local",
        ))
    return result


def endpoints_of_slice(s: EndpointSlice) -> list[tuple[ServicePortName, EndpointInfo]]:
    """The (Service port, endpoint) pairs one slice names; none for a slice of no Service or not IPv4."""
    labels = s.metadata.labels or {}
    service = labels.get(SERVICE_NAME_LABEL)
    if not service or s.address_type != "IPv4" or not s.ports:
        return []
    namespace = s.metadata.namespace or "default"
    out = []
    for port in s.ports:
        if port.port is None:
            continue
        name = ServicePortName(namespace, service, port.name or "", port.protocol or "TCP")
        for endpoint in s.endpoints or ():
            if not endpoint.addresses:
                continue
            c = endpoint.conditions
            # upstream: a nil ready is ready; a nil serving is the ready value; a nil terminating is false
            ready = c is None or c.ready is None or c.ready
            serving = ready if c is None or c.serving is None else c.serving
            terminating = bool(c and c.terminating)
            out.append((name, EndpointInfo(endpoint.addresses[0], port.port, ready, serving, terminating,
                                           endpoint.node_name or "")))
    return out


def merge_endpoints(pairs: Iterable[Iterable[tuple[ServicePortName, EndpointInfo]]]
                    ) -> dict[ServicePortName, list[EndpointInfo]]:
    """Endpoints of every Service port over all its slices, deduplicated by ip:port (an endpoint
    moving between slices keeps the ready one), sorted (upstream's endpointslicecache)."""
    found: dict[ServicePortName, dict[str, EndpointInfo]] = {}
    for of_slice in pairs:
        for name, info in of_slice:
            into = found.setdefault(name, {})
            key = str(info)
            if key not in into or info.ready:
                into[key] = info
    return {name: sorted(eps.values(), key=lambda e: (e.ip, e.port)) for name, eps in found.items()}


def slice_endpoints(slices: Iterable[EndpointSlice]) -> dict[ServicePortName, list[EndpointInfo]]:
    """Endpoints of every Service port named by these slices."""
    return merge_endpoints(endpoints_of_slice(s) for s in slices)


def usable(endpoints: list[EndpointInfo]) -> list[EndpointInfo]:
    """Ready endpoints; if none is ready, the serving ones that are terminating (upstream's fallback)."""
    ready = [e for e in endpoints if e.ready]
    return ready or [e for e in endpoints if e.serving and e.terminating]


def categorize(service: ServicePortInfo, endpoints: list[EndpointInfo],
               local_nodes: Collection[str]) -> tuple[list[EndpointInfo], list[EndpointInfo], bool]:
    """(endpoints for cluster traffic, endpoints for external traffic, any usable endpoint at all).

    A policy of Local keeps the endpoints on this host's nodes (`local_nodes`), each with the same
    ready-then-terminating fallback among the local ones, as upstream's CategorizeEndpoints.
    """
    all_usable = usable(endpoints)
    local = usable([e for e in endpoints if e.node_name in local_nodes])
    cluster = local if service.internal_local else all_usable
    external = local if service.external_local else all_usable
    return cluster, external, bool(all_usable)
