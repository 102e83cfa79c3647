"""The guestbook (examples/guestbook/, issue 17) on the local-up cluster (hack/local-up-cluster.sh, node-1 on the
Docker shim, node-2 on containerd), with real kubectl 1.33:

    python -m bench.guestbook_bench [--reps 3] [--seconds 10] [--clients 4] [--quick] [--output FILE]

- apply → all Ready: `kubectl apply -k examples/guestbook/` into a fresh namespace until the frontend's 3 pods,
  the 3 Redis pods and the seed Job are Ready/done; p50 of `reps` runs (images built: a warm machine);
- requests through the NodePort: `clients` processes, each sending GET /entries on a new connection for
  `seconds`, to the host's address and the frontend Service's NodePort (3 frontends; the HPA is removed first so
  they stay 3): requests/s and p99; the baseline, same run, the same load on one frontend pod's IP;
- the request success rate during `kubectl rollout restart deployment/frontend` under the same load (issue: 100%).

local-up uses fixed ports: the bench takes /tmp/minik8s-fixed-ports.lock, as the tests do, and takes the cluster
down (hack/down.sh --purge) at the end. Not a test: it prints figures and writes its JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.cluster import REPO
from tests.kubectl import find_kubectl
from tests.node_process import ensure_guestbook_images, ensure_images

OUTPUT = REPO / "_output" / "bench"
OUT = REPO / "_output" / "local-up"
LOCK = Path("/tmp/minik8s-fixed-ports.lock")
FOLDER = REPO / "examples" / "guestbook"
JSONDict = dict[str, Any]


@contextlib.contextmanager
def fixed_ports() -> Iterator[None]:
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # waits for the tests or another bench holding the host's fixed ports
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def script(name: str, *args: str, log: Any) -> None:
    env = {**os.environ, "NODES": "node-1 node-2", "CONTAINERD_NODES": "node-2"}
    r = subprocess.run([str(REPO / "hack" / name), *args], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                       timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"hack/{name} exited {r.returncode}; see {log.name}")


class Cluster:
    def __init__(self, kubectl: Path) -> None:
        self.kubectl = kubectl
        self.env = {**os.environ, "KUBECONFIG": str(OUT / "kubeconfig")}
        import ssl

        ctx = ssl.create_default_context(cafile=OUT / "pki" / "ca.crt")
        ctx.load_cert_chain(OUT / "pki" / "admin.crt", OUT / "pki" / "admin.key")
        self.api = httpx.Client(base_url="https://127.0.0.1:6443", verify=ctx, timeout=10)

    def run(self, ns: str, *args: str, timeout: float = 300) -> str:
        r = subprocess.run([str(self.kubectl), "-n", ns, *args], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr}")
        return r.stdout

    def get(self, path: str) -> JSONDict:
        r = self.api.get(path)
        r.raise_for_status()
        body: JSONDict = r.json()
        return body

    def all_ready(self, ns: str) -> bool:
        try:
            front = self.get(f"/apis/apps/v1/namespaces/{ns}/deployments/frontend").get("status") or {}
            redis = self.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/redis").get("status") or {}
            seed = self.get(f"/apis/batch/v1/namespaces/{ns}/jobs/guestbook-seed").get("status") or {}
        except httpx.HTTPStatusError:
            return False
        return (front.get("readyReplicas") == 3 and front.get("updatedReplicas") == 3
                and redis.get("readyReplicas") == 3 and seed.get("succeeded") == 1)

    def namespace(self, ns: str) -> None:
        r = self.api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": ns}})
        r.raise_for_status()

    def delete_namespace(self, ns: str) -> None:
        self.run(ns, "delete", "-k", str(FOLDER), "--wait=true", "--timeout=180s", timeout=200)
        self.api.delete(f"/api/v1/namespaces/{ns}")
        wait(lambda: self.api.get(f"/api/v1/namespaces/{ns}").status_code == 404, 180, f"namespace {ns} gone")

    def node_url(self, ns: str) -> str:
        node = self.get("/api/v1/nodes/node-1")
        ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
        port = self.get(f"/api/v1/namespaces/{ns}/services/frontend")["spec"]["ports"][0]["nodePort"]
        return f"http://{ip}:{port}"


def wait(condition: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := condition():
            return result
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def _load(args: tuple[str, float]) -> tuple[int, int, list[float]]:
    """One client process: GET url/entries on a new connection each time until `seconds` pass."""
    url, seconds = args
    ok = failed = 0
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=5, headers={"Connection": "close"}) as client:
        while time.monotonic() < deadline:
            start = time.perf_counter()
            try:
                good = client.get(f"{url}/entries").status_code == 200
            except httpx.HTTPError:
                good = False
            latencies.append(time.perf_counter() - start)
            ok, failed = ok + good, failed + (not good)
    return ok, failed, latencies


def load(url: str, clients: int, seconds: float) -> JSONDict:
    start = time.monotonic()
    with multiprocessing.get_context("fork").Pool(clients) as pool:
        results = pool.map(_load, [(url, seconds)] * clients)
    wall = time.monotonic() - start
    ok = sum(r[0] for r in results)
    failed = sum(r[1] for r in results)
    latencies = sorted(x for r in results for x in r[2])
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000 if latencies else None
    return {"ok": ok, "failed": failed, "rps": ok / min(wall, seconds + 1), "p99_ms": p99,
            "p50_ms": statistics.median(latencies) * 1000 if latencies else None}


def apply_to_ready(cluster: Cluster, ns: str) -> float:
    cluster.namespace(ns)
    start = time.monotonic()
    cluster.run(ns, "apply", "-k", str(FOLDER))
    wait(lambda: cluster.all_ready(ns), 300, f"the guestbook in {ns} Ready")
    return time.monotonic() - start


def rollout_under_load(cluster: Cluster, ns: str, url: str, clients: int) -> JSONDict:
    result: JSONDict = {}
    stop = threading.Event()

    def restart() -> None:
        time.sleep(2)
        cluster.run(ns, "rollout", "restart", "deployment/frontend")
        cluster.run(ns, "rollout", "status", "deployment/frontend", "--timeout=240s", timeout=260)
        stop.set()

    t = threading.Thread(target=restart)
    start = time.monotonic()
    t.start()
    # the load runs in chunks until the rollout is done (and a second after)
    total = {"ok": 0, "failed": 0}
    while not stop.is_set():
        chunk = load(url, clients, 3)
        total["ok"] += chunk["ok"]
        total["failed"] += chunk["failed"]
    chunk = load(url, clients, 1)
    total["ok"] += chunk["ok"]
    total["failed"] += chunk["failed"]
    t.join()
    n = total["ok"] + total["failed"]
    result.update(total, requests=n, success_pct=100.0 * total["ok"] / n if n else None,
                  seconds=time.monotonic() - start)
    return result


def main() -> None:
    p = argparse.ArgumentParser(prog="bench.guestbook_bench")
    p.add_argument("--reps", type=int, default=3, help="apply → Ready runs (p50)")
    p.add_argument("--seconds", type=float, default=10, help="length of each throughput measurement")
    p.add_argument("--clients", type=int, default=4, help="client processes")
    p.add_argument("--quick", action="store_true", help="one apply run, 3 s of load")
    p.add_argument("--output", type=Path, default=OUTPUT / "guestbook.json")
    a = p.parse_args()
    if a.quick:
        a.reps, a.seconds = 1, 3.0
    kubectl = find_kubectl("1.33")
    if kubectl is None:
        sys.exit("kubectl 1.33 is not installed")
    ensure_images()
    ensure_guestbook_images()
    OUTPUT.mkdir(parents=True, exist_ok=True)
    log_path = OUTPUT / "guestbook-local-up.log"
    result: JSONDict = {"reps": a.reps, "clients": a.clients, "seconds": a.seconds, "quick": a.quick}
    with fixed_ports(), open(log_path, "a") as log:
        if OUT.exists():
            sys.exit(f"{OUT} exists: a local-up cluster of this checkout may run; hack/down.sh --purge first")
        try:
            script("local-up-cluster.sh", log=log)
            cluster = Cluster(kubectl)
            times = []
            for i in range(a.reps):
                ns = f"gb-bench-{i}"
                times.append(apply_to_ready(cluster, ns))
                print(f"apply -> all Ready: {times[-1]:.2f}s", flush=True)
                if i < a.reps - 1:
                    cluster.delete_namespace(ns)
            result["apply_ready_s"] = times
            result["apply_ready_p50_s"] = statistics.median(times)
            ns = f"gb-bench-{a.reps - 1}"
            cluster.run(ns, "delete", "hpa", "frontend")  # the 3 frontends stay 3 under the load
            url = cluster.node_url(ns)
            pods = cluster.get(f"/api/v1/namespaces/{ns}/pods?labelSelector=tier%3Dfrontend")["items"]
            pod_url = f"http://{pods[0]['status']['podIP']}:8080"
            load(url, a.clients, 1)  # warm-up
            result["nodeport"] = load(url, a.clients, a.seconds)
            result["pod"] = load(pod_url, a.clients, a.seconds)
            result["rps_ratio"] = result["nodeport"]["rps"] / result["pod"]["rps"] if result["pod"]["rps"] else None
            print(f"NodePort (3 frontends): {result['nodeport']['rps']:.0f} req/s, p99 "
                  f"{result['nodeport']['p99_ms']:.1f} ms; one pod IP: {result['pod']['rps']:.0f} req/s, p99 "
                  f"{result['pod']['p99_ms']:.1f} ms; ratio {result['rps_ratio']:.2f}", flush=True)
            result["rollout"] = rollout_under_load(cluster, ns, url, a.clients)
            print(f"rolling update: {result['rollout']['ok']}/{result['rollout']['requests']} requests answered "
                  f"({result['rollout']['success_pct']:.2f}%)", flush=True)
            cluster.api.close()
        finally:
            if OUT.exists():
                script("down.sh", "--purge", log=log)
    a.output.write_text(json.dumps(result, indent=2))
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
