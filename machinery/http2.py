"""HTTP/2 on a TLS connection whose client chose "h2" by ALPN, feeding the same ASGI app as the HTTP/1.1
protocol (upstream's secure port serves both: k8s.io/apiserver/pkg/server/secure_serving.go, Go's
golang.org/x/net/http2 server under net/http). The framing, HPACK, the stream states and the flow-control
windows are the `h2` library's (python-hyper); this is the glue between its events and ASGI.

Upstream's settings (secure_serving.go): SETTINGS_MAX_CONCURRENT_STREAMS is --http2-max-streams-per-connection
(250, Go's default, when 0); a stream's receive window and the largest frame read are 256 KiB
(resourceBody99Percentile: most POST bodies in one frame), the connection's window that times the streams;
a connection without an open stream for IdleTimeout (90 s) is closed with a GOAWAY; the header list is
limited as the HTTP/1.1 server limits it (MaxHeaderBytes, 1 MiB).

Each request is a stream, and a task of its own running the app, as each HTTP/1.1 request is; a response's
body goes out as DATA frames as the client's windows allow (a watch waits for a WINDOW_UPDATE rather than
buffering); a stream the client resets (RST_STREAM: client-go cancelling a watch) or a connection lost ends
the request as a lost HTTP/1.1 connection does: `receive()` says `http.disconnect`, sends are dropped, and the
stream's on_disconnect callback (machinery.tls) is called, so a watch stops at once and is freed.
Upgrades (exec, attach, port-forward) are not HTTP/2's: clients ask for them over HTTP/1.1 (client-go offers
only http/1.1 by ALPN for them), and an HTTP/2 request carrying an Upgrade header is answered as an ordinary
request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

# Go's http2 default for SETTINGS_MAX_CONCURRENT_STREAMS (kube-apiserver's --http2-max-streams-per-connection 0)
DEFAULT_MAX_STREAMS = 250
# secure_serving.go's resourceBody99Percentile: MaxUploadBufferPerStream and MaxReadFrameSize
STREAM_WINDOW = 256 * 1024
MAX_READ_FRAME_SIZE = 256 * 1024
MAX_HEADER_LIST_SIZE = 1 << 20
# headers HTTP/1.1 responses carry that HTTP/2 forbids (RFC 9113 8.2.2); Go's server drops them the same way
_CONNECTION_HEADERS = frozenset((b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding",
                                 b"upgrade"))

logger = logging.getLogger("uvicorn.error")
_ASGI = {"version": "3.0", "spec_version": "2.3"}  # every scope's (read only)


class H2Stream:
    """One request: what its scope offers the app under machinery.tls's CONNECTION_SCOPE_KEY (on_lost for
    on_disconnect; no PacedWrites of its own, as it shares the connection's), and the request body as it comes."""

    __slots__ = ("body", "done", "headers_sent", "id", "method", "more_body", "on_lost", "request_read", "reset",
                 "status", "unacked", "waiter", "window_waiter")
    paced = None
    tls = True

    def __init__(self, stream_id: int, method: bytes, ended: bool) -> None:
        self.id = stream_id
        self.method = method
        self.body = bytearray()
        self.unacked = 0  # flow-controlled bytes received and not yet read by the app
        self.more_body = not ended
        self.request_read = False  # the app has had the body's last message
        self.reset = False  # the client reset the stream, or the connection is gone
        self.done = False  # the response is complete
        self.headers_sent = False
        self.status = 0
        self.on_lost: Callable[[], None] | None = None
        self.waiter: asyncio.Future[None] | None = None  # receive() waiting for body or the end
        self.window_waiter: asyncio.Future[None] | None = None  # send() waiting for the client's window

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self.wake_window()

    def wake_window(self) -> None:
        waiter = self.window_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def lose(self) -> None:
        if self.reset:
            return
        self.reset = True
        self.wake()
        callback = self.on_lost
        if callback is not None:
            self.on_lost = None
            callback()


class H2Protocol(asyncio.Protocol):
    """The connection after ALPN chose h2: `take_over` gets the HTTP/1.1 protocol's app, state and
    transport (a PacedWrites over the TLS transport) from machinery.tls."""

    def __init__(self, app: Any, *, loop: asyncio.AbstractEventLoop, server_state: Any, app_state: dict[str, Any],
                 root_path: str, server: Any, client: Any, peer: dict[str, Any] | None,
                 default_headers: list[tuple[bytes, bytes]], max_streams: int, idle_timeout: float,
                 connection_scope_key: str) -> None:
        self.app = app
        self.loop = loop
        self.server_state = server_state
        self.app_state = app_state
        self.root_path = root_path
        self.server = server
        self.client = client
        self.peer = peer
        self.default_headers = [(name.lower(), value) for name, value in default_headers]
        self.max_streams = max_streams or DEFAULT_MAX_STREAMS
        self.idle_timeout = idle_timeout
        self.connection_scope_key = connection_scope_key
        self.streams: dict[int, H2Stream] = {}
        self.transport: Any = None
        self.paced: Any = None
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=False, header_encoding=None, validate_inbound_headers=True))
        self._write_paused = False
        self._drain: asyncio.Future[None] | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._closing = False  # a GOAWAY went out: close once the last stream is done
        self._lost = False

    # -- connection

    def connection_made(self, transport: Any) -> None:
        """`transport` is what responses are written to (a PacedWrites over the TLS transport)."""
        self.transport = transport
        self.server_state.connections.add(self)
        conn = self.conn
        conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams,
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
            h2.settings.SettingCodes.MAX_FRAME_SIZE: MAX_READ_FRAME_SIZE,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
            h2.settings.SettingCodes.ENABLE_PUSH: 0,
        })
        # in force at once, as Go's server does (the client has no other settings of ours to go by): h2 reads
        # these two from the settings it was made with, and from acknowledged changes only
        conn.max_inbound_frame_size = MAX_READ_FRAME_SIZE
        conn.decoder.max_header_list_size = MAX_HEADER_LIST_SIZE
        conn.initiate_connection()
        # MaxUploadBufferPerConnection: the streams' windows together
        conn.increment_flow_control_window(STREAM_WINDOW * self.max_streams - 65535)
        self._flush()
        self._arm_idle_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self.server_state.connections.discard(self)
        self._disarm_idle_timer()
        for stream in list(self.streams.values()):
            stream.lose()
        self._wake_drain()

    def eof_received(self) -> bool | None:
        self.transport.close()
        return None

    def pause_writing(self) -> None:
        if self.paced is not None:
            self.paced.pause_writing()
        self._write_paused = True

    def resume_writing(self) -> None:
        if self.paced is None or self.paced.resume_writing():
            self._write_paused = False
            self._wake_drain()

    def _wake_drain(self) -> None:
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)
        self._drain = None

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown (and the idle timeout's): no new streams (refused, so the client retries them
        elsewhere), and once the open ones are done a GOAWAY and the close. (Go's server sends its GOAWAY first;
        h2's connection takes no frame after a GOAWAY, and the open streams' would be lost.)"""
        if self._lost or self._closing:
            return
        self._closing = True
        if not self.streams:
            self._goaway()

    def _goaway(self) -> None:
        with contextlib.suppress(h2.exceptions.ProtocolError):
            self.conn.close_connection(last_stream_id=self.conn.highest_inbound_stream_id)
        self._flush()
        self.transport.close()

    def _arm_idle_timer(self) -> None:
        if self._idle_timer is None and not self._lost:
            self._idle_timer = self.loop.call_later(self.idle_timeout, self._idle)

    def _disarm_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle(self) -> None:
        self._idle_timer = None
        if not self.streams:
            self.shutdown()

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data and not self._lost:
            self.transport.write(data)

    # -- frames in

    def data_received(self, data: bytes) -> None:
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            # h2 has queued the GOAWAY with the error's code (Go closes such a connection likewise)
            self._flush()
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self._request(event)
            elif isinstance(event, h2.events.DataReceived):
                stream = self.streams.get(event.stream_id)
                if stream is None or not stream.more_body:
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                else:
                    stream.body += event.data
                    stream.unacked += event.flow_controlled_length
                    stream.wake()
            elif isinstance(event, h2.events.StreamEnded):
                stream = self.streams.get(event.stream_id)
                if stream is not None:
                    stream.more_body = False
                    stream.wake()
            elif isinstance(event, h2.events.StreamReset):
                stream = self.streams.get(event.stream_id)
                if stream is not None:
                    stream.lose()
            elif isinstance(event, h2.events.WindowUpdated):
                if event.stream_id:
                    stream = self.streams.get(event.stream_id)
                    if stream is not None:
                        stream.wake_window()
                else:
                    self._wake_windows()
            elif isinstance(event, h2.events.RemoteSettingsChanged):
                self._wake_windows()
            elif isinstance(event, h2.events.ConnectionTerminated):
                # the client goes away (h2's connection sends nothing after a GOAWAY, so the open streams end here)
                self._closing = True
                for stream in list(self.streams.values()):
                    stream.lose()
                self._flush()
                self.transport.close()
                return
        self._flush()

    def _wake_windows(self) -> None:
        for stream in self.streams.values():
            stream.wake_window()

    def _request(self, event: h2.events.RequestReceived) -> None:
        stream_id = event.stream_id
        if self._closing:
            self.conn.reset_stream(stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
            return
        method = path = authority = b""
        headers: list[tuple[bytes, bytes]] = []
        for name, value in event.headers:
            name, value = bytes(name), bytes(value)
            if name[:1] == b":":
                if name == b":method":
                    method = value
                elif name == b":path":
                    path = value
                elif name == b":authority":
                    authority = value
            else:
                headers.append((name, value))
        if authority and not any(name == b"host" for name, _ in headers):
            headers.insert(0, (b"host", authority))
        raw_path, _, query = path.partition(b"?")
        text_path = raw_path.decode("ascii", "replace")
        if "%" in text_path:
            text_path = urllib.parse.unquote(text_path)
        stream = H2Stream(stream_id, method, event.stream_ended is not None)
        self.streams[stream_id] = stream
        self._disarm_idle_timer()
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": "2",
            "server": self.server,
            "client": self.client,
            "scheme": "https",
            "root_path": self.root_path,
            "headers": headers,
            "state": self.app_state.copy(),
            "method": method.decode("ascii", "replace"),
            "path": self.root_path + text_path,
            "raw_path": self.root_path.encode("ascii") + raw_path,
            "query_string": query,
            self.connection_scope_key: stream,
        }
        if self.peer is not None:
            scope["peercert"] = self.peer
        task = self.loop.create_task(self._run(stream, scope))
        tasks = self.server_state.tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    # -- the app

    async def _run(self, stream: H2Stream, scope: dict[str, Any]) -> None:
        # partials rather than closures: a watch holds them as long as it lasts, and thousands of watches do
        receive, send = functools.partial(self._receive, stream), functools.partial(self._send, stream)
        try:
            await self.app(scope, receive, send)
        except BaseException as exc:
            logger.error("Exception in ASGI application\n", exc_info=exc)
            if not stream.headers_sent and not stream.reset:
                await self._send(stream, {"type": "http.response.start", "status": 500,
                                          "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
                await self._send(stream, {"type": "http.response.body", "body": b"Internal Server Error"})
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            if not stream.done and not stream.reset:  # the app returned without finishing its response
                self._reset(stream, h2.errors.ErrorCodes.INTERNAL_ERROR)
            self._stream_done(stream)

    def _stream_done(self, stream: H2Stream) -> None:
        stream.done = True
        stream.on_lost = None
        if self.streams.get(stream.id) is stream:
            del self.streams[stream.id]
        if stream.more_body and not stream.reset and not self._lost:
            # the response is complete before the request's body: Go's server resets the rest (NO_ERROR)
            self._reset(stream, h2.errors.ErrorCodes.NO_ERROR)
        if not self.streams:
            if self._closing:
                if not self._lost:
                    self._goaway()
            else:
                self._arm_idle_timer()

    def _reset(self, stream: H2Stream, code: int) -> None:
        if self._lost:
            return
        try:
            self.conn.reset_stream(stream.id, code)
        except h2.exceptions.ProtocolError:  # the stream (or the connection) is closed already
            return
        self._flush()

    async def _receive(self, stream: H2Stream) -> dict[str, Any]:
        while True:
            if stream.reset or (stream.done and stream.request_read):  # gone, or answered (as ASGI says)
                return {"type": "http.disconnect"}
            if stream.body or (not stream.more_body and not stream.request_read):
                body = bytes(stream.body)
                stream.body.clear()
                if stream.unacked and not self._lost:
                    # the app has read it: the client may send as much again (Go's server likewise)
                    with contextlib.suppress(h2.exceptions.ProtocolError):
                        self.conn.acknowledge_received_data(stream.unacked, stream.id)
                    stream.unacked = 0
                    self._flush()
                more = stream.more_body
                if not more:
                    stream.request_read = True
                return {"type": "http.request", "body": body, "more_body": more}
            # nothing more to read: wait for more body, or (all read) for the client to go away
            waiter = stream.waiter = self.loop.create_future()
            try:
                await waiter
            finally:
                stream.waiter = None

    async def _send(self, stream: H2Stream, message: dict[str, Any]) -> None:
        try:
            await self._send_frames(stream, message)
        except h2.exceptions.ProtocolError:
            # the stream was closed under the response (the client's reset not yet read, or its GOAWAY): as a lost
            # connection's, the rest of the response goes nowhere
            stream.lose()

    async def _send_frames(self, stream: H2Stream, message: dict[str, Any]) -> None:
        if stream.reset or self._lost:
            return
        kind = message["type"]
        conn = self.conn
        if kind == "http.response.start":
            if stream.headers_sent:
                raise RuntimeError(f"Unexpected ASGI message '{kind}' sent, after response already started.")
            stream.status = int(message["status"])
            headers = [(b":status", str(stream.status).encode())]
            for name, value in (*self.default_headers, *(message.get("headers") or ())):
                name = bytes(name).lower()
                if name not in _CONNECTION_HEADERS:
                    headers.append((name, bytes(value)))
            stream.headers_sent = True
            conn.send_headers(stream.id, headers)
            # out now (a watch's client waits for its headers), or with the body if that follows in this turn
            self.loop.call_soon(self._flush)
            return
        if kind != "http.response.body":
            raise RuntimeError(f"Unexpected ASGI message '{kind}' sent.")
        if not stream.headers_sent:
            raise RuntimeError(f"Unexpected ASGI message '{kind}' sent, before response started.")
        if stream.done:
            raise RuntimeError(f"Unexpected ASGI message '{kind}' sent, after response already completed.")
        body = message.get("body", b"")
        more = bool(message.get("more_body", False))
        if stream.method == b"HEAD":
            body = b""
        view = memoryview(body)
        while view:
            if self._write_paused:
                await self._drained()
            if stream.reset or self._lost:
                return
            size = min(conn.local_flow_control_window(stream.id), conn.max_outbound_frame_size, len(view))
            if size <= 0:
                waiter = stream.window_waiter = self.loop.create_future()
                try:
                    await waiter
                finally:
                    stream.window_waiter = None
                continue
            last = size == len(view)
            # the body itself when it goes in one frame (a watch's event line is shared by its watchers): no copy
            piece = body if last and size == len(body) else bytes(view[:size])
            conn.send_data(stream.id, piece, end_stream=last and not more)
            view = view[size:]
            self._flush()
        if not more:
            if not body:
                conn.end_stream(stream.id)
                self._flush()
            stream.done = True
            stream.wake()  # a receive() waiting for the end of the request: it is over

    async def _drained(self) -> None:
        if self._drain is None:
            self._drain = self.loop.create_future()
        await self._drain
