"""The `kube-dns` Service in kube-system, as upstream's DNS add-on manifest
(cluster/addons/dns/coredns/coredns.yaml.base) declares it, kept by the DNS process itself:

- created at start when missing (clusterIP 10.96.0.10, ports dns 53/UDP and dns-tcp 53/TCP, metrics
  9153/TCP, label k8s-app=kube-dns), selector-less because the server is a host process, not a pod;
- its Endpoints and its EndpointSlice point at the address pods reach this process on (the node's
  address and the DNS port), and are put back whenever they drift (kube-proxy DNATs 10.96.0.10:53
  there). The Endpoints carry `endpointslice.kubernetes.io/skip-mirror` so the mirroring controller
  does not add a second slice.

An existing Service is left as it is (an operator may have changed it); only its endpoints are ours.

Creating them takes an admin, as upstream's add-on manager applies add-ons: the DNS's own role
(system:minik8s:kube-dns-service) may only read the Service and update the endpoints by name. local-up
and compose run, as kubernetes-admin, once before the DNS:

    python -m dns.kube_dns_service --kubeconfig admin.conf [--service-ip IP --port P --health-port P
                                   --advertise-address IP]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys

from machinery.api.core_v1 import (
    EndpointAddress,
    EndpointPort,
    Endpoints,
    EndpointSubset,
    Service,
    ServicePort,
    ServiceSpec,
)
from machinery.api.discovery_v1 import Endpoint, EndpointConditions, EndpointSlice
from machinery.api.discovery_v1 import EndpointPort as SlicePort
from machinery.api.meta import ObjectMeta
from machinery.client import ApiClient, ApiError, default_user_agent
from machinery.kubeconfig import load_kubeconfig
from machinery.netutil import default_node_ip

log = logging.getLogger(__name__)

NAMESPACE = "kube-system"
SERVICE_NAME = "kube-dns"
SLICE_NAME = "kube-dns-host"
DEFAULT_SERVICE_IP = "10.96.0.10"
MANAGED_BY = "dns.minik8s.io"  # endpointslice.kubernetes.io/managed-by: not the EndpointSlice controller's
LABELS = {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}
DEFAULT_DNS_PORT = 10053  # kube-dns's own server port
DEFAULT_METRICS_PORT = 9153  # CoreDNS's


def desired_service(service_ip: str, dns_port: int, metrics_port: int) -> Service:
    return Service(
        metadata=ObjectMeta(name=SERVICE_NAME, namespace=NAMESPACE, labels=dict(LABELS),
                            annotations={"prometheus.io/port": str(metrics_port), "prometheus.io/scrape": "true"}),
        spec=ServiceSpec(cluster_ip=service_ip, type="ClusterIP", ports=[
            ServicePort(name="dns", port=53, protocol="UDP", target_port=dns_port),
            ServicePort(name="dns-tcp", port=53, protocol="TCP", target_port=dns_port),
            ServicePort(name="metrics", port=9153, protocol="TCP", target_port=metrics_port),
        ]),
    )


def desired_endpoints(address: str, dns_port: int, metrics_port: int) -> Endpoints:
    return Endpoints(
        metadata=ObjectMeta(name=SERVICE_NAME, namespace=NAMESPACE,
                            labels={**LABELS, "endpointslice.kubernetes.io/skip-mirror": "true"}),
        subsets=[EndpointSubset(addresses=[EndpointAddress(ip=address)], ports=[
            EndpointPort(name="dns", port=dns_port, protocol="UDP"),
            EndpointPort(name="dns-tcp", port=dns_port, protocol="TCP"),
            EndpointPort(name="metrics", port=metrics_port, protocol="TCP"),
        ])],
    )


def desired_slice(address: str, dns_port: int, metrics_port: int) -> EndpointSlice:
    return EndpointSlice(
        metadata=ObjectMeta(name=SLICE_NAME, namespace=NAMESPACE, labels={
            **LABELS, "kubernetes.io/service-name": SERVICE_NAME,
            "endpointslice.kubernetes.io/managed-by": MANAGED_BY}),
        address_type="IPv6" if ":" in address else "IPv4",
        endpoints=[Endpoint(addresses=[address], conditions=EndpointConditions(ready=True, serving=True,
                                                                               terminating=False))],
        ports=[SlicePort(name="dns", port=dns_port, protocol="UDP"),
               SlicePort(name="dns-tcp", port=dns_port, protocol="TCP"),
               SlicePort(name="metrics", port=metrics_port, protocol="TCP")],
    )


class KubeDNSService:
    def __init__(self, client: ApiClient, *, service_ip: str, address: str, dns_port: int, metrics_port: int) -> None:
        self.client = client
        self.service_ip = service_ip
        self.address = address
        self.dns_port = dns_port
        self.metrics_port = metrics_port

    async def ensure(self) -> None:
        """Create what is missing and put drifted endpoints back; raises ApiError on a refusal."""
        await self._ensure_service()
        await self._ensure_endpoints()
        await self._ensure_slice()

    async def _ensure_service(self) -> None:
        try:
            await self.client.get(Service, SERVICE_NAME, NAMESPACE)
            return
        except ApiError as e:
            if not e.is_not_found:
                raise
        try:
            await self.client.create(desired_service(self.service_ip, self.dns_port, self.metrics_port))
            log.info("created Service %s/%s (clusterIP %s)", NAMESPACE, SERVICE_NAME, self.service_ip)
        except ApiError as e:
            if not e.is_already_exists:
                raise

    async def _ensure_endpoints(self) -> None:
        wanted = desired_endpoints(self.address, self.dns_port, self.metrics_port)
        try:
            current = await self.client.get(Endpoints, SERVICE_NAME, NAMESPACE)
        except ApiError as e:
            if not e.is_not_found:
                raise
            await self.client.create(wanted)
            log.info("created Endpoints %s/%s -> %s:%d", NAMESPACE, SERVICE_NAME, self.address, self.dns_port)
            return
        if current.subsets == wanted.subsets and (current.metadata.labels or {}) == wanted.metadata.labels:
            return
        current.subsets = wanted.subsets
        current.metadata.labels = wanted.metadata.labels
        await self.client.update(current)
        log.info("updated Endpoints %s/%s -> %s:%d", NAMESPACE, SERVICE_NAME, self.address, self.dns_port)

    async def _ensure_slice(self) -> None:
        wanted = desired_slice(self.address, self.dns_port, self.metrics_port)
        try:
            current = await self.client.get(EndpointSlice, SLICE_NAME, NAMESPACE)
        except ApiError as e:
            if not e.is_not_found:
                raise
            await self.client.create(wanted)
            log.info("created EndpointSlice %s/%s -> %s:%d", NAMESPACE, SLICE_NAME, self.address, self.dns_port)
            return
        if (current.endpoints, current.ports, current.address_type, current.metadata.labels) == (
                wanted.endpoints, wanted.ports, wanted.address_type, wanted.metadata.labels):
            return
        current.endpoints, current.ports = wanted.endpoints, wanted.ports
        current.address_type, current.metadata.labels = wanted.address_type, wanted.metadata.labels
        await self.client.update(current)
        log.info("updated EndpointSlice %s/%s -> %s:%d", NAMESPACE, SLICE_NAME, self.address, self.dns_port)


async def _apply_once(args: argparse.Namespace) -> None:
    config = load_kubeconfig(args.kubeconfig, user_agent=default_user_agent("kube-dns-addon"))
    if args.master:
        config = dataclasses.replace(config, server=args.master)
    async with ApiClient(config) as client:
        await KubeDNSService(client, service_ip=args.service_ip, address=args.advertise_address or default_node_ip(),
                             dns_port=args.port, metrics_port=args.health_port).ensure()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dns.kube_dns_service",
                                description="create the kube-dns Service and its endpoints once (as an admin)")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--master", default=None)
    p.add_argument("--service-ip", default=DEFAULT_SERVICE_IP)
    p.add_argument("--port", type=int, default=DEFAULT_DNS_PORT, help="the DNS process's --port")
    p.add_argument("--health-port", type=int, default=DEFAULT_METRICS_PORT, help="the DNS process's --health-port")
    p.add_argument("--advertise-address", default=None, help="default: this host's address")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_apply_once(args))
    except ApiError as e:
        log.error("kube-dns: %s", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
