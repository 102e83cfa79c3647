"""The real scheduler process (`python -m scheduler --master URL`) against the session's apiserver.

There are no kubelets yet: each test registers Node objects itself, with status.allocatable and a
Ready condition, acting as the kubelets would. Isolation from other tests on the shared apiserver:
the module's scheduler only takes pods with its own `--scheduler-name`, and every test pod selects
(nodeSelector) the label of the nodes its test created; nodes are deleted afterwards.
"""

from __future__ import annotations

import concurrent.futures
import re
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from machinery.quantity import parse_quantity
from tests.cluster import ApiServer, Process, wait_for

RUN_LABEL = "minik8s.test/scheduler-run"


def start_scheduler(apiserver: ApiServer, workdir: Path, name: str | None) -> Process:
    # no leader election: schedulers of other names run at once here, and a restart must not wait out a Lease
    argv = [sys.executable, "-m", "scheduler", "--master", apiserver.url, "-v", "2", "--leader-elect=false",
            "--secure-port=0"]
    if name:
        argv += ["--scheduler-name", name]
    process = Process("scheduler", argv, workdir / f"scheduler-{name or 'default'}-{uuid.uuid4().hex[:6]}.log")
    process.start()
    return process


@pytest.fixture(scope="module")
def scheduler_name() -> str:
    return f"test-scheduler-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def scheduler(apiserver: ApiServer, workdir: Path, scheduler_name: str) -> Iterator[Process]:
    process = start_scheduler(apiserver, workdir, scheduler_name)
    try:
        yield process
    finally:
        process.stop()


class Cluster:
    """What one test creates: nodes carrying its run label, pods selecting them."""

    def __init__(self, api: httpx.Client, namespace: str, scheduler: Process, scheduler_name: str | None) -> None:
        self.api = api
        self.namespace = namespace
        self.scheduler = scheduler
        self.scheduler_name = scheduler_name
        self.run = uuid.uuid4().hex[:8]
        self.nodes: list[str] = []

    # -- nodes, as a kubelet would register them ------------------------------------------

    def node(self, name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
             labels: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None,
             unschedulable: bool = False, ready: str = "True") -> str:
        full = f"{self.run}-{name}"
        resources = {"cpu": cpu, "memory": memory, "pods": pods}
        spec: dict[str, Any] = {}
        if taints:
            spec["taints"] = taints
        if unschedulable:
            spec["unschedulable"] = True
        body = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": full, "labels": {RUN_LABEL: self.run, "kubernetes.io/hostname": full,
                                                  **(labels or {})}},
            "spec": spec,
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady"}]},
        }
        r = self.api.post("/api/v1/nodes", json=body)
        assert r.status_code == 201, r.text
        self.nodes.append(full)
        return full

    def cleanup(self) -> None:
        self.api.request("DELETE", f"/api/v1/namespaces/{self.namespace}/pods",
                         json={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
        for name in self.nodes:
            self.api.delete(f"/api/v1/nodes/{name}")

    # -- pods -------------------------------------------------------------------------------

    def pod_body(self, name: str, *, cpu: str | None = None, memory: str | None = None,
                 node_selector: dict[str, str] | None = None, host_port: int | None = None,
                 owner: dict[str, Any] | None = None, scheduler_name: str | None = None,
                 **spec: Any) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": "nginx:1.25"}
        requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
        if requests:
            container["resources"] = {"requests": requests}
        if host_port:
            container["ports"] = [{"containerPort": 80, "hostPort": host_port}]
        meta: dict[str, Any] = {"name": name, "labels": {"app": "sched-test"}}
        if owner:
            meta["ownerReferences"] = [owner]
        body_spec: dict[str, Any] = {"containers": [container],
                                     "nodeSelector": {RUN_LABEL: self.run, **(node_selector or {})}, **spec}
        name_ = scheduler_name if scheduler_name is not None else self.scheduler_name
        if name_:
            body_spec["schedulerName"] = name_
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body_spec}

    def create_pod(self, name: str, **kwargs: Any) -> dict[str, Any]:
        r = self.api.post(f"/api/v1/namespaces/{self.namespace}/pods", json=self.pod_body(name, **kwargs))
        assert r.status_code == 201, r.text
        return r.json()

    def create_pods(self, names: list[str], **kwargs: Any) -> None:
        """All at once, from many threads: a burst."""
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda n: self.create_pod(n, **kwargs), names))

    def get_pod(self, name: str) -> dict[str, Any]:
        r = self.api.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}")
        assert r.status_code == 200, r.text
        return r.json()

    def pods(self) -> list[dict[str, Any]]:
        return self.api.get(f"/api/v1/namespaces/{self.namespace}/pods").json()["items"]

    def node_of(self, name: str) -> str | None:
        return self.get_pod(name)["spec"].get("nodeName")

    def events(self, pod: str, reason: str | None = None) -> list[dict[str, Any]]:
        items = self.api.get(f"/api/v1/namespaces/{self.namespace}/events").json()["items"]
        return [e for e in items if e["involvedObject"].get("name") == pod
                and (reason is None or e.get("reason") == reason)]

    # -- waiting ----------------------------------------------------------------------------

    def wait(self, condition: Callable[[], object], what: str, timeout: float = 20.0) -> Any:
        try:
            return wait_for(condition, timeout, 0.05, what)
        except TimeoutError as e:
            raise AssertionError(f"{e}\n--- scheduler log ---\n{self.scheduler.log_tail(60)}") from None

    def wait_bound(self, name: str, timeout: float = 20.0) -> str:
        return self.wait(lambda: self.node_of(name), f"pod {name} bound", timeout)

    def wait_failed_scheduling(self, name: str, timeout: float = 20.0) -> dict[str, Any]:
        return self.wait(lambda: next(iter(self.events(name, "FailedScheduling")), None),
                         f"FailedScheduling event for {name}", timeout)

    def node_count(self) -> int:
        return len(self.api.get("/api/v1/nodes").json()["items"])


@pytest.fixture
def cluster(api: httpx.Client, namespace: str, scheduler: Process, scheduler_name: str) -> Iterator[Cluster]:
    c = Cluster(api, namespace, scheduler, scheduler_name)
    try:
        yield c
    finally:
        c.cleanup()


def cpu_by_node(pods: list[dict[str, Any]]) -> Counter[str]:
    used: Counter[str] = Counter()
    for p in pods:
        node = p["spec"].get("nodeName")
        if node:
            for c in p["spec"]["containers"]:
                cpu = ((c.get("resources") or {}).get("requests") or {}).get("cpu")
                if cpu:
                    used[node] += parse_quantity(cpu).milli_value()
    return used


def preemption_tail(total: int, victimless: int = 0) -> str:
    """DefaultPreemption's verdict: nodes where evicting pods could help but no pod of lower priority runs
    ("No preemption victims found"), and nodes no eviction can fix ("not helpful"), counted and sorted."""
    parts = [f"{victimless} No preemption victims found for incoming pod"] if victimless else []
    if total - victimless:
        parts.append(f"{total - victimless} Preemption is not helpful for scheduling")
    return f" preemption: 0/{total} nodes are available: {', '.join(sorted(parts))}."


def assert_fit_message(message: str, expected_reasons: str, mine: int, victimless: int = 0) -> None:
    """The exact upstream message when only this test's nodes exist, else its shape and our part."""
    total = int(re.match(r"0/(\d+) nodes are available: ", message).group(1))  # type: ignore[union-attr]
    if total == mine:
        assert message == f"0/{total} nodes are available: {expected_reasons}.{preemption_tail(total, victimless)}"
    else:  # other tests' nodes are registered too: they fail for reasons of their own
        assert f" preemption: 0/{total} nodes are available: " in message, message
        for reason in expected_reasons.split(", "):
            count, text = reason.split(" ", 1)
            found = re.search(rf"(\d+) {re.escape(text)}", message)
            assert found and int(found.group(1)) >= int(count), (reason, message)


# -- tests --------------------------------------------------------------------------------------


def test_pods_are_bound_to_fitting_nodes_with_events(cluster: Cluster, scheduler_name: str) -> None:
    small = cluster.node("small", cpu="1")
    big = cluster.node("big", cpu="8")
    cluster.create_pod("fits-small", cpu="500m")
    cluster.create_pod("needs-big", cpu="3")
    assert cluster.wait_bound("needs-big") == big
    assert cluster.wait_bound("fits-small") in (small, big)

    pod = cluster.get_pod("needs-big")
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "True"
    event = cluster.wait(lambda: next(iter(cluster.events("needs-big", "Scheduled")), None), "Scheduled event")
    assert event["type"] == "Normal"
    assert event["message"] == f"Successfully assigned {cluster.namespace}/needs-big to {big}"
    assert event["source"]["component"] == scheduler_name
    assert event["reportingComponent"] == scheduler_name


def test_unschedulable_pod_is_bound_once_a_fitting_node_is_added(cluster: Cluster) -> None:
    cluster.node("web-1", cpu="1", labels={"role": "web"})
    cluster.node("db-1", cpu="8", labels={"role": "db"})
    cluster.node("db-2", cpu="8", labels={"role": "db"})
    cluster.create_pod("big-web", cpu="2", node_selector={"role": "web"})
    event = cluster.wait_failed_scheduling("big-web")
    assert event["type"] == "Warning"
    assert_fit_message(event["message"], "1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector", 3,
                       victimless=1)
    condition = cluster.wait(
        lambda: next((c for c in cluster.get_pod("big-web")["status"].get("conditions") or []
                      if c["type"] == "PodScheduled" and c["status"] == "False"), None),
        "PodScheduled=False")
    assert condition["reason"] == "Unschedulable" and condition["message"] == event["message"]
    assert cluster.node_of("big-web") is None

    roomy = cluster.node("web-2", cpu="4", labels={"role": "web"})
    # Without the move on NodeAdd the pod would sit in the unschedulable queue for 5 minutes.
    assert cluster.wait_bound("big-web", timeout=10) == roomy


def test_node_selector_and_required_node_affinity(cluster: Cluster) -> None:
    ssd_a = cluster.node("ssd-a", labels={"disk": "ssd", "zone": "a", "cores": "16"})
    hdd_b = cluster.node("hdd-b", labels={"disk": "hdd", "zone": "b", "cores": "4"})
    hdd_c = cluster.node("hdd-c", labels={"disk": "hdd", "zone": "c", "cores": "8"})

    def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}

    for i in range(3):
        cluster.create_pod(f"ssd-{i}", node_selector={"disk": "ssd"})
    cluster.create_pod("zone-b", affinity=affinity({"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["b", "x"]}]}))
    cluster.create_pod("not-a-many-cores", affinity=affinity({"matchExpressions": [
        {"key": "zone", "operator": "NotIn", "values": ["a"]}, {"key": "cores", "operator": "Gt", "values": ["6"]}]}))
    cluster.create_pod("by-name", affinity=affinity({"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [hdd_b]}]}))
    cluster.create_pod("nowhere", node_selector={"disk": "nvme"})

    for i in range(3):
        assert cluster.wait_bound(f"ssd-{i}") == ssd_a
    assert cluster.wait_bound("zone-b") == hdd_b
    assert cluster.wait_bound("not-a-many-cores") == hdd_c
    assert cluster.wait_bound("by-name") == hdd_b
    event = cluster.wait_failed_scheduling("nowhere")
    assert_fit_message(event["message"], "3 node(s) didn't match Pod's node affinity/selector", 3)


def test_taints_tolerations_cordon_and_not_ready(cluster: Cluster) -> None:
    tainted = cluster.node("gpu", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
                           labels={"kind": "gpu"})
    plain = cluster.node("plain")
    cluster.node("cordoned", unschedulable=True)
    cluster.node("not-ready", ready="False")
    for i in range(6):
        cluster.create_pod(f"free-{i}")
    toleration = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    cluster.create_pod("tolerant", node_selector={"kind": "gpu"}, tolerations=toleration)
    cluster.create_pod("intolerant", node_selector={"kind": "gpu"})

    for i in range(6):
        assert cluster.wait_bound(f"free-{i}") == plain
    assert cluster.wait_bound("tolerant") == tainted
    event = cluster.wait_failed_scheduling("intolerant")
    assert_fit_message(event["message"], "1 node(s) didn't match Pod's node affinity/selector, "
                                          "1 node(s) had untolerated taint {dedicated: gpu}, "
                                          "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
                                          "1 node(s) were unschedulable", 4)
    assert "{dedicated: gpu}" in event["message"]


def test_host_ports_conflict(cluster: Cluster) -> None:
    first = cluster.node("one")
    second = cluster.node("two")
    for i in range(3):
        cluster.create_pod(f"port-{i}", host_port=8080)
    bound = cluster.wait(lambda: (lambda ns: ns if len(ns) == 2 else None)(
        [p["spec"]["nodeName"] for p in cluster.pods() if p["spec"].get("nodeName")]), "two pods bound")
    assert sorted(bound) == sorted([first, second])
    pending = [p["metadata"]["name"] for p in cluster.pods() if not p["spec"].get("nodeName")]
    assert len(pending) == 1
    event = cluster.wait_failed_scheduling(pending[0])
    assert_fit_message(event["message"], "2 node(s) didn't have free ports for the requested pod ports", 2,
                       victimless=2)


def test_pods_of_one_owner_spread_over_nodes(cluster: Cluster) -> None:
    nodes = [cluster.node(f"spread-{i}", cpu="16", memory="64Gi") for i in range(3)]
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": "web-rs", "labels": {"app": "web"}},
          "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                   "template": {"metadata": {"labels": {"app": "web"}},
                                "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}}
    r = cluster.api.post(f"/apis/apps/v1/namespaces/{cluster.namespace}/replicasets", json=rs)
    assert r.status_code == 201, r.text
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": r.json()["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}
    cluster.create_pods([f"web-rs-{i:02d}" for i in range(30)], cpu="100m", memory="64Mi", owner=owner)
    cluster.wait(lambda: all(p["spec"].get("nodeName") for p in cluster.pods()) and len(cluster.pods()) == 30,
                 "30 pods bound")
    counts = Counter(p["spec"]["nodeName"] for p in cluster.pods())
    assert set(counts) == set(nodes), counts
    assert max(counts.values()) <= 2 * min(counts.values()), counts


def test_burst_never_overcommits_a_node(cluster: Cluster) -> None:
    nodes = [cluster.node(f"tight-{i}", cpu="1", memory="4Gi") for i in range(3)]
    names = [f"burst-{i:02d}" for i in range(45)]
    cluster.create_pods(names, cpu="100m", memory="32Mi")

    def settled() -> bool:
        pods = cluster.pods()
        bound = [p for p in pods if p["spec"].get("nodeName")]
        return len(pods) == 45 and len(bound) == 30
    cluster.wait(settled, "30 of 45 pods bound")
    used = cpu_by_node(cluster.pods())
    assert set(used) == set(nodes)
    assert all(v <= 1000 for v in used.values()), used
    pending = [p["metadata"]["name"] for p in cluster.pods() if not p["spec"].get("nodeName")]
    event = cluster.wait_failed_scheduling(pending[0])
    assert_fit_message(event["message"], "3 Insufficient cpu", 3, victimless=3)

    # Deleting bound pods frees room: waiting pods move back (AssignedPodDelete) and are bound.
    victims = [p["metadata"]["name"] for p in cluster.pods() if p["spec"].get("nodeName")][:3]
    for name in victims:
        r = cluster.api.delete(f"/api/v1/namespaces/{cluster.namespace}/pods/{name}", params={"gracePeriodSeconds": 0})
        assert r.status_code == 200, r.text
    cluster.wait(lambda: len([p for p in cluster.pods() if p["spec"].get("nodeName")]) == 30
                 and len(cluster.pods()) == 42, "freed room refilled", timeout=15)
    used = cpu_by_node(cluster.pods())
    assert all(v <= 1000 for v in used.values()), used


def test_finished_pod_frees_its_node(cluster: Cluster) -> None:
    node = cluster.node("solo", cpu="1")
    cluster.create_pod("job", cpu="800m")
    assert cluster.wait_bound("job") == node
    cluster.create_pod("next", cpu="800m")
    cluster.wait_failed_scheduling("next")
    # The kubelet would report the job's end; a Succeeded pod no longer holds its requests (the
    # scheduler's informer stops seeing it), and the waiting pod is moved back and bound.
    r = cluster.api.patch(f"/api/v1/namespaces/{cluster.namespace}/pods/job/status",
                          json={"status": {"phase": "Succeeded"}},
                          headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert cluster.wait_bound("next", timeout=10) == node


def test_scheduler_killed_mid_burst_resumes_without_overcommit(
    api: httpx.Client, namespace: str, apiserver: ApiServer, workdir: Path
) -> None:
    name = f"restart-scheduler-{uuid.uuid4().hex[:6]}"
    process = start_scheduler(apiserver, workdir, name)
    cluster = Cluster(api, namespace, process, name)
    try:
        nodes = [cluster.node(f"r-{i}", cpu="2", memory="8Gi") for i in range(3)]
        cluster.create_pods([f"r-pod-{i:02d}" for i in range(70)], cpu="100m")
        cluster.wait(lambda: len([p for p in cluster.pods() if p["spec"].get("nodeName")]) >= 5,
                     "a few pods bound")
        process.kill()
        process.start()  # same argv: a fresh process with empty caches
        cluster.wait(lambda: len([p for p in cluster.pods() if p["spec"].get("nodeName")]) == 60,
                     "60 of 70 pods bound after the restart", timeout=30)
        pods = cluster.pods()
        assert len(pods) == 70
        used = cpu_by_node(pods)
        assert set(used) == set(nodes) and all(v <= 2000 for v in used.values()), used
    finally:
        process.stop()
        cluster.cleanup()


def test_default_scheduler_name_and_pods_for_other_schedulers(
    api: httpx.Client, namespace: str, apiserver: ApiServer, workdir: Path
) -> None:
    process = start_scheduler(apiserver, workdir, None)  # no --scheduler-name: default-scheduler
    cluster = Cluster(api, namespace, process, None)
    try:
        node = cluster.node("default", cpu="64", memory="256Gi", pods="1000")
        cluster.create_pod("someone-elses", scheduler_name="another-scheduler")
        created = cluster.create_pod("ours")  # schedulerName defaulted by the apiserver
        assert created["spec"]["schedulerName"] == "default-scheduler"
        assert cluster.wait_bound("ours") == node
        event = cluster.wait(lambda: next(iter(cluster.events("ours", "Scheduled")), None), "Scheduled event")
        assert event["source"]["component"] == "default-scheduler"
        assert event["reportingComponent"] == "default-scheduler"
        # Pods are handled in the order they arrive; the other scheduler's pod came first, so by now
        # it would have been bound had this scheduler taken it.
        assert cluster.node_of("someone-elses") is None
        assert not cluster.events("someone-elses")
    finally:
        process.stop()
        cluster.cleanup()
