"""HTTP/2 on machinery/tls.py's TLS port (machinery/http2.py): chosen by ALPN when the context offers it, else
HTTP/1.1 as before; request bodies beyond a stream's window; responses held to the client's window until it opens
it; a client's RST_STREAM ending the request (on_disconnect, http.disconnect) and freeing the stream; an app's
failure as a 500 or a reset stream; a protocol error as a GOAWAY; the idle timeout and the streams limit. A real
uvicorn server with the cluster PKI's TLS on loopback, a client on the h2 library."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import hpack
import hyperframe.frame
import pytest
import uvicorn

from apiserver.__main__ import parse_args
from apiserver.auth import pki
from machinery.http2 import DEFAULT_MAX_STREAMS, H2Protocol
from machinery.tls import on_disconnect, server_ssl_context, tls_options


class App:
    def __init__(self) -> None:
        self.left = asyncio.Event()  # a stream's client went away (on_disconnect)
        self.disconnect = asyncio.Event()  # receive() said http.disconnect
        self.scopes: list[Any] = []
        self.finish = asyncio.Event()  # /stream-until-finished ends its response
        self.after_response: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.scopes.append(scope)
        path = scope["path"]
        if path == "/echo":  # the request body back, with its size
            body = bytearray()
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", str(len(body)).encode()), (b"connection", b"keep-alive")]})
            await send({"type": "http.response.body", "body": bytes(body)})
        elif path == "/big":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"x" * 200_000})
        elif path == "/stream":
            assert on_disconnect(scope, self.left.set)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"first\n", "more_body": True})
            while (await receive())["type"] != "http.disconnect":
                pass
            self.disconnect.set()
            await send({"type": "http.response.body", "body": b"dropped\n", "more_body": True})  # dropped
        elif path == "/answered":  # receive() after the response: http.disconnect, as ASGI says
            waiting = asyncio.ensure_future(receive())
            assert (await receive())["type"] == "http.request"
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            self.after_response.append((await asyncio.wait_for(waiting, 10))["type"])
        elif path == "/fail":
            raise RuntimeError("the app failed")
        elif path == "/fail-late":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"part", "more_body": True})
            raise RuntimeError("the app failed after starting")
        elif path == "/unfinished":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"part", "more_body": True})
        elif path != "/stream-until-finished":
            body = b"ok " + scope["http_version"].encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
        if path == "/stream-until-finished":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"first\n", "more_body": True})
            await self.finish.wait()
            await send({"type": "http.response.body", "body": b"last\n"})


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> pki.Pki:
    return pki.ensure_pki(tmp_path_factory.mktemp("pki"), "https://127.0.0.1:1")


Served = tuple[App, uvicorn.Server, int, Callable[..., ssl.SSLContext]]


async def _serve(layout: pki.Pki, http2: bool = True, **config: Any) -> tuple[App, uvicorn.Server, asyncio.Task[None]]:
    app = App()
    context = server_ssl_context(str(layout.serving_cert), str(layout.serving_key), str(layout.ca_cert), http2=http2)
    options = tls_options(context)
    if "max_streams" in config:
        options["http"] = type("P", (options["http"],), {"http2_max_streams": config.pop("max_streams")})
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="critical",
                                           **options, **config))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:
            await asyncio.sleep(0.01)
    return app, server, task


async def _stop(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    server.should_exit = True
    await asyncio.wait_for(task, 10)


@pytest.fixture
async def served(layout: pki.Pki) -> AsyncIterator[Served]:
    app, server, task = await _serve(layout)

    def client(*alpn: str) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(layout.ca_cert))
        context.load_cert_chain(layout.cert("admin"), layout.key("admin"))
        context.set_alpn_protocols(list(alpn or ("h2", "http/1.1")))
        return context

    yield app, server, server.servers[0].sockets[0].getsockname()[1], client
    await _stop(server, task)


class Client:
    """An HTTP/2 client connection on the h2 library; acknowledges what it reads only when told to."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ack: bool = True) -> None:
        self.reader, self.writer, self.ack = reader, writer, ack
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.conn.initiate_connection()
        self.events: list[h2.events.Event] = []
        self.unacked: list[tuple[int, int]] = []
        self.closed = False
        self.flush()

    @classmethod
    async def connect(cls, port: int, context: ssl.SSLContext, ack: bool = True) -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        assert writer.get_extra_info("ssl_object").selected_alpn_protocol() == "h2"
        return cls(reader, writer, ack)

    def flush(self) -> None:
        self.writer.write(self.conn.data_to_send())

    def request(self, path: str, method: str = "GET", body: bytes = b"") -> int:
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream_id, [(b":method", method.encode()), (b":path", path.encode()),
                                           (b":scheme", b"https"), (b":authority", b"127.0.0.1")],
                               end_stream=not body)
        self.flush()
        return stream_id

    async def send_body(self, stream_id: int, body: bytes) -> None:
        view = memoryview(body)
        while view:
            size = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size, len(view))
            if size == 0:
                await self.read_until(lambda: self.conn.local_flow_control_window(stream_id) > 0)
                continue
            self.conn.send_data(stream_id, bytes(view[:size]), end_stream=size == len(view))
            view = view[size:]
            self.flush()

    async def read_once(self, timeout: float = 10) -> None:
        data = await asyncio.wait_for(self.reader.read(65536), timeout)
        if not data:
            self.closed = True
            return
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                if self.ack:
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                else:
                    self.unacked.append((event.flow_controlled_length, event.stream_id))
            self.events.append(event)
        self.flush()

    async def read_until(self, done: Callable[[], bool], timeout: float = 10) -> None:
        async with asyncio.timeout(timeout):
            while not done():
                if self.closed:
                    raise AssertionError(f"the server closed the connection; events: {self.events}")
                await self.read_once()

    def acknowledge(self) -> None:
        for size, stream_id in self.unacked:
            self.conn.acknowledge_received_data(size, stream_id)
        self.unacked.clear()
        self.flush()

    def of(self, kind: type, stream_id: int) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind) and getattr(e, "stream_id", None) == stream_id]

    def body(self, stream_id: int) -> bytes:
        return b"".join(e.data for e in self.of(h2.events.DataReceived, stream_id))

    def status(self, stream_id: int) -> int:
        (response,) = self.of(h2.events.ResponseReceived, stream_id)
        return int(dict(response.headers)[b":status"])

    def ended(self, stream_id: int) -> bool:
        return bool(self.of(h2.events.StreamEnded, stream_id))

    def reset(self, stream_id: int) -> h2.events.StreamReset | None:
        resets = self.of(h2.events.StreamReset, stream_id)
        return resets[0] if resets else None

    def close(self) -> None:
        self.writer.close()


def _h2_connections(server: uvicorn.Server) -> list[H2Protocol]:
    return [c for c in server.server_state.connections if isinstance(c, H2Protocol)]


async def test_alpn_chooses_h2_and_http11_stays_for_clients_without_it(served: Served) -> None:
    app, server, port, client = served
    c = await Client.connect(port, client())
    try:
        stream = c.request("/hello?x=1")
        await c.read_until(lambda: c.ended(stream))
        assert c.status(stream) == 200 and c.body(stream) == b"ok 2"
        scope = app.scopes[-1]
        assert scope["query_string"] == b"x=1" and scope["scheme"] == "https"
        assert (b"host", b"127.0.0.1") in scope["headers"]
        assert scope["peercert"]["subject"]  # the client certificate, as over HTTP/1.1
        assert len(_h2_connections(server)) == 1
    finally:
        c.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client("http/1.1"))
    try:
        assert writer.get_extra_info("ssl_object").selected_alpn_protocol() == "http/1.1"
        writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200")
        assert await asyncio.wait_for(reader.readexactly(6), 10) == b"ok 1.1"
    finally:
        writer.close()


async def test_a_context_without_http2_offers_only_http11(layout: pki.Pki) -> None:
    _app, server, task = await _serve(layout, http2=False)
    try:
        context = ssl.create_default_context(cafile=str(layout.ca_cert))
        context.set_alpn_protocols(["h2", "http/1.1"])
        _reader, writer = await asyncio.open_connection("127.0.0.1", server.servers[0].sockets[0].getsockname()[1],
                                                        ssl=context)
        assert writer.get_extra_info("ssl_object").selected_alpn_protocol() == "http/1.1"
        writer.close()
    finally:
        await _stop(server, task)


async def test_a_body_beyond_the_stream_window_and_a_response_held_to_the_clients_window(served: Served) -> None:
    _app, _server, port, client = served
    c = await Client.connect(port, client(), ack=False)
    try:
        await c.read_until(lambda: c.conn.remote_settings.initial_window_size == 256 * 1024)
        body = bytes(range(256)) * 3000  # 768,000 bytes: three stream windows of the server's
        stream = c.request("/echo", "POST", body)
        await c.send_body(stream, body)
        # the client opens no window: the server sends what the initial 65,535 bytes allow, and waits
        await c.read_until(lambda: len(c.body(stream)) == 65535)
        assert not c.ended(stream)
        c.ack = True
        c.acknowledge()
        await c.read_until(lambda: c.ended(stream))
        assert c.body(stream) == body
        assert dict(c.of(h2.events.ResponseReceived, stream)[0].headers).get(b"connection") is None
    finally:
        c.close()


async def test_a_reset_stream_ends_the_request_and_is_freed(served: Served) -> None:
    app, server, port, client = served
    c = await Client.connect(port, client())
    try:
        stream = c.request("/stream")
        await c.read_until(lambda: c.body(stream) == b"first\n")
        (connection,) = _h2_connections(server)
        assert stream in connection.streams
        c.conn.reset_stream(stream, h2.errors.ErrorCodes.CANCEL)
        c.flush()
        async with asyncio.timeout(10):
            await app.left.wait()
            await app.disconnect.wait()
            while connection.streams:
                await asyncio.sleep(0.01)
        # the connection serves on
        other = c.request("/hello")
        await c.read_until(lambda: c.ended(other))
        assert c.body(stream) == b"first\n" and not c.ended(stream)
    finally:
        c.close()


async def test_an_apps_failure_is_a_500_or_a_reset_stream(served: Served) -> None:
    _app, _server, port, client = served
    c = await Client.connect(port, client())
    try:
        failed, late, unfinished = c.request("/fail"), c.request("/fail-late"), c.request("/unfinished")
        await c.read_until(lambda: c.ended(failed) and bool(c.reset(late)) and bool(c.reset(unfinished)))
        assert c.status(failed) == 500 and c.body(failed) == b"Internal Server Error"
        for stream in (late, unfinished):
            assert c.reset(stream).error_code == h2.errors.ErrorCodes.INTERNAL_ERROR  # type: ignore[union-attr]
            assert c.body(stream) == b"part"
    finally:
        c.close()


async def test_a_protocol_error_ends_the_connection_with_a_goaway(served: Served) -> None:
    _app, server, port, client = served
    c = await Client.connect(port, client())
    try:
        await c.read_until(lambda: bool(c.events))
        # HEADERS on an even stream, which only a server may open (a connection error, RFC 9113 5.1.1)
        frame = hyperframe.frame.HeadersFrame(2)
        frame.data = hpack.Encoder().encode([(b":method", b"GET"), (b":path", b"/"), (b":scheme", b"https"),
                                             (b":authority", b"x")])
        frame.flags.add("END_STREAM")
        frame.flags.add("END_HEADERS")
        c.writer.write(frame.serialize())
        await c.read_until(lambda: c.closed)
        (goaway,) = [e for e in c.events if isinstance(e, h2.events.ConnectionTerminated)]
        assert goaway.error_code == h2.errors.ErrorCodes.PROTOCOL_ERROR
    finally:
        c.close()
    async with asyncio.timeout(10):
        while _h2_connections(server):
            await asyncio.sleep(0.01)


async def test_the_server_refuses_nothing_below_its_limit_and_says_so(layout: pki.Pki) -> None:
    _app, server, task = await _serve(layout, max_streams=3)
    try:
        context = ssl.create_default_context(cafile=str(layout.ca_cert))
        context.set_alpn_protocols(["h2"])
        c = await Client.connect(server.servers[0].sockets[0].getsockname()[1], context)
        await c.read_until(lambda: c.conn.remote_settings.max_concurrent_streams == 3)
        streams = [c.request("/hello") for _ in range(3)]
        await c.read_until(lambda: all(c.ended(s) for s in streams))
        c.close()
    finally:
        await _stop(server, task)
    assert DEFAULT_MAX_STREAMS == 250


def test_the_flags_default_to_upstreams() -> None:
    args = parse_args([])
    assert args.http2_max_streams_per_connection == 0 and not args.disable_http2_serving  # h2 on, Go's 250
    args = parse_args(["--disable-http2-serving", "--http2-max-streams-per-connection", "1000"])
    assert args.disable_http2_serving and args.http2_max_streams_per_connection == 1000


def test_a_negative_streams_limit_ends_the_start(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        parse_args(["--http2-max-streams-per-connection", "-1"])
    assert e.value.code == 2
    assert "--http2-max-streams-per-connection must be >= 0" in capsys.readouterr().err


async def test_an_idle_connection_gets_a_goaway(layout: pki.Pki) -> None:
    _app, server, task = await _serve(layout, timeout_keep_alive=0.3)
    context = ssl.create_default_context(cafile=str(layout.ca_cert))
    context.set_alpn_protocols(["h2"])
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        c = await Client.connect(port, context)
        stream = c.request("/hello")
        await c.read_until(lambda: c.ended(stream))
        await c.read_until(lambda: c.closed)  # no stream for the idle timeout: GOAWAY, then the close
        (goaway,) = [e for e in c.events if isinstance(e, h2.events.ConnectionTerminated)]
        assert goaway.error_code == h2.errors.ErrorCodes.NO_ERROR and goaway.last_stream_id == stream
        c.close()
    finally:
        await _stop(server, task)


async def test_a_shutdown_sends_a_goaway_and_closes_when_the_last_stream_ends(layout: pki.Pki) -> None:
    app, server, task = await _serve(layout, timeout_graceful_shutdown=30)
    context = ssl.create_default_context(cafile=str(layout.ca_cert))
    context.set_alpn_protocols(["h2"])
    c = await Client.connect(server.servers[0].sockets[0].getsockname()[1], context)
    try:
        stream = c.request("/stream-until-finished")
        await c.read_until(lambda: c.body(stream) == b"first\n")
        server.should_exit = True
        (connection,) = _h2_connections(server)
        async with asyncio.timeout(10):
            while not connection._closing:
                await asyncio.sleep(0.01)
        refused = c.request("/hello")  # no new stream once the shutdown began: the client may retry it elsewhere
        await c.read_until(lambda: c.reset(refused) is not None)
        assert c.reset(refused).error_code == h2.errors.ErrorCodes.REFUSED_STREAM  # type: ignore[union-attr]
        assert not task.done() and c.body(stream) == b"first\n"  # the open stream goes on
        app.finish.set()
        await c.read_until(lambda: c.closed)
        assert c.body(stream) == b"first\nlast\n" and c.ended(stream)
        (goaway,) = [e for e in c.events if isinstance(e, h2.events.ConnectionTerminated)]
        assert goaway.error_code == h2.errors.ErrorCodes.NO_ERROR
        await asyncio.wait_for(task, 10)
    finally:
        c.close()
        if not task.done():
            await _stop(server, task)


async def test_a_clients_goaway_ends_its_open_streams(served: Served) -> None:
    app, _server, port, client = served
    c = await Client.connect(port, client())
    try:
        stream = c.request("/stream")
        await c.read_until(lambda: c.body(stream) == b"first\n")
        c.conn.close_connection()
        c.flush()
        async with asyncio.timeout(10):
            await app.left.wait()
            await app.disconnect.wait()
        assert await asyncio.wait_for(c.reader.read(), 10) == b""  # and the server closes the connection
    finally:
        c.close()


async def test_receive_after_the_response_says_disconnect(served: Served) -> None:
    app, _server, port, client = served
    c = await Client.connect(port, client())
    try:
        stream = c.request("/answered")
        await c.read_until(lambda: c.ended(stream))
        assert c.status(stream) == 204
        async with asyncio.timeout(10):
            while not app.after_response:
                await asyncio.sleep(0.01)
        assert app.after_response == ["http.disconnect"]
    finally:
        c.close()
