"""HPA reaction time and the metrics-server's RSS, on real processes: a fresh etcd and apiserver (with
`--metrics-server-url`), one kubelet running real Docker containers, `python -m metrics_server` scraping it
every `--metric-resolution` (10 s: metrics-server's lowest), and the controller-manager's deployment,
replicaset and horizontalpodautoscaling controllers at the default `--horizontal-pod-autoscaler-sync-period`
(15 s).

    python -m bench.hpa_bench [--resolution 10s] [--sync-period 15s] [--reps 5] [--idle S] [--seed N] [--quick]
                              [--kubelet-arg FLAG]... [--output FILE]

A Deployment of one busybox pod (request 100m) idles for IDLE seconds (plus an offset spreading the runs
over the HPA's sync phase: idle_times) after its container starts, then burns a CPU in a shell loop; its HPA
targets 50% CPU utilization, 1..3 replicas. Per repetition, measured from the load start (Docker's own
StartedAt of the container, to the nanosecond, + the idle time: the pod status's startedAt is cut to the
second, which made every figure up to a second too long):

- metrics: the pod's PodMetrics (metrics.k8s.io through the apiserver) shows a load the HPA acts on: over
  the target times upstream's tolerance (50% x 1.1 of 100m: 55m; at 50-55m the HPA rightly does nothing,
  and that wait for a fuller window belongs to the metrics, not to the decision);
- decision: the Deployment's spec.replicas is raised by the HPA (the HPA's own share: from the metrics
  showing the load to the scale write; at most one sync period);
- reaction: every replica the HPA asked for is Running.

By design (upstream's periods) the metrics wait up to one resolution for the first scrape after the load
(more when that scrape's window holds too little of it) and the decision up to one sync period: the
median of the two waits is about resolution/2 + sync/2, their worst resolution + sync. The figures are
the median and the worst over the repetitions, with each run's 1-minute load average and the CPU the
loaded pod got (on a busy host a pod of 100m gets little more than its share, sometimes under the target:
such a run is counted as `starved` after LOAD_WAIT scrapes and left out of the medians, not failed).

The baseline, from the same run: what is not the HPA's — the metrics delay plus the new pods' start-up
(scale write → Running). The metrics-server's RSS (VmRSS after the runs) is set beside a Python process
that imports the same libraries and does nothing. Not a test: it prints figures and checks only that the
HPA scaled.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import httpx

from machinery.quantity import parse_quantity
from machinery.timeutil import parse_go_duration, parse_rfc3339_nano
from tests.cluster import REPO, ApiServer, Etcd, Process, free_port, make_workdir
from tests.controller_process import ControllerProcess
from tests.metrics_process import MetricsServerProcess
from tests.node_process import BUSYBOX, KubeletProcess, cleanup, ensure_images, free_pod_cidrs

OUTPUT = REPO / "_output" / "bench"
JSONDict = dict[str, Any]
REQUEST_MILLI = 100
TARGET_UTILIZATION = 50
TOLERANCE = 0.1  # upstream's --horizontal-pod-autoscaler-tolerance
ACTS_ON_MILLI = REQUEST_MILLI * TARGET_UTILIZATION / 100 * (1 + TOLERANCE)  # 55m: the HPA scales above it
LOAD_WAIT = 6  # scrapes after the load start before a run is called starved


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return None


def deployment(name: str, node: str, idle: float) -> JSONDict:
    script = f"sleep {idle:.2f}; while :; do :; done"
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "nodeName": node, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "load", "image": BUSYBOX, "command": ["sh", "-c", script],
                                         "resources": {"requests": {"cpu": f"{REQUEST_MILLI}m"}}}]}}}}


def autoscaler(name: str) -> JSONDict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": 1, "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu", "target": {"type": "Utilization", "averageUtilization": TARGET_UTILIZATION}}}]}}


def poll(condition: Any, timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def pods_of(api: httpx.Client, ns: str, name: str) -> list[JSONDict]:
    items: list[JSONDict] = api.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": f"app={name}"}
                                    ).json()["items"]
    return items


def docker_started(container_id: str) -> float:
    """The container's start as Docker recorded it, in seconds since the epoch to the nanosecond."""
    client = docker.from_env()
    try:
        started = parse_rfc3339_nano(client.containers.get(container_id).attrs["State"]["StartedAt"])
    finally:
        client.close()
    if started is None:
        raise RuntimeError(f"container {container_id} has no StartedAt")
    return started / 1e9


SCRAPED = re.compile(r"node (\S+): scraped \d+ pods: asked ([\d.]+) answered ([\d.]+) stored ([\d.]+)")


def scrapes(log: Path, node: str) -> list[tuple[float, float, float]]:
    """(asked, answered, stored) of each scrape of `node` the metrics-server logged (at -v 4), in order."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        m = SCRAPED.search(line)
        if m and m[1] == node:
            out.append((float(m[2]), float(m[3]), float(m[4])))
    return out


def metrics_hops(log: Path, node: str, load_start: float, seen: float) -> JSONDict:
    """The metrics' delay by hop: from the load start to the kubelet being asked by the scrape that showed it
    (the scrape's phase, and the share of its window the load needed), that scrape's own time (the kubelet,
    the runtime, Docker) and from its store to a reader seeing it (the API path and the bench's polling);
    and how many scrapes after the load start were needed."""
    done = [s for s in scrapes(log, node) if s[2] <= seen]
    if not done:
        return {}
    asked, _, stored = done[-1]
    return {"metrics_wait_s": asked - load_start, "metrics_scrape_s": stored - asked, "metrics_seen_s": seen - stored,
            "scrapes_after_load": sum(1 for s in done if s[0] >= load_start)}


def idle_times(least: float, sync: float, reps: int, rng: random.Random) -> list[float]:
    """Each run's idle time: `least` plus an offset, one drawn in each of `reps` equal slices of a sync period,
    in a shuffled order. The HPA is created with the Deployment, so a fixed idle would start the load at
    nearly the same phase of the HPA's sync every run (by the pod's start-up), and the decision wait would be
    that phase's, not a fair sample of the 0..sync upstream's loop gives; the metrics-server's scrape phase
    is independent of the run and need not be spread."""
    offsets = [(i + rng.random()) * sync / reps for i in range(reps)]
    rng.shuffle(offsets)
    return [least + o for o in offsets]


def one_run(api: httpx.Client, node: str, idle: float, sync: float, resolution: float, log: Path) -> JSONDict:
    ns = f"hpa-{uuid.uuid4().hex[:6]}"
    assert api.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
    try:
        return _measure(api, ns, node, idle, sync, resolution, log)
    finally:
        stop_load(api, ns, "load")


def stop_load(api: httpx.Client, ns: str, name: str) -> None:
    """End a run's load before the next run starts. The bench runs no namespace or garbage-collector
    controller, so deleting the namespace alone left every loaded pod burning on: each run competed
    with the 1-3 busy loops of the runs before it (the second run of the old bench got under a third
    of the first's CPU, or never reached the target). The HPA goes first (it would scale back up),
    then the Deployment is scaled to 0, and its pods and then their running containers are waited for."""
    api.delete(f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers/{name}")
    api.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}/scale", json={"spec": {"replicas": 0}},
              headers={"Content-Type": "application/merge-patch+json"})
    poll(lambda: not pods_of(api, ns, name), 120, "the loaded pods to go", 0.5)
    client = docker.from_env()
    try:
        # sparse: no inspect per listed container, which fails (404) for one removed between the list and it
        poll(lambda: not client.containers.list(sparse=True, filters={"label": f"io.kubernetes.pod.namespace={ns}"}),
             120, "the loaded containers to stop", 0.5)
    finally:
        client.close()
    api.delete(f"/api/v1/namespaces/{ns}")


def _measure(api: httpx.Client, ns: str, node: str, idle: float, sync: float, resolution: float,
             log: Path) -> JSONDict:
    name = "load"
    assert api.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment(name, node, idle)).status_code == 201
    assert api.post(f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
                    json=autoscaler(name)).status_code == 201

    def started() -> tuple[str, str] | None:
        for p in pods_of(api, ns, name):
            for c in p.get("status", {}).get("containerStatuses") or []:
                if ((c.get("state") or {}).get("running") or {}).get("startedAt") and c.get("containerID"):
                    return p["metadata"]["name"], c["containerID"].partition("://")[2]
        return None

    first, container_id = poll(started, 120, "the first pod to run")
    load_start = docker_started(container_id) + idle
    peak = 0

    def metrics_show_load() -> float | None:
        nonlocal peak
        r = api.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{first}")
        if r.status_code == 200 and time.time() >= load_start:
            cpu = parse_quantity(r.json()["containers"][0]["usage"]["cpu"]).milli_value()
            peak = max(peak, cpu)
            return time.time() if cpu > ACTS_ON_MILLI else None
        return None

    poll(lambda: time.time() >= load_start, idle + 60, "the load to start", 0.2)
    load_avg = os.getloadavg()[0]
    try:
        t_metrics = poll(metrics_show_load, LOAD_WAIT * resolution, "the metrics to show the load", 0.2)
    except TimeoutError:
        return {"starved": True, "idle_s": idle, "peak_cpu_m": peak, "load_avg": load_avg}

    def scaled() -> tuple[float, int] | None:
        replicas = api.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}").json()["spec"]["replicas"]
        return (time.time(), replicas) if replicas > 1 else None

    t_scaled, desired = poll(scaled, 2 * sync + 60, "the HPA to scale the Deployment up")

    def running() -> float | None:
        pods = [p for p in pods_of(api, ns, name) if p.get("status", {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]
        return time.time() if len(pods) >= desired else None

    t_running = poll(running, 120, f"{desired} Running replicas")
    hpa = api.get(f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers/{name}").json()
    window = None
    r = api.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{first}")
    if r.status_code == 200:
        window = parse_go_duration(r.json()["window"])
    return {"idle_s": idle, "desired": desired, "metrics_s": t_metrics - load_start, "decision_s": t_scaled - t_metrics,
            "startup_s": t_running - t_scaled, "reaction_s": t_running - load_start,
            "utilization": (hpa.get("status", {}).get("currentMetrics") or [{}])[0].get("resource", {}).get(
                "current", {}).get("averageUtilization"), "metrics_window_s": window, "peak_cpu_m": peak,
            "load_avg": load_avg, **metrics_hops(log, node, load_start, t_metrics)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.hpa_bench")
    p.add_argument("--resolution", default="10s", help="the metrics-server's --metric-resolution")
    p.add_argument("--sync-period", default="15s", help="--horizontal-pod-autoscaler-sync-period")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--idle", type=float, default=25, help="the least seconds each pod idles before it burns")
    p.add_argument("--seed", type=int, default=None, help="the seed of the idle offsets (a fresh one if unset)")
    p.add_argument("--quick", action="store_true", help="one repetition")
    p.add_argument("--output", type=Path, default=OUTPUT / "hpa.json")
    p.add_argument("--kubelet-arg", action="append", default=[],
                   help="an extra kubelet flag (repeatable), e.g. --kubelet-arg=--cgroups-per-qos=false for the "
                        "baseline without QoS cgroups")
    args = p.parse_args(argv)
    reps = 1 if args.quick else args.reps
    resolution, sync = parse_go_duration(args.resolution), parse_go_duration(args.sync_period)
    ensure_images()
    workdir = make_workdir("minik8s-bench-hpa-")
    etcd = Etcd(workdir)
    etcd.start()
    metrics_port = free_port()
    apiserver = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0",
                          "--metrics-server-url", f"http://127.0.0.1:{metrics_port}")
    kubelet: KubeletProcess | None = None
    metrics: MetricsServerProcess | None = None
    controllers: ControllerProcess | None = None
    idle_python: Process | None = None
    runs: list[JSONDict] = []
    try:
        apiserver.start()
        kubelet = KubeletProcess(workdir, apiserver, f"hpa-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0],
                                 extra_args=args.kubelet_arg)
        with httpx.Client(base_url=apiserver.url, timeout=30) as api:
            kubelet.start(api)
            # -v 4: the scraper logs each scrape's times (metrics_hops)
            metrics = MetricsServerProcess(workdir, apiserver.url, args.resolution, "--v", "4", port=metrics_port)
            metrics.start()
            controllers = ControllerProcess(workdir, apiserver.url,
                                            ["deployment", "replicaset", "horizontalpodautoscaling"],
                                            f"--horizontal-pod-autoscaler-sync-period={args.sync_period}")
            controllers.start()
            idle_python = Process("idle-python", [sys.executable, "-c",
                                                  "import aiohttp, time, machinery.informer, machinery.api.core_v1; "
                                                  "time.sleep(3600)"], workdir / "idle-python.log")
            idle_python.start()
            for i, idle in enumerate(idle_times(args.idle, sync, reps, random.Random(args.seed))):
                run = one_run(api, kubelet.node, idle, sync, resolution, metrics.process.log_path)
                print(f"run {i + 1}: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                                                   for k, v in run.items()), flush=True)
                runs.append(run)
        time.sleep(1)
        ms_rss = rss_mb(metrics.process.proc.pid if metrics.process.proc else None)
        idle_rss = rss_mb(idle_python.proc.pid if idle_python.proc else None)
    finally:
        for component in (idle_python, controllers, metrics):
            if component is not None:
                component.stop()
        if kubelet is not None:
            cleanup([kubelet])
        apiserver.stop()
        etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    done = [r for r in runs if not r.get("starved")]

    def median(key: str) -> float | None:
        return statistics.median(r[key] for r in done) if done else None

    def worst(key: str) -> float | None:
        return max(r[key] for r in done) if done else None

    metrics_median, startup_median = median("metrics_s"), median("startup_s")
    result = {"resolution_s": resolution, "sync_period_s": sync, "runs": runs, "reps": len(runs),
              "starved": len(runs) - len(done),
              "reaction_s": median("reaction_s"), "reaction_worst_s": worst("reaction_s"),
              "decision_s": median("decision_s"), "decision_worst_s": worst("decision_s"),
              "metrics_s": metrics_median, "metrics_worst_s": worst("metrics_s"),
              "startup_s": startup_median, "startup_worst_s": worst("startup_s"),
              # the metrics' delay by hop (metrics_hops), medians over the runs that logged them
              **{k: statistics.median(r[k] for r in done if k in r) if any(k in r for r in done) else None
                 for k in ("metrics_wait_s", "metrics_scrape_s", "metrics_seen_s")},
              "baseline_s": None if metrics_median is None or startup_median is None
              else metrics_median + startup_median,
              # upstream's periods alone: the median and the worst wait for a scrape and then for a sync
              "by_design_median_s": resolution / 2 + sync / 2, "by_design_worst_s": resolution + sync,
              "load_avg": median("load_avg"), "peak_cpu_m": median("peak_cpu_m"), "kubelet_args": args.kubelet_arg,
              "metrics_server_rss_mb": ms_rss, "idle_python_rss_mb": idle_rss}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
