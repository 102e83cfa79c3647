"""kubelet/streaming.py's pure parts: which protocols the runtime is offered, when the kubelet translates, and
how a v5 client's frames become v4 frames (upstream's StreamTranslator does the same towards SPDY); the
port-forward splice's handshake and its copying over real loopback connections."""

from __future__ import annotations

import asyncio

import pytest

from kubelet.streaming import V4, V5, V5ToV4, runtime_subprotocols, translating
from machinery.splice import SpliceSide, handshake_request, parse_response_head


def test_v4_is_offered_after_a_v5_only_offer() -> None:
    assert runtime_subprotocols([V5]) == [V5, V4]  # kubectl ≥ 1.30
    assert runtime_subprotocols([V5, V4, "channel.k8s.io"]) == [V5, V4, "channel.k8s.io"]
    assert runtime_subprotocols([V4, V5]) == [V4, V5]
    assert runtime_subprotocols(["channel.k8s.io"]) == ["channel.k8s.io"]  # no v5: nothing to translate


def test_translates_only_when_the_runtime_took_the_added_v4() -> None:
    assert translating([V5], V4)
    assert not translating([V5], V5)  # the Docker shim speaks v5: verbatim
    assert not translating([V5, V4], V4)  # the client speaks v4 itself: verbatim
    assert not translating([V5], None)


def test_data_resize_and_empty_frames_pass_verbatim() -> None:
    t = V5ToV4(tty=True)
    for frame in (b"\x00hello", b"\x04{\"Width\":80,\"Height\":24}", b"\x00", b""):
        assert t.client_frame(frame) == frame


def test_stdin_close_with_a_tty_is_the_terminal_eof_once() -> None:
    t = V5ToV4(tty=True)
    assert t.client_frame(b"\x00echo hi\r") == b"\x00echo hi\r"
    assert t.client_frame(bytes([255, 0])) == b"\x00\x04"
    assert t.client_frame(bytes([255, 0])) is None  # a repeated CLOSE is not a second ^D


def test_stdin_close_without_a_tty_is_not_sent() -> None:
    assert V5ToV4(tty=False).client_frame(bytes([255, 0])) is None


def test_close_of_another_channel_or_malformed_is_dropped() -> None:
    t = V5ToV4(tty=True)
    assert t.client_frame(bytes([255, 4])) is None  # the resize stream's end
    assert t.client_frame(bytes([255])) is None
    assert t.client_frame(bytes([255, 0, 0])) is None
    assert not t.stdin_closed


# -- port-forward's splice ------------------------------------------------------------------------------------


def test_the_runtime_handshake_carries_the_clients_key_and_no_extensions() -> None:
    request = handshake_request("/portforward/t?ports=80", "127.0.0.1:1", "a2V5a2V5a2V5a2V5a2V5aw==", V4)
    assert request == (b"GET /portforward/t?ports=80 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nUpgrade: websocket\r\n"
                       b"Connection: Upgrade\r\nSec-WebSocket-Key: a2V5a2V5a2V5a2V5a2V5aw==\r\n"
                       b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n")
    assert b"Protocol" not in handshake_request("/p", "h", "k", None)  # the client offered none: neither here


def test_response_heads() -> None:
    head = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: x=\r\n\r\n"
    assert parse_response_head(head) == (101, [("upgrade", "websocket"), ("sec-websocket-accept", "x=")])
    assert parse_response_head(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n")[0] == 404
    for bad in (b"SSH-2.0-x\r\n\r\n", b"HTTP/1.1 abc\r\n\r\n", b"HTTP/1.1 101 OK\r\nno colon\r\n\r\n"):
        with pytest.raises(ValueError):
            parse_response_head(bad)


async def test_a_splice_copies_both_ways_and_the_runtimes_end_ends_the_client() -> None:
    """Real loopback connections: the runtime answers the handshake and sends a frame at once; joined, bytes go
    both ways as they are, and the runtime's close reaches the client after what it sent."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    runtime_got = bytearray()
    runtime_got_some = asyncio.Event()
    runtime_writer: list[asyncio.StreamWriter] = []

    async def runtime(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x82\x03\x00P\x00")
        runtime_writer.append(writer)
        while data := await reader.read(1 << 16):
            runtime_got.extend(data)
            runtime_got_some.set()

    runtime_server = await asyncio.start_server(runtime, "127.0.0.1", 0)
    client_side = SpliceSide(done)
    client_server = await loop.create_server(lambda: client_side, "127.0.0.1", 0)
    try:
        runtime_side = SpliceSide(done, handshake=True)
        await loop.create_connection(lambda: runtime_side, "127.0.0.1", runtime_server.sockets[0].getsockname()[1])
        assert runtime_side.transport is not None and runtime_side.head is not None
        runtime_side.transport.write(handshake_request("/pf", "h", "k", V4))
        status, _ = parse_response_head(await asyncio.wait_for(runtime_side.head, 10))
        assert status == 101
        reader, writer = await asyncio.open_connection("127.0.0.1", client_server.sockets[0].getsockname()[1])
        async with asyncio.timeout(10):
            while client_side.transport is None:
                await asyncio.sleep(0)
            client_side.join(runtime_side)
            assert await reader.readexactly(5) == b"\x82\x03\x00P\x00"  # what came before the join, then the rest
            payload = bytes(range(256)) * 4096
            writer.write(payload)
            await writer.drain()
            while len(runtime_got) < len(payload):
                runtime_got_some.clear()
                await runtime_got_some.wait()
            assert bytes(runtime_got) == payload
            runtime_writer[0].write(b"bye")
            runtime_writer[0].close()
            assert await reader.read() == b"bye"  # then EOF: the client's side was closed
            await done
    finally:
        writer.close()
        runtime_server.close()
        client_server.close()


STATUS_404 = (b'{"kind":"Status","status":"Failure","message":"session not found or expired","reason":"NotFound",'
              b'"code":404}')


@pytest.mark.parametrize(("answer", "code", "reason", "message"), [
    (b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(STATUS_404), STATUS_404), 404, "NotFound", "portforward: session not found or expired"),
    (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 4\r\n\r\nnope", 500, "InternalError",
     "portforward: the runtime's streaming server: nope"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", 500, "InternalError", "portforward: the runtime's streaming server: malformed"),
    (b"", 500, "InternalError", "portforward: the runtime's streaming server: the runtime closed the connection"),
])
async def test_a_runtime_refusing_the_splice(answer: bytes, code: int, reason: str, message: str) -> None:
    """What a real server answers instead of the 101 becomes the kubelet's error (its Status when it sent one),
    before anything is sent to the client."""
    from kubelet.server import KubeletError, dial_runtime_websocket

    async def runtime(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        writer.close()

    server = await asyncio.start_server(runtime, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with pytest.raises(KubeletError) as refused:
            await dial_runtime_websocket(f"http://127.0.0.1:{port}/portforward/t?ports=80", "k", V4, done, timeout=10)
        assert (refused.value.code, refused.value.reason, refused.value.message[:len(message)]) == \
            (code, reason, message), refused.value.message
    finally:
        server.close()
    with pytest.raises(KubeletError, match="the runtime's streaming server: "):  # nothing listens there now
        await dial_runtime_websocket(f"http://127.0.0.1:{port}/portforward/t", "k", None, done, timeout=10)
