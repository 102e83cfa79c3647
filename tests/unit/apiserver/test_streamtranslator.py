"""apiserver/endpoints/streamtranslator.py: SPDY clients ↔ the kubelet's websockets. Negotiation, the
remotecommand channel mapping and a whole exec bridged between a SPDY session (on a recording transport) and a
scripted kubelet websocket; the port-forward pairing and channel translation that attach/port-forward use."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from apiserver import errors
from apiserver.endpoints import streamtranslator as st
from machinery import spdy
from tests.unit.machinery.test_spdy import Recorder


def test_negotiation_picks_the_clients_first_supported() -> None:
    offered = ["v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"]  # kubectl 1.27
    assert st.negotiate(offered, st.REMOTECOMMAND_PROTOCOLS) == "v4.channel.k8s.io"
    assert st.negotiate(["portforward.k8s.io"], st.PORTFORWARD_PROTOCOLS) == "portforward.k8s.io"
    with pytest.raises(errors.ApiError) as e:
        st.negotiate(["v2.channel.k8s.io", "channel.k8s.io"], st.REMOTECOMMAND_PROTOCOLS)
    assert (e.value.code, e.value.reason, e.value.message) == (
        403, "Forbidden", "unable to upgrade: unable to negotiate protocol: client supports [v2.channel.k8s.io "
        "channel.k8s.io], server accepts [v4.channel.k8s.io]")
    with pytest.raises(errors.ApiError, match="X-Stream-Protocol-Version is required"):
        st.negotiate([], st.REMOTECOMMAND_PROTOCOLS)


def test_streams_expected_and_channels() -> None:
    assert st.expected_streams(stdin=True, stdout=True, stderr=True, tty=False) == {"error", "stdin", "stdout",
                                                                                    "stderr"}
    assert st.expected_streams(stdin=True, stdout=True, stderr=True, tty=True) == {"error", "stdin", "stdout",
                                                                                   "resize"}
    assert st.expected_streams(stdin=False, stdout=True, stderr=False, tty=False) == {"error", "stdout"}
    assert st.kubelet_frame("stdin", b"x") == b"\x00x" and st.kubelet_frame("resize", b"{}") == b"\x04{}"
    assert [st.client_stream_of(f) for f in (b"\x01o", b"\x02e", b"\x03{}", b"\xff\x00", b"")] == [
        ("stdout", b"o"), ("stderr", b"e"), ("error", b"{}"), (None, b"\x00"), (None, b"")]


def test_resize_lines_across_reads() -> None:
    lines = st.ResizeLines()
    assert lines.feed(b'{"Width":100,"He') == []
    assert lines.feed(b'ight":30}\n{"Width":80,"Height":24}\n\n{"Wi') == [b'{"Width":100,"Height":30}',
                                                                          b'{"Width":80,"Height":24}']
    assert lines.feed(b'dth":1,"Height":2}\n') == [b'{"Width":1,"Height":2}']


class Kubelet:
    """A scripted kubelet websocket: records what it is sent; yields `script` once the client's stdin ended (or at
    once without stdin), then ends."""

    def __init__(self, script: list[bytes], wait_for_stdin_end: bool, fail: bool = False) -> None:
        self.script = script
        self.sent: list[bytes] = []
        self.stdin_ended = asyncio.Event()
        if not wait_for_stdin_end:
            self.stdin_ended.set()
        self.fail = fail

    async def send(self, data: bytes) -> None:
        self.sent.append(data)
        if data == b"\xff\x00":
            self.stdin_ended.set()

    def __aiter__(self) -> Any:
        return self._messages()

    async def _messages(self) -> Any:
        await self.stdin_ended.wait()
        for message in self.script:
            yield message
        if self.fail:
            raise ConnectionResetError("kubelet gone")


def _client_session() -> tuple[spdy.Session, Recorder, spdy.Framer]:
    session, transport = spdy.Session(), Recorder()
    session.connection_made(transport)
    return session, transport, spdy.Framer()


def _by_stream(frames: list[spdy.Frame]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for f in frames:
        if isinstance(f, spdy.DataFrame):
            out[f.stream_id] = out.get(f.stream_id, b"") + f.data
    return out


def _fins(frames: list[spdy.Frame]) -> set[int]:
    return {f.stream_id for f in frames if isinstance(f, spdy.DataFrame) and f.flags & spdy.FLAG_FIN}


async def test_an_exec_bridged_end_to_end() -> None:
    """stdin and its FIN (→ v5 CLOSE), a resize, the output and the exit Status, every stream FIN'd; the bridge
    returns when the client closes."""
    status = json.dumps({"status": "Failure", "reason": "NonZeroExitCode",
                         "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}).encode()
    kubelet = Kubelet([b"\x01out", b"\x02err", b"\x03" + status], wait_for_stdin_end=True)
    session, transport, client = _client_session()
    bridge = asyncio.create_task(st.bridge_remotecommand(
        session, kubelet, st.expected_streams(stdin=True, stdout=True, stderr=True, tty=True) | {"stderr"}, v5=True))
    wire = b"".join(client.encode(spdy.SynStream(i, {"streamtype": [t]}))
                    for i, t in ((1, "error"), (3, "stdin"), (5, "stdout"), (7, "stderr"), (9, "resize")))
    wire += client.encode(spdy.DataFrame(9, b'{"Width":80,"Height":24}\n'))
    wire += client.encode(spdy.DataFrame(3, b"in")) + client.encode(spdy.DataFrame(3, b"", spdy.FLAG_FIN))
    session.data_received(wire)
    async with asyncio.timeout(5):
        while _fins(transport.frames) != {1, 5, 7}:
            await asyncio.sleep(0.01)
    assert sorted(kubelet.sent) == [b"\x00in", b'\x04{"Width":80,"Height":24}', b"\xff\x00"]
    assert kubelet.sent.index(b"\x00in") < kubelet.sent.index(b"\xff\x00")
    assert _by_stream(transport.frames) == {5: b"out", 7: b"err", 1: status}
    assert not bridge.done()  # waiting for the client to close
    session.connection_lost(None)
    await asyncio.wait_for(bridge, 5)


async def test_a_broken_kubelet_stream_is_a_failure_status() -> None:
    kubelet = Kubelet([b"\x01partial"], wait_for_stdin_end=False, fail=True)
    session, transport, client = _client_session()
    bridge = asyncio.create_task(st.bridge_remotecommand(session, kubelet, {"error", "stdout"}, v5=False))
    session.data_received(client.encode(spdy.SynStream(1, {"streamtype": ["error"]})) +
                          client.encode(spdy.SynStream(3, {"streamtype": ["stdout"]})))
    async with asyncio.timeout(5):
        while 1 not in _fins(transport.frames):
            await asyncio.sleep(0.01)
    sent = _by_stream(transport.frames)
    assert sent[3] == b"partial"
    assert json.loads(sent[1])["message"] == "error reading from the kubelet: kubelet gone"
    session.connection_lost(None)
    await asyncio.wait_for(bridge, 5)


async def test_unexpected_streams_are_refused_and_a_client_that_goes_ends_the_bridge() -> None:
    kubelet = Kubelet([], wait_for_stdin_end=True)
    session, transport, client = _client_session()
    bridge = asyncio.create_task(st.bridge_remotecommand(session, kubelet, {"error", "stdout"}, v5=True))
    session.data_received(client.encode(spdy.SynStream(1, {"streamtype": ["bogus"]})) +
                          client.encode(spdy.SynStream(3, {"streamtype": ["error"]})))
    await asyncio.sleep(0.05)
    assert spdy.RstStream(1, spdy.REFUSED_STREAM) in transport.frames
    session.connection_lost(None)  # before creating stdout: nothing to bridge
    await asyncio.wait_for(bridge, 5)
    assert kubelet.sent == []


# -- port-forward and attach translation ----------------------------------------------------------------------


def test_port_forward_streams_pair_by_request_id() -> None:
    pairs = st.PortForwardPairs()
    # kubectl 1.27's headers (tests/data/spdy/kubectl-1.27-portforward.bin)
    assert pairs.add(1, {"streamtype": ["error"], "port": ["8080"], "requestid": ["0"]}, "e0") is None
    assert pairs.add(5, {"streamtype": ["error"], "port": ["8080"], "requestid": ["1"]}, "e1") is None
    done = pairs.add(3, {"streamtype": ["data"], "port": ["8080"], "requestid": ["0"]}, "d0")
    assert done is not None and (done.request_id, done.port, done.streams) == ("0", 8080, {"error": "e0",
                                                                                           "data": "d0"})
    assert list(pairs.pending) == ["1"]
    # an old client without requestID: the data stream's id - 2 pairs it with its error stream
    assert pairs.add(9, {"streamtype": ["error"], "port": ["80"]}, "e") is None
    done = pairs.add(11, {"streamtype": ["data"], "port": ["80"]}, "d")
    assert done is not None and done.request_id == "9"


@pytest.mark.parametrize(("headers", "message"), [
    ({"streamtype": ["data"]}, "port header must be set"),
    ({"streamtype": ["data"], "port": ["http"]}, "unable to parse 'http' as a port"),
    ({"streamtype": ["data"], "port": ["70000"]}, "port 70000 must be > 0 and < 65536"),
    ({"streamtype": ["stdin"], "port": ["80"]}, "invalid stream type 'stdin'"),
])
def test_port_forward_bad_streams(headers: dict[str, list[str]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        st.PortForwardPairs().add(1, headers, None)


def test_port_forward_a_second_stream_of_a_kind_or_another_port() -> None:
    pairs = st.PortForwardPairs()
    pairs.add(1, {"streamtype": ["error"], "port": ["80"], "requestid": ["7"]}, None)
    with pytest.raises(ValueError, match="already has a error stream"):
        pairs.add(3, {"streamtype": ["error"], "port": ["80"], "requestid": ["7"]}, None)
    with pytest.raises(ValueError, match="ports 80 and 81"):
        pairs.add(5, {"streamtype": ["data"], "port": ["81"], "requestid": ["7"]}, None)


def test_port_channels_strip_the_port_prefix_once_per_channel() -> None:
    ch = st.PortChannels(8080)
    assert ch.to_kubelet(b"GET /") == b"\x00GET /"
    assert ch.from_kubelet(b"\x00\x90\x1f") == ("data", b"")  # 8080 little endian, alone
    assert ch.from_kubelet(b"\x01\x90\x1fno listener") == ("error", b"no listener")
    assert ch.from_kubelet(b"\x00\x90\x1fbody") == ("data", b"\x90\x1fbody")  # later frames are all data
    assert ch.from_kubelet(b"\x05x") == (None, b"")
    with pytest.raises(ValueError, match="for port 80, expected 8080"):
        st.PortChannels(8080).from_kubelet(b"\x00\x50\x00")
    with pytest.raises(ValueError, match="shorter than a port"):
        st.PortChannels(8080).from_kubelet(b"\x01\x90")


def test_attach_and_port_forward_kubelet_addresses() -> None:
    assert st.attach_query(stdin=True, stdout=True, stderr=True, tty=True, container="c 1") == \
        "stdin=true&stdout=true&tty=true&container=c+1"
    assert st.attach_query(stdin=False, stdout=True, stderr=True, tty=False, container="c") == \
        "stdout=true&stderr=true&container=c"
    assert st.portforward_path("ns", "p") == "/portForward/ns/p"


class PortKubelet:
    """A scripted portforward.k8s.io websocket for one port: answers each data frame with its upper case, after
    the two port prefixes; `error` goes on the error channel first."""

    def __init__(self, port: int, error: bytes = b"") -> None:
        self.prefix = port.to_bytes(2, "little")
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.queue.put_nowait(b"\x00" + self.prefix)
        self.queue.put_nowait(b"\x01" + self.prefix + error)
        if error:
            self.queue.put_nowait(None)
        self.closed = False

    async def send(self, frame: bytes) -> None:
        assert frame[0] == 0
        self.queue.put_nowait(b"\x00" + frame[1:].upper())

    async def close(self) -> None:
        self.closed = True
        self.queue.put_nowait(None)

    def __aiter__(self) -> Any:
        return self._messages()

    async def _messages(self) -> Any:
        while (frame := await self.queue.get()) is not None:
            yield frame


async def test_port_forward_bridged_per_request() -> None:
    session, transport, client = _client_session()
    kubelets: dict[int, PortKubelet] = {}

    async def dial(port: int) -> PortKubelet:
        if port == 9999:
            raise OSError("connection refused")
        if port == 9998:
            raise errors.ApiError(500, "InternalError", "error dialing backend: refused")
        kubelets[port] = PortKubelet(port, b"no listener" if port == 81 else b"")
        return kubelets[port]

    bridge = asyncio.create_task(st.bridge_portforward(session, dial))

    def syn(stream_id: int, kind: str, port: str, request_id: str) -> bytes:
        return client.encode(spdy.SynStream(stream_id, {"streamtype": [kind], "port": [port],
                                                        "requestid": [request_id]}))

    session.data_received(syn(1, "error", "8080", "0") + syn(3, "data", "8080", "0") +
                          client.encode(spdy.DataFrame(3, b"ping")) +
                          syn(5, "error", "81", "1") + syn(7, "data", "81", "1") +
                          syn(9, "error", "9999", "2") + syn(11, "data", "9999", "2") +
                          syn(13, "data", "http", "3") +
                          syn(15, "error", "9998", "4") + syn(17, "data", "9998", "4"))
    async with asyncio.timeout(5):
        while not ({5, 7, 9, 11, 15, 17} <= _fins(transport.frames) and
                   _by_stream(transport.frames).get(3) == b"PING"):
            await asyncio.sleep(0.01)
    sent = _by_stream(transport.frames)
    assert sent[5] == b"no listener" and sent[9] == b"error forwarding port 9999: connection refused"
    assert sent[15] == b"error dialing backend: refused"
    assert spdy.RstStream(13, spdy.PROTOCOL_ERROR) in transport.frames
    assert 3 not in _fins(transport.frames)  # 8080 still open
    session.data_received(client.encode(spdy.DataFrame(3, b"", spdy.FLAG_FIN)))  # the local connection ended
    async with asyncio.timeout(5):
        while not {1, 3} <= _fins(transport.frames):
            await asyncio.sleep(0.01)
    assert kubelets[8080].closed
    session.connection_lost(None)
    await asyncio.wait_for(bridge, 5)


async def test_streams_not_created_in_time() -> None:
    session, _, client = _client_session()
    session.data_received(client.encode(spdy.SynStream(1, {"streamtype": ["error"]})))
    with pytest.raises(TimeoutError):
        await st.collect_streams(session, {"error", "stdout"}, timeout=0.05)


async def test_without_the_servers_switch_the_upgrade_is_refused() -> None:
    """A server whose HTTP protocol offers no switch (no machinery.tls Upgrade in the scope): upstream's 400."""
    messages: list[dict[str, Any]] = []
    cleaned: list[bool] = []

    async def send(message: Any) -> None:
        messages.append(message)

    async def run(session: spdy.Session) -> None:
        raise AssertionError("no session without the switch")

    async def cleanup() -> None:
        cleaned.append(True)

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    await st.SpdyUpgrade("v4.channel.k8s.io", run, cleanup)({"type": "http", "headers": []}, receive, send)
    assert messages[0]["status"] == 400
    body = json.loads(messages[1]["body"])
    assert (body["reason"], body["message"]) == ("BadRequest", "Upgrade request required")
    assert cleaned == [True]
