"""machinery/tls.py's switch to another protocol than websocket (Go's http.Hijacker for ASGI): the app sets the
protocol and sends a 101 through the ASGI send; the server writes that head and hands the connection over, bytes
sent early included. An upgrade the app refuses closes the connection after the answer; plain requests keep
theirs. A real uvicorn server on loopback with the apiserver's HTTP protocol."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from machinery.tls import UPGRADE_SCOPE_KEY, TLSHttpProtocol, Upgrade


class Shout(asyncio.Protocol):
    """The protocol switched to: answers every read in upper case."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data.upper())


seen: list[str] = []


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    upgrade: Upgrade | None = scope.get(UPGRADE_SCOPE_KEY)
    seen.append(upgrade.token if upgrade else "-")
    if scope["path"] == "/switch" and upgrade is not None:
        if scope["query_string"] == b"slow":
            await asyncio.sleep(0.3)  # as the apiserver dials the kubelet before it switches
        upgrade.protocol = Shout()
        await send({"type": "http.response.start", "status": 101, "headers": [(b"upgrade", b"shout/1")]})
        assert upgrade.switched
        return
    await send({"type": "http.response.start", "status": 400 if upgrade else 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"no" if upgrade else b"ok"})


@pytest.fixture
async def port() -> AsyncIterator[int]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, http=TLSHttpProtocol, lifespan="off",
                                           log_level="warning"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:
            await asyncio.sleep(0.01)
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    await asyncio.wait_for(task, 10)


UPGRADE = b"Connection: Upgrade\r\nUpgrade: shout/1\r\nContent-Length: 0\r\n"


async def _head(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)


async def test_the_app_switches_the_connection(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /switch HTTP/1.1\r\nHost: x\r\n" + UPGRADE + b"\r\n")
    head = await _head(reader)
    assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n") and b"upgrade: shout/1\r\n" in head
    assert b"transfer-encoding" not in head and b"content-length" not in head
    writer.write(b"hello")
    assert await asyncio.wait_for(reader.readexactly(5), 10) == b"HELLO"
    writer.close()
    assert seen[-1] == "shout/1"


async def test_bytes_sent_before_the_101_reach_the_new_protocol(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /switch?slow HTTP/1.1\r\nHost: x\r\n" + UPGRADE + b"\r\n")
    await writer.drain()
    await asyncio.sleep(0.05)  # the head is parsed; the app switches 0.3 s later
    writer.write(b"early")
    await _head(reader)
    assert await asyncio.wait_for(reader.readexactly(5), 10) == b"EARLY"
    writer.close()


async def test_a_refused_upgrade_closes_and_plain_requests_keep_alive(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /other HTTP/1.1\r\nHost: x\r\n" + UPGRADE + b"\r\n")
    head = await _head(reader)
    assert head.startswith(b"HTTP/1.1 400 ") and b"connection: close" in head
    assert await asyncio.wait_for(reader.read(), 10) == b"no"  # then the end of the connection
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(2):
        writer.write(b"GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await _head(reader)).startswith(b"HTTP/1.1 200 ")
        assert await asyncio.wait_for(reader.readexactly(2), 10) == b"ok"
    writer.close()
    assert seen[-2:] == ["-", "-"]
