"""SPDY/3.1 clients (kubectl ≤ 1.29) on the apiserver, bridged to the kubelet's websockets: the mirror image of
upstream's StreamTranslator (staging/src/k8s.io/apiserver/pkg/util/proxy/streamtranslator.go), which since 1.30
takes a websocket (v5.channel.k8s.io) client and speaks SPDY to the kubelet. Here the client speaks SPDY and the
kubelet websockets (machinery/spdy.py frames the SPDY side).

- remotecommand (exec, attach; `kubectl cp` is exec of tar), protocol v4.channel.k8s.io (upstream
  k8s.io/apimachinery/pkg/util/remotecommand and kubelet/pkg/cri/streaming/remotecommand/httpstream.go): the
  client opens one SPDY stream per `streamType` header (error, stdin, stdout, stderr, resize); they map onto
  the websocket's channels (stdin 0, stdout 1, stderr 2, error 3, resize 4). The client's FIN on stdin becomes
  v5's CLOSE frame `[255, 0]` when the kubelet speaks v5, the resize stream's JSON objects (one a line, Go's
  json.Encoder) become resize frames, and the kubelet's final Status on channel 3 is written to the error stream
  (its NonZeroExitCode cause is kubectl's exit code), then every stream is half-closed.
- portforward (upstream kubelet/pkg/cri/streaming/portforward/httpstream.go): per connection the client opens an
  error and a data stream carrying `port` and `requestID` headers; each pair is one websocket to the kubelet's
  port-forward for that port (upstream portforward/websocket.go: v4.channel.k8s.io, `?ports=P`, data channel 0,
  error channel 1, each channel's first frame from the kubelet beginning with the port, two bytes little
  endian). `bridge_portforward` (with `PortForwardPairs` and `PortChannels`) is that translation; the same
  session carried in websocket messages (kubectl >= 1.30's tunnel) runs through machinery/spdy.serve_messages.

Failures before the 101 (no such pod, kubelet unreachable, no common protocol) are ordinary Status answers; a
malformed frame afterwards ends the SPDY connection (GOAWAY) and the kubelet's websocket with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from apiserver import errors
from machinery import spdy
from machinery.tls import UPGRADE_SCOPE_KEY, Upgrade

log = logging.getLogger(__name__)

SPDY_31 = "spdy/3.1"
PROTOCOL_HEADER = "x-stream-protocol-version"
REMOTECOMMAND_PROTOCOLS = ("v4.channel.k8s.io",)
PORTFORWARD_PROTOCOLS = ("portforward.k8s.io",)
STREAM_CREATION_TIMEOUT = 30.0  # upstream's DefaultStreamCreationTimeout
CLIENT_CLOSE_GRACE = 10.0  # after the last Status, how long the client has to close its end
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
CHANNELS = {"stdin": STDIN, "stdout": STDOUT, "stderr": STDERR, "error": ERROR, "resize": RESIZE}


def wants_spdy(request: Request) -> bool:
    """A `Connection: Upgrade`, `Upgrade: SPDY/3.1` request."""
    connection = [t.strip().lower() for t in request.headers.get("connection", "").split(",")]
    return "upgrade" in connection and request.headers.get("upgrade", "").lower() == SPDY_31


def negotiate(offered: list[str], supported: tuple[str, ...]) -> str:
    """The protocol for X-Stream-Protocol-Version (upstream httpstream.Handshake): the client's first that the
    server supports; none offered or none in common is a 403 with upstream's message."""
    if not offered:
        raise errors.ApiError(403, "Forbidden", "unable to upgrade: X-Stream-Protocol-Version is required")
    for protocol in offered:
        if protocol in supported:
            return protocol
    raise errors.ApiError(403, "Forbidden", "unable to upgrade: unable to negotiate protocol: client supports "
                          f"[{' '.join(offered)}], server accepts [{' '.join(supported)}]")


def offered_protocols(request: Request) -> list[str]:
    return [v.strip() for value in request.headers.getlist(PROTOCOL_HEADER) for v in value.split(",") if v.strip()]


class SpdyUpgrade(Response):
    """The 101 (sent through the ASGI send, so audit and the gate see it), then `run(session)` on the connection
    until it ends; `cleanup` always runs (the kubelet's websocket)."""

    def __init__(self, protocol: str, run: Callable[[spdy.Session], Awaitable[None]],
                 cleanup: Callable[[], Awaitable[None]]) -> None:
        super().__init__(status_code=101)
        self.protocol = protocol
        self.run = run
        self.cleanup = cleanup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        upgrade: Upgrade | None = scope.get(UPGRADE_SCOPE_KEY)
        session = spdy.Session()
        try:
            if upgrade is None:  # a server without the switch (not machinery/tls.py's protocol)
                error = errors.bad_request("Upgrade request required")
                await Response(orjson.dumps(error.status()), error.code, media_type="application/json")(
                    scope, receive, send)
                return
            upgrade.protocol = session
            await send({"type": "http.response.start", "status": 101,
                        "headers": [(b"connection", b"Upgrade"), (b"upgrade", b"SPDY/3.1"),
                                    (b"x-stream-protocol-version", self.protocol.encode())]})
            if upgrade.switched:
                await self.run(session)
        finally:
            session.close()
            await self.cleanup()


# -- remotecommand: exec and attach ---------------------------------------------------------------------------


class ResizeLines:
    """The resize stream's bytes → one JSON object per resize (Go's json.Encoder ends each with a newline)."""

    def __init__(self) -> None:
        self.pending = b""

    def feed(self, data: bytes) -> list[bytes]:
        self.pending += data
        *whole, self.pending = self.pending.split(b"\n")
        return [line for line in whole if line.strip()]


def kubelet_frame(stream_type: str, data: bytes) -> bytes:
    """A client stream's data as the websocket frame for the kubelet."""
    return bytes([CHANNELS[stream_type]]) + data


def client_stream_of(frame: bytes) -> tuple[str | None, bytes]:
    """A kubelet websocket frame → (the client's stream type, its data); None for channels a client stream does
    not carry (v5's CLOSE, unknown)."""
    if not frame:
        return None, b""
    name = {STDOUT: "stdout", STDERR: "stderr", ERROR: "error"}.get(frame[0])
    return name, frame[1:]


def expected_streams(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> set[str]:
    """The streams a v4 client opens for these options (upstream remotecommand's v4 handshake)."""
    expected = {"error"}
    for name, wanted in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr and not tty), ("resize", tty)):
        if wanted:
            expected.add(name)
    return expected


async def collect_streams(session: spdy.Session, expected: set[str],
                          timeout: float = STREAM_CREATION_TIMEOUT) -> dict[str, spdy.Stream]:
    """Wait for the client's streams by their streamType (kubelet remotecommand waitStreamReply); an unexpected
    type is reset; the connection's end or the timeout raises TimeoutError/ConnectionError."""
    streams: dict[str, spdy.Stream] = {}
    async with asyncio.timeout(timeout):
        while not expected <= streams.keys():
            stream = await session.accept()
            if stream is None:
                raise ConnectionError("the client closed the connection before creating its streams")
            kind = (stream.header("streamtype") or "").lower()
            if kind not in expected or kind in streams:
                log.info("spdy: resetting a stream of unexpected type %r", kind)
                stream.cancel(spdy.REFUSED_STREAM)
                continue
            streams[kind] = stream
    return streams


def remotecommand_upgrade(request: Request, protocol: str, upstream: Any) -> SpdyUpgrade:
    """The 101 and the bridge for exec or attach, once `protocol` is negotiated (`negotiate`, before dialling) and
    the kubelet's websocket (`upstream`, offered v5 then v4) is open: the streams the request's options ask for."""
    q = request.query_params
    flags = {k: (q.get(k) or "").lower() in ("true", "1") for k in ("stdin", "stdout", "stderr", "tty")}
    expected = expected_streams(**flags)
    v5 = upstream.subprotocol == "v5.channel.k8s.io"

    async def run(session: spdy.Session) -> None:
        await bridge_remotecommand(session, upstream, expected, v5)

    async def cleanup() -> None:
        with contextlib.suppress(Exception):
            await upstream.close()

    return SpdyUpgrade(protocol, run, cleanup)


def failure_status(message: str) -> bytes:
    return orjson.dumps({"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError",
                         "code": 500})


async def bridge_remotecommand(session: spdy.Session, upstream: Any, expected: set[str], v5: bool) -> None:
    """Relay a v4 SPDY client's streams and the kubelet's websocket (`upstream`, websockets' asyncio client) until
    the kubelet ends the command (then the Status and every stream's FIN go to the client) or the client goes."""
    try:
        streams = await collect_streams(session, expected)
    except (TimeoutError, ConnectionError) as e:
        log.info("spdy: remotecommand streams not created: %s", e)
        return

    async def stdin_pump(stream: spdy.Stream) -> None:
        while (chunk := await stream.read()) is not None:
            await upstream.send(kubelet_frame("stdin", chunk))
        if v5 and not stream.reset and not session.closed.is_set():
            await upstream.send(bytes([CLOSE, STDIN]))

    async def resize_pump(stream: spdy.Stream) -> None:
        lines = ResizeLines()
        while (chunk := await stream.read()) is not None:
            for line in lines.feed(chunk):
                await upstream.send(kubelet_frame("resize", line))

    async def from_kubelet() -> None:
        status = b""
        closed_cleanly = False
        try:
            async for message in upstream:
                kind, data = client_stream_of(message if isinstance(message, bytes) else message.encode())
                if kind == "error":
                    status += data
                elif kind is not None and kind in streams:
                    await streams[kind].write(data)
            closed_cleanly = True
        except Exception as e:  # the kubelet's connection broke: the client learns it from the error stream
            log.info("spdy: the kubelet's stream ended: %s", e)
            if not status:
                status = failure_status(f"error reading from the kubelet: {e}")
        if not status and not closed_cleanly:
            status = failure_status("the kubelet closed the stream")
        for name in ("stdout", "stderr"):
            if name in streams:
                streams[name].close()
        if status:
            await streams["error"].write(status)
        streams["error"].close()

    pumps = [asyncio.create_task(stdin_pump(streams["stdin"]))] if "stdin" in streams else []
    if "resize" in streams:
        pumps.append(asyncio.create_task(resize_pump(streams["resize"])))
    down = asyncio.create_task(from_kubelet())
    client_gone = asyncio.create_task(session.closed.wait())
    try:
        await asyncio.wait({down, client_gone}, return_when=asyncio.FIRST_COMPLETED)
        if down.done():  # the command ended: the client reads the rest and closes its end
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(client_gone), CLIENT_CLOSE_GRACE)
    finally:
        for task in (*pumps, down, client_gone):
            task.cancel()
        for task in (*pumps, down, client_gone):
            with contextlib.suppress(BaseException):
                await task


# -- portforward ----------------------------------------------------------------------------------------------


@dataclass
class PortForwardRequest:
    """One forwarded connection: the client's error and data streams for one requestID and port."""
    request_id: str
    port: int
    streams: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return "error" in self.streams and "data" in self.streams


class PortForwardPairs:
    """Pairs the client's streams by requestID (upstream portforward/httpstream.go requestID: a client without
    the header gets the data stream's id minus 2, the error stream's id itself, as upstream pairs them)."""

    def __init__(self) -> None:
        self.pending: dict[str, PortForwardRequest] = {}

    def add(self, stream_id: int, headers: dict[str, list[str]], stream: Any) -> PortForwardRequest | None:
        """The request this stream completes, else None; a stream without a valid type or port raises
        ValueError with upstream's message (the caller resets the stream)."""
        kind = ((headers.get("streamtype") or [""])[0]).lower()
        if kind not in ("error", "data"):
            raise ValueError(f"invalid stream type {kind!r}")
        raw_port = (headers.get("port") or [""])[0]
        if not raw_port:
            raise ValueError("port header must be set")
        try:
            port = int(raw_port)
        except ValueError:
            raise ValueError(f"unable to parse {raw_port!r} as a port: invalid syntax") from None
        if not 0 < port < 65536:
            raise ValueError(f"port {port} must be > 0 and < 65536")
        request_id = (headers.get("requestid") or [""])[0]
        if not request_id:
            request_id = str(stream_id - 2 if kind == "data" else stream_id)
        request = self.pending.setdefault(request_id, PortForwardRequest(request_id, port))
        if request.port != port:
            raise ValueError(f"requestID {request_id} has streams for ports {request.port} and {port}")
        if kind in request.streams:
            raise ValueError(f"requestID {request_id} already has a {kind} stream")
        request.streams[kind] = stream
        if request.complete:
            del self.pending[request_id]
            return request
        return None


class PortChannels:
    """The kubelet's port-forward websocket for one port: data channel 0, error channel 1; the first frame
    on each channel from the kubelet begins with the port (uint16, little endian), which is not data."""

    DATA, ERROR = 0, 1

    def __init__(self, port: int) -> None:
        self.port = port
        self.prefix_seen = {self.DATA: False, self.ERROR: False}

    def to_kubelet(self, *data: bytes) -> bytes:
        return b"".join((bytes([self.DATA]), *data))

    def from_kubelet(self, frame: bytes) -> tuple[str | None, memoryview]:
        """("data" | "error" | None, payload) for a frame from the kubelet (a view of it, not a copy); a wrong port
        prefix raises ValueError."""
        if not frame or frame[0] not in self.prefix_seen:
            return None, memoryview(b"")
        channel, payload = frame[0], memoryview(frame)[1:]
        if not self.prefix_seen[channel]:
            if len(payload) < 2:
                raise ValueError("the kubelet's first frame on a port-forward channel is shorter than a port")
            (port,) = struct.unpack_from("<H", payload)
            if port != self.port:
                raise ValueError(f"the kubelet's channel {channel} is for port {port}, expected {self.port}")
            self.prefix_seen[channel] = True
            payload = payload[2:]
        return ("data" if channel == self.DATA else "error"), payload


async def bridge_portforward(session: spdy.Session, dial: Callable[[int], Awaitable[Any]]) -> None:
    """Serve a SPDY port-forward connection: each requestID's error and data streams become one websocket to the
    kubelet from `dial(port)` (its port-forward websocket for that port), relayed until either side ends; a
    stream with a bad type or port is reset. Returns when the client's connection ends."""
    pairs = PortForwardPairs()
    forwards: set[asyncio.Task[None]] = set()
    try:
        while (stream := await session.accept()) is not None:
            try:
                request = pairs.add(stream.id, stream.headers, stream)
            except ValueError as e:
                log.info("spdy port-forward: resetting stream %d: %s", stream.id, e)
                stream.cancel(spdy.PROTOCOL_ERROR)
                continue
            if request is not None:
                task = asyncio.create_task(forward_port(request, dial))
                forwards.add(task)
                task.add_done_callback(forwards.discard)
    finally:
        for task in list(forwards):
            task.cancel()
        for task in list(forwards):
            with contextlib.suppress(BaseException):
                await task


async def forward_port(request: PortForwardRequest, dial: Callable[[int], Awaitable[Any]]) -> None:
    """One forwarded connection: the client's data stream ↔ the kubelet's data channel; the kubelet's error
    channel to the client's error stream (upstream's message: "error forwarding port P to pod ...")."""
    data: spdy.Stream = request.streams["data"]
    error: spdy.Stream = request.streams["error"]
    try:
        upstream = await dial(request.port)
    except Exception as e:  # an ApiError (no pod, no kubelet) carries its message; anything else is named
        message = e.message if isinstance(e, errors.ApiError) else f"error forwarding port {request.port}: {e}"
        await error.write(message.encode())
        error.close()
        data.close()
        return
    channels = PortChannels(request.port)

    async def up() -> None:  # what kubectl sent meanwhile goes on as one message (kubectl writes 32 KiB at most)
        while (chunks := await data.read_chunks()) is not None:
            await upstream.send(channels.to_kubelet(*chunks))

    async def down() -> None:
        async for message in upstream:
            kind, payload = channels.from_kubelet(message if isinstance(message, bytes) else message.encode())
            if kind == "data":
                await data.write(payload)
            elif kind == "error" and payload:
                await error.write(payload)

    tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.info("spdy port-forward %s: %s", request.request_id, task.exception())
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await upstream.close()
        data.close()
        error.close()


def portforward_upgrade(protocol: str, dial: Callable[[int], Awaitable[Any]]) -> SpdyUpgrade:
    """The 101 and `bridge_portforward` for a SPDY port-forward (kubectl <= 1.29 sends no ports in the query: they
    come per connection in the streams' headers), once `protocol` is negotiated against PORTFORWARD_PROTOCOLS."""

    async def run(session: spdy.Session) -> None:
        await bridge_portforward(session, dial)

    async def cleanup() -> None:  # each forwarded connection closes its own kubelet websocket
        return None

    return SpdyUpgrade(protocol, run, cleanup)


def portforward_path(namespace: str, name: str) -> str:
    """The kubelet's port-forward endpoint (upstream /portForward/{podNamespace}/{podID})."""
    return f"/portForward/{namespace}/{name}"


def attach_query(stdin: bool, stdout: bool, stderr: bool, tty: bool, container: str) -> str:
    """The kubelet's attach query (no command; the streams and tty as for exec)."""
    flags = [(k, "true") for k, v in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr and not tty),
                                       ("tty", tty)) if v]
    return urlencode([*flags, ("container", container)])
