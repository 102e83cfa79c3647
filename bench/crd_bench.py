"""What a custom resource costs beside a built-in one, and how soon a new CRD is served (issue 14).

    python -m bench.crd_bench [--quick] [--rounds N] [--keep]

One etcd, one apiserver (plain HTTP, the full admission chain as the tests run it). Each round runs the
same closed loop of 32 keep-alive clients creating, in turn, ConfigMaps, Pods and custom objects (a
Widget whose structural schema has types, a default, an enum and a CEL rule: the validation work a real
CRD asks for); rounds alternate the order to spread machine noise. Then N fresh CRDs are created one by
one, each timed from its POST until it is Established and until the first create of its custom object
succeeds (polled every 5 ms). Last, kubectl 1.33 `get widgets` with a cold discovery cache (a fresh
--cache-dir each run), against this apiserver (aggregated discovery: /api and /apis) and a second one on
the same etcd with --feature-gates AggregatedDiscoveryEndpoint=false (a request per group-version),
alternating. Medians; the ratios are custom-object creates/s ÷ ConfigMap creates/s and ÷ Pod creates/s,
and the cold-cache time with aggregated discovery ÷ without, same run. Writes _output/bench/crd.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
import uuid
from typing import Any

import httpx
import orjson

from bench.apiserver_bench import render_table
from tests.cluster import REPO, ApiServer, Etcd, make_workdir
from tests.kubectl import Kubectl, find_kubectl

OUTPUT = REPO / "_output" / "bench"
KINDS = ("configmaps", "pods", "widgets")
CLIENTS = 32


def widget_crd(group: str) -> dict[str, Any]:
    spec_schema = {
        "type": "object", "required": ["size"],
        "x-kubernetes-validations": [{"rule": "self.size <= self.maxSize", "message": "size may not exceed maxSize"}],
        "properties": {"size": {"type": "integer", "minimum": 1}, "maxSize": {"type": "integer", "default": 100},
                       "color": {"type": "string", "enum": ["red", "green", "blue"]},
                       "owner": {"type": "string", "maxLength": 63}},
    }
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                       "spec": spec_schema,
                                       "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}},
                                   "subresources": {"status": {}},
                                   "additionalPrinterColumns": [{"name": "Size", "type": "integer",
                                                                 "jsonPath": ".spec.size"}]}]}}


def body(kind: str, name: str, group: str) -> bytes:
    labels = {"app": "bench", "tier": "backend"}
    if kind == "configmaps":
        obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels},
                               "data": {"size": "3", "color": "red", "owner": "team-a"}}
    elif kind == "pods":
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
               "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}}
    else:
        obj = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name, "labels": labels},
               "spec": {"size": 3, "color": "red", "owner": "team-a"}}
    return orjson.dumps(obj)


async def closed_loop(url: str, path: str, kind: str, group: str, prefix: str, total: int) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    counter = iter(range(total))

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=30,
                                     headers={"Content-Type": "application/json"}) as c:
            for i in counter:
                start = time.perf_counter()
                r = await c.post(path, content=body(kind, f"{prefix}-{i}", group))
                latencies.append(time.perf_counter() - start)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {"rate": total / elapsed, "ok": statuses.get(201, 0), "statuses": statuses,
            "p50_ms": latencies[len(latencies) // 2] * 1000, "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000}


def time_to_served(api: httpx.Client, namespace: str) -> dict[str, float]:
    """One fresh CRD: seconds from its POST to Established, and to the first successful create of its object."""
    group = f"b{uuid.uuid4().hex[:8]}.example.com"
    start = time.perf_counter()
    r = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=widget_crd(group))
    assert r.status_code == 201, r.text
    established = None
    deadline = start + 30
    while time.perf_counter() < deadline:
        if established is None:
            got = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}").json()
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in (got.get("status") or {}).get("conditions") or []):
                established = time.perf_counter() - start
        if established is not None:
            r = api.post(f"/apis/{group}/v1/namespaces/{namespace}/widgets", content=body("widgets", "first", group),
                         headers={"Content-Type": "application/json"})
            if r.status_code == 201:
                return {"established_s": established, "served_s": time.perf_counter() - start}
        time.sleep(0.005)
    raise SystemExit(f"CRD widgets.{group} not served within 30 s")


def cold_discovery(servers: dict[str, ApiServer], workdir: Any, runs: int) -> dict[str, list[float]]:
    """Seconds of `kubectl.1.33 get widgets -A` with an empty discovery cache, per server, alternating."""
    binary = find_kubectl("1.33")
    if binary is None:
        return {}
    times: dict[str, list[float]] = {name: [] for name in servers}
    for i in range(runs):
        for name, server in servers.items():
            kubectl = Kubectl(binary, "1.33", server.url, workdir / f"kubectl-{name}-{i}")
            start = time.perf_counter()
            kubectl.run("get", "widgets", "-A").ok()
            times[name].append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.crd_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="500 creates per closed loop, 2 rounds, 5 CRDs")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3, quick 2)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 3)
    total = 500 if args.quick else 2000
    crds = 5 if args.quick else 15

    workdir = make_workdir("minik8s-crd-bench-")
    etcd = Etcd(workdir)
    etcd.start()
    server = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
    unaggregated = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0",
                             "--feature-gates", "AggregatedDiscoveryEndpoint=false")
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    served: list[dict[str, float]] = []
    discovery: dict[str, list[float]] = {}
    try:
        server.start()
        namespace = "bench-crd"
        group = "bench.example.com"
        with httpx.Client(base_url=server.url, timeout=30) as api:
            assert api.post("/api/v1/namespaces", json={"metadata": {"name": namespace}}).status_code == 201
            served.append(time_to_served(api, namespace))  # warm-up (CEL library, first watch cache)
            served.clear()
            for i in range(crds):
                served.append(time_to_served(api, namespace))
                print(f"[{time.strftime('%H:%M:%S')}] CRD {i + 1}/{crds}: {served[-1]}", file=sys.stderr)
            api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=widget_crd(group))
            deadline = time.monotonic() + 30
            while api.get(f"/apis/{group}/v1/widgets").status_code != 200:
                if time.monotonic() > deadline:
                    raise SystemExit("the bench CRD was not served")
                time.sleep(0.05)
        paths = {"configmaps": f"/api/v1/namespaces/{namespace}/configmaps",
                 "pods": f"/api/v1/namespaces/{namespace}/pods",
                 "widgets": f"/apis/{group}/v1/namespaces/{namespace}/widgets"}
        for r_i in range(rounds):
            order = KINDS if r_i % 2 == 0 else tuple(reversed(KINDS))
            for kind in order:
                print(f"[{time.strftime('%H:%M:%S')}] round {r_i + 1}/{rounds}, {kind} …", file=sys.stderr)
                asyncio.run(closed_loop(server.url, paths[kind], kind, group, f"w{r_i}", 100))
                result = asyncio.run(closed_loop(server.url, paths[kind], kind, group, f"c{r_i}", total))
                if result["ok"] != total:
                    raise SystemExit(f"{kind}: {total - result['ok']} of {total} creates failed: {result['statuses']}")
                results[kind].append(result)
        unaggregated.start()
        print(f"[{time.strftime('%H:%M:%S')}] kubectl cold-cache discovery …", file=sys.stderr)
        discovery = cold_discovery({"aggregated": server, "unaggregated": unaggregated}, workdir,
                                   5 if args.quick else 15)
    finally:
        unaggregated.stop()
        server.stop()
        etcd.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    summary = {kind: {k: statistics.median(r[k] for r in results[kind]) for k in ("rate", "p50_ms", "p99_ms")}
               for kind in KINDS}
    cr_vs_configmap = round(summary["widgets"]["rate"] / summary["configmaps"]["rate"], 3)
    cr_vs_pod = round(summary["widgets"]["rate"] / summary["pods"]["rate"], 3)
    established_p50 = statistics.median(s["established_s"] for s in served) * 1000
    served_p50 = statistics.median(s["served_s"] for s in served) * 1000
    served_max = max(s["served_s"] for s in served) * 1000
    print()
    print(f"creates, {CLIENTS} clients ({'quick' if args.quick else 'full'}, {rounds} rounds, medians)")
    print()
    print(render_table(("figure", *KINDS), [
        ("creates/s", *(f"{summary[k]['rate']:,.0f}" for k in KINDS)),
        ("create p50 ms", *(f"{summary[k]['p50_ms']:.1f}" for k in KINDS)),
        ("create p99 ms", *(f"{summary[k]['p99_ms']:.1f}" for k in KINDS))]))
    print(f"custom-object creates/s ÷ ConfigMap creates/s: {cr_vs_configmap}")
    print(f"custom-object creates/s ÷ Pod creates/s: {cr_vs_pod}")
    discovery_p50 = {name: statistics.median(t) * 1000 for name, t in discovery.items() if t}
    discovery_ratio = (round(discovery_p50["aggregated"] / discovery_p50["unaggregated"], 3)
                       if len(discovery_p50) == 2 else None)
    if discovery_ratio is not None:
        print(f"kubectl 1.33 get, cold discovery cache: aggregated {discovery_p50['aggregated']:.0f} ms, without "
              f"{discovery_p50['unaggregated']:.0f} ms (p50): ratio {discovery_ratio}")
    print(f"CRD create → Established p50 {established_p50:.0f} ms; → first custom object created p50 "
          f"{served_p50:.0f} ms (max {served_max:.0f} ms, {len(served)} CRDs)")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    out = OUTPUT / "crd.json"
    out.write_text(json.dumps({"benchmark": "crd", "quick": args.quick, "rounds": results, "summary": summary,
                               "cr_vs_configmap": cr_vs_configmap, "cr_vs_pod": cr_vs_pod, "served": served,
                               "established_p50_ms": established_p50, "served_p50_ms": served_p50,
                               "served_max_ms": served_max, "discovery_ms": discovery_p50,
                               "discovery_ratio": discovery_ratio}, indent=2))
    print(f"JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
