"""`python -m dns`: the cluster DNS of minik8s, one per cluster (CoreDNS with its kubernetes plugin).

    python -m dns --kubeconfig _output/local-up/kube-dns.conf
    python -m dns --master http://127.0.0.1:8080 --port 10053 --forward /etc/resolv.conf

Watches Services and EndpointSlices through machinery's informers and answers the cluster domain
(`--cluster-domain`, default cluster.local) per the Kubernetes DNS specification; the rest goes to
the nameservers of `--forward` (a resolv.conf, or addresses: CoreDNS's `forward . /etc/resolv.conf`).
UDP and TCP on `--bind-address`:`--port` (default 0.0.0.0:10053, the port kube-dns's own server
used; the kube-dns Service maps 53 to it). `--health-port` (default 9153, CoreDNS's metrics port)
serves /health (the process runs), /ready (the caches synced; CoreDNS's ready plugin) and
/metrics (Prometheus). With `--manage-service` (default on) the process keeps the endpoints of the
kube-dns Service in kube-system pointing at itself (dns/kube_dns_service.py; it creates what is missing
when its identity may, else an admin runs `python -m dns.kube_dns_service` once). SIGTERM/SIGINT stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from dns import kube_dns_service
from dns.forward import Forwarder, Upstream, load_upstreams
from dns.kube_dns_service import DEFAULT_DNS_PORT, DEFAULT_METRICS_PORT, DEFAULT_SERVICE_IP, KubeDNSService
from dns.kubernetes import DEFAULT_TTL, ClusterZone
from dns.server import ClusterDNSServer, ClusterResolver, Metrics
from machinery import logs
from machinery.api.core_v1 import Service
from machinery.api.discovery_v1 import EndpointSlice
from machinery.client import ApiClient, ApiError, ClientError, default_user_agent
from machinery.informer import SharedInformerFactory
from machinery.kubeconfig import ClientConfig, build_config_from_flags
from machinery.netutil import default_node_ip

log = logging.getLogger("dns")

DEFAULT_PORT = DEFAULT_DNS_PORT
DEFAULT_HEALTH_PORT = DEFAULT_METRICS_PORT
SERVICE_RESYNC_SECONDS = 10.0


def user_agent() -> str:
    return default_user_agent("kube-dns")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="dns", description="minik8s cluster DNS (CoreDNS with the kubernetes plugin)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig with the apiserver and credentials")
    p.add_argument("--master", default=None, help="apiserver URL; overrides the kubeconfig's server")
    p.add_argument("--cluster-domain", default="cluster.local", help="the zone answered (default %(default)s)")
    p.add_argument("--bind-address", default="0.0.0.0", help="address to serve DNS on (default %(default)s)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="UDP and TCP port (default %(default)s; 0: any)")
    p.add_argument("--health-port", type=int, default=DEFAULT_HEALTH_PORT,
                   help="HTTP port of /health, /ready and /metrics (default %(default)s; 0: any)")
    p.add_argument("--forward", action="append", default=None, metavar="RESOLV_CONF|IP[:PORT]",
                   help="where names outside the cluster go: a resolv.conf or addresses (default /etc/resolv.conf)")
    p.add_argument("--ttl", type=int, default=DEFAULT_TTL, help="TTL of the cluster's records (default %(default)s)")
    p.add_argument("--manage-service", action=argparse.BooleanOptionalAction, default=True,
                   help="keep the kube-dns Service and its endpoints in kube-system (default on)")
    p.add_argument("--service-ip", default=DEFAULT_SERVICE_IP, help="the kube-dns clusterIP (default %(default)s)")
    p.add_argument("--advertise-address", default=None,
                   help="the address pods reach this server on, for the kube-dns endpoints (default: the node IP)")
    logs.add_flags(p)
    args = p.parse_args(argv)
    if not args.kubeconfig and not args.master:
        p.error("one of --kubeconfig or --master is required")
    if not 0 <= args.port <= 65535 or not 0 <= args.health_port <= 65535:
        p.error("--port and --health-port must be within 0-65535")
    if args.advertise_address:
        try:
            address = ipaddress.ip_address(args.advertise_address)
        except ValueError:
            p.error(f"--advertise-address {args.advertise_address!r} is not an IP address")
        if address.is_loopback:  # an endpoint may not be (upstream's Endpoints validation): pods could not use it
            p.error(f"--advertise-address {address}: may not be in the loopback range (127.0.0.0/8, ::1/128)")
    if args.ttl < 0 or args.ttl > 3600:
        p.error("--ttl must be within 0-3600 (CoreDNS's bounds)")
    return args


def client_config(args: argparse.Namespace) -> ClientConfig:
    return build_config_from_flags(args.master, args.kubeconfig, user_agent())


def own_addresses(bind_address: str, port: int, advertise: str) -> list[Upstream]:
    hosts = {advertise, "127.0.0.1"} if bind_address in ("0.0.0.0", "::") else {bind_address}
    return [Upstream(h, port) for h in hosts]


class DNS:
    """The informers feeding the zone, the DNS server, the HTTP endpoints and the Service upkeep."""

    def __init__(self, args: argparse.Namespace, client: ApiClient) -> None:
        self.args = args
        self.client = client
        self.zone = ClusterZone(args.cluster_domain, args.ttl)
        self.factory = SharedInformerFactory(client)
        self.metrics = Metrics()
        self.address = args.advertise_address or default_node_ip()
        self.forwarder = Forwarder([])
        self.server = ClusterDNSServer(ClusterResolver(self.zone, self.forwarder, self.metrics,
                                                       f"dns://{args.bind_address}:{args.port}"),
                                       args.bind_address, args.port)
        self.forwarder.upstreams = load_upstreams(args.forward or ["/etc/resolv.conf"],
                                                  own_addresses(args.bind_address, self.server.port, self.address))
        self.ready = False
        self.upkeep_due = asyncio.Event()

    def wire(self) -> None:
        services = self.factory.informer_for(Service)
        services.add_event_handler(on_add=self.zone.set_service, on_update=lambda _old, new: self.zone.set_service(new),
                                   on_delete=lambda svc: self.zone.delete_service(svc.metadata.namespace or "",
                                                                                  svc.metadata.name or ""))
        slices = self.factory.informer_for(EndpointSlice)
        slices.add_event_handler(on_add=self.zone.set_slice, on_update=self._slice_updated,
                                 on_delete=self._slice_deleted)

    def _slice_updated(self, _old: EndpointSlice, new: EndpointSlice) -> None:
        self.zone.set_slice(new)
        if (new.metadata.namespace, new.metadata.name) == (kube_dns_service.NAMESPACE, kube_dns_service.SLICE_NAME):
            self.upkeep_due.set()  # someone else may have changed our endpoints: look now, not at the next resync

    def _slice_deleted(self, eps: EndpointSlice) -> None:
        self.zone.delete_slice(eps.metadata.namespace or "", eps.metadata.name or "")
        if (eps.metadata.namespace, eps.metadata.name) == (kube_dns_service.NAMESPACE, kube_dns_service.SLICE_NAME):
            self.upkeep_due.set()

    async def http_app(self) -> web.AppRunner:
        async def health(_: web.Request) -> web.Response:
            return web.Response(text="OK")

        async def ready(_: web.Request) -> web.Response:
            return web.Response(text="OK") if self.ready else web.Response(status=503, text="kubernetes")

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(body=generate_latest(self.metrics.registry),
                                headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/health", health)
        app.router.add_get("/ready", ready)
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        return runner

    async def keep_service(self, stop: asyncio.Event, metrics_port: int) -> None:
        upkeep = KubeDNSService(self.client, service_ip=self.args.service_ip, address=self.address,
                                dns_port=self.server.port, metrics_port=metrics_port)
        while not stop.is_set():
            try:
                await upkeep.ensure()
            except ApiError as e:
                hint = (" (create them once as an admin: python -m dns.kube_dns_service --kubeconfig admin.conf)"
                        if e.is_forbidden or e.is_not_found else "")
                log.warning("kube-dns Service upkeep: %s%s", e, hint)
            except ClientError as e:
                log.warning("kube-dns Service upkeep: %s", e)
            self.upkeep_due.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_first(stop.wait(), self.upkeep_due.wait()), SERVICE_RESYNC_SECONDS)


async def _first(*waits: Coroutine[Any, Any, Any]) -> None:
    """Return when the first of `waits` does; cancel the rest."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def run(args: argparse.Namespace) -> None:
    config = client_config(args)
    client = ApiClient(config, user_agent=user_agent())
    dns = DNS(args, client)
    dns.wire()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = await dns.http_app()
    site = web.TCPSite(runner, args.bind_address, args.health_port)
    await site.start()
    health_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # aiohttp keeps it private
    dns.server.start()
    log.info("serving DNS for %s on %s:%d (UDP, TCP); /health /ready /metrics on :%d; forwarding to %s",
             args.cluster_domain, args.bind_address, dns.server.port, health_port,
             ", ".join(str(u) for u in dns.forwarder.upstreams) or "nobody")
    dns.factory.start()
    tasks = []
    if args.manage_service:
        tasks.append(asyncio.create_task(dns.keep_service(stop, health_port)))
    try:
        while not await dns.factory.wait_for_cache_sync(timeout=1.0):
            if stop.is_set():
                return
        for informer in dns.factory.informers():
            await informer.wait_for_handlers()
        dns.ready = True
        services, slices = dns.zone.counts()
        log.info("caches synced: %d Services, %d EndpointSlices; ready", services, slices)
        await stop.wait()
    finally:
        dns.server.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await dns.factory.shutdown()
        await runner.cleanup()
        await client.close()
        log.info("dns stopped")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.setup(args.v)
    try:
        asyncio.run(run(args))
    except OSError as e:  # the port is taken, the resolv.conf is missing...
        log.error("dns: %s", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
