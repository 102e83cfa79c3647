"""The whole control plane at once: a real etcd, a real apiserver, the controller-manager (every
controller: deployment, replicaset, garbagecollector, namespace, nodeipam, nodelifecycle) and the
scheduler, each its own OS process, as issue 3's "Tests" ask.

There is no kubelet process: the test plays the kubelets through the API, as a kubelet would. It
registers Node objects (status with allocatable and a Ready condition) and their Leases in
kube-node-lease, and a background `Kubelets` actor then, for every node still "alive":
- renews the node's Lease every 0.5 s (the heartbeat the node lifecycle controller watches);
- reports each pod bound to the node Running and Ready through pods/{name}/status as soon as it
  sees it bound (so rollouts progress, as they would with a kubelet starting containers);
- removes a pod being deleted on the node (DELETE with gracePeriodSeconds 0, what a kubelet does once
  the containers have stopped).
Stopping a node's kubelet stops all three: its Lease goes stale and its pods stay as they are.

Isolation: Nodes are cluster-scoped, so this module has its own etcd and apiserver (as
test_node_controllers.py does), every test its own namespace and nodes, removed afterwards even
when the test fails; the controller-manager and scheduler are shared by the module's tests and
restarted if a test left one dead. Every wait has a deadline (tests.cluster.wait_for); nothing
sleeps to synchronise.
"""

from __future__ import annotations

import datetime as dt
import json
import queue
import re
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from controllers.hashing import compute_hash
from machinery.api.core_v1 import PodTemplateSpec
from tests.cluster import ApiServer, Etcd, Process, wait_for
from tests.controller_process import ControllerProcess
from tests.integration.test_deployment_controller import d_path, replicasets, rollout_complete, set_image
from tests.integration.test_replicaset_controller import events, is_ready, merge_patch, ok, pod_status, pods_path

CONTROLLERS = ["deployment", "replicaset", "garbagecollector", "namespace", "nodeipam", "nodelifecycle"]
# short node timings, so a silent node is noticed in seconds: Unknown after 4 s, its pods evicted 2 s later
CM_FLAGS = ("--node-monitor-grace-period", "4s", "--node-startup-grace-period", "4s",
            "--node-monitor-period", "500ms", "--pod-eviction-timeout", "2s")
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
REVISION = "deployment.kubernetes.io/revision"
UNREACHABLE = "node.kubernetes.io/unreachable"


def now_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- the processes ------------------------------------------------------------------------------


class SchedulerProcess:
    """`python -m scheduler --master URL`, waited for until its caches synced; stop, or kill -9."""

    def __init__(self, workdir: Path, server: str) -> None:
        # no leader election: a restart after kill -9 must not wait out the dead process's Lease
        self.process = Process("scheduler", [sys.executable, "-m", "scheduler", "--master", server, "-v", "2",
                                             "--leader-elect=false", "--secure-port=0"],
                               workdir / "scheduler.log", env={"KUBECONFIG": str(workdir / "no-kubeconfig")})

    def start(self, timeout: float = 30.0) -> None:
        log = self.process.log_path
        start_at = log.stat().st_size if log.exists() else 0
        self.process.start()

        def synced() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"scheduler exited:\n{self.process.log_tail()}")
            return "caches synced" in log.read_bytes()[start_at:].decode(errors="replace")

        wait_for(synced, timeout, what=f"the scheduler to sync\n{self.process.log_tail()}")

    def kill(self) -> None:
        self.process.kill()

    def stop(self) -> None:
        self.process.stop()


class Plane:
    """The controller-manager and the scheduler of the module's cluster."""

    def __init__(self, workdir: Path, server: ApiServer) -> None:
        self.server = server
        self.cm = ControllerProcess(workdir, server.url, CONTROLLERS, *CM_FLAGS)
        self.scheduler = SchedulerProcess(workdir, server.url)

    def ensure_running(self) -> None:
        if not self.cm.process.alive():
            self.cm.start()
        if not self.scheduler.process.alive():
            self.scheduler.start()

    def stop(self) -> None:
        self.scheduler.stop()
        self.cm.stop()

    def logs(self) -> str:
        return (f"controller-manager:\n{self.cm.log_tail(30)}\nscheduler:\n"
                f"{self.scheduler.process.log_tail(30)}")


@pytest.fixture(scope="module")
def cluster(workdir: Path) -> Iterator[ApiServer]:
    """An etcd and an apiserver for this module alone."""
    home = workdir / "control-plane"
    home.mkdir(exist_ok=True)
    etcd = Etcd(home)
    server = ApiServer(home, etcd, "--etcd-compaction-interval", "0", "--watch-bookmark-interval", "1")
    try:
        etcd.start()
        server.start()
        with httpx.Client(base_url=server.url, timeout=10) as api:
            r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": "kube-node-lease"}})
            assert r.status_code in (201, 409), r.text  # the apiserver may make kube-node-lease itself
        yield server
    finally:
        server.stop()
        etcd.stop()


@pytest.fixture(scope="module")
def plane(workdir: Path, cluster: ApiServer) -> Iterator[Plane]:
    home = workdir / "control-plane"
    p = Plane(home, cluster)
    try:
        p.cm.start()
        p.scheduler.start()
        yield p
    finally:
        p.stop()


# -- watching -------------------------------------------------------------------------------------


class Watch:
    """A watch stream read on a background thread into a queue (None once it ended). Bookmarks, which
    this module's apiserver sends every second, let the thread notice `close()` within a second."""

    def __init__(self, url: str, path: str, resource_version: str) -> None:
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._closing = threading.Event()
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url, path, resource_version), daemon=True)
        self._thread.start()
        if not self._opened.wait(10):
            raise TimeoutError(f"watch of {path} did not answer within 10s")

    def _run(self, url: str, path: str, resource_version: str) -> None:
        params = {"watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": "60"}
        try:
            with httpx.Client(base_url=url, timeout=httpx.Timeout(10, read=30)) as client, \
                    client.stream("GET", path, params=params) as response:
                self._opened.set()
                for line in response.iter_lines():
                    if self._closing.is_set():
                        return
                    if line.strip():
                        self.events.put(json.loads(line))
        except httpx.HTTPError:
            pass
        finally:
            self._opened.set()
            self.events.put(None)

    def next(self, timeout: float) -> dict[str, Any] | None:
        """The next event other than a bookmark; None when the stream ended; TimeoutError if none came."""
        while True:
            try:
                event = self.events.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError from None
            if event is None or event["type"] != "BOOKMARK":
                return event

    def close(self) -> None:
        self._closing.set()
        self._thread.join(10)


# -- the kubelets, played by the test --------------------------------------------------------------


class Kubelets:
    """What the kubelets of the test's nodes write, from two background threads (see the module
    docstring). `errors` keeps what went wrong in them, for failure messages."""

    def __init__(self, url: str, namespace: str) -> None:
        self.url = url
        self.namespace = namespace
        self.live: set[str] = set()
        self.nodes: list[str] = []
        self.errors: list[str] = []
        self._marked: set[str] = set()  # pod uids reported Ready once
        self._closing = threading.Event()
        self._threads = [threading.Thread(target=self._guard, args=(self._heartbeats,), daemon=True),
                         threading.Thread(target=self._guard, args=(self._pods,), daemon=True)]
        for t in self._threads:
            t.start()

    def register(self, api: httpx.Client, name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
                 labels: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None) -> str:
        """A kubelet's registration: the Node with its capacity and Ready condition, then its Lease."""
        resources = {"cpu": cpu, "memory": memory, "pods": pods}
        t = now_time()
        conditions = [{"type": kind, "status": status, "reason": reason, "lastHeartbeatTime": t,
                       "lastTransitionTime": t}
                      for kind, status, reason in (("Ready", "True", "KubeletReady"),
                                                   ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                                                   ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                                                   ("PIDPressure", "False", "KubeletHasSufficientPID"))]
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                "spec": {"taints": taints} if taints else {},
                "status": {"capacity": resources, "allocatable": resources, "conditions": conditions}}
        ok(api.post("/api/v1/nodes", json=body))
        self.nodes.append(name)
        ok(api.post(LEASES, json={"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
                                  "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                                           "renewTime": now_micro()}}))
        self.live.add(name)
        return name

    def stop(self, name: str) -> None:
        """The kubelet of `name` goes silent: no more heartbeats, its pods left as they are."""
        self.live.discard(name)

    def close(self, api: httpx.Client) -> None:
        self._closing.set()
        for t in self._threads:
            t.join(15)
        for name in self.nodes:
            api.delete(f"{LEASES}/{name}")
            api.delete(f"/api/v1/nodes/{name}")

    # -- the threads ------------------------------------------------------------------------------

    def _guard(self, loop: Callable[[httpx.Client], None]) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as client:
            while not self._closing.is_set():
                try:
                    loop(client)
                except (httpx.HTTPError, ValueError, KeyError, AssertionError, RuntimeError, TimeoutError) as e:
                    self.errors.append(f"{loop.__name__}: {type(e).__name__}: {e}")
                    self._closing.wait(0.2)  # an actor's retry pace, not a synchronisation

    def _heartbeats(self, client: httpx.Client) -> None:
        while not self._closing.wait(0.5):  # the kubelet's pace
            for name in list(self.live):
                r = client.patch(f"{LEASES}/{name}", json={"spec": {"renewTime": now_micro()}},
                                 headers={"content-type": "application/merge-patch+json"})
                if r.status_code != 200:
                    self.errors.append(f"lease of {name}: {r.status_code} {r.text[:200]}")

    def _pods(self, client: httpx.Client) -> None:
        """List, then watch from the list's revision; handle every pod seen; relist when the stream ends."""
        path = pods_path(self.namespace)
        listed = ok(client.get(path))
        for pod in listed["items"]:
            self._handle(client, pod)
        stream = Watch(self.url, path, listed["metadata"]["resourceVersion"])
        try:
            while not self._closing.is_set():
                try:
                    event = stream.next(timeout=0.3)
                except TimeoutError:
                    continue
                if event is None or event["type"] == "ERROR":
                    return  # relist
                if event["type"] in ("ADDED", "MODIFIED"):
                    self._handle(client, event["object"])
        finally:
            stream.close()

    def _handle(self, client: httpx.Client, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node not in self.live:
            return
        path = pods_path(meta["namespace"], meta["name"])
        if meta.get("deletionTimestamp"):
            r = client.request("DELETE", path, json={"apiVersion": "v1", "kind": "DeleteOptions",
                                                     "gracePeriodSeconds": 0,
                                                     "preconditions": {"uid": meta["uid"]}})
            if r.status_code not in (200, 404, 409):
                self.errors.append(f"delete {meta['name']}: {r.status_code} {r.text[:200]}")
            return
        if is_ready(pod) or meta["uid"] in self._marked:
            return
        r = client.patch(path + "/status", json=pod_status(pod),
                         headers={"content-type": "application/merge-patch+json"})
        if r.status_code == 200:
            self._marked.add(meta["uid"])
        elif r.status_code != 404:
            self.errors.append(f"status of {meta['name']}: {r.status_code} {r.text[:200]}")


# -- one test's world -----------------------------------------------------------------------------


class Env:
    """A test's namespace, nodes and kubelets, and the API client it reads and writes with."""

    def __init__(self, plane: Plane, api: httpx.Client, namespace: str) -> None:
        self.plane = plane
        self.api = api
        self.ns = namespace
        self.run = uuid.uuid4().hex[:6]
        self.kubelets = Kubelets(str(api.base_url), namespace)

    def node(self, name: str, **kwargs: Any) -> str:
        return self.kubelets.register(self.api, f"{self.run}-{name}", **kwargs)

    def pods(self, selector: str | None = None) -> list[dict[str, Any]]:
        """Pods not being deleted."""
        params = {"labelSelector": selector} if selector else None
        items = ok(self.api.get(pods_path(self.ns), params=params))["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def all_pods(self) -> list[dict[str, Any]]:
        return ok(self.api.get(pods_path(self.ns)))["items"]

    def deployment(self, name: str) -> dict[str, Any]:
        return ok(self.api.get(d_path(self.ns, name)))

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return ok(self.api.post(d_path(self.ns), json=body, params={"fieldManager": "kubectl-client-side-apply"}))

    def wait_complete(self, name: str, timeout: float = 40.0, check: Callable[[], str | None] | None = None,
                      ) -> list[str]:
        """Wait until the rollout is complete and every live pod is bound and ready; sample `check`
        on every poll and return what it reported."""
        violations: list[str] = []

        def done() -> bool:
            if check is not None and (problem := check()):
                violations.append(problem)
            if not rollout_complete(self.api, self.ns, name):
                return False
            pods = self.pods(f"app={name}")
            return all(p["spec"].get("nodeName") and is_ready(p) for p in pods)

        wait_for(done, timeout, interval=0.05, what=f"deployment {name} to complete\n{self.diagnose()}")
        return violations

    def diagnose(self) -> str:
        pods = [(p["metadata"]["name"], p["spec"].get("nodeName"), is_ready(p), bool(p["metadata"].get(
            "deletionTimestamp"))) for p in self.all_pods()]
        return f"pods (name, node, ready, deleting): {pods}\nkubelet errors: {self.kubelets.errors[-5:]}\n" \
               f"{self.plane.logs()}"

    def cleanup(self) -> None:
        """Delete the namespace and wait until it is gone (removing pods whose kubelet is silent),
        then the nodes and leases."""
        try:
            self.api.delete(f"/api/v1/namespaces/{self.ns}")

            def gone() -> bool:
                self.api.request("DELETE", pods_path(self.ns), json={"apiVersion": "v1", "kind": "DeleteOptions",
                                                                    "gracePeriodSeconds": 0})
                return self.api.get(f"/api/v1/namespaces/{self.ns}").status_code == 404

            wait_for(gone, 30, interval=0.2, what=f"namespace {self.ns} to be deleted")
        finally:
            self.kubelets.close(self.api)


@pytest.fixture
def env(plane: Plane, cluster: ApiServer) -> Iterator[Env]:
    plane.ensure_running()
    with httpx.Client(base_url=cluster.url, timeout=10) as api:
        name = f"cp-{uuid.uuid4().hex[:8]}"
        ok(api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
        e = Env(plane, api, name)
        try:
            yield e
        finally:
            e.cleanup()


# -- manifests and readings -----------------------------------------------------------------------


def deployment(name: str, replicas: int = 3, image: str = "nginx:1.25", *, cpu: str = "100m", memory: str = "64Mi",
               strategy: dict[str, Any] | None = None, **pod_spec: Any) -> dict[str, Any]:
    container = {"name": "web", "image": image, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                            "template": {"metadata": {"labels": {"app": name}},
                                         "spec": {"containers": [container], **pod_spec}}}
    if strategy is not None:
        spec["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
            "spec": spec}


def nodes_of(pods: list[dict[str, Any]]) -> Counter[str]:
    return Counter(p["spec"].get("nodeName") or "" for p in pods)


def image_of(p: dict[str, Any]) -> str:
    return p["spec"]["containers"][0]["image"]


def bound_and_ready(pods: list[dict[str, Any]], count: int) -> bool:
    return len(pods) == count and all(p["spec"].get("nodeName") and is_ready(p) for p in pods)


class PodHistory:
    """Every pod of a namespace ever created, and every node each was bound to, from one watch
    opened before the work starts (so a pod created and deleted between two polls is counted too)."""

    def __init__(self, api: httpx.Client, namespace: str) -> None:
        listed = ok(api.get(pods_path(namespace)))
        assert listed["items"] == []
        self.stream = Watch(str(api.base_url), pods_path(namespace), listed["metadata"]["resourceVersion"])
        self.created: set[str] = set()
        self.nodes: dict[str, set[str]] = {}

    def drain(self, wait: float = 0.0) -> None:
        """Take in the events received so far (waiting up to `wait` seconds for the first)."""
        timeout = wait
        while True:
            try:
                event = self.stream.events.get(timeout=timeout) if timeout else self.stream.events.get_nowait()
            except queue.Empty:
                return
            timeout = 0.0
            if event is None:
                raise AssertionError("the watch of the pods ended early")
            if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            meta, spec = event["object"]["metadata"], event["object"].get("spec") or {}
            self.created.add(meta["uid"])
            if spec.get("nodeName"):
                self.nodes.setdefault(meta["uid"], set()).add(spec["nodeName"])

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        def check() -> bool:
            self.drain(0.05)
            return condition()

        wait_for(check, timeout, interval=0.0, what=what)

    def close(self) -> None:
        self.stream.close()


# -- tests ------------------------------------------------------------------------------------------


def test_deployment_becomes_a_hashed_replicaset_and_bound_pods_spread_over_nodes(env: Env) -> None:
    nodes = {env.node(n) for n in ("a", "b", "c")}
    body = deployment("web", 3)
    # kubectl apply --server-side: a Deployment that does not exist yet is created by the apply patch
    created = ok(env.api.patch(d_path(env.ns, "web"), json=body, params={"fieldManager": "kubectl", "force": "true"},
                               headers={"content-type": "application/apply-patch+yaml"}))
    template_hash = compute_hash(PodTemplateSpec.model_validate(created["spec"]["template"]))
    assert env.wait_complete("web") == []

    rss = replicasets(env.api, env.ns)
    assert [r["metadata"]["name"] for r in rss] == [f"web-{template_hash}"]
    rs_name = rss[0]["metadata"]["name"]
    assert rss[0]["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": template_hash}
    pods = env.pods()
    assert len(pods) == 3
    for p in pods:
        assert re.fullmatch(rf"{re.escape(rs_name)}-[a-z0-9]{{5}}", p["metadata"]["name"]), p["metadata"]["name"]
        assert [r["uid"] for r in p["metadata"]["ownerReferences"]] == [rss[0]["metadata"]["uid"]]
    assert set(nodes_of(pods)) == nodes and set(nodes_of(pods).values()) == {1}  # one per node

    d = env.deployment("web")
    assert d["status"]["availableReplicas"] == 3 and d["metadata"]["annotations"][REVISION] == "1"
    available = next(c for c in d["status"]["conditions"] if c["type"] == "Available")
    assert available["status"] == "True"
    # every actor left its events: the deployment controller, the replicaset controller, the scheduler
    wanted = {f"Successfully assigned {env.ns}/{p['metadata']['name']} to {p['spec']['nodeName']}" for p in pods}
    wait_for(lambda: {e["message"] for e in events(env.api, env.ns, "Scheduled")} == wanted, 15,
             what="a Scheduled event per pod")
    wait_for(lambda: len(events(env.api, env.ns, "SuccessfulCreate", rs_name)) == 3, 15, what="3 SuccessfulCreate")
    scaling = events(env.api, env.ns, "ScalingReplicaSet", "web")
    assert [e["message"] for e in scaling] == [f"Scaled up replica set {rs_name} to 3"]
    assert {e["source"]["component"] for e in events(env.api, env.ns, "Scheduled")} == {"default-scheduler"}


def test_scale_up_and_down(env: Env) -> None:
    nodes = {env.node(n) for n in ("a", "b", "c")}
    env.create(deployment("web", 3))
    assert env.wait_complete("web") == []
    # kubectl scale: the scale subresource
    ok(env.api.put(d_path(env.ns, "web") + "/scale", json={
        "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": env.ns},
        "spec": {"replicas": 9}}))
    assert env.wait_complete("web") == []
    pods = env.pods()
    assert len(pods) == 9 and nodes_of(pods) == Counter(dict.fromkeys(nodes, 3))
    merge_patch(env.api, d_path(env.ns, "web"), {"spec": {"replicas": 2}})
    assert env.wait_complete("web") == []
    wait_for(lambda: len(env.all_pods()) == 2, 15, what="the scaled-down pods to be gone")
    assert len(replicasets(env.api, env.ns)) == 1
    # upstream ranks scale-down victims once (co-located replicas, then readiness and age): ties
    # may leave both survivors on one node, so spread after a scale-down is not promised
    assert {p["spec"]["nodeName"] for p in env.pods()} <= nodes


def test_rolling_update_stays_within_max_surge_and_max_unavailable(env: Env) -> None:
    for n in ("a", "b", "c"):
        env.node(n)
    replicas, surge, unavailable = 6, 2, 1
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}
    env.create(deployment("web", replicas, "nginx:1.25", strategy=strategy))
    assert env.wait_complete("web") == []
    set_image(env.api, env.ns, "web", "nginx:1.26")
    totals: list[int] = []

    def bounds() -> str | None:
        pods = env.pods("app=web")  # one list: a consistent snapshot
        available = sum(1 for p in pods if is_ready(p))
        totals.append(len(pods))
        if len(pods) > replicas + surge:
            return f"{len(pods)} pods > {replicas} + {surge}"
        if available < replicas - unavailable:
            return f"{available} available < {replicas} - {unavailable}"
        return None

    assert env.wait_complete("web", check=bounds) == []
    pods = env.pods("app=web")
    assert len(pods) == replicas and {image_of(p) for p in pods} == {"nginx:1.26"}
    assert max(totals) > replicas  # it did surge, and the samples saw it
    old, new = replicasets(env.api, env.ns)
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, replicas)
    assert new["metadata"]["annotations"][REVISION] == "2"


def test_rollback_with_kubectl_rollout_undo_patch_restores_the_previous_template(env: Env) -> None:
    for n in ("a", "b"):
        env.node(n)
    env.create(deployment("web", 4, "nginx:1.25"))
    assert env.wait_complete("web") == []
    set_image(env.api, env.ns, "web", "nginx:1.26")
    assert env.wait_complete("web") == []
    first, second = replicasets(env.api, env.ns)

    # kubectl rollout undo (polymorphichelpers DeploymentRollbacker): the previous revision's template without
    # its pod-template-hash label, and the annotations, as one JSON patch
    skip = {"kubectl.kubernetes.io/last-applied-configuration", REVISION, "deployment.kubernetes.io/revision-history",
            "deployment.kubernetes.io/desired-replicas", "deployment.kubernetes.io/max-replicas",
            "deprecated.deployment.rollback.to"}
    current = env.deployment("web")
    annotations = {k: v for k, v in (current["metadata"].get("annotations") or {}).items() if k in skip}
    annotations |= {k: v for k, v in (first["metadata"].get("annotations") or {}).items() if k not in skip}
    template = first["spec"]["template"]
    del template["metadata"]["labels"]["pod-template-hash"]
    ok(env.api.patch(d_path(env.ns, "web"), json=[{"op": "replace", "path": "/spec/template", "value": template},
                                                  {"op": "replace", "path": "/metadata/annotations",
                                                   "value": annotations}],
                     headers={"content-type": "application/json-patch+json"}))
    assert env.wait_complete("web") == []

    rss = {r["metadata"]["name"]: r for r in replicasets(env.api, env.ns)}
    assert set(rss) == {first["metadata"]["name"], second["metadata"]["name"]}  # the old one came back
    back = rss[first["metadata"]["name"]]
    assert back["metadata"]["annotations"][REVISION] == "3"
    assert (back["spec"]["replicas"], rss[second["metadata"]["name"]]["spec"]["replicas"]) == (4, 0)
    assert env.deployment("web")["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    pods = env.pods()
    assert len(pods) == 4 and {image_of(p) for p in pods} == {"nginx:1.25"}
    assert {p["metadata"]["labels"]["pod-template-hash"] for p in pods} == {
        first["metadata"]["labels"]["pod-template-hash"]}


@pytest.mark.parametrize("policy", ["Background", "Foreground", "Orphan"])
def test_deleting_a_deployment_cascades(env: Env, policy: str) -> None:
    for n in ("a", "b"):
        env.node(n)
    env.create(deployment("web", 4))
    assert env.wait_complete("web") == []
    rs_uid = replicasets(env.api, env.ns)[0]["metadata"]["uid"]
    pod_uids = {p["metadata"]["uid"] for p in env.pods()}
    r = env.api.request("DELETE", d_path(env.ns, "web"), json={"apiVersion": "v1", "kind": "DeleteOptions",
                                                                 "propagationPolicy": policy})
    assert r.status_code in (200, 202), r.text
    seen_waiting: list[bool] = []

    def deployment_gone() -> bool:
        got = env.api.get(d_path(env.ns, "web"))
        if got.status_code == 200:  # foreground: the owner waits, finalizer on, for its dependents
            seen_waiting.append("foregroundDeletion" in (got.json()["metadata"].get("finalizers") or []))
            return False
        assert got.status_code == 404, got.text
        if policy == "Foreground":  # gone only after every dependent is
            assert env.all_pods() == [] and replicasets(env.api, env.ns) == []
        return True

    wait_for(deployment_gone, 30, what=f"the Deployment to go ({policy})\n{env.diagnose()}")
    if policy == "Orphan":
        rss = replicasets(env.api, env.ns)
        wait_for(lambda: not replicasets(env.api, env.ns)[0]["metadata"].get("ownerReferences"), 15,
                 what="the ReplicaSet to be orphaned")
        assert [r["metadata"]["uid"] for r in rss] == [rs_uid]
        assert {p["metadata"]["uid"] for p in env.pods()} == pod_uids  # the pods stay, still the RS's
    else:
        wait_for(lambda: replicasets(env.api, env.ns) == [] and env.all_pods() == [], 30,
                 what=f"the ReplicaSet and pods to go ({policy})\n{env.diagnose()}")
    if policy == "Foreground":
        assert seen_waiting and all(seen_waiting)


def test_a_pod_that_fits_nowhere_waits_and_is_bound_once_a_node_with_room_appears(env: Env) -> None:
    small = [env.node(n, cpu="1") for n in ("a", "b")]
    assert {n["metadata"]["name"] for n in ok(env.api.get("/api/v1/nodes"))["items"]} == set(small)
    env.create(deployment("big", 1, cpu="2"))
    pod = wait_for(lambda: next(iter(env.pods()), None), 15, what="the pod")
    assert isinstance(pod, dict)
    name = pod["metadata"]["name"]
    message = ("0/2 nodes are available: 2 Insufficient cpu. "
               "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    wait_for(lambda: any(e["message"] == message for e in events(env.api, env.ns, "FailedScheduling", name)), 15,
             what=f"FailedScheduling on {name}\n{env.diagnose()}")
    condition = next(c for c in ok(env.api.get(pods_path(env.ns, name)))["status"]["conditions"]
                     if c["type"] == "PodScheduled")
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", message)
    assert not ok(env.api.get(pods_path(env.ns, name)))["spec"].get("nodeName")

    roomy = env.node("c", cpu="4")
    assert env.wait_complete("big") == []
    assert [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in env.pods()] == [(name, roomy)]


def test_taints_and_node_selector_are_respected(env: Env) -> None:
    tainted = env.node("gpu", labels={"accelerator": "gpu"},
                       taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    ssd = env.node("ssd", labels={"disk": "ssd"})
    plain = env.node("plain")
    env.create(deployment("fast", 3, nodeSelector={"disk": "ssd"}))
    env.create(deployment("any", 6))
    env.create(deployment("ml", 2, nodeSelector={"accelerator": "gpu"},
                          tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                        "effect": "NoSchedule"}]))
    env.create(deployment("stuck", 1, nodeSelector={"accelerator": "gpu"}))  # no toleration: nowhere to go
    for name in ("fast", "any", "ml"):
        assert env.wait_complete(name) == []
    assert nodes_of(env.pods("app=fast")) == Counter({ssd: 3})
    assert set(nodes_of(env.pods("app=any"))) <= {ssd, plain}  # never the tainted node
    assert nodes_of(env.pods("app=ml")) == Counter({tainted: 2})
    [stuck] = env.pods("app=stuck")
    message = ("0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 node(s) didn't match "
               "Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for "
               "scheduling.")
    wait_for(lambda: any(e["message"] == message
                         for e in events(env.api, env.ns, "FailedScheduling", stuck["metadata"]["name"])), 15,
             what="FailedScheduling of the pod that does not tolerate the taint")
    assert not ok(env.api.get(pods_path(env.ns, stuck["metadata"]["name"])))["spec"].get("nodeName")


def test_a_silent_node_is_tainted_and_its_pods_are_replaced_on_the_other_node(env: Env) -> None:
    a, b = env.node("a"), env.node("b")
    env.create(deployment("web", 4))
    assert env.wait_complete("web") == []
    on_a = {p["metadata"]["uid"] for p in env.pods() if p["spec"]["nodeName"] == a}
    assert len(on_a) == 2 and nodes_of(env.pods()) == Counter({a: 2, b: 2})

    env.kubelets.stop(a)  # the kubelet of A stops renewing its Lease (and reporting anything)

    def tainted() -> bool:
        node = ok(env.api.get(f"/api/v1/nodes/{a}"))
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        taints = {(t["key"], t["effect"]) for t in node["spec"].get("taints") or []}
        return ready["status"] == "Unknown" and {(UNREACHABLE, "NoExecute"), (UNREACHABLE, "NoSchedule")} <= taints

    wait_for(tainted, 20, what=f"node {a} to be Unknown and tainted unreachable\n{env.diagnose()}")

    def replaced() -> bool:
        pods = env.pods()
        return bound_and_ready(pods, 4) and nodes_of(pods) == Counter({b: 4})

    wait_for(replaced, 30, what=f"4 ready pods on {b}\n{env.diagnose()}")
    # A's pods were evicted: deleted (left terminating, since A's kubelet cannot confirm), not recreated there
    left = {p["metadata"]["uid"]: p for p in env.all_pods() if p["metadata"]["uid"] in on_a}
    assert all(p["metadata"].get("deletionTimestamp") for p in left.values())
    evictions = events(env.api, env.ns, "TaintManagerEviction")
    assert {e["involvedObject"]["uid"] for e in evictions} == on_a
    assert env.wait_complete("web") == []


def _kill_mid_work_and_restart(env: Env, component: str) -> None:
    for n in ("a", "b", "c"):
        env.node(n)
    replicas = 45
    history = PodHistory(env.api, env.ns)
    try:
        env.create(deployment("web", replicas))
        if component == "controller-manager":
            history.wait(lambda: len(history.created) >= 1, 15, "the first pod to be created")
            assert len(history.created) < replicas, "too late to kill the controller-manager mid-work"
            env.plane.cm.kill()
            env.plane.cm.start()
        else:
            history.wait(lambda: len(history.nodes) >= 1, 15, "the first pod to be bound")
            assert len(history.nodes) < replicas, "too late to kill the scheduler mid-work"
            env.plane.scheduler.kill()
            env.plane.scheduler.start()
        assert env.wait_complete("web", timeout=60) == []
        pods = env.pods()
        assert bound_and_ready(pods, replicas)
        assert len(replicasets(env.api, env.ns)) == 1
        history.drain()
        # the same end as an undisturbed run: exactly `replicas` pods were ever made, each bound once, for good
        assert len(history.created) == replicas, f"{len(history.created)} pods were created for {replicas} replicas"
        assert all(len(nodes) == 1 for nodes in history.nodes.values())
        assert set(history.nodes) == {p["metadata"]["uid"] for p in pods}
        counts = nodes_of(pods).values()
        assert max(counts) - min(counts) <= 3, nodes_of(pods)  # still spread
        rs_name = replicasets(env.api, env.ns)[0]["metadata"]["name"]
        assert events(env.api, env.ns, "SuccessfulDelete", rs_name) == []  # nothing over-made was taken back
    finally:
        history.close()


def test_killing_the_controller_manager_mid_work_ends_the_same_without_extra_pods(env: Env) -> None:
    _kill_mid_work_and_restart(env, "controller-manager")


def test_killing_the_scheduler_mid_work_ends_the_same_without_extra_pods(env: Env) -> None:
    _kill_mid_work_and_restart(env, "scheduler")


def test_the_kubelets_had_nothing_to_complain_about(env: Env) -> None:
    """The actor itself works: a node registers, its lease is renewed, a pod bound to it gets ready."""
    node = env.node("a")
    env.create(deployment("web", 1))
    assert env.wait_complete("web") == []
    lease = ok(env.api.get(f"{LEASES}/{node}"))
    first = lease["spec"]["renewTime"]
    wait_for(lambda: ok(env.api.get(f"{LEASES}/{node}"))["spec"]["renewTime"] != first, 5, what="a lease renewal")
    assert env.kubelets.errors == []
