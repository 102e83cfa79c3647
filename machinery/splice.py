"""One connection spliced to another, byte for byte, after an HTTP upgrade (upstream's UpgradeAwareHandler copies a
hijacked connection to the backend's the same way): the kubelet's port-forward to the runtime's streaming server,
and the apiserver's pods/services/nodes proxy to the backend that answered the upgrade with 101.

The side that dials the backend sends the upgrade request itself and reads the backend's answer head
(`SpliceSide(done, handshake=True)`, then `head`); the client's side is joined to it once the client has been sent
the 101. Either side ending ends the other, after what is still buffered for it (at most SPLICE_CLOSE_GRACE).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import Response

from machinery.tls import Upgrade

SPLICE_CLOSE_GRACE = 10.0  # after one side ended, how long the other has to take what is still buffered for it
MAX_RESPONSE_HEAD = 64 << 10


class SpliceSide(asyncio.Protocol):
    """One connection of a splice: what it reads is written to the other side's transport; when the other side
    cannot take more (its transport paused this side's writing), this side stops reading. Before the sides are
    joined, what arrives waits in `pending` (the runtime's answer to the handshake: its head, then early frames)."""

    def __init__(self, done: asyncio.Future[None], handshake: bool = False) -> None:
        self.transport: asyncio.Transport | None = None
        self.other: SpliceSide | None = None
        self.pending = bytearray()
        # the runtime's side first reads the answer to the kubelet's handshake
        self.head: asyncio.Future[bytes] | None = asyncio.get_running_loop().create_future() if handshake else None
        self.lost = False
        self.done = done
        self.arrived = asyncio.Event()  # set whenever bytes arrive unjoined, or the connection ends

    def join(self, other: SpliceSide) -> None:
        self.other, other.other = other, self
        for side in (self, other):
            if side.pending and side.other is not None and side.other.transport is not None:
                side.other.transport.write(bytes(side.pending))
                side.pending.clear()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        other = self.other
        if other is not None and other.transport is not None:
            other.transport.write(data)
            return
        self.pending += data
        self.arrived.set()
        if self.head is not None and not self.head.done():
            end = self.pending.find(b"\r\n\r\n")
            if end >= 0:
                self.head.set_result(bytes(self.pending[:end + 4]))
                del self.pending[:end + 4]
            elif len(self.pending) > MAX_RESPONSE_HEAD:
                self.head.set_exception(ConnectionError("the runtime's answer has no end of headers"))

    def eof_received(self) -> bool | None:
        return None  # the transport closes; connection_lost ends the other side

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.arrived.set()
        if self.head is not None and not self.head.done():
            self.head.set_exception(ConnectionError(f"the runtime closed the connection: {exc or 'EOF'}"))
        other = self.other
        if other is None or other.lost:
            if not self.done.done():
                self.done.set_result(None)
            return
        if other.transport is not None:
            other.transport.close()  # after what is buffered for it
            asyncio.get_running_loop().call_later(SPLICE_CLOSE_GRACE, _abort_if_open, other)

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            with contextlib.suppress(Exception):
                self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            with contextlib.suppress(Exception):
                self.other.transport.resume_reading()


def handshake_request(path_and_query: str, host: str, key: str, protocol: str | None) -> bytes:
    """The websocket upgrade the kubelet sends the runtime for a client's: the client's own Sec-WebSocket-Key, so
    the runtime's Sec-WebSocket-Accept is the one the client checks; no extensions (nothing compressed)."""
    lines = [f"GET {path_and_query} HTTP/1.1", f"Host: {host}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    if protocol:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_response_head(head: bytes) -> tuple[int, list[tuple[str, str]]]:
    """(status code, headers with lowercase names) of an HTTP/1.1 response head; ValueError if malformed."""
    status_line, *lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"malformed status line {status_line[:80]!r}")
    headers = []
    for line in lines:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"malformed header line {line[:80]!r}")
            headers.append((name.strip().lower(), value.strip()))
    return int(parts[1]), headers


def _abort_if_open(side: SpliceSide) -> None:
    if not side.lost and side.transport is not None:
        side.transport.abort()


class SpliceUpgrade(Response):
    """The backend's 101 to the client (through the ASGI send, as machinery/tls.py's Upgrade asks), then the
    client's connection joined to the backend's (`runtime`, a SpliceSide that made the handshake) until both end."""

    def __init__(self, upgrade: Upgrade, runtime: SpliceSide, done: asyncio.Future[None],
                 headers: list[tuple[bytes, bytes]]) -> None:
        super().__init__(status_code=101)
        self.upgrade = upgrade
        self.runtime = runtime
        self.done = done
        self.answer = headers

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        client = SpliceSide(self.done)
        self.upgrade.protocol = client
        try:
            await send({"type": "http.response.start", "status": 101, "headers": self.answer})
            if not self.upgrade.switched:
                return
            client.join(self.runtime)
            if self.runtime.lost:  # the runtime was gone before the join: nothing will end the client's side
                client.connection_lost(None)
            await self.done
        finally:
            if self.runtime.transport is not None and not self.runtime.lost:
                self.runtime.transport.close()
