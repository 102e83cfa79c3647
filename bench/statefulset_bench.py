"""StatefulSet of N to all Ready on two real kubelets running Docker containers, against a Deployment of N in the
same run and cluster (tests/e2e/local_cluster.py: etcd, apiserver, every controller, the scheduler, two kubelets on
the Docker shim).

    python -m bench.statefulset_bench [--replicas 10] [--reps 3] [--quick] [--output FILE] [--keep]

Per repetition, in turn: a Deployment of N (the baseline: N pods created at once by the ReplicaSet controller),
a StatefulSet of N with podManagementPolicy Parallel (all at once, by name), and a StatefulSet of N with
OrderedReady (the default: each pod created only once the one before is Running and Ready). Each is timed from
its POST to status.readyReplicas == N (the controllers' own count of Ready pods), then deleted and its pods
waited out before the next. The pods are busybox `sleep` containers without probes, Ready as soon as their
container runs, so OrderedReady's figure is N sequential pod start-ups through the whole control loop. Figures:
medians of each kind, and the ratios StatefulSet ÷ Deployment.

Not a test: it prints figures and checks only that each roll-out finished.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.cluster import REPO, wait_for
from tests.e2e.local_cluster import LocalCluster
from tests.node_process import BUSYBOX

OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "bench-sts"
JSONDict = dict[str, Any]
KINDS = ("deployment", "parallel", "ordered")


def workload(kind: str, name: str, replicas: int) -> tuple[str, JSONDict]:
    """(collection path, body) of one measured object."""
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}]}}
    spec: JSONDict = {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template}
    if kind == "deployment":
        return "deployments", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}
    spec["serviceName"] = name
    spec["podManagementPolicy"] = "Parallel" if kind == "parallel" else "OrderedReady"
    return "statefulsets", {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": spec}


def measure(api: httpx.Client, kind: str, name: str, replicas: int, timeout: float) -> float:
    """POST → status.readyReplicas == replicas, in seconds; then delete it and wait for its pods to go."""
    plural, body = workload(kind, name, replicas)
    base = f"/apis/apps/v1/namespaces/{NAMESPACE}/{plural}"
    started = time.monotonic()
    r = api.post(base, json=body)
    r.raise_for_status()
    deadline = started + timeout
    while True:
        status = (api.get(f"{base}/{name}").json().get("status") or {})
        if (status.get("readyReplicas") or 0) >= replicas:
            elapsed = time.monotonic() - started
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{kind} {name}: {status.get('readyReplicas') or 0}/{replicas} ready after {timeout}s")
        time.sleep(0.02)
    api.request("DELETE", f"{base}/{name}", json={"propagationPolicy": "Background"})
    wait_for(lambda: not api.get(f"/api/v1/namespaces/{NAMESPACE}/pods",
                                 params={"labelSelector": f"app={name}"}).json()["items"],
             timeout, 0.1, what=f"{name}'s pods gone")
    return elapsed


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.statefulset_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=10, help="pods per workload (default %(default)s)")
    p.add_argument("--reps", type=int, default=3, help="repetitions of each kind (default %(default)s)")
    p.add_argument("--quick", action="store_true", help="one repetition of 5 replicas")
    p.add_argument("--timeout", type=float, default=300, help="per roll-out limit in seconds (default %(default)s)")
    p.add_argument("--output", type=Path, default=OUTPUT / "statefulset.json")
    p.add_argument("--keep", action="store_true", help="keep the work directory (component logs)")
    args = p.parse_args(argv)
    if args.quick:
        args.replicas, args.reps = 5, 1
    if args.replicas < 1 or args.reps < 1:
        p.error("--replicas and --reps must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.time()
    cluster = LocalCluster("stsbench", 2)
    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    status = "completed"
    try:
        print(f"starting the cluster (work dir {cluster.workdir}) ...", file=sys.stderr, flush=True)
        cluster.start()
        with cluster.client(timeout=30) as api:
            api.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}}).raise_for_status()
            # one unmeasured Deployment first: images in the page cache, every component warmed up
            measure(api, "deployment", "warm", args.replicas, args.timeout)
            for rep in range(args.reps):
                for kind in KINDS:
                    elapsed = measure(api, kind, f"{kind}-{rep}", args.replicas, args.timeout)
                    samples[kind].append(round(elapsed, 3))
                    print(f"  {kind} of {args.replicas}: {elapsed:.2f} s", file=sys.stderr, flush=True)
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
    medians = {kind: round(statistics.median(v), 3) if v else None for kind, v in samples.items()}
    base = medians["deployment"]

    def ratio(value: float | None) -> float | None:
        return round(value / base, 2) if value is not None and base else None

    results = {
        "status": status, "duration_s": round(time.time() - started, 1), "replicas": args.replicas,
        "reps": args.reps, "nodes": {"kind": "real", "count": 2, "runtime": "docker"}, "cpus": os.cpu_count(),
        "samples_s": samples, "deployment_s": medians["deployment"], "parallel_s": medians["parallel"],
        "ordered_s": medians["ordered"], "parallel_ratio": ratio(medians["parallel"]),
        "ordered_ratio": ratio(medians["ordered"]),
        "ordered_per_pod_s": round(medians["ordered"] / args.replicas, 3) if medians["ordered"] is not None else None,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nStatefulSet benchmark ({status}; {args.replicas} replicas, {args.reps} reps, two real kubelets on "
          "Docker; medians, compare ratios, not absolutes)")
    for kind, label in (("deployment", "Deployment (baseline)"), ("parallel", "StatefulSet Parallel"),
                        ("ordered", "StatefulSet OrderedReady")):
        value = medians[kind]
        print(f"  {label:28} {'—' if value is None else f'{value:.2f} s':>8}   "
              f"{'' if kind == 'deployment' else f'x{ratio(value)}'}")
    return 0 if status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
