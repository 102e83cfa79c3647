"""machinery/spdy31.py: the SPDY/3.1 framing kubectl's port-forward tunnel carries (moby/spdystream's on the
other side), checked against frames built by hand from the draft-3.1 layout."""

from __future__ import annotations

import struct
import zlib

import pytest

from machinery import spdy31


def test_the_header_dictionary_is_the_specs() -> None:
    # 1423 bytes; its Adler-32 is the dictionary id a zlib stream primed with it carries (kubectl's does)
    assert len(spdy31.DICTIONARY) == 1423
    assert zlib.adler32(spdy31.DICTIONARY) == 0xE3C6A7C2
    assert spdy31.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy31.DICTIONARY.endswith(b"charset=iso-8859-1,utf-,*,enq=0.")


def test_syn_stream_round_trip_split_anywhere() -> None:
    """A client's SYN_STREAMs (one zlib context over both) decoded by the server, whatever the chunking."""
    client, server = spdy31.Framer(), spdy31.Framer()
    wire = (client.syn_stream(1, {"streamType": ["error"], "port": ["8080"], "requestID": ["0"]})
            + spdy31.Framer.data(1, b"", fin=True)
            + client.syn_stream(3, {"streamtype": ["data"], "port": ["8080"], "requestid": ["0"]})
            + spdy31.Framer.data(3, b"GET / HTTP/1.1\r\n\r\n"))
    frames: list[spdy31.Frame] = []
    for i in range(0, len(wire), 7):  # 7-byte pieces: every frame spans several
        frames += server.feed(wire[i:i + 7])
    assert [(f.control, f.type, f.stream_id, f.fin) for f in frames] == [
        (True, spdy31.SYN_STREAM, 1, False), (False, 0, 1, True), (True, spdy31.SYN_STREAM, 3, False),
        (False, 0, 3, False)]
    assert frames[0].headers == {"streamtype": ["error"], "port": ["8080"], "requestid": ["0"]}
    assert frames[2].headers == {"streamtype": ["data"], "port": ["8080"], "requestid": ["0"]}
    assert frames[3].data == b"GET / HTTP/1.1\r\n\r\n"


def test_control_frames_layout() -> None:
    framer = spdy31.Framer()
    assert spdy31.Framer.data(5, b"ab", fin=True) == b"\x00\x00\x00\x05\x01\x00\x00\x02ab"
    assert framer.ping(7) == b"\x80\x03\x00\x06\x00\x00\x00\x04\x00\x00\x00\x07"
    assert framer.rst_stream(3, spdy31.CANCEL) == b"\x80\x03\x00\x03\x00\x00\x00\x08\x00\x00\x00\x03\x00\x00\x00\x05"
    assert framer.goaway(9) == b"\x80\x03\x00\x07\x00\x00\x00\x08\x00\x00\x00\x09\x00\x00\x00\x00"
    reply = framer.syn_reply(1)
    assert reply[:4] == b"\x80\x03\x00\x02" and reply[8:12] == b"\x00\x00\x00\x01"
    # what a peer reads of them
    peer = spdy31.Framer()
    ping, rst, goaway, syn_reply = peer.feed(framer.ping(7) + framer.rst_stream(3, 5) + framer.goaway(9) + reply)
    assert (ping.type, ping.value) == (spdy31.PING, 7)
    assert (rst.type, rst.stream_id, rst.status) == (spdy31.RST_STREAM, 3, 5)
    assert (goaway.type, goaway.value) == (spdy31.GOAWAY, 9)
    assert (syn_reply.type, syn_reply.stream_id, syn_reply.headers) == (spdy31.SYN_REPLY, 1, {})
    window = struct.pack("!HHI", 0x8003, spdy31.WINDOW_UPDATE, 8) + struct.pack("!II", 3, 65536)
    (update,) = peer.feed(window)
    assert (update.type, update.stream_id, update.value) == (spdy31.WINDOW_UPDATE, 3, 65536)


def test_bad_input() -> None:
    with pytest.raises(spdy31.SpdyError, match="unsupported SPDY version 2"):
        spdy31.Framer().feed(struct.pack("!HHI", 0x8002, spdy31.PING, 4) + b"\0\0\0\1")
    garbage = struct.pack("!HHI", 0x8003, spdy31.SYN_STREAM, 14) + struct.pack("!IIH", 1, 0, 0) + b"nope"
    with pytest.raises(spdy31.SpdyError, match="header block"):
        spdy31.Framer().feed(garbage)
    with pytest.raises(spdy31.SpdyError, match="too short"):
        spdy31.Framer().feed(struct.pack("!HHI", 0x8003, spdy31.SYN_STREAM, 2) + b"\0\0")
    assert spdy31.Framer().feed(b"\x80\x03\x00") == []  # an incomplete frame waits for the rest
