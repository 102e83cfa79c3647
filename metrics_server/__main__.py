"""`python -m metrics_server`: the cluster's metrics-server (kubernetes-sigs/metrics-server).

    python -m metrics_server --kubeconfig _output/local-up/metrics-server.conf \\
        --secure-port 4443 --tls-cert-file pki/metrics-server.crt --tls-private-key-file pki/metrics-server.key \\
        --requestheader-client-ca-file pki/ca.crt --requestheader-allowed-names front-proxy-client \\
        --kubelet-client-certificate pki/metrics-server-kubelet.crt --kubelet-client-key ... \\
        --kubelet-certificate-authority pki/ca.crt --metric-resolution 15s

Lists and watches Nodes and Pods as its identity (`system:metrics-server` lets it), scrapes every
Node's kubelet `/stats/summary` each `--metric-resolution` (15s, upstream's default) and serves
`metrics.k8s.io/v1beta1` (metrics_server/api.py), which the apiserver proxies to it
(`--metrics-server-url`). With `--tls-cert-file` it serves HTTPS and, with
`--requestheader-client-ca-file`, only to clients presenting a certificate of that CA (named in
`--requestheader-allowed-names` when given): the apiserver, which authenticated and authorized the
user and passes them on in `X-Remote-User`/`X-Remote-Group`, as an aggregated API server trusts its
front proxy. Without TLS it serves plain HTTP (test clusters). `/healthz`, `/livez`, `/readyz` (ready
after the caches synced and the first scrape). SIGTERM/SIGINT stop it.
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
from machinery.api.core_v1 import Node, Pod
from machinery.client import ApiClient, default_user_agent
from machinery.informer import SharedInformerFactory
from machinery.kubeconfig import build_config_from_flags
from machinery.timeutil import duration_flag
from machinery.tls import server_ssl_context
from metrics_server.api import MetricsApi, status
from metrics_server.scraper import Scraper
from metrics_server.storage import Storage

log = logging.getLogger("metrics-server")

DEFAULT_RESOLUTION = 15.0
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz"})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="metrics_server", description="minik8s metrics-server (metrics.k8s.io)")
    p.add_argument("--kubeconfig", default=None)
    p.add_argument("--master", default=None, help="apiserver URL; overrides the kubeconfig's server")
    p.add_argument("--metric-resolution", type=duration_flag, default=DEFAULT_RESOLUTION,
                   help="how often the kubelets are scraped (default 15s)")
    p.add_argument("--bind-address", default="127.0.0.1")
    p.add_argument("--secure-port", type=int, default=4443, help="the port served (0: any; printed)")
    p.add_argument("--tls-cert-file", default=None)
    p.add_argument("--tls-private-key-file", default=None)
    p.add_argument("--requestheader-client-ca-file", default=None,
                   help="the CA of the front proxy's (the apiserver's) client certificate")
    p.add_argument("--requestheader-allowed-names", default="",
                   help="common names the front proxy's certificate may have (comma separated; empty: any)")
    p.add_argument("--kubelet-client-certificate", default=None)
    p.add_argument("--kubelet-client-key", default=None)
    p.add_argument("--kubelet-certificate-authority", default=None)
    p.add_argument("--kubelet-insecure-tls", action="store_true", help="do not verify the kubelets' certificates")
    logs.add_flags(p)
    args = p.parse_args(argv)
    if not args.kubeconfig and not args.master:
        p.error("one of --kubeconfig or --master is required")
    if args.metric_resolution < 0.5:
        p.error("--metric-resolution must be at least 500ms")
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        p.error("--tls-cert-file and --tls-private-key-file go together")
    if args.requestheader_client_ca_file and not args.tls_cert_file:
        p.error("--requestheader-client-ca-file needs --tls-cert-file")
    return args


def kubelet_tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """HTTPS towards kubelets when a client certificate or a CA is given; else plain HTTP."""
    if not args.kubelet_client_certificate and not args.kubelet_certificate_authority \
            and not args.kubelet_insecure_tls:
        return None
    if args.kubelet_certificate_authority and not args.kubelet_insecure_tls:
        ctx = ssl.create_default_context(cafile=args.kubelet_certificate_authority)
    else:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if args.kubelet_client_certificate and args.kubelet_client_key:
        ctx.load_cert_chain(args.kubelet_client_certificate, args.kubelet_client_key)
    return ctx


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def front_proxy_auth(allowed_names: set[str]) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """Only the front proxy's verified client certificate (of an allowed name) gets through."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in PUBLIC_PATHS:
            return await handler(request)
        peercert = request.transport.get_extra_info("peercert") if request.transport else None
        cn = ""
        for rdn in (peercert or {}).get("subject") or ():
            for key, value in rdn:
                if key == "commonName":
                    cn = value
        if not peercert:
            return status(401, "Unauthorized", "Unauthorized")
        if allowed_names and cn not in allowed_names:
            return status(401, "Unauthorized", f"client certificate {cn!r} is not an allowed front proxy")
        return await handler(request)

    return middleware


async def run(args: argparse.Namespace) -> None:
    config = build_config_from_flags(args.master, args.kubeconfig, default_user_agent("metrics-server"))
    client = ApiClient(config, user_agent=default_user_agent("metrics-server"))
    factory = SharedInformerFactory(client)
    nodes = factory.informer_for(Node)
    pods = factory.informer_for(Pod)
    storage = Storage(args.metric_resolution)
    scraper = Scraper(storage, nodes, tls=kubelet_tls(args), resolution=args.metric_resolution)
    api = MetricsApi(storage, nodes, pods)
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
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.bind_address, args.secure_port, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # aiohttp keeps it private
    log.info("serving metrics.k8s.io/v1beta1 on %s://%s:%d; scraping every %ss",
             "https" if context else "http", args.bind_address, port, args.metric_resolution)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    factory.start()
    scraping: asyncio.Task[None] | None = None
    try:
        while not await factory.wait_for_cache_sync(timeout=1.0):
            if stop.is_set():
                return
        await scraper.scrape_once()
        ready.set()
        log.info("caches synced, first scrape of %d nodes done; ready", len(nodes.list()))
        scraping = asyncio.create_task(scraper.run(stop))
        await stop.wait()
    finally:
        if scraping is not None:
            scraping.cancel()
            await asyncio.gather(scraping, return_exceptions=True)
        await scraper.close()
        await factory.shutdown()
        await runner.cleanup()
        await client.close()
        log.info("metrics-server stopped")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.setup(args.v)
    try:
        asyncio.run(run(args))
    except OSError as e:
        log.error("metrics-server: %s", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
