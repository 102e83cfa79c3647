"""The local-path provisioner as its own identity (rancher's service account, with the TokenRequest token
`install --write-kubeconfig` puts in its kubeconfig)
on an HTTPS apiserver with RBAC and every admission plugin, with rancher's roles applied by `install`: two
replicas elect a leader on the Lease local-path-storage/rancher.io-local-path; the leader creates the helper pod
and then the volume (the audit log says who), and after a kill -9 the standby takes over and deletes the
Released volume. No kubelet here: the test plays the node by writing the helper pods' phase, so this module
needs no Docker. Its identity may not read Secrets."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from local_path_provisioner.manifests import user
from tests.auth_cluster import SecureApiServer
from tests.cluster import ALL_ADMISSION, Etcd, free_port, ok, wait_for
from tests.controller_process import ControllerProcess
from tests.local_path_process import ProvisionerProcess, install

MERGE = {"content-type": "application/merge-patch+json"}
PVS = "/api/v1/persistentvolumes"
HELPERS = "/api/v1/namespaces/local-path-storage/pods"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/local-path-storage/leases/rancher.io-local-path"
ELECTION = ("--leader-elect", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
            "--leader-elect-retry-period", "1s")


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd, *ALL_ADMISSION).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def conf(workdir: Path, secure: SecureApiServer) -> Path:
    """install as kubernetes-admin, and the provisioner's kubeconfig with a token of its account."""
    path = workdir / f"local-path-provisioner-{uuid.uuid4().hex[:6]}.conf"
    base = workdir / f"lp-rbac-{uuid.uuid4().hex[:6]}"
    out = install(secure.secure_url, base, "--kubeconfig", str(secure.kubeconfig("admin")),
                  "--write-kubeconfig", str(path))
    assert "storageclass/local-path created" in out and f"kubeconfig: wrote {path}" in out, out
    return path


def token(conf: Path) -> str:
    return str(yaml.safe_load(conf.read_text())["users"][0]["user"]["token"])


@pytest.fixture(scope="module")
def replicas(workdir: Path, secure: SecureApiServer, conf: Path) -> Iterator[list[ProvisionerProcess]]:
    cm = ControllerProcess(workdir, secure.secure_url, ["persistentvolume-binder", "pvc-protection", "pv-protection"],
                           "--kubeconfig", str(secure.kubeconfig("controller-manager")),
                           "--pvclaimbinder-sync-period", "10m")
    started = [ProvisionerProcess(workdir, secure.secure_url, None, "--kubeconfig", str(conf), *ELECTION,
                                  "--health-port", str(free_port())) for _ in range(2)]
    try:
        cm.start()
        for replica in started:
            replica.start(wait_synced=False)
        yield started
    finally:
        for replica in started:
            replica.stop()
        cm.stop()


def holder(admin: httpx.Client) -> str:
    r = admin.get(LEASE)
    return (r.json().get("spec") or {}).get("holderIdentity") or "" if r.status_code == 200 else ""


def finish_helper(admin: httpx.Client, name: str) -> None:
    """What the node's kubelet would write once the helper's script exited 0."""
    wait_for(lambda: admin.get(f"{HELPERS}/{name}").status_code == 200, 30, what=f"helper pod {name}")
    ok(admin.patch(f"{HELPERS}/{name}/status", json={"status": {"phase": "Succeeded"}}, headers=MERGE))


def test_leader_provisions_and_deletes_as_its_service_account(secure: SecureApiServer, admin: httpx.Client,
                                                                conf: Path, replicas: list[ProvisionerProcess]) -> None:
    ok(admin.post("/api/v1/nodes", json={"metadata": {"name": "node-a", "labels": {
        "kubernetes.io/hostname": "node-a"}}}))
    identities = {r.identity(): r for r in replicas}
    leader = wait_for(lambda: identities.get(holder(admin)), 30, what="a replica to hold the Lease")
    assert isinstance(leader, ProvisionerProcess)
    ns = f"lpr-{uuid.uuid4().hex[:6]}"
    ok(admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}}))
    ok(admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": "default"}}))
    claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    made = ok(admin.post(claims, json={"metadata": {"name": "data", "annotations": {
        "volume.kubernetes.io/selected-node": "node-a"}}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
    assert made["spec"]["storageClassName"] == "local-path"  # the default class install made
    uid = made["metadata"]["uid"]
    helper = f"helper-pod-create-pvc-{uid}"
    finish_helper(admin, helper)
    wait_for(lambda: admin.get(f"{claims}/data").json()["status"].get("phase") == "Bound", 30,
             what="the claim Bound to the provisioned volume")
    pv = ok(admin.get(f"{PVS}/pvc-{uid}"))
    assert pv["spec"]["hostPath"]["path"].startswith(str(conf.parent / "lp-rbac-"))  # the ConfigMap's base path
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == \
        ["node-a"]
    wait_for(lambda: admin.get(f"{HELPERS}/{helper}").status_code == 404, 30, what="the helper pod deleted")
    events = secure.wait_audit(lambda e: e["user"]["username"] == user() and e["verb"] == "create" and
                               e["objectRef"]["resource"] == "persistentvolumes", what="the PV create in the audit")
    assert events[0]["responseStatus"]["code"] == 201
    assert secure.wait_audit(lambda e: e["user"]["username"] == user() and e["verb"] == "create" and
                             e["objectRef"]["resource"] == "pods" and e["objectRef"].get("name") == helper)
    # the standby takes over from a leader killed -9, and deletes the Released volume's directory and object
    leader.kill()
    standby = next(r for r in replicas if r is not leader)
    wait_for(lambda: holder(admin) == standby.identity(), 30, what="the standby to take the Lease")
    ok(admin.delete(f"{claims}/data"))
    finish_helper(admin, f"helper-pod-delete-pvc-{uid}")
    wait_for(lambda: admin.get(f"{PVS}/pvc-{uid}").status_code == 404, 30, what="the volume deleted")
    leader.start(wait_synced=False)  # back as the standby, for the module's teardown


def test_health_and_ready_on_every_replica(replicas: list[ProvisionerProcess]) -> None:
    """local-up waits for /ready (the caches synced): a standby's caches are warm too."""
    for replica in replicas:
        port = replica.process.argv[replica.process.argv.index("--health-port") + 1]
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).text == "OK"
        wait_for(lambda port=port: httpx.get(f"http://127.0.0.1:{port}/ready", timeout=5).status_code == 200, 30,
                 what="/ready")


def test_provisioner_identity_reads_no_secrets(secure: SecureApiServer, conf: Path) -> None:
    with secure.token_client(token(conf)) as client:
        r = client.get("/api/v1/secrets")
        assert r.status_code == 403, r.text
        assert r.json()["message"] == (f'secrets is forbidden: User "{user()}" cannot list resource "secrets" in API '
                                       'group "" at the cluster scope')
        assert client.get("/api/v1/persistentvolumeclaims").status_code == 200
        denied = client.post("/apis/storage.k8s.io/v1/storageclasses", json={
            "metadata": {"name": "mine"}, "provisioner": "rancher.io/local-path"})
        assert denied.status_code == 403, denied.text
