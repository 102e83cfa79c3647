"""machinery/tls.py's PacedWrites over a real loopback TLS connection on uvloop: a large response
reaches the TLS layer a piece at a time (OpenSSL's memory buffer under uvloop grows to the largest
write it encrypts and keeps that size for the rest of the connection), smaller pieces and less pending
for a watch's stream; everything arrives, in order, and a close waits for what is still pending."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest
import uvloop

from apiserver.auth import pki
from machinery.tls import PacedWrites, server_ssl_context

BODY = bytes(range(256)) * (3 * 4096)  # 3 MiB, not one repeated byte


class Recorded:
    """The TLS transport, with the size of every write it is handed."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.writes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)

    def write(self, data: bytes | memoryview) -> None:
        self.writes.append(len(data))
        self.transport.write(data)


class Server(asyncio.Protocol):
    """Writes BODY then closes, as uvicorn's protocol does through PacedWrites, and records the
    most the TLS transport held pending after any write."""

    def __init__(self, small: bool) -> None:
        self.small = small
        self.paced: PacedWrites | None = None
        self.tls: Recorded | None = None
        self.most_pending = 0
        self.written = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tls = Recorded(transport)  # type: ignore[arg-type]  # uvloop's TLS transport
        self.paced = PacedWrites(self.tls)  # type: ignore[arg-type]
        if self.small:  # a watch's stream (machinery.tls.small_writes)
            self.paced.small()

    def data_received(self, data: bytes) -> None:
        assert self.paced is not None and self.tls is not None
        self.paced.write(BODY)
        self.paced.close()
        self.most_pending = max(self.most_pending, self.tls.get_write_buffer_size())
        self.written.set_result(None)

    def pause_writing(self) -> None:
        assert self.paced is not None
        self.paced.pause_writing()

    def resume_writing(self) -> None:
        assert self.paced is not None and self.tls is not None
        self.paced.resume_writing()
        self.most_pending = max(self.most_pending, self.tls.get_write_buffer_size())


async def exchange(root: Path, small: bool) -> tuple[bytes, Server]:
    layout = pki.ensure_pki(root, "https://127.0.0.1:1")
    server_ctx = server_ssl_context(str(layout.serving_cert), str(layout.serving_key), None)
    client_ctx = ssl.create_default_context(cafile=str(layout.ca_cert))
    protocols: list[Server] = []

    def factory() -> Server:
        protocols.append(Server(small))
        return protocols[-1]

    listener = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0, ssl=server_ctx)
    port = listener.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx, limit=1 << 16)
        writer.write(b"GET\r\n")
        await protocols[0].written  # the whole body handed over while the client has read nothing yet
        received = await reader.read()  # until the server closes, after the last piece
        writer.close()
        return received, protocols[0]
    finally:
        listener.close()


@pytest.mark.parametrize("small", [False, True], ids=["usual", "small"])
def test_a_large_response_reaches_tls_a_piece_at_a_time(tmp_path: Path, small: bool) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        received, server = runner.run(exchange(tmp_path, small))
    assert received == BODY
    assert server.tls is not None
    piece, high = (PacedWrites.SMALL_PIECE, PacedWrites.SMALL_HIGH) if small else (PacedWrites.PIECE, PacedWrites.HIGH)
    # without pacing the TLS layer took the whole 3 MiB at once (and kept a buffer that large)
    assert max(server.tls.writes) == piece and sum(server.tls.writes) == len(BODY)
    assert server.most_pending <= high + piece
