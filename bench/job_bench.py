"""A Job of N completions at parallelism P on two real kubelets running Docker containers, from create to the
Complete condition, against the pods' own run time in the same run (tests/e2e/local_cluster.py: etcd,
apiserver, every controller, the scheduler, two kubelets on the Docker shim).

    python -m bench.job_bench [--completions 100] [--parallelism 10] [--seconds 2] [--quick] [--output FILE] [--keep]

Each pod is a busybox container running `sleep S`. The baseline is what the Job would take if starting,
finishing and replacing pods cost nothing: the pods' own run time (each container's terminated.finishedAt -
startedAt, as the kubelet reported it) summed and spread over P at once. The figure is the wall time ÷ that
baseline, and the overhead per wave of P pods ((wall - baseline) ÷ (N ÷ P)): what the control loop (job
controller, scheduler, kubelet, runtime) adds to each pod it runs. One unmeasured Job first warms every
component and the page cache.

Not a test: it prints figures and checks only that the Job completed with exactly N successful pods.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests.cluster import REPO, wait_for
from tests.e2e.local_cluster import LocalCluster
from tests.node_process import BUSYBOX

OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "bench-job"
JSONDict = dict[str, Any]


def job(name: str, completions: int, parallelism: int, seconds: float) -> JSONDict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completions": completions, "parallelism": parallelism, "backoffLimit": 0,
                     "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "c", "image": BUSYBOX,
                                                           "command": ["sleep", f"{seconds:g}"]}]}}}}


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def run_job(api: httpx.Client, name: str, completions: int, parallelism: int, seconds: float,
            timeout: float) -> JSONDict:
    """POST → the Complete condition; the pods' own run times; then delete the Job and wait for its pods."""
    base = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    started = time.monotonic()
    api.post(base, json=job(name, completions, parallelism, seconds)).raise_for_status()
    deadline = started + timeout
    while True:
        status = api.get(f"{base}/{name}").json().get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        if conditions.get("Complete") == "True":
            wall = time.monotonic() - started
            break
        if conditions.get("Failed") == "True":
            raise RuntimeError(f"job {name} failed: {status}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {name}: {status.get('succeeded') or 0}/{completions} after {timeout}s")
        time.sleep(0.05)
    if status.get("succeeded") != completions:
        raise RuntimeError(f"job {name}: {status.get('succeeded')} succeeded, wanted exactly {completions}")
    pods = api.get(f"/api/v1/namespaces/{NAMESPACE}/pods", params={"labelSelector": f"job-name={name}"}).json()["items"]
    run_times = []
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            done = (cs.get("state") or {}).get("terminated") or {}
            if done.get("exitCode") == 0 and done.get("startedAt") and done.get("finishedAt"):
                run_times.append(_time(done["finishedAt"]) - _time(done["startedAt"]))
    api.request("DELETE", f"{base}/{name}", json={"propagationPolicy": "Background"})
    wait_for(lambda: not api.get(f"/api/v1/namespaces/{NAMESPACE}/pods",
                                 params={"labelSelector": f"job-name={name}"}).json()["items"],
             timeout, 0.2, what=f"{name}'s pods gone")
    baseline = sum(run_times) / parallelism
    return {"wall_s": round(wall, 2), "pods_run_s": round(sum(run_times), 1), "pods_counted": len(run_times),
            "baseline_s": round(baseline, 2), "ratio": round(wall / baseline, 2) if baseline else None,
            "overhead_per_wave_s": round((wall - baseline) / (completions / parallelism), 2)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.job_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--completions", type=int, default=100, help="completions (default %(default)s)")
    p.add_argument("--parallelism", type=int, default=10, help="parallelism (default %(default)s)")
    p.add_argument("--seconds", type=float, default=2.0, help="each pod's sleep (default %(default)s)")
    p.add_argument("--quick", action="store_true", help="20 completions at parallelism 5")
    p.add_argument("--timeout", type=float, default=900, help="limit for the Job in seconds (default %(default)s)")
    p.add_argument("--output", type=Path, default=OUTPUT / "job.json")
    p.add_argument("--keep", action="store_true", help="keep the work directory (component logs)")
    args = p.parse_args(argv)
    if args.quick:
        args.completions, args.parallelism = 20, 5
    if args.completions < 1 or args.parallelism < 1 or args.seconds <= 0:
        p.error("--completions, --parallelism and --seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.time()
    cluster = LocalCluster("jobbench", 2)
    result: JSONDict = {}
    status = "completed"
    try:
        print(f"starting the cluster (work dir {cluster.workdir}) ...", file=sys.stderr, flush=True)
        cluster.start()
        with cluster.client(timeout=30) as api:
            api.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}}).raise_for_status()
            run_job(api, "warm", args.parallelism, args.parallelism, args.seconds, args.timeout)
            result = run_job(api, "measured", args.completions, args.parallelism, args.seconds, args.timeout)
    except KeyboardInterrupt:
        status = "interrupted"
    except Exception as e:
        status = f"failed: {type(e).__name__}: {e}"
        print(cluster.logs(20), file=sys.stderr)
    finally:
        if args.keep:
            cluster.own_workdir = False
            print(f"work directory kept: {cluster.workdir}", file=sys.stderr)
        cluster.stop()
    results = {"status": status, "duration_s": round(time.time() - started, 1), "completions": args.completions,
               "parallelism": args.parallelism, "pod_seconds": args.seconds,
               "nodes": {"kind": "real", "count": 2, "runtime": "docker"}, "cpus": os.cpu_count(), **result}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nJob benchmark ({status}; {args.completions} completions at parallelism {args.parallelism}, "
          f"`sleep {args.seconds:g}` pods on two real kubelets on Docker)")
    if result:
        print(f"  create → Complete          {result['wall_s']:8.2f} s")
        print(f"  pods' own run time ÷ {args.parallelism:<4} {result['baseline_s']:8.2f} s  (baseline)")
        print(f"  ratio                      {result['ratio']:8.2f}x")
        print(f"  overhead per wave          {result['overhead_per_wave_s']:8.2f} s")
    return 0 if status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
