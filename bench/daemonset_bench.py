"""DaemonSet roll-out across hollow nodes: the real controller-manager (daemonset controller) and
scheduler on a fresh etcd and apiserver.

    python -m bench.daemonset_bench [--nodes 100] [--max-unavailable 10%] [--output FILE] [--keep]

NODES Node objects are registered (as bench.scheduler_bench's hollow nodes: allocatable and a Ready
condition; no kubelet process). This process stands in for their kubelets at the API and nowhere else:
it marks each pod bound to a node Running and Ready through pods/status, and confirms each graceful
delete (DELETE with gracePeriodSeconds 0), as a kubelet does once its containers stopped. So the figures
are the control plane's: controller creates and deletes, scheduler bindings, status writes; no container
runs. Measured:

1. create → every node runs an available pod (status.numberAvailable == NODES): the roll-out;
2. a template change → every node runs an updated, available pod, with RollingUpdate maxUnavailable
   (default 10%): the rolling update;
3. the controller-manager's peak RSS (VmHWM).

Not a test: it prints figures and checks only that both phases finished.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.scheduler_bench import create_all, hollow_node, peak_rss_mb
from tests.cluster import REPO, ApiServer, Etcd, Process, make_workdir

OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "bench-ds"
JSON = {"Content-Type": "application/json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def daemon_set(max_unavailable: str, version: str) -> dict[str, Any]:
    labels = {"app": "bench-ds"}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "bench-ds"},
            "spec": {"selector": {"matchLabels": labels},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable}},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "agent", "image": "busybox", "env": [{"name": "VERSION", "value": version}],
                          "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


def ready_status(now: str) -> dict[str, Any]:
    return {"status": {"phase": "Running", "startTime": now, "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": now},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}]}}


async def stand_in_kubelets(client: httpx.AsyncClient, stop: asyncio.Event) -> None:
    """What the hollow nodes' kubelets would write: Ready for bound pods, the final delete of terminating ones."""
    handled: set[tuple[str, str]] = set()
    pending: set[asyncio.Task[Any]] = set()

    async def act(pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        path = f"/api/v1/namespaces/{NAMESPACE}/pods/{meta['name']}"
        if meta.get("deletionTimestamp"):
            await client.delete(path, params={"gracePeriodSeconds": "0"})
        elif spec.get("nodeName") and (pod.get("status") or {}).get("phase") != "Running":
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            await client.patch(f"{path}/status", content=orjson.dumps(ready_status(now)), headers=MERGE)

    listed = (await client.get(f"/api/v1/namespaces/{NAMESPACE}/pods")).json()
    params = {"watch": "true", "resourceVersion": listed["metadata"]["resourceVersion"]}
    async with client.stream("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params=params,
                             timeout=httpx.Timeout(10, read=None)) as response:
        async for line in response.aiter_lines():
            if stop.is_set():
                break
            if not line.strip():
                continue
            event = orjson.loads(line)
            pod = event.get("object") or {}
            if event.get("type") == "DELETED" or "metadata" not in pod:
                continue
            meta = pod["metadata"]
            step = ("delete" if meta.get("deletionTimestamp")
                    else "ready" if (pod.get("spec") or {}).get("nodeName") else "")
            if not step or (meta["uid"], step) in handled:
                continue
            handled.add((meta["uid"], step))
            task = asyncio.create_task(act(pod))
            pending.add(task)
            task.add_done_callback(pending.discard)
    for task in pending:
        task.cancel()


async def wait_status(client: httpx.AsyncClient, done: Any, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        ds = (await client.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/bench-ds")).json()
        status = ds.get("status") or {}
        if (ds["metadata"].get("generation") == status.get("observedGeneration")) and done(status):
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise TimeoutError(f"DaemonSet status after {timeout}s: {ds.get('status')}")


async def run(nodes: int, max_unavailable: str, timeout: float, keep: bool) -> dict[str, Any]:
    workdir = make_workdir("minik8s-ds-bench-")
    etcd = Etcd(workdir)
    apiserver: ApiServer | None = None
    components: list[Process] = []
    try:
        etcd.start()
        apiserver = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
        apiserver.start()
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=apiserver.url, timeout=30, limits=limits) as client:
            (await client.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})).raise_for_status()
            await create_all(client, "/api/v1/nodes", [hollow_node(i) for i in range(nodes)])
            env = {"KUBECONFIG": str(workdir / "no-kubeconfig")}
            scheduler = Process("scheduler", [sys.executable, "-m", "scheduler", "--master", apiserver.url,
                                              "--leader-elect=false", "--secure-port=0"], workdir / "scheduler.log",
                                env=env)
            manager = Process("controller-manager", [sys.executable, "-m", "controllers", "--master", apiserver.url,
                                                     "--controllers", "daemonset", "--leader-elect=false",
                                                     "--secure-port=0"],
                              workdir / "controller-manager.log", env=env)
            components = [scheduler, manager]
            for component in components:
                component.start()
            stop = asyncio.Event()
            kubelets = asyncio.create_task(stand_in_kubelets(client, stop))
            await asyncio.sleep(0.5)  # the stand-in's watch is open before the first pod exists

            r = await client.post(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets",
                                  content=orjson.dumps(daemon_set(max_unavailable, "1")), headers=JSON)
            r.raise_for_status()
            rollout_s = await wait_status(client, lambda s: s.get("numberAvailable") == nodes
                                          and s.get("desiredNumberScheduled") == nodes, timeout)
            print(f"  roll-out: {nodes} pods available on {nodes} nodes in {rollout_s:.2f} s", flush=True)
            patch = {"spec": {"template": {"spec": {"containers": [
                {"name": "agent", "image": "busybox", "env": [{"name": "VERSION", "value": "2"}],
                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}
            r = await client.patch(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/bench-ds",
                                   content=orjson.dumps(patch), headers=MERGE)
            r.raise_for_status()
            update_s = await wait_status(client, lambda s: s.get("updatedNumberScheduled") == nodes
                                         and s.get("numberAvailable") == nodes, timeout)
            print(f"  rolling update (maxUnavailable {max_unavailable}): {update_s:.2f} s", flush=True)
            assert manager.proc is not None
            rss = peak_rss_mb(manager.proc.pid)
            stop.set()
            kubelets.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await kubelets
        return {"nodes": nodes, "max_unavailable": max_unavailable, "rollout_s": round(rollout_s, 3),
                "rolling_update_s": round(update_s, 3), "controller_manager_rss_mb": round(rss, 1)}
    finally:
        for component in components:
            component.stop()
        if apiserver is not None:
            apiserver.stop()
        etcd.stop()
        if keep:
            print(f"  kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.daemonset_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--max-unavailable", default="10%")
    p.add_argument("--quick", action="store_true", help="20 nodes")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--output", type=Path, default=OUTPUT / "daemonset.json", help="JSON results (%(default)s)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, etcd data)")
    args = p.parse_args(argv)
    nodes = 20 if args.quick and args.nodes == 100 else args.nodes
    started = time.time()
    print(f"DaemonSet across {nodes} hollow nodes ...", flush=True)
    result = asyncio.run(run(nodes, args.max_unavailable, args.timeout, args.keep))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"benchmark": "daemonset", "quick": args.quick, "cpus": os.cpu_count(),
                                       "duration_s": round(time.time() - started, 1), **result}, indent=2) + "\n")
    print(f"controller-manager peak RSS {result['controller_manager_rss_mb']} MB\nJSON: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
