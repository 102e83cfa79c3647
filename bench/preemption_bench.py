"""Preemption latency: a high-priority pod created for a node full with a low-priority one, create → bound,
against the same pod's create → bound on the node once it is free, in the same run.

    python -m bench.preemption_bench [--reps 10] [--output FILE] [--keep]

A fresh etcd, apiserver and scheduler (real processes); one hollow Node object (allocatable, a Ready
condition, no kubelet: bench.scheduler_bench's). Each repetition:

1. baseline: the high-priority pod (3 of the node's 4 CPUs) on the empty node, create → spec.nodeName set;
   then deleted;
2. preemption: a low-priority pod of 3 CPUs is bound first; the same high-priority pod is created, the
   scheduler finds no room, preempts (DisruptionTarget condition, graceful delete: the victim's
   terminationGracePeriodSeconds is 0, as a kubelet would confirm at once) and binds the pod once the victim
   is gone. The preemptor waits out the scheduling queue's back-off (1 s initial, as upstream's
   podInitialBackoffSeconds) before its second attempt: that is most of the figure, as upstream.

Times are taken from a watch on the namespace's pods (the MODIFIED event that carries spec.nodeName).
Not a test: it prints figures and checks only that every pod was bound.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.scheduler_bench import hollow_node
from tests.cluster import REPO, ApiServer, Etcd, Process, make_workdir

OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "bench-preemption"
JSON = {"Content-Type": "application/json"}


def pod(name: str, priority_class: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "priorityClassName": priority_class,
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "3", "memory": "64Mi"}}}]}}


class BoundWatch:
    """When each pod of the namespace got its spec.nodeName, from one watch."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.bound: dict[str, float] = {}
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        listed = (await self.client.get(f"/api/v1/namespaces/{NAMESPACE}/pods")).json()
        self.task = asyncio.create_task(self._run(listed["metadata"]["resourceVersion"]))

    async def _run(self, rv: str) -> None:
        params = {"watch": "true", "resourceVersion": rv}
        async with self.client.stream("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params=params,
                                      timeout=httpx.Timeout(10, read=None)) as response:
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                event = orjson.loads(line)
                obj = event.get("object") or {}
                uid = (obj.get("metadata") or {}).get("uid")
                if uid and (obj.get("spec") or {}).get("nodeName") and uid not in self.bound:
                    self.bound[uid] = time.monotonic()
                    self.changed.set()

    async def wait(self, uid: str, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while uid not in self.bound:
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"pod {uid} not bound after {timeout}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)
        return self.bound[uid]

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()


async def create(client: httpx.AsyncClient, body: dict[str, Any]) -> tuple[str, float]:
    started = time.monotonic()
    r = await client.post(f"/api/v1/namespaces/{NAMESPACE}/pods", content=orjson.dumps(body), headers=JSON)
    r.raise_for_status()
    return r.json()["metadata"]["uid"], started


async def gone(client: httpx.AsyncClient, name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (await client.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")).status_code != 404:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pod {name} still there after {timeout}s")
        await asyncio.sleep(0.02)


async def run(reps: int, timeout: float, keep: bool) -> dict[str, Any]:
    workdir = make_workdir("minik8s-preemption-bench-")
    etcd = Etcd(workdir)
    apiserver: ApiServer | None = None
    scheduler: Process | None = None
    baseline: list[float] = []
    preemption: list[float] = []
    try:
        etcd.start()
        apiserver = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
        apiserver.start()
        async with httpx.AsyncClient(base_url=apiserver.url, timeout=30) as client:
            (await client.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})).raise_for_status()
            node = hollow_node(0)
            node["status"]["allocatable"] = node["status"]["capacity"] = {"cpu": "4", "memory": "8Gi", "pods": "110"}
            (await client.post("/api/v1/nodes", json=node)).raise_for_status()
            name = node["metadata"]["name"]
            for cls, value in (("bench-low", 10), ("bench-high", 1000)):
                (await client.post("/apis/scheduling.k8s.io/v1/priorityclasses",
                                   json={"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                         "metadata": {"name": cls}, "value": value})).raise_for_status()
            scheduler = Process("scheduler", [sys.executable, "-m", "scheduler", "--master", apiserver.url,
                                              "--leader-elect=false", "--secure-port=0"], workdir / "scheduler.log",
                                env={"KUBECONFIG": str(workdir / "no-kubeconfig")})
            scheduler.start()
            watch = BoundWatch(client)
            await watch.start()
            await asyncio.sleep(0.5)  # the watch is open before the first pod exists
            for i in range(reps):
                uid, started = await create(client, pod(f"free-{i}", "bench-high", name))
                baseline.append((await watch.wait(uid, timeout)) - started)
                await client.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/free-{i}", params={"gracePeriodSeconds": "0"})
                await gone(client, f"free-{i}", timeout)

                victim, _ = await create(client, pod(f"victim-{i}", "bench-low", name))
                await watch.wait(victim, timeout)
                uid, started = await create(client, pod(f"preemptor-{i}", "bench-high", name))
                preemption.append((await watch.wait(uid, timeout)) - started)
                await gone(client, f"victim-{i}", timeout)
                await client.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/preemptor-{i}",
                                    params={"gracePeriodSeconds": "0"})
                await gone(client, f"preemptor-{i}", timeout)
                print(f"  rep {i + 1}/{reps}: free node {baseline[-1] * 1000:.1f} ms, "
                      f"preemption {preemption[-1] * 1000:.1f} ms", flush=True)
            watch.stop()
        base_p50 = statistics.median(baseline) * 1000
        pre_p50 = statistics.median(preemption) * 1000
        return {"reps": reps, "baseline_p50_ms": round(base_p50, 1), "preemption_p50_ms": round(pre_p50, 1),
                "baseline_ms": [round(x * 1000, 1) for x in baseline],
                "preemption_ms": [round(x * 1000, 1) for x in preemption],
                "ratio": round(pre_p50 / base_p50, 2) if base_p50 else None}
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.preemption_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="3 repetitions")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--output", type=Path, default=OUTPUT / "preemption.json", help="JSON results (%(default)s)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, etcd data)")
    args = p.parse_args(argv)
    reps = 3 if args.quick and args.reps == 10 else args.reps
    started = time.time()
    print(f"preemption: {reps} repetitions on one hollow node ...", flush=True)
    result = asyncio.run(run(reps, args.timeout, args.keep))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"benchmark": "preemption", "quick": args.quick, "cpus": os.cpu_count(),
                                       "duration_s": round(time.time() - started, 1), **result}, indent=2) + "\n")
    print(f"create → bound p50: free node {result['baseline_p50_ms']} ms, by preemption "
          f"{result['preemption_p50_ms']} ms ({result['ratio']}x)\nJSON: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
