"""Serving the app on the secure (TLS) port and, optionally, the plain development port: two
uvicorn servers on one event loop and one app.

The TLS context asks for a client certificate and verifies it against --client-ca-file during
the handshake (Python's ssl module cannot ask for a certificate without verifying it, so a
certificate from another CA ends the handshake with an "unknown ca" alert rather than a 401;
no certificate at all is fine, the request then needs a bearer token). The verified certificate
reaches the app in scope["peercert"] through the small protocol subclasses below.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol


def server_ssl_context(cert_file: str, key_file: str, client_ca_file: str | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        ctx.load_verify_locations(cafile=client_ca_file)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _peercert(transport: Any) -> dict[str, Any] | None:
    try:
        cert = transport.get_extra_info("peercert")
    except Exception:  # a transport without TLS
        return None
    return cert or None


class TLSHttpProtocol(HttpToolsProtocol):
    """httptools' protocol, plus the connection's verified client certificate in every scope."""

    _peer: dict[str, Any] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._peer = _peercert(transport)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._peer is not None:
            self.scope["peercert"] = self._peer  # type: ignore[typeddict-unknown-key]


class TLSWebSocketProtocol(WebSocketsSansIOProtocol):
    _peer: dict[str, Any] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._peer = _peercert(transport)

    async def run_asgi(self) -> None:
        if self._peer is not None:
            self.scope["peercert"] = self._peer  # type: ignore[typeddict-unknown-key]
        await super().run_asgi()


@dataclass
class Listener:
    host: str
    port: int
    ssl_context: ssl.SSLContext | None = None


def tls_options(context: ssl.SSLContext) -> dict[str, Any]:
    """uvicorn.Config arguments serving TLS with this context, the client certificate in scope["peercert"]
    (the kubelet's server uses them too)."""

    def factory(config: uvicorn.Config, default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        return context

    return {"ssl_context_factory": factory, "http": TLSHttpProtocol, "ws": TLSWebSocketProtocol}


def _config(app: Any, listener: Listener, lifespan: bool) -> uvicorn.Config:
    kwargs: dict[str, Any] = {}
    if listener.ssl_context is not None:
        kwargs.update(tls_options(listener.ssl_context))
    return uvicorn.Config(app, host=listener.host, port=listener.port, log_level="warning", access_log=False,
                          timeout_graceful_shutdown=2, lifespan="on" if lifespan else "off",
                          timeout_keep_alive=90,  # longer than clients keep idle connections (60 s)
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
