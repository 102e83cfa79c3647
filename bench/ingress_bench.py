"""The ingress controller: requests/s through the Ingress ÷ the same requests straight to the pod, and how long an
endpoint change takes to route (issue 18).

    python -m bench.ingress_bench [--quick] [--seconds 5] [--pairs 3] [--concurrency 8] [--changes 10]

One etcd, one apiserver and `python -m ingress_nginx` (the host's nginx, access log off, free loopback ports);
one real backend (a minik8s/httpd:1 container on a Docker network of the bench's own) behind a selector-less
Service whose EndpointSlice names it, and an Ingress routing a host to it.

- throughput: --concurrency aiohttp clients GET / for --seconds through the Ingress (Host header) and then
  straight to the backend's IP (the baseline: the same client, the same requests), back to back in --pairs
  pairs; the median of the pairs' ratios, with p50/p99 latency of each side. One connection per request on both
  sides, as busybox httpd closes each (keep-alive to nginx alone would flatter the Ingress: the client's own
  connection set-up is most of the baseline's cost);
- endpoint change → routed: a second backend is added to the EndpointSlice at t0 (then removed again, each a
  sample); the latency is t0 → the first answer from it through the Ingress (polled every 5 ms): the watch, the
  render, `nginx -t` and the graceful reload. p50/p99 of --changes samples.
Writes _output/bench/ingress.json. Everything it made goes at the end (controller, nginx, containers, network).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from tests.cluster import ApiServer, Etcd, make_workdir, wait_for
from tests.ingress_process import Backends, IngressController, endpoint_slice, get

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "ingress-bench"
CLASS = "nginx-bench"
HOST = "bench.example.com"
NETWORKING = "/apis/networking.k8s.io/v1"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def _load(url: str, host: str, seconds: float, concurrency: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=True)  # busybox httpd closes each connection
    async with aiohttp.ClientSession(connector=connector, headers={"Host": host}) as session:
        async def worker() -> None:
            nonlocal errors
            while time.monotonic() < deadline:
                start = time.monotonic()
                try:
                    async with session.get(url) as r:
                        await r.read()
                        if r.status != 200:
                            errors += 1
                            continue
                except aiohttp.ClientError:
                    errors += 1
                    continue
                latencies.append(time.monotonic() - start)

        began = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.monotonic() - began
    return {"rps": len(latencies) / elapsed, "requests": len(latencies), "errors": errors,
            "p50_ms": percentile(latencies, 50) * 1000 if latencies else None,
            "p99_ms": percentile(latencies, 99) * 1000 if latencies else None}


class Bench:
    def __init__(self, seconds: float, pairs: int, concurrency: int, changes: int) -> None:
        self.seconds, self.pairs, self.concurrency, self.changes = seconds, pairs, concurrency, changes
        self.workdir = make_workdir("minik8s-ingress-bench-")
        self.etcd = Etcd(self.workdir)
        self.apiserver: ApiServer | None = None
        self.backends: Backends | None = None
        self.controller: IngressController | None = None
        self.results: dict[str, Any] = {"setup": {"seconds": seconds, "pairs": pairs, "concurrency": concurrency}}

    def start(self) -> None:
        self.etcd.start()
        self.apiserver = ApiServer(self.workdir, self.etcd, "--etcd-compaction-interval", "0")
        self.apiserver.start()
        self.api = httpx.Client(base_url=self.apiserver.url, timeout=30)
        for path, body in (
                ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
                (f"{NETWORKING}/ingressclasses", {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                                                  "metadata": {"name": CLASS},
                                                  "spec": {"controller": "k8s.io/ingress-nginx"}})):
            r = self.api.post(path, json=body)
            assert r.status_code == 201, r.text
        self.backends = Backends(f"ingressbench-{uuid.uuid4().hex[:6]}")
        self.web = self.backends.add("web")
        self.spare = self.backends.add("spare")
        r = self.api.post(f"/api/v1/namespaces/{NAMESPACE}/services", json={
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 80}]}})
        assert r.status_code == 201, r.text
        r = self.api.post(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices",
                          json=endpoint_slice(NAMESPACE, "web", [self.web]))
        assert r.status_code == 201, r.text
        self.controller = IngressController(self.apiserver.url, CLASS, NAMESPACE, "--no-access-log",
                                            "--sync-period-min", "0s")
        self.controller.start()
        r = self.api.post(f"{NETWORKING}/namespaces/{NAMESPACE}/ingresses", json={
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
            "spec": {"ingressClassName": CLASS, "rules": [{"host": HOST, "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}})
        assert r.status_code == 201, r.text
        wait_for(lambda: get("127.0.0.1", self.controller.http, HOST, "/") == (200, "web"), 30,  # type: ignore[union-attr]
                 what="the Ingress routing")
        self.controller.settled()

    def throughput(self) -> dict[str, Any]:
        assert self.controller is not None
        via_url, direct_url = f"http://127.0.0.1:{self.controller.http}/", f"http://{self.web}/"
        asyncio.run(_load(via_url, HOST, 1.0, self.concurrency))  # warm both up
        asyncio.run(_load(direct_url, HOST, 1.0, self.concurrency))
        pairs = []
        for _ in range(self.pairs):
            via = asyncio.run(_load(via_url, HOST, self.seconds, self.concurrency))
            direct = asyncio.run(_load(direct_url, HOST, self.seconds, self.concurrency))
            pairs.append({"ingress": via, "direct": direct, "ratio": via["rps"] / direct["rps"]})
            print(f"  ingress {via['rps']:.0f}/s (p99 {via['p99_ms']:.1f} ms), direct {direct['rps']:.0f}/s "
                  f"(p99 {direct['p99_ms']:.1f} ms): ratio {pairs[-1]['ratio']:.2f}", flush=True)
        return {"pairs": pairs, "ratio": statistics.median(p["ratio"] for p in pairs),
                "ingress_rps": statistics.median(p["ingress"]["rps"] for p in pairs),
                "direct_rps": statistics.median(p["direct"]["rps"] for p in pairs),
                "ingress_p99_ms": statistics.median(p["ingress"]["p99_ms"] for p in pairs),
                "direct_p99_ms": statistics.median(p["direct"]["p99_ms"] for p in pairs),
                "errors": sum(p["ingress"]["errors"] + p["direct"]["errors"] for p in pairs)}

    def endpoint_changes(self) -> dict[str, Any]:
        assert self.controller is not None
        path = f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices/web-1"
        latencies = []
        for i in range(self.changes):
            adding = i % 2 == 0
            ips = [self.web, self.spare] if adding else [self.web]
            eps = self.api.get(path).json()
            eps["endpoints"] = [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips]
            t0 = time.monotonic()
            assert self.api.put(path, json=eps).status_code == 200
            deadline = t0 + 30
            if adding:
                while get("127.0.0.1", self.controller.http, HOST, "/", timeout=2) != (200, "spare"):
                    assert time.monotonic() < deadline, "the new endpoint never answered"
                    time.sleep(0.005)
                latencies.append(time.monotonic() - t0)
            else:
                wait_for(lambda: f"server {self.spare}:80" not in self.controller.conf(), 30,  # type: ignore[union-attr]
                         interval=0.005, what="the endpoint removed")
            self.controller.settled()
        return {"p50_s": percentile(latencies, 50), "p99_s": percentile(latencies, 99), "samples": len(latencies)}

    def run(self) -> None:
        self.results["throughput"] = t = self.throughput()
        print(f"throughput: ingress {t['ingress_rps']:.0f}/s, direct {t['direct_rps']:.0f}/s, ratio {t['ratio']:.2f}",
              flush=True)
        self.results["endpoint_change"] = e = self.endpoint_changes()
        print(f"endpoint change → routed: p50 {e['p50_s'] * 1000:.0f} ms, p99 {e['p99_s'] * 1000:.0f} ms "
              f"({e['samples']} samples)", flush=True)
        assert self.controller is not None
        self.results["reloads"] = self.controller.metric("nginx_ingress_controller_success")

    def close(self) -> None:
        if self.controller is not None:
            self.controller.stop()
        if self.backends is not None:
            self.backends.remove()
        if self.apiserver is not None:
            self.apiserver.stop()
        self.etcd.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.ingress_bench", description=__doc__.splitlines()[0] if __doc__ else "")
    p.add_argument("--quick", action="store_true", help="2 s, 2 pairs, 4 changes")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=8, help="clients (busybox httpd's listen backlog is small)")
    p.add_argument("--changes", type=int, default=10)
    p.add_argument("--output", type=Path, default=OUTPUT / "ingress.json")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds, args.pairs, args.changes = 2.0, 2, 4
    bench = Bench(args.seconds, args.pairs, args.concurrency, args.changes)
    try:
        bench.start()
        bench.run()
    finally:
        bench.close()
    bench.results["run_id"] = uuid.uuid4().hex[:8]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(bench.results, indent=2))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
