"""HPA reaction time and the metrics-server's RSS, on real processes: a fresh etcd and apiserver (with
`--metrics-server-url`), one kubelet running real Docker containers, `python -m metrics_server` scraping it
every `--metric-resolution` (10 s: metrics-server's lowest), and the controller-manager's deployment,
replicaset and horizontalpodautoscaling controllers at the default `--horizontal-pod-autoscaler-sync-period`
(15 s).

    python -m bench.hpa_bench [--resolution 10s] [--sync-period 15s] [--reps 2] [--quick] [--output FILE]

A Deployment of one busybox pod (request 100m) idles for IDLE seconds after its container starts, then
burns a CPU in a shell loop; its HPA targets 50% CPU utilization, 1..3 replicas. Per repetition, measured
from the load start (container startedAt + IDLE, to the second):

- metrics: the pod's PodMetrics (metrics.k8s.io through the apiserver) shows the load (over 50m);
- decision: the Deployment's spec.replicas is raised by the HPA (the HPA's own share: from the metrics
  showing the load to the scale write; at most one sync period);
- reaction: every replica the HPA asked for is Running.

The baseline, from the same run: what is not the HPA's — the metrics delay plus the new pods' start-up
(scale write → Running). The metrics-server's RSS (VmRSS after the runs) is set beside a Python process
that imports the same libraries and does nothing. Not a test: it prints figures and checks only that the
HPA scaled.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from machinery.quantity import parse_quantity
from machinery.timeutil import parse_go_duration, parse_rfc3339
from tests.cluster import REPO, ApiServer, Etcd, Process, free_port, make_workdir
from tests.controller_process import ControllerProcess
from tests.metrics_process import MetricsServerProcess
from tests.node_process import BUSYBOX, KubeletProcess, cleanup, ensure_images, free_pod_cidrs

OUTPUT = REPO / "_output" / "bench"
JSONDict = dict[str, Any]


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


def deployment(name: str, node: str, idle: int) -> JSONDict:
    script = f"sleep {idle}; while :; do :; done"
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "nodeName": node, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "load", "image": BUSYBOX, "command": ["sh", "-c", script],
                                         "resources": {"requests": {"cpu": "100m"}}}]}}}}


def autoscaler(name: str) -> JSONDict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": 1, "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}


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


def one_run(api: httpx.Client, node: str, idle: int, sync: float, resolution: float) -> JSONDict:
    ns = f"hpa-{uuid.uuid4().hex[:6]}"
    assert api.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
    name = "load"
    assert api.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment(name, node, idle)).status_code == 201
    assert api.post(f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
                    json=autoscaler(name)).status_code == 201

    def started() -> float | None:
        for p in pods_of(api, ns, name):
            for c in p.get("status", {}).get("containerStatuses") or []:
                at = parse_rfc3339(((c.get("state") or {}).get("running") or {}).get("startedAt"))
                if at is not None:
                    return at.timestamp()
        return None

    first_start = poll(started, 120, "the first pod to run")
    load_start = first_start + idle
    first = pods_of(api, ns, name)[0]["metadata"]["name"]

    def metrics_show_load() -> float | None:
        r = api.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{first}")
        if r.status_code == 200 and time.time() >= load_start:
            cpu = parse_quantity(r.json()["containers"][0]["usage"]["cpu"]).milli_value()
            return time.time() if cpu > 50 else None
        return None

    budget = idle + 4 * resolution + 2 * sync + 120
    t_metrics = poll(metrics_show_load, budget, "the metrics to show the load", 0.2)

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
    api.delete(f"/api/v1/namespaces/{ns}")
    return {"desired": desired, "metrics_s": t_metrics - load_start, "decision_s": t_scaled - t_metrics,
            "startup_s": t_running - t_scaled, "reaction_s": t_running - load_start,
            "utilization": (hpa.get("status", {}).get("currentMetrics") or [{}])[0].get("resource", {}).get(
                "current", {}).get("averageUtilization"), "metrics_window_s": window}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.hpa_bench")
    p.add_argument("--resolution", default="10s", help="the metrics-server's --metric-resolution")
    p.add_argument("--sync-period", default="15s", help="--horizontal-pod-autoscaler-sync-period")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--idle", type=int, default=25, help="seconds each pod idles before it burns")
    p.add_argument("--quick", action="store_true", help="one repetition")
    p.add_argument("--output", type=Path, default=OUTPUT / "hpa.json")
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
        kubelet = KubeletProcess(workdir, apiserver, f"hpa-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
        with httpx.Client(base_url=apiserver.url, timeout=30) as api:
            kubelet.start(api)
            metrics = MetricsServerProcess(workdir, apiserver.url, args.resolution, port=metrics_port)
            metrics.start()
            controllers = ControllerProcess(workdir, apiserver.url,
                                            ["deployment", "replicaset", "horizontalpodautoscaling"],
                                            f"--horizontal-pod-autoscaler-sync-period={args.sync_period}")
            controllers.start()
            idle_python = Process("idle-python", [sys.executable, "-c",
                                                  "import aiohttp, time, machinery.informer, machinery.api.core_v1; "
                                                  "time.sleep(3600)"], workdir / "idle-python.log")
            idle_python.start()
            for i in range(reps):
                run = one_run(api, kubelet.node, args.idle, sync, resolution)
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

    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    result = {"resolution_s": resolution, "sync_period_s": sync, "runs": runs,
              "reaction_s": median("reaction_s"), "decision_s": median("decision_s"),
              "metrics_s": median("metrics_s"), "startup_s": median("startup_s"),
              "baseline_s": median("metrics_s") + median("startup_s"),
              "metrics_server_rss_mb": ms_rss, "idle_python_rss_mb": idle_rss}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
