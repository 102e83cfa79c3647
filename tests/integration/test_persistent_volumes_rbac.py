"""The volume controllers under their own service accounts and bootstrap roles (persistent-volume-binder,
pvc-protection-controller, pv-protection-controller) on an HTTPS apiserver with RBAC, the Node
authorizer and every admission plugin: a claim binds, its deletion waits for its pod, the Delete
volume goes; a kubelet reads the claim and volume of its own pod and nothing else; the audit log
records the binder's writes as its service account."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.auth_cluster import SecureApiServer
from tests.cluster import ALL_ADMISSION, Etcd, ok, wait_for
from tests.controller_process import ControllerProcess

MERGE = {"content-type": "application/merge-patch+json"}
PVS = "/api/v1/persistentvolumes"
BINDER = "system:serviceaccount:kube-system:persistent-volume-binder"


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd, *ALL_ADMISSION).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cm(workdir: Path, secure: SecureApiServer) -> Iterator[ControllerProcess]:
    process = ControllerProcess(workdir, secure.secure_url, ["persistentvolume-binder", "pvc-protection",
                                                             "pv-protection"],
                                "--kubeconfig", str(secure.kubeconfig("controller-manager")),
                                "--pvclaimbinder-sync-period", "10m")  # binding follows from events alone
    try:
        process.start()
        yield process
    finally:
        process.stop()


def test_binding_protection_and_node_access(secure: SecureApiServer, admin: httpx.Client,
                                           cm: ControllerProcess) -> None:
    s = uuid.uuid4().hex[:6]
    ns, pv_name, cls = f"pvrbac-{s}", f"pvrbac-{s}", f"pvrbac-{s}"
    ok(admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}}))
    ok(admin.post("/api/v1/namespaces/" + ns + "/serviceaccounts", json={"metadata": {"name": "default"}}))
    claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    try:
        ok(admin.post(PVS, json={"metadata": {"name": pv_name}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls,
            "persistentVolumeReclaimPolicy": "Delete", "hostPath": {"path": f"/tmp/{pv_name}"}}}))
        ok(admin.post(claims, json={"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": cls, "resources": {"requests": {"storage": "1Gi"}}}}))
        try:
            wait_for(lambda: admin.get(f"{claims}/data").json()["status"].get("phase") == "Bound", 20,
                     what="claim Bound under the binder's own role")
        except TimeoutError as e:
            state = f"{admin.get(f'{claims}/data').text}\n{admin.get(f'{PVS}/{pv_name}').text}"
            raise AssertionError(f"{e}\n{cm.log_tail()}\n{state}") from None
        assert admin.get(f"{PVS}/{pv_name}").json()["status"]["phase"] == "Bound"
        ok(admin.post(f"/api/v1/namespaces/{ns}/pods", json={"metadata": {"name": "user"}, "spec": {
            "nodeName": "node-a", "containers": [{"name": "c", "image": "busybox"}],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}))
        # the kubelet of node-a reads its pod's claim and volume; node-b's does not
        with secure.client("kubelet-node-a") as kubelet_a, secure.client("kubelet-node-b") as kubelet_b:
            wait_for(lambda: kubelet_a.get(f"{claims}/data").status_code == 200, 10, what="node-a reads its claim")
            assert kubelet_a.get(f"{PVS}/{pv_name}").status_code == 200
            assert kubelet_a.get(claims).status_code == 403
            assert kubelet_b.get(f"{claims}/data").status_code == 403
            assert kubelet_b.get(f"{PVS}/{pv_name}").status_code == 403
        ok(admin.delete(f"{claims}/data"))
        assert admin.get(f"{claims}/data").json()["metadata"]["deletionTimestamp"]
        ok(admin.delete(f"/api/v1/namespaces/{ns}/pods/user", params={"gracePeriodSeconds": "0"}))
        wait_for(lambda: admin.get(f"{claims}/data").status_code == 404, 20, what="the claim to go after its pod")
        wait_for(lambda: admin.get(f"{PVS}/{pv_name}").status_code == 404, 20, what="the Delete volume to go")
        writes = secure.wait_audit(lambda e: e["user"]["username"] == BINDER and e["verb"] == "delete"
                                   and e["objectRef"].get("resource") == "persistentvolumes", what="binder delete")
        assert writes[0]["responseStatus"]["code"] == 200
    finally:
        for path in (f"{claims}/data", f"{PVS}/{pv_name}"):
            admin.patch(path, headers=MERGE, json={"metadata": {"finalizers": None}})
            admin.delete(path)
        admin.delete(f"/api/v1/namespaces/{ns}")
