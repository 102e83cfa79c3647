"""Disruption end to end on the e2e package's cluster (conftest's local_cluster, tests/e2e/local_cluster.py: etcd,
apiserver, controller-manager with every controller, scheduler, two kubelets running Docker containers), driven by
real kubectl 1.33 and 1.27:

- `kubectl drain` of a node holding all three pods of a Deployment under a PodDisruptionBudget of
  minAvailable 2: the first eviction goes at once, the next ones get 429 and are retried by kubectl until a
  replacement is Ready on the other node; a watch of the pods, replayed, shows no moment with fewer than 2
  Ready pods; the disruption controller's status of the budget along the way;
- `--ignore-daemonsets`, `--force` and `--delete-emptydir-data`: a DaemonSet's pod stays, a bare pod with an
  emptyDir goes, and without the flags drain refuses with kubectl's messages; cordon and uncordon;
- mkubectl's cordon, uncordon, drain and `describe pdb` beside kubectl 1.33's;
- the pod garbage collector (its period and quarantine shortened by the controller-manager's flags,
  threshold 3): the pods of a deleted Node are marked Failed with DisruptionTarget and deleted; terminated
  pods over the threshold go, oldest first.
The drain under a budget runs with both kubectl versions. Every wait has a deadline; every node cordoned is
uncordoned again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import wait_for
from tests.e2e.conftest import TERMINATED_POD_GC_THRESHOLD
from tests.e2e.local_cluster import LocalCluster
from tests.integration.test_mkubectl import Mk, same_output
from tests.kubectl import Kubectl, find_kubectl
from tests.node_process import HTTPD
from tests.watching import WatchStream

JSONDict = dict[str, Any]
THRESHOLD = TERMINATED_POD_GC_THRESHOLD  # the package cluster's --terminated-pod-gc-threshold
MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def kubectl_of(cluster: LocalCluster, namespace: str, tmp_path: Path, version: str) -> Kubectl:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl {version} is not installed on this machine")
    return Kubectl(binary, version, cluster.url, tmp_path / f"kubectl-{version}", namespace)


def ready(pod: JSONDict) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def pods(api: httpx.Client, ns: str, selector: str = "") -> list[JSONDict]:
    r = api.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": selector} if selector else None)
    assert r.status_code == 200, r.text
    items: list[JSONDict] = r.json()["items"]
    return items


def create(api: httpx.Client, path: str, body: JSONDict) -> JSONDict:
    r = api.post(path, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def deployment(name: str, replicas: int) -> JSONDict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "web", "image": HTTPD, "imagePullPolicy": "IfNotPresent"}]}}}}


def pdb_status(api: httpx.Client, ns: str, name: str) -> JSONDict:
    r = api.get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}")
    assert r.status_code == 200, r.text
    status: JSONDict = r.json().get("status") or {}
    return status


class ReadyCounter:
    """Replays a watch of the namespace's pods on a thread: the fewest Ready pods seen at any event."""

    def __init__(self, base_url: str, ns: str, rv: str, initial: list[JSONDict]) -> None:
        self.state = {p["metadata"]["name"]: ready(p) for p in initial}
        self.fewest = sum(self.state.values())
        self.deleted = 0
        self.stream = WatchStream(base_url, f"/api/v1/namespaces/{ns}/pods", resourceVersion=rv)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                event = self.stream.next(timeout=0.5)
            except TimeoutError:
                continue
            if event is None:
                return
            if event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            pod = event["object"]
            self.deleted += event["type"] == "DELETED"
            self.state[pod["metadata"]["name"]] = event["type"] != "DELETED" and ready(pod)
            self.fewest = min(self.fewest, sum(self.state.values()))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.stream.close()


@pytest.mark.parametrize("version", ["1.33", "1.27"])
def test_drain_respects_a_budget_of_min_available_2(local_cluster: LocalCluster, api: httpx.Client, namespace: str,
                                                     tmp_path: Path, version: str) -> None:
    kubectl = kubectl_of(local_cluster, namespace, tmp_path, version)
    node_a, node_b = local_cluster.node_names
    try:
        assert kubectl.run("cordon", node_b).ok().stdout.strip() == f"node/{node_b} cordoned"
        create(api, f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("web", 3))
        wait_for(lambda: sum(ready(p) for p in pods(api, namespace, "app=web")) == 3, 120, 0.5,
                 what="3 Ready pods of web")
        assert {p["spec"]["nodeName"] for p in pods(api, namespace, "app=web")} == {node_a}
        create(api, f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
               {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
        # the disruption controller's status: 3 expected and healthy, 2 desired, 1 disruption allowed
        status = wait_for(lambda: (s := pdb_status(api, namespace, "web")).get("disruptionsAllowed") == 1 and s,
                          60, 0.25, what="the budget's status from the disruption controller")
        assert isinstance(status, dict)
        assert (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"]) == (3, 3, 2)
        cond = next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")
        assert (cond["status"], cond["reason"]) == ("True", "SufficientPods")
        got = kubectl.run("get", "pdb").ok().stdout.splitlines()
        assert got[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
        assert got[1].split()[:4] == ["web", "2", "N/A", "1"]
        assert kubectl.run("uncordon", node_b).ok().stdout.strip() == f"node/{node_b} uncordoned"

        listed = api.get(f"/api/v1/namespaces/{namespace}/pods").json()
        counter = ReadyCounter(local_cluster.url, namespace, listed["metadata"]["resourceVersion"], listed["items"])
        try:
            drained = kubectl.run("drain", node_a, "--ignore-daemonsets", "--timeout=240s", timeout=300).ok()
        finally:
            counter.close()
        out = drained.stdout + drained.stderr
        assert f"node/{node_a} cordoned" in out
        assert f"node/{node_a} drained" in out
        assert out.count("evicted") == 3, out
        # kubectl was refused by the budget and retried: the upstream message, the 429 retry line
        assert f"(will retry after 5s): {MESSAGE}" in out, out
        assert counter.deleted == 3, "the watch did not see the three evicted pods go"
        assert counter.fewest >= 2, f"only {counter.fewest} Ready pods at one moment of the drain"
        # drain is done when the last evicted pod is gone; its replacement may still be starting on node b
        after = wait_for(lambda: len(p := pods(api, namespace, "app=web")) == 3 and all(
            q["spec"]["nodeName"] == node_b and ready(q) for q in p) and p, 60, 0.25,
            what=f"the three pods Ready on {node_b}")
        assert isinstance(after, list)
        node = api.get(f"/api/v1/nodes/{node_a}").json()
        assert node["spec"]["unschedulable"] is True
    finally:
        for node in (node_a, node_b):
            api.patch(f"/api/v1/nodes/{node}", json={"spec": {"unschedulable": None}},
                      headers={"Content-Type": "application/merge-patch+json"})


def test_drain_ignores_daemonsets_and_forces_bare_pods_with_kubectl_1_27(
        local_cluster: LocalCluster, api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    kubectl = kubectl_of(local_cluster, namespace, tmp_path, "1.27")
    node_a = local_cluster.node_names[0]
    labels = {"app": "agent"}
    create(api, f"/apis/apps/v1/namespaces/{namespace}/daemonsets", {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "terminationGracePeriodSeconds": 1, "containers": [{"name": "web", "image": HTTPD}]}}}})
    create(api, f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
        "spec": {"nodeName": node_a, "terminationGracePeriodSeconds": 1,
                 "volumes": [{"name": "scratch", "emptyDir": {}}],
                 "containers": [{"name": "web", "image": HTTPD,
                                 "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}]}})
    wait_for(lambda: sum(ready(p) for p in pods(api, namespace)) == 3, 120, 0.5,
             what="the DaemonSet's 2 pods and the bare pod Ready")
    ds_pod = next(p["metadata"]["name"] for p in pods(api, namespace, "app=agent") if p["spec"]["nodeName"] == node_a)
    try:
        refused = kubectl.run("drain", node_a, "--timeout=60s", timeout=120)
        assert refused.returncode != 0
        assert "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)" in refused.stderr
        assert "cannot delete Pods with local storage (use --delete-emptydir-data to override)" in refused.stderr
        assert any(p["metadata"]["name"] == "bare" for p in pods(api, namespace))  # nothing evicted
        assert api.get(f"/api/v1/nodes/{node_a}").json()["spec"]["unschedulable"] is True  # but cordoned
        drained = kubectl.run("drain", node_a, "--ignore-daemonsets", "--force", "--delete-emptydir-data",
                              "--timeout=120s", timeout=180).ok()
        out = drained.stdout + drained.stderr
        assert f"node/{node_a} already cordoned" in out
        # kubectl joins its warnings in Go map order: the two may come either way round
        warning = next((line for line in out.splitlines() if line.startswith("Warning: ")), "")
        assert sorted(warning.removeprefix("Warning: ").split("; ")) == [
            f"deleting Pods that declare no controller: {namespace}/bare",
            f"ignoring DaemonSet-managed Pods: {namespace}/{ds_pod}"], out
        assert "pod/bare evicted" in out and f"node/{node_a} drained" in out
        left = {p["metadata"]["name"] for p in pods(api, namespace)}
        assert "bare" not in left and ds_pod in left
        assert kubectl.run("uncordon", node_a).ok().stdout.strip() == f"node/{node_a} uncordoned"
        assert not api.get(f"/api/v1/nodes/{node_a}").json()["spec"].get("unschedulable")
    finally:
        api.patch(f"/api/v1/nodes/{node_a}", json={"spec": {"unschedulable": None}},
                  headers={"Content-Type": "application/merge-patch+json"})


def fake_node(api: httpx.Client, name: str) -> None:
    create(api, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


def bound_pod(api: httpx.Client, ns: str, name: str, node: str, phase: str | None = None) -> None:
    """A pod bound to `node` (a fake one: no kubelet runs it). Its grace period is short: the namespace controller
    comes back to a namespace whose pods are terminating after their grace period (30 s by default), and the
    `namespace` fixture waits for the namespace to go."""
    pod = create(api, f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": HTTPD}]}})
    if phase:
        pod["status"] = {"phase": phase}
        r = api.put(f"/api/v1/namespaces/{ns}/pods/{name}/status", json=pod)
        assert r.status_code == 200, r.text


def test_podgc_deletes_the_pods_of_a_deleted_node(api: httpx.Client, namespace: str, local_cluster: LocalCluster
                                                  ) -> None:
    node = f"ghost-{namespace}"
    fake_node(api, node)
    bound_pod(api, namespace, "orphan", node)
    listed = api.get(f"/api/v1/namespaces/{namespace}/pods").json()
    stream = WatchStream(local_cluster.url, f"/api/v1/namespaces/{namespace}/pods",
                         resourceVersion=listed["metadata"]["resourceVersion"])
    try:
        assert api.delete(f"/api/v1/nodes/{node}").status_code == 200
        seen: list[JSONDict] = []
        wait_for(lambda: (e := stream.next(timeout=1)) is not None and (seen.append(e) or e["type"] == "DELETED"),
                 60, 0, what="the orphaned pod deleted by the pod garbage collector")
    finally:
        stream.close()
    marked = [e["object"] for e in seen if e["type"] == "MODIFIED"]
    assert marked, "the pod was not marked before its deletion"
    status = marked[-1]["status"]  # (the node lifecycle controller may have written its conditions before)
    assert status["phase"] == "Failed"
    cond = next(c for c in status["conditions"] if c["type"] == "DisruptionTarget")
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "DeletionByPodGC",
                                                                 "PodGC: node no longer exists")


def test_podgc_trims_terminated_pods_over_the_threshold_oldest_first(api: httpx.Client, namespace: str) -> None:
    node = f"parked-{namespace}"
    fake_node(api, node)
    try:
        names = [f"done-{i}" for i in range(THRESHOLD + 2)]
        for name in names:  # created in order: done-0 is the oldest
            bound_pod(api, namespace, name, node, phase="Succeeded")
        # running pods never count, however many
        bound_pod(api, namespace, "running", node, phase="Running")
        left = wait_for(lambda: len(p := pods(api, namespace)) == THRESHOLD + 1 and p, 60, 0.25,
                        what=f"terminated pods trimmed to {THRESHOLD}")
        assert isinstance(left, list)
        assert sorted(p["metadata"]["name"] for p in left) == sorted(["running", *names[2:]])
    finally:
        api.delete(f"/api/v1/nodes/{node}")


def test_mkubectl_cordon_drain_and_describe_as_kubectl(local_cluster: LocalCluster, api: httpx.Client,
                                                        namespace: str, tmp_path: Path) -> None:
    kubectl = kubectl_of(local_cluster, namespace, tmp_path, "1.33")
    mk = Mk(local_cluster.url, tmp_path / "mk", namespace)
    node_a, node_b = local_cluster.node_names
    try:
        assert mk.run("cordon", node_b).ok().stdout == f"node/{node_b} cordoned\n"
        assert same_output(mk, kubectl, "cordon", node_b) == f"node/{node_b} already cordoned\n"
        create(api, f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("web", 2))
        create(api, f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
               {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
        wait_for(lambda: pdb_status(api, namespace, "web").get("disruptionsAllowed") == 1, 120, 0.5,
                 what="2 Ready pods of web and the budget allowing 1")
        assert same_output(mk, kubectl, "get", "pdb").splitlines()[1].split()[:4] == ["web", "1", "N/A", "1"]
        described = same_output(mk, kubectl, "describe", "pdb", "web")
        assert "Min available:  1" in described and "Allowed disruptions:  1" in described
        # a bare pod with an emptyDir volume: drain refuses it, in kubectl's words (Go's map order varies)
        create(api, f"/api/v1/namespaces/{namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
            "spec": {"nodeName": node_a, "terminationGracePeriodSeconds": 1,
                     "volumes": [{"name": "scratch", "emptyDir": {}}],
                     "containers": [{"name": "web", "image": HTTPD}]}})
        ours, theirs = mk.run("drain", node_a), kubectl.run("drain", node_a)
        assert ours.returncode == theirs.returncode == 1
        assert sorted(ours.stderr.splitlines()[1:]) == sorted(theirs.stderr.splitlines()[1:]), (ours, theirs)
        assert "cannot delete Pods with local storage (use --delete-emptydir-data to override)" in ours.stderr
        assert mk.run("uncordon", node_b).ok().stdout == f"node/{node_b} uncordoned\n"
        drained = mk.run("drain", node_a, "--ignore-daemonsets", "--force", "--delete-emptydir-data",
                         "--timeout=240s", timeout=300).ok()
        out = drained.stdout + drained.stderr
        assert f"Warning: deleting Pods that declare no controller: {namespace}/bare" in out, out
        assert out.count(" evicted") == 3 and f"node/{node_a} drained" in out, out
        assert f"(will retry after 5s): {MESSAGE}" in out, out
        after = pods(api, namespace, "app=web")
        assert len(after) == 2 and all(p["spec"]["nodeName"] == node_b for p in after)
        assert mk.run("uncordon", node_a).ok().stdout == f"node/{node_a} uncordoned\n"
    finally:
        for node in (node_a, node_b):
            api.patch(f"/api/v1/nodes/{node}", json={"spec": {"unschedulable": None}},
                      headers={"Content-Type": "application/merge-patch+json"})
