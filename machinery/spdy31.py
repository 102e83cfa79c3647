"""SPDY/3.1 framing (the draft-3.1 spec; as moby/spdystream's spdy package reads and writes it for
client-go): frame encoding and decoding, and the header blocks with their per-direction zlib context
primed with the spec's dictionary. No flow control: spdystream neither enforces nor needs WINDOW_UPDATE,
so these are read and ignored.

Frames: a control frame is `0x8003 | type(16) | flags(8) | length(24) | payload`; a data frame is
`stream id(32, high bit 0) | flags(8) | length(24) | data`; FIN is flag 0x01 on either. No maintained
Python SPDY library exists (python-spdylay 0.1.2 of 2012, spdy-py 0.2.0 partial), hence this file.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
VERSION = 3
MAX_DATA = (1 << 24) - 1
# RST_STREAM status codes
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, CANCEL, INTERNAL_ERROR = 1, 2, 3, 5, 6

_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location", "content-md5",
    "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after",
    "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie",
    "keep-alive", "origin",
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
# the spec's header dictionary (section 2.6.10.1): each word length-prefixed, then the tail; 1423 bytes
DICTIONARY = b"".join(struct.pack("!I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()


class SpdyError(Exception):
    """A malformed frame or header block: the session ends (GOAWAY with PROTOCOL_ERROR)."""


@dataclass
class Frame:
    control: bool
    type: int  # for a data frame: 0
    flags: int
    stream_id: int = 0
    data: bytes = b""  # a data frame's payload
    headers: dict[str, list[str]] = field(default_factory=dict)
    status: int = 0  # RST_STREAM, GOAWAY
    value: int = 0  # PING id, WINDOW_UPDATE delta, GOAWAY last stream

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class Framer:
    """One side of a SPDY session: decodes the peer's bytes into frames and encodes this side's frames,
    each direction with its own header compression context (as the spec wants)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zdict=DICTIONARY)

    # -- reading ----------------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Frame]:
        """The whole frames now buffered (frames may span several transport messages)."""
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if len(self._buffer) < 8 + length:
                break
            head = bytes(self._buffer[:8])
            payload = bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            frames.append(self._decode(head, payload))
        return frames

    def _decode(self, head: bytes, payload: bytes) -> Frame:
        flags = head[4]
        if not head[0] & 0x80:
            return Frame(False, 0, flags, int.from_bytes(head[:4], "big") & 0x7FFFFFFF, data=payload)
        version = int.from_bytes(head[:2], "big") & 0x7FFF
        kind = int.from_bytes(head[2:4], "big")
        if version != VERSION:
            raise SpdyError(f"unsupported SPDY version {version}")
        frame = Frame(True, kind, flags)
        if kind in (SYN_STREAM, SYN_REPLY, RST_STREAM, HEADERS, WINDOW_UPDATE):
            if len(payload) < 4:
                raise SpdyError(f"control frame {kind} too short")
            frame.stream_id = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
        if kind == SYN_STREAM:
            if len(payload) < 10:
                raise SpdyError("SYN_STREAM too short")
            frame.headers = self._headers(payload[10:])
        elif kind in (SYN_REPLY, HEADERS):
            frame.headers = self._headers(payload[4:])
        elif kind == RST_STREAM and len(payload) >= 8:
            frame.status = int.from_bytes(payload[4:8], "big")
        elif kind == WINDOW_UPDATE and len(payload) >= 8:
            frame.value = int.from_bytes(payload[4:8], "big") & 0x7FFFFFFF
        elif kind == PING and len(payload) >= 4:
            frame.value = int.from_bytes(payload[:4], "big")
        elif kind == GOAWAY and len(payload) >= 8:
            frame.value = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            frame.status = int.from_bytes(payload[4:8], "big")
        return frame

    def _headers(self, block: bytes) -> dict[str, list[str]]:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as e:
            raise SpdyError(f"header block: {e}") from None
        try:
            (count,) = struct.unpack_from("!I", raw, 0)
            offset, headers = 4, {}
            for _ in range(count):
                (n,) = struct.unpack_from("!I", raw, offset)
                name = raw[offset + 4:offset + 4 + n].decode()
                offset += 4 + n
                (v,) = struct.unpack_from("!I", raw, offset)
                value = raw[offset + 4:offset + 4 + v].decode()
                offset += 4 + v
                headers[name.lower()] = value.split("\x00")
        except (struct.error, UnicodeDecodeError) as e:
            raise SpdyError(f"header block: {e}") from None
        return headers

    # -- writing ----------------------------------------------------------------------------------

    def _block(self, headers: dict[str, list[str]]) -> bytes:
        raw = struct.pack("!I", len(headers))
        for name, values in headers.items():
            n, v = name.lower().encode(), "\x00".join(values).encode()
            raw += struct.pack("!I", len(n)) + n + struct.pack("!I", len(v)) + v
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    @staticmethod
    def control(kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack("!HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload

    @staticmethod
    def data(stream_id: int, data: bytes, fin: bool = False) -> bytes:
        return struct.pack("!II", stream_id & 0x7FFFFFFF, ((FLAG_FIN if fin else 0) << 24) | len(data)) + data

    def syn_stream(self, stream_id: int, headers: dict[str, list[str]], fin: bool = False) -> bytes:
        """A stream of this side's (a test's client, or a server pushing nothing: kept for symmetry)."""
        return self.control(SYN_STREAM, FLAG_FIN if fin else 0,
                            struct.pack("!IIH", stream_id, 0, 0) + self._block(headers))

    def syn_reply(self, stream_id: int, headers: dict[str, list[str]] | None = None, fin: bool = False) -> bytes:
        block = self._block(headers or {})
        return self.control(SYN_REPLY, FLAG_FIN if fin else 0, struct.pack("!I", stream_id) + block)

    def rst_stream(self, stream_id: int, status: int) -> bytes:
        return self.control(RST_STREAM, 0, struct.pack("!II", stream_id, status))

    def ping(self, ident: int) -> bytes:
        return self.control(PING, 0, struct.pack("!I", ident))

    def goaway(self, last_stream_id: int, status: int = 0) -> bytes:
        return self.control(GOAWAY, 0, struct.pack("!II", last_stream_id, status))
