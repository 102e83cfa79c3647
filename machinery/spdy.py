"""SPDY/3.1 framing and a server-side stream session, as kubectl ≤ 1.29 speaks it for exec, attach, cp and
port-forward (upstream k8s.io/apimachinery/pkg/util/httpstream/spdy on moby/spdystream, whose spdy/read.go,
write.go and types.go are the framing followed here; the protocol is the SPDY draft 3.1).

No maintained Python SPDY library exists (PyPI: python-spdylay 0.1.2 of 2012, a binding; spdy-py 0.2.0 of 2021,
partial), so the framing is written once here:

- `Framer`: bytes ↔ frames. Control frames (SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS,
  WINDOW_UPDATE) and data frames with their FIN flag; header blocks compressed with zlib on one stream per
  direction primed with SPDY/3's dictionary, as spdystream does. `feed` takes bytes as they arrive (a frame may
  come split over reads, or many in one) and returns the whole frames; a malformed one raises `ProtocolError`.
- `Session`: the server side of one connection as an asyncio protocol: the peer's streams (each SYN_STREAM is
  answered with a SYN_REPLY, as httpstream/spdy's server does) come out of `accept()`, each with its headers, its
  data read until the peer's FIN, written and half-closed (FIN) from here; PINGs are answered. spdystream does no
  flow control (WINDOW_UPDATE is ignored there and here); reading the connection pauses while more than
  `HIGH_WATER` bytes wait unread, and writers wait (`drain`) while the transport's buffer is full.
- `serve_messages`: the same session carried in messages instead of a byte stream (kubectl >= 1.30 tunnels its
  port-forward SPDY session in websocket binary messages: client-go tools/portforward/tunneling_connection.go).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02
MAX_DATA_LENGTH = (1 << 24) - 1
# RST_STREAM status codes
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, UNSUPPORTED_VERSION, CANCEL, INTERNAL_ERROR = 1, 2, 3, 4, 5, 6
# GOAWAY status codes
GOAWAY_OK, GOAWAY_PROTOCOL_ERROR, GOAWAY_INTERNAL_ERROR = 0, 1, 2
# a header block may not decompress to more than this (a zlib bomb ends the connection instead)
MAX_HEADER_BLOCK = 1 << 20

_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location", "content-md5",
    "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after",
    "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie",
    "keep-alive", "origin"
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
# the SPDY/3 header compression dictionary (draft 3, 2.6.10.1): length-prefixed words, then the tail
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()

Headers = dict[str, list[str]]


class ProtocolError(Exception):
    """A frame that cannot be read: the connection ends (GOAWAY with PROTOCOL_ERROR)."""


@dataclass
class DataFrame:
    stream_id: int
    data: bytes | memoryview
    flags: int = 0


@dataclass
class SynStream:
    stream_id: int
    headers: Headers
    flags: int = 0
    associated_to: int = 0
    priority: int = 0
    slot: int = 0


@dataclass
class SynReply:
    stream_id: int
    headers: Headers
    flags: int = 0


@dataclass
class RstStream:
    stream_id: int
    status: int
    flags: int = 0


@dataclass
class Settings:
    entries: list[tuple[int, int, int]] = field(default_factory=list)  # (flags, id, value)
    flags: int = 0


@dataclass
class Ping:
    id: int
    flags: int = 0


@dataclass
class GoAway:
    last_good_stream_id: int
    status: int = GOAWAY_OK
    flags: int = 0


@dataclass
class HeadersFrame:
    stream_id: int
    headers: Headers
    flags: int = 0


@dataclass
class WindowUpdate:
    stream_id: int
    delta: int
    flags: int = 0


Frame = DataFrame | SynStream | SynReply | RstStream | Settings | Ping | GoAway | HeadersFrame | WindowUpdate


def encode_header_block(headers: Headers) -> bytes:
    """The uncompressed block: a 32-bit count, then length-prefixed lowercase names and NUL-joined values."""
    out = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        n = name.lower().encode()
        v = "\x00".join(values).encode()
        out += [struct.pack(">I", len(n)), n, struct.pack(">I", len(v)), v]
    return b"".join(out)


def decode_header_block(block: bytes) -> Headers:
    try:
        (count,) = struct.unpack_from(">I", block, 0)
        offset = 4
        headers: Headers = {}
        for _ in range(count):
            (length,) = struct.unpack_from(">I", block, offset)
            name = block[offset + 4:offset + 4 + length]
            offset += 4 + length
            (length,) = struct.unpack_from(">I", block, offset)
            value = block[offset + 4:offset + 4 + length]
            if len(value) != length:
                raise ProtocolError("header block shorter than its lengths")
            offset += 4 + length
            key = name.decode()
            if not key or key != key.lower():
                raise ProtocolError(f"header name {key!r} is empty or not lowercase")
            if key in headers:
                raise ProtocolError(f"header {key!r} appears twice")
            headers[key] = value.decode().split("\x00")
    except (struct.error, UnicodeDecodeError) as e:
        raise ProtocolError(f"malformed header block: {e}") from None
    if offset != len(block):
        raise ProtocolError("trailing bytes after the header block")
    return headers


class Framer:
    """One connection's frames, both ways (spdy/read.go, write.go): its own zlib stream per direction."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._compress = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY,
                                          zdict=DICTIONARY)
        self._decompress = zlib.decompressobj(15, zdict=DICTIONARY)

    # -- reading ------------------------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Frame]:
        """The whole frames in what has arrived so far; the rest waits for more bytes."""
        frames: list[Frame] = []
        if len(self._buffer) == 8:  # a frame's head alone, as kubectl's tunnel sends it (the payload follows in a
            (length,) = struct.unpack_from(">I", self._buffer, 4)  # message of its own): the payload is not copied
            length &= 0xFFFFFF
            if len(data) >= length:
                head = bytes(self._buffer)
                self._buffer.clear()
                frame = self._parse(head, data if len(data) == length else data[:length])
                if frame is not None:
                    frames.append(frame)
                data = data[length:]
        self._buffer += data
        while len(self._buffer) >= 8:
            (length,) = struct.unpack_from(">I", self._buffer, 4)
            length &= 0xFFFFFF
            if len(self._buffer) < 8 + length:
                break
            head = bytes(self._buffer[:8])
            payload = bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            frame = self._parse(head, payload)
            if frame is not None:
                frames.append(frame)
        return frames

    def _headers(self, compressed: bytes) -> Headers:
        try:
            block = self._decompress.decompress(compressed, MAX_HEADER_BLOCK)
        except zlib.error as e:
            raise ProtocolError(f"header block does not decompress: {e}") from None
        if self._decompress.unconsumed_tail:
            raise ProtocolError(f"header block larger than {MAX_HEADER_BLOCK} bytes")
        return decode_header_block(block)

    def _parse(self, head: bytes, payload: bytes) -> Frame | None:
        (first, flags_length) = struct.unpack(">II", head)
        flags = flags_length >> 24
        if not first & 0x80000000:
            stream_id = first & 0x7FFFFFFF
            if stream_id == 0:
                raise ProtocolError("data frame on stream 0")
            return DataFrame(stream_id, payload, flags)
        version = (first >> 16) & 0x7FFF
        kind = first & 0xFFFF
        if version != VERSION:
            raise ProtocolError(f"unsupported SPDY version {version}")
        try:
            if kind == SYN_STREAM:
                stream_id, assoc, prio = struct.unpack_from(">IIH", payload)
                frame: Frame = SynStream(stream_id & 0x7FFFFFFF, self._headers(payload[10:]), flags,
                                         assoc & 0x7FFFFFFF, prio >> 13, prio & 0xFF)
            elif kind == SYN_REPLY:
                (stream_id,) = struct.unpack_from(">I", payload)
                frame = SynReply(stream_id & 0x7FFFFFFF, self._headers(payload[4:]), flags)
            elif kind == HEADERS:
                (stream_id,) = struct.unpack_from(">I", payload)
                frame = HeadersFrame(stream_id & 0x7FFFFFFF, self._headers(payload[4:]), flags)
            elif kind == RST_STREAM:
                stream_id, status = struct.unpack(">II", payload)
                frame = RstStream(stream_id & 0x7FFFFFFF, status, flags)
            elif kind == SETTINGS:
                (count,) = struct.unpack_from(">I", payload)
                if len(payload) != 4 + 8 * count:
                    raise ProtocolError("SETTINGS length does not match its entries")
                entries = []
                for i in range(count):
                    flag_id, value = struct.unpack_from(">II", payload, 4 + 8 * i)
                    entries.append((flag_id >> 24, flag_id & 0xFFFFFF, value))
                frame = Settings(entries, flags)
            elif kind == PING:
                (ping_id,) = struct.unpack(">I", payload)
                frame = Ping(ping_id, flags)
            elif kind == GOAWAY:
                last, status = struct.unpack(">II", payload)
                frame = GoAway(last & 0x7FFFFFFF, status, flags)
            elif kind == WINDOW_UPDATE:
                stream_id, delta = struct.unpack(">II", payload)
                frame = WindowUpdate(stream_id & 0x7FFFFFFF, delta & 0x7FFFFFFF, flags)
            else:
                return None  # unknown control frames are ignored (draft 3, 2.2.1)
        except struct.error as e:
            raise ProtocolError(f"control frame of type {kind} with a malformed payload: {e}") from None
        if isinstance(frame, (SynStream, SynReply, HeadersFrame, RstStream)) and frame.stream_id == 0:
            raise ProtocolError(f"control frame of type {kind} on stream 0")
        return frame

    # -- writing ------------------------------------------------------------------------------------------

    def _compressed(self, headers: Headers) -> bytes:
        return self._compress.compress(encode_header_block(headers)) + self._compress.flush(zlib.Z_SYNC_FLUSH)

    def encode(self, frame: Frame) -> bytes:
        if isinstance(frame, DataFrame):
            if len(frame.data) > MAX_DATA_LENGTH:
                raise ValueError("data frame too long")
            return struct.pack(">II", frame.stream_id & 0x7FFFFFFF, (frame.flags << 24) | len(frame.data)) + frame.data
        if isinstance(frame, SynStream):
            kind = SYN_STREAM
            payload = struct.pack(">IIBB", frame.stream_id, frame.associated_to, (frame.priority & 7) << 5,
                                  frame.slot) + self._compressed(frame.headers)
        elif isinstance(frame, SynReply):
            kind, payload = SYN_REPLY, struct.pack(">I", frame.stream_id) + self._compressed(frame.headers)
        elif isinstance(frame, HeadersFrame):
            kind, payload = HEADERS, struct.pack(">I", frame.stream_id) + self._compressed(frame.headers)
        elif isinstance(frame, RstStream):
            kind, payload = RST_STREAM, struct.pack(">II", frame.stream_id, frame.status)
        elif isinstance(frame, Settings):
            kind = SETTINGS
            payload = struct.pack(">I", len(frame.entries)) + b"".join(
                struct.pack(">II", (f << 24) | i, v) for f, i, v in frame.entries)
        elif isinstance(frame, Ping):
            kind, payload = PING, struct.pack(">I", frame.id)
        elif isinstance(frame, GoAway):
            kind, payload = GOAWAY, struct.pack(">II", frame.last_good_stream_id, frame.status)
        else:
            kind, payload = WINDOW_UPDATE, struct.pack(">II", frame.stream_id, frame.delta)
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (frame.flags << 24) | len(payload)) + payload


# -- the server side of a connection ------------------------------------------------------------------------


class Stream:
    """One stream the peer opened: its headers, its data until the peer's FIN, and writes from here."""

    def __init__(self, session: Session, stream_id: int, headers: Headers, remote_closed: bool) -> None:
        self.session = session
        self.id = stream_id
        self.headers = headers
        self._chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.remote_closed = remote_closed
        self.local_closed = False
        self.reset = False
        if remote_closed:
            self._chunks.put_nowait(None)

    def header(self, name: str) -> str | None:
        values = self.headers.get(name.lower())
        return values[0] if values else None

    async def read(self) -> bytes | None:
        """The next data the peer sent; None once it finished the stream (FIN, RST or the connection's end)."""
        chunk = await self._chunks.get()
        if chunk is None:
            self._chunks.put_nowait(None)  # every later read sees the end too
            return None
        self.session._consumed(len(chunk))
        return chunk

    async def read_chunks(self, limit: int = 1 << 20) -> list[bytes] | None:
        """What the peer sent that waits here, at least one chunk and then as many as are queued (up to about
        `limit` bytes), so a relay sends them on as one message; None once the peer finished the stream."""
        first = await self.read()
        if first is None:
            return None
        chunks, size = [first], len(first)
        while size < limit and not self._chunks.empty():
            chunk = self._chunks.get_nowait()
            if chunk is None:  # the end is always the last thing queued: it stays for the next read
                self._chunks.put_nowait(None)
                break
            self.session._consumed(len(chunk))
            chunks.append(chunk)
            size += len(chunk)
        return chunks

    def _data(self, data: bytes, fin: bool) -> None:
        if self.remote_closed:
            return
        if data:
            self._chunks.put_nowait(data)
            self.session._buffered(len(data))
        if fin:
            self.remote_closed = True
            self._chunks.put_nowait(None)
            self._forget_if_done()

    def _end(self) -> None:
        if not self.remote_closed:
            self.remote_closed = True
            self._chunks.put_nowait(None)
        self._forget_if_done()

    def _forget_if_done(self) -> None:
        """Closed both ways: the session no longer routes frames to it (a long port-forward opens many)."""
        if self.remote_closed and self.local_closed:
            self.session.streams.pop(self.id, None)

    async def write(self, data: bytes | memoryview) -> None:
        if self.local_closed or self.reset or not data:
            return
        if len(data) <= 1 << 16:
            self.session.send(DataFrame(self.id, data))
        else:  # 64 KiB frames in one write (one message when the session is carried in messages)
            self.session.send_many([DataFrame(self.id, data[i:i + (1 << 16)]) for i in range(0, len(data), 1 << 16)])
        await self.session.drain()

    def close(self) -> None:
        """Half-close from here (an empty data frame with FIN)."""
        if not self.local_closed and not self.reset:
            self.local_closed = True
            self.session.send(DataFrame(self.id, b"", FLAG_FIN))
            self._forget_if_done()

    def cancel(self, status: int = CANCEL) -> None:
        if not self.reset:
            self.reset = self.local_closed = True
            self.session.send(RstStream(self.id, status))
            self._end()


class Session(asyncio.Protocol):
    """The server side of one SPDY connection (spdystream's Connection with httpstream/spdy's server handler):
    use it as the connection's protocol; streams the peer opens come out of `accept()`."""

    HIGH_WATER = 1 << 20

    def __init__(self) -> None:
        self.framer = Framer()
        self.transport: asyncio.Transport | None = None
        self.streams: dict[int, Stream] = {}
        self._incoming: asyncio.Queue[Stream | None] = asyncio.Queue()
        self._last_peer_stream = 0
        self._unread = 0
        self._reading_paused = False
        self._writable = asyncio.Event()
        self._writable.set()
        self.closed = asyncio.Event()
        self.error: str | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.closed.is_set():
            return
        try:
            frames = self.framer.feed(data)
        except ProtocolError as e:
            frames = []
            self._protocol_error(str(e))
        for frame in frames:
            self._handle(frame)

    def eof_received(self) -> bool | None:
        self._finish()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._writable.set()
        self._finish()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # frames in
    def _handle(self, frame: Frame) -> None:
        stream: Stream | None
        if isinstance(frame, SynStream):
            if frame.stream_id % 2 != 1 or frame.stream_id <= self._last_peer_stream:
                self.send(RstStream(frame.stream_id, PROTOCOL_ERROR))
                return
            self._last_peer_stream = frame.stream_id
            stream = Stream(self, frame.stream_id, frame.headers, bool(frame.flags & FLAG_FIN))
            self.streams[frame.stream_id] = stream
            self.send(SynReply(frame.stream_id, {}))
            self._incoming.put_nowait(stream)
        elif isinstance(frame, DataFrame):
            stream = self.streams.get(frame.stream_id)
            if stream is None:
                self.send(RstStream(frame.stream_id, INVALID_STREAM))
                return
            stream._data(bytes(frame.data), bool(frame.flags & FLAG_FIN))
        elif isinstance(frame, RstStream):
            stream = self.streams.get(frame.stream_id)
            if stream is not None:
                stream.reset = stream.local_closed = True
                stream._end()
        elif isinstance(frame, HeadersFrame):
            stream = self.streams.get(frame.stream_id)
            if stream is not None and frame.flags & FLAG_FIN:
                stream._end()
        elif isinstance(frame, Ping):
            if frame.id % 2 == 1:  # the client's pings are odd; echo them
                self.send(frame)
        elif isinstance(frame, GoAway):
            self._incoming.put_nowait(None)
        # SETTINGS, WINDOW_UPDATE, SYN_REPLY (the server opens no streams): nothing to do

    def _protocol_error(self, message: str) -> None:
        log.info("spdy: protocol error, closing the connection: %s", message)
        self.error = message
        self.send(GoAway(self._last_peer_stream, GOAWAY_PROTOCOL_ERROR))
        if self.transport is not None:
            self.transport.close()
        self._finish()

    def _finish(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for stream in list(self.streams.values()):
            stream._end()
        self._incoming.put_nowait(None)

    # flow
    def _buffered(self, n: int) -> None:
        self._unread += n
        if self._unread > self.HIGH_WATER and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    def _consumed(self, n: int) -> None:
        self._unread -= n
        if self._reading_paused and self._unread <= self.HIGH_WATER // 2 and self.transport is not None:
            self._reading_paused = False
            with contextlib.suppress(Exception):
                self.transport.resume_reading()

    # frames out
    def send(self, frame: Frame) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(self.framer.encode(frame))

    def send_many(self, frames: list[Frame]) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(b"".join(self.framer.encode(frame) for frame in frames))

    async def drain(self) -> None:
        if not self._writable.is_set() and not self.closed.is_set():
            await self._writable.wait()

    async def accept(self) -> Stream | None:
        """The next stream the peer opens; None when the connection ends or the peer goes away."""
        stream = await self._incoming.get()
        if stream is None:
            self._incoming.put_nowait(None)
        return stream

    def close(self) -> None:
        """GOAWAY, then the connection's end."""
        if self.transport is not None and not self.transport.is_closing():
            self.send(GoAway(self._last_peer_stream, GOAWAY_OK))
            self.transport.close()
        self._finish()


# -- a session carried in messages ----------------------------------------------------------------------------


class MessageTransport(asyncio.Transport):
    """A Session's transport over message-based I/O: writes are sent in order by one task through `send`."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        super().__init__()
        self._send = send
        self._outgoing: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._closing = False
        self.reading = asyncio.Event()
        self.reading.set()
        self.pump = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        try:
            while (data := await self._outgoing.get()) is not None:
                await self._send(data)
        except Exception as e:  # the carrier is gone: nothing more can be sent
            log.info("spdy: the message carrier failed: %s", e)
            self._closing = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closing:
            self._outgoing.put_nowait(bytes(data))

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._outgoing.put_nowait(None)

    def pause_reading(self) -> None:
        self.reading.clear()

    def resume_reading(self) -> None:
        self.reading.set()


async def serve_messages(session: Session, receive: Callable[[], Awaitable[bytes | None]],
                         send: Callable[[bytes], Awaitable[None]]) -> None:
    """Feed `session` the messages from `receive` (None: the carrier ended) and send what it writes through
    `send`, until the carrier ends or the session closes; whatever consumes the session's streams runs beside."""
    transport = MessageTransport(send)
    session.connection_made(transport)
    try:
        while not session.closed.is_set():
            await transport.reading.wait()
            message = await receive()
            if message is None:
                break
            session.data_received(message)
    finally:
        session.connection_lost(None)
        transport.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(transport.pump, 5)
