"""The apiserver benchmark: a real etcd and a real apiserver process, loaded from this process.

    python -m bench.apiserver_bench [--quick] [--profile] [--client raw|httpx]

Every figure is measured in one run and set against its target and, where it means something,
against raw etcd driven through the apiserver's own `EtcdStorage` client in the same run.
The table goes to stdout, everything else to `_output/bench/apiserver.json`. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import orjson

from tests.cluster import REPO, ApiServer, Etcd, make_workdir

OUTPUT = REPO / "_output" / "bench"

# -- pure statistics and formatting helpers (unit-tested in tests/unit/bench/test_bench_stats.py) ----------------------


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0 ≤ p ≤ 100), interpolating linearly between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100 or math.isnan(p):
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    ordered = sorted(values)
    return _percentile_sorted(ordered, p)


def _percentile_sorted(ordered: Sequence[float], p: float) -> float:
    k = (len(ordered) - 1) * p / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summarize(values: Sequence[float], scale: float = 1.0) -> dict[str, float]:
    """n, mean, min, p50, p90, p99, max of values (each multiplied by scale, e.g. 1000 for s → ms)."""
    if not values:
        return {"n": 0}
    ordered = sorted(v * scale for v in values)
    return {"n": len(ordered), "mean": sum(ordered) / len(ordered), "min": ordered[0],
            "p50": _percentile_sorted(ordered, 50), "p90": _percentile_sorted(ordered, 90),
            "p99": _percentile_sorted(ordered, 99), "max": ordered[-1]}


def rate(count: int, seconds: float) -> float:
    """Operations per second."""
    if seconds <= 0 or math.isnan(seconds):
        raise ValueError(f"rate over a non-positive duration: {seconds}")
    return count / seconds


def ratio(value: float | None, baseline: float | None) -> float | None:
    """value / baseline, or None when either is missing or the baseline is not positive."""
    if value is None or baseline is None or math.isnan(value) or math.isnan(baseline) or baseline <= 0:
        return None
    return value / baseline


def format_ratio(r: float | None, as_percent: bool = True) -> str:
    """0.372 → '37.2%' (or '0.37x' when as_percent is False); None → '—'."""
    if r is None:
        return "—"
    if as_percent:
        return f"{r * 100:.1f}%"
    return f"{r:.2f}x" if r < 10 else f"{r:.1f}x"


def format_value(value: float | None, unit: str) -> str:
    """A figure with its unit: rates with thousands separators, milliseconds with sensible decimals."""
    if value is None or math.isnan(value):
        return "error"
    if unit == "/s":
        return f"{value:,.0f}/s"
    if unit == "ms":
        return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"
    if unit == "MB":
        return f"{value:.1f} MB"
    if unit == "ratio":
        return format_ratio(value)
    if unit == "us":
        return f"{value:,.0f} µs"
    return f"{value:g} {unit}".strip()


def verdict(value: float | None, target: float | None, higher_is_better: bool) -> str:
    """'met', 'NOT MET', '—' (no target) or 'error' (no value)."""
    if target is None:
        return "—"
    if value is None or math.isnan(value):
        return "error"
    ok = value >= target if higher_is_better else value <= target
    return "met" if ok else "NOT MET"


def format_target(target: float | None, unit: str, higher_is_better: bool) -> str:
    if target is None:
        return "—"
    return ("≥ " if higher_is_better else "≤ ") + format_value(target, unit)


@dataclass
class Figure:
    """One line of the table."""

    label: str
    value: float | None
    unit: str  # "/s", "ms", "MB", "ratio", "us"
    target: float | None = None
    higher_is_better: bool = True
    baseline: float | None = None  # the raw etcd figure it compares with, same unit
    baseline_as_percent: bool = True  # rates read as "% of etcd", latencies as "x etcd"
    note: str = ""

    def row(self) -> list[str]:
        return [self.label, format_value(self.value, self.unit),
                format_target(self.target, self.unit, self.higher_is_better),
                verdict(self.value, self.target, self.higher_is_better),
                format_ratio(ratio(self.value, self.baseline), self.baseline_as_percent), self.note]

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = verdict(self.value, self.target, self.higher_is_better)
        out["vs_raw_etcd"] = ratio(self.value, self.baseline)
        return out


def render_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A plain-text table whose columns are as wide as their widest cell."""
    rows = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# -- processes: CPU and memory from /proc ------------------------------------------------------------------------

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime: fields 14 and 15 of stat(5)


def machine_idle_seconds() -> float:
    """Idle + iowait CPU seconds of the whole machine, summed over its cores (/proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return (int(fields[4]) + int(fields[5])) / _CLK_TCK


def proc_memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) in MB of 10^6 bytes."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(rest.split()[0]) * 1024 / 1e6
    return out


class CpuMeter:
    """CPU seconds used by the apiserver, etcd and this (client) process over a stretch of wall time."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids
        self.start: dict[str, float] = {}
        self.wall = 0.0
        self.used: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        now = {name: proc_cpu_seconds(pid) for name, pid in self.pids.items()}
        now["client"] = time.process_time()
        now["idle"] = machine_idle_seconds()
        return now

    def __enter__(self) -> CpuMeter:
        self.start = self._now()
        self.wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        end = self._now()
        self.used = {name: end[name] - self.start[name] for name in end}

    def report(self, requests: int) -> dict[str, Any]:
        """Per process, plus `idle` (the machine's idle time) and `others` (CPU used by every other process):
        cores used on average, and CPU milliseconds per request."""
        used = dict(self.used)
        # whatever else ran on the machine meanwhile (other tests, builds): the noise in this phase's figures
        busy = (os.cpu_count() or 1) * self.wall - used["idle"]
        used["others"] = max(0.0, busy - sum(v for k, v in used.items() if k != "idle"))
        return {name: {"cores": round(u / self.wall, 3) if self.wall else None,
                       "cpu_ms_per_request": round(u * 1000 / requests, 4) if requests else None}
                for name, u in used.items()} | {"wall_s": round(self.wall, 3)}


# -- a cheap HTTP/1.1 keep-alive client on asyncio streams ---------------------------------------------------------


class HttpConn:
    """One keep-alive HTTP/1.1 connection: just enough of the protocol for JSON requests and chunked watches."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> HttpConn:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        return self

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    def send(self, method: str, path: str, body: bytes | None = None) -> None:
        assert self.writer is not None
        # a User-Agent as every real client sends: it names the field manager of the writes (managedFields)
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nUser-Agent: apiserver-bench/v1\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + (body or b""))

    async def read_head(self) -> tuple[int, dict[str, str]]:
        assert self.reader is not None
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            if line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        return status, headers

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body of a chunked response, chunk by chunk."""
        assert self.reader is not None
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                while await self.reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return
            yield (await self.reader.readexactly(size + 2))[:-2]

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        if self.writer is None:
            await self.connect()
        self.send(method, path, body)
        status, headers = await self.read_head()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            data = b"".join([chunk async for chunk in self.chunks()])
        else:
            length = int(headers.get("content-length", "0"))
            assert self.reader is not None
            data = await self.reader.readexactly(length) if length else b""
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, data


# -- load generators -------------------------------------------------------------------------------------------------

Request = tuple[str, str, bytes | None]  # method, path, body
MakeRequest = Callable[[int], Request]


@dataclass
class LoadResult:
    ok: int = 0
    errors: int = 0
    elapsed: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, successful requests only
    statuses: Counter[str] = field(default_factory=Counter)
    cpu: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return rate(self.ok, self.elapsed)

    def summary(self) -> dict[str, Any]:
        return {"ok": self.ok, "errors": self.errors, "elapsed_s": round(self.elapsed, 3),
                "rate_per_s": round(self.rate, 1) if self.elapsed > 0 else None,
                "latency_ms": _rounded(summarize(self.latencies, 1000)), "statuses": dict(self.statuses),
                "cpu": self.cpu, **self.extra}


def _rounded(d: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in d.items()}


async def closed_loop(host: str, port: int, total: int, concurrency: int, make: MakeRequest, expect: int,
                      client: str, meter: CpuMeter) -> LoadResult:
    """`concurrency` clients, each sending its next request when the previous one is answered."""
    result = LoadResult()
    counter = itertools.count()

    async def record(send: Callable[[], Awaitable[int]]) -> None:
        t = time.perf_counter()
        try:
            status = await send()
        except (OSError, asyncio.IncompleteReadError, httpx.HTTPError) as e:
            result.errors += 1
            result.statuses[type(e).__name__] += 1
            return
        result.statuses[str(status)] += 1
        if status == expect:
            result.ok += 1
            result.latencies.append(time.perf_counter() - t)
        else:
            result.errors += 1

    async def raw_worker() -> None:
        conn = await HttpConn(host, port).connect()
        try:
            while (i := next(counter)) < total:
                method, path, body = make(i)

                async def send(method: str = method, path: str = path, body: bytes | None = body) -> int:
                    try:
                        return (await conn.request(method, path, body))[0]
                    except BaseException:
                        conn.close()  # the next request reconnects
                        raise

                await record(send)
        finally:
            conn.close()

    async def httpx_worker(session: httpx.AsyncClient) -> None:
        while (i := next(counter)) < total:
            method, path, body = make(i)

            async def send(method: str = method, path: str = path, body: bytes | None = body) -> int:
                headers = {"content-type": "application/json"} if body is not None else None
                response = await session.request(method, path, content=body, headers=headers)
                return response.status_code

            await record(send)

    with meter:
        if client == "httpx":
            limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}", limits=limits, timeout=30) as session:
                await asyncio.gather(*(httpx_worker(session) for _ in range(concurrency)))
        else:
            await asyncio.gather(*(raw_worker() for _ in range(concurrency)))
    result.elapsed = meter.wall
    result.cpu = meter.report(result.ok + result.errors)
    return result


async def open_loop(host: str, port: int, per_second: float, count: int, make: MakeRequest, expect: int,
                    meter: CpuMeter, on_sent: Callable[[int, float], None] | None = None,
                    warm_connections: int = 16, max_connections: int = 256) -> LoadResult:
    """Requests started at fixed times (i / per_second), whatever happened to earlier ones; each latency runs
    from the request's scheduled time, so a stall is charged to every request it delays (no coordinated
    omission). Connections come from a pool that grows when all are busy."""
    result = LoadResult()
    idle = [await HttpConn(host, port).connect() for _ in range(warm_connections)]
    slots = asyncio.Semaphore(max_connections)
    lateness: list[float] = []

    async def one(i: int, scheduled: float) -> None:
        async with slots:
            conn = idle.pop() if idle else HttpConn(host, port)
            method, path, body = make(i)
            try:
                sent = time.perf_counter()
                if on_sent is not None:
                    on_sent(i, sent)
                status, _ = await conn.request(method, path, body)
            except (OSError, asyncio.IncompleteReadError) as e:
                conn.close()
                result.errors += 1
                result.statuses[type(e).__name__] += 1
                return
            done = time.perf_counter()
            idle.append(conn)
        result.statuses[str(status)] += 1
        if status == expect:
            result.ok += 1
            result.latencies.append(done - scheduled)
        else:
            result.errors += 1

    tasks = []
    with meter:
        start = time.perf_counter() + 0.02
        for i in range(count):
            scheduled = start + i / per_second
            while (delay := scheduled - time.perf_counter()) > 0:  # timers may fire a little early
                await asyncio.sleep(delay)
            lateness.append(time.perf_counter() - scheduled)
            tasks.append(asyncio.create_task(one(i, scheduled)))
        await asyncio.gather(*tasks)
    for conn in idle:
        conn.close()
    result.elapsed = meter.wall
    result.cpu = meter.report(count)
    result.extra = {"target_rate_per_s": per_second, "connections_used": len(idle),
                    "dispatch_lateness_ms": _rounded(summarize(lateness, 1000))}
    return result


# -- the benchmark -------------------------------------------------------------------------------------------------


@dataclass
class Sizes:
    etcd_ops: int  # raw etcd puts, and as many gets
    pods_held: int  # pods in the apiserver when RSS is measured (warm-up + list namespace + create phase)
    warmup: int
    list_pods: int
    gets: int
    httpx_gets: int
    list_samples: int
    paced_rate: float
    paced_seconds: float
    watchers: int
    watch_rate: float
    watch_seconds: float
    concurrency: int = 64
    profile_seconds: float = 15.0


FULL = Sizes(etcd_ops=10_000, pods_held=10_000, warmup=200, list_pods=1_000, gets=10_000, httpx_gets=2_000,
             list_samples=100, paced_rate=200, paced_seconds=10, watchers=100, watch_rate=20, watch_seconds=5)
QUICK = Sizes(etcd_ops=2_000, pods_held=2_000, warmup=100, list_pods=200, gets=2_000, httpx_gets=500,
              list_samples=20, paced_rate=200, paced_seconds=3, watchers=20, watch_rate=20, watch_seconds=2,
              profile_seconds=5)

NS_WARM, NS_CREATE, NS_LIST, NS_PACED, NS_WATCH, NS_PROFILE = ("bench-warm", "bench-create", "bench-list",
                                                               "bench-paced", "bench-watch", "bench-profile")


# With --gc-stats: a gc callback inside the apiserver logs every collection (generation, wall ms, CPU ms).
GC_PRELUDE = """
import gc as _gc, time as _time
_gc_log = open({path!r}, "a", buffering=1)
_gc_t = [0.0, 0.0]
def _gc_cb(phase, info):
    if phase == "start":
        _gc_t[0], _gc_t[1] = _time.perf_counter(), _time.thread_time()
    else:
        _gc_log.write("%.3f %d %.3f %.3f\\n" % (_time.time(), info["generation"],
                      (_time.perf_counter() - _gc_t[0]) * 1000, (_time.thread_time() - _gc_t[1]) * 1000))
_gc.callbacks.append(_gc_cb)
"""


def summarize_gc(log: str, windows: dict[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """The apiserver's collections per generation (count, wall ms: total, p50, p99, max; CPU ms total), overall
    and per phase window (name → (start, end) in epoch seconds)."""
    rows = []
    for line in log.splitlines():
        parts = line.split()
        if len(parts) == 4:
            rows.append((float(parts[0]), int(parts[1]), float(parts[2]), float(parts[3])))

    def per_generation(selected: list[tuple[float, int, float, float]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for gen in (0, 1, 2):
            wall = [r[2] for r in selected if r[1] == gen]
            cpu = [r[3] for r in selected if r[1] == gen]
            out[f"gen{gen}"] = {"n": len(wall), "wall_ms_total": round(sum(wall), 1),
                                "cpu_ms_total": round(sum(cpu), 1)} | (
                {k: round(v, 2) for k, v in summarize(wall).items() if k in ("p50", "p99", "max")} if wall else {})
        return out

    result: dict[str, Any] = {"all": per_generation(rows)}
    for name, (start, end) in (windows or {}).items():
        result[name] = per_generation([r for r in rows if start <= r[0] <= end])
    return result


def pod_body(name: str, namespace: str) -> bytes:
    """A pod as a ReplicaSet would write it: labels, one container with a port and requests."""
    return orjson.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "bench", "tier": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                 "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    })


def pods_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def create_pod(namespace: str, prefix: str) -> MakeRequest:
    return lambda i: ("POST", pods_path(namespace), pod_body(f"{prefix}-{i:05d}", namespace))


class Bench:
    def __init__(self, args: argparse.Namespace, etcd: Etcd, api: ApiServer):
        self.args = args
        self.sizes = QUICK if args.quick else FULL
        self.etcd, self.api = etcd, api
        self.host, self.port = "127.0.0.1", api.port
        assert api.process.proc is not None and etcd.process.proc is not None
        self.api_pid, self.etcd_pid = api.process.proc.pid, etcd.process.proc.pid
        self.figures: dict[str, Figure] = {}
        self.phases: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        self.memory: dict[str, Any] = {}
        self.profile: dict[str, Any] = {}
        self.windows: dict[str, tuple[float, float]] = {}  # phase → (start, end), epoch seconds
        self.gc: dict[str, Any] = {}
        self.background = 0.0  # cores busy before the benchmark began (other sessions' work)
        self.stored_pod = b""  # what one created pod looks like in etcd: the raw baseline writes the same bytes

    def meter(self) -> CpuMeter:
        return CpuMeter({"apiserver": self.api_pid, "etcd": self.etcd_pid})

    def log(self, message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    async def phase(self, name: str, budget: float, body: Callable[[], Awaitable[None]]) -> None:
        """Run one phase under a time budget; a failure is recorded and the next phase still runs."""
        self.log(f"{name} …")
        t = time.perf_counter()
        started = time.time()
        try:
            async with asyncio.timeout(budget):
                await body()
        except TimeoutError:
            self.errors[name] = f"timed out after {budget:.0f}s"
        except (OSError, asyncio.IncompleteReadError, AssertionError, ValueError, RuntimeError, KeyError) as e:
            self.errors[name] = f"{type(e).__name__}: {e}"
        self.windows[name] = (started, time.time())
        if name in self.errors:
            self.log(f"{name}: FAILED: {self.errors[name]}")
        else:
            self.log(f"{name}: done in {time.perf_counter() - t:.1f}s")

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        conn = await HttpConn(self.host, self.port).connect()
        try:
            return await conn.request(method, path, body)
        finally:
            conn.close()

    async def closed(self, total: int, make: MakeRequest, expect: int, client: str | None = None) -> LoadResult:
        return await closed_loop(self.host, self.port, total, self.sizes.concurrency, make, expect,
                                 client or self.args.client, self.meter())

    async def settle(self, limit: float = 15.0) -> None:
        """Wait until the apiserver is idle (its watch cache has caught up with what was written)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            before = proc_cpu_seconds(self.api_pid)
            await asyncio.sleep(0.5)
            if proc_cpu_seconds(self.api_pid) - before < 0.025:
                return

    # -- phases ------------------------------------------------------------------------------------------------------

    async def setup(self) -> None:
        self.memory["rss_idle"] = proc_memory_mb(self.api_pid)
        for ns in (NS_WARM, NS_CREATE, NS_LIST, NS_PACED, NS_WATCH, NS_PROFILE):
            status, body = await self.request("POST", "/api/v1/namespaces", orjson.dumps(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            assert status in (201, 409), f"creating namespace {ns}: {status} {body[:300]!r}"
        warm = await self.closed(self.sizes.warmup, create_pod(NS_WARM, "w"), 201)
        assert warm.ok == self.sizes.warmup, f"warm-up creates failed: {warm.statuses}"
        status, body = await self.request("GET", f"{pods_path(NS_WARM)}/w-00000")
        assert status == 200, f"reading a pod back: {status} {body[:300]!r}"
        from apiserver.storage import codec  # the exact bytes the apiserver stored
        self.stored_pod = codec.encode(orjson.loads(body))
        await self.closed(self.sizes.warmup, lambda i: ("GET", f"{pods_path(NS_WARM)}/w-{i:05d}", None), 200)
        self.phases["setup"] = {"warmup": warm.summary(), "stored_pod_bytes": len(self.stored_pod)}

    async def raw_etcd(self) -> None:
        from apiserver.storage.etcd import EtcdStorage

        storage = EtcdStorage([self.etcd.endpoint])
        n, c = self.sizes.etcd_ops, self.sizes.concurrency
        try:
            await storage.current_revision()  # opens the channel

            async def run(op: Callable[[int], Awaitable[object]]) -> LoadResult:
                result = LoadResult()
                counter = itertools.count()

                async def task() -> None:
                    while (i := next(counter)) < n:
                        t = time.perf_counter()
                        await op(i)
                        result.latencies.append(time.perf_counter() - t)
                        result.ok += 1

                meter = self.meter()
                with meter:
                    await asyncio.gather(*(task() for _ in range(c)))
                result.elapsed, result.cpu = meter.wall, meter.report(n)
                return result

            value = self.stored_pod
            puts = await run(lambda i: storage.create(f"/bench-raw/pods/{i:06d}", value))
            rng = random.Random(1)
            keys = [f"/bench-raw/pods/{rng.randrange(n):06d}" for _ in range(n)]
            gets = await run(lambda i: storage.get(keys[i]))
        finally:
            await storage.close()
        self.phases["raw_etcd"] = {"put": puts.summary(), "get": gets.summary(),
                                   "put_is": "EtcdStorage.create: one Txn (version == 0 → put), as a pod create does"}
        self.figures["etcd_put"] = Figure("raw etcd puts (EtcdStorage.create, 64 tasks)", puts.rate, "/s",
                                          note=f"{len(value)} B values; p50 "
                                               f"{summarize(puts.latencies, 1000)['p50']:.2f} ms — the baseline")
        self.figures["etcd_get"] = Figure("raw etcd gets (EtcdStorage.get, 64 tasks)", gets.rate, "/s",
                                          note=f"p50 {summarize(gets.latencies, 1000)['p50']:.2f} ms — the baseline")

    async def fill_list_namespace(self) -> None:
        result = await self.closed(self.sizes.list_pods, create_pod(NS_LIST, "l"), 201)
        assert result.ok == self.sizes.list_pods, f"filling {NS_LIST}: {result.statuses}"
        self.phases["fill_list_namespace"] = result.summary()

    async def creates(self) -> None:
        s = self.sizes
        n = s.pods_held - s.warmup - s.list_pods
        result = await self.closed(n, create_pod(NS_CREATE, "c"), 201)
        self.phases["creates"] = result.summary()
        put = self.figures.get("etcd_put")
        lat = summarize(result.latencies, 1000)
        cpu = result.cpu["apiserver"]
        self.figures["creates"] = Figure(
            f"apiserver pod creates ({s.concurrency} clients)", result.rate, "/s", target=1000,
            baseline=put.value if put else None,
            note=f"{result.ok:,} pods, {result.errors} errors; apiserver {cpu['cores']:.2f} cores, "
                 f"{cpu['cpu_ms_per_request']:.2f} CPU ms/create")
        self.figures["create_ratio"] = Figure("apiserver create / raw etcd put", ratio(result.rate, put.value)
                                              if put else None, "ratio", target=0.40)
        self.figures["create_latency_closed"] = Figure(
            f"  create latency p50 / p99 under {s.concurrency} clients", lat.get("p50"), "ms",
            baseline=self.phases.get("raw_etcd", {}).get("put", {}).get("latency_ms", {}).get("p50"),
            baseline_as_percent=False, note=f"p99 {lat.get('p99', math.nan):.1f} ms; closed loop, informational")

    async def rss_after_fill(self) -> None:
        from apiserver.storage.etcd import EtcdStorage

        await self.settle()
        storage = EtcdStorage([self.etcd.endpoint])
        try:
            held = await storage.count("/registry/pods/")
        finally:
            await storage.close()
        mem = proc_memory_mb(self.api_pid)
        self.memory["rss_holding_pods"] = mem
        self.memory["pods_held"] = held
        idle = self.memory.get("rss_idle", {}).get("VmRSS")
        self.figures["rss_before"] = Figure("apiserver RSS before (namespaces only)", idle, "MB",
                                            note="VmRSS after start-up")
        self.figures["rss_held"] = Figure(f"apiserver RSS holding {held:,} pods", mem["VmRSS"], "MB",
                                          target=120, higher_is_better=False,
                                          note=f"peak (VmHWM) so far {mem['VmHWM']:.1f} MB")

    async def gets(self) -> None:
        s = self.sizes
        created = self.phases.get("creates", {}).get("ok") or 0
        ns, prefix, pool = (NS_CREATE, "c", created) if created else (NS_WARM, "w", s.warmup)
        rng = random.Random(2)
        picks = [rng.randrange(pool) for _ in range(max(s.gets, s.httpx_gets))]

        def make(i: int) -> Request:
            return "GET", f"{pods_path(ns)}/{prefix}-{picks[i]:05d}", None

        raw = await self.closed(s.gets, make, 200, client="raw")
        self.phases["gets_raw"] = raw.summary()
        via_httpx = await self.closed(s.httpx_gets, make, 200, client="httpx")
        self.phases["gets_httpx"] = via_httpx.summary()
        headline = via_httpx if self.args.client == "httpx" else raw
        get = self.figures.get("etcd_get")
        cpu = headline.cpu["apiserver"]
        self.figures["gets"] = Figure(f"apiserver pod gets ({s.concurrency} clients)", headline.rate, "/s",
                                      baseline=get.value if get else None,
                                      note=f"{headline.errors} errors; apiserver {cpu['cores']:.2f} cores, "
                                           f"{cpu['cpu_ms_per_request']:.2f} CPU ms/get")
        for name, r in (("raw asyncio", raw), ("httpx", via_httpx)):
            self.figures[f"client_{name}"] = Figure(
                f"  client CPU per GET, {name}", r.cpu["client"]["cpu_ms_per_request"] * 1000, "us",
                note=f"{r.rate:,.0f} gets/s; client used {r.cpu['client']['cores']:.2f} cores")

    async def lists(self) -> None:
        from apiserver.storage.etcd import EtcdStorage

        s = self.sizes
        path = pods_path(NS_LIST)
        status, body = await self.request("GET", path)
        assert status == 200 and len(orjson.loads(body)["items"]) == s.list_pods, "list namespace holds the wrong count"
        results: dict[str, list[float]] = {"etcd": [], "cache": [], "raw": []}
        conn = await HttpConn(self.host, self.port).connect()
        storage = EtcdStorage([self.etcd.endpoint])
        meter = self.meter()
        try:
            with meter:
                for _ in range(s.list_samples):
                    for key, url in (("etcd", path), ("cache", f"{path}?resourceVersion=0")):
                        t = time.perf_counter()
                        status, body = await conn.request("GET", url)
                        results[key].append(time.perf_counter() - t)
                        assert status == 200, f"list: {status}"
                    t = time.perf_counter()
                    kvs, _, _ = await storage.list(f"/registry/pods/{NS_LIST}/")
                    results["raw"].append(time.perf_counter() - t)
                    assert len(kvs) == s.list_pods
        finally:
            conn.close()
            await storage.close()
        stats = {k: summarize(v, 1000) for k, v in results.items()}
        self.phases["lists"] = {"pods": s.list_pods, "response_bytes": len(body),
                                "cpu": meter.report(3 * s.list_samples),
                                **{f"{k}_ms": _rounded(v) for k, v in stats.items()}}
        raw = stats["raw"]
        for key, how in (("etcd", "consistent read from etcd"), ("cache", "resourceVersion=0, watch cache")):
            for q in ("p50", "p99"):
                self.figures[f"list_{key}_{q}"] = Figure(
                    f"list {s.list_pods:,} pods {q} ({how})", stats[key][q], "ms", baseline=raw[q],
                    baseline_as_percent=False,
                    note=f"raw etcd range {q} {raw[q]:.1f} ms" + (f"; {len(body):,} B response" if q == "p50" else ""))

    async def paced(self) -> None:
        s = self.sizes
        count = int(s.paced_rate * s.paced_seconds)
        result = await open_loop(self.host, self.port, s.paced_rate, count, create_pod(NS_PACED, "p"), 201,
                                 self.meter())
        self.phases["paced_creates"] = result.summary()
        lat = summarize(result.latencies, 1000)
        self.figures["paced_p50"] = Figure(f"create latency p50 at a paced {s.paced_rate:.0f}/s", lat.get("p50"),
                                           "ms", note=f"open loop, {count:,} creates, {result.errors} errors")
        self.figures["paced_p99"] = Figure(f"create latency p99 at a paced {s.paced_rate:.0f}/s", lat.get("p99"),
                                           "ms", target=50, higher_is_better=False,
                                           note=f"max {lat.get('max', math.nan):.1f} ms; achieved "
                                                f"{result.rate:,.0f}/s")

    async def watch(self) -> None:
        s = self.sizes
        path = pods_path(NS_WATCH)
        status, body = await self.request("GET", f"{path}?limit=1")
        assert status == 200
        start_rv = orjson.loads(body)["metadata"]["resourceVersion"]
        count = int(s.watch_rate * s.watch_seconds)
        received: list[dict[str, float]] = [{} for _ in range(s.watchers)]
        ready = 0
        all_ready = asyncio.Event()
        conns: list[HttpConn] = []
        oddities: Counter[str] = Counter()

        async def watcher(seen: dict[str, float]) -> None:
            nonlocal ready
            conn = await HttpConn(self.host, self.port).connect()
            conns.append(conn)
            conn.send("GET", f"{path}?watch=true&resourceVersion={start_rv}")
            status, _ = await conn.read_head()
            assert status == 200, f"watch answered {status}"
            ready += 1
            if ready == s.watchers:
                all_ready.set()
            pending = b""
            async for chunk in conn.chunks():
                t = time.perf_counter()
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    if event["type"] == "ADDED":
                        seen.setdefault(event["object"]["metadata"]["name"], t)
                    else:
                        oddities[event["type"]] += 1
                if len(seen) >= count:
                    return

        tasks = [asyncio.create_task(watcher(seen)) for seen in received]
        sent: dict[str, float] = {}
        meter = self.meter()
        try:
            async with asyncio.timeout(30):
                await all_ready.wait()
            await asyncio.sleep(0.2)  # the last watcher registered before its headers went out; be generous
            make = create_pod(NS_WATCH, "e")
            writes = await open_loop(self.host, self.port, s.watch_rate, count, make, 201, meter,
                                     on_sent=lambda i, t: sent.__setitem__(f"e-{i:05d}", t), warm_connections=4)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for conn in conns:
                conn.close()
        latencies = [seen[name] - t0 for seen in received for name, t0 in sent.items() if name in seen]
        expected = s.watchers * count
        lat = summarize(latencies, 1000)
        self.phases["watch"] = {"watchers": s.watchers, "writes": writes.summary(), "expected_deliveries": expected,
                                "delivered": len(latencies), "other_events": dict(oddities),
                                "latency_ms": _rounded(lat)}
        missing = expected - len(latencies)
        self.figures["watch_p50"] = Figure(
            f"watch delivery p50 ({s.watchers} watchers, {s.watch_rate:.0f} writes/s)", lat.get("p50"), "ms",
            note=f"{len(latencies):,}/{expected:,} (watcher, event) pairs delivered")
        self.figures["watch_p99"] = Figure("watch delivery p99", lat.get("p99") if not missing else math.nan,
                                           "ms", target=100, higher_is_better=False,
                                           note=f"max {lat.get('max', math.nan):.1f} ms" + (
                                               f"; {missing} deliveries MISSING" if missing else ""))

    async def final_memory(self) -> None:
        await self.settle()
        mem = proc_memory_mb(self.api_pid)
        self.memory["rss_end"] = mem
        self.figures["rss_end"] = Figure("apiserver RSS at the end (after all phases)", mem["VmRSS"], "MB",
                                         note=f"peak (VmHWM) {mem['VmHWM']:.1f} MB; etcd RSS "
                                              f"{proc_memory_mb(self.etcd_pid)['VmRSS']:.1f} MB")
        if self.args.gc_stats:
            self.gc = summarize_gc(gc_log_path(self.api).read_text(), self.windows)
            full = self.gc["all"]["gen2"]
            young = [self.gc["all"][g] for g in ("gen0", "gen1")]
            self.figures["gc_full"] = Figure(
                "apiserver full (gen-2) GC pause p50", full.get("p50"), "ms",
                note=f"{full['n']} full collections, max {full.get('max', math.nan):.0f} ms, "
                     f"{full['wall_ms_total'] / 1000:.1f} s in all")
            self.figures["gc_young"] = Figure(
                "apiserver young (gen-0/1) GC, total", sum(g["wall_ms_total"] for g in young), "ms",
                note=f"{sum(g['n'] for g in young):,} collections over the run")

    async def profile_creates(self) -> None:
        """A further create load with py-spy sampling the apiserver; prints where its time goes."""
        spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        if spy is None:
            raise RuntimeError("py-spy not found: .venv/bin/pip install py-spy")
        OUTPUT.mkdir(parents=True, exist_ok=True)
        folded = OUTPUT / "apiserver-create.folded"
        seconds = self.sizes.profile_seconds
        proc = await asyncio.create_subprocess_exec(
            spy, "record", "--pid", str(self.api_pid), "--rate", "100", "--format", "raw", "--nolineno",
            "--full-filenames", "--duration", str(int(seconds)), "--output", str(folded),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            await asyncio.sleep(1.0)  # py-spy attaches
            deadline = time.perf_counter() + seconds - 1.5
            made = 0
            while time.perf_counter() < deadline:
                batch = await self.closed(500, lambda i, base=made: create_pod(NS_PROFILE, "f")(base + i), 201)
                made += batch.ok + batch.errors
            _, err = await asyncio.wait_for(proc.communicate(), timeout=seconds + 30)
        finally:
            if proc.returncode is None:
                proc.terminate()
                await proc.wait()
        if not folded.exists():
            raise RuntimeError(f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}")
        self.profile = summarize_profile(folded.read_text())
        self.profile["folded_file"] = str(folded.relative_to(REPO))
        self.profile["creates_during_profile"] = made

    async def run(self) -> None:
        budget = 120 if self.args.quick else 300
        await self.phase("setup: namespaces and warm-up", 60, self.setup)
        await self.phase("1. raw etcd puts and gets", budget, self.raw_etcd)
        await self.phase("2a. fill the list namespace", budget, self.fill_list_namespace)
        await self.phase("2b. pod creates, closed loop", budget, self.creates)
        await self.phase("5. RSS holding the pods", 60, self.rss_after_fill)
        await self.phase("2c. pod gets (raw client, then httpx)", budget, self.gets)
        await self.phase("2d. list latency", budget, self.lists)
        await self.phase("3. paced creates, open loop", budget, self.paced)
        await self.phase("4. watch delivery latency", 120, self.watch)
        await self.phase("5. RSS at the end", 60, self.final_memory)
        if self.args.profile:
            await self.phase("profile: py-spy during creates", self.sizes.profile_seconds + 90, self.profile_creates)

    # -- output ------------------------------------------------------------------------------------------------------

    ORDER = ("etcd_put", "etcd_get", "creates", "create_ratio", "create_latency_closed", "gets", "client_raw asyncio",
             "client_httpx", "list_etcd_p50", "list_etcd_p99", "list_cache_p50",
             "list_cache_p99", "paced_p50", "paced_p99", "watch_p50", "watch_p99",
             "rss_before", "rss_held", "rss_end", "gc_full", "gc_young")

    def table(self) -> str:
        keys = [k for k in self.ORDER if k in self.figures] + [k for k in self.figures if k not in self.ORDER]
        return render_table(["figure", "value", "target", "verdict", "vs raw etcd", "note"],
                            [self.figures[k].row() for k in keys])

    def cpu_table(self) -> str:
        rows = []
        for name, key in (("raw etcd puts", ("raw_etcd", "put")), ("raw etcd gets", ("raw_etcd", "get")),
                          ("pod creates", ("creates",)), ("pod gets (raw)", ("gets_raw",)),
                          ("pod gets (httpx)", ("gets_httpx",)), ("paced creates", ("paced_creates",))):
            phase: Any = self.phases
            for part in key:
                phase = phase.get(part, {}) if isinstance(phase, dict) else {}
            cpu = phase.get("cpu") if isinstance(phase, dict) else None
            if not cpu:
                continue
            rows.append([name] + [f"{cpu[p]['cores']:.2f} cores, {cpu[p]['cpu_ms_per_request']:.3f} ms/req"
                                  for p in ("apiserver", "etcd", "client")]
                        + [f"{cpu[p]['cores']:.2f} cores" for p in ("others", "idle")])
        return render_table(["phase", "apiserver", "etcd", "client (this process)", "other processes",
                             "machine idle"], rows)

    def noisy_phases(self, threshold: float = 0.25) -> dict[str, float]:
        """Phases during which other processes kept more than `threshold` cores busy."""
        out = {}
        for name, phase in self.phases.items():
            for sub, part in [(name, phase), *((f"{name}.{k}", v) for k, v in phase.items())]:
                if isinstance(part, dict) and isinstance(part.get("cpu"), dict) and "others" in part["cpu"]:
                    cores = part["cpu"]["others"]["cores"]
                    if cores is not None and cores > threshold:
                        out[sub] = cores
        return out

    def results(self, started: float, interrupted: bool) -> dict[str, Any]:
        return {
            "benchmark": "apiserver", "quick": self.args.quick, "client": self.args.client,
            "apiserver_prelude": self.args.apiserver_prelude,
            "interrupted": interrupted, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
            "duration_s": round(time.time() - started, 1),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                        "busy_cores_before_start": round(self.background, 2)},
            "noisy_phases": self.noisy_phases(),
            "sizes": asdict(self.sizes),
            "figures": {k: f.as_json() for k, f in self.figures.items()},
            "memory_mb": self.memory, "gc": self.gc, "phases": self.phases, "profile": self.profile,
            "errors": self.errors,
        }


# Leaves that stand for native code py-spy cannot see into (without --native).
NATIVE_LEAVES = {
    "Thread.run (threading.py)": "grpc aio poller thread: gRPC C-core, outside the event loop",
    "Runner.run (asyncio/runners.py)": "uvloop itself: socket I/O and callback scheduling in C",
}
PROJECT_DIRS = ("apiserver/", "machinery/")


def shorten_path(path: str, root: str = str(REPO)) -> str:
    """An absolute file name → 'apiserver/request.py' for the project, 'fastapi/routing.py' for a library,
    'asyncio/runners.py' for the standard library."""
    for marker in ("/site-packages/", "/dist-packages/"):  # first: the venv may live inside the project
        if marker in path:
            return path.rsplit(marker, 1)[1]
    if path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1:]
    stdlib = re.search(r"/lib/python3\.\d+/(.+)$", path)
    return stdlib.group(1) if stdlib else path


def _frame(frame: str, root: str) -> str:
    name, sep, where = frame.rpartition(" (")
    if not sep:
        return frame
    return f"{name} ({shorten_path(where.rstrip(')'), root)})"


def summarize_profile(folded: str, top: int = 20, root: str = str(REPO), trunk: float = 0.6) -> dict[str, Any]:
    """py-spy's raw (folded) output → shares of all samples: functions on top of the stack (self), self
    samples per project file or library package, project functions anywhere in the stack (inclusive), and any
    function anywhere in the stack except the trunk (frames in more than `trunk` of all samples) and frames
    that merely pass their caller's samples on."""
    self_counts: Counter[str] = Counter()
    project: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    total = 0
    for line in folded.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = [_frame(f, root) for f in stack.split(";")
                  if f and not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] += count
        packages[_package_of(frames[-1])] += count
        for frame in set(frames):
            inclusive[frame] += count
            if frame.rpartition("(")[2].startswith(PROJECT_DIRS):
                project[frame] += count

    def share(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(name, round(c / total, 4)) for name, c in counter.most_common(top)] if total else []

    # every frame anywhere in the stack, less the trunk every request shares (runner, server) and less a frame
    # that only passes its caller's samples on (within 3% of the frame listed before it: middleware chains)
    branches: Counter[str] = Counter()
    previous = math.inf
    for frame, c in inclusive.most_common():
        if c <= trunk * total and c < 0.97 * previous:
            branches[frame] = c
            previous = c
    return {"samples": total, "self": share(self_counts), "self_by_package": share(packages),
            "inclusive_project": share(project), "inclusive_branches": share(branches)}


def _package_of(frame: str) -> str:
    """'create (apiserver/registry/generic.py)' → 'apiserver/registry/generic.py'; a library or standard
    library frame → its top-level package or module ('fastapi', 'threading')."""
    where = frame.rpartition("(")[2].rstrip(")")
    if where.startswith(PROJECT_DIRS):
        return where
    return where.split("/", 1)[0].removesuffix(".py")


def gc_log_path(api: ApiServer) -> Path:
    return api.process.log_path.with_name("apiserver-gc.log")


def background_load(seconds: float = 1.0) -> float:
    """Cores busy on the machine over a short interval: what other work competes with the benchmark."""
    idle, t = machine_idle_seconds(), time.perf_counter()
    time.sleep(seconds)
    wall = time.perf_counter() - t
    return max(0.0, (os.cpu_count() or 1) - (machine_idle_seconds() - idle) / wall)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.apiserver_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small counts: a smoke run in under a minute")
    p.add_argument("--client", choices=("raw", "httpx"), default="raw",
                   help="load client for the headline figures: raw asyncio HTTP/1.1 (default) or httpx")
    p.add_argument("--profile", action="store_true",
                   help="after the figures, sample the apiserver with py-spy under a create load")
    p.add_argument("--output", type=Path, default=OUTPUT / "apiserver.json", help="JSON results (default %(default)s)")
    p.add_argument("--apiserver-prelude", metavar="CODE", default="",
                   help="Python run in the apiserver process before it starts, for experiments without editing it "
                        "(e.g. 'import gc; gc.freeze()')")
    p.add_argument("--gc-stats", action="store_true",
                   help="log every garbage collection inside the apiserver (a gc callback, via the prelude)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (etcd data, logs)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.time()
    workdir = make_workdir("minik8s-bench-")
    etcd = Etcd(workdir)
    api: ApiServer | None = None
    bench: Bench | None = None
    interrupted = False
    try:
        etcd.start()
        api = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
        prelude = args.apiserver_prelude
        if args.gc_stats:
            prelude = GC_PRELUDE.format(path=str(gc_log_path(api))) + "\n" + prelude
        if prelude:  # `python -c "<prelude>; run apiserver"` with the same arguments
            code = f"{prelude}\nimport runpy\nrunpy.run_module('apiserver', run_name='__main__')"
            api.process.argv[1:3] = ["-c", code]
        api.start()
        bench = Bench(args, etcd, api)
        bench.background = background_load()
        try:
            import uvloop
            runner: Callable[[Awaitable[None]], None] = uvloop.run  # type: ignore[assignment]
        except ImportError:
            runner = asyncio.run  # type: ignore[assignment]
        runner(bench.run())
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: stopping etcd and the apiserver", file=sys.stderr)
    except (OSError, RuntimeError, TimeoutError) as e:  # etcd or the apiserver would not start
        print(f"could not start the cluster: {e}\netcd log tail:\n{etcd.process.log_tail(20)}", file=sys.stderr)
        if api is not None:
            print(f"apiserver log tail:\n{api.process.log_tail(20)}", file=sys.stderr)
    finally:
        logs = ""
        if api is not None:
            logs = api.process.log_tail(20)
            api.stop()
        etcd.stop()
        if args.keep:
            print(f"work directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if bench is None:
        return 130 if interrupted else 1
    results = bench.results(started, interrupted)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    mode = "quick" if args.quick else "full"
    print(f"\nminik8s apiserver benchmark ({mode}, {args.client} client, {os.cpu_count()} CPUs, "
          f"{results['duration_s']:.0f}s; one run: compare ratios, not absolutes)\n")
    print(bench.table())
    noisy = bench.noisy_phases()
    if noisy or bench.background > 0.25:
        during = "; during " + ", ".join(f"{k}: {v:.2f}" for k, v in noisy.items()) if noisy else ""
        print(f"\nCAUTION: other processes were busy (before start: {bench.background:.2f} cores{during}): figures "
              "are pessimistic; rerun on a quiet machine before comparing runs")
    print("\nCPU while loaded (cores busy on average; CPU time per request)\n")
    print(bench.cpu_table())
    if bench.profile:
        print_profile(bench.profile)
    if bench.errors:
        print("\nphases that failed:")
        for name, error in bench.errors.items():
            print(f"  {name}: {error}")
        if logs:
            print("\napiserver log tail:\n" + logs)
    print(f"\nJSON: {args.output}")
    if interrupted:
        return 130
    return 1 if bench.errors else 0


def print_profile(profile: dict[str, Any]) -> None:
    print(f"\napiserver profile under creates: {profile['samples']:,} samples (py-spy, 100 Hz, threads on CPU "
          f"only); {profile['creates_during_profile']:,} creates; stacks in {profile['folded_file']}")
    for title, key in (("self: on top of the stack", "self"),
                       ("self, by project file or library package", "self_by_package"),
                       ("inclusive: project functions anywhere in the stack", "inclusive_project"),
                       ("inclusive: any function, less shared trunk and pass-through frames", "inclusive_branches")):
        print(f"\n  {title}")
        for name, share in profile[key]:
            hint = NATIVE_LEAVES.get(name)
            print(f"    {share * 100:5.1f}%  {name}" + (f"  [{hint}]" if hint else ""))


if __name__ == "__main__":
    sys.exit(main())
