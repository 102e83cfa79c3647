"""What OpenTelemetry tracing costs (issue 15: ≤ 5%), on ÷ off in one run, with every span sampled
(samplingRatePerMillion 1000000, the worst case and what local-up runs) and exported to a real OTLP/gRPC
collector in this process (tests/otlp_collector.py; it keeps each export as grpc decoded it and makes its spans only
when asked, after the closed loops: making them as they came took the load generator ~60 µs of Python per span, so
the traced rounds were slowed by the bench's own collector):

    python -m bench.tracing_bench [--quick] [--rounds N] [--pods N] [--phase all|creates|pods] [--keep]

1. apiserver creates/s: the same secure apiserver chain (TLS, x509 authn, RBAC, admission, audit at Metadata)
   without --tracing-config-file and with it, one etcd, alternating closed-loop rounds of 64 keep-alive clients
   creating a small ConfigMap (bench/closed_loop_summary.py, as bench.metrics_bench). Each create is a root span
   with its authn, authz, admission and etcd steps as events on it. Honest only if the collector received a span per
   create.
2. pod start-up: two small clusters at once (each its own etcd, apiserver, scheduler, one kubelet with its Docker
   shim; bare pods need no controller), one without tracing and one with it on every component; per round, on
   each in turn, N pods (one minik8s/httpd:1 container) POSTed at once, each timed from its POST until a watch
   sees it Running; then deleted. Medians over every pod of every round; honest only if the traced cluster's
   kubelet sent a kubelet.sync_pod span per pod.

Writes _output/bench/tracing.json (create_ratio: creates/s on ÷ off; startup_ratio: p50 start-up on ÷ off).
"""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.apiserver_bench import render_table
from bench.closed_loop_summary import busy_caution, medians_and_rows, round_args, run_rounds, stop_all
from tests.auth_cluster import SecureApiServer
from tests.cluster import REPO, ApiServer, Etcd, make_workdir, wait_for
from tests.node_process import HTTPD, DockershimProcess, KubeletProcess, cleanup, ensure_images, free_pod_cidrs
from tests.otlp_collector import Collector, config_file
from tests.scheduler_process import SchedulerProcess

OUTPUT = REPO / "_output" / "bench"
MODES = ("off", "on")
# the creates' set-ups: no flag; the flag with upstream's default sampling (none but what a caller sampled); all
CREATE_MODES = (("off", None), ("on-default", 0), ("on-all", 1_000_000))
NAMESPACE = "bench-tracing"


def configmap_body(name: str, namespace: str) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                         "data": {"settings": "x" * 200}})


def creates_phase(args: Any, rounds: int, total: int, collector: Collector, workdir: Path) -> dict[str, Any]:
    etcd = Etcd(workdir)
    etcd.start()
    common = ("--port", "0", "--etcd-compaction-interval", "0")
    servers = {"off": SecureApiServer(workdir, etcd, *common)}
    for mode, per_million in CREATE_MODES[1:]:
        servers[mode] = SecureApiServer(workdir, etcd, *common, "--tracing-config-file",
                                        config_file(workdir / f"tracing-{mode}.yaml", collector.endpoint, per_million))
    try:
        results = run_rounds(servers, etcd, namespace_prefix=NAMESPACE, rounds=rounds, total=total,
                             clients=args.clients, body=configmap_body, resource="configmaps")
        expected = rounds * (total + 200)  # the warm-ups count too
        wait_for(lambda: len(collector.find("apiserver.request", {"k8s.verb": "create",
                                                                  "k8s.resource": "configmaps"})) >= expected,
                 60, 0.5, f"{expected} create spans at the collector")
    finally:
        stop_all(servers, etcd, workdir, True)
    modes = tuple(servers)
    summary, rows = medians_and_rows(results, modes)
    print()
    print(f"ConfigMap creates, tracing off vs on ({'quick' if args.quick else 'full'}, {rounds} rounds, medians; "
          "on-default: samplingRatePerMillion 0, upstream's default; on-all: every request sampled and exported)")
    print()
    print(render_table(("figure", *modes, *(f"{m}/off" for m in modes[1:])), rows))
    if caution := busy_caution(results):
        print(caution)
    rate = summary["creates/s, 64 clients"]
    ratios = {m: round(rate[m] / rate["off"], 3) if rate["off"] else None for m in modes[1:]}
    print("creates/s, on ÷ off: " + ", ".join(f"{m} {r}" for m, r in ratios.items()))
    return {"rounds": results, "summary": summary, "create_ratios": ratios}


class MiniCluster:
    """etcd, apiserver (plain port), scheduler and one kubelet with its Docker shim; traced or not."""

    def __init__(self, workdir: Path, mode: str, tracing: tuple[str, ...]) -> None:
        self.mode = mode
        self.dir = workdir / mode
        self.dir.mkdir()
        self.etcd = Etcd(self.dir)
        self.apiserver = ApiServer(self.dir, self.etcd, "--etcd-compaction-interval", "0", *tracing)
        self.scheduler = SchedulerProcess(self.dir, self.apiserver.url, None, *tracing)
        self.kubelet = KubeletProcess(self.dir, self.apiserver, f"trb-{mode}-{uuid.uuid4().hex[:4]}",
                                      free_pod_cidrs(1)[0], extra_args=tracing)
        self.kubelet.runtime = DockershimProcess(self.dir, self.kubelet.node, self.kubelet.root_dir, tracing)
        self.api = httpx.Client(base_url=self.apiserver.url, timeout=30)

    def start(self) -> None:
        self.etcd.start()
        self.apiserver.start()
        self.scheduler.start()
        self.kubelet.start(self.api)
        r = self.api.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
        assert r.status_code == 201, r.text

    def stop(self) -> None:
        cleanup([self.kubelet])
        self.scheduler.stop()
        self.apiserver.stop()
        self.etcd.stop()
        self.api.close()

    def start_pods(self, count: int, run: str, timeout: float = 120) -> list[float]:
        """count pods POSTed at once; each one's seconds from its POST to Running (as a watch sees it)."""
        posted: dict[str, float] = {}
        running: dict[str, float] = {}
        done = threading.Event()
        ready = threading.Event()

        def watch() -> None:
            with httpx.Client(base_url=self.apiserver.url, timeout=None) as client, client.stream(
                    "GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params={"watch": "true"}) as stream:
                ready.set()
                for line in stream.iter_lines():
                    if not line:
                        continue
                    pod = json.loads(line)["object"]
                    name = pod["metadata"]["name"]
                    status = pod.get("status") or {}
                    if name.startswith(run) and name not in running and status.get("phase") == "Running" and all(
                            (c.get("state") or {}).get("running") for c in status.get("containerStatuses") or [{}]):
                        running[name] = time.monotonic()
                        if len(running) == count:
                            done.set()
                            return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        ready.wait(10)

        def create(i: int) -> None:
            name = f"{run}-{i}"
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"containers": [{"name": "httpd", "image": HTTPD, "imagePullPolicy": "IfNotPresent"}],
                             "terminationGracePeriodSeconds": 0}}
            posted[name] = time.monotonic()
            r = self.api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=body)
            assert r.status_code == 201, r.text

        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            list(pool.map(create, range(count)))
        if not done.wait(timeout):
            raise SystemExit(f"{self.mode}: {len(running)} of {count} pods Running after {timeout} s")
        names = list(posted)
        for name in names:
            self.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", params={"gracePeriodSeconds": "0"})
        wait_for(lambda: not self.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods").json()["items"], 120, 0.2,
                 f"{self.mode}: the pods gone")
        wait_for(lambda: not self.kubelet.pods(), 120, 0.2, f"{self.mode}: the kubelet's pods gone")
        return [running[n] - posted[n] for n in names]


def startup_phase(args: Any, rounds: int, collector: Collector, workdir: Path) -> dict[str, Any]:
    ensure_images()
    traced = ("--tracing-config-file", config_file(workdir / "tracing-pods.yaml", collector.endpoint))
    clusters = {"off": MiniCluster(workdir, "off", ()), "on": MiniCluster(workdir, "on", traced)}
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for cluster in clusters.values():
            cluster.start()
        for mode, cluster in clusters.items():  # a warm-up batch each
            cluster.start_pods(2, f"w-{mode}")
        for r_i in range(rounds):
            for mode, cluster in clusters.items():
                print(f"[{time.strftime('%H:%M:%S')}] pods round {r_i + 1}/{rounds}, {mode} …", file=sys.stderr)
                seconds[mode] += cluster.start_pods(args.pods, f"p{r_i}-{mode}")
        expected = rounds * args.pods
        wait_for(lambda: len({s["k8s.object.uid"] for s in collector.find("kubelet.sync_pod", {
            "k8s.sync.update_type": "create"})}) >= expected, 30, 0.5, f"{expected} pods' kubelet.sync_pod spans")
    finally:
        for cluster in clusters.values():
            cluster.stop()
    medians = {mode: statistics.median(values) for mode, values in seconds.items()}
    p90 = {mode: statistics.quantiles(values, n=10)[-1] if len(values) >= 2 else values[0]
           for mode, values in seconds.items()}
    ratio = round(medians["on"] / medians["off"], 3) if medians["off"] else None
    print()
    print(f"pod start-up (POST → Running), tracing off vs on, {rounds} rounds of {args.pods} pods")
    print()
    print(render_table(("figure", "off", "on", "on/off"), [
        ("start-up p50 s", f"{medians['off']:.3f}", f"{medians['on']:.3f}", f"{ratio:.3f}x" if ratio else "—"),
        ("start-up p90 s", f"{p90['off']:.3f}", f"{p90['on']:.3f}",
         f"{p90['on'] / p90['off']:.3f}x" if p90["off"] else "—")]))
    print(f"p50 pod start-up, on ÷ off: {ratio}")
    return {"seconds": seconds, "p50_s": medians, "p90_s": p90, "startup_ratio": ratio, "pods": args.pods,
            "rounds": rounds}


def main(argv: list[str] | None = None) -> int:
    extra = list(argv if argv is not None else sys.argv[1:])
    pods, phase = 10, "all"
    for flag in ("--pods", "--phase"):  # this bench's own flags beside round_args' common ones
        if flag in extra:
            i = extra.index(flag)
            if flag == "--pods":
                pods = int(extra[i + 1])
            else:
                phase = extra[i + 1]
            del extra[i:i + 2]
    args, rounds, total = round_args("python -m bench.tracing_bench", __doc__, extra)
    args.pods = pods
    workdir = make_workdir("minik8s-tracing-bench-")
    collector = Collector({"apiserver.request", "kubelet.sync_pod"}).start()
    try:
        creates = creates_phase(args, rounds, total, collector, workdir) if phase in ("all", "creates") else {}
        startup = startup_phase(args, rounds, collector, workdir) if phase in ("all", "pods") else {}
    finally:
        collector.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    out = OUTPUT / "tracing.json"
    if phase != "all" and out.exists():  # one phase run: the other's figures stay as the last run left them
        before = json.loads(out.read_text())
        creates = creates or before.get("creates") or {}
        startup = startup or before.get("startup") or {}
    out.write_text(json.dumps({
        "benchmark": "tracing", "quick": args.quick, "creates": creates,
        "create_ratio": creates.get("create_ratios", {}).get("on-all"),
        "create_ratio_default": creates.get("create_ratios", {}).get("on-default"),
        "startup": startup, "startup_ratio": startup.get("startup_ratio"), "spans_received": collector.received},
        indent=2))
    print(f"JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
