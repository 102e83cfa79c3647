"""The guestbook (examples/guestbook/, issue 17) on the local-up cluster (hack/local-up-cluster.sh: node-1 on the
Docker shim, node-2 on its own containerd, the cluster DNS, kube-proxy, the local-path provisioner and
metrics-server), driven by real kubectl 1.33 as a user would, in one cluster for the whole module and in order:

apply -k the folder and every part Ready within a bound; 100 entries written through the NodePort and read back
from each frontend pod and each Redis pod; the Redis primary deleted comes back with its name and claim and all
entries; a rollout restart of the frontend under a steady request loop loses no request; a drain of a node keeps
the budget and the app answering; the seed Job ran once; the CronJob wrote a backup file; a kubelet killed with
-9 and restarted by its supervisor loses nothing; `kubectl delete -f` of the folder leaves no container, claim
directory, rule or address lease. Request loops go to the host's own address (NodePort) and pod IPs only.

local-up uses fixed ports: the module takes /tmp/minik8s-fixed-ports.lock (tests/e2e/test_local_up.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import REPO, wait_for
from tests.e2e.test_local_up import OUT, LocalUp, alive, read_pid
from tests.e2e.test_local_up import local_up as local_up  # the module's cluster (a fixture)
from tests.kubectl import find_kubectl
from tests.node_process import ensure_guestbook_images

JSONDict = dict[str, Any]
FOLDER = REPO / "examples" / "guestbook"
NS = "guestbook"
ENTRIES = 100
SEED = ["Welcome to the guestbook", "Sign it below"]
READY_BOUND = 180.0  # seconds from apply to every part Ready (the figure is printed)
NODES = ("node-1", "node-2")


class Kube:
    """kubectl 1.33 with local-up's admin kubeconfig, in the guestbook's namespace; and the API as admin."""

    def __init__(self, up: LocalUp, binary: Path) -> None:
        self.up, self.binary = up, binary
        self.env = {**os.environ, "KUBECONFIG": str(OUT / "kubeconfig")}
        self.api = up.client()
        self.pod_sandboxes: set[str] = set()  # the sandbox container ids of every guestbook pod seen

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([str(self.binary), "-n", NS, *args], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if check:
            assert r.returncode == 0, f"kubectl {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
        return r

    def get(self, path: str) -> JSONDict:
        r = self.api.get(path)
        assert r.status_code == 200, r.text
        body: JSONDict = r.json()
        return body

    def pods(self, selector: str) -> list[JSONDict]:
        items: list[JSONDict] = self.get(f"/api/v1/namespaces/{NS}/pods?labelSelector={selector}")["items"]
        return items

    def node_url(self) -> str:
        """http://<node InternalIP>:<nodePort> of the frontend Service (NodePorts answer on the host's addresses)."""
        node = self.get("/api/v1/nodes/node-1")
        ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
        port = self.get(f"/api/v1/namespaces/{NS}/services/frontend")["spec"]["ports"][0]["nodePort"]
        return f"http://{ip}:{port}"


def ready(pod: JSONDict) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def all_ready(kube: Kube) -> bool:
    frontend = kube.get(f"/apis/apps/v1/namespaces/{NS}/deployments/frontend")
    redis = kube.get(f"/apis/apps/v1/namespaces/{NS}/statefulsets/redis")
    spec = frontend["spec"]["replicas"]
    status, rstatus = frontend.get("status") or {}, redis.get("status") or {}
    return (status.get("readyReplicas") == spec and status.get("updatedReplicas") == spec
            and status.get("replicas") == spec and rstatus.get("readyReplicas") == 3
            and sum(ready(p) for p in kube.pods("app=guestbook,tier=frontend")) == spec)


def redis_entries(kube: Kube, pod: str) -> list[str]:
    r = kube.run("exec", pod, "--", "redis-cli", "lrange", "guestbook:entries", "0", "-1", check=False, timeout=30)
    return r.stdout.splitlines() if r.returncode == 0 else []


def pod_entries(ip: str) -> list[str]:
    try:
        r = httpx.get(f"http://{ip}:8080/entries", timeout=5)
    except httpx.HTTPError:
        return []
    entries: list[str] = r.json()["entries"] if r.status_code == 200 else []
    return entries


class RequestLoop:
    """Threads sending GET /entries to `url` (each on a new connection) until stopped or `limit` seconds pass."""

    def __init__(self, url: str, threads: int = 3, limit: float = 300) -> None:
        self.url, self.ok, self.failed = url, 0, 0
        self.errors: list[str] = []
        self.deadline = time.monotonic() + limit
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for t in self._threads:
            t.start()

    def _run(self) -> None:
        with httpx.Client(timeout=5, headers={"Connection": "close"}) as client:
            while not self._stop.is_set() and time.monotonic() < self.deadline:
                try:
                    r = client.get(f"{self.url}/entries")
                    good, what = r.status_code == 200, f"{r.status_code} {r.text[:100]}"
                except httpx.HTTPError as e:
                    good, what = False, repr(e)[:120]
                with self._lock:
                    if good:
                        self.ok += 1
                    else:
                        self.failed += 1
                        self.errors.append(what)
                time.sleep(0.01)

    def stop(self) -> RequestLoop:
        self._stop.set()
        for t in self._threads:
            t.join(10)
        return self


@pytest.fixture(scope="module")
def kube(request: pytest.FixtureRequest) -> Iterator[Kube]:
    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl 1.33 is not installed on this machine: this end-to-end test drives it")
    ensure_guestbook_images()  # before local-up: its containerd node imports them from Docker
    up: LocalUp = request.getfixturevalue("local_up")
    kube = Kube(up, binary)
    r = kube.api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    assert r.status_code == 201, r.text
    try:
        yield kube
    finally:
        for node in NODES:
            kube.run("uncordon", node, check=False)
        kube.run("delete", "-k", str(FOLDER), "--ignore-not-found", "--wait=false", check=False)
        kube.api.delete(f"/api/v1/namespaces/{NS}")
        kube.api.close()


def test_apply_the_folder_and_everything_is_ready(kube: Kube) -> None:
    start = time.monotonic()
    out = kube.run("apply", "-k", str(FOLDER)).stdout
    for kind in ("configmap/guestbook", "secret/redis", "service/frontend", "service/redis", "service/redis-read",
                 "statefulset.apps/redis", "deployment.apps/frontend", "horizontalpodautoscaler.autoscaling/frontend",
                 "poddisruptionbudget.policy/frontend", "job.batch/guestbook-seed", "cronjob.batch/redis-backup",
                 "persistentvolumeclaim/redis-backup"):
        assert f"{kind} created" in out, out
    wait_for(lambda: all_ready(kube), READY_BOUND, 0.5, what="the frontend and Redis all Ready")
    print(f"guestbook: apply -> all Ready in {time.monotonic() - start:.1f}s")
    # -f of the folder reads the same objects (the kustomization file, named Kustomization, is not among them)
    again = kube.run("apply", "-f", str(FOLDER), "--dry-run=server").stdout
    assert len(again.splitlines()) == 12 and "created" not in again, again
    for pod in ("redis-0", "redis-1", "redis-2"):
        claim = kube.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/data-{pod}")
        assert claim["status"]["phase"] == "Bound" and claim["spec"]["storageClassName"] == "local-path"


def test_100_entries_through_the_nodeport_are_on_every_frontend_and_redis_pod(kube: Kube) -> None:
    url = kube.node_url()

    def answers() -> bool:
        try:
            return httpx.get(f"{url}/info", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    # Ready pods are not yet reachable: their endpoints still travel to kube-proxy (until then the Service has
    # none, and its rule refuses the connection, as upstream's REJECT)
    wait_for(answers, 30, 0.2, what="the NodePort answering")
    with httpx.Client(timeout=10) as client:
        for i in range(ENTRIES):
            r = client.post(f"{url}/entries", content=f"entry {i}")
            assert r.status_code == 201, r.text
    want = {f"entry {i}" for i in range(ENTRIES)}
    for pod in kube.pods("app=guestbook,tier=frontend"):
        ip = pod["status"]["podIP"]
        wait_for(lambda ip=ip: want <= set(pod_entries(ip)), 30, 0.5,  # type: ignore[misc]
                 what=f"the entries from {ip}")
    for name in ("redis-0", "redis-1", "redis-2"):  # the primary and both replicas
        wait_for(lambda pod=name: want <= set(redis_entries(kube, pod)), 60, 1,  # type: ignore[misc]
                 what=f"the entries on {name}")
    # a bad entry: upstream-style JSON error, nothing written
    r = httpx.post(f"{url}/entries", content="  ", timeout=10)
    assert r.status_code == 400 and r.json() == {"error": "an empty entry"}


def test_the_seed_job_ran_once_and_succeeded(kube: Kube) -> None:
    job = wait_for(lambda: (j := kube.get(f"/apis/batch/v1/namespaces/{NS}/jobs/guestbook-seed"))
                   .get("status", {}).get("succeeded") == 1 and j, 60, what="the seed job to succeed")
    assert not job["status"].get("failed")  # type: ignore[index]
    assert len(kube.pods("job-name=guestbook-seed")) == 1
    assert redis_entries(kube, "redis-0")[:2] == SEED


def test_the_primary_comes_back_with_its_name_claim_and_entries(kube: Kube) -> None:
    before = kube.get(f"/api/v1/namespaces/{NS}/pods/redis-0")
    claim = kube.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/data-redis-0")
    kube.run("delete", "pod", "redis-0")

    def back() -> JSONDict | None:
        r = kube.api.get(f"/api/v1/namespaces/{NS}/pods/redis-0")
        pod: JSONDict = r.json() if r.status_code == 200 else {}
        return pod if pod and pod["metadata"]["uid"] != before["metadata"]["uid"] and ready(pod) else None

    after = wait_for(back, 120, 0.5, what="redis-0 made again and Ready")
    print(f"redis-0: {before['status']['podIP']} -> {after['status']['podIP']}")  # type: ignore[index]
    vols = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in after["spec"]["volumes"]}  # type: ignore[index]
    assert vols["data"] == "data-redis-0"
    again = kube.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/data-redis-0")
    assert again["metadata"]["uid"] == claim["metadata"]["uid"]
    assert again["spec"]["volumeName"] == claim["spec"]["volumeName"]
    want = {f"entry {i}" for i in range(ENTRIES)}
    assert want <= set(redis_entries(kube, "redis-0"))
    url = kube.node_url()
    wait_for(lambda: httpx.post(f"{url}/entries", content="after the primary came back", timeout=10)
             .status_code == 201, 60, 1, what="a write through the NodePort to the new primary")
    for pod in ("redis-1", "redis-2"):  # the replicas follow redis-0.redis at its new address
        wait_for(lambda pod=pod: "after the primary came back" in redis_entries(kube, pod), 90, 1,  # type: ignore[misc]
                 what=f"{pod} to follow the new primary")


def test_a_rollout_restart_under_a_request_loop_loses_no_request(kube: Kube) -> None:
    loop = RequestLoop(kube.node_url(), limit=240)
    try:
        wait_for(lambda: loop.ok >= 20, 30, 0.2, what="the request loop to run")
        kube.run("rollout", "restart", "deployment/frontend")
        kube.run("rollout", "status", "deployment/frontend", "--timeout=180s", timeout=200)
        time.sleep(1)  # a last second of requests on the new pods only
    finally:
        loop.stop()
    total = loop.ok + loop.failed
    print(f"rolling update: {loop.ok}/{total} requests answered ({100 * loop.ok / max(total, 1):.2f}%)")
    assert loop.failed == 0, loop.errors[:10]


def test_a_drain_keeps_the_budget_and_the_app_answering(kube: Kube) -> None:
    primary = kube.get(f"/api/v1/namespaces/{NS}/pods/redis-0")["spec"]["nodeName"]
    node = next(n for n in NODES if n != primary)  # redis-0's claim is on its node: writes keep going
    fewest = [99]
    watching = threading.Event()

    def count() -> None:
        while not watching.is_set():
            fewest[0] = min(fewest[0], sum(ready(p) for p in kube.pods("app=guestbook,tier=frontend")))
            time.sleep(0.2)

    counter = threading.Thread(target=count, daemon=True)
    loop = RequestLoop(kube.node_url(), limit=300)
    counter.start()
    try:
        out = kube.run("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=200s",
                       timeout=240).stdout
        assert f"node/{node} drained" in out, out
        assert not [p for p in kube.pods("app=guestbook,tier=frontend") if p["spec"]["nodeName"] == node]
    finally:
        loop.stop()
        watching.set()
        counter.join(5)
        kube.run("uncordon", node)
    assert fewest[0] >= 2, f"the budget (minAvailable 2) let the Ready frontends fall to {fewest[0]}"
    assert loop.failed == 0 and loop.ok > 0, loop.errors[:10]
    wait_for(lambda: all_ready(kube), 180, 1, what="the app Ready again after uncordon (replicas back on the node)")


def test_the_cronjob_wrote_a_backup(kube: Kube) -> None:
    def completed() -> list[JSONDict]:
        jobs = kube.get(f"/apis/batch/v1/namespaces/{NS}/jobs")["items"]
        return [j for j in jobs if j["metadata"]["name"].startswith("redis-backup-")
                and (j.get("status") or {}).get("succeeded")]

    jobs = wait_for(completed, 150, 2, what="a backup job of the CronJob to complete")
    claim = kube.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/redis-backup")
    pv = kube.get(f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}")
    folder = Path(pv["spec"]["hostPath"]["path"])
    dumps = sorted(folder.glob("dump-*.rdb"))
    assert dumps, f"no backup in {folder} after {[j['metadata']['name'] for j in jobs]}"  # type: ignore[attr-defined]
    assert dumps[-1].read_bytes().startswith(b"REDIS")  # an RDB file
    assert kube.get(f"/apis/batch/v1/namespaces/{NS}/cronjobs/redis-backup")["status"].get("lastSuccessfulTime")


def test_a_kubelet_killed_and_restarted_loses_nothing(kube: Kube) -> None:
    def snapshot() -> dict[str, tuple[str, int]]:
        pods = kube.get(f"/api/v1/namespaces/{NS}/pods")["items"]
        return {p["metadata"]["uid"]: (p["metadata"]["name"], sum(c.get("restartCount", 0) for c in
                                       p["status"].get("containerStatuses") or []))
                for p in pods if p["status"].get("phase") == "Running" and ready(p)}

    before = snapshot()
    old = read_pid(OUT / "kubelet-node-1.child")
    assert alive(old)
    os.kill(old, signal.SIGKILL)  # type: ignore[arg-type]
    new = wait_for(lambda: (p := read_pid(OUT / "kubelet-node-1.child")) != old and alive(p) and p, 60,
                   what="the kubelet of node-1 started again by its supervisor")
    kube.up.seen_pids.add(new)  # type: ignore[arg-type]
    wait_for(lambda: all(ready(p) for p in kube.pods("app=guestbook,tier=frontend")) and all_ready(kube), 90, 1,
             what="every pod Ready after the kubelet restart")
    after = snapshot()
    assert {uid: v for uid, v in after.items() if uid in before} == before  # same pods, no container restarted
    assert set(before) <= set(after)
    want = {f"entry {i}" for i in range(ENTRIES)}
    assert want <= set(httpx.get(f"{kube.node_url()}/entries", timeout=10).json()["entries"])


def sandbox_ids() -> set[str]:
    """The sandbox (pause) containers of the namespace's pods on both runtimes."""
    docker_ids = subprocess.run(["docker", "ps", "-aq", "--no-trunc", "--filter",
                                 f"label=io.kubernetes.pod.namespace={NS}"], capture_output=True, text=True,
                                check=True).stdout.split()
    ctr = subprocess.run(["ctr", "-a", str(OUT / "containerd" / "node-2" / "containerd.sock"), "-n", "k8s.io", "c",
                          "ls", "-q", f'labels."io.kubernetes.pod.namespace"=={NS}'], capture_output=True, text=True,
                         check=True).stdout.split()
    return set(docker_ids) | set(ctr)


def leases() -> dict[str, str]:
    """host-local's address leases of both nodes: file -> the container id it holds."""
    dirs = [Path("/var/lib/minik8s/kubelet/node-1/cni/ipam"), OUT / "containerd" / "node-2" / "cni" / "ipam"]
    return {str(f): f.read_text().split()[0] for d in dirs if d.exists() for f in d.glob("*/*")
            if f.name[0].isdigit() and f.read_text().strip()}


def iptables_rules() -> str:
    return subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout


def test_delete_the_folder_leaves_nothing_behind(kube: Kube) -> None:
    ids = sandbox_ids()
    assert ids and any(v in ids for v in leases().values())  # the check below can see a lease
    claims = [c["spec"]["volumeName"] for c in kube.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims")["items"]]
    assert len(claims) == 4
    kube.run("delete", "-f", str(FOLDER), "--wait=true", "--timeout=180s", timeout=200)
    wait_for(lambda: not kube.get(f"/api/v1/namespaces/{NS}/pods")["items"], 120, 1, what="every pod gone")
    wait_for(lambda: not kube.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims")["items"], 60, 1,
             what="every claim gone (the StatefulSet's by its retention policy whenDeleted: Delete)")
    wait_for(lambda: not [p for p in kube.get("/api/v1/persistentvolumes")["items"] if p["metadata"]["name"] in claims],
             120, 1, what="the volumes deleted (reclaim policy Delete)")
    local_path = OUT / "local-path"
    wait_for(lambda: not [d for d in local_path.iterdir() if f"_{NS}_" in d.name], 60, 1,
             what="the claim directories removed")
    wait_for(lambda: not sandbox_ids(), 60, 1, what="every container of the namespace removed")
    wait_for(lambda: not [f for f, cid in leases().items() if cid in ids], 60, 1, what="every address released")
    wait_for(lambda: f'"{NS}/' not in iptables_rules(), 60, 1, what="kube-proxy's rules of the Services removed")
