"""machinery/spdy.py: SPDY/3.1 frames against bytes captured from real kubectl 1.27 (exec with stdin, exec -it,
port-forward), round trips of every frame type, split reads, malformed input, and the server session's answers
on a recording transport."""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from machinery import spdy

DATA = Path(__file__).resolve().parents[2] / "data" / "spdy"


def captured(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_the_dictionary_is_spdy3s_and_kubectl_primes_with_it() -> None:
    assert len(spdy.DICTIONARY) == 1423
    assert spdy.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy.DICTIONARY.endswith(b",utf-,*,enq=0.")
    # the first SYN_STREAM's zlib header names its preset dictionary by Adler-32 (FDICT): kubectl 1.27's is ours
    first = captured("kubectl-1.27-exec-stdin.bin")
    assert first[18] & 0x20 and struct.unpack(">I", first[20:24])[0] == zlib.adler32(spdy.DICTIONARY)


def test_kubectl_127_exec_with_stdin() -> None:
    frames = spdy.Framer().feed(captured("kubectl-1.27-exec-stdin.bin"))
    syns = [f for f in frames if isinstance(f, spdy.SynStream)]
    assert [(s.stream_id, s.headers) for s in syns] == [
        (1, {"streamtype": ["error"]}), (3, {"streamtype": ["stdin"]}), (5, {"streamtype": ["stdout"]}),
        (7, {"streamtype": ["stderr"]})]
    data = [f for f in frames if isinstance(f, spdy.DataFrame)]
    assert data[0] == spdy.DataFrame(3, b"abc", 0)
    assert any(f.stream_id == 3 and f.flags & spdy.FLAG_FIN for f in data)  # stdin's end: a FIN


def test_kubectl_127_exec_tty_resize_and_cancel() -> None:
    frames = spdy.Framer().feed(captured("kubectl-1.27-exec-tty.bin"))
    assert [f.headers["streamtype"][0] for f in frames if isinstance(f, spdy.SynStream)] == \
        ["error", "stdin", "stdout", "resize"]
    assert spdy.DataFrame(7, b'{"Width":100,"Height":30}\n', 0) in frames
    assert spdy.RstStream(1, spdy.CANCEL) in frames and isinstance(frames[-1], spdy.GoAway)


def test_kubectl_127_port_forward_headers() -> None:
    frames = spdy.Framer().feed(captured("kubectl-1.27-portforward.bin"))
    syns = [f for f in frames if isinstance(f, spdy.SynStream)]
    assert [s.headers for s in syns] == [{"streamtype": ["error"], "port": ["8080"], "requestid": ["0"]},
                                        {"streamtype": ["data"], "port": ["8080"], "requestid": ["0"]}]
    assert spdy.DataFrame(3, b"ping", 0) in frames


def test_split_reads_give_the_same_frames() -> None:
    whole = captured("kubectl-1.27-exec-tty.bin")
    expected = spdy.Framer().feed(whole)
    framer = spdy.Framer()
    got: list[spdy.Frame] = []
    for i in range(len(whole)):
        got += framer.feed(whole[i:i + 1])
    assert got == expected
    framer = spdy.Framer()
    assert framer.feed(whole[:50]) + framer.feed(whole[50:]) == expected


def test_a_head_then_its_payload_in_the_next_feed() -> None:
    """kubectl's tunnel sends a data frame's head (two 4-byte messages) and its payload as messages of their own:
    the payload is taken as it came, and whatever follows it is framed as usual."""
    sender = spdy.Framer()
    one, two = sender.encode(spdy.DataFrame(1, b"x" * 32768)), sender.encode(spdy.DataFrame(3, b"yz", spdy.FLAG_FIN))
    framer = spdy.Framer()
    assert framer.feed(one[:4]) == [] and framer.feed(one[4:8]) == []
    payload = one[8:]
    got = framer.feed(payload)
    assert got == [spdy.DataFrame(1, b"x" * 32768)] and isinstance(got[0], spdy.DataFrame)
    assert got[0].data is payload  # not copied
    assert framer.feed(one[:8]) == [] and framer.feed(one[8:] + two[:5]) == [spdy.DataFrame(1, b"x" * 32768)]
    assert framer.feed(two[5:]) == [spdy.DataFrame(3, b"yz", spdy.FLAG_FIN)]
    assert framer.feed(one[:8]) == [] and framer.feed(one[8:100]) == [] and framer.feed(one[100:]) == \
        [spdy.DataFrame(1, b"x" * 32768)]  # a payload in pieces still waits for its end


ALL_FRAMES: list[spdy.Frame] = [
    spdy.SynStream(1, {"streamtype": ["stdin"], "port": ["80"]}, spdy.FLAG_FIN, 0, 3, 0),
    spdy.SynReply(1, {"multi": ["a", "b"]}),
    spdy.HeadersFrame(3, {"x": [""]}, spdy.FLAG_FIN),
    spdy.DataFrame(1, b"\x00" * 70000, spdy.FLAG_FIN),
    spdy.DataFrame(5, b""),
    spdy.RstStream(3, spdy.PROTOCOL_ERROR),
    spdy.Settings([(0, 7, 65536), (1, 4, 100)]),
    spdy.Ping(7),
    spdy.GoAway(5, spdy.GOAWAY_INTERNAL_ERROR),
    spdy.WindowUpdate(1, 1 << 20),
    spdy.SynStream(7, {"streamtype": ["data"]}),  # the second header block continues the zlib stream
]


def test_every_frame_type_round_trips() -> None:
    writer, reader = spdy.Framer(), spdy.Framer()
    wire = b"".join(writer.encode(f) for f in ALL_FRAMES)
    assert reader.feed(wire) == ALL_FRAMES


def test_unknown_control_frames_are_ignored() -> None:
    unknown = struct.pack(">HHI", 0x8003, 0x0A, 4) + b"abcd"
    assert spdy.Framer().feed(unknown + spdy.Framer().encode(spdy.Ping(1))) == [spdy.Ping(1)]


def _control(kind: int, payload: bytes, version: int = 3) -> bytes:
    return struct.pack(">HHI", 0x8000 | version, kind, len(payload)) + payload


def _block(raw: bytes) -> bytes:
    c = zlib.compressobj(zdict=spdy.DICTIONARY)
    return c.compress(raw) + c.flush(zlib.Z_SYNC_FLUSH)


@pytest.mark.parametrize(("wire", "message"), [
    (_control(spdy.PING, b"\x00\x00\x00\x01", version=2), "unsupported SPDY version 2"),
    (struct.pack(">II", 0, 3) + b"abc", "data frame on stream 0"),
    (_control(spdy.SYN_STREAM, b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00not zlib"), "does not decompress"),
    (_control(spdy.RST_STREAM, b"\x00\x00\x00\x01"), "malformed payload"),
    (_control(spdy.SETTINGS, b"\x00\x00\x00\x02" + b"\x00" * 8), "SETTINGS length"),
    (_control(spdy.SYN_REPLY, b"\x00\x00\x00\x01" + _block(b"\x00\x00\x00\x05")), "malformed header block"),
    (_control(spdy.SYN_REPLY, b"\x00\x00\x00\x01" + _block(
        b"\x00\x00\x00\x01\x00\x00\x00\x01A\x00\x00\x00\x00")), "not lowercase"),
    (_control(spdy.SYN_REPLY, b"\x00\x00\x00\x01" + _block(
        b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01a\x00\x00\x00\x00" * 2)), "appears twice"),
    (_control(spdy.SYN_REPLY, b"\x00\x00\x00\x01" + _block(b"\x00" * (spdy.MAX_HEADER_BLOCK + 10))), "larger than"),
    (_control(spdy.SYN_STREAM, b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" + _block(b"\x00\x00\x00\x00")),
     "on stream 0"),
])
def test_malformed_frames_raise_protocol_errors(wire: bytes, message: str) -> None:
    with pytest.raises(spdy.ProtocolError, match=message):
        spdy.Framer().feed(wire)


# -- the session ----------------------------------------------------------------------------------------------


class Recorder(asyncio.Transport):
    """What the session writes, decoded by the client's Framer; reading paused or not."""

    def __init__(self) -> None:
        super().__init__()
        self.client = spdy.Framer()
        self.frames: list[spdy.Frame] = []
        self.closed = False
        self.reading = True

    def write(self, data: Any) -> None:
        self.writes = getattr(self, "writes", 0) + 1
        self.frames += self.client.feed(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def _session() -> tuple[spdy.Session, Recorder, spdy.Framer]:
    session, transport = spdy.Session(), Recorder()
    session.connection_made(transport)
    return session, transport, spdy.Framer()


async def test_streams_are_replied_read_to_their_fin_and_written() -> None:
    session, transport, client = _session()
    session.data_received(client.encode(spdy.SynStream(1, {"streamtype": ["stdin"]})))
    stream = await session.accept()
    assert stream is not None and stream.header("streamType") == "stdin"
    assert transport.frames == [spdy.SynReply(1, {})]
    session.data_received(client.encode(spdy.DataFrame(1, b"ab")) + client.encode(spdy.DataFrame(1, b"c", 1)))
    assert [await stream.read(), await stream.read(), await stream.read()] == [b"ab", b"c", None]
    await stream.write(b"out")
    stream.close()
    stream.close()  # once
    assert transport.frames[1:] == [spdy.DataFrame(1, b"out"), spdy.DataFrame(1, b"", spdy.FLAG_FIN)]


async def test_a_long_write_is_64k_frames_in_one_transport_write() -> None:
    session, transport, client = _session()
    session.data_received(client.encode(spdy.SynStream(1, {"streamtype": ["data"]})))
    stream = await session.accept()
    assert stream is not None
    writes = transport.writes
    data = bytes(range(256)) * 600  # 153600 bytes
    await stream.write(memoryview(data))
    assert transport.writes == writes + 1
    assert transport.frames[1:] == [spdy.DataFrame(1, data[:65536]), spdy.DataFrame(1, data[65536:131072]),
                                    spdy.DataFrame(1, data[131072:])]


async def test_read_chunks_takes_what_is_queued_and_leaves_the_end() -> None:
    session, _, client = _session()
    session.data_received(client.encode(spdy.SynStream(1, {"streamtype": ["data"]})))
    stream = await session.accept()
    assert stream is not None
    session.data_received(b"".join(client.encode(spdy.DataFrame(1, c)) for c in (b"a", b"bc", b"def")))
    assert await stream.read_chunks(limit=3) == [b"a", b"bc"]  # up to about the limit
    session.data_received(client.encode(spdy.DataFrame(1, b"g", spdy.FLAG_FIN)))
    assert await stream.read_chunks() == [b"def", b"g"]
    assert await stream.read_chunks() is None and await stream.read() is None
    assert session._unread == 0  # every chunk taken was counted as read (reading resumes)


async def test_pings_are_echoed_and_bad_streams_refused() -> None:
    session, transport, client = _session()
    session.data_received(client.encode(spdy.Ping(3)) + client.encode(spdy.Ping(4)))
    assert transport.frames == [spdy.Ping(3)]  # the server's own (even) pings are not echoed
    session.data_received(client.encode(spdy.SynStream(2, {})))  # a client's streams are odd
    session.data_received(client.encode(spdy.DataFrame(9, b"x")))  # no such stream
    assert transport.frames[1:] == [spdy.RstStream(2, spdy.PROTOCOL_ERROR), spdy.RstStream(9, spdy.INVALID_STREAM)]


async def test_a_garbled_frame_ends_the_session_with_goaway() -> None:
    session, transport, client = _session()
    session.data_received(client.encode(spdy.SynStream(1, {"streamtype": ["stdin"]})))
    stream = await session.accept()
    assert stream is not None
    session.data_received(_control(spdy.PING, b"\x00\x00\x00\x01", version=2))
    assert transport.frames[-1] == spdy.GoAway(1, spdy.GOAWAY_PROTOCOL_ERROR)
    assert transport.closed and session.closed.is_set() and session.error
    assert await stream.read() is None and await session.accept() is None


async def test_reading_pauses_while_much_is_unread() -> None:
    session, transport, client = _session()
    session.data_received(client.encode(spdy.SynStream(1, {})))
    stream = await session.accept()
    assert stream is not None
    chunk = b"x" * 65536
    for _ in range(spdy.Session.HIGH_WATER // len(chunk) + 1):
        session.data_received(client.encode(spdy.DataFrame(1, chunk)))
    assert not transport.reading
    while not transport.reading:
        assert await stream.read() == chunk
    assert session._unread <= spdy.Session.HIGH_WATER // 2


async def test_a_reset_stream_ends_and_writes_nothing_more() -> None:
    session, transport, client = _session()
    session.data_received(client.encode(spdy.SynStream(1, {})))
    stream = await session.accept()
    assert stream is not None
    session.data_received(client.encode(spdy.RstStream(1, spdy.CANCEL)))
    assert await stream.read() is None
    await stream.write(b"late")
    assert transport.frames == [spdy.SynReply(1, {})]


async def test_streams_closed_both_ways_are_forgotten() -> None:
    session, transport, client = _session()
    session.data_received(client.encode(spdy.SynStream(1, {})) + client.encode(spdy.SynStream(3, {})))
    one, three = await session.accept(), await session.accept()
    assert one is not None and three is not None
    session.data_received(client.encode(spdy.DataFrame(1, b"", spdy.FLAG_FIN)))
    assert 1 in session.streams  # half-closed: still writable from here
    one.close()
    three.cancel()
    assert session.streams == {}
    session.data_received(client.encode(spdy.DataFrame(1, b"late")))
    assert transport.frames[-1] == spdy.RstStream(1, spdy.INVALID_STREAM)


async def test_a_session_carried_in_messages() -> None:
    """kubectl >= 1.30's port-forward tunnel: SPDY frames in websocket messages; a frame may span two."""
    client = spdy.Framer()
    incoming: asyncio.Queue[bytes | None] = asyncio.Queue()
    sent: list[spdy.Frame] = []
    reader = spdy.Framer()

    async def send(data: bytes) -> None:
        sent.extend(reader.feed(data))

    session = spdy.Session()
    served = asyncio.create_task(spdy.serve_messages(session, incoming.get, send))
    wire = client.encode(spdy.SynStream(1, {"streamtype": ["data"], "port": ["80"]})) + \
        client.encode(spdy.DataFrame(1, b"hello", spdy.FLAG_FIN))
    incoming.put_nowait(wire[:7])
    incoming.put_nowait(wire[7:])
    stream = await asyncio.wait_for(session.accept(), 5)
    assert stream is not None and stream.header("port") == "80"
    assert await stream.read() == b"hello" and await stream.read() is None
    await stream.write(b"back")
    stream.close()
    incoming.put_nowait(None)  # the websocket ends
    await asyncio.wait_for(served, 5)
    assert sent == [spdy.SynReply(1, {}), spdy.DataFrame(1, b"back"), spdy.DataFrame(1, b"", spdy.FLAG_FIN)]
    assert session.closed.is_set()
