"""Scheduler throughput: pending pods bound per second by the real `python -m scheduler` process.

    python -m bench.scheduler_bench [--quick] [--config NODESxPODS ...] [--existing-per-node N] [--repeat N]
                                    [--output FILE] [--keep] [--profile FILE]

For each configuration (default: 10x100, 10x1000 and the issue's 100x1000), a fresh etcd and
apiserver are started (tests/cluster.py helpers), NODES hollow Node objects are registered (what a
kubelet would report: allocatable, Ready condition; nothing runs on them) and PODS pending pods are
created, each requesting 100m cpu / 64Mi memory, owned by one ReplicaSet-like owner. With
--existing-per-node N every node already runs N pods (created bound, spec.nodeName set, of another
owner), as in density (30 a node) and upstream's scheduler_perf (init pods). Then the
scheduler starts; this process watches the pods and stamps the moment each one's spec.nodeName
appears. Printed per configuration:

- pods/s over the binding window (first to last binding): the scheduler's steady throughput;
- pods/s from process start to the last binding (includes interpreter start, informer lists);
- the fewest and most pods a node got (spread), the scheduler's peak RSS (VmHWM), and the CPU
  seconds the scheduler and the apiserver spent meanwhile (on a busy machine the rates drift with
  the load; CPU per pod does not);
- the CPU each of the scheduler, the apiserver and etcd spent per pod between the first and the last binding
  (/proc utime + stime sampled at both): the steady state's cost, which a loaded machine changes far less
  than the rates;
- finally the scheduling cycles alone, in this process without any API call: what the algorithm
  would allow if binding and events cost nothing.

With --repeat N each configuration runs N times (a fresh cluster each time) and the table shows the
median run by binding-window rate. Everything, every run included, goes to _output/bench/scheduler.json
(--output). --quick: 100x10 and 100x100, once each.

Not a test: it prints figures and checks only that every pod got bound.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.cluster import REPO, ApiServer, Etcd, Process, make_workdir

OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "bench-sched"
TARGET_PODS_PER_SECOND = 500.0  # issue 3: 100 hollow nodes, 1,000 pending pods


@dataclass
class Result:
    nodes: int
    pods: int
    bound: int
    window_s: float
    total_s: float
    max_per_node: int
    min_per_node: int
    rss_mb: float
    scheduler_cpu_s: float
    apiserver_cpu_s: float
    existing_per_node: int = 0
    # CPU ms per pod bound between the first and the last binding, per process
    window_cpu_ms_per_pod: dict[str, float | None] = field(default_factory=dict)

    @property
    def window_rate(self) -> float:
        return self.bound / self.window_s if self.window_s > 0 else float("inf")

    @property
    def total_rate(self) -> float:
        return self.bound / self.total_s if self.total_s > 0 else float("inf")

    def as_json(self) -> dict[str, Any]:
        return {**{k: _finite(v) if isinstance(v, float) else v for k, v in asdict(self).items()},
                "pods_per_s_window": _finite(self.window_rate), "pods_per_s_from_start": _finite(self.total_rate)}


def _finite(value: float) -> float | None:
    """JSON has no NaN or infinity: those become null."""
    return round(value, 3) if math.isfinite(value) else None


def median_run(runs: list[Result]) -> Result:
    """The run with the median binding-window rate (the lower middle one for an even count)."""
    ordered = sorted(runs, key=lambda r: r.window_rate if r.bound == r.pods else -1.0)
    return ordered[(len(ordered) - 1) // 2]


def hollow_node(i: int) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "256Gi", "pods": "250"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": f"hollow-{i:03d}", "labels": {"kubernetes.io/hostname": f"hollow-{i:03d}"}},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
    }


def pending_pod(i: int, owner_uid: str, prefix: str = "bench") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{prefix}-{i:05d}", "labels": {"app": prefix},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "bench",
                                          "uid": owner_uid, "controller": True}]},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25",
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    }


def existing_pods(nodes: int, per_node: int) -> list[dict[str, Any]]:
    """`per_node` pods already bound to each node (spec.nodeName), of an owner other than the pending pods'."""
    owner_uid = "00000000-0000-0000-0000-0000000e1157"
    bodies = []
    for i in range(nodes * per_node):
        body = pending_pod(i, owner_uid, "existing")
        body["spec"]["nodeName"] = hollow_node(i % nodes)["metadata"]["name"]
        bodies.append(body)
    return bodies


async def create_all(client: httpx.AsyncClient, path: str, bodies: list[dict[str, Any]], concurrency: int = 32) -> None:
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)

    async def worker() -> None:
        while not queue.empty():
            body = queue.get_nowait()
            r = await client.post(path, content=orjson.dumps(body), headers={"Content-Type": "application/json"})
            if r.status_code != 201:
                raise RuntimeError(f"POST {path}: {r.status_code} {r.text[:200]}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def watch_bindings(client: httpx.AsyncClient, resource_version: str, want: int,
                         stamps: dict[str, tuple[float, str]], done: asyncio.Event,
                         pids: dict[str, int] | None = None,
                         window_cpu: dict[str, list[float]] | None = None) -> None:
    """Stamp each pending pod's binding; with `pids`, sample those processes' CPU seconds into `window_cpu`
    at the first and at the last binding."""
    params = {"watch": "true", "resourceVersion": resource_version}
    async with client.stream("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params=params,
                             timeout=httpx.Timeout(10, read=None)) as response:
        async for line in response.aiter_lines():
            if not line.strip():
                continue
            event = orjson.loads(line)
            obj = event.get("object") or {}
            node = (obj.get("spec") or {}).get("nodeName")
            name = (obj.get("metadata") or {}).get("name")
            if node and name and name.startswith("bench-") and name not in stamps:
                stamps[name] = (time.monotonic(), node)
                if pids and window_cpu is not None and (len(stamps) == 1 or len(stamps) >= want):
                    for process, pid in pids.items():
                        window_cpu.setdefault(process, []).append(cpu_seconds(pid))
                if len(stamps) >= want:
                    done.set()
                    return


def py_spy() -> str:
    """py-spy next to this interpreter, else on PATH, else where the helpers install it (/tmp/pyspy)."""
    beside = Path(sys.executable).with_name("py-spy")
    if beside.exists():
        return str(beside)
    return shutil.which("py-spy") or "/tmp/pyspy/bin/py-spy"


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far (/proc/<pid>/stat, clock ticks of 1/100 s)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / 100.0
    except (OSError, IndexError, ValueError):
        return float("nan")


def peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return float("nan")


async def run_config(nodes: int, pods: int, keep: bool, timeout: float, profile: Path | None = None,
                     existing_per_node: int = 0) -> Result:
    workdir = make_workdir("minik8s-sched-bench-")
    etcd = Etcd(workdir)
    apiserver: ApiServer | None = None
    scheduler: Process | None = None
    try:
        etcd.start()
        apiserver = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
        apiserver.start()
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=apiserver.url, timeout=30, limits=limits) as client:
            r = await client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                              "metadata": {"name": NAMESPACE}})
            r.raise_for_status()
            await create_all(client, "/api/v1/nodes", [hollow_node(i) for i in range(nodes)])
            if existing_per_node:
                await create_all(client, f"/api/v1/namespaces/{NAMESPACE}/pods",
                                 existing_pods(nodes, existing_per_node))
            owner_uid = "00000000-0000-0000-0000-00000000be7c"
            await create_all(client, f"/api/v1/namespaces/{NAMESPACE}/pods",
                             [pending_pod(i, owner_uid) for i in range(pods)])
            listed = (await client.get(f"/api/v1/namespaces/{NAMESPACE}/pods", params={"limit": 1})).json()
            stamps: dict[str, tuple[float, str]] = {}  # the pending pods' bindings (the existing are bound)
            done = asyncio.Event()
            pids: dict[str, int] = {}  # filled once the scheduler runs, before its first binding
            window_cpu: dict[str, list[float]] = {}
            watcher = asyncio.create_task(watch_bindings(client, listed["metadata"]["resourceVersion"], pods,
                                                         stamps, done, pids, window_cpu))
            await asyncio.sleep(0.2)  # the watch is registered before any binding can happen
            scheduler = Process("scheduler", [sys.executable, "-m", "scheduler", "--master", apiserver.url,
                                              "-v", "1", "--secure-port=0"], workdir / "scheduler.log")
            assert apiserver.process.proc is not None and etcd.process.proc is not None
            apiserver_pid = apiserver.process.proc.pid
            apiserver_cpu = cpu_seconds(apiserver_pid)
            started = time.monotonic()
            scheduler.start()
            assert scheduler.proc is not None
            pids.update(scheduler=scheduler.proc.pid, apiserver=apiserver_pid, etcd=etcd.process.proc.pid)
            profiler = None
            if profile is not None:
                assert scheduler.proc is not None
                profiler = subprocess.Popen([py_spy(), "record", "--pid",
                                             str(scheduler.proc.pid), "-r", "250", "-f", "raw", "-o", str(profile)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                await asyncio.wait_for(done.wait(), timeout)
            except TimeoutError:
                print(f"  timed out: {len(stamps)}/{pods} bound; scheduler log:\n{scheduler.log_tail(20)}")
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await watcher
            assert scheduler.proc is not None
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
                profiler.wait(30)
            rss = peak_rss_mb(scheduler.proc.pid)
            scheduler_cpu = cpu_seconds(scheduler.proc.pid)
            apiserver_cpu = cpu_seconds(apiserver_pid) - apiserver_cpu
        times = sorted(t for t, _ in stamps.values())
        per_node = Counter(node for _, node in stamps.values())
        return Result(
            nodes=nodes, pods=pods, bound=len(stamps),
            window_s=(times[-1] - times[0]) if len(times) > 1 else 0.0,
            total_s=(times[-1] - started) if times else float("inf"),
            max_per_node=max(per_node.values(), default=0), min_per_node=min(per_node.values(), default=0),
            rss_mb=rss, scheduler_cpu_s=scheduler_cpu, apiserver_cpu_s=apiserver_cpu,
            existing_per_node=existing_per_node,
            window_cpu_ms_per_pod={process: (round((cpu[-1] - cpu[0]) * 1000 / (len(stamps) - 1), 3)
                                             if len(cpu) == 2 and len(stamps) > 1 else None)
                                   for process, cpu in window_cpu.items()},
        )
    finally:
        if scheduler is not None:
            scheduler.stop()
        if apiserver is not None:
            apiserver.stop()
        etcd.stop()
        if keep:
            print(f"  kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def algorithm_rate(nodes: int, pods: int, existing_per_node: int = 0) -> float:
    """Scheduling cycles alone, in this process (no API): filter, score, select, assume; pods/s of CPU."""
    from machinery.api.core_v1 import Node, Pod
    from scheduler.cache import Cache
    from scheduler.framework import PodInfo
    from scheduler.plugins import default_framework

    cache = Cache()
    for i in range(nodes):
        cache.add_node(Node.from_dict(hollow_node(i)))
    for i, body in enumerate(existing_pods(nodes, existing_per_node)):
        body["metadata"].update(namespace=NAMESPACE, uid=f"existing-{i}")
        cache.add_pod(PodInfo(Pod.from_dict(body)))
    infos = []
    for i in range(pods):
        body = pending_pod(i, "owner")
        body["metadata"].update(namespace=NAMESPACE, uid=f"uid-{i}")
        infos.append(PodInfo(Pod.from_dict(body)))
    framework = default_framework()
    start = 0
    began = time.process_time()
    for info in infos:
        result = framework.schedule(info, cache.snapshot(), start)
        start = result.next_start_index
        cache.assume_pod(info, result.node)
    return pods / (time.process_time() - began)


def _ms(result: Result, process: str) -> str:
    value = result.window_cpu_ms_per_pod.get(process)
    return "—" if value is None else f"{value:.2f}"


def parse_config(text: str) -> tuple[int, int]:
    nodes, _, pods = text.lower().partition("x")
    return int(nodes), int(pods)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.scheduler_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", action="append", type=parse_config, metavar="NODESxPODS",
                   help="nodes x pending pods (repeatable; default 10x100, 10x1000, 100x1000)")
    p.add_argument("--quick", action="store_true", help="100x10 and 100x100 once each (unless --config is given)")
    p.add_argument("--existing-per-node", type=int, default=0, metavar="N",
                   help="pods already bound to every node before the pending ones (density: 30)")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per configuration; the median is shown")
    p.add_argument("--output", type=Path, default=OUTPUT / "scheduler.json", help="JSON results (%(default)s)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for all bindings per config")
    p.add_argument("--keep", action="store_true", help="keep the work directories (logs, etcd data)")
    p.add_argument("--profile", type=Path, default=None, metavar="FILE",
                   help="sample the scheduler with py-spy while it binds; folded stacks to FILE (last config)")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    configs = args.config or ([(100, 10), (100, 100)] if args.quick else [(10, 100), (10, 1000), (100, 1000)])
    started = time.time()
    all_runs: list[list[Result]] = []
    for nodes, pods in configs:
        runs = []
        for i in range(args.repeat):
            print(f"scheduling {pods} pending pods onto {nodes} hollow nodes"
                  f"{f' (run {i + 1}/{args.repeat})' if args.repeat > 1 else ''} ...", flush=True)
            runs.append(asyncio.run(run_config(nodes, pods, args.keep, args.timeout, args.profile,
                                               args.existing_per_node)))
        all_runs.append(runs)
    results = [median_run(runs) for runs in all_runs]
    print()
    if args.repeat > 1:
        print(f"each row: the median of {args.repeat} runs by binding-window rate (all runs in the JSON)")
    print(f"{'nodes':>5} {'pods':>5} {'bound':>5} {'window s':>8} {'pods/s':>7} {'start→end s':>11} "
          f"{'pods/s':>7} {'per node':>9} {'RSS MB':>6} {'sched CPU s':>11} {'apiserver CPU s':>15} "
          f"{'window CPU ms/pod: sched':>24} {'apiserver':>9} {'etcd':>5}")
    ok = True
    for r in results:
        print(f"{r.nodes:>5} {r.pods:>5} {r.bound:>5} {r.window_s:>8.2f} {r.window_rate:>7.0f} {r.total_s:>11.2f} "
              f"{r.total_rate:>7.0f} {r.min_per_node:>4}-{r.max_per_node:<4} {r.rss_mb:>6.1f} "
              f"{r.scheduler_cpu_s:>11.2f} {r.apiserver_cpu_s:>15.2f} {_ms(r, 'scheduler'):>24} "
              f"{_ms(r, 'apiserver'):>9} {_ms(r, 'etcd'):>5}")
        ok = ok and r.bound == r.pods
    algorithm = {}
    for nodes, pods in configs:
        algorithm[f"{nodes}x{pods}"] = rate = algorithm_rate(nodes, pods, args.existing_per_node)
        print(f"scheduling cycles alone (no API calls), {nodes} nodes x {pods} pods: {rate:,.0f} pods/s of one core")
    print(f"\npods/s: over the binding window (first to last binding) and from scheduler start to last binding;"
          f"\ntarget (issue 3, 100 nodes x 1000 pods): >= {TARGET_PODS_PER_SECOND:.0f} pods/s bound, RSS <= 100 MB")
    ok = ok and all(r.bound == r.pods for runs in all_runs for r in runs)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "benchmark": "scheduler", "quick": args.quick, "repeat": args.repeat,
        "existing_per_node": args.existing_per_node,
        "duration_s": round(time.time() - started, 1), "cpus": os.cpu_count(),
        "target_pods_per_s": TARGET_PODS_PER_SECOND, "target_config": "100x1000",
        "configs": [{"nodes": nodes, "pods": pods, "median": median.as_json(),
                     "window_rates": [round(r.window_rate, 1) for r in runs],
                     "runs": [r.as_json() for r in runs],
                     "algorithm_pods_per_s": round(algorithm[f"{nodes}x{pods}"], 1)}
                    for (nodes, pods), median, runs in zip(configs, results, all_runs, strict=True)],
    }, indent=2) + "\n")
    print(f"JSON: {args.output}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
