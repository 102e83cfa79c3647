"""Node IPAM and node lifecycle as a real process, against their own etcd and apiserver (Nodes are
cluster-scoped: a cluster of their own keeps other tests' nodes out of the subnet counts).

There is no kubelet: the tests act as one, through the API, exactly as a kubelet would — they
register Node objects, post Node status (conditions with lastHeartbeatTime) through
nodes/{name}/status, renew the node's Lease in kube-node-lease, and report pods Ready through
pods/{name}/status. The controllers run with short periods (grace 3s, eviction 3s)."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, Etcd, wait_for
from tests.controller_process import ControllerProcess
from tests.manifests import pod

CLUSTER_CIDR = "10.244.0.0/22"  # 4 subnets of /24: small enough to run out of
FLAGS = ("--cluster-cidr", CLUSTER_CIDR, "--node-cidr-mask-size", "24",
         "--node-monitor-grace-period", "3s", "--node-startup-grace-period", "3s",
         "--node-monitor-period", "500ms", "--pod-eviction-timeout", "3s")
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@pytest.fixture(scope="module")
def cluster(workdir: Path) -> Iterator[ApiServer]:
    """An etcd and an apiserver for this module alone."""
    home = workdir / "node-controllers"
    home.mkdir(exist_ok=True)
    etcd = Etcd(home)
    server = ApiServer(home, etcd, "--etcd-compaction-interval", "0", "--watch-bookmark-interval", "1")
    try:
        etcd.start()
        server.start()
        with httpx.Client(base_url=server.url, timeout=10) as api:
            for ns in ("kube-node-lease", "work"):
                r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": ns}})
                assert r.status_code in (201, 409), r.text  # the apiserver makes kube-node-lease itself
        yield server
    finally:
        server.stop()
        etcd.stop()


@pytest.fixture(scope="module")
def controllers(workdir: Path, cluster: ApiServer) -> Iterator[ControllerProcess]:
    process = ControllerProcess(workdir / "node-controllers", cluster.url, ["nodeipam", "nodelifecycle"], *FLAGS)
    try:
        process.start()
        yield process
    finally:
        process.stop()


@pytest.fixture
def api(cluster: ApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.url, timeout=10) as client:
        yield client


@pytest.fixture
def kubelets(api: httpx.Client) -> Iterator[list[Kubelet]]:
    """Kubelets a test starts; their nodes, leases and pods are removed afterwards."""
    started: list[Kubelet] = []
    yield started
    for k in started:
        k.stop_heartbeats()
    for k in started:
        k.remove()


# -- a kubelet, played by the test ------------------------------------------------------------


def now_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Kubelet:
    """What a kubelet writes: the Node, its status and heartbeat, its Lease, its pods' status."""

    def __init__(self, api: httpx.Client, name: str | None = None) -> None:
        self.api = api
        self.name = name or f"node-{uuid.uuid4().hex[:6]}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.pods: list[str] = []

    # node and status
    def register(self, ready: str | None = "True", lease: bool = True, **spec: Any) -> dict[str, Any]:
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.name, "labels": {"kubernetes.io/hostname": self.name}}, "spec": spec}
        r = self.api.post("/api/v1/nodes", json=body)
        assert r.status_code == 201, r.text
        if ready is not None:
            self.post_status(ready)
        if lease:
            self.renew_lease()
        return self.node()

    def node(self) -> dict[str, Any]:
        r = self.api.get(f"/api/v1/nodes/{self.name}")
        assert r.status_code == 200, r.text
        return r.json()

    def post_status(self, ready: str = "True") -> None:
        """The kubelet's node status update: every condition with a fresh lastHeartbeatTime."""
        for _ in range(10):
            node = self.node()
            now = now_time()
            old = {c["type"]: c for c in (node.get("status") or {}).get("conditions") or []}
            wanted = {"Ready": (ready, "KubeletReady" if ready == "True" else "KubeletNotReady"),
                      "MemoryPressure": ("False", "KubeletHasSufficientMemory"),
                      "DiskPressure": ("False", "KubeletHasNoDiskPressure"),
                      "PIDPressure": ("False", "KubeletHasSufficientPID")}
            node.setdefault("status", {})["conditions"] = [
                {"type": t, "status": s, "reason": reason, "message": f"kubelet says {reason}",
                 "lastHeartbeatTime": now,
                 "lastTransitionTime": old[t]["lastTransitionTime"] if t in old and old[t]["status"] == s else now}
                for t, (s, reason) in wanted.items()]
            r = self.api.put(f"/api/v1/nodes/{self.name}/status", json=node)
            if r.status_code != 409:
                assert r.status_code == 200, r.text
                return
        raise AssertionError("node status kept conflicting")

    def renew_lease(self) -> None:
        path = f"{LEASES}/{self.name}"
        r = self.api.get(path)
        if r.status_code == 404:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": self.name},
                    "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 40, "renewTime": now_micro()}}
            r = self.api.post(LEASES, json=body)
            assert r.status_code == 201, r.text
            return
        lease = r.json()
        lease["spec"]["renewTime"] = now_micro()
        r = self.api.put(path, json=lease)
        assert r.status_code in (200, 409), r.text

    def heartbeat_in_background(self, interval: float = 0.5) -> None:
        """Renew the Lease every `interval` seconds until stop_heartbeats() (the kubelet's pace, not
        a synchronisation)."""
        def loop() -> None:
            with httpx.Client(base_url=str(self.api.base_url), timeout=10) as client:
                me = Kubelet(client, self.name)
                while not self._stop.wait(interval):
                    with contextlib.suppress(httpx.HTTPError, AssertionError):  # next beat tries again
                        me.renew_lease()
        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop_heartbeats(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._stop = threading.Event()
        self._thread = None

    # pods
    def run_pod(self, name: str, ready: bool = True, tolerations: list[dict[str, Any]] | None = None) -> None:
        spec: dict[str, Any] = {"nodeName": self.name}
        if tolerations:
            spec["tolerations"] = tolerations
        r = self.api.post("/api/v1/namespaces/work/pods", json=pod(name, **spec))
        assert r.status_code == 201, r.text
        self.pods.append(name)
        if ready:
            p = r.json()
            p["status"] = {"phase": "Running", "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now_time()}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]}
            r = self.api.put(f"/api/v1/namespaces/work/pods/{name}/status", json=p)
            assert r.status_code == 200, r.text

    def remove(self) -> None:
        for name in self.pods:
            self.api.request("DELETE", f"/api/v1/namespaces/work/pods/{name}",
                             json={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
        self.api.delete(f"{LEASES}/{self.name}")
        self.api.delete(f"/api/v1/nodes/{self.name}")


# -- reading the results ----------------------------------------------------------------------


def conditions(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (node.get("status") or {}).get("conditions") or []}


def taints(node: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in (node.get("spec") or {}).get("taints") or []}


def node_if(k: Kubelet, test: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    node = k.node()
    return node if test(node) else None


def events_about(api: httpx.Client, name: str, namespace: str = "default") -> list[dict[str, Any]]:
    items = api.get(f"/api/v1/namespaces/{namespace}/events").json()["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def get_pod(api: httpx.Client, name: str) -> dict[str, Any] | None:
    r = api.get(f"/api/v1/namespaces/work/pods/{name}")
    return r.json() if r.status_code == 200 else None


def evicted(api: httpx.Client, name: str) -> bool:
    """Deleted: gone, or (bound to a node whose kubelet is silent) terminating."""
    p = get_pod(api, name)
    return p is None or bool(p["metadata"].get("deletionTimestamp"))


UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"


# -- node IPAM --------------------------------------------------------------------------------


def pod_cidr(k: Kubelet) -> str | None:
    spec = k.node()["spec"]
    if spec.get("podCIDR"):
        assert spec["podCIDRs"] == [spec["podCIDR"]]
    return spec.get("podCIDR")


def test_every_node_gets_its_own_subnet_once(api: httpx.Client, controllers: ControllerProcess,
                                             kubelets: list[Kubelet]) -> None:
    nodes = [Kubelet(api) for _ in range(3)]
    kubelets.extend(nodes)
    for k in nodes:
        k.register()
    cidrs = [wait_for(lambda k=k: pod_cidr(k), 10, what=f"podCIDR of {k.name}\n{controllers.log_tail()}")
             for k in nodes]
    assert len(set(cidrs)) == 3
    for c in cidrs:
        net = ipaddress.ip_network(c)
        assert net.prefixlen == 24 and net.subnet_of(ipaddress.ip_network(CLUSTER_CIDR))
    # set once: the apiserver refuses a change, and the controller never tries one
    node = nodes[0].node()
    node["spec"]["podCIDR"], node["spec"]["podCIDRs"] = "10.244.3.0/24", ["10.244.3.0/24"]
    assert api.put(f"/api/v1/nodes/{nodes[0].name}", json=node).status_code == 422
    nodes[0].post_status()
    assert pod_cidr(nodes[0]) == cidrs[0]


def test_range_runs_out_and_a_deleted_node_frees_its_subnet(api: httpx.Client, controllers: ControllerProcess,
                                                            kubelets: list[Kubelet]) -> None:
    nodes = [Kubelet(api) for _ in range(4)]
    kubelets.extend(nodes)
    for k in nodes:
        k.register()
    cidrs = {k.name: wait_for(lambda k=k: pod_cidr(k), 10, what=f"podCIDR of {k.name}") for k in nodes}
    assert len(set(cidrs.values())) == 4

    late = Kubelet(api)
    kubelets.append(late)
    late.register()
    wait_for(lambda: any(e["reason"] == "CIDRNotAvailable" for e in events_about(api, late.name)), 10,
             what=f"CIDRNotAvailable event\n{controllers.log_tail()}")
    event = next(e for e in events_about(api, late.name) if e["reason"] == "CIDRNotAvailable")
    assert event["message"] == f"Node {late.name} status is now: CIDRNotAvailable"
    assert event["source"]["component"] == "node-controller"
    assert pod_cidr(late) is None

    gone = nodes[1]
    gone.remove()
    assert wait_for(lambda: pod_cidr(late), 10, what=f"the freed subnet reused\n{controllers.log_tail()}") \
        == cidrs[gone.name]


def test_restart_rebuilds_allocations_from_the_nodes(api: httpx.Client, controllers: ControllerProcess,
                                                     kubelets: list[Kubelet]) -> None:
    first = [Kubelet(api) for _ in range(2)]
    kubelets.extend(first)
    for k in first:
        k.register()
    held = {wait_for(lambda k=k: pod_cidr(k), 10, what="podCIDR") for k in first}
    controllers.kill()  # a crash, not a clean stop
    try:
        preset = Kubelet(api)  # a node whose subnet someone else chose
        kubelets.append(preset)
        free = next(str(n) for n in ipaddress.ip_network(CLUSTER_CIDR).subnets(new_prefix=24) if str(n) not in held)
        preset.register(podCIDR=free, podCIDRs=[free])
        newcomer = Kubelet(api)
        kubelets.append(newcomer)
        newcomer.register()
    finally:
        controllers.start()
    got = wait_for(lambda: pod_cidr(newcomer), 10, what=f"podCIDR after restart\n{controllers.log_tail()}")
    assert got not in held | {free}
    assert pod_cidr(preset) == free
    assert {pod_cidr(k) for k in first} == held


# -- node lifecycle ---------------------------------------------------------------------------


def test_silent_node_goes_unknown_is_tainted_and_its_pods_are_evicted(
        api: httpx.Client, controllers: ControllerProcess, kubelets: list[Kubelet]) -> None:
    alive, dead = Kubelet(api), Kubelet(api)
    kubelets.extend([alive, dead])
    alive.register()
    dead.register()
    alive.heartbeat_in_background()  # only its Lease: its Ready heartbeat time grows old, which is fine
    dead.run_pod("plain")
    dead.run_pod("tolerant", tolerations=[{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}])
    dead.run_pod("patient", tolerations=[{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                                          "tolerationSeconds": 3600}])
    alive.run_pod("safe")

    node = wait_for(lambda: node_if(dead, lambda n: conditions(n)["Ready"]["status"] == "Unknown"), 15,
                    what=f"Ready=Unknown on the silent node\n{controllers.log_tail()}")
    ready = conditions(node)["Ready"]
    assert ready["reason"] == "NodeStatusUnknown" and ready["message"] == "Kubelet stopped posting node status."
    for t in ("MemoryPressure", "DiskPressure", "PIDPressure"):
        assert conditions(node)[t]["status"] == "Unknown" and conditions(node)[t]["reason"] == "NodeStatusUnknown"
    node = wait_for(lambda: node_if(dead, lambda n: {(UNREACHABLE, "NoExecute"), (UNREACHABLE, "NoSchedule")}
                                    <= taints(n)), 10, what="unreachable taints")
    no_execute = next(t for t in node["spec"]["taints"] if t["effect"] == "NoExecute")
    assert no_execute["timeAdded"]
    wait_for(lambda: any(e["reason"] == "NodeNotReady" for e in events_about(api, dead.name)), 10,
             what="NodeNotReady event")
    assert next(e for e in events_about(api, dead.name) if e["reason"] == "NodeNotReady")["message"] == \
        f"Node {dead.name} status is now: NodeNotReady"

    # its pods are not Ready any more, and after the eviction timeout the intolerant one is deleted
    plain = get_pod(api, "plain")
    assert plain is not None
    wait_for(lambda: {c["type"]: c["status"] for c in get_pod(api, "plain")["status"]["conditions"]}["Ready"]
             == "False", 10, what="pod marked not ready")
    wait_for(lambda: evicted(api, "plain"), 15, what=f"the intolerant pod evicted\n{controllers.log_tail()}")
    assert any(e["reason"] == "TaintManagerEviction" and e["message"] == "Marking for deletion Pod work/plain"
               for e in events_about(api, "plain", "work"))
    assert not evicted(api, "tolerant") and not evicted(api, "patient")  # decided in the same pass

    # the node with a fresh Lease stayed healthy all along
    healthy = alive.node()
    assert conditions(healthy)["Ready"]["status"] == "True" and not taints(healthy)
    assert not evicted(api, "safe")

    # the kubelet comes back: the taints go
    dead.post_status("True")
    dead.renew_lease()
    wait_for(lambda: not taints(dead.node()), 10, what=f"taints removed on recovery\n{controllers.log_tail()}")
    assert conditions(dead.node())["Ready"]["status"] == "True"


def test_kubelet_reporting_not_ready_gives_not_ready_taints(
        api: httpx.Client, controllers: ControllerProcess, kubelets: list[Kubelet]) -> None:
    k = Kubelet(api)
    kubelets.append(k)
    k.register()
    k.heartbeat_in_background()
    k.post_status("False")
    wait_for(lambda: taints(k.node()) == {(NOT_READY, "NoExecute"), (NOT_READY, "NoSchedule")}, 10,
             what=f"not-ready taints\n{controllers.log_tail()}")
    assert conditions(k.node())["Ready"]["status"] == "False"  # the kubelet's word stands: it is heartbeating
    k.post_status("True")
    wait_for(lambda: not taints(k.node()), 10, what="not-ready taints removed")


def test_a_node_that_never_posts_status(api: httpx.Client, controllers: ControllerProcess,
                                        kubelets: list[Kubelet]) -> None:
    k = Kubelet(api)
    kubelets.append(k)
    k.register(ready=None, lease=False)
    node = wait_for(lambda: node_if(k, lambda n: "Ready" in conditions(n)), 15,
                    what=f"conditions written by the controller\n{controllers.log_tail()}")
    for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
        c = conditions(node)[t]
        assert (c["status"], c["reason"], c["message"]) == \
            ("Unknown", "NodeStatusNeverUpdated", "Kubelet never posted node status.")
    wait_for(lambda: (UNREACHABLE, "NoExecute") in taints(k.node()), 10, what="unreachable taint")


def test_cordoned_node_gets_the_unschedulable_taint(api: httpx.Client, controllers: ControllerProcess,
                                                    kubelets: list[Kubelet]) -> None:
    k = Kubelet(api)
    kubelets.append(k)
    k.register(unschedulable=True)
    k.heartbeat_in_background()
    wait_for(lambda: taints(k.node()) == {("node.kubernetes.io/unschedulable", "NoSchedule")}, 10,
             what=f"unschedulable taint\n{controllers.log_tail()}")
    r = api.patch(f"/api/v1/nodes/{k.name}", json={"spec": {"unschedulable": False}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    wait_for(lambda: not taints(k.node()), 10, what="unschedulable taint removed")


def test_a_taint_set_by_someone_else_is_kept(api: httpx.Client, controllers: ControllerProcess,
                                             kubelets: list[Kubelet]) -> None:
    k = Kubelet(api)
    kubelets.append(k)
    k.register(taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    k.post_status("False")
    k.heartbeat_in_background()
    wait_for(lambda: (NOT_READY, "NoSchedule") in taints(k.node()), 10, what="not-ready taint")
    assert ("dedicated", "NoSchedule") in taints(k.node())
    k.post_status("True")
    wait_for(lambda: taints(k.node()) == {("dedicated", "NoSchedule")}, 10, what="only the other taint left")


# -- the lifecycle's pure rules (no cluster needed) -------------------------------------------


def _pod(*tolerations: dict[str, Any]) -> Any:
    from machinery.api.core_v1 import Pod

    return Pod.model_validate(pod("p", tolerations=list(tolerations)))


def _taint(key: str, effect: str = "NoExecute", value: str | None = None) -> Any:
    from machinery.api.core_v1 import Taint

    return Taint(key=key, effect=effect, value=value)


def test_eviction_delay_follows_tolerations() -> None:
    import math

    from controllers.node_lifecycle import eviction_delay

    unreachable = _taint(UNREACHABLE)
    assert eviction_delay(_pod(), unreachable, 300) == 300  # the default toleration upstream's admission adds
    assert eviction_delay(_pod(), _taint("custom"), 300) == 0  # any other NoExecute taint: at once
    assert eviction_delay(_pod({"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}),
                          unreachable, 300) == math.inf
    assert eviction_delay(_pod({"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 60}), unreachable, 300) == 60
    assert eviction_delay(_pod({"operator": "Exists"}), _taint("custom"), 300) == math.inf  # tolerates everything
    assert eviction_delay(_pod({"key": "custom", "operator": "Equal", "value": "a", "effect": "NoExecute"}),
                          _taint("custom", value="b"), 300) == 0  # another value: not tolerated
    assert eviction_delay(_pod({"key": "custom", "value": "b"}), _taint("custom", value="b"), 300) == math.inf
    assert eviction_delay(_pod({"key": UNREACHABLE, "operator": "Exists", "effect": "NoSchedule"}),
                          unreachable, 300) == 300  # wrong effect: not tolerated


def test_taint_reconciliation_keeps_foreign_taints_and_time_added() -> None:
    from controllers.node_lifecycle import reconcile_taints

    foreign = _taint("dedicated", "NoSchedule", "gpu")
    old = _taint(UNREACHABLE)
    old.time_added = "2026-01-01T00:00:00Z"
    wanted = {(UNREACHABLE, "NoExecute"), (UNREACHABLE, "NoSchedule")}
    got = reconcile_taints([foreign, old], wanted, "2026-06-01T00:00:00Z")
    assert got is not None
    assert [(t.key, t.effect, t.time_added) for t in got] == [
        ("dedicated", "NoSchedule", None), (UNREACHABLE, "NoExecute", "2026-01-01T00:00:00Z"),
        (UNREACHABLE, "NoSchedule", None)]
    assert reconcile_taints(got, wanted, "later") is None
    assert [t.key for t in reconcile_taints(got, set(), "later") or []] == ["dedicated"]
