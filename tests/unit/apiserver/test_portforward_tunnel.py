"""apiserver/endpoints/portforward.py: kubectl's SPDY-in-websocket port-forward session against fakes of the
websocket and of the kubelet's port-forward websocket (the real path: tests/integration/test_streaming.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from apiserver import errors
from apiserver.endpoints.portforward import serve_tunnel
from machinery import spdy


class FakeWebSocket:
    def __init__(self) -> None:
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.peer = spdy.Framer()  # decodes what the server sends
        self.frames: list[spdy.Frame] = []
        self.changed = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        return await self.incoming.get()

    async def send_bytes(self, data: bytes) -> None:
        self.frames += self.peer.feed(data)
        self.changed.set()

    async def close(self, code: int = 1000) -> None:
        pass

    async def wait(self, predicate: Any) -> None:
        async with asyncio.timeout(5):
            while not predicate(self.frames):
                self.changed.clear()
                await self.changed.wait()


class FakeKubelet:
    """The kubelet's v4 port-forward websocket for one port: port frames first, then what the test queues."""

    def __init__(self, port: int) -> None:
        self.sent: list[bytes] = []
        self.out: asyncio.Queue[bytes | None] = asyncio.Queue()
        prefix = port.to_bytes(2, "little")
        self.out.put_nowait(b"\x00" + prefix)
        self.out.put_nowait(b"\x01" + prefix)
        self.closed = False

    async def send(self, data: bytes) -> None:
        self.sent.append(data)

    def __aiter__(self) -> FakeKubelet:
        return self

    async def __anext__(self) -> bytes:
        item = await self.out.get()
        if item is None:
            raise StopAsyncIteration
        return item

    async def close(self) -> None:
        self.closed = True


def _data(frames: list[spdy.Frame], stream: int) -> tuple[bytes, bool]:
    mine = [f for f in frames if isinstance(f, spdy.DataFrame) and f.stream_id == stream]
    return b"".join(f.data for f in mine), any(f.flags & spdy.FLAG_FIN for f in mine)


async def test_a_forwarded_connection() -> None:
    ws, client = FakeWebSocket(), spdy.Framer()
    kubelets: dict[int, FakeKubelet] = {}

    async def dial(port: int) -> FakeKubelet:
        kubelets[port] = FakeKubelet(port)
        return kubelets[port]

    session = asyncio.create_task(serve_tunnel(ws, dial))  # type: ignore[arg-type]
    headers = {"port": ["8080"], "requestid": ["0"]}
    error = client.encode(spdy.SynStream(1, {"streamtype": ["error"], **headers}))
    await ws.incoming.put({"type": "websocket.receive", "bytes": error
                           + client.encode(spdy.DataFrame(1, b"", spdy.FLAG_FIN))
                           + client.encode(spdy.SynStream(3, {"streamtype": ["data"], **headers}))
                           + client.encode(spdy.DataFrame(3, b"hello"))
                           + client.encode(spdy.Ping(1))})
    await ws.wait(lambda fs: {f.stream_id for f in fs if isinstance(f, spdy.SynReply)} == {1, 3})
    await ws.wait(lambda fs: spdy.Ping(1) in fs)
    async with asyncio.timeout(5):
        while not kubelets.get(8080) or not kubelets[8080].sent:
            await asyncio.sleep(0.01)
    assert kubelets[8080].sent == [b"\x00hello"]
    kubelets[8080].out.put_nowait(b"\x00world")  # the pod answers; the port prefixes never reach kubectl
    kubelets[8080].out.put_nowait(None)  # and closes: both streams end
    await ws.wait(lambda fs: _data(fs, 3)[1] and _data(fs, 1)[1])
    assert _data(ws.frames, 3) == (b"world", True)
    assert _data(ws.frames, 1) == (b"", True)
    assert kubelets[8080].closed
    await ws.incoming.put({"type": "websocket.disconnect"})
    await asyncio.wait_for(session, 5)


async def test_the_kubelets_error_reaches_the_error_stream() -> None:
    ws, client = FakeWebSocket(), spdy.Framer()

    async def dial(port: int) -> FakeKubelet:
        raise errors.ApiError(500, "InternalError", "error dialing backend: refused")

    session = asyncio.create_task(serve_tunnel(ws, dial))  # type: ignore[arg-type]
    headers = {"port": ["81"], "requestid": ["7"]}
    error = client.encode(spdy.SynStream(1, {"streamtype": ["error"], **headers}))
    await ws.incoming.put({"type": "websocket.receive", "bytes": error
                           + client.encode(spdy.SynStream(3, {"streamtype": ["data"], **headers}))})
    await ws.wait(lambda fs: _data(fs, 1)[1] and _data(fs, 3)[1])
    assert _data(ws.frames, 1) == (b"error dialing backend: refused", True)
    # a stream without a usable port is reset; a malformed frame ends the session with GOAWAY
    await ws.incoming.put({"type": "websocket.receive",
                           "bytes": client.encode(spdy.SynStream(5, {"streamtype": ["data"], "port": ["http"]}))})
    await ws.wait(lambda fs: any(isinstance(f, spdy.RstStream) and f.stream_id == 5 for f in fs))
    await ws.incoming.put({"type": "websocket.receive", "bytes": b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01"})
    await asyncio.wait_for(session, 5)
    assert ws.frames[-1] == spdy.GoAway(5, spdy.GOAWAY_PROTOCOL_ERROR)
