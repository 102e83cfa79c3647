"""The density benchmark's hollow kubelet (`python -m bench.hollow_nodes`: many nodes in one process) as a
node, against a real etcd, apiserver and controller-manager (node IPAM, node lifecycle): it registers its
Nodes, renews their Leases, walks a bound pod through Pending to Running/Ready with an address of the
node's podCIDR, confirms a deletion, and its nodes go Unknown when the process stops.

One process serves the module's three nodes, with short heartbeats (a 4 s lease renewed every second)
so the node lifecycle controller's 5 s grace period can be short too."""

from __future__ import annotations

import ipaddress
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, Etcd, Process, ok, wait_for
from tests.controller_process import ControllerProcess
from tests.manifests import pod
from tests.watching import WatchStream

PREFIX = f"hollow-{uuid.uuid4().hex[:4]}-"
NODES = [f"{PREFIX}{i:03d}" for i in range(3)]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
NS = "hollow"


@pytest.fixture(scope="module")
def cluster(workdir: Path) -> Iterator[tuple[ApiServer, Process]]:
    home = workdir / "hollow-nodes"
    home.mkdir(exist_ok=True)
    etcd = Etcd(home)
    server = ApiServer(home, etcd)
    controllers = ControllerProcess(home, server.url, ["nodeipam", "nodelifecycle"], "--cluster-cidr",
                                    "100.64.0.0/16", "--node-cidr-mask-size", "24",
                                    "--node-monitor-grace-period", "5s", "--node-startup-grace-period", "5s",
                                    "--node-monitor-period", "500ms")
    hollow = Process("hollow-nodes", [
        sys.executable, "-m", "bench.hollow_nodes", "--master", server.url, "--nodes", "3",
        "--node-name-prefix", PREFIX, "--first-node-ip", "100.65.0.1", "--node-cpu", "2", "--node-memory", "4Gi",
        "--node-lease-duration-seconds", "4", "--node-status-update-frequency", "1"], home / "hollow-nodes.log")
    try:
        etcd.start()
        server.start()
        controllers.start()
        with httpx.Client(base_url=server.url, timeout=10) as api:
            ok(api.post("/api/v1/namespaces", json={"metadata": {"name": NS}}))
            hollow.start()
            wait_for(lambda: all(ready(api, n) for n in NODES), 30,
                     what=f"hollow nodes Ready\n{hollow.log_tail()}")
        yield server, hollow
    finally:
        hollow.stop()
        controllers.stop()
        server.stop()
        etcd.stop()


@pytest.fixture
def api(cluster: tuple[ApiServer, Process]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster[0].url, timeout=10) as client:
        yield client


def condition(node: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in node["status"]["conditions"] if c["type"] == ctype)


def ready(api: httpx.Client, name: str) -> bool:
    r = api.get(f"/api/v1/nodes/{name}")
    return r.status_code == 200 and any(c["type"] == "Ready" and c["status"] == "True"
                                        for c in r.json().get("status", {}).get("conditions") or [])


def test_nodes_registered_with_capacity_addresses_and_conditions(api: httpx.Client) -> None:
    nodes = {n["metadata"]["name"]: n for n in ok(api.get("/api/v1/nodes"))["items"]}
    assert sorted(nodes) == NODES
    for i, name in enumerate(NODES):
        node = nodes[name]
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == name
        assert node["metadata"]["labels"]["minik8s.io/hollow-node"] == PREFIX.rstrip("-")
        status = node["status"]
        assert status["capacity"] == {"cpu": "2", "memory": "4194304Ki", "pods": "110"}
        assert status["allocatable"] == status["capacity"]
        assert {"type": "InternalIP", "address": f"100.65.0.{i + 1}"} in status["addresses"]
        assert {"type": "Hostname", "address": name} in status["addresses"]
        assert condition(node, "Ready")["reason"] == "KubeletReady"
        assert condition(node, "MemoryPressure")["status"] == "False"
        assert status["nodeInfo"]["containerRuntimeVersion"] == "hollow://1.0"
        assert node["spec"]["podCIDR"].startswith("100.64.")  # node IPAM's, which made it Ready


def test_leases_renewed(api: httpx.Client) -> None:
    first = {n: ok(api.get(f"{LEASES}/{n}")) for n in NODES}
    for name, lease in first.items():
        assert lease["spec"]["holderIdentity"] == name
        assert lease["spec"]["leaseDurationSeconds"] == 4
        assert lease["metadata"]["ownerReferences"][0]["kind"] == "Node"

    def renewed() -> bool:
        return all(ok(api.get(f"{LEASES}/{n}"))["spec"]["renewTime"] != first[n]["spec"]["renewTime"]
                   for n in NODES)

    wait_for(renewed, 10, what="every lease renewed")


def test_bound_pod_goes_pending_then_running_and_ready_with_an_address(
        api: httpx.Client, cluster: tuple[ApiServer, Process]) -> None:
    node = ok(api.get(f"/api/v1/nodes/{NODES[1]}"))
    cidr = ipaddress.ip_network(node["spec"]["podCIDR"])
    watch = WatchStream(cluster[0].url, f"/api/v1/namespaces/{NS}/pods", fieldSelector="metadata.name=web")
    try:
        body = pod("web", NS, nodeName=NODES[1])
        body["spec"]["containers"].append({"name": "side", "image": "busybox:1.36"})
        ok(api.post(f"/api/v1/namespaces/{NS}/pods", json=body))
        phases = []
        while True:
            event = watch.next(15)
            assert event is not None, "the watch ended"
            status = event["object"].get("status") or {}
            phases.append(status.get("phase"))
            if status.get("phase") == "Running":
                break
    finally:
        watch.close()
    assert "Pending" in phases  # the ContainerCreating status came first
    running = ok(api.get(f"/api/v1/namespaces/{NS}/pods/web"))["status"]
    assert ipaddress.ip_address(running["podIP"]) in cidr
    assert running["podIPs"] == [{"ip": running["podIP"]}]
    assert running["hostIP"] == "100.65.0.2"
    assert [cs["name"] for cs in running["containerStatuses"]] == ["main", "side"]
    assert all("running" in cs["state"] and cs["ready"] and cs["containerID"].startswith("hollow://")
               for cs in running["containerStatuses"])
    conditions = {c["type"]: c["status"] for c in running["conditions"]}
    assert conditions == {"PodScheduled": "True", "PodReadyToStartContainers": "True", "Initialized": "True",
                          "ContainersReady": "True", "Ready": "True"}
    # a second pod on the node gets another address
    ok(api.post(f"/api/v1/namespaces/{NS}/pods", json=pod("web-2", NS, nodeName=NODES[1])))
    wait_for(lambda: ok(api.get(f"/api/v1/namespaces/{NS}/pods/web-2"))["status"].get("podIP"), 15,
             what="web-2's address")
    second = ok(api.get(f"/api/v1/namespaces/{NS}/pods/web-2"))["status"]["podIP"]
    assert second != running["podIP"] and ipaddress.ip_address(second) in cidr


def test_deletion_confirmed(api: httpx.Client) -> None:
    ok(api.post(f"/api/v1/namespaces/{NS}/pods", json=pod("doomed", NS, nodeName=NODES[0])))
    wait_for(lambda: ok(api.get(f"/api/v1/namespaces/{NS}/pods/doomed"))["status"].get("phase") == "Running", 15,
             what="doomed Running")
    deleting = ok(api.delete(f"/api/v1/namespaces/{NS}/pods/doomed"))  # the default 30 s grace period
    assert deleting["metadata"]["deletionTimestamp"]
    # the hollow kubelet's grace-0 delete removes it long before 30 s
    wait_for(lambda: api.get(f"/api/v1/namespaces/{NS}/pods/doomed").status_code == 404, 10,
             what="the pod gone")


def test_nodes_unknown_when_the_process_stops(api: httpx.Client, cluster: tuple[ApiServer, Process]) -> None:
    cluster[1].kill()  # kill -9: no goodbye

    def all_unknown() -> bool:
        nodes = [ok(api.get(f"/api/v1/nodes/{n}")) for n in NODES]
        return all(condition(n, "Ready")["status"] == "Unknown" for n in nodes)

    wait_for(all_unknown, 20, what="the node lifecycle controller marking the nodes Unknown")
    node = ok(api.get(f"/api/v1/nodes/{NODES[0]}"))
    assert condition(node, "Ready")["reason"] == "NodeStatusUnknown"
    assert {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"} in [
        {k: t[k] for k in ("key", "effect")} for t in node["spec"].get("taints") or []]
