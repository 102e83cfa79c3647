"""The resource-quota and replication controllers under their own service accounts and bootstrap roles on an
HTTPS apiserver with RBAC and every admission plugin: a quota's status is kept by
system:serviceaccount:kube-system:resourcequota-controller, an RC's pods made by
system:serviceaccount:kube-system:replication-controller (the audit log says so), and a user bound to the
`view` role reads quotas and RCs but may not change them; `edit` scales an RC."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.auth_cluster import SecureApiServer, wait_until_allowed
from tests.cluster import ALL_ADMISSION, Etcd, ok, wait_for
from tests.controller_process import ControllerProcess

QUOTA_SA = "system:serviceaccount:kube-system:resourcequota-controller"
RC_SA = "system:serviceaccount:kube-system:replication-controller"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd, *ALL_ADMISSION).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cm(workdir: Path, secure: SecureApiServer) -> Iterator[ControllerProcess]:
    process = ControllerProcess(workdir, secure.secure_url, ["resourcequota", "replicationcontroller"],
                                "--kubeconfig", str(secure.kubeconfig("controller-manager")))
    try:
        process.start()
        yield process
    finally:
        process.stop()


def test_controllers_as_their_service_accounts(secure: SecureApiServer, admin: httpx.Client,
                                               cm: ControllerProcess) -> None:
    ns = f"qrbac-{uuid.uuid4().hex[:6]}"
    ok(admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}}))
    ok(admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": "default"}}))
    quotas = f"/api/v1/namespaces/{ns}/resourcequotas"
    ok(admin.post(quotas, json={"metadata": {"name": "q"}, "spec": {"hard": {"pods": "2", "count/configmaps": "5"}}}))
    try:
        wait_for(lambda: (admin.get(f"{quotas}/q").json().get("status") or {}).get("used"), 30,
                 what="status.used written by the quota controller")
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{cm.log_tail()}") from None
    rc = {"metadata": {"name": "web"}, "spec": {"replicas": 3, "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
    ok(admin.post(f"/api/v1/namespaces/{ns}/replicationcontrollers", json=rc))
    pods = f"/api/v1/namespaces/{ns}/pods"
    # the quota allows two: the third create is refused, as the controller's event says
    wait_for(lambda: len(admin.get(pods).json()["items"]) == 2, 30, what="two pods")
    events = wait_for(lambda: [e for e in admin.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
                               if e["reason"] == "FailedCreate"], 30, what="FailedCreate")
    assert "exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2" in events[0]["message"]  # type: ignore[index]
    # a pod deleted: the quota controller gives the unit back, the RC makes its pod
    victim = admin.get(pods).json()["items"][0]["metadata"]["name"]
    ok(admin.delete(f"{pods}/{victim}", params={"gracePeriodSeconds": "0"}))
    wait_for(lambda: len([p for p in admin.get(pods).json()["items"] if p["metadata"]["name"] != victim]) == 2, 60,
             what="the RC's replacement once the quota has room")

    def written_by(user: str, verb: str, resource: str, sub: str | None = None) -> bool:
        return any(e.get("user", {}).get("username") == user and e["verb"] == verb
                   and e.get("objectRef", {}).get("resource") == resource
                   and e.get("objectRef", {}).get("subresource") == sub
                   and e.get("objectRef", {}).get("namespace") == ns and e["responseStatus"]["code"] < 300
                   for e in secure.audit_events())

    wait_for(lambda: written_by(QUOTA_SA, "update", "resourcequotas", "status"), 10, what="quota status audit")
    wait_for(lambda: written_by(RC_SA, "create", "pods"), 10, what="RC pod create audit")
    wait_for(lambda: written_by(RC_SA, "update", "replicationcontrollers", "status"), 10, what="RC status audit")


def test_view_reads_and_edit_scales(secure: SecureApiServer, admin: httpx.Client) -> None:
    ns = f"qview-{uuid.uuid4().hex[:6]}"
    ok(admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}}))
    ok(admin.post(f"/api/v1/namespaces/{ns}/resourcequotas", json={"metadata": {"name": "q"},
                                                                    "spec": {"hard": {"pods": "9"}}}))
    ok(admin.post(f"/api/v1/namespaces/{ns}/replicationcontrollers", json={"metadata": {"name": "web"}, "spec": {
        "replicas": 0, "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}))
    for who, role in (("viewer", "view"), ("editor", "edit")):
        secure.issue(f"q-{who}", who)
        ok(admin.post(f"{RBAC}/namespaces/{ns}/rolebindings", json={
            "metadata": {"name": who}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                   "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": who}]}))
    scale = f"/api/v1/namespaces/{ns}/replicationcontrollers/web/scale"
    merge = {"content-type": "application/merge-patch+json"}
    with secure.client("q-viewer") as viewer, secure.client("q-editor") as editor:
        wait_until_allowed(viewer, "GET", f"/api/v1/namespaces/{ns}/resourcequotas", True)
        assert viewer.get(f"/api/v1/namespaces/{ns}/replicationcontrollers/web").status_code == 200
        assert viewer.get(f"/api/v1/namespaces/{ns}/limitranges").status_code == 200
        r = viewer.patch(scale, json={"spec": {"replicas": 1}}, headers=merge)
        assert r.status_code == 403 and 'User "viewer" cannot patch resource "replicationcontrollers/scale"' in \
            r.json()["message"]
        assert viewer.delete(f"/api/v1/namespaces/{ns}/resourcequotas/q").status_code == 403
        wait_until_allowed(editor, "GET", scale, True)
        assert editor.patch(scale, json={"spec": {"replicas": 0}}, headers=merge).status_code == 200
        assert editor.delete(f"/api/v1/namespaces/{ns}/resourcequotas/q").status_code == 403
