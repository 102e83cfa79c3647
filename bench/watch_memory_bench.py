"""What a watch costs the apiserver in memory: its RSS with no watches, with 0.2 N and with N concurrent
pod watches (default N = 1,000), as the real clusters run it.

    python -m bench.watch_memory_bench [--quick] [--watches N] [--keep]

One etcd and one apiserver process with the whole gate on (HTTPS with the cluster PKI, x509
authentication of a user that is *not* in system:masters so RBAC decides each request, admission,
the audit log at Metadata). This process is the client: aiohttp over keep-alive HTTP/1.1, one TLS
connection per watch (its own memory does not count). The watches are a mix, as controllers and
kubelets open them: all pods, one namespace, a label selector, a node's pods by field selector; most
from the current resourceVersion, some from "" (the matching pods replayed first); all with bookmarks
(the apiserver sends them every second here). A writer keeps changing pods all along, so every
watcher's queue carries events, and the bench checks they arrive.

Each step opens watches until every one has had its first line (event or bookmark), lets the
apiserver's memory settle (RSS sampled until it stops moving) and reads VmRSS from /proc/PID/status.
The baseline is the same apiserver's RSS after a warm-up (a few watches opened and closed, so code
paths and caches are in) with no watch open. Figures: KB of apiserver RSS per watch at N (over the
baseline) and the slope between 0.2 N and N. Target (issue 10): ≤ 20 KB per watch at 1,000.

Each watch here is a connection of its own (HTTP/1.1), so a second apiserver (fresh, same etcd and
warm-up) measures what N idle keep-alive HTTPS connections cost, each after one GET: the floor a
watch pays for its connection (uvloop's TLS transport, OpenSSL's SSL object and the verified client
certificate, uvicorn's protocol), shown apart from what the watch itself adds.
And, in this process, what OpenSSL itself keeps for one server-side connection after its handshake (the same
server context and client certificate, memory BIOs, glibc's mallinfo2 over 300 of them): the part of that floor no
change to the apiserver's Python reaches.
Then the same watches (same mix, writer and steps) on a third fresh apiserver over HTTP/2: ALPN h2, the watches
multiplexed as streams on connections of 250 each (the apiserver's SETTINGS_MAX_CONCURRENT_STREAMS; client-go
opens another connection when one is full), 4 connections for 1,000; the HTTP/1.1 figure of the same run is its
baseline.
Writes _output/bench/watch_memory.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import resource
import shutil
import ssl
import sys
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import httpx
import orjson
import uvloop

from bench.apiserver_bench import render_table
from bench.auth_bench import TlsConn
from machinery.tls import server_ssl_context
from tests.auth_cluster import SecureApiServer
from tests.cluster import REPO, Etcd, make_workdir, wait_for

OUTPUT = REPO / "_output" / "bench"
NAMESPACES = 10
PODS_PER_NAMESPACE = 5
NODES = 10
TARGET_KB = 20.0
H2_STREAMS = 250  # machinery.http2.DEFAULT_MAX_STREAMS: watches per HTTP/2 connection


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


async def settled_rss(pid: int, quick: bool) -> int:
    """VmRSS once it stops moving (the apiserver's collections and frees have run): the lowest of the
    last samples once three in a row stay within 0.5% (or after a deadline)."""
    samples: list[int] = []
    deadline = time.monotonic() + (6 if quick else 20)
    while time.monotonic() < deadline:
        samples.append(rss_kb(pid))
        recent = samples[-3:]
        if len(recent) == 3 and max(recent) - min(recent) <= 0.005 * max(recent):
            break
        await asyncio.sleep(0.5)
    return min(samples[-3:])


def pod(name: str, namespace: str, i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app": f"app-{i % 7}", "tier": "web"}},
            "spec": {"nodeName": f"node-{i % NODES}",
                     "containers": [{"name": "web", "image": "nginx:1.25",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


def watch_url(i: int, rv: str) -> str:
    """The i-th watch of the mix."""
    ns = f"bench-watch-{i % NAMESPACES}"
    start = "" if i % 10 == 9 else rv  # one in ten replays its matching pods first
    common = f"watch=1&allowWatchBookmarks=true&resourceVersion={start}"
    kind = i % 4
    if kind == 0:
        return f"/api/v1/pods?{common}"
    if kind == 1:
        return f"/api/v1/namespaces/{ns}/pods?{common}"
    if kind == 2:
        return f"/api/v1/namespaces/{ns}/pods?{common}&labelSelector=app%3Dapp-{i % 7}"
    return f"/api/v1/pods?{common}&fieldSelector=spec.nodeName%3Dnode-{i % NODES}"


class H2Watching(asyncio.Protocol):
    """One HTTP/2 connection carrying many watches, as client-go's does (the h2 library's framing; a stream
    window of 4 MiB and a connection window of 1 GiB, client-go's x/net/http2 Transport's). httpx would do, but
    its connections open at most 100 streams each (its own SETTINGS) and queue the rest."""

    def __init__(self) -> None:
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.transport: asyncio.Transport | None = None
        self.streams: dict[int, tuple[bytearray, Any, asyncio.Future[int]]] = {}
        self.authority = b""

    async def connect(self, host: str, port: int, context: ssl.SSLContext) -> H2Watching:
        context.set_alpn_protocols(["h2"])
        await asyncio.get_running_loop().create_connection(lambda: self, host, port, ssl=context,
                                                           server_hostname=host)
        assert self.transport is not None
        if self.transport.get_extra_info("ssl_object").selected_alpn_protocol() != "h2":
            raise RuntimeError("the apiserver did not choose h2")
        self.authority = f"{host}:{port}".encode()
        return self

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.conn.local_settings = h2.settings.Settings(client=True, initial_values={
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 4 << 20, h2.settings.SettingCodes.ENABLE_PUSH: 0})
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window((1 << 30) - 65535)
        self._flush()

    def _flush(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(self.conn.data_to_send())

    def watch(self, path: str, on_line: Any) -> asyncio.Future[int]:
        """Start a GET of path; on_line(line) for each line; the future's result is the status, when it ends."""
        stream_id = self.conn.get_next_available_stream_id()
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.streams[stream_id] = (bytearray(), on_line, done)
        self.conn.send_headers(stream_id, [(b":method", b"GET"), (b":path", path.encode()), (b":scheme", b"https"),
                                           (b":authority", self.authority)], end_stream=True)
        self._flush()
        done.add_done_callback(lambda f: self._cancelled(stream_id) if f.cancelled() else None)
        return done

    def _cancelled(self, stream_id: int) -> None:
        if self.streams.pop(stream_id, None) is not None:
            self.conn.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
            self._flush()

    def data_received(self, data: bytes) -> None:
        for event in self.conn.receive_data(data):
            stream = self.streams.get(getattr(event, "stream_id", 0))
            if isinstance(event, h2.events.DataReceived):
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if stream is not None:
                    buf = stream[0]
                    buf += event.data
                    while (end := buf.find(b"\n")) >= 0:
                        stream[1](bytes(buf[:end]))
                        del buf[:end + 1]
            elif isinstance(event, h2.events.ResponseReceived) and stream is not None:
                status = int(dict(event.headers)[b":status"])
                if status != 200 and not stream[2].done():
                    stream[2].set_result(status)
            elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)) and stream is not None:
                del self.streams[event.stream_id]
                if not stream[2].done():
                    stream[2].set_result(200)
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        for _, _, done in self.streams.values():
            if not done.done():
                done.set_exception(ConnectionError(f"the HTTP/2 connection was lost: {exc!r}"))
        self.streams.clear()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Watches:
    """Open watches; each reads its stream line by line and counts what it gets. Over HTTP/1.1 (aiohttp) each
    watch is a connection of its own; over HTTP/2 (httpx with h2, `contexts` given) the watches are streams
    multiplexed on one connection per context, H2_STREAMS each (the apiserver's default
    SETTINGS_MAX_CONCURRENT_STREAMS; client-go likewise opens another connection when one is full)."""

    def __init__(self, base: str, context: ssl.SSLContext, h2_contexts: list[ssl.SSLContext] | None = None):
        self.base = base
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=0, force_close=False),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))
        self.h2_contexts = h2_contexts or []  # one a connection (ALPN is set on each), none shared with aiohttp
        self.h2: list[H2Watching] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.first: list[asyncio.Event] = []
        self.events = 0
        self.bookmarks = 0
        self.errors: list[str] = []
        self.ended = 0

    def _count(self, line: bytes) -> None:
        """One line of a watch: an event, a bookmark or an error."""
        kind = orjson.loads(line)["type"]
        if kind == "BOOKMARK":
            self.bookmarks += 1
        elif kind == "ERROR":
            self.errors.append(line.decode()[:200])
        else:
            self.events += 1

    @contextlib.contextmanager
    def _watching(self, first: asyncio.Event) -> Iterator[None]:
        """One watch's life: an error is counted and reported, and the watch counts as ended either way."""
        try:
            yield
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.errors.append(repr(e))
        finally:
            first.set()
            self.ended += 1

    async def _one_h2(self, conn: H2Watching, url: str, first: asyncio.Event) -> None:
        def on_line(line: bytes) -> None:
            first.set()
            self._count(line)

        with self._watching(first):
            status = await conn.watch(url, on_line)
            if status != 200:
                self.errors.append(f"HTTP/2 {status}")

    async def _one(self, url: str, first: asyncio.Event) -> None:
        with self._watching(first):
            async with self.session.get(self.base + url) as resp:
                if resp.status != 200:
                    self.errors.append(f"{resp.status} {(await resp.read())[:200]!r}")
                    return
                async for line in resp.content:
                    first.set()
                    self._count(line)

    async def open(self, count: int, rv: str, timeout: float) -> float:
        """Open count more watches; seconds until each has had its first line."""
        t = time.monotonic()
        start = len(self.tasks)
        for i in range(start, start + count):
            first = asyncio.Event()
            self.first.append(first)
            if self.h2_contexts:
                if i // H2_STREAMS >= len(self.h2):  # this connection is full: the next one
                    host, port = self.base.removeprefix("https://").rsplit(":", 1)
                    self.h2.append(await H2Watching().connect(host, int(port), self.h2_contexts[len(self.h2)]))
                conn = self.h2[i // H2_STREAMS]
                self.tasks.append(asyncio.create_task(self._one_h2(conn, watch_url(i, rv), first)))
            else:
                self.tasks.append(asyncio.create_task(self._one(watch_url(i, rv), first)))
            if i % 50 == 49:  # let handshakes finish rather than queue 1,000 of them at once
                await asyncio.sleep(0)
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(f.wait() for f in self.first[start:]))
        return time.monotonic() - t

    @property
    def open_count(self) -> int:
        return len(self.tasks) - self.ended

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()
        self.first.clear()
        await self.session.close()
        for conn in self.h2:
            conn.close()


async def writer(base: str, context: ssl.SSLContext, stop: asyncio.Event, period: float) -> int:
    """Keep pods changing (a label bump on one pod after another) until stop; returns the writes done."""
    writes = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        while not stop.is_set():
            i = writes % (NAMESPACES * PODS_PER_NAMESPACE)
            ns, name = f"bench-watch-{i % NAMESPACES}", f"pod-{i // NAMESPACES}"
            patch = {"metadata": {"annotations": {"bench/write": str(writes)}}}
            async with session.patch(f"{base}/api/v1/namespaces/{ns}/pods/{name}", data=orjson.dumps(patch),
                                     headers={"content-type": "application/merge-patch+json"}) as resp:
                await resp.read()
                if resp.status == 200:
                    writes += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), period)
    return writes


async def measure(server: SecureApiServer, pid: int, context: ssl.SSLContext, total: int, quick: bool,
                  say: Any, http2: bool = False) -> dict[str, Any]:
    """Watches over HTTP/1.1, a connection each, or (http2) multiplexed on HTTP/2 connections of H2_STREAMS."""
    base = server.secure_url

    def h2_contexts(count: int) -> list[ssl.SSLContext] | None:
        if not http2:
            return None
        return [server.ssl_context("bench-watcher") for _ in range(-(-count // H2_STREAMS))]

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as s, \
            s.get(f"{base}/api/v1/pods?limit=1") as resp:
        rv = (await resp.json())["metadata"]["resourceVersion"]

    # warm-up: every kind of watch opened, fed and closed once
    warm = Watches(base, context, h2_contexts(40))
    await warm.open(40, rv, 60)
    await asyncio.sleep(1.5)
    await warm.close()
    baseline = await settled_rss(pid, quick)
    say(f"baseline RSS {baseline / 1024:.1f} MB")

    stop = asyncio.Event()
    write_task = asyncio.create_task(writer(base, context, stop, 0.05))
    watches = Watches(base, context, h2_contexts(total))
    steps: list[dict[str, Any]] = []
    try:
        for count in (total // 5, total):
            opened = await watches.open(count - watches.open_count, rv, 120)
            events_before = watches.events
            await asyncio.sleep(2 if quick else 5)  # events and bookmarks go through every queue
            rss = await settled_rss(pid, quick)
            if watches.events == events_before:
                raise RuntimeError("no watch event arrived while the writer ran")
            step = {"watches": count, "open": watches.open_count, "rss_kb": rss,
                    "kb_per_watch": (rss - baseline) / count, "open_seconds": round(opened, 2)}
            steps.append(step)
            say(f"{count:,} watches: RSS {rss / 1024:.1f} MB, {step['kb_per_watch']:.1f} KB per watch "
                f"(opened in {opened:.1f} s; {watches.events:,} events, {watches.bookmarks:,} bookmarks so far)")
        if watches.open_count != total or watches.errors:
            raise RuntimeError(f"{watches.open_count} of {total} watches open; errors: {watches.errors[:5]}")
    finally:
        stop.set()
        writes = await write_task
        events, bookmarks = watches.events, watches.bookmarks
        await watches.close()
    after = await settled_rss(pid, quick)
    low, high = steps
    slope = (high["rss_kb"] - low["rss_kb"]) / (high["watches"] - low["watches"])
    return {"baseline_rss_kb": baseline, "steps": steps, "kb_per_watch": high["kb_per_watch"],
            "slope_kb_per_watch": slope, "after_close_rss_kb": after, "writes": writes, "events": events,
            "bookmarks": bookmarks, "connections": len(watches.h2) if http2 else total}


async def measure_idle(server: SecureApiServer, pid: int, context: ssl.SSLContext, total: int, quick: bool,
                       say: Any) -> dict[str, Any]:
    """RSS of N idle keep-alive HTTPS connections, each after one GET, over the same warm-up baseline."""
    async def connect(i: int) -> TlsConn:
        conn = await TlsConn("127.0.0.1", server.secure_port, context).connect()
        ns = f"bench-watch-{i % NAMESPACES}"
        status, _ = await conn.request("GET", f"/api/v1/namespaces/{ns}/pods/pod-{i % PODS_PER_NAMESPACE}")
        if status != 200:
            raise RuntimeError(f"GET answered {status}")
        return conn

    async def open_all(count: int) -> list[TlsConn]:
        conns = []
        for start in range(0, count, 50):
            conns += await asyncio.gather(*(connect(i) for i in range(start, min(count, start + 50))))
        return conns

    for conn in await open_all(40):
        conn.close()
    baseline = await settled_rss(pid, quick)
    conns = await open_all(total)
    rss = await settled_rss(pid, quick)
    for conn in conns:
        conn.close()
    kb = (rss - baseline) / total
    say(f"{total:,} idle HTTPS connections: RSS {baseline / 1024:.1f} → {rss / 1024:.1f} MB, {kb:.1f} KB each")
    return {"baseline_rss_kb": baseline, "rss_kb": rss, "connections": total, "kb_per_connection": kb}


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def openssl_kb_per_connection(server: SecureApiServer, client_name: str, count: int = 300) -> float | None:
    """KB that OpenSSL (and Python's SSLObject and two MemoryBIOs around it) keeps for one server-side TLS
    connection after the handshake and one small exchange: the apiserver's server context, a client certificate.
    None where glibc's mallinfo2 is missing."""
    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2
    layout = server.pki
    srv = server_ssl_context(str(layout.serving_cert), str(layout.serving_key), str(layout.ca_cert))
    cli = ssl.create_default_context(cafile=str(layout.ca_cert))
    cli.load_cert_chain(layout.cert(client_name), layout.key(client_name))

    def connection() -> tuple[Any, ...]:
        s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
        s = srv.wrap_bio(s_in, s_out, server_side=True)
        c = cli.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
        for _ in range(10):
            for obj, out, peer_in in ((c, c_out, s_in), (s, s_out, c_in)):
                with contextlib.suppress(ssl.SSLWantReadError):
                    obj.do_handshake()
                peer_in.write(out.read())
        c.write(b"GET / HTTP/1.1\r\n\r\n")
        s_in.write(c_out.read())
        s.read(1 << 16)
        s.write(b"HTTP/1.1 200 OK\r\n\r\n")
        c_in.write(s_out.read())
        c.read(1 << 16)
        if not s.getpeercert():
            raise RuntimeError("the client certificate was not verified")
        return s, s_in, s_out  # the client's side is freed

    connection()
    gc.collect()
    before = mallinfo2().uordblks
    kept = [connection() for _ in range(count)]
    gc.collect()
    after = mallinfo2().uordblks
    del kept
    return (after - before) / count / 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.watch_memory_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="shorter holds and settling (under a minute)")
    p.add_argument("--watches", type=int, default=1000, help="concurrent watches at the top step (default 1,000)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args(argv)

    # a socket per watch on both sides of loopback; the apiserver inherits the limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 4 * args.watches + 1024)) if hard != resource.RLIM_INFINITY else 4 * args.watches + 1024
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    def say(text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr)

    workdir = make_workdir("minik8s-watch-memory-bench-")
    etcd = Etcd(workdir)
    etcd.start()
    server = SecureApiServer(workdir, etcd)
    idle_server: SecureApiServer | None = None
    h2_server: SecureApiServer | None = None
    try:
        server.start()
        pid = server.process.proc.pid  # type: ignore[union-attr]
        server.issue("bench-watcher", "bench-watcher")
        with server.client("admin") as admin:
            admin.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", json={
                "metadata": {"name": "bench:pod-watcher"},
                "rules": [{"verbs": ["get", "list", "watch", "patch"], "apiGroups": [""], "resources": ["pods"]}]})
            admin.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json={
                "metadata": {"name": "bench:pod-watcher"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "bench:pod-watcher"},
                "subjects": [{"kind": "User", "name": "bench-watcher"}]})
            for n in range(NAMESPACES):
                ns = f"bench-watch-{n}"
                admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}})
                for j in range(PODS_PER_NAMESPACE):
                    admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod(f"pod-{j}", ns, n * PODS_PER_NAMESPACE + j))
        context = server.ssl_context("bench-watcher")
        openssl_kb = openssl_kb_per_connection(server, "bench-watcher")
        with httpx.Client(base_url=server.secure_url, verify=context) as watcher:
            wait_for(lambda: watcher.get("/api/v1/pods?limit=1").status_code == 200, 10, what="the watcher's binding")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            result = runner.run(measure(server, pid, context, args.watches, args.quick, say))
        server.stop()

        idle_server = SecureApiServer(workdir, etcd)  # fresh: the watches' freed memory would be reused
        idle_server.start()
        idle_server.issue("bench-watcher", "bench-watcher")
        idle_context = idle_server.ssl_context("bench-watcher")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            result["idle"] = runner.run(measure_idle(idle_server, idle_server.process.proc.pid,  # type: ignore[union-attr]
                                                     idle_context, args.watches, args.quick, say))
        idle_server.stop()

        # the same watches multiplexed on HTTP/2 connections, on a third apiserver (fresh, same etcd and warm-up)
        h2_server = SecureApiServer(workdir, etcd)
        h2_server.start()
        h2_server.issue("bench-watcher", "bench-watcher")
        say("HTTP/2: the same watches, multiplexed")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            result["http2"] = runner.run(measure(h2_server, h2_server.process.proc.pid,  # type: ignore[union-attr]
                                                 h2_server.ssl_context("bench-watcher"), args.watches, args.quick,
                                                 say, http2=True))
    finally:
        server.stop()
        if idle_server is not None:
            idle_server.stop()
        if h2_server is not None:
            h2_server.stop()
        etcd.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    base, (low, high), idle = result["baseline_rss_kb"], result["steps"], result["idle"]
    result["own_kb_per_watch"] = result["kb_per_watch"] - idle["kb_per_connection"]
    result["openssl_kb_per_connection"] = openssl_kb
    rows = [("no watches (baseline)", f"{base / 1024:.1f}", "", ""),
            *((f"{s['watches']:,} watches", f"{s['rss_kb'] / 1024:.1f}", f"{(s['rss_kb'] - base) / 1024:+.1f}",
               f"{s['kb_per_watch']:.1f}") for s in (low, high)),
            (f"slope {low['watches']:,} → {high['watches']:,}", "", "", f"{result['slope_kb_per_watch']:.1f}"),
            ("after closing them all", f"{result['after_close_rss_kb'] / 1024:.1f}",
             f"{(result['after_close_rss_kb'] - base) / 1024:+.1f}", ""),
            (f"{idle['connections']:,} idle HTTPS connections (2nd apiserver)", f"{idle['rss_kb'] / 1024:.1f}",
             f"{(idle['rss_kb'] - idle['baseline_rss_kb']) / 1024:+.1f}", f"{idle['kb_per_connection']:.1f}"),
            ("OpenSSL's own part of a connection (in this process)", "", "",
             "n/a" if openssl_kb is None else f"{openssl_kb:.1f}")]
    h2 = result["http2"]
    h2_base, (h2_low, h2_high) = h2["baseline_rss_kb"], h2["steps"]
    rows += [(f"HTTP/2 (3rd apiserver, {h2['connections']} connections): no watches", f"{h2_base / 1024:.1f}", "", ""),
             *((f"HTTP/2: {s['watches']:,} watches", f"{s['rss_kb'] / 1024:.1f}",
                f"{(s['rss_kb'] - h2_base) / 1024:+.1f}", f"{s['kb_per_watch']:.1f}") for s in (h2_low, h2_high)),
             (f"HTTP/2: slope {h2_low['watches']:,} → {h2_high['watches']:,}", "", "",
              f"{h2['slope_kb_per_watch']:.1f}"),
             ("HTTP/2: after closing them all", f"{h2['after_close_rss_kb'] / 1024:.1f}",
              f"{(h2['after_close_rss_kb'] - h2_base) / 1024:+.1f}", "")]
    print()
    print(f"apiserver memory per watch ({'quick' if args.quick else 'full'}; HTTPS, x509 non-master user, RBAC, "
          f"admission, audit at Metadata; {result['writes']:,} writes, {result['events']:,} events and "
          f"{result['bookmarks']:,} bookmarks delivered)")
    print()
    print(render_table(("apiserver", "RSS MB", "over baseline MB", "KB per watch"), rows))
    print()
    kb, h2_kb = result["kb_per_watch"], h2["kb_per_watch"]
    print(f"RSS per watch at {high['watches']:,} watches over HTTP/1.1: {kb:.1f} KB; its connection alone (idle "
          f"keep-alive HTTPS) {idle['kb_per_connection']:.1f} KB, the watch over it "
          f"{result['own_kb_per_watch']:.1f} KB")
    print(f"RSS per watch at {h2_high['watches']:,} watches over HTTP/2 ({h2['connections']} connections): "
          f"{h2_kb:.1f} KB (target ≤ {TARGET_KB:.0f} KB: {'met' if h2_kb <= TARGET_KB else 'NOT MET'}), "
          f"{h2_kb / kb:.2f} of HTTP/1.1's")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    out = OUTPUT / "watch_memory.json"
    out.write_text(json.dumps({"benchmark": "watch_memory", "quick": args.quick, "watches": args.watches, **result},
                              indent=2))
    print(f"JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
