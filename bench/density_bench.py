"""Density at scale, kubemark/KWOK-style (issue 19): N hollow nodes, 30 pods per node, through Deployments.

    python -m bench.density_bench [--sizes 20,100,300] [--pods-per-node 30] [--rate 100]
                                  [--nodes-per-process 1000] [--profile] [--quick] [--json PATH] [--keep]

Per size, a fresh cluster: a real etcd, the apiserver, the controller-manager (deployment, replicaset,
garbage collector, namespace, node IPAM, node lifecycle at upstream's 40 s grace), the scheduler, and the
nodes served by a few `python -m bench.hollow_nodes` processes (`--nodes-per-process` each): every node
registers, heartbeats through its Lease every 10 s and reports status as a kubelet does; pods bound to it
are walked through Pending to Running with an address of its podCIDR (bench/hollow_nodes.py).

Once every node is Ready, Deployments of 100 replicas are created one after the other at `--rate` pods per
second (upstream's density test: 100 pods/s), 30 pods per node in all (3,000 pods at 100 nodes, 9,000 at
300, 30,000 at 1,000). One watch on the namespace's pods (this process) stamps each pod when it is first
seen, first seen bound and first seen Running. Measured per size:

- pod start-up latency p50/p99/max: first seen → first seen Running, through the watch (upstream's SLI,
  which has no image pull here), and the same from creationTimestamp's second;
- API call latency p99 per verb and resource, mutating and read-only: the apiserver's own
  `apiserver_request_duration_seconds` histogram (upstream's SLI), the difference between /metrics scraped
  before the first Deployment and after the last pod Running, interpolated in upstream's buckets as
  Prometheus' histogram_quantile does;
- scheduler throughput: pods bound per second from the first pod seen to the last bound (bounded by the
  creation rate), and the best 5 s window;
- CPU seconds and RSS (VmRSS now, VmHWM peak) of every component: etcd, apiserver, controller-manager,
  scheduler, the hollow processes (each and summed), this process (the watch and the creates);
- the steady state after the run: CPU each component spends per second with every pod Running and only
  heartbeats flowing (`--steady` seconds);
- etcd's database size (`etcd_mvcc_db_total_size_in_bytes`, and in use);
- watch delivery with 1,000 watchers (`--watchers`), every pod Running: 1,000 watches of one namespace's
  ConfigMaps, 50 ConfigMaps created at 10/s; p50/p99 from each create's request to each watcher's reading of it.

The JSON goes to _output/bench/density.json; `python -m bench.report` plots it (density_scaling.png).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import math
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.apiserver_bench import machine_idle_seconds, proc_cpu_seconds, proc_memory_mb
from bench.control_plane_bench import Profiler, print_profile, read_profile
from tests.cluster import REPO, ApiServer, Etcd, Process, make_workdir, wait_for
from tests.controller_process import ControllerProcess

OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "density"
CONTROLLERS = ["deployment", "replicaset", "garbagecollector", "namespace", "nodeipam", "nodelifecycle"]
CLUSTER_CIDR = "100.64.0.0/14"  # 1,024 /24s: hollow pods' addresses exist only in API objects
FIRST_NODE_IP = ipaddress.ip_address("100.96.0.1")  # outside the cluster CIDR; only in Node objects
MUTATING = {"POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION"}
# upstream's SLOs (the targets at 1,000 nodes / 30,000 pods)
TARGET_STARTUP_P99_S = 5.0
TARGET_MUTATING_P99_S = 1.0
TARGET_SCHEDULER_PODS_PER_S = 1000.0
TARGET_RSS_MB = {"apiserver": 400.0, "controller-manager": 200.0, "scheduler": 200.0}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- the figures, pure (tests/unit/bench checks them) ---------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), nearest rank, as the other benches report it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def scrape_histograms(text: str) -> dict[tuple[str, str, str], dict[float, float]]:
    """apiserver_request_duration_seconds from /metrics: (verb, resource, subresource) -> {le: cumulative count}."""
    out: dict[tuple[str, str, str], dict[float, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request_duration_seconds":
            continue
        for sample in family.samples:
            if not sample.name.endswith("_bucket"):
                continue
            labels = sample.labels
            key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))
            buckets = out.setdefault(key, {})
            le = float(labels["le"])
            buckets[le] = buckets.get(le, 0.0) + sample.value  # summed over scope, group, ...
    return out


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets {le: count}: linear within the bucket; the
    highest finite bound when the rank falls in +Inf."""
    bounds = sorted(buckets)
    if not bounds:
        return None
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound


def api_latency(before: str, after: str) -> list[dict[str, Any]]:
    """Per (verb, resource, subresource): requests and p50/p99 seconds between two scrapes."""
    old, new = scrape_histograms(before), scrape_histograms(after)
    rows = []
    for key, buckets in new.items():
        diff = {le: count - old.get(key, {}).get(le, 0.0) for le, count in buckets.items()}
        count = diff.get(math.inf, 0.0)
        if count <= 0:
            continue
        verb, resource, subresource = key
        rows.append({"verb": verb, "resource": resource, "subresource": subresource, "count": int(count),
                     "mutating": verb in MUTATING,
                     "p50_s": histogram_quantile(0.5, diff), "p99_s": histogram_quantile(0.99, diff)})
    rows.sort(key=lambda r: (not r["mutating"], -r["count"]))
    return rows


def best_window_rate(stamps: list[float], window: float = 5.0) -> float | None:
    """The most events in any `window` seconds, per second."""
    if not stamps:
        return None
    ordered = sorted(stamps)
    span = ordered[-1] - ordered[0]
    if span < window:  # all of them within one window: over their own span
        return len(ordered) / span if span > 0 else None
    best, lo = 0, 0
    for hi, t in enumerate(ordered):
        while t - ordered[lo] > window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best / window


def etcd_db_sizes(text: str) -> dict[str, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name in ("etcd_mvcc_db_total_size_in_bytes", "etcd_mvcc_db_total_size_in_use_in_bytes"):
            out[family.name] = family.samples[0].value
    return out


# -- the pods, seen through one watch ------------------------------------------------------------------------


@dataclass
class Seen:
    first: float  # monotonic, first event
    created_wall: float  # creationTimestamp (seconds resolution)
    first_wall: float  # time.time() at the first event
    bound: float | None = None
    running: float | None = None
    running_wall: float | None = None


def _running(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    cs = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(cs) and all("running" in c.get("state", {}) for c in cs)


@dataclass
class PodWatch:
    url: str
    pods: dict[str, Seen] = field(default_factory=dict)
    events: int = 0
    want: int = 0
    all_running: asyncio.Event = field(default_factory=asyncio.Event)
    running: int = 0
    task: asyncio.Task[None] | None = None

    async def start(self, session: aiohttp.ClientSession) -> None:
        async with session.get(f"{self.url}/api/v1/namespaces/{NAMESPACE}/pods", params={"limit": "1"}) as r:
            rv = (await r.json())["metadata"]["resourceVersion"]
        opened = asyncio.Event()
        self.task = asyncio.create_task(self._run(session, rv, opened))
        await asyncio.wait_for(opened.wait(), 10)

    async def _run(self, session: aiohttp.ClientSession, rv: str, opened: asyncio.Event) -> None:
        while True:
            params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true"}
            try:
                async with session.get(f"{self.url}/api/v1/namespaces/{NAMESPACE}/pods", params=params,
                                       timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as r:
                    opened.set()
                    async for line in r.content:
                        if not line.strip():
                            continue
                        event = orjson.loads(line)
                        obj = event["object"]
                        rv = obj.get("metadata", {}).get("resourceVersion") or rv
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._seen(obj, time.monotonic())
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:  # noqa: UP041 (aiohttp's own)
                log(f"pod watch ended ({e!r}); resuming at {rv}")
                await asyncio.sleep(0.2)

    def _seen(self, pod: dict[str, Any], now: float) -> None:
        self.events += 1
        name = pod["metadata"]["name"]
        seen = self.pods.get(name)
        if seen is None:
            created = pod["metadata"].get("creationTimestamp") or ""
            created_wall = time.mktime(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone \
                if created else time.time()
            seen = self.pods[name] = Seen(first=now, created_wall=created_wall, first_wall=time.time())
        if seen.bound is None and (pod.get("spec") or {}).get("nodeName"):
            seen.bound = now
        if seen.running is None and _running(pod):
            seen.running, seen.running_wall = now, time.time()
            self.running += 1
            if self.want and self.running >= self.want:
                self.all_running.set()

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


# -- one size ------------------------------------------------------------------------------------------------


def deployment(i: int, replicas: int) -> dict[str, Any]:
    app = f"density-{i:04d}"
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app, "labels": {"group": "density"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app, "group": "density"}},
                                  "spec": {"containers": [{
                                      "name": "pause", "image": "registry.k8s.io/pause:3.9",
                                      "resources": {"requests": {"cpu": "10m", "memory": "10Mi"}}}]}}}}


def pid_of(process: Process) -> int:
    assert process.proc is not None
    return process.proc.pid


class Cluster:
    """etcd, apiserver, controller-manager, scheduler and the hollow-node processes of one size."""

    def __init__(self, nodes: int, nodes_per_process: int, workdir: Path) -> None:
        self.nodes = nodes
        self.workdir = workdir
        self.etcd = Etcd(workdir)
        self.api = ApiServer(workdir, self.etcd)
        self.cm = ControllerProcess(workdir, self.api.url, CONTROLLERS, "--cluster-cidr", CLUSTER_CIDR,
                                    "--node-cidr-mask-size", "24")
        self.scheduler = Process("scheduler", [sys.executable, "-m", "scheduler", "--master", self.api.url,
                                               "--secure-port=0", "--leader-elect=false"],
                                 workdir / "scheduler.log")  # no election: a lost lease would end the run
        processes = max(1, math.ceil(nodes / nodes_per_process))
        per = math.ceil(nodes / processes)
        self.hollow: list[Process] = []
        first = 0
        for p in range(processes):
            count = min(per, nodes - first)
            self.hollow.append(Process(f"hollow-{p}", [
                sys.executable, "-m", "bench.hollow_nodes", "--master", self.api.url, "--nodes", str(count),
                "--node-name-prefix", "hollow-", "--first-node-index", str(first),
                "--first-node-ip", str(FIRST_NODE_IP + first)], workdir / f"hollow-{p}.log"))
            first += count
        self.started: list[Process] = []

    def pids(self) -> dict[str, int]:
        out = {"etcd": pid_of(self.etcd.process), "apiserver": pid_of(self.api.process),
               "controller-manager": pid_of(self.cm.process), "scheduler": pid_of(self.scheduler)}
        out.update({p.name: pid_of(p) for p in self.hollow})
        return out

    def start(self) -> None:
        self.etcd.start()
        self.api.start()
        self.cm.start(60)
        self.scheduler.start()
        wait_for(lambda: "caches synced" in self.scheduler.log_path.read_text(errors="replace"), 60,
                 what=f"the scheduler to sync\n{self.scheduler.log_tail()}")
        for p in self.hollow:
            p.start()

    def stop(self) -> None:
        for p in [*self.hollow, self.scheduler]:
            p.stop()
        self.cm.stop()
        self.api.stop()
        self.etcd.stop()


async def ready_nodes(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(f"{url}/api/v1/nodes") as r:
        items = (await r.json())["items"]
    return sum(1 for n in items if any(c["type"] == "Ready" and c["status"] == "True"
                                       for c in (n.get("status") or {}).get("conditions") or []))


async def get_text(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(url) as r:
        return await r.text()


async def scheduler_burst(session: aiohttp.ClientSession, url: str, cluster: Cluster, watch: PodWatch, count: int,
                          timeout: float) -> dict[str, Any]:
    """scheduler_perf's way: `count` pods pending (the scheduler stopped while a Deployment of that many is
    created), then the scheduler started; pods bound per second from the first binding to the last."""
    log(f"scheduler burst: scheduler stopped, a Deployment of {count} replicas created, scheduler started")
    cluster.scheduler.stop()
    before = set(watch.pods)
    body = deployment(9999, count)
    async with session.post(f"{url}/apis/apps/v1/namespaces/{NAMESPACE}/deployments", data=orjson.dumps(body),
                            headers={"Content-Type": "application/json"}) as r:
        r.raise_for_status()
    deadline = time.monotonic() + timeout
    while len(watch.pods) - len(before) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(watch.pods) - len(before)}/{count} burst pods created")
        await asyncio.sleep(0.2)
    created = [seen for name, seen in watch.pods.items() if name not in before]
    created_s = max(s.first for s in created) - min(s.first for s in created)
    started = time.monotonic()
    cluster.scheduler.start()
    while sum(1 for s in created if s.bound is not None) < count:
        if time.monotonic() > deadline or not cluster.scheduler.alive():
            raise TimeoutError(f"burst: {sum(1 for s in created if s.bound)}/{count} bound\n"
                               f"{cluster.scheduler.log_tail()}")
        await asyncio.sleep(0.1)
    bound = sorted(s.bound for s in created if s.bound is not None)
    return {"pods": count, "created_in_s": round(created_s, 2),
            "window_pods_per_s": _r((count - 1) / (bound[-1] - bound[0])) if bound[-1] > bound[0] else None,
            "from_scheduler_start_pods_per_s": _r(count / (bound[-1] - started)),
            "first_bind_after_start_s": _r(bound[0] - started),
            "scheduler_rss_mb": proc_memory_mb(pid_of(cluster.scheduler)).get("VmHWM")}


WATCH_NAMESPACE = "density-watch"


async def watch_delivery(url: str, watchers: int, writes: int, rate: float) -> dict[str, Any]:
    """`watchers` watches of one namespace's ConfigMaps (each its own HTTP/1.1 connection, as a client without
    HTTP/2 opens them), then `writes` ConfigMaps created at `rate` per second; a delivery is the time from a
    create's request to one watcher's reading of its ADDED event. All watchers share this process's event loop,
    so the tail includes this client's own time to read 1,000 copies of each event."""
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async with session.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": WATCH_NAMESPACE}}) as r:
            r.raise_for_status()
        path = f"{url}/api/v1/namespaces/{WATCH_NAMESPACE}/configmaps"
        async with session.get(path) as r:
            rv = (await r.json())["metadata"]["resourceVersion"]
        sent: dict[str, float] = {}
        delays: list[float] = []
        received = [0] * watchers
        opened = 0
        all_open = asyncio.Event()
        done = asyncio.Event()

        async def watcher(i: int) -> None:
            nonlocal opened
            async with session.get(path, params={"watch": "true", "resourceVersion": rv}) as r:
                r.raise_for_status()
                opened += 1
                if opened == watchers:
                    all_open.set()
                async for line in r.content:
                    now = time.monotonic()
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    if event["type"] != "ADDED":
                        continue
                    delays.append(now - sent[event["object"]["metadata"]["name"]])
                    received[i] += 1
                    if len(delays) == watchers * writes:
                        done.set()

        tasks = [asyncio.create_task(watcher(i)) for i in range(watchers)]
        try:
            await asyncio.wait_for(all_open.wait(), 120)
            write_latency = []
            started = time.monotonic()
            for k in range(writes):
                await asyncio.sleep(max(0.0, started + k / rate - time.monotonic()))
                name = f"w-{k:04d}"
                sent[name] = t = time.monotonic()
                async with session.post(path, json={"metadata": {"name": name}, "data": {"k": str(k)}}) as r:
                    r.raise_for_status()
                write_latency.append(time.monotonic() - t)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 30)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return {"watchers": watchers, "writes": writes, "rate_per_s": rate,
            "delivered": len(delays), "expected": watchers * writes,
            "p50_s": _r(percentile(delays, 50), 4), "p99_s": _r(percentile(delays, 99), 4),
            "max_s": _r(max(delays, default=None), 4),
            "write_p99_s": _r(percentile(write_latency, 99), 4)}


async def run_size(args: argparse.Namespace, nodes: int) -> dict[str, Any]:
    pods = nodes * args.pods_per_node
    workdir = make_workdir("minik8s-density-")
    cluster = Cluster(nodes, args.nodes_per_process, workdir)
    profilers: list[tuple[str, Profiler]] = []
    result: dict[str, Any] = {"nodes": nodes, "pods": pods, "hollow_processes": len(cluster.hollow)}
    try:
        log(f"{nodes} nodes: starting etcd, apiserver, controller-manager, scheduler and "
            f"{len(cluster.hollow)} hollow-node processes")
        cluster.start()
        url = cluster.api.url
        connector = aiohttp.TCPConnector(limit=16)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
            t0 = time.monotonic()
            while (ready := await ready_nodes(session, url)) < nodes:
                for p in cluster.hollow:
                    if not p.alive():
                        raise RuntimeError(f"{p.name} exited:\n{p.log_tail()}")
                if time.monotonic() - t0 > args.timeout:
                    raise TimeoutError(f"only {ready}/{nodes} nodes Ready after {args.timeout}s")
                await asyncio.sleep(1)
            result["nodes_ready_s"] = round(time.monotonic() - t0, 1)
            log(f"{nodes} nodes Ready in {result['nodes_ready_s']} s")
            async with session.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}}) as r:
                r.raise_for_status()
            watch = PodWatch(url, want=pods)
            await watch.start(session)
            pids = cluster.pids()
            pids["bench"] = os.getpid()
            if args.profile:
                for name in ("apiserver", "controller-manager", "scheduler", "hollow-0"):
                    profilers.append((name, Profiler(pids[name], OUTPUT / f"density-{nodes}-{name}.folded")))
                await asyncio.sleep(0.5)
            metrics_before = await get_text(session, f"{url}/metrics")
            cpu_before = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}
            idle_before = machine_idle_seconds()
            started = time.monotonic()
            deployments = math.ceil(pods / 100)
            log(f"creating {deployments} Deployments of 100 replicas at {args.rate} pods/s ({pods} pods)")
            create_latency = []
            for i in range(deployments):
                due = started + i * 100 / args.rate
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                replicas = min(100, pods - i * 100)
                t = time.monotonic()
                async with session.post(f"{url}/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
                                        data=orjson.dumps(deployment(i, replicas)),
                                        headers={"Content-Type": "application/json"}) as r:
                    r.raise_for_status()
                create_latency.append(time.monotonic() - t)
            created_all = time.monotonic()
            log(f"Deployments created in {created_all - started:.1f} s; waiting for {pods} pods Running")
            timed_out = False
            last_report = time.monotonic()
            while not watch.all_running.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(watch.all_running.wait(), 10)
                for p in [cluster.scheduler, cluster.cm.process, cluster.api.process, *cluster.hollow]:
                    if not p.alive():
                        raise RuntimeError(f"{p.name} exited during the run:\n{p.log_tail()}")
                now = time.monotonic()
                if now - last_report >= 30:
                    last_report = now
                    bound = sum(1 for s in watch.pods.values() if s.bound)
                    log(f"  {len(watch.pods)} seen, {bound} bound, {watch.running} Running")
                if now - created_all > args.timeout:
                    timed_out = True
                    log(f"timed out: {watch.running}/{pods} Running")
                    break
            ended = time.monotonic()
            cpu = {name: proc_cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
            idle = machine_idle_seconds() - idle_before
            metrics_after = await get_text(session, f"{url}/metrics")
            for _, profiler in profilers:
                profiler.stop()
            # the steady state: every pod Running, only heartbeats and node status
            log(f"steady state for {args.steady} s")
            steady_before = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}
            steady_metrics_before = await get_text(session, f"{url}/metrics")
            await asyncio.sleep(args.steady)
            steady_cpu = {name: (proc_cpu_seconds(pid) - steady_before[name]) / args.steady
                          for name, pid in pids.items()}
            steady_api = api_latency(steady_metrics_before, await get_text(session, f"{url}/metrics"))
            memory_after = {name: proc_memory_mb(pid) for name, pid in pids.items()}
            etcd_metrics = await get_text(session, f"{cluster.etcd.endpoint}/metrics")
            not_ready = nodes - await ready_nodes(session, url)
            density_pods = list(watch.pods.values())  # the burst's pods are not the run's
            if args.watchers:
                log(f"watch delivery: {args.watchers} watchers, {args.watch_writes} writes")
                result["watch_delivery"] = await watch_delivery(url, args.watchers, args.watch_writes, 10.0)
            if args.burst:
                result["burst"] = await scheduler_burst(session, url, cluster, watch, args.burst, args.timeout)
            await watch.stop()
        seen = density_pods
        startup = [s.running - s.first for s in seen if s.running is not None]
        startup_created = [s.running_wall - s.created_wall for s in seen if s.running_wall is not None]
        bound_stamps = [s.bound for s in seen if s.bound is not None]
        first_seen = min((s.first for s in seen), default=started)
        wall = ended - started
        hollow_names = [p.name for p in cluster.hollow]
        cpu_out = {k: round(v, 2) for k, v in cpu.items()}
        cpu_out["hollow (all)"] = round(sum(cpu[n] for n in hollow_names), 2)
        others = max(0.0, (os.cpu_count() or 1) * wall - idle - sum(cpu.values()))
        cpu_out["others on the machine"] = round(others, 2)
        rows = api_latency(metrics_before, metrics_after)
        mutating = [r for r in rows if r["mutating"]]
        result.update({
            "timed_out": timed_out, "seen": len(seen), "running": len(startup), "bound": len(bound_stamps),
            "nodes_not_ready_after": not_ready,
            "create_phase_s": round(created_all - started, 2), "wall_s": round(wall, 2),
            "deployment_create_p99_ms": round((percentile(create_latency, 99) or 0) * 1000, 1),
            "startup_s": {"p50": _r(percentile(startup, 50)), "p90": _r(percentile(startup, 90)),
                          "p99": _r(percentile(startup, 99)), "max": _r(max(startup, default=None))},
            "startup_from_creation_timestamp_s": {"p50": _r(percentile(startup_created, 50)),
                                                  "p99": _r(percentile(startup_created, 99))},
            "scheduler": {
                "pods_per_s": _r(len(bound_stamps) / (max(bound_stamps) - first_seen)) if bound_stamps else None,
                "best_5s_window_pods_per_s": _r(best_window_rate(bound_stamps)),
                "note": f"bounded by the creation rate ({args.rate} pods/s)"},
            "api": rows,
            "mutating_p99_max_s": max((r["p99_s"] for r in mutating if r["count"] >= 10), default=None),
            "steady_api": steady_api,
            "cpu_s": cpu_out,
            "cores_busy": {k: round(v / wall, 2) for k, v in cpu.items()},
            "cpu_ms_per_pod": {k: round(v * 1000 / max(1, len(startup)), 2) for k, v in cpu_out.items()
                               if k != "others on the machine"},
            "steady_cores": {k: round(v, 3) for k, v in steady_cpu.items()}
            | {"hollow (all)": round(sum(steady_cpu[n] for n in hollow_names), 3)},
            "memory_mb": {name: {k: round(v, 1) for k, v in memory_after[name].items()} for name in memory_after},
            "etcd": {k: round(v / 1e6, 2) for k, v in etcd_db_sizes(etcd_metrics).items()},
            "watch_events": watch.events,
        })
        result["memory_mb"]["hollow (all)"] = {
            "VmRSS": round(sum(memory_after[n].get("VmRSS", 0) for n in hollow_names), 1),
            "VmHWM": round(sum(memory_after[n].get("VmHWM", 0) for n in hollow_names), 1)}
        if profilers:
            result["profiles"] = {}
            for name, profiler in profilers:
                result["profiles"][name] = read_profile(profiler.path)
        for name in ("apiserver", "controller-manager", "scheduler", "hollow-0"):
            logfile = {"apiserver": cluster.api.process, "controller-manager": cluster.cm.process,
                       "scheduler": cluster.scheduler, "hollow-0": cluster.hollow[0]}[name].log_path
            text = logfile.read_text(errors="replace")
            result.setdefault("log_warnings", {})[name] = sum(
                1 for line in text.splitlines() if " WARNING " in line or " ERROR " in line)
        return result
    finally:
        for _, profiler in profilers:
            profiler.stop()
        cluster.stop()
        if args.keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


# -- output --------------------------------------------------------------------------------------------------


def print_size(r: dict[str, Any]) -> None:
    print(f"\n== {r['nodes']} nodes, {r['pods']} pods ({r['hollow_processes']} hollow processes) ==")
    print(f"Running {r['running']}/{r['pods']}, timed out: {r['timed_out']}, nodes NotReady after: "
          f"{r['nodes_not_ready_after']}; create phase {r['create_phase_s']} s, to all Running {r['wall_s']} s")
    s = r["startup_s"]
    print(f"pod start-up (seen → Running): p50 {s['p50']} s, p90 {s['p90']} s, p99 {s['p99']} s, max {s['max']} s"
          f"   [target p99 ≤ {TARGET_STARTUP_P99_S} s]")
    print(f"scheduler: {r['scheduler']['pods_per_s']} pods/s overall, best 5 s window "
          f"{r['scheduler']['best_5s_window_pods_per_s']} pods/s ({r['scheduler']['note']})")
    if r.get("burst"):
        b = r["burst"]
        print(f"scheduler burst of {b['pods']} pending pods: {b['window_pods_per_s']} pods/s first → last binding, "
              f"{b['from_scheduler_start_pods_per_s']} from the scheduler's start   [target ≥ "
              f"{TARGET_SCHEDULER_PODS_PER_S:.0f}]")
    if r.get("watch_delivery"):
        w = r["watch_delivery"]
        print(f"watch delivery, {w['watchers']} watchers, {w['writes']} writes: p50 {w['p50_s']} s, "
              f"p99 {w['p99_s']} s, max {w['max_s']} s ({w['delivered']}/{w['expected']} delivered)")
    print(f"API p99 (apiserver histogram), mutating max {r['mutating_p99_max_s']} s [target ≤ {TARGET_MUTATING_P99_S}]")
    for row in r["api"][:14]:
        sub = f"/{row['subresource']}" if row["subresource"] else ""
        print(f"  {row['verb']:<7} {row['resource'] + sub:<22} n={row['count']:<7} p50 {row['p50_s']:.3f} s  "
              f"p99 {row['p99_s']:.3f} s")
    print("CPU s during the run / ms per pod / cores in steady state; RSS MB (peak):")
    for name in r["cpu_s"]:
        mem = r["memory_mb"].get(name, {})
        print(f"  {name:<24} {r['cpu_s'][name]:>8} s  {r['cpu_ms_per_pod'].get(name, ''):>8}  "
              f"{r['steady_cores'].get(name, ''):>6}  {mem.get('VmRSS', '')} ({mem.get('VmHWM', '')})")
    print(f"etcd db: {r['etcd']}")
    for name, profile in (r.get("profiles") or {}).items():
        print_profile(f"{name} ({r['nodes']} nodes)", profile)


def growth(results: list[dict[str, Any]]) -> list[str]:
    """Where cost per pod grows with size: each figure at each size ÷ the smallest size's (per pod)."""
    if len(results) < 2:
        return []
    base = results[0]
    lines = []
    for r in results[1:]:
        scale = r["pods"] / base["pods"]
        parts = []
        for name in ("apiserver", "controller-manager", "scheduler", "etcd", "hollow (all)"):
            b, v = base["cpu_s"].get(name), r["cpu_s"].get(name)
            if b and v:
                parts.append(f"{name} CPU {v / b / scale:.2f}x/pod")
            bm = base["memory_mb"].get(name, {}).get("VmHWM")
            vm = r["memory_mb"].get(name, {}).get("VmHWM")
            if bm and vm:
                parts.append(f"{name} RSS {vm / bm:.2f}x (pods {scale:.1f}x)")
        lines.append(f"{r['nodes']} vs {base['nodes']} nodes: " + ", ".join(parts))
    return lines


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="density_bench", description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--sizes", default="20,100,300", help="node counts, one fresh cluster each (default %(default)s)")
    p.add_argument("--pods-per-node", type=int, default=30)
    p.add_argument("--rate", type=float, default=100.0, help="pods per second created (default %(default)s)")
    # one process for up to 1,000 nodes, as KWOK serves them: every hollow process watches every bound pod (a
    # field selector cannot name its nodes), so four processes of 250 decoded each pod event four times
    p.add_argument("--nodes-per-process", type=int, default=1000, help="nodes per hollow process (default %(default)s)")
    p.add_argument("--burst", type=int, default=1000,
                   help="after the run, pods bound at once as scheduler_perf measures (0: none; default %(default)s)")
    p.add_argument("--watchers", type=int, default=1000,
                   help="after the run, watches open at once for the delivery latency (0: none; default %(default)s)")
    p.add_argument("--watch-writes", type=int, default=50, help="writes the watchers see (default %(default)s)")
    p.add_argument("--steady", type=float, default=20.0, help="seconds of steady state measured (default %(default)s)")
    p.add_argument("--timeout", type=float, default=900.0, help="per size, after the last create (default %(default)s)")
    p.add_argument("--profile", action="store_true", help="py-spy the apiserver, controller-manager, scheduler and "
                                                           "the first hollow process during the run")
    p.add_argument("--quick", action="store_true", help="sizes 10,30 (a smoke run)")
    p.add_argument("--json", type=Path, default=OUTPUT / "density.json")
    p.add_argument("--keep", action="store_true", help="keep each size's work directory")
    args = p.parse_args(argv)
    args.sizes = [10, 30] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    out: dict[str, Any] = {"argv": sys.argv[1:], "sizes": [], "load_before": load,
                           "targets": {"startup_p99_s": TARGET_STARTUP_P99_S, "mutating_p99_s": TARGET_MUTATING_P99_S,
                                       "scheduler_pods_per_s": TARGET_SCHEDULER_PODS_PER_S, "rss_mb": TARGET_RSS_MB},
                           "py_spy": shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))}
    failed = None
    for nodes in args.sizes:
        try:
            result = asyncio.run(run_size(args, nodes))
        except (Exception, KeyboardInterrupt) as e:
            failed = f"{nodes} nodes: {e!r}"
            log(f"size {nodes} failed: {e!r}")
            out["failed"] = failed
            if isinstance(e, KeyboardInterrupt):
                break
            continue
        result["load_after"] = os.getloadavg()
        out["sizes"].append(result)
        print_size(result)
        args.json.write_text(json.dumps(out, indent=1))
    out["growth"] = growth(out["sizes"])
    out["load_after"] = os.getloadavg()
    for line in out["growth"]:
        print(line)
    args.json.write_text(json.dumps(out, indent=1))
    log(f"JSON: {args.json}")
    return 1 if failed or not out["sizes"] else 0


if __name__ == "__main__":
    sys.exit(main())
