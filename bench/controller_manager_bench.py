"""The controller-manager's memory with every controller on (issue 13: ≤ 120 MB), against the same process
running only the deployment and replicaset controllers (the baseline), each on a fresh etcd and apiserver
holding the same workload.

    python -m bench.controller_manager_bench [--quick] [--output FILE] [--keep]

The workload touches every controller: 10 hollow Node objects (bench.scheduler_bench's), in one namespace
DEPLOYMENTS Deployments of REPLICAS pods, a Service and a PodDisruptionBudget (maxUnavailable 1, so the
disruption controller reads the Deployments' scale) for each, a DaemonSet, JOBS Jobs and 2 CronJobs. No
scheduler and no kubelet: pods stay Pending, so what is measured is the controllers' caches and work queues
over the same objects. A phase ends when every ReplicaSet has created its pods (and, with every
controller, every budget's status is observed); the figure is the process's peak RSS (VmHWM) after a
settling pause.

Not a test: it prints figures and checks only that each phase finished.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.scheduler_bench import create_all, hollow_node, peak_rss_mb
from tests.cluster import REPO, ApiServer, Etcd, Process, make_workdir

OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "bench-cm"
BASELINE_CONTROLLERS = "deployment,replicaset"
SETTLE_S = 5.0


def _labels(i: int) -> dict[str, str]:
    return {"app": f"web-{i}"}


def _template(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}


def workload(deployments: int, replicas: int, jobs: int) -> dict[str, list[dict[str, Any]]]:
    """Collection path → bodies."""
    ns = f"namespaces/{NAMESPACE}"
    return {
        f"/apis/apps/v1/{ns}/deployments": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"web-{i}"},
             "spec": {"replicas": replicas, "selector": {"matchLabels": _labels(i)}, "template": _template(_labels(i))}}
            for i in range(deployments)],
        f"/api/v1/{ns}/services": [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"web-{i}"},
             "spec": {"selector": _labels(i), "ports": [{"port": 80}]}} for i in range(deployments)],
        f"/apis/policy/v1/{ns}/poddisruptionbudgets": [
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": f"web-{i}"},
             "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _labels(i)}}} for i in range(deployments)],
        f"/apis/apps/v1/{ns}/daemonsets": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
             "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": _template({"app": "agent"})}}],
        f"/apis/batch/v1/{ns}/jobs": [
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"job-{i}"},
             "spec": {"completions": 2, "parallelism": 2, "template": {
                 "spec": {"restartPolicy": "Never", **_template({})["spec"]}}}} for i in range(jobs)],
        f"/apis/batch/v1/{ns}/cronjobs": [
            {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": f"cron-{i}"},
             "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {
                 "spec": {"restartPolicy": "Never", **_template({})["spec"]}}}}}} for i in range(2)],
    }


async def _settled(client: httpx.AsyncClient, deployments: int, replicas: int, budgets: bool, timeout: float) -> float:
    """Seconds until the ReplicaSets' pods exist (and, with `budgets`, each budget's status is observed)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        pods = (await client.get(f"/api/v1/namespaces/{NAMESPACE}/pods")).json()
        web = [p for p in pods.get("items") or []
               if (p["metadata"].get("labels") or {}).get("app", "").startswith("web")]
        done = len(web) >= deployments * replicas
        if done and budgets:
            pdbs = (await client.get(f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets")).json()
            done = all((p.get("status") or {}).get("expectedPods") == replicas for p in pdbs.get("items") or [])
        if done:
            return time.monotonic() - started
        await asyncio.sleep(0.25)
    raise TimeoutError(f"the workload did not settle within {timeout}s")


async def phase(controllers: str, deployments: int, replicas: int, jobs: int, timeout: float, keep: bool
                ) -> dict[str, Any]:
    workdir = make_workdir("minik8s-cm-bench-")
    etcd = Etcd(workdir)
    apiserver: ApiServer | None = None
    manager: Process | None = None
    try:
        etcd.start()
        apiserver = ApiServer(workdir, etcd)
        apiserver.start()
        async with httpx.AsyncClient(base_url=apiserver.url, timeout=30) as client:
            (await client.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})).raise_for_status()
            await create_all(client, "/api/v1/nodes", [hollow_node(i) for i in range(10)])
            for path, bodies in workload(deployments, replicas, jobs).items():
                await create_all(client, path, bodies, concurrency=8)
            env = {"KUBECONFIG": str(workdir / "no-kubeconfig")}
            manager = Process("controller-manager", [sys.executable, "-m", "controllers", "--master", apiserver.url,
                                                     "--controllers", controllers, "--leader-elect=false",
                                                     "--secure-port=0"],
                              workdir / "controller-manager.log", env=env)
            manager.start()
            took = await _settled(client, deployments, replicas, controllers == "*", timeout)
            await asyncio.sleep(SETTLE_S)
            assert manager.proc is not None and manager.alive(), manager.log_tail()
            rss = peak_rss_mb(manager.proc.pid)
        return {"controllers": controllers, "settled_s": round(took, 2), "rss_mb": round(rss, 1)}
    finally:
        if manager is not None:
            manager.stop()
        if apiserver is not None:
            apiserver.stop()
        etcd.stop()
        if keep:
            print(f"  kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.controller_manager_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--deployments", type=int, default=20)
    p.add_argument("--replicas", type=int, default=10)
    p.add_argument("--jobs", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="5 Deployments of 4, 2 Jobs")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--output", type=Path, default=OUTPUT / "controller_manager.json", help="JSON results (%(default)s)")
    p.add_argument("--keep", action="store_true", help="keep the work directories (logs, etcd data)")
    args = p.parse_args(argv)
    if args.quick:
        args.deployments, args.replicas, args.jobs = 5, 4, 2
    started = time.time()
    results = {}
    for name, controllers in (("baseline", BASELINE_CONTROLLERS), ("all", "*")):
        print(f"controller-manager --controllers {controllers}: {args.deployments} Deployments x {args.replicas}, "
              f"{args.jobs} Jobs ...", flush=True)
        results[name] = asyncio.run(phase(controllers, args.deployments, args.replicas, args.jobs, args.timeout,
                                          args.keep))
        print(f"  peak RSS {results[name]['rss_mb']} MB (settled in {results[name]['settled_s']} s)", flush=True)
    from controllers.manager import CONTROLLERS

    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "benchmark": "controller_manager", "quick": args.quick, "cpus": os.cpu_count(),
        "duration_s": round(time.time() - started, 1), "controllers": len(CONTROLLERS),
        "workload": {"deployments": args.deployments, "replicas": args.replicas, "jobs": args.jobs, "nodes": 10},
        "baseline": results["baseline"], "all": results["all"]}, indent=2) + "\n")
    print(f"every controller ({len(CONTROLLERS)}): {results['all']['rss_mb']} MB; deployment+replicaset: "
          f"{results['baseline']['rss_mb']} MB\nJSON: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
