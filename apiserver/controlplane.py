"""The `kubernetes` Service and its endpoints, kept by every apiserver (upstream:
pkg/controlplane/controller/kubernetesservice/controller.go and pkg/controlplane/reconcilers/lease.go).

Each apiserver holds a lease in etcd (/registry/masterleases/<ip>:<port>, a 15 s etcd TTL renewed every
10 s) and writes the `default/kubernetes` Endpoints and EndpointSlice to list exactly the addresses that
hold one: a stopped apiserver gives its lease back at once, a killed one drops out when its lease runs out.
Upstream keys the lease by IP alone and assumes one port for all apiservers; here several apiservers may
share a host (tests, local-up) on different ports, so the key names the port too, and every apiserver
derives the same Endpoints from the same leases (the port they name already while an apiserver still
serves on it, else the first lease's), so they never take turns rewriting it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from urllib.parse import urlsplit

import orjson

from apiserver import errors
from apiserver.registry.generic import Store, WriteOptions
from apiserver.registry.servicestorage import ServiceStore
from apiserver.storage.etcd import EtcdStorage, StorageError
from machinery.types import Obj

log = logging.getLogger(__name__)

SERVICE_NAME = "kubernetes"
NAMESPACE = "default"
PORT_NAME = "https"
SERVICE_PORT = 443
MASTER_LEASES = "/registry/masterleases/"
LEASE_TTL = 15  # upstream --master-endpoint-reconcile-ttl (15 s)
RECONCILE_INTERVAL = 10.0  # upstream EndpointInterval
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"


def endpoint_ip(advertise_address: str) -> str | None:
    """The IP the `kubernetes` endpoints name: the advertised one, or (when that is loopback or unspecified,
    which no pod can reach) the address of the host's default route, as upstream's ChooseHostInterface."""
    host = urlsplit(f"//{advertise_address}").hostname or ""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.gethostbyname(host))
        except (OSError, ValueError):
            return None
    if not (ip.is_loopback or ip.is_unspecified):
        return str(ip)
    # connect() on a UDP socket only chooses the route: nothing is sent
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))
        chosen = ipaddress.ip_address(probe.getsockname()[0])
        if not (chosen.is_loopback or chosen.is_unspecified):
            return str(chosen)
    return None


def advertised_port(advertise_address: str, default: int = 443) -> int:
    return urlsplit(f"//{advertise_address}").port or default


def kubernetes_service(cluster_ip: str, target_port: int) -> Obj:
    """upstream createKubernetesService / CreateOrUpdateMasterServiceIfNeeded."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "sessionAffinity": "None",
                     "ports": [{"name": PORT_NAME, "port": SERVICE_PORT, "protocol": "TCP",
                                "targetPort": target_port}]}}


def kubernetes_endpoints(ips: list[str], port: int) -> Obj:
    subsets = [{"addresses": [{"ip": ip} for ip in ips],
                "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}] if ips else []
    return {"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE, "labels": {SKIP_MIRROR_LABEL: "true"}},
            "subsets": subsets}


def kubernetes_endpoint_slice(ips: list[str], port: int) -> Obj:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE, "labels": {SERVICE_NAME_LABEL: SERVICE_NAME}},
            "addressType": "IPv6" if ips and ":" in ips[0] else "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
            "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}


class KubernetesService:
    """Creates the `kubernetes` Service and keeps its endpoints on the apiservers that hold a lease."""

    def __init__(self, storage: EtcdStorage, services: ServiceStore, endpoints: Store, slices: Store,
                 advertise_address: str, port: int) -> None:
        self.storage, self.services, self.endpoints, self.slices = storage, services, endpoints, slices
        self.ip = endpoint_ip(advertise_address)
        self.port = port
        if self.ip is None:
            log.warning("no address for the kubernetes endpoints (advertised %s is loopback and the host has "
                        "no default route): give --advertise-address", advertise_address)

    async def run(self) -> None:
        while True:
            done = False
            try:
                done = await self.reconcile()
            except (StorageError, errors.ApiError) as e:
                log.warning("kubernetes service: %s; again soon", e)
            # at start the default namespace may not be there yet: try again shortly, not in 10 s
            await asyncio.sleep(RECONCILE_INTERVAL if done else 0.5)

    async def reconcile(self) -> bool:
        """One round; False when the Service could not be made yet (no default namespace)."""
        made = await self.ensure_service()
        if self.ip is not None:
            await self.storage.put_with_ttl(self.lease_key, orjson.dumps({"ip": self.ip, "port": self.port}),
                                            LEASE_TTL)
        await self.reconcile_endpoints()
        return made

    async def ensure_service(self) -> bool:
        try:
            await self.services.get(NAMESPACE, SERVICE_NAME)
            return True
        except errors.ApiError as e:
            if e.code != 404:
                raise
        wanted = kubernetes_service(self.services.ips.nth(1), self.port)
        try:
            await self.services.create(NAMESPACE, wanted, WriteOptions())
        except errors.ApiError as e:
            if e.code == 404:  # the default namespace is not there yet
                return False
            if e.code != 409:  # another apiserver was first
                raise
        return True

    @property
    def lease_key(self) -> str:
        return f"{MASTER_LEASES}{self.ip}:{self.port}"

    async def live(self) -> tuple[list[str], set[int], int]:
        """The IPs that hold a lease, the ports they serve on, and the port of the first lease in order."""
        kvs, _, _ = await self.storage.list(MASTER_LEASES)
        leases: list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]] = []
        for kv in kvs:
            try:
                held = orjson.loads(kv.value)
                leases.append((ipaddress.ip_address(held["ip"]), int(held["port"])))
            except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
                log.warning("ignoring the malformed apiserver lease %s", kv.key)
        leases.sort(key=lambda lease: (lease[0].version, lease[0], lease[1]))
        ips = list(dict.fromkeys(str(ip) for ip, _ in leases))
        return ips, {port for _, port in leases}, (leases[0][1] if leases else self.port)

    async def reconcile_endpoints(self) -> None:
        """Endpoints and EndpointSlice list the live apiservers (upstream ReconcileEndpoints). The port they
        name stays as long as a live apiserver serves on it: one joining or leaving on another port
        changes nothing."""
        ips, ports, first = await self.live()
        try:
            current = await self.endpoints.get(NAMESPACE, SERVICE_NAME)
            named = [p.get("port") for s in current.get("subsets") or [] for p in s.get("ports") or []]
        except errors.ApiError:
            named = []
        port = named[0] if named and named[0] in ports else first
        for store, wanted in ((self.endpoints, kubernetes_endpoints(ips, port)),
                              (self.slices, kubernetes_endpoint_slice(ips, port))):
            try:
                await store.update(NAMESPACE, SERVICE_NAME, wanted, WriteOptions())
            except errors.ApiError as e:
                if e.code != 404:
                    raise
                with contextlib.suppress(errors.ApiError):  # 409: another apiserver was first; 404: no namespace
                    await store.create(NAMESPACE, wanted, WriteOptions())

    async def remove_own_lease(self) -> None:
        """On a clean stop: the others' next round (and ours now) leave this apiserver out."""
        if self.ip is None:
            return
        kv = await self.storage.get(self.lease_key)
        if kv is not None:
            with contextlib.suppress(StorageError):
                await self.storage.delete(self.lease_key, kv.mod_revision)
        await self.reconcile_endpoints()
