"""Road latency (issue 15): a step happens (its span ends in a component) → it appears in `mkubectl road --follow`.

    python -m bench.road_bench [--quick] [--samples 100]

One etcd, one secure apiserver (`--road-server-url`) and `python -m road` as local-up runs them. A Pod object
is created; `mkubectl road pod/NAME --follow` runs as a user does, and beside it the baseline: a watch of the same
road straight on the road server (its front-proxy port, no apiserver and no mkubectl in between). Each sample
is one `kubelet.probe` span ended by an OpenTelemetry SDK tracer as a kubelet ends it (BatchSpanProcessor with
the contract's 200 ms schedule delay, OTLP/gRPC to the road server); its latency is from the span's end to the
line naming it on mkubectl's stdout (read by a thread that stamps each line as it comes), and to its event on
the direct watch. Samples are 100 to 300 ms apart (random), so they fall anywhere in the exporter's schedule.
p50 and p99 of both, and their ratio. Writes _output/bench/road.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from typing import Any

import httpx

from tests.auth_cluster import SecureApiServer
from tests.cluster import REPO, Etcd, make_workdir, wait_for
from tests.road_process import ROAD, RoadServer, Tracers, object_attrs, road_args

OUTPUT = REPO / "_output" / "bench"
NS = "default"


def quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Seen:
    """When each marker first showed up on a stream (time.time())."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)

    def saw(self, text: str, markers: list[str]) -> None:
        now = time.time()
        with self.cond:
            for marker in markers:
                if marker in text and marker not in self.at:
                    self.at[marker] = now
            self.cond.notify_all()

    def wait(self, marker: str, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while marker not in self.at:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)
            return self.at[marker]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.road_bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="20 samples")
    p.add_argument("--samples", type=int, default=100)
    p.add_argument("--keep", action="store_true", help="leave the work directory")
    args = p.parse_args(argv)
    samples = 20 if args.quick else args.samples
    markers = [f"probe c{i}:" for i in range(samples)]
    workdir = make_workdir("minik8s-road-bench-")
    etcd = Etcd(workdir / "etcd")
    (workdir / "etcd").mkdir()
    secure = SecureApiServer(workdir, etcd, nodes=("node-a",))
    road = RoadServer(secure.pki, workdir)
    secure.process.argv += road_args(secure.pki, road.port)
    tracers = Tracers(road.otlp_port)
    follow: subprocess.Popen[str] | None = None
    stop = threading.Event()
    try:
        etcd.start()
        secure.start()
        road.start()
        with secure.client("admin") as admin:
            r = admin.post(f"/api/v1/namespaces/{NS}/pods", json={
                "metadata": {"name": "bench"}, "spec": {"containers": [{"name": "c", "image": "minik8s/httpd:1"}]}})
            assert r.status_code == 201, r.text
            pod = r.json()
        kubelet = tracers.tracer("kubelet", "node-a")
        with kubelet.start_as_current_span("kubelet.sync_pod", attributes={**object_attrs(pod),
                                                                           "k8s.sync.update_type": "create"}):
            pass
        tracers.flush()
        via_mkubectl, direct = Seen(), Seen()
        follow = subprocess.Popen(
            [sys.executable, "-m", "kubectl", "--kubeconfig", str(secure.kubeconfig("admin")), "road", "pod/bench",
             "--follow"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)}, bufsize=1)

        def read_follow() -> None:
            assert follow is not None and follow.stdout is not None
            for line in follow.stdout:
                via_mkubectl.saw(line, ["sync pod", *markers])

        def read_direct() -> None:
            ctx = secure.ssl_context(cert=secure.pki.cert("front-proxy-client"),
                                     key=secure.pki.key("front-proxy-client"))
            with httpx.Client(verify=ctx, timeout=httpx.Timeout(10, read=None)) as client, \
                    client.stream("GET", f"{road.url}{ROAD}/namespaces/{NS}/pods",
                                  params={"watch": "true", "fieldSelector": "metadata.name=bench"},
                                  headers={"X-Remote-User": "bench"}) as stream:
                try:
                    for line in stream.iter_lines():
                        if stop.is_set():
                            return
                        direct.saw(json.loads(line).get("object", {}).get("step", ""), ["sync pod", *markers])
                except httpx.HTTPError:
                    return  # the road server stopped at the end

        threads = [threading.Thread(target=read_follow, daemon=True), threading.Thread(target=read_direct,
                                                                                       daemon=True)]
        for t in threads:
            t.start()
        wait_for(lambda: via_mkubectl.wait("sync pod", 0.1) and direct.wait("sync pod", 0.1), 60, 0.1,
                 what="the road on both streams")
        ended: dict[str, float] = {}
        for i, marker in enumerate(markers):
            time.sleep(random.uniform(0.1, 0.3))  # pacing between samples, not synchronisation
            with kubelet.start_as_current_span("kubelet.probe", attributes={
                    **object_attrs(pod), "k8s.probe.type": "readiness", "k8s.probe.result": "success",
                    "k8s.container.name": f"c{i}"}):
                pass
            ended[marker] = time.time()
        lat_m = [t - ended[m] for m in markers if (t := via_mkubectl.wait(m, 10)) is not None]
        lat_d = [t - ended[m] for m in markers if (t := direct.wait(m, 10)) is not None]
        result: dict[str, Any] = {
            "samples": samples, "seen_mkubectl": len(lat_m), "seen_direct": len(lat_d),
            "mkubectl": {"p50_s": quantile(lat_m, 0.5), "p99_s": quantile(lat_m, 0.99),
                         "max_s": max(lat_m, default=None)},
            "direct": {"p50_s": quantile(lat_d, 0.5), "p99_s": quantile(lat_d, 0.99),
                       "max_s": max(lat_d, default=None)},
            "schedule_delay_s": 0.2,
        }
        p99_m, p99_d = result["mkubectl"]["p99_s"], result["direct"]["p99_s"]
        result["p99_ratio"] = round(p99_m / p99_d, 3) if p99_m and p99_d else None
        OUTPUT.mkdir(parents=True, exist_ok=True)
        (OUTPUT / "road.json").write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))
        return 0
    finally:
        stop.set()
        if follow is not None:
            follow.kill()
            follow.wait(10)
        tracers.shutdown()
        road.stop()
        secure.stop()
        etcd.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
