"""exec round trip: one byte through `kubectl exec -i POD -- cat` and back, on kubectl 1.27 (SPDY/3.1, bridged by
the apiserver to the kubelet's websocket: apiserver/endpoints/streamtranslator.py) against kubectl 1.33 (the
websocket, v5.channel.k8s.io, relayed frame for frame), in the same run.

    python -m bench.exec_bench [--round-trips 300] [--output FILE] [--keep]

A fresh etcd and apiserver (real processes), one real kubelet on the Docker shim, one busybox pod. For each
kubectl one long-lived `exec -i` of `cat`: a byte written to kubectl's stdin goes to the apiserver, the kubelet,
the container's cat and back the same way to kubectl's stdout; each round trip is timed from the write to the
read. The two kubectls take turns in rounds of 50 round trips, so both see the same machine. The figure is the
p50 and p99 of 1.27 ÷ 1.33. Not a test: it prints figures and checks only that every byte came back.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.cluster import REPO, ApiServer, Etcd, make_workdir, wait_for
from tests.kubectl import Kubectl, find_kubectl
from tests.node_process import BUSYBOX, KubeletProcess, cleanup, ensure_images, free_pod_cidrs

OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "bench-exec"
VERSIONS = {"spdy": "1.27", "websocket": "1.33"}
ROUND = 50


class Echo:
    """One `kubectl exec -i POD -- cat`: write a byte, time until it is read back."""

    def __init__(self, kubectl: Kubectl) -> None:
        self.proc = subprocess.Popen(kubectl.argv("exec", "-i", "echo", "--", "cat"), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=kubectl.env, bufsize=0)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.stdout, selectors.EVENT_READ)

    def round_trip(self, timeout: float = 30.0) -> float:
        started = time.perf_counter()
        self.stdin.write(b"x")
        if not self.selector.select(timeout):
            raise TimeoutError(f"no echo within {timeout}s")
        if self.stdout.read(1) != b"x":
            raise RuntimeError(f"kubectl exec ended: {self.proc.stderr.read() if self.proc.stderr else b''!r}")
        return time.perf_counter() - started

    def close(self) -> None:
        self.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.selector.close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(round_trips: int, keep: bool) -> dict[str, Any]:
    workdir = make_workdir("minik8s-exec-bench-")
    etcd = Etcd(workdir)
    apiserver: ApiServer | None = None
    kubelet: KubeletProcess | None = None
    samples: dict[str, list[float]] = {kind: [] for kind in VERSIONS}
    try:
        ensure_images()
        etcd.start()
        apiserver = ApiServer(workdir, etcd)
        apiserver.start()
        kubelet = KubeletProcess(workdir, apiserver, f"exec-bench-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
        with httpx.Client(base_url=apiserver.url, timeout=30) as api:
            kubelet.start(api)
            api.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}}).raise_for_status()
            api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json={
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "echo"},
                "spec": {"nodeName": kubelet.node, "terminationGracePeriodSeconds": 0, "containers": [
                    {"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}]}}).raise_for_status()
            wait_for(lambda: api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/echo").json().get("status", {})
                     .get("phase") == "Running", timeout=120, interval=0.2, what="the echo pod running")
        echoes: dict[str, Echo] = {}
        for kind, version in VERSIONS.items():
            binary = find_kubectl(version)
            if binary is None:
                raise SystemExit(f"kubectl {version} is not installed")
            echoes[kind] = Echo(Kubectl(binary, version, apiserver.url, workdir / f"kubectl-{version}", NAMESPACE))
            for _ in range(5):  # warm-up: the streams are open, caches are hot
                echoes[kind].round_trip()
        try:
            while min(len(s) for s in samples.values()) < round_trips:
                for kind, echo in echoes.items():
                    samples[kind] += [echo.round_trip() for _ in range(ROUND)]
                print(f"  {len(samples['spdy'])}/{round_trips} round trips each", flush=True)
        finally:
            for echo in echoes.values():
                echo.close()
    finally:
        if kubelet is not None:
            cleanup([kubelet])
        if apiserver is not None:
            apiserver.stop()
        etcd.stop()
        if keep:
            print(f"  kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    out: dict[str, Any] = {"round_trips": round_trips, "versions": VERSIONS}
    for kind, values in samples.items():
        ms = [v * 1000 for v in values[:round_trips]]
        out[kind] = {"p50_ms": round(statistics.median(ms), 2), "p99_ms": round(_percentile(ms, 0.99), 2)}
    for q in ("p50", "p99"):
        base = out["websocket"][f"{q}_ms"]
        out[f"{q}_ratio"] = round(out["spdy"][f"{q}_ms"] / base, 2) if base else None
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.exec_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--round-trips", type=int, default=300)
    p.add_argument("--quick", action="store_true", help="100 round trips each")
    p.add_argument("--output", type=Path, default=OUTPUT / "exec.json", help="JSON results (%(default)s)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, etcd data)")
    args = p.parse_args(argv)
    round_trips = 100 if args.quick and args.round_trips == 300 else args.round_trips
    started = time.time()
    print(f"exec: {round_trips} one-byte round trips each on kubectl {VERSIONS['spdy']} (SPDY) and "
          f"{VERSIONS['websocket']} (websocket) ...", flush=True)
    result = run(round_trips, args.keep)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"benchmark": "exec", "quick": args.quick, "cpus": os.cpu_count(),
                                       "duration_s": round(time.time() - started, 1), **result}, indent=2) + "\n")
    print(f"round trip p50: SPDY {result['spdy']['p50_ms']} ms, websocket {result['websocket']['p50_ms']} ms "
          f"({result['p50_ratio']}x); p99: SPDY {result['spdy']['p99_ms']} ms, websocket "
          f"{result['websocket']['p99_ms']} ms ({result['p99_ratio']}x)\nJSON: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
