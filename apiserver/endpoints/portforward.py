"""pods/portforward as kubectl ≥ 1.31 speaks it (1.30 with KUBECTL_PORT_FORWARD_WEBSOCKETS=true): a websocket
with subprotocol `SPDY/3.1+portforward.k8s.io` whose binary messages carry a SPDY/3.1 session (client-go
tools/portforward/tunneling_connection.go; upstream's apiserver unwraps it in
staging/src/k8s.io/apiserver/pkg/util/proxy/streamtunnel.go and proxies SPDY to the kubelet).

In the session kubectl opens, per local connection, two streams with the headers `streamtype` (error, then
data), `port` and `requestid` (upstream pkg/kubelet/cri/streaming/portforward/httpstream.go's protocol
`portforward.k8s.io`). Every stream gets its SYN_REPLY at once; when a request's pair is complete the
apiserver dials the kubelet's websocket port-forward for that one port (endpoints/proxy.py dial_kubelet,
subprotocol v4.channel.k8s.io: channel 0 data, 1 errors, each first carrying the port) and copies:
client data → channel 0, channel 0 → the data stream, channel 1's text → the error stream (kubectl prints
it: `an error occurred forwarding L -> P: ...`); when the kubelet's side ends, both streams get FIN, so
kubectl closes the local connection instead of waiting. A client RST_STREAM or the websocket's end stops
the request. (A client's FIN on the data stream cannot be passed on: v4 channels do not half-close.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket

from apiserver import errors
from machinery import spdy31

log = logging.getLogger(__name__)

TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
Dial = Callable[[int], Awaitable[Any]]  # port → the kubelet's websocket (raises errors.ApiError)


@dataclass
class _Request:
    request_id: str
    port: int
    data_id: int = 0
    error_id: int = 0
    to_pod: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None


class _Session:
    def __init__(self, websocket: WebSocket, dial: Dial) -> None:
        self.ws = websocket
        self.dial = dial
        self.framer = spdy31.Framer()
        self.lock = asyncio.Lock()
        self.requests: dict[str, _Request] = {}
        self.by_stream: dict[int, _Request] = {}
        self.last_stream = 0

    async def send(self, *frames: bytes) -> None:
        async with self.lock:
            await self.ws.send_bytes(b"".join(frames))

    async def run(self) -> None:
        try:
            while True:
                message = await self.ws.receive()
                if message["type"] == "websocket.disconnect":
                    return
                data = message.get("bytes")
                if data is None and message.get("text") is not None:
                    data = message["text"].encode()
                if not data:
                    continue
                for frame in self.framer.feed(data):
                    if not await self.handle(frame):
                        return
        except spdy31.SpdyError as e:
            log.info("port-forward tunnel: %s", e)
            with contextlib.suppress(Exception):
                await self.send(self.framer.goaway(self.last_stream, 1))
        finally:
            tasks = [r.task for r in self.requests.values() if r.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def handle(self, frame: spdy31.Frame) -> bool:
        """One frame from kubectl; False ends the session."""
        if not frame.control:
            request = self.by_stream.get(frame.stream_id)
            if request is not None and frame.stream_id == request.data_id and frame.data:
                await request.to_pod.put(frame.data)
            return True
        if frame.type == spdy31.SYN_STREAM:
            await self.open_stream(frame)
        elif frame.type == spdy31.RST_STREAM:
            request = self.by_stream.get(frame.stream_id)
            if request is not None and request.task is not None:
                request.task.cancel()
        elif frame.type == spdy31.PING:
            await self.send(self.framer.ping(frame.value))
        elif frame.type == spdy31.GOAWAY:
            return False
        return True  # SETTINGS, WINDOW_UPDATE, HEADERS: nothing to do (no flow control, as spdystream)

    async def open_stream(self, frame: spdy31.Frame) -> None:
        self.last_stream = max(self.last_stream, frame.stream_id)
        headers = {k: v[0] if v else "" for k, v in frame.headers.items()}
        kind, port_text, request_id = headers.get("streamtype"), headers.get("port", ""), headers.get("requestid")
        try:
            port = int(port_text)
            if not 0 < port < 65536:
                raise ValueError
        except ValueError:
            log.info("port-forward tunnel: stream %d with bad port %r", frame.stream_id, port_text)
            await self.send(self.framer.rst_stream(frame.stream_id, spdy31.PROTOCOL_ERROR))
            return
        if kind not in ("data", "error"):
            await self.send(self.framer.rst_stream(frame.stream_id, spdy31.PROTOCOL_ERROR))
            return
        key = request_id if request_id is not None else f"port-{port}-{frame.stream_id}"
        request = self.requests.setdefault(key, _Request(key, port))
        if kind == "data":
            request.data_id = frame.stream_id
        else:
            request.error_id = frame.stream_id
        self.by_stream[frame.stream_id] = request
        await self.send(self.framer.syn_reply(frame.stream_id))
        if request.data_id and request.error_id and request.task is None:
            request.task = asyncio.create_task(self.forward(request))

    async def forward(self, request: _Request) -> None:
        upstream: Any = None
        try:
            try:
                upstream = await self.dial(request.port)
            except errors.ApiError as e:
                await self.send(self.framer.data(request.error_id, e.message.encode()))
                return
            await self.copy(request, upstream)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the one connection ends; the session goes on
            log.info("port-forward %s: %s", request.request_id, e)
        finally:
            if upstream is not None:
                with contextlib.suppress(Exception):
                    await upstream.close()
            with contextlib.suppress(Exception):
                await self.send(self.framer.data(request.data_id, b"", fin=True),
                                self.framer.data(request.error_id, b"", fin=True))
            self.requests.pop(request.request_id, None)
            self.by_stream.pop(request.data_id, None)
            self.by_stream.pop(request.error_id, None)

    async def copy(self, request: _Request, upstream: Any) -> None:
        async def up() -> None:
            while (data := await request.to_pod.get()) is not None:
                await upstream.send(b"\x00" + data)

        async def down() -> None:
            seen = {0: False, 1: False}  # each channel's first frame is the port
            async for message in upstream:
                if not isinstance(message, bytes) or not message:
                    continue
                channel, payload = message[0], message[1:]
                if channel not in seen:
                    continue
                if not seen[channel]:
                    seen[channel] = True
                    payload = payload[2:]
                if not payload:
                    continue
                stream = request.data_id if channel == 0 else request.error_id
                for i in range(0, len(payload), 1 << 16):
                    await self.send(self.framer.data(stream, payload[i:i + (1 << 16)]))

        tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def serve_tunnel(websocket: WebSocket, dial: Dial) -> None:
    """The SPDY session in an accepted websocket, until kubectl goes away."""
    await _Session(websocket, dial).run()
    with contextlib.suppress(Exception):
        await websocket.close(1000)
