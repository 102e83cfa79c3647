"""Serving the app on the secure (TLS) port and, optionally, the plain development port: two
uvicorn servers on one event loop and one app (upstream k8s.io/apiserver/pkg/server/secure_serving.go
RunServer). The TLS protocols, the header limits and the client certificate in scope["peercert"] are
machinery/tls.py's, shared with the kubelet's server.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
from dataclasses import dataclass
from typing import Any

import uvicorn

from apiserver.endpoints.resourceproxy import UPGRADE_PATH
from machinery.tls import TLSHttpProtocol, TLSWebSocketProtocol, idle_timeout, tls_options


class ApiserverHttpProtocol(TLSHttpProtocol):
    """The apiserver's HTTP protocol (plain or TLS): a websocket to a pods/services/nodes proxy reaches the app as
    an Upgrade, which it splices to the backend's websocket byte for byte (upstream's UpgradeAwareHandler), rather
    than uvicorn's websocket protocol (exec, attach and port-forward, which the apiserver bridges itself)."""

    raw_websocket_pattern = UPGRADE_PATH


@dataclass
class Listener:
    host: str
    port: int
    ssl_context: ssl.SSLContext | None = None
    # SETTINGS_MAX_CONCURRENT_STREAMS for clients that chose h2 by ALPN (the context offers it or not):
    # --http2-max-streams-per-connection, 0 for Go's default (250)
    http2_max_streams: int = 0


def _config(app: Any, listener: Listener, lifespan: bool) -> uvicorn.Config:
    # the plain port gets the header limits too (its peer certificate is always None)
    kwargs: dict[str, Any] = {"http": ApiserverHttpProtocol, "ws": TLSWebSocketProtocol}
    if listener.ssl_context is not None:
        http: type[TLSHttpProtocol] = ApiserverHttpProtocol
        if listener.http2_max_streams:
            http = type("ApiserverHttpProtocol", (ApiserverHttpProtocol,),
                        {"http2_max_streams": listener.http2_max_streams})
        kwargs.update(tls_options(listener.ssl_context, http))
    # proxy_headers off: uvicorn would otherwise take the scheme and the client's address from X-Forwarded-Proto
    # and X-Forwarded-For of any client on 127.0.0.1 or ::1, and the gate reads the scheme to tell the plain port
    # (system:unsecured, in system:masters) from the secure one, where a local client sending
    # `X-Forwarded-Proto: http` without credentials was served as system:unsecured. Upstream's server trusts
    # neither header for either (the peer is the connection's; X-Forwarded-For only adds to audit's sourceIPs).
    return uvicorn.Config(app, host=listener.host, port=listener.port, log_level="warning", access_log=False,
                          proxy_headers=False, timeout_graceful_shutdown=2, lifespan="on" if lifespan else "off",
                          timeout_keep_alive=idle_timeout(),  # type: ignore[arg-type]  # call_later takes a float
                          **kwargs)


def run(app: Any, listeners: list[Listener]) -> None:
    """serve() on the event loop uvicorn would pick (uvloop when installed: its TLS is compiled, asyncio's
    is Python, and each request pays for it)."""
    loop_factory = uvicorn.Config(app).get_loop_factory()
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(serve(app, listeners))


async def serve(app: Any, listeners: list[Listener]) -> None:
    """Serve app on every listener until SIGTERM/SIGINT; the first runs the app's lifespan and
    starts first, so the others never serve an app that has not started."""
    servers = [uvicorn.Server(_config(app, listener, i == 0)) for i, listener in enumerate(listeners)]
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for s in servers:
            if s.should_exit:
                s.force_exit = True
            s.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop)
    first = asyncio.create_task(servers[0]._serve())
    while not servers[0].started:
        if first.done():
            await first
            return
        await asyncio.sleep(0.02)
    rest = [asyncio.create_task(s._serve()) for s in servers[1:]]
    try:
        await asyncio.gather(first, *rest)
    finally:
        stop()
