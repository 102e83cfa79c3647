"""TLS serving shared by the apiserver and the kubelet's server (upstream
k8s.io/apiserver/pkg/server/secure_serving.go and options/serving.go, which both kube-apiserver and
the kubelet build their servers with): the server SSL context, and uvicorn protocols carrying the
verified client certificate into every ASGI scope.

The TLS context asks for a client certificate and verifies it against --client-ca-file during
the handshake (Python's ssl module cannot ask for a certificate without verifying it, so a
certificate from another CA ends the handshake with an "unknown ca" alert rather than a 401;
no certificate at all is fine, the request then needs a bearer token). The verified certificate
reaches the app in scope["peercert"] through the small protocol subclasses below.

The same subclass holds the limits Go's net/http server gives kube-apiserver (server/secure_serving.go:
MaxHeaderBytes 1 MiB, ReadHeaderTimeout 32 s, IdleTimeout 90 s), which uvicorn and httptools lack:
the bytes of a request's line and headers are counted as they arrive, before httptools sees them
(it joins a header's pieces by copying, so a 100 MB header costs its size many times over), and
past the limit the connection gets Go's plain 431 answer and is closed; a connection that has not
sent its request headers within the header timeout is closed, as Go does, without an answer.

A request asking to upgrade to another protocol than websocket (`Connection: Upgrade`, `Upgrade: SPDY/3.1`, as
kubectl ≤ 1.29 asks for exec) finds an `Upgrade` in scope[UPGRADE_SCOPE_KEY], Go's http.Hijacker for ASGI: the app
sets `Upgrade.protocol` and sends `http.response.start` with status 101 through the ASGI send (so the middleware
sees, and audits, the 101); the server writes that head itself and hands the connection to the protocol. Such a
request's connection is not kept alive if the app answers otherwise. So does a websocket upgrade to one of the
protocol's `raw_websocket_prefixes` or `raw_websocket_pattern` (the kubelet splices port-forward's websocket to the
runtime's, byte for byte; the apiserver a pods/services/nodes proxy's websocket to the backend's).

And a TLS connection's responses reach the TLS layer a piece at a time (PacedWrites): uvloop encrypts
what is written into OpenSSL's memory buffer, which grows to the most ever pending and never shrinks,
so one 2 MB LIST kept 2.3 MB for the rest of a keep-alive connection (and a watch after it); a plain
connection's writes go to the socket whole. The same holds for the outgoing memory BIO uvloop's TLS writes
into (OpenSSL's BIO_s_mem never gives back what it grew to), so a long-lived stream (a watch) asks for small
pieces (`small_writes`): a watch is mostly idle, and each of thousands of them would otherwise keep the 11 KB
an 8 KB piece grows that buffer to.

What a connection keeps while it waits for its next request is kept small too, as thousands of idle keep-alive
connections (and watches) each pay for it: the finished request's cycle and scope (uvicorn keeps both until the
next request) are let go, and a watch learns that its client went away from the connection itself
(`on_disconnect`) rather than from a task waiting on `receive()`.
"""

from __future__ import annotations

import asyncio
import os
import re
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.utils import get_local_addr, get_remote_addr
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.datastructures import Headers
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol


def server_ssl_context(cert_file: str, key_file: str, client_ca_file: str | None,
                       http2: bool = False) -> ssl.SSLContext:
    """http2: offer "h2" by ALPN before "http/1.1" (the apiserver; upstream serves both unless
    --disable-http2-serving); a client choosing it is served by machinery.http2 (see TLSHttpProtocol)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        ctx.load_verify_locations(cafile=client_ca_file)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.set_alpn_protocols(["h2", "http/1.1"] if http2 else ["http/1.1"])
    # no TLS 1.3 session tickets: no client of the cluster resumes a session (client-go sets no
    # ClientSessionCache, nor do our Python clients), and making the two tickets OpenSSL sends by default
    # copied the session, client certificate included, through DER: a third of a handshake's CPU
    ctx.num_tickets = 0
    return ctx


# the decoded client certificates by their DER: a client's connections (a controller's or a kubelet's watches)
# share one read-only dict rather than a kilobyte of tuples each
_PEERCERTS: dict[bytes, dict[str, Any]] = {}
_PEERCERTS_MAX = 512


def _peercert(transport: Any) -> dict[str, Any] | None:
    try:
        ssl_object = transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(True) if ssl_object is not None else None
        if not der:
            return None
        cert = _PEERCERTS.get(der)
        if cert is None:
            cert = ssl_object.getpeercert()
            if not cert:  # not verified: OpenSSL gives the DER of any certificate, the dict only of a verified one
                return None
            if len(_PEERCERTS) >= _PEERCERTS_MAX:
                del _PEERCERTS[next(iter(_PEERCERTS))]
            _PEERCERTS[der] = cert
        return cert
    except Exception:  # a transport without TLS
        return None


# Go's http.Server.MaxHeaderBytes as kube-apiserver sets it: the request line and the headers together.
MAX_HEADER_BYTES = 1 << 20
# kube-apiserver's ReadHeaderTimeout ("just shy of requestTimeoutUpperBound"); the environment variable
# lets tests wait seconds rather than half a minute for it.
READ_HEADER_TIMEOUT_ENV = "MINIK8S_READ_HEADER_TIMEOUT_SECONDS"
DEFAULT_READ_HEADER_TIMEOUT = 32.0
# kube-apiserver's IdleTimeout ("matches http.DefaultTransport keep-alive timeout"): a kept-alive connection
# without a request for that long is closed (uvicorn's timeout_keep_alive); clients keep theirs 60 s
IDLE_TIMEOUT_ENV = "MINIK8S_IDLE_TIMEOUT_SECONDS"
DEFAULT_IDLE_TIMEOUT = 90.0
# how long a refused connection is still read (and dropped) after the 431, so the client, still writing,
# reads the answer before the close resets the connection (Go's rstAvoidanceDelay)
_RST_AVOIDANCE_DELAY = 0.5
_HEADERS_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                      b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
                      b"431 Request Header Fields Too Large")


def read_header_timeout() -> float:
    value = os.environ.get(READ_HEADER_TIMEOUT_ENV, "")
    return float(value) if value else DEFAULT_READ_HEADER_TIMEOUT


def idle_timeout() -> float:
    value = os.environ.get(IDLE_TIMEOUT_ENV, "")
    return float(value) if value else DEFAULT_IDLE_TIMEOUT


class PacedWrites:
    """A TLS transport that hands the TLS layer at most PIECE bytes per write, and nothing while that
    layer has more than HIGH bytes pending (it has then paused the protocol); the rest waits here as
    views of the caller's bytes, not copies. The TLS layer's buffer stays within about HIGH + PIECE."""

    PIECE = 8192
    HIGH = 16384
    # small(): a 2 KB piece leaves the TLS layer's buffers as the handshake left them, and a slow reader's stream
    # waits here (or in its watcher's queue) rather than in them
    SMALL_PIECE = 2048
    SMALL_HIGH = 4096

    __slots__ = ("_closing", "_paused", "_pending", "_transport", "piece")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._pending: deque[memoryview] | None = None  # an empty deque is 760 bytes: made when first needed
        self._paused = False
        self._closing = False
        self.piece = self.PIECE
        transport.set_write_buffer_limits(high=self.HIGH)

    def __getattr__(self, name: str) -> Any:  # everything else is the transport's
        return getattr(self._transport, name)

    def small(self) -> None:
        """Small pieces and a low mark from now on (a long-lived stream: see small_writes)."""
        if self.piece != self.SMALL_PIECE:
            self.piece = self.SMALL_PIECE
            self._transport.set_write_buffer_limits(high=self.SMALL_HIGH)

    def usual(self) -> None:
        if self.piece != self.PIECE:
            self.piece = self.PIECE
            self._transport.set_write_buffer_limits(high=self.HIGH)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        piece = self.piece
        if len(data) <= piece and not self._pending and not self._paused:
            self._transport.write(data)
            return
        view = memoryview(data)
        if self._pending is None:
            self._pending = deque()
        self._pending.extend(view[i:i + piece] for i in range(0, len(view), piece))
        self._flush()

    def _flush(self) -> None:
        pending = self._pending
        while pending and not self._paused:
            self._transport.write(pending.popleft())  # may pause us before it returns
        if pending is not None and not pending and self._pending is pending:
            self._pending = None
        if self._closing and not self._pending:
            self._transport.close()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> bool:
        """The TLS layer drained; True if everything waiting here went too."""
        self._paused = False
        self._flush()
        return not self._paused

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(v) for v in self._pending or ())

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def close(self) -> None:
        """Close once what waits here is written."""
        self._closing = True
        if not self._pending:
            self._transport.close()

    def abort(self) -> None:
        self._pending = None
        self._transport.abort()


class CoalescingTransport:
    """A TLS transport that sends a response's head and body in one record: uvicorn writes the status line
    and headers, then the body, and on TLS each write is a record of its own (an SSL_write and a send(2)
    each). A write is held until the next one, which goes out with it at once, or until the end of the event
    loop turn (a response whose body comes later, a stream), or until the connection is closed or handed on;
    the order of the bytes never changes. Everything else is the transport's."""

    __slots__ = ("_held", "_loop", "transport")

    def __init__(self, transport: asyncio.Transport | PacedWrites, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
        else:
            self._held = None
            self.transport.write(held + data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self.transport.write(held)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.flush()
        self.transport.set_protocol(protocol)

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, pause_reading, abort, ...
        return getattr(self.transport, name)


UPGRADE_SCOPE_KEY = "minik8s.upgrade"
# what the connection offers a long-lived response: small_writes() and on_disconnect() below
CONNECTION_SCOPE_KEY = "minik8s.connection"


def small_writes(scope: Any) -> None:
    """The rest of this response reaches the TLS layer in pieces of PacedWrites.SMALL_PIECE, with at most
    SMALL_HIGH bytes pending there (a watch: see the module docstring); the connection's next request starts
    again with the usual ones."""
    conn = scope.get(CONNECTION_SCOPE_KEY)
    if conn is not None and conn.paced is not None and conn.tls:
        conn.paced.small()


def on_disconnect(scope: Any, callback: Callable[[], None]) -> bool:
    """Call `callback` once if this request's client goes away (the connection is lost) before the response is
    done. False if the server cannot tell (then wait for `http.disconnect` from `receive()`, as ASGI says)."""
    conn = scope.get(CONNECTION_SCOPE_KEY)
    if conn is None:
        return False
    conn.on_lost = callback
    return True


def cancel_on_disconnect(scope: Any, callback: Callable[[], None]) -> None:
    """Take back on_disconnect's callback, if the connection still holds it."""
    conn = scope.get(CONNECTION_SCOPE_KEY)
    if conn is not None and conn.on_lost is callback:
        conn.on_lost = None


class _Pipeline(list):  # type: ignore[type-arg]
    """uvicorn's queue of pipelined requests (appendleft, pop, truth), as a list: an empty deque is 760 bytes, an
    empty list 56, and every connection has one."""

    def appendleft(self, item: Any) -> None:
        self.insert(0, item)


class Upgrade:
    """One request's offer to switch protocols (see the module docstring); `protocol` is the app's to set."""

    def __init__(self, token: str) -> None:
        self.token = token  # the Upgrade header, lowercase: "spdy/3.1"
        self.protocol: asyncio.Protocol | None = None
        self.early = bytearray()  # bytes the client sent after its headers, before the 101
        self.switched = False


class _UpgradedRelay(asyncio.Protocol):
    """The connection's protocol after a switch: everything to the app's protocol, writes still paced."""

    def __init__(self, protocol: asyncio.Protocol, paced: PacedWrites | None) -> None:
        self.protocol = protocol
        self.paced = paced

    def data_received(self, data: bytes) -> None:
        self.protocol.data_received(data)

    def eof_received(self) -> bool | None:
        return self.protocol.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.protocol.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.paced is not None:
            self.paced.pause_writing()
        self.protocol.pause_writing()

    def resume_writing(self) -> None:
        if self.paced is None or self.paced.resume_writing():
            self.protocol.resume_writing()


class TLSHttpProtocol(HttpToolsProtocol):
    """httptools' protocol, plus the connection's verified client certificate in every scope, the
    header limits (size and read timeout) of Go's net/http server, and writes through PacedWrites."""

    _peer: dict[str, Any] | None = None
    _in_headers = True  # between requests too: the next byte begins the next request's line
    _header_bytes = 0
    _header_timer: asyncio.TimerHandle | None = None
    _header_since: float | None = None  # when the request line being read began (loop time)
    _refused = False
    _upgraded = False
    _paced: PacedWrites | None = None
    _upgrade: Upgrade | None = None
    # websocket upgrades to these path prefixes reach the app as an Upgrade (the app splices the connection to
    # another websocket server itself, as upstream's UpgradeAwareHandler), not uvicorn's websocket protocol
    raw_websocket_prefixes: tuple[bytes, ...] = ()
    raw_websocket_pattern: re.Pattern[bytes] | None = None  # or those whose target this matches (at its start)
    # SETTINGS_MAX_CONCURRENT_STREAMS of a connection whose client chose h2 (0: Go's default, 250)
    http2_max_streams = 0
    _message_done = False  # the parser has read the whole of the current request (its body too)
    tls = False
    on_lost: Callable[[], None] | None = None  # on_disconnect's callback

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipeline = _Pipeline()  # type: ignore[assignment]

    @property
    def paced(self) -> PacedWrites | None:
        return self._paced

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None and ssl_object.selected_alpn_protocol() == "h2":
            self._http2(transport)
            return
        if transport.get_extra_info("sslcontext") is None:
            # plain TCP: the kernel's socket buffer is the only buffer, and pieces would only cost a send(2) each
            # (a port-forward's 64 KiB frames went out as 8 sends)
            super().connection_made(transport)
        else:
            self._paced = PacedWrites(transport)
            super().connection_made(self._paced)  # type: ignore[arg-type]
            # a response's head and body in one record, then paced into the TLS layer
            self.tls = True
            self.transport = CoalescingTransport(self._paced, self.loop)  # type: ignore[assignment]
        self._peer = _peercert(transport)
        self._arm_header_timer()

    def _http2(self, transport: asyncio.Transport) -> None:
        """The client chose h2 by ALPN: the connection is machinery.http2's from now on, writes paced as here."""
        # h2 (with hpack and hyperframe, ~1.5 MB of RSS) is imported by the first HTTP/2 connection, not by every
        # server that could serve one: a plain port never does, and HTTP/1.1 clients neither.
        from machinery.http2 import H2Protocol

        paced = PacedWrites(transport)
        protocol = H2Protocol(
            self.app, loop=self.loop, server_state=self.server_state, app_state=self.app_state,
            root_path=self.root_path, server=get_local_addr(transport), client=get_remote_addr(transport),
            peer=_peercert(transport), default_headers=self.server_state.default_headers,
            max_streams=self.http2_max_streams, idle_timeout=self.timeout_keep_alive,
            connection_scope_key=CONNECTION_SCOPE_KEY)
        protocol.paced = paced
        transport.set_protocol(protocol)
        protocol.connection_made(paced)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)
        callback = self.on_lost
        if callback is not None:
            self.on_lost = None
            callback()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_headers = True
        self._message_done = True
        self._release_finished()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.on_lost = None
        self._release_finished()

    def _release_finished(self) -> None:
        """Once a request has been read and answered and nothing follows it yet, let go of its cycle, scope and
        headers: uvicorn keeps them until the next request, and an idle keep-alive connection would hold a
        few KB of the last request's state (the app's additions to the scope included) for up to a minute and
        a half. The request's task, if it still runs, keeps its own."""
        cycle = self.cycle
        if (cycle is not None and cycle.response_complete and self._message_done and not self.pipeline
                and self._upgrade is None and not self._upgraded):
            self.cycle = None  # type: ignore[assignment]
            self.scope = None  # type: ignore[assignment]
            self.headers = []
            self.url = b""

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # read and dropped until the close
        if self._upgrade is not None:
            self._upgrade.early += data  # a protocol the parser does not speak: kept for the app's
            return
        if not self._in_headers:
            super().data_received(data)
            return
        if self._header_since is None:  # the first byte of a request after an idle keep-alive wait
            self._header_since = self.loop.time()
            if self._header_timer is None:  # else the running timer looks at _header_since when it fires
                self._header_timer = self.loop.call_later(read_header_timeout(), self._header_timeout)
        room = MAX_HEADER_BYTES - self._header_bytes
        if len(data) <= room:
            self._header_bytes += len(data)
            super().data_received(data)
            return
        # only what fits goes to the parser: if the headers end in it, the rest is body (or the next request)
        self._header_bytes = MAX_HEADER_BYTES
        head, rest = data[:room], data[room:]
        if head:
            super().data_received(head)
        if self._upgraded or self.transport.is_closing():
            return
        if self._in_headers:
            self._refuse()
            return
        self.data_received(rest)

    def _refuse(self) -> None:
        self._refused = True
        self._disarm_header_timer()
        self._unset_keepalive_if_required()
        self.parser = None  # type: ignore[assignment]  # drops what it holds of the headers
        self.transport.write(_HEADERS_TOO_LARGE)
        self.loop.call_later(_RST_AVOIDANCE_DELAY, self.transport.close)

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_since = self.loop.time()
        self._header_timer = self.loop.call_later(read_header_timeout(), self._header_timeout)

    def _disarm_header_timer(self) -> None:
        self._header_since = None
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_read(self) -> None:
        """The headers are in: the timer is left running (a keep-alive connection's next request
        reuses it, rather than a new timer and a cancel for every request) and forgets this one."""
        self._header_since = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        since = self._header_since
        if since is None:
            return  # idle between requests: the next request's first byte starts a timer
        left = since + read_header_timeout() - self.loop.time()
        if left > 0:  # a later request than the one the timer was started for
            self._header_timer = self.loop.call_later(left, self._header_timeout)
        elif self._in_headers and not self.transport.is_closing():
            self.transport.close()

    def _raw_websocket(self) -> bool:
        if self.raw_websocket_pattern is not None and self.raw_websocket_pattern.match(self.url):
            return True
        return bool(self.raw_websocket_prefixes) and self.url.startswith(self.raw_websocket_prefixes)

    def _should_upgrade(self) -> bool:
        return super()._should_upgrade() and not self._raw_websocket()

    def handle_websocket_upgrade(self) -> None:
        self._upgraded = True
        self._disarm_header_timer()
        super().handle_websocket_upgrade()

    def pause_writing(self) -> None:
        if self._paced is not None:
            self._paced.pause_writing()
        super().pause_writing()

    def resume_writing(self) -> None:
        if self._paced is None or self._paced.resume_writing():
            super().resume_writing()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._message_done = False
        self.on_lost = None
        if self._paced is not None:
            self._paced.usual()
        self.scope[CONNECTION_SCOPE_KEY] = self  # type: ignore[literal-required]
        if self._peer is not None:
            self.scope["peercert"] = self._peer  # type: ignore[typeddict-unknown-key]

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._header_bytes = 0
        self._headers_read()
        super().on_headers_complete()
        if not self.parser.should_upgrade() or self.cycle is None:  # the common case: one C call
            return
        token = self._get_upgrade()
        if token is not None and (token != b"websocket" or self._raw_websocket()):
            upgrade = self._upgrade = Upgrade(token.decode("latin-1"))
            self.scope[UPGRADE_SCOPE_KEY] = upgrade  # type: ignore[literal-required]
            self._switching_send(upgrade)

    def _unsupported_upgrade_warning(self) -> None:
        if self._upgrade is None:
            super()._unsupported_upgrade_warning()

    def _switching_send(self, upgrade: Upgrade) -> None:
        cycle = self.cycle
        cycle.keep_alive = False  # the parser stopped at the upgrade: no request follows on this connection
        original = cycle.send

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 101 \
                    and upgrade.protocol is not None and not cycle.response_started:
                cycle.response_started = cycle.response_complete = True
                self._switch(upgrade, upgrade.protocol, message.get("headers") or [])
                return
            await original(message)

        cycle.send = send  # type: ignore[method-assign]

    def _switch(self, upgrade: Upgrade, protocol: asyncio.Protocol, headers: list[tuple[bytes, bytes]]) -> None:
        """Write the 101 and hand the connection to `protocol`."""
        head = [b"HTTP/1.1 101 Switching Protocols\r\n"]
        for name, value in [*self.server_state.default_headers, *headers]:
            head += [name, b": ", value, b"\r\n"]
        head.append(b"\r\n")
        upgrade.switched = True
        self._upgraded = True
        self._disarm_header_timer()
        self._unset_keepalive_if_required()
        self.connections.discard(self)
        self.transport.write(b"".join(head))
        protocol.connection_made(self.transport)
        self.transport.set_protocol(_UpgradedRelay(protocol, self._paced))
        self.flow.resume_reading()
        if upgrade.early:
            protocol.data_received(bytes(upgrade.early))
            upgrade.early.clear()



class _KubernetesServerProtocol(ServerProtocol):
    """websockets' handshake, except that Sec-WebSocket-Protocol is not parsed as RFC 6455 tokens: kubectl's
    port-forward offers `SPDY/3.1+portforward.k8s.io` (a '/' is no token character; Go's gorilla takes it),
    which websockets would refuse with 400. uvicorn splits the header on commas for the app's scope and
    writes the app's chosen subprotocol into the answer itself."""

    def process_subprotocol(self, headers: Headers) -> Subprotocol | None:
        return None


class TLSWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websockets (sans-I/O) protocol with the peer's certificate in scope["peercert"] and
    Kubernetes' subprotocol names accepted (_KubernetesServerProtocol)."""

    _peer: dict[str, Any] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _KubernetesServerProtocol(extensions=self.conn.available_extensions,
                                              max_size=(self.conn.max_message_size, self.conn.max_fragment_size),
                                              logger=self.conn.logger)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._peer = _peercert(transport)

    async def run_asgi(self) -> None:
        if self._peer is not None:
            self.scope["peercert"] = self._peer  # type: ignore[typeddict-unknown-key]
        await super().run_asgi()


def tls_options(context: ssl.SSLContext, http: type[TLSHttpProtocol] = TLSHttpProtocol) -> dict[str, Any]:
    """uvicorn.Config arguments serving TLS with this context, the client certificate in scope["peercert"]
    (the kubelet's server uses them too, with its subclass of the HTTP protocol)."""

    def factory(config: uvicorn.Config, default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        return context

    return {"ssl_context_factory": factory, "http": http, "ws": TLSWebSocketProtocol}
