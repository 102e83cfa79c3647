"""What machinery/tls.py's HTTP protocol keeps per connection, as thousands of idle keep-alive connections and
watches each pay for it: a finished request's cycle and scope are let go while the connection waits for the next;
a long-lived response learns that its client left from the connection (on_disconnect), with no task waiting on
receive(), and asks for small TLS writes (small_writes) for itself only; a client's connections share one decoded
certificate. A real uvicorn server with the cluster PKI's TLS on loopback."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from apiserver.auth import pki
from machinery.tls import (
    CONNECTION_SCOPE_KEY,
    PacedWrites,
    TLSHttpProtocol,
    on_disconnect,
    server_ssl_context,
    small_writes,
    tls_options,
)


class App:
    def __init__(self) -> None:
        self.left = asyncio.Event()  # the stream's client went away
        self.pieces: list[int] = []  # the connection's piece size during each response
        self.peercerts: list[Any] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.peercerts.append(scope.get("peercert"))
        conn = scope[CONNECTION_SCOPE_KEY]
        if scope["path"] == "/stream":
            assert on_disconnect(scope, self.left.set)
            small_writes(scope)
            self.pieces.append(conn.paced.piece)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"x" * 10_000 + b"\n", "more_body": True})
            if scope["query_string"] == b"end":
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await asyncio.wait_for(self.left.wait(), 10)  # only the connection can tell: nobody reads receive()
            return
        self.pieces.append(conn.paced.piece)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> pki.Pki:
    return pki.ensure_pki(tmp_path_factory.mktemp("pki"), "https://127.0.0.1:1")


@pytest.fixture
async def served(layout: pki.Pki) -> AsyncIterator[tuple[App, uvicorn.Server, int, ssl.SSLContext]]:
    app = App()
    context = server_ssl_context(str(layout.serving_cert), str(layout.serving_key), str(layout.ca_cert))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="warning",
                                           **tls_options(context)))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:
            await asyncio.sleep(0.01)
    client = ssl.create_default_context(cafile=str(layout.ca_cert))
    client.load_cert_chain(layout.cert("admin"), layout.key("admin"))
    yield app, server, server.servers[0].sockets[0].getsockname()[1], client
    server.should_exit = True
    await asyncio.wait_for(task, 10)


async def _connect(port: int, client: ssl.SSLContext) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, ssl=client)


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str) -> bytes:
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200"), head
    return head


def _protocol(server: uvicorn.Server) -> TLSHttpProtocol:
    (conn,) = server.server_state.connections
    assert isinstance(conn, TLSHttpProtocol)
    return conn


async def _until(condition: Any) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.01)


async def test_an_idle_keep_alive_connection_lets_go_of_its_last_request(served: Any) -> None:
    _app, server, port, client = served
    reader, writer = await _connect(port, client)
    try:
        await _get(reader, writer, "/plain")
        assert await asyncio.wait_for(reader.readexactly(2), 10) == b"ok"
        conn = _protocol(server)
        await _until(lambda: conn.cycle is None)
        assert conn.scope is None and conn.headers == []
        await _get(reader, writer, "/plain")  # the connection is still kept alive and serves the next one
        assert await asyncio.wait_for(reader.readexactly(2), 10) == b"ok"
    finally:
        writer.close()


async def test_a_stream_learns_from_the_connection_that_its_client_left(served: Any) -> None:
    app, server, port, client = served
    reader, writer = await _connect(port, client)
    await _get(reader, writer, "/stream")
    await asyncio.wait_for(reader.readuntil(b"\n"), 10)  # the first chunk
    assert not app.left.is_set()
    writer.close()
    await asyncio.wait_for(app.left.wait(), 10)
    await _until(lambda: not server.server_state.tasks)  # the request's task ended with it


async def test_small_writes_last_for_one_response_and_certificates_are_shared(served: Any) -> None:
    app, _server, port, client = served
    reader, writer = await _connect(port, client)
    other_reader, other_writer = await _connect(port, client)
    try:
        await _get(reader, writer, "/stream?end")
        body = await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 10)
        assert b"x" * 100 in body
        await _get(reader, writer, "/plain")
        assert await asyncio.wait_for(reader.readexactly(2), 10) == b"ok"
        await _get(other_reader, other_writer, "/plain")
        assert await asyncio.wait_for(other_reader.readexactly(2), 10) == b"ok"
    finally:
        writer.close()
        other_writer.close()
    assert app.pieces == [PacedWrites.SMALL_PIECE, PacedWrites.PIECE, PacedWrites.PIECE]
    first, second, third = app.peercerts
    assert first["subject"] and first is second is third  # one decoded certificate for both connections
