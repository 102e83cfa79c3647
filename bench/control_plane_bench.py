"""The control-plane benchmark of issue 3: scheduler throughput, a 1,000-replica Deployment end to end,
and the memory of the controller-manager and the scheduler at that size.

    python -m bench.control_plane_bench [--profile] [--keep] [--skip-scheduler] [--replicas N] [--nodes N]

Every process is real and separate: etcd, `python -m apiserver`, `python -m controllers` (all its
controllers) and `python -m scheduler`, each started on free loopback ports with the helpers in
tests/cluster.py and stopped (and their data deleted) afterwards, also on failure or Ctrl-C.

(a) Scheduler throughput: `bench.scheduler_bench.run_config` with 100 hollow nodes (Node objects only)
    and 1,000 pending pods; pods bound per second over the binding window. Target >= 500 pods/s.
(b) Deployment: a fresh cluster with 100 hollow nodes, the controller-manager and the scheduler synced;
    then one Deployment of 1,000 replicas is created and this process watches its pods. The figure is
    the time from the create request to the last pod's spec.nodeName appearing. Target <= 10 s.
    The controller-manager runs with long node grace periods, so hollow nodes (which never heartbeat)
    stay Ready for the whole run.
    Its events (SuccessfulCreate, Scheduled) trail the pods; the time until all are written is noted.
(c) Memory: the peak RSS (VmHWM) of the controller-manager and of the scheduler at the end of (b),
    holding 1,000 pods and 100 nodes, once the events are written too. Target <= 100 MB each.
(d) Informational, to tell whether the apiserver is the limit: the CPU each process spent during (b),
    and the apiserver's CPU milliseconds per request by verb, measured in the same cluster after (b)
    with the controller-manager and scheduler stopped (closed loop, 16 connections, no watchers).

The table goes to stdout, everything else to `_output/bench/control_plane.json`. With --profile, py-spy
samples the controller-manager and the scheduler during (b) and the scheduler during (a), writes folded
stacks next to the JSON, and prints the hottest frames.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import orjson

from bench.apiserver_bench import (
    CpuMeter,
    _frame,
    background_load,
    closed_loop,
    format_value,
    machine_idle_seconds,
    proc_cpu_seconds,
    proc_memory_mb,
    render_table,
    verdict,
)
from bench.scheduler_bench import TARGET_PODS_PER_SECOND, create_all, hollow_node, run_config
from tests.cluster import REPO, ApiServer, Etcd, Process, make_workdir, wait_for
from tests.controller_process import ControllerProcess

OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "bench-cp"
VERBS_NAMESPACE = "bench-verbs"
TARGET_DEPLOYMENT_SECONDS = 10.0
TARGET_RSS_MB = 100.0
PHASE_BUDGET = 180.0  # seconds a phase may take beyond 3x --timeout (starting processes, the verb loads)
CONTROLLERS = ["deployment", "replicaset", "garbagecollector", "namespace", "nodeipam", "nodelifecycle"]
# hollow nodes never heartbeat: keep them Ready for far longer than a run
CM_FLAGS = ("--node-monitor-grace-period", "1h", "--node-startup-grace-period", "1h")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def deployment_body(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bench", "labels": {"app": "bench"}},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": "bench"}},
            "template": {"metadata": {"labels": {"app": "bench"}},
                         "spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                                  "ports": [{"containerPort": 80}],
                                                  "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}},
        },
    }


# -- profiling ----------------------------------------------------------------------------------------------------


class Profiler:
    """py-spy record of one process into a folded-stacks file, stopped with SIGINT (py-spy writes on Ctrl-C)."""

    def __init__(self, pid: int, path: Path, rate: int = 200) -> None:
        self.path = path
        self.proc = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid),
                                      "-r", str(rate), "-f", "raw", "-o", str(path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


PROFILE_DIRS = ("apiserver/", "controllers/", "scheduler/", "kubelet/", "machinery/", "bench/")


def hot_frames(folded: str, top: int = 15) -> dict[str, Any]:
    """Shares of all samples: functions on top of the stack (self), by file or library (self), and project
    functions anywhere on the stack (inclusive)."""
    self_counts: Counter[str] = Counter()
    by_file: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in folded.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = [_frame(f, str(REPO)) for f in stack.split(";")
                  if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        count = int(n)
        total += count
        self_counts[frames[-1]] += count
        where = frames[-1].rpartition("(")[2].rstrip(")")
        by_file[where if where.startswith(PROFILE_DIRS) else where.split("/", 1)[0].removesuffix(".py")] += count
        for frame in set(frames):
            if frame.rpartition("(")[2].startswith(PROFILE_DIRS):
                inclusive[frame] += count

    def share(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(name, round(c / total, 4)) for name, c in counter.most_common(top)] if total else []

    return {"samples": total, "self": share(self_counts), "self_by_file": share(by_file),
            "inclusive_project": share(inclusive)}


def print_profile(title: str, profile: dict[str, Any]) -> None:
    print(f"\n{title}: {profile['samples']:,} samples; stacks in {profile['file']}")
    for heading, key in (("self", "self"), ("self, by project file or library", "self_by_file"),
                         ("inclusive, project functions", "inclusive_project")):
        print(f"  {heading}")
        for name, share in profile[key]:
            print(f"    {share * 100:5.1f}%  {name}")


def read_profile(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError:
        return {"samples": 0, "self": [], "self_by_file": [], "inclusive_project": [], "file": str(path)}
    return {**hot_frames(text), "file": str(path)}


# -- (a) scheduler throughput ---------------------------------------------------------------------------------------


async def scheduler_phase(args: argparse.Namespace, results: dict[str, Any]) -> None:
    profile = OUTPUT / "control-plane-scheduler-a.folded" if args.profile else None
    r = await run_config(args.nodes, args.pods, args.keep, args.timeout, profile)
    results["scheduler"] = {
        "nodes": r.nodes, "pods": r.pods, "bound": r.bound, "window_s": round(r.window_s, 3),
        "pods_per_s_window": round(r.window_rate, 1), "start_to_end_s": round(r.total_s, 3),
        "pods_per_s_from_start": round(r.total_rate, 1), "per_node": [r.min_per_node, r.max_per_node],
        "rss_peak_mb": round(r.rss_mb, 1), "scheduler_cpu_s": r.scheduler_cpu_s, "apiserver_cpu_s": r.apiserver_cpu_s,
    }
    if profile is not None:
        results["profiles"]["scheduler (a)"] = read_profile(profile)


# -- (b) a 1,000-replica Deployment, (c) memory, (d) apiserver CPU -----------------------------------------------------


class PodWatch:
    """A watch of the benchmark namespace's pods: when each pod was first seen and when it was first bound."""

    def __init__(self, client: httpx.AsyncClient, namespace: str, resource_version: str) -> None:
        self.client = client
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.resource_version = resource_version
        self.created: dict[str, float] = {}
        self.bound: dict[str, tuple[float, str]] = {}
        self.opened = asyncio.Event()
        self.changed = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        params = {"watch": "true", "resourceVersion": self.resource_version}
        async with self.client.stream("GET", self.path, params=params,
                                      timeout=httpx.Timeout(10, read=None)) as response:
            self.opened.set()  # the apiserver registers a watcher before it answers
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                obj = orjson.loads(line).get("object") or {}
                name = (obj.get("metadata") or {}).get("name")
                if not name:
                    continue
                now = time.monotonic()
                self.created.setdefault(name, now)
                node = (obj.get("spec") or {}).get("nodeName")
                if node and name not in self.bound:
                    self.bound[name] = (now, node)
                    self.changed.set()

    async def wait_bound(self, count: int) -> None:
        while len(self.bound) < count:
            if self.task.done():
                self.task.result()
                raise RuntimeError("the pod watch ended")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 1.0)

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await self.task


def pid_of(process: Process) -> int:
    assert process.proc is not None
    return process.proc.pid


async def deployment_phase(args: argparse.Namespace, results: dict[str, Any]) -> None:
    workdir = make_workdir("minik8s-cp-bench-")
    etcd = Etcd(workdir)
    api: ApiServer | None = None
    cm: ControllerProcess | None = None
    scheduler: Process | None = None
    profilers: list[tuple[str, Profiler]] = []
    try:
        etcd.start()
        api = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
        api.start()
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=api.url, timeout=30, limits=limits) as client:
            for ns in (NAMESPACE, VERBS_NAMESPACE):
                (await client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                               "metadata": {"name": ns}})).raise_for_status()
            await create_all(client, "/api/v1/nodes", [hollow_node(i) for i in range(args.nodes)])
            log(f"{args.nodes} hollow nodes registered; starting the controller-manager and the scheduler")
            cm = ControllerProcess(workdir, api.url, CONTROLLERS, *CM_FLAGS)
            scheduler = Process("scheduler", [sys.executable, "-m", "scheduler", "--master", api.url,
                                              "--secure-port=0"],
                                workdir / "scheduler.log")
            scheduler.start()
            cm.start(60)
            wait_for(lambda: "caches synced" in scheduler.log_path.read_text(errors="replace"), 60,
                     what=f"the scheduler to sync\n{scheduler.log_tail()}")

            async def cidrs() -> int:
                nodes = (await client.get("/api/v1/nodes")).json()["items"]
                return sum(1 for n in nodes if (n.get("spec") or {}).get("podCIDR"))

            deadline = time.monotonic() + 60
            while await cidrs() < args.nodes:  # node IPAM's start-up writes are not part of the figure
                if time.monotonic() > deadline:
                    raise TimeoutError("node IPAM did not give every node a podCIDR within 60s")
                await asyncio.sleep(0.2)

            listed = (await client.get(f"/api/v1/namespaces/{NAMESPACE}/pods", params={"limit": 1})).json()
            revision_before = int(listed["metadata"]["resourceVersion"])
            watch = PodWatch(client, NAMESPACE, listed["metadata"]["resourceVersion"])
            await asyncio.wait_for(watch.opened.wait(), 10)
            pids = {"controller-manager": pid_of(cm.process), "scheduler": pid_of(scheduler),
                    "apiserver": pid_of(api.process), "etcd": pid_of(etcd.process)}
            if args.profile:
                for name in ("controller-manager", "scheduler"):
                    path = OUTPUT / f"control-plane-{name}-b.folded"
                    profilers.append((name, Profiler(pids[name], path)))
                await asyncio.sleep(0.5)  # py-spy attaches
            cpu_before = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}
            idle_before = machine_idle_seconds()
            log(f"creating a Deployment of {args.replicas} replicas")
            started = time.monotonic()
            r = await client.post(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
                                  content=orjson.dumps(deployment_body(args.replicas)),
                                  headers={"Content-Type": "application/json"})
            r.raise_for_status()
            timed_out = False
            try:
                await asyncio.wait_for(watch.wait_bound(args.replicas), args.timeout)
            except TimeoutError:
                timed_out = True
                log(f"timed out: {len(watch.bound)}/{args.replicas} bound, {len(watch.created)} created")
            ended = time.monotonic()
            cpu = {name: proc_cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
            idle = machine_idle_seconds() - idle_before
            listed = (await client.get(f"/api/v1/namespaces/{NAMESPACE}/pods", params={"limit": 1})).json()
            writes = int(listed["metadata"]["resourceVersion"]) - revision_before
            for _, profiler in profilers:
                profiler.stop()
            await watch.close()
            # events are written behind the pods (one writer each): how long until they are all in
            wanted_events = {"Scheduled": args.replicas, "SuccessfulCreate": args.replicas}
            reasons: Counter[str] = Counter()
            events_done: float | None = None
            while time.monotonic() < ended + args.timeout:
                event_items = (await client.get(f"/api/v1/namespaces/{NAMESPACE}/events")).json()["items"]
                reasons = Counter(e["reason"] for e in event_items)
                if all(reasons[k] >= v for k, v in wanted_events.items()):
                    events_done = time.monotonic()
                    break
                await asyncio.sleep(0.1)
            memory = {name: proc_memory_mb(pids[name]) for name in ("controller-manager", "scheduler")}
            created_times = sorted(watch.created.values())
            bound_times = sorted(t for t, _ in watch.bound.values())
            per_node = Counter(node for _, node in watch.bound.values())
            wall = ended - started
            others = max(0.0, (os.cpu_count() or 1) * wall - idle - sum(cpu.values()))
            results["deployment"] = {
                "replicas": args.replicas, "nodes": args.nodes, "timed_out": timed_out,
                "created": len(watch.created), "bound": len(watch.bound),
                "create_to_all_bound_s": round(bound_times[-1] - started, 3) if not timed_out else None,
                "create_to_first_pod_s": round(created_times[0] - started, 3) if created_times else None,
                "create_to_last_pod_created_s": round(created_times[-1] - started, 3) if created_times else None,
                "create_to_all_events_s": round(events_done - started, 3) if events_done is not None else None,
                "per_node": [min(per_node.values(), default=0), max(per_node.values(), default=0)],
                "cpu_s": {k: round(v, 2) for k, v in cpu.items()} | {"others": round(others, 2)},
                "cores_busy": {k: round(v / wall, 2) for k, v in cpu.items()},
                "wall_s": round(wall, 3), "etcd_writes": writes, "events": dict(reasons),
            }
            results["memory"] = {name: {k: round(v, 1) for k, v in m.items()} for name, m in memory.items()}
            for name, profiler in profilers:
                results["profiles"][f"{name} (b)"] = read_profile(profiler.path)
            log("measuring the apiserver's CPU per request by verb (controller-manager and scheduler stopped)")
            cm.stop()
            scheduler.stop()
            results["apiserver_verbs"] = await apiserver_verbs(api, pid_of(etcd.process), args.verb_requests)
    finally:
        for _, profiler in profilers:
            profiler.stop()
        if scheduler is not None:
            scheduler.stop()
        if cm is not None:
            cm.stop()
        if api is not None:
            api.stop()
        etcd.stop()
        if args.keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


async def apiserver_verbs(api: ApiServer, etcd_pid: int, count: int) -> dict[str, Any]:
    """The apiserver's CPU ms per request for what the control plane sends during (b)."""
    ns = VERBS_NAMESPACE
    uid = str(uuid.uuid4())
    pod = orjson.dumps({  # as the ReplicaSet controller writes one
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "verbs-", "namespace": ns, "labels": {"app": "verbs"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "verbs", "uid": uid,
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": deployment_body(1)["spec"]["template"]["spec"],
    })
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    names: list[str] = []

    def create(i: int) -> tuple[str, str, bytes | None]:
        body = orjson.loads(pod)
        body["metadata"].pop("generateName")
        body["metadata"]["name"] = f"verbs-{i:05d}"
        names.append(body["metadata"]["name"])
        return "POST", f"/api/v1/namespaces/{ns}/pods", orjson.dumps(body)

    def bind(i: int) -> tuple[str, str, bytes | None]:
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"verbs-{i:05d}", "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": f"hollow-{i % 100:03d}"}}
        return "POST", f"/api/v1/namespaces/{ns}/pods/verbs-{i:05d}/binding", orjson.dumps(body)

    def event(i: int) -> tuple[str, str, bytes | None]:
        body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"verbs-{i:05d}.{i:x}", "namespace": ns},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": f"verbs-{i:05d}"},
                "reason": "Scheduled", "message": f"Successfully assigned {ns}/verbs-{i:05d} to hollow-000",
                "type": "Normal", "count": 1, "firstTimestamp": now, "lastTimestamp": now,
                "source": {"component": "default-scheduler"}, "reportingComponent": "default-scheduler"}
        return "POST", f"/api/v1/namespaces/{ns}/events", orjson.dumps(body)

    def get(i: int) -> tuple[str, str, bytes | None]:
        return "GET", f"/api/v1/namespaces/{ns}/pods/verbs-{i:05d}", None

    def delete(i: int) -> tuple[str, str, bytes | None]:
        return "DELETE", f"/api/v1/namespaces/{ns}/pods/verbs-{i:05d}", None

    out: dict[str, Any] = {}
    verbs: list[tuple[str, Callable[[int], tuple[str, str, bytes | None]], int]] = [
        ("create pod", create, 201), ("bind pod", bind, 201), ("create event", event, 201),
        ("get pod", get, 200), ("delete pod", delete, 200)]
    for label, make, expect in verbs:
        meter = CpuMeter({"apiserver": pid_of(api.process), "etcd": etcd_pid})
        result = await closed_loop("127.0.0.1", api.port, count, 16, make, expect, "raw", meter)
        out[label] = {"ok": result.ok, "errors": result.errors, "rate_per_s": round(result.rate, 1),
                      "apiserver_cpu_ms": result.cpu["apiserver"]["cpu_ms_per_request"],
                      "etcd_cpu_ms": result.cpu["etcd"]["cpu_ms_per_request"],
                      "apiserver_cores": result.cpu["apiserver"]["cores"]}
    return out


# -- report ---------------------------------------------------------------------------------------------------------


def figure_rows(results: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []

    def row(label: str, value: float | None, unit: str, target: float | None, higher: bool, note: str = "") -> None:
        rows.append([label, format_value(value, unit) if unit != "s" else
                     ("error" if value is None else f"{value:.2f} s"),
                     "—" if target is None else ("≥ " if higher else "≤ ") + (f"{target:g} s" if unit == "s" else
                                                                               format_value(target, unit)),
                     verdict(value, target, higher), note])

    s = results.get("scheduler")
    if s:
        row(f"(a) scheduler, {s['nodes']} nodes x {s['pods']} pending pods", s["pods_per_s_window"], "/s",
            TARGET_PODS_PER_SECOND, True,
            f"{s['bound']} bound; {s['pods_per_s_from_start']:.0f}/s from process start; CPU s: scheduler "
            f"{s['scheduler_cpu_s']:.2f}, apiserver {s['apiserver_cpu_s']:.2f}")
    d = results.get("deployment")
    if d:
        row(f"(b) Deployment of {d['replicas']}, create → all bound", d["create_to_all_bound_s"], "s",
            TARGET_DEPLOYMENT_SECONDS, False,
            f"{d['bound']} bound; last pod created at {d['create_to_last_pod_created_s']} s; every "
            f"SuccessfulCreate and Scheduled event written at {d['create_to_all_events_s']} s")
    m = results.get("memory")
    if m:
        for name in ("controller-manager", "scheduler"):
            mem = m.get(name) or {}
            row(f"(c) {name} peak RSS (VmHWM)", mem.get("VmHWM"), "MB", TARGET_RSS_MB, False,
                f"VmRSS at the end {mem.get('VmRSS', float('nan')):.1f} MB")
    return rows


def verb_rows(results: dict[str, Any]) -> list[list[str]]:
    return [[verb, f"{v['apiserver_cpu_ms']:.2f}" if v["apiserver_cpu_ms"] is not None else "—",
             f"{v['etcd_cpu_ms']:.2f}" if v["etcd_cpu_ms"] is not None else "—", f"{v['rate_per_s']:,.0f}",
             f"{v['apiserver_cores']:.2f}", str(v["errors"])]
            for verb, v in (results.get("apiserver_verbs") or {}).items()]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.control_plane_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=100, help="hollow nodes (default %(default)s)")
    p.add_argument("--pods", type=int, default=1000, help="pending pods for (a) (default %(default)s)")
    p.add_argument("--replicas", type=int, default=1000, help="Deployment replicas for (b) (default %(default)s)")
    p.add_argument("--verb-requests", type=int, default=1000, help="requests per verb in (d) (default %(default)s)")
    p.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for all bindings, per phase")
    p.add_argument("--skip-scheduler", action="store_true", help="skip (a)")
    p.add_argument("--skip-deployment", action="store_true", help="skip (b), (c) and (d)")
    p.add_argument("--profile", action="store_true", help="sample the controller-manager and scheduler with py-spy")
    p.add_argument("--output", type=Path, default=OUTPUT / "control_plane.json", help="JSON results")
    p.add_argument("--keep", action="store_true", help="keep the work directories (logs, etcd data)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpus": os.cpu_count(),
                               "profiles": {}, "errors": {}, "background_cores": {}}
    began = time.monotonic()
    phases: list[tuple[str, Callable[[argparse.Namespace, dict[str, Any]], Awaitable[None]]]] = []
    if not args.skip_scheduler:
        phases.append(("scheduler", scheduler_phase))
    if not args.skip_deployment:
        phases.append(("deployment", deployment_phase))
    interrupted = False
    for name, phase in phases:
        log(f"phase {name} …")
        results["background_cores"][name] = round(background_load(1.0), 2)  # other work on the machine
        try:
            asyncio.run(asyncio.wait_for(phase(args, results), PHASE_BUDGET + 3 * args.timeout))
        except KeyboardInterrupt:
            interrupted = True
            log("interrupted")
            break
        except Exception as e:  # a phase that fails is reported; the next one still runs
            results["errors"][name] = f"{type(e).__name__}: {e}"
            log(f"phase {name} failed: {e}")
    results["duration_s"] = round(time.monotonic() - began, 1)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")

    print(f"\nminik8s control-plane benchmark ({os.cpu_count()} CPUs, {results['duration_s']:.0f} s; one run)\n")
    print(render_table(["figure", "value", "target", "verdict", "notes"], figure_rows(results)))
    if results.get("apiserver_verbs"):
        print("\n(d) apiserver CPU per request, closed loop of 16 connections, no watchers\n")
        print(render_table(["request", "apiserver CPU ms", "etcd CPU ms", "rate", "apiserver cores", "errors"],
                           verb_rows(results)))
    busy = {k: v for k, v in results["background_cores"].items() if v > 0.25}
    if busy:
        print("\nCAUTION: other processes kept the machine busy before the phases (cores: "
              + ", ".join(f"{k} {v:.2f}" for k, v in busy.items()) + "): the rates are pessimistic; the CPU "
              "seconds per process compare better between runs")
    d = results.get("deployment")
    if d:
        print(f"\nduring (b), create → all bound: {d['etcd_writes']} etcd writes in {d['wall_s']:.2f} s; CPU s "
              + ", ".join(f"{k} {v:.2f}" for k, v in d["cpu_s"].items()) + "; cores busy "
              + ", ".join(f"{k} {v:.2f}" for k, v in d["cores_busy"].items()))
    for title, profile in results["profiles"].items():
        print_profile(f"profile of the {title}", profile)
    for name, error in results["errors"].items():
        print(f"\nphase {name} failed: {error}")
    print(f"\nJSON: {args.output}")
    if interrupted:
        return 130
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
