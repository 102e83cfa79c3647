"""kube-proxy: network programming latency, the time of one full sync, throughput through a ClusterIP
and the proxy's RSS, at 10, 100 and 1,000 Services (issue 11).

    python -m bench.proxy_bench [--quick] [--sizes 10,100,1000] [--samples 20]

One etcd, one apiserver and `python -m proxy` (iptables mode, a chain prefix of its own, --min-sync-period
100ms) on the host's real packet filter; one real backend (a minik8s/httpd:1 container on a Docker network
of the bench's own, whose subnet is the --cluster-cidr). Each size adds Services (one port each) with one
EndpointSlice of 10 hollow endpoints (addresses nothing answers on, never contacted) until it holds N.

- network programming latency (upstream's SLI): a Service without endpoints is created and waited for
  (its REJECT answers: connection refused); then its EndpointSlice gets the real backend at t0, and the
  latency is t0 → the first GET through the ClusterIP that the backend answers (polled every 5 ms).
  Baseline, same samples: t0 → the same slice's arrival on a watch this process holds on the apiserver
  (what any client of the API could not beat). p50/p99 of --samples changes per size;
- one full sync at N: the proxy is restarted (SIGTERM; its rules stay, as upstream's) and its first sync
  is a full one, read from its kubeproxy_sync_full_proxy_rules_duration_seconds; partial syncs' mean too;
- throughput: a 200 MB file fetched from the backend through the ClusterIP ÷ directly from its IP, the
  two back to back in 9 pairs; the median of the pairs' ratios;
- the proxy's VmRSS at each size.
Writes _output/bench/proxy.json. Everything it made goes at the end (`python -m proxy --cleanup`).
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import shutil
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.apiserver_bench import percentile, proc_memory_mb
from tests.cluster import REPO, ApiServer, Etcd, make_workdir, wait_for
from tests.proxy_process import Backends, ProxyProcess

OUTPUT = REPO / "_output" / "bench"
NAMESPACE = "proxy-bench"
FILE_MB = 200
PAIRS = 9


def service_body(name: str, ip: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip],
                     "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]}}


def slice_body(service: str, ips: list[str]) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{service}-s", "namespace": NAMESPACE,
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips]}


# ClusterIPs in the apiserver's default --service-cluster-ip-range (10.96.0.0/12), from a /16 picked at
# random among 10.100-10.110 (as the tests pick their /24s), so other clusters' rules on this host are
# unlikely to name the same addresses
SECOND_OCTET = random.randint(100, 110)


def cluster_ip(index: int) -> str:
    return f"10.{SECOND_OCTET}.{index // 250}.{index % 250 + 1}"


def hollow_ips(index: int) -> list[str]:
    return [f"10.253.{index // 25}.{(index % 25) * 10 + i + 1}" for i in range(10)]


class SliceWatch:
    """A watch on the bench's EndpointSlices in a thread: when each slice name was first seen with endpoints."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.ready = threading.Event()

    def start(self) -> None:
        self._thread.start()
        assert self.ready.wait(10), "the slice watch did not start"

    def _run(self) -> None:
        try:
            self._watch()
        except httpx.HTTPError:
            if not self._stop.is_set():
                raise

    def _watch(self) -> None:
        with httpx.Client(base_url=self.url, timeout=None) as api:
            rv = api.get(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices").json()["metadata"][
                "resourceVersion"]
            with api.stream("GET", f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices",
                            params={"watch": "true", "resourceVersion": rv}) as r:
                self.ready.set()
                for line in r.iter_lines():
                    if self._stop.is_set():
                        return
                    event = json.loads(line)
                    obj = event.get("object", {})
                    name = obj.get("metadata", {}).get("name")
                    if name and obj.get("endpoints") and name not in self.seen:
                        self.seen[name] = time.monotonic()

    def stop(self) -> None:
        self._stop.set()


def get_name(ip: str, port: int, timeout: float = 0.5) -> str | None:
    try:
        conn = http.client.HTTPConnection(ip, port, timeout=timeout)
        conn.request("GET", "/")
        body = conn.getresponse().read().decode().strip()
        conn.close()
        return body
    except OSError:
        return None


def refused(ip: str, port: int) -> bool:
    import socket
    try:
        socket.create_connection((ip, port), timeout=0.5).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


def download_mbps(ip: str, port: int, path: str) -> float:
    conn = http.client.HTTPConnection(ip, port, timeout=30)
    start = time.monotonic()
    conn.request("GET", path)
    response = conn.getresponse()
    size = 0
    while chunk := response.read(1 << 20):
        size += len(chunk)
    conn.close()
    assert size == FILE_MB << 20, f"short download: {size} bytes"
    return size / 1e6 / (time.monotonic() - start)


class Bench:
    def __init__(self, sizes: list[int], samples: int) -> None:
        self.sizes = sizes
        self.samples = samples
        self.workdir = make_workdir("minik8s-proxy-bench-")
        self.etcd = Etcd(self.workdir)
        self.apiserver: ApiServer | None = None
        self.backends = Backends()
        self.proxy: ProxyProcess | None = None
        self.results: dict[str, Any] = {"sizes": {}, "setup": {}}
        self.created = 0

    def start(self) -> None:
        self.etcd.start()
        self.apiserver = ApiServer(self.workdir, self.etcd, "--etcd-compaction-interval", "0")
        self.apiserver.start()
        self.api = httpx.Client(base_url=self.apiserver.url, timeout=30)
        r = self.api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": NAMESPACE}})
        assert r.status_code == 201, r.text
        self.backends.network = self.backends.client.networks.create(
            self.backends.tag, driver="bridge", labels={"io.minik8s.test": self.backends.tag})
        name = f"{self.backends.tag}-web"
        c = self.backends.client.containers.run(
            "minik8s/httpd:1", ["sh", "-c", f"mkdir -p /w && echo {name} > /w/index.html && "
                                            f"dd if=/dev/zero of=/w/big bs=1M count={FILE_MB} 2>/dev/null && "
                                            "exec httpd -f -p 80 -h /w"],
            name=name, detach=True, network=self.backends.tag, labels={"io.minik8s.test": self.backends.tag})
        self.backends.containers.append(c)
        self.backend_ip = self.backends.ip(c)
        self.backend_name = name
        wait_for(lambda: get_name(self.backend_ip, 80) == name, 60, what="the backend")
        self.proxy = ProxyProcess(self.workdir, self.apiserver.url, self.backends.subnet)
        self.proxy.argv = self._argv  # type: ignore[method-assign]  # the bench's own --min-sync-period
        self.proxy.start()
        self.watch = SliceWatch(self.apiserver.url)
        self.watch.start()
        self.results["setup"] = {"min_sync_period_s": 0.1, "prefix": self.proxy.prefix,
                                 "hollow_endpoints_per_service": 10, "samples": self.samples}

    def _argv(self) -> list[str]:
        assert self.proxy is not None
        argv = ProxyProcess.argv(self.proxy)
        argv[argv.index("--min-sync-period") + 1] = "100ms"
        return argv

    def fill(self, count: int) -> None:
        """Services with 10 hollow endpoints each, up to `count`."""
        def one(i: int) -> None:
            with httpx.Client(base_url=self.api.base_url, timeout=30) as api:
                name = f"hollow-{i}"
                assert api.post(f"/api/v1/namespaces/{NAMESPACE}/services",
                                json=service_body(name, cluster_ip(i))).status_code == 201
                assert api.post(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices",
                                json=slice_body(name, hollow_ips(i))).status_code == 201

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(one, range(self.created, count)))
        self.created = max(self.created, count)
        assert self.proxy is not None
        wait_for(lambda: (self.proxy.metric("kubeproxy_sync_proxy_rules_service_ports") or 0) >= count, 120,
                 interval=0.2, what=f"the proxy programming {count} Services")

    def latency(self, size: int) -> dict[str, Any]:
        latencies, watch = [], []
        for s in range(self.samples):
            name = f"probe-{size}-{s}"
            ip = cluster_ip(5000 + size + s)
            assert self.api.post(f"/api/v1/namespaces/{NAMESPACE}/services",
                                 json=service_body(name, ip)).status_code == 201
            wait_for(lambda ip=ip: refused(ip, 80), 30, interval=0.01, what="the probe's REJECT")
            t0 = time.monotonic()
            assert self.api.post(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices",
                                 json=slice_body(name, [self.backend_ip])).status_code == 201
            deadline = t0 + 30
            while get_name(ip, 80, timeout=0.2) != self.backend_name:
                assert time.monotonic() < deadline, "the probe Service never answered"
                time.sleep(0.005)
            latencies.append(time.monotonic() - t0)
            wait_for(lambda name=f"{name}-s": name in self.watch.seen, 10, what="the watch event")
            watch.append(self.watch.seen[f"{name}-s"] - t0)
            # the probe goes again, so the size stays as it is
            self.api.delete(f"/api/v1/namespaces/{NAMESPACE}/services/{name}")
            self.api.delete(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices/{name}-s")
        return {"p50_s": percentile(latencies, 50), "p99_s": percentile(latencies, 99),
                "watch_p50_s": percentile(watch, 50), "watch_p99_s": percentile(watch, 99),
                "samples_s": [round(v, 4) for v in latencies]}

    def full_sync(self) -> dict[str, Any]:
        """Restart the proxy: its first sync is full over everything it finds."""
        assert self.proxy is not None
        partial_sum = self.proxy.metric("kubeproxy_sync_partial_proxy_rules_duration_seconds_sum") or 0
        partial_count = self.proxy.metric("kubeproxy_sync_partial_proxy_rules_duration_seconds_count") or 0
        self.proxy.stop()
        self.proxy.start()
        wait_for(lambda: self.proxy is not None
                 and (self.proxy.metric("kubeproxy_sync_full_proxy_rules_duration_seconds_count") or 0) >= 1,
                 60, what="the first full sync")
        full = self.proxy.metric("kubeproxy_sync_full_proxy_rules_duration_seconds_sum")
        rss = proc_memory_mb(self.proxy.pid())["VmRSS"]
        return {"full_sync_s": full, "partial_sync_mean_s": partial_sum / partial_count if partial_count else None,
                "rss_mb": rss, "rules": sum(1 for line in _save().splitlines() if f"{self.proxy.prefix}-" in line)}

    def throughput(self) -> dict[str, Any]:
        ip = cluster_ip(9000)
        assert self.api.post(f"/api/v1/namespaces/{NAMESPACE}/services",
                             json=service_body("throughput", ip)).status_code == 201
        assert self.api.post(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices",
                             json=slice_body("throughput", [self.backend_ip])).status_code == 201
        wait_for(lambda: get_name(ip, 80) == self.backend_name, 30, what="the throughput Service")
        direct, via, ratios = [], [], []
        for _ in range(PAIRS):
            direct.append(download_mbps(self.backend_ip, 80, "/big"))
            via.append(download_mbps(ip, 80, "/big"))
            ratios.append(via[-1] / direct[-1])
        # each pair back to back, so a neighbour's burst of CPU on this shared machine hits both or neither
        return {"direct_mb_s": statistics.median(direct), "cluster_ip_mb_s": statistics.median(via),
                "ratio": statistics.median(ratios), "ratios": [round(r, 3) for r in ratios]}

    def run(self) -> None:
        for size in self.sizes:
            self.fill(size)
            entry = self.latency(size)
            entry.update(self.full_sync())
            self.results["sizes"][str(size)] = entry
            print(f"{size:5d} Services: latency p50 {entry['p50_s'] * 1000:.0f} ms p99 {entry['p99_s'] * 1000:.0f} ms"
                  f" (watch p50 {entry['watch_p50_s'] * 1000:.0f} ms), full sync {entry['full_sync_s']:.3f} s, "
                  f"partial mean {entry['partial_sync_mean_s'] or 0:.3f} s, RSS {entry['rss_mb']:.1f} MB, "
                  f"{entry['rules']} lines", flush=True)
        self.results["throughput"] = self.throughput()
        t = self.results["throughput"]
        print(f"throughput: direct {t['direct_mb_s']:.0f} MB/s, ClusterIP {t['cluster_ip_mb_s']:.0f} MB/s, "
              f"ratio {t['ratio']:.2f}", flush=True)

    def close(self) -> None:
        if getattr(self, "watch", None):
            self.watch.stop()
        if self.proxy is not None:
            self.proxy.cleanup()
        self.backends.remove()
        if self.apiserver is not None:
            self.apiserver.stop()
        self.etcd.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _save() -> str:
    from tests.proxy_process import iptables_save
    return iptables_save()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.proxy_bench", description=__doc__.splitlines()[0] if __doc__ else "")
    p.add_argument("--quick", action="store_true", help="sizes 10,100 and 5 samples")
    p.add_argument("--sizes", default="10,100,1000")
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--output", type=Path, default=OUTPUT / "proxy.json")
    args = p.parse_args(argv)
    sizes = [10, 100] if args.quick else [int(s) for s in args.sizes.split(",")]
    bench = Bench(sizes, 5 if args.quick else args.samples)
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
