"""Disruption behind the gate: a real apiserver with authentication, RBAC, the Node authorizer and every
admission plugin (tests/auth_cluster.py), and a controller-manager over HTTPS whose disruption controller
and pod garbage collector write as their own service accounts, bound to their bootstrap roles.

- the disruption controller keeps a budget's status (through the Deployment's scale) and the pod garbage
  collector removes the pods of a deleted Node, and the audit log shows every write by their accounts,
  none refused;
- `edit` may create pods/eviction and PodDisruptionBudgets, `view` may read budgets but not evict;
- a kubelet (system:node:node-a) may evict its own pods, not those of node-b (Node authorizer and
  NodeRestriction)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth_cluster import SecureApiServer
from tests.cluster import ALL_ADMISSION, Etcd, make_workdir, wait_for
from tests.controller_process import ControllerProcess

RBAC = "/apis/rbac.authorization.k8s.io/v1"
POLICY = "/apis/policy/v1"


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd, *ALL_ADMISSION).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def controllers(secure: SecureApiServer) -> Iterator[ControllerProcess]:
    workdir = make_workdir("minik8s-disruption-cm-")
    process = ControllerProcess(workdir, secure.secure_url,
                                ["disruption", "podgc", "deployment", "replicaset", "serviceaccount"],
                                "--kubeconfig", str(secure.kubeconfig("controller-manager")),
                                "--podgc-period=1s", "--podgc-quarantine=1s")
    try:
        process.start()
        yield process
    finally:
        process.stop()
        shutil.rmtree(workdir, ignore_errors=True)  # the manager's log and kubeconfig: nothing left in /tmp


@pytest.fixture
def ns(admin: httpx.Client, controllers: ControllerProcess) -> Iterator[str]:
    """A namespace whose default service account exists (the ServiceAccount admission wants it for pods)."""
    name = f"pdb-{uuid.uuid4().hex[:8]}"
    assert admin.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    wait_for(lambda: admin.get(f"/api/v1/namespaces/{name}/serviceaccounts/default").status_code == 200, 30,
             0.1, what="the namespace's default service account")
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


def pod(name: str, node: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {"app": "web"}},
            "spec": spec}


def eviction(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}


def writes_by(secure: SecureApiServer, account: str, ns: str) -> list[dict[str, Any]]:
    return [e for e in secure.audit_events()
            if e["user"]["username"] == f"system:serviceaccount:kube-system:{account}"
            and e.get("verb") in ("create", "update", "patch", "delete") and e["objectRef"].get("namespace") == ns]


def test_controllers_work_under_their_bootstrap_roles(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                     controllers: ControllerProcess) -> None:
    labels = {"app": "web"}
    r = admin.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json={
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": pod("x")["spec"]}}})
    assert r.status_code == 201, r.text
    r = admin.post(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets", json={
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"maxUnavailable": "34%", "selector": {"matchLabels": labels}}})
    assert r.status_code == 201, r.text

    def status() -> dict[str, Any]:
        found: dict[str, Any] = admin.get(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets/web").json().get("status")
        return found or {}

    # 3 expected through the Deployment's scale, 34% of 3 rounds up to 2 unavailable: 1 desired; no pod is Ready
    wait_for(lambda: status().get("expectedPods") == 3, 30, 0.2, what="the budget's expected pods")
    assert (status()["desiredHealthy"], status()["currentHealthy"], status()["disruptionsAllowed"]) == (1, 0, 0)
    assert status()["conditions"][0]["reason"] == "InsufficientPods"
    # podgc: a Node deleted, its pod marked and removed
    assert admin.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node",
                                             "metadata": {"name": f"gone-{ns}"}}).status_code == 201
    assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod("orphan", f"gone-{ns}", {"app": "x"})
                      ).status_code == 201
    assert admin.delete(f"/api/v1/nodes/gone-{ns}").status_code == 200
    wait_for(lambda: admin.get(f"/api/v1/namespaces/{ns}/pods/orphan").status_code == 404, 30, 0.2,
             what="the orphaned pod deleted by the pod garbage collector")
    # the audit backend writes in batches after the response: wait for the entries, do not read at once
    wait_for(lambda: ("update", "poddisruptionbudgets") in {
        (e["verb"], e["objectRef"]["resource"]) for e in writes_by(secure, "disruption-controller", ns)},
        10, 0.1, what="the disruption controller's status write in the audit log")
    wait_for(lambda: {("patch", "pods", "status"), ("delete", "pods", "")} <= {
        (e["verb"], e["objectRef"]["resource"], e["objectRef"].get("subresource", ""))
        for e in writes_by(secure, "pod-garbage-collector", ns)},
        10, 0.1, what="the pod garbage collector's condition patch and delete in the audit log")
    refused = [e for account in ("disruption-controller", "pod-garbage-collector")
               for e in writes_by(secure, account, ns) if e["responseStatus"]["code"] in (401, 403)]
    assert refused == []


def test_edit_may_evict_and_view_may_not(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    for user, role in (("ed", "edit"), ("vi", "view")):
        secure.issue(user, user)
        r = admin.post(f"{RBAC}/namespaces/{ns}/rolebindings", json={
            "metadata": {"name": user}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                    "name": role},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]})
        assert r.status_code == 201, r.text
    for name in ("a", "b"):
        assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod(name)).status_code == 201
    with secure.client("vi") as viewer, secure.client("ed") as editor:
        wait_for(lambda: editor.get(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets").status_code == 200, 10,
                 what="the role bindings in effect")
        r = viewer.post(f"/api/v1/namespaces/{ns}/pods/a/eviction", json=eviction("a"))
        assert r.status_code == 403, r.text
        assert r.json()["message"] == (f'pods "a" is forbidden: User "vi" cannot create resource "pods/eviction" in '
                                       f'API group "" in the namespace "{ns}"')
        r = viewer.post(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets", json={
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "v"},
            "spec": {"minAvailable": 1}})
        assert r.status_code == 403
        assert viewer.get(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets").status_code == 200
        r = editor.post(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets", json={
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "e"},
            "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "none"}}}})
        assert r.status_code == 201, r.text
        r = editor.post(f"/api/v1/namespaces/{ns}/pods/a/eviction", json=eviction("a"))
        assert r.status_code == 201, r.text
        assert admin.get(f"/api/v1/namespaces/{ns}/pods/a").status_code == 404


def test_a_kubelet_evicts_only_its_own_pods(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod("mine", "node-a")).status_code == 201
    assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod("theirs", "node-b")).status_code == 201
    with secure.client("kubelet-node-a") as kubelet:
        r = kubelet.post(f"/api/v1/namespaces/{ns}/pods/theirs/eviction", json=eviction("theirs"))
        assert r.status_code == 403, r.text
        assert admin.get(f"/api/v1/namespaces/{ns}/pods/theirs").status_code == 200
        r = kubelet.post(f"/api/v1/namespaces/{ns}/pods/mine/eviction", json=eviction("mine"))
        assert r.status_code == 201, r.text
        pod_now = admin.get(f"/api/v1/namespaces/{ns}/pods/mine").json()  # held for node-a's kubelet to stop it
        assert pod_now["metadata"].get("deletionTimestamp")


def test_podgc_force_deletes_terminating_pods_on_out_of_service_nodes(admin: httpx.Client, ns: str,
                                                                      controllers: ControllerProcess) -> None:
    """A NotReady node (no kubelet: no Ready condition) holds a deleted pod for ever, until an admin taints it
    node.kubernetes.io/out-of-service; a terminating pod of a node without the taint stays."""
    for node in (f"down-{ns}", f"slow-{ns}"):
        assert admin.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
                          ).status_code == 201
        r = admin.post(f"/api/v1/namespaces/{ns}/pods", json={**pod(f"on-{node}", node, {"app": "x"}),
                                                              "spec": {**pod("x", node)["spec"],
                                                                       "terminationGracePeriodSeconds": 600}})
        assert r.status_code == 201, r.text
        assert admin.delete(f"/api/v1/namespaces/{ns}/pods/on-{node}").status_code == 200
    try:
        r = admin.patch(f"/api/v1/nodes/down-{ns}", json={"spec": {"taints": [
            {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]}},
            headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
        wait_for(lambda: admin.get(f"/api/v1/namespaces/{ns}/pods/on-down-{ns}").status_code == 404, 30, 0.2,
                 what="the terminating pod of the out-of-service node force-deleted")
        held = admin.get(f"/api/v1/namespaces/{ns}/pods/on-slow-{ns}")
        assert held.status_code == 200 and held.json()["metadata"]["deletionTimestamp"]
    finally:
        for node in (f"down-{ns}", f"slow-{ns}"):
            admin.delete(f"/api/v1/nodes/{node}")


def test_a_budget_that_cannot_be_computed_fails_safe(admin: httpx.Client, ns: str,
                                                     controllers: ControllerProcess) -> None:
    """A pod whose controller cannot be found (a kind with no scale served here) under a maxUnavailable
    budget: the status allows nothing, with DisruptionAllowed False, reason SyncFailed (upstream failSafe)."""
    owner = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "0f0f", "controller": True}
    body = pod("owned", None, {"app": "owned"})
    body["metadata"]["ownerReferences"] = [owner]
    r = admin.post(f"/api/v1/namespaces/{ns}/pods", json=body)
    assert r.status_code == 201, r.text
    r = admin.post(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets", json={
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "owned"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "owned"}}}})
    assert r.status_code == 201, r.text

    def condition() -> dict[str, Any] | None:
        status = admin.get(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets/owned").json().get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["reason"] == "SyncFailed"), None)

    found = wait_for(condition, 30, 0.2, what="the SyncFailed condition")
    assert isinstance(found, dict)
    assert found["status"] == "False" and found["message"] == 'found no controllers for pod "owned"'
    status = admin.get(f"{POLICY}/namespaces/{ns}/poddisruptionbudgets/owned").json()["status"]
    assert status["disruptionsAllowed"] == 0


def test_podgc_fails_unscheduled_terminating_pods(admin: httpx.Client, ns: str, controllers: ControllerProcess
                                                  ) -> None:
    """A pod never scheduled, deleted but held by a finalizer: the pod garbage collector marks it Failed and
    deletes it (the finalizer, not PodGC, keeps it until its owner lets go)."""
    body = pod("unscheduled", None, {"app": "x"})
    body["metadata"]["finalizers"] = ["example.com/hold"]
    assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=body).status_code == 201
    assert admin.delete(f"/api/v1/namespaces/{ns}/pods/unscheduled").status_code == 200
    path = f"/api/v1/namespaces/{ns}/pods/unscheduled"
    wait_for(lambda: (admin.get(path).json().get("status") or {}).get("phase") == "Failed", 30, 0.2,
             what="the unscheduled terminating pod marked Failed")
    r = admin.patch(path, json={"metadata": {"finalizers": None}},
                    headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    wait_for(lambda: admin.get(path).status_code == 404, 10, what="the pod gone once its finalizer is")
