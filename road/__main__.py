"""`python -m road`: the road server (issue 15).

    python -m road --kubeconfig _output/local-up/road-server.conf --otlp-address 127.0.0.1:4317 \\
        --secure-port 4320 --tls-cert-file pki/road-server.crt --tls-private-key-file pki/road-server.key \\
        --requestheader-client-ca-file pki/ca.crt --requestheader-allowed-names front-proxy-client

Receives the components' spans over OTLP/gRPC (`--otlp-address`, the collector's usual 127.0.0.1:4317; the
components' `--tracing-config-file` points there), watches Deployments, ReplicaSets, Pods and Events as its
identity (`system:road-server`, read only) and serves `road.minik8s.io/v1alpha1` (road/api.py), which the
apiserver proxies to it (`--road-server-url`). TLS and the front proxy as the metrics-server: with
`--tls-cert-file` HTTPS, with `--requestheader-client-ca-file` only for the apiserver's front-proxy client
certificate. `/healthz`, `/livez`, `/readyz` (ready once the caches synced). SIGTERM/SIGINT stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import ssl
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from machinery import logs
from machinery.api.apps_v1 import Deployment, ReplicaSet
from machinery.api.core_v1 import Event, Pod
from machinery.api.resources import ResourceInfo
from machinery.client import ApiClient, ApiError, default_user_agent
from machinery.informer import Informer, SharedInformerFactory
from machinery.kubeconfig import build_config_from_flags
from machinery.tls import server_ssl_context
from road import otlp
from road.api import Hub, RoadApi, status
from road.model import Span, Store

log = logging.getLogger("road-server")

PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
DEFAULT_PORT = 4320


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="road", description="minik8s road server (road.minik8s.io)")
    p.add_argument("--kubeconfig", default=None)
    p.add_argument("--master", default=None, help="apiserver URL; overrides the kubeconfig's server")
    p.add_argument("--otlp-address", default="127.0.0.1:4317",
                   help="where spans are received over OTLP/gRPC (host:port; port 0: any, printed)")
    p.add_argument("--bind-address", default="127.0.0.1")
    p.add_argument("--secure-port", type=int, default=DEFAULT_PORT, help="the road API's port (0: any; printed)")
    p.add_argument("--tls-cert-file", default=None)
    p.add_argument("--tls-private-key-file", default=None)
    p.add_argument("--requestheader-client-ca-file", default=None,
                   help="the CA of the front proxy's (the apiserver's) client certificate")
    p.add_argument("--requestheader-allowed-names", default="",
                   help="common names the front proxy's certificate may have (comma separated; empty: any)")
    p.add_argument("--max-objects", type=int, default=2000,
                   help="roads kept; the one updated longest ago goes first")
    p.add_argument("--max-steps-per-object", type=int, default=500,
                   help="steps kept per object; the oldest received goes first")
    logs.add_flags(p)
    args = p.parse_args(argv)
    if not args.kubeconfig and not args.master:
        p.error("one of --kubeconfig or --master is required")
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        p.error("--tls-cert-file and --tls-private-key-file go together")
    if args.requestheader_client_ca_file and not args.tls_cert_file:
        p.error("--requestheader-client-ca-file needs --tls-cert-file")
    if args.max_objects < 1 or args.max_steps_per_object < 1:
        p.error("--max-objects and --max-steps-per-object must be at least 1")
    return args


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def front_proxy_auth(allowed_names: set[str]) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """Only the front proxy's verified client certificate (of an allowed name) gets through (the gate, with
    RBAC on road.minik8s.io, is the apiserver's)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in PUBLIC_PATHS:
            return await handler(request)
        peercert = request.transport.get_extra_info("peercert") if request.transport else None
        if not peercert:
            return status(401, "Unauthorized", "Unauthorized")
        cn = next((value for rdn in peercert.get("subject") or () for key, value in rdn if key == "commonName"), "")
        if allowed_names and cn not in allowed_names:
            return status(401, "Unauthorized", f"client certificate {cn!r} is not an allowed front proxy")
        return await handler(request)

    return middleware


class Lookup:
    """Does the object exist, and what is its uid: from the informers' caches for what they watch, else a GET
    through the API (404: it does not)."""

    def __init__(self, client: ApiClient, informers: dict[str, Informer[Any]]) -> None:
        self.client = client
        self.informers = informers

    async def __call__(self, info: ResourceInfo, namespace: str, name: str) -> str | None:
        informer = self.informers.get(info.kind) if info.group in ("", "apps") else None
        if informer is not None:
            obj = informer.get(name, namespace or None)
            return obj.metadata.uid if obj is not None else None
        try:
            found = await self.client.request("GET", info.object_path(name, namespace or None))
        except ApiError as e:
            if not e.is_not_found:
                log.info("road: reading %s %s/%s: %s", info.plural, namespace, name, e)
            return None
        uid = (found.get("metadata") or {}).get("uid")
        return str(uid) if uid else None


async def run(args: argparse.Namespace) -> None:
    config = build_config_from_flags(args.master, args.kubeconfig, default_user_agent("road-server"))
    client = ApiClient(config, user_agent=default_user_agent("road-server"))
    factory = SharedInformerFactory(client)
    store = Store(max_objects=args.max_objects, max_steps=args.max_steps_per_object)
    hub = Hub()

    def on_spans(spans: list[Span]) -> None:
        if store.add_spans(spans):
            hub.notify()

    def observed(obj: Any, new: Any = None) -> None:
        store.observe((new if new is not None else obj).to_dict())
        hub.notify()

    def gone(obj: Any) -> None:
        store.forget_live(obj.to_dict())
        hub.notify()

    def event(obj: Any, new: Any = None) -> None:
        if store.add_event((new if new is not None else obj).to_dict()):
            hub.notify()

    informers: dict[str, Informer[Any]] = {}
    for model in (Deployment, ReplicaSet, Pod):
        informer = factory.informer_for(model)
        informer.add_event_handler(observed, observed, gone)
        informers[model.__name__] = informer
    factory.informer_for(Event).add_event_handler(event, event, None)
    api = RoadApi(store, hub, Lookup(client, informers))
    ready = asyncio.Event()

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ok") if ready.is_set() else web.Response(status=503, text="not ready")

    middlewares: list[Any] = []
    context: ssl.SSLContext | None = None
    if args.tls_cert_file:
        context = server_ssl_context(args.tls_cert_file, args.tls_private_key_file, args.requestheader_client_ca_file)
        if args.requestheader_client_ca_file:
            names = {n.strip() for n in args.requestheader_allowed_names.split(",") if n.strip()}
            middlewares.append(front_proxy_auth(names))
    app = web.Application(middlewares=middlewares)
    app.add_routes([web.get("/healthz", health), web.get("/livez", health), web.get("/readyz", readyz),
                    *api.routes()])
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, args.bind_address, args.secure_port, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # aiohttp keeps it private
    receiver = otlp.TraceReceiver(on_spans)
    grpc_server, otlp_port = await otlp.serve(args.otlp_address, receiver)
    host = args.otlp_address.rpartition(":")[0]
    log.info("serving road.minik8s.io/v1alpha1 on %s://%s:%d; OTLP/gRPC on %s:%d",
             "https" if context else "http", args.bind_address, port, host, otlp_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    factory.start()
    try:
        while not await factory.wait_for_cache_sync(timeout=1.0):
            if stop.is_set():
                return
        ready.set()
        log.info("caches synced; ready")
        await stop.wait()
    finally:
        await grpc_server.stop(1.0)
        await factory.shutdown()
        await runner.cleanup()
        await client.close()
        log.info("road server stopped")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.setup(args.v)
    try:
        asyncio.run(run(args))
    except OSError as e:
        log.error("road server: %s", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
