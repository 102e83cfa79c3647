"""The apiserver's connection-level limits against an unauthenticated client, through real TLS on a
real apiserver (the limits of Go's net/http server kube-apiserver relies on, machinery/tls.py):
request headers over 1 MiB (a single 100 MB header included) get 431 before they are buffered, and
a connection that has not sent its request headers within the header timeout (32 s; 1 s here through
MINIK8S_READ_HEADER_TIMEOUT_SECONDS) is closed, however slowly it trickles bytes; a kept-alive
connection is closed after the idle timeout (90 s; 4 s here through MINIK8S_IDLE_TIMEOUT_SECONDS)."""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from machinery.tls import IDLE_TIMEOUT_ENV, MAX_HEADER_BYTES, READ_HEADER_TIMEOUT_ENV
from tests.auth_cluster import SecureApiServer
from tests.cluster import Etcd, wait_for

HEADER_TIMEOUT = 1.0
IDLE_TIMEOUT = 4.0
MB = 1 << 20


@pytest.fixture(scope="module")
def secure(workdir: Path, etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, etcd)
    server.process.env[READ_HEADER_TIMEOUT_ENV] = str(HEADER_TIMEOUT)
    server.process.env[IDLE_TIMEOUT_ENV] = str(IDLE_TIMEOUT)
    server.start()
    yield server
    server.stop()


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def connect(server: SecureApiServer, tls: bool = True) -> socket.socket:
    """A raw connection without credentials: TLS to the secure port (no client certificate), or the plain port."""
    if not tls:
        return socket.create_connection(("127.0.0.1", server.port), timeout=10)
    raw = socket.create_connection(("127.0.0.1", server.secure_port), timeout=10)
    return ssl.create_default_context(cafile=server.ca).wrap_socket(raw, server_hostname="127.0.0.1")


def read_answer(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """What the server sends until it closes the connection (or the timeout)."""
    sock.settimeout(timeout)
    data = b""
    with contextlib.suppress(ConnectionError, TimeoutError, ssl.SSLError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def send_until_answered(sock: socket.socket, prefix: bytes, filler_bytes: int, chunk: int = 64 * 1024) -> bytes:
    """Sends prefix and then filler_bytes of header value, reading whenever the server has something to
    say; returns what it said (the whole 100 MB is never sent when the server refuses early)."""
    sock.sendall(prefix)
    sent, answer = 0, b""
    piece = b"a" * chunk
    try:
        while sent < filler_bytes and not answer:
            if select.select([sock], [], [], 0)[0]:  # something came: TLS session tickets, or the answer
                sock.setblocking(False)
                with contextlib.suppress(ssl.SSLWantReadError, BlockingIOError):
                    answer = sock.recv(65536) or b"-"  # EOF: closed without an answer
                sock.setblocking(True)
                continue
            sock.sendall(piece[: min(chunk, filler_bytes - sent)])
            sent += chunk
        if not answer:
            sock.sendall(b"\r\n\r\n")
    except (ConnectionError, ssl.SSLError):
        pass
    sock.setblocking(True)
    return answer + read_answer(sock) if answer != b"-" else b""


class Getter(threading.Thread):
    """An authenticated client doing GETs back to back until stopped; counts the answers."""

    def __init__(self, client: httpx.Client) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.answered = 0
        self.failures: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                r = self.client.get("/api/v1/namespaces/default")
                if r.status_code == 200:
                    self.answered += 1
                else:
                    self.failures.append(f"{r.status_code} {r.text[:200]}")
            except httpx.HTTPError as e:
                self.failures.append(repr(e))

    def stop(self) -> None:
        self.stopping.set()
        self.join(20)


def test_a_100mb_header_without_credentials_gets_431_while_others_are_served(secure: SecureApiServer) -> None:
    pid = secure.process.proc.pid  # type: ignore[union-attr]
    before = rss_kb(pid)
    with secure.client("admin", timeout=30) as client:
        getter = Getter(client)
        getter.start()
        try:
            sock = connect(secure)
            try:
                sock.sendall(b"GET /api/v1/pods HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
                # most of a MiB of header held open: the server holds it and goes on serving others
                sent = 0
                while sent < MAX_HEADER_BYTES - 128 * 1024:
                    sock.sendall(b"a" * 64 * 1024)
                    sent += 64 * 1024
                answered = getter.answered
                wait_for(lambda: getter.answered >= answered + 3, 20, what="authenticated GETs during the attack")
                answer = send_until_answered(sock, b"", 100 * MB - sent)
            finally:
                sock.close()
            grown_mb = (rss_kb(pid, "VmHWM") - before) / 1024
        finally:
            getter.stop()
        assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer[:300]
        assert answer.endswith(b"\r\n\r\n431 Request Header Fields Too Large")
        assert grown_mb < 30, f"the apiserver grew by {grown_mb:.0f} MB for a refused header"
        assert getter.failures == []
        assert client.get("/api/v1/namespaces/default").status_code == 200


@pytest.mark.parametrize(("tls", "upgrade"), [(True, False), (False, False), (True, True)],
                         ids=["secure-port", "plain-port", "websocket-handshake"])
def test_headers_over_1mib_get_431_on_both_ports(secure: SecureApiServer, tls: bool, upgrade: bool) -> None:
    # many small headers add up as one big one does; a websocket handshake (exec, attach) is counted alike
    many = b"".join(b"X-Header-%d: %s\r\n" % (i, b"b" * 1000) for i in range(1100))
    handshake = (b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n") if upgrade else b""
    sock = connect(secure, tls)
    try:
        sock.sendall(b"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\n" + handshake)
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            sock.sendall(many + b"\r\n")
        answer = read_answer(sock)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:300]


def test_a_url_over_1mib_gets_431(secure: SecureApiServer) -> None:
    sock = connect(secure)
    try:
        answer = send_until_answered(sock, b"GET /api/v1/pods?labelSelector=", 2 * MB)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:300]


def test_headers_under_the_limit_and_large_bodies_are_not_refused(secure: SecureApiServer) -> None:
    # half a MiB of headers reaches the gate (401 without credentials), not the connection's limit
    sock = connect(secure)
    try:
        sock.sendall(b"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Big: "
                     + b"c" * (MB // 2) + b"\r\n\r\n")
        answer = read_answer(sock)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:300]
    # a body past 1 MiB in the same writes as small headers is body, not header: the gate answers
    body = b"{" + b" " * (2 * MB) + b"}"
    sock = connect(secure, tls=False)
    try:
        sock.sendall(b"POST /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        answer = read_answer(sock)
    finally:
        sock.close()
    assert not answer.startswith(b"HTTP/1.1 431"), answer[:300]
    assert answer.startswith(b"HTTP/1.1 "), answer[:300]


def closed_within(sock: socket.socket, timeout: float) -> bool:
    """True once the server closes the connection (EOF or reset) within timeout."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def test_connections_that_never_finish_their_headers_are_closed(secure: SecureApiServer) -> None:
    started = time.monotonic()
    socks = [connect(secure) for _ in range(10)]
    try:
        for i, sock in enumerate(socks[:8]):  # half a request; the last two send nothing at all
            sock.sendall(b"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow-%d: " % i)
        assert all(closed_within(sock, 15 * HEADER_TIMEOUT) for sock in socks)
        assert time.monotonic() - started >= HEADER_TIMEOUT * 0.9  # the timeout, not a refusal
    finally:
        for sock in socks:
            sock.close()


def test_a_trickle_of_header_bytes_does_not_extend_the_header_timeout(secure: SecureApiServer) -> None:
    sock = connect(secure)
    closed = False
    try:
        sock.sendall(b"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trickle: ")
        deadline = time.monotonic() + 15 * HEADER_TIMEOUT
        while not closed and time.monotonic() < deadline:
            try:
                sock.sendall(b"t")  # one byte per tenth of the timeout: the attack, not a wait
            except (ConnectionError, ssl.SSLError):
                closed = True
                break
            closed = closed_within(sock, HEADER_TIMEOUT / 10)
    finally:
        sock.close()
    assert closed


def test_an_idle_kept_alive_connection_outlives_the_header_timeout(secure: SecureApiServer) -> None:
    # between requests the idle timeout (90 s) applies, as in Go: the header timer starts with a request's first byte
    conn = http.client.HTTPSConnection("127.0.0.1", secure.secure_port, context=secure.ssl_context("admin"),
                                       timeout=10)
    try:
        for _ in range(2):
            conn.request("GET", "/api/v1/namespaces/default")
            r = conn.getresponse()
            assert r.status == 200
            r.read()
            first = conn.sock
            time.sleep(2 * HEADER_TIMEOUT)  # the scenario: idle past the header timeout
        assert conn.sock is first  # the same connection answered both
    finally:
        conn.close()


def test_an_idle_kept_alive_connection_is_closed_after_the_idle_timeout(secure: SecureApiServer) -> None:
    sock = connect(secure)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(4096).startswith(b"HTTP/1.1 ")  # answered, kept alive
        started = time.monotonic()
        assert closed_within(sock, 5 * IDLE_TIMEOUT)
        assert time.monotonic() - started >= IDLE_TIMEOUT * 0.9
    finally:
        sock.close()
