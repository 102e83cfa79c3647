"""Dynamic local-path volumes end to end, one cluster for the module: a real etcd and apiserver, the
controller-manager (persistentvolume-binder, pvc-protection, pv-protection, statefulset), the scheduler, one kubelet on
Docker and the local-path provisioner (`python -m local_path_provisioner`, after its `install`), with its base
directory in the module's workdir.

A claim of the default class local-path (WaitForFirstConsumer) is provisioned on the node its pod was
scheduled to: the helper pod makes the directory, the hostPath volume pvc-<uid> has node affinity to it; a
second pod on the claim reads what the first wrote (read-only); deleting the claim removes the directory
(Delete) or keeps it (Retain). A claim with no class and no volume stays Pending with the binder's event and
its pod waits with the kubelet's FailedMount until a volume is bound. ReadWriteMany is refused with the
provisioner's ProvisioningFailed. kill -9 of the provisioner while its helper runs leaves one volume and one
directory (or none when the claim went meanwhile). Real kubectl 1.27 and 1.33 `get pv,pvc` and `describe pvc`.
A StatefulSet's pod, deleted, comes back under its name on its own claim and reads what it wrote.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, Etcd, make_workdir, wait_for
from tests.controller_process import ControllerProcess
from tests.kubectl import Kubectl, find_kubectl, kubectl_dir
from tests.local_path_process import ProvisionerProcess, install
from tests.node_process import BUSYBOX
from tests.scheduler_process import SchedulerProcess

VERSIONS = ("1.27", "1.33")
PVS = "/api/v1/persistentvolumes"
PROVISIONER = "rancher.io/local-path"
HELPER_NS = "local-path-storage"
MERGE = {"Content-Type": "application/merge-patch+json"}
SETUP = '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n'
# the kill -9 test's setup script: it waits for the test's go-ahead (a file beside the volume's directory)
GATED_SETUP = '#!/bin/sh\nset -eu\nwhile [ ! -e "$VOL_DIR.go" ]; do sleep 0.1; done\nmkdir -m 0777 -p "$VOL_DIR"\n'


@dataclass
class Cluster:
    api: httpx.Client
    apiserver: ApiServer
    provisioner: ProvisionerProcess
    base: Path
    node: str
    workdir: Path


@pytest.fixture(scope="module")
def cluster(own_etcd: Etcd) -> Iterator[Cluster]:
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine to run a kubelet's pods: {e}")
    from tests.node_process import KubeletProcess, cleanup, ensure_images, free_pod_cidrs

    ensure_images()
    workdir = make_workdir("minik8s-local-path-")
    base = workdir / "local-path"
    apiserver = ApiServer(workdir, own_etcd, "--etcd-compaction-interval", "0")
    apiserver.start()
    started: list[Any] = []
    kubelet = None
    try:
        api = httpx.Client(base_url=apiserver.url, timeout=10)
        print(install(apiserver.url, base))
        controllers = ControllerProcess(workdir, apiserver.url, ["persistentvolume-binder", "pvc-protection",
                                                                 "pv-protection", "statefulset"],
                                        "--pvclaimbinder-sync-period", "10m")
        controllers.start()
        started.append(controllers)
        scheduler = SchedulerProcess(workdir, apiserver.url)
        scheduler.start()
        started.append(scheduler)
        kubelet = KubeletProcess(workdir, apiserver, f"lp-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
        kubelet.start(api)
        provisioner = ProvisionerProcess(workdir, apiserver.url, base)
        provisioner.start()
        started.append(provisioner)
        yield Cluster(api, apiserver, provisioner, base, kubelet.node, workdir)
    finally:
        for process in started:
            process.stop()
        if kubelet is not None:
            cleanup([kubelet])
        apiserver.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def ns(cluster: Cluster) -> Iterator[str]:
    name = f"lp-{uuid.uuid4().hex[:8]}"
    r = cluster.api.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert r.status_code == 201, r.text
    yield name
    for p in cluster.api.get(f"/api/v1/namespaces/{name}/pods").json()["items"]:
        cluster.api.delete(f"/api/v1/namespaces/{name}/pods/{p['metadata']['name']}", params={"gracePeriodSeconds": 0})
    cluster.api.delete(f"/api/v1/namespaces/{name}")


# -- helpers --------------------------------------------------------------------------------------------------


def claims(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/persistentvolumeclaims"


def claim(name: str, cls: str | None = None, modes: tuple[str, ...] = ("ReadWriteOnce",), size: str = "64Mi",
          **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls is not None:
        spec["storageClassName"] = cls
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, **meta}, "spec": spec}


def pod(name: str, claim_name: str, script: str, *, read_only: bool = False, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": BUSYBOX, "command": ["sh", "-c", script],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name, "readOnly": read_only}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def create(api: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = api.post(path, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def get(api: httpx.Client, path: str) -> dict[str, Any] | None:
    r = api.get(path)
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    return r.json()


def must_get(api: httpx.Client, path: str) -> dict[str, Any]:
    found = get(api, path)
    assert found is not None, f"{path} not found"
    return found


def phase(obj: dict[str, Any] | None) -> str:
    return ((obj or {}).get("status") or {}).get("phase") or ""


def wait_phase(api: httpx.Client, path: str, wanted: str, timeout: float = 90) -> dict[str, Any]:
    found = wait_for(lambda: (lambda o: o if phase(o) == wanted else None)(get(api, path)), timeout,
                     what=f"{path} to be {wanted}")
    assert isinstance(found, dict)
    return found


def log(api: httpx.Client, ns: str, name: str) -> str:
    r = api.get(f"/api/v1/namespaces/{ns}/pods/{name}/log")
    return r.text if r.status_code == 200 else ""


def events(api: httpx.Client, ns: str, name: str) -> list[tuple[str, str, str, str]]:
    items = api.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
    return [(e["type"], e["reason"], e["message"], (e.get("source") or {}).get("component", ""))
            for e in items if e["involvedObject"].get("name") == name]


def wait_event(api: httpx.Client, ns: str, name: str, reason: str, timeout: float = 60) -> tuple[str, str, str, str]:
    found = wait_for(lambda: next((e for e in events(api, ns, name) if e[1] == reason), None), timeout,
                     what=f"event {reason} on {name}")
    assert isinstance(found, tuple)
    return found


def helper_pods(api: httpx.Client) -> list[str]:
    return [p["metadata"]["name"] for p in api.get(f"/api/v1/namespaces/{HELPER_NS}/pods").json()["items"]]


def volume_dirs(base: Path, uid: str) -> list[Path]:
    return sorted(p for p in base.glob(f"pvc-{uid}_*") if p.is_dir()) if base.is_dir() else []


def set_setup_script(api: httpx.Client, script: str) -> None:
    r = api.patch(f"/api/v1/namespaces/{HELPER_NS}/configmaps/local-path-config", json={"data": {"setup": script}},
                  headers=MERGE)
    assert r.status_code == 200, r.text


def delete(api: httpx.Client, path: str) -> None:
    r = api.delete(path, params={"gracePeriodSeconds": 0})
    assert r.status_code in (200, 202, 404), r.text


def gone(api: httpx.Client, path: str, timeout: float = 90) -> None:
    wait_for(lambda: get(api, path) is None, timeout, what=f"{path} to be gone")


# -- tests ----------------------------------------------------------------------------------------------------


def test_install_made_rancher_objects_and_the_default_class(cluster: Cluster) -> None:
    api = cluster.api
    sc = must_get(api, "/apis/storage.k8s.io/v1/storageclasses/local-path")
    assert (sc["provisioner"], sc["volumeBindingMode"], sc["reclaimPolicy"]) == \
        (PROVISIONER, "WaitForFirstConsumer", "Delete")
    assert sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    role = must_get(api, "/apis/rbac.authorization.k8s.io/v1/clusterroles/local-path-provisioner-role")
    assert {"apiGroups": [""], "resources": ["persistentvolumes"],
            "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]} in role["rules"]
    binding = must_get(api, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/local-path-provisioner-bind")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "local-path-provisioner-service-account",
                                    "namespace": HELPER_NS}]
    assert must_get(api, f"/api/v1/namespaces/{HELPER_NS}/serviceaccounts/local-path-provisioner-service-account")
    # a second install changes nothing
    assert all(line.endswith("unchanged") for line in install(cluster.apiserver.url, cluster.base).split("\n") if line)


def test_claim_survives_its_pod_and_delete_removes_the_directory(cluster: Cluster, ns: str) -> None:
    api = cluster.api
    made = create(api, claims(ns), claim("data"))  # no class: the DefaultStorageClass admission gives local-path
    assert made["spec"]["storageClassName"] == "local-path"
    uid = made["metadata"]["uid"]
    assert wait_event(api, ns, "data", "WaitForFirstConsumer")[2] == \
        "waiting for first consumer to be created before binding"
    create(api, f"/api/v1/namespaces/{ns}/pods", pod("writer", "data", "echo written-$(date +%N) > /data/f; "
                                                                       "cat /data/f; sleep 3600"))
    bound = wait_phase(api, f"{claims(ns)}/data", "Bound")
    assert bound["spec"]["volumeName"] == f"pvc-{uid}"
    assert bound["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == cluster.node
    wait_phase(api, f"/api/v1/namespaces/{ns}/pods/writer", "Running")
    wait_for(lambda: "written-" in log(api, ns, "writer"), 30, what="the writer's output")
    written = log(api, ns, "writer").strip()

    pv = must_get(api, f"{PVS}/pvc-{uid}")
    path = Path(cluster.base / f"pvc-{uid}_{ns}_data")
    assert pv["spec"]["hostPath"] == {"path": str(path), "type": "DirectoryOrCreate"}
    assert pv["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [cluster.node]}]}]}}
    assert (pv["spec"]["persistentVolumeReclaimPolicy"], pv["spec"]["storageClassName"]) == ("Delete", "local-path")
    assert pv["spec"]["capacity"] == {"storage": "64Mi"} and pv["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == PROVISIONER
    assert "external-provisioner.volume.kubernetes.io/finalizer" in pv["metadata"]["finalizers"]
    assert (path / "f").read_text().strip() == written  # the pod wrote into the node's directory
    reasons = {e[1]: e for e in events(api, ns, "data")}
    assert reasons["Provisioning"][2] == f'External provisioner is provisioning volume for claim "{ns}/data"'
    assert reasons["ProvisioningSucceeded"][2] == f"Successfully provisioned volume pvc-{uid}"
    assert reasons["ProvisioningSucceeded"][3].startswith(f"{PROVISIONER}_")
    wait_for(lambda: not helper_pods(api), 60, what="the helper pod to be removed")
    # the pod waited a moment for its claim to be provisioned: too short a wait for a FailedMount warning
    assert not [e for e in events(api, ns, "writer") if e[1] == "FailedMount"]

    delete(api, f"/api/v1/namespaces/{ns}/pods/writer")
    gone(api, f"/api/v1/namespaces/{ns}/pods/writer")
    create(api, f"/api/v1/namespaces/{ns}/pods", pod(
        "reader", "data", "cat /data/f; touch /data/g 2>&1 || echo cannot-write; sleep 3600", read_only=True))
    wait_for(lambda: "cannot-write" in log(api, ns, "reader"), 90, what="the reader's output")
    out = log(api, ns, "reader")
    assert written in out and "Read-only file system" in out, out
    assert not (path / "g").exists()

    delete(api, f"/api/v1/namespaces/{ns}/pods/reader")
    delete(api, f"{claims(ns)}/data")
    gone(api, f"{claims(ns)}/data")  # pvc-protection let it go once no pod used it
    gone(api, f"{PVS}/pvc-{uid}")
    assert not path.exists(), "the Delete policy leaves no directory"
    wait_for(lambda: not helper_pods(api), 60, what="the teardown helper to be removed")


def test_retain_keeps_the_directory(cluster: Cluster, ns: str) -> None:
    api = cluster.api
    cls = f"keep-{uuid.uuid4().hex[:6]}"
    create(api, "/apis/storage.k8s.io/v1/storageclasses", {
        "metadata": {"name": cls}, "provisioner": PROVISIONER, "reclaimPolicy": "Retain",
        "volumeBindingMode": "WaitForFirstConsumer"})
    try:
        uid = create(api, claims(ns), claim("kept", cls))["metadata"]["uid"]
        create(api, f"/api/v1/namespaces/{ns}/pods", pod("w", "kept", "echo kept > /data/f; sleep 3600"))
        wait_phase(api, f"/api/v1/namespaces/{ns}/pods/w", "Running")
        path = cluster.base / f"pvc-{uid}_{ns}_kept"
        wait_for(lambda: (path / "f").exists(), 30, what="the file on the node")
        assert must_get(api, f"{PVS}/pvc-{uid}")["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        delete(api, f"/api/v1/namespaces/{ns}/pods/w")
        delete(api, f"{claims(ns)}/kept")
        gone(api, f"{claims(ns)}/kept")
        wait_phase(api, f"{PVS}/pvc-{uid}", "Released")
        assert (path / "f").read_text() == "kept\n"
        assert not any(n.startswith("helper-pod-delete-") for n in helper_pods(api))
        # deleting the Released volume object keeps the data too: the provisioner only drops its finalizer
        delete(api, f"{PVS}/pvc-{uid}")
        gone(api, f"{PVS}/pvc-{uid}")
        assert (path / "f").read_text() == "kept\n"
        shutil.rmtree(path)
    finally:
        api.delete(f"/apis/storage.k8s.io/v1/storageclasses/{cls}")


def test_claim_without_class_or_volume_waits_and_its_pod_with_it(cluster: Cluster, ns: str) -> None:
    api = cluster.api
    uid = create(api, claims(ns), claim("lonely", ""))["metadata"]["uid"]
    event = wait_event(api, ns, "lonely", "FailedBinding")
    assert event[:3] == ("Normal", "FailedBinding",
                         "no persistent volumes available for this claim and no storage class is set")
    # a pod given to the node directly (no scheduler to hold it back): the kubelet waits for the claim
    create(api, f"/api/v1/namespaces/{ns}/pods", pod("waiter", "lonely", "cat /data/hello; sleep 3600",
                                                     node=cluster.node))
    mount = wait_event(api, ns, "waiter", "FailedMount")
    assert mount[:3] == ("Warning", "FailedMount", (
        "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process "
        f'volumes=[data]: error processing PVC {ns}/lonely: PVC {ns}/lonely has non-bound phase ("Pending") or '
        'empty pvc.Spec.VolumeName ("")'))
    assert phase(get(api, f"{claims(ns)}/lonely")) == "Pending"
    assert phase(get(api, f"/api/v1/namespaces/{ns}/pods/waiter")) == "Pending"
    # an administrator's volume for it: bound, and the pod starts
    directory = cluster.workdir / f"manual-{uid[:8]}"
    directory.mkdir()
    (directory / "hello").write_text("from-the-admin\n")
    name = f"manual-{uid[:8]}"
    create(api, PVS, {"metadata": {"name": name}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "hostPath": {"path": str(directory)}, "claimRef": {"namespace": ns, "name": "lonely"}}})
    try:
        wait_phase(api, f"{claims(ns)}/lonely", "Bound")
        wait_for(lambda: "from-the-admin" in log(api, ns, "waiter"), 60, what="the waiting pod to start")
    finally:
        delete(api, f"/api/v1/namespaces/{ns}/pods/waiter")
        delete(api, f"{claims(ns)}/lonely")
        gone(api, f"{claims(ns)}/lonely")
        delete(api, f"{PVS}/{name}")


def test_read_write_many_is_refused_by_the_provisioner(cluster: Cluster, ns: str) -> None:
    api = cluster.api
    made = create(api, claims(ns), claim("shared", "local-path", modes=("ReadWriteMany",), annotations={
        "volume.kubernetes.io/selected-node": cluster.node}))
    event = wait_event(api, ns, "shared", "ProvisioningFailed")
    assert event[:3] == ("Warning", "ProvisioningFailed",
                         'failed to provision volume with StorageClass "local-path": NodePath only supports '
                         "ReadWriteOnce and ReadWriteOncePod (1.22+) access modes")
    assert event[3].startswith(f"{PROVISIONER}_")
    assert get(api, f"{PVS}/pvc-{made['metadata']['uid']}") is None
    assert phase(get(api, f"{claims(ns)}/shared")) == "Pending"
    assert not volume_dirs(cluster.base, made["metadata"]["uid"])
    # ReadWriteOncePod is one of rancher's two modes
    once = create(api, claims(ns), claim("once", "local-path", modes=("ReadWriteOncePod",), annotations={
        "volume.kubernetes.io/selected-node": cluster.node}))
    assert wait_phase(api, f"{claims(ns)}/once", "Bound")["spec"]["volumeName"] == f"pvc-{once['metadata']['uid']}"
    delete(api, f"{claims(ns)}/once")
    gone(api, f"{PVS}/pvc-{once['metadata']['uid']}")


def test_volume_type_local_is_mounted_too(cluster: Cluster, ns: str) -> None:
    """rancher's `volumeType: local` claim annotation: a `local` volume (its path must exist, and does: the helper
    made it) instead of hostPath; the kubelet mounts it the same way."""
    api = cluster.api
    uid = create(api, claims(ns), claim("loc", annotations={"volumeType": "local"}))["metadata"]["uid"]
    create(api, f"/api/v1/namespaces/{ns}/pods", pod("lw", "loc", "echo local-ok > /data/f; sleep 3600"))
    wait_phase(api, f"/api/v1/namespaces/{ns}/pods/lw", "Running")
    pv = must_get(api, f"{PVS}/pvc-{uid}")
    path = cluster.base / f"pvc-{uid}_{ns}_loc"
    assert pv["spec"]["local"] == {"path": str(path)} and "hostPath" not in pv["spec"]
    wait_for(lambda: (path / "f").exists() and (path / "f").read_text() == "local-ok\n", 30,
             what="the file in the local volume")
    delete(api, f"/api/v1/namespaces/{ns}/pods/lw")
    delete(api, f"{claims(ns)}/loc")
    gone(api, f"{PVS}/pvc-{uid}")
    assert not path.exists()


def test_shared_file_system_takes_read_write_many(cluster: Cluster, ns: str) -> None:
    """rancher's sharedFileSystemPath: a second provisioner (its own name, the same helper namespace) whose
    config names one directory every node sees: a ReadWriteMany claim of an Immediate class is provisioned with
    no node at all, its volume has no node affinity, and two pods share it."""
    api = cluster.api
    name = "example.com/shared-path"
    shared = cluster.workdir / "shared"
    config = cluster.workdir / "shared-config.json"
    config.write_text(f'{{"sharedFileSystemPath": "{shared}"}}')
    second = ProvisionerProcess(cluster.workdir, cluster.apiserver.url, None, "--config", str(config),
                                "--provisioner-name", name)
    cls = f"shared-{uuid.uuid4().hex[:6]}"
    create(api, "/apis/storage.k8s.io/v1/storageclasses", {"metadata": {"name": cls}, "provisioner": name,
                                                          "reclaimPolicy": "Delete"})
    second.start()
    try:
        uid = create(api, claims(ns), claim("both", cls, modes=("ReadWriteMany",)))["metadata"]["uid"]
        bound = wait_phase(api, f"{claims(ns)}/both", "Bound")
        assert bound["spec"]["volumeName"] == f"pvc-{uid}"
        pv = must_get(api, f"{PVS}/pvc-{uid}")
        path = shared / f"pvc-{uid}_{ns}_both"
        assert pv["spec"]["hostPath"]["path"] == str(path) and "nodeAffinity" not in pv["spec"]
        assert pv["spec"]["accessModes"] == ["ReadWriteMany"]
        assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == name
        for writer in ("one", "two"):
            create(api, f"/api/v1/namespaces/{ns}/pods", pod(writer, "both", f"echo {writer} > /data/{writer}; "
                                                                             "sleep 3600"))
        for writer in ("one", "two"):
            wait_phase(api, f"/api/v1/namespaces/{ns}/pods/{writer}", "Running")
        wait_for(lambda: (path / "one").exists() and (path / "two").exists(), 30, what="both pods' files")
        for writer in ("one", "two"):
            delete(api, f"/api/v1/namespaces/{ns}/pods/{writer}")
        delete(api, f"{claims(ns)}/both")
        gone(api, f"{PVS}/pvc-{uid}")
        assert not path.exists()
        wait_for(lambda: not helper_pods(api), 60, what="the shared provisioner's helpers to be removed")
        # the node-local provisioner left the other's helpers alone (its log names none of them)
        assert f"pvc-{uid}" not in cluster.provisioner.log_text()
    finally:
        second.stop()
        api.delete(f"/apis/storage.k8s.io/v1/storageclasses/{cls}")


def test_a_statefulset_pod_comes_back_on_its_own_claim_and_finds_its_data(cluster: Cluster, ns: str) -> None:
    """volumeClaimTemplates give each ordinal a claim of its own (data-web-0, data-web-1) that outlives the
    pod: web-1 deleted comes back as web-1 (a new pod) on data-web-1, and reads what the first web-1 wrote."""
    api = cluster.api
    labels = {"app": "web"}
    script = ("[ -f /data/id ] || echo $(hostname)-$(date +%N) > /data/id; echo id=$(cat /data/id); sleep 3600")
    create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets", {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {"serviceName": "web", "replicas": 2, "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": BUSYBOX, "command": ["sh", "-c", script],
                                     "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
                 "volumeClaimTemplates": [claim("data", size="16Mi")]}})

    def ids() -> dict[str, str]:
        out = {}
        for name in ("web-0", "web-1"):
            line = next((x for x in log(api, ns, name).splitlines() if x.startswith("id=")), "")
            if line:
                out[name] = line.removeprefix("id=")
        return out

    wait_for(lambda: len(ids()) == 2, 120, what="both ordinals to write their id on their claims")
    first = ids()
    assert first["web-0"].startswith("web-0-") and first["web-1"].startswith("web-1-")
    volumes = {name: must_get(api, f"{claims(ns)}/data-{name}")["spec"]["volumeName"] for name in ("web-0", "web-1")}
    assert len(set(volumes.values())) == 2, volumes  # one volume per ordinal
    old_uid = must_get(api, f"/api/v1/namespaces/{ns}/pods/web-1")["metadata"]["uid"]
    delete(api, f"/api/v1/namespaces/{ns}/pods/web-1")
    wait_for(lambda: (get(api, f"/api/v1/namespaces/{ns}/pods/web-1") or {}).get("metadata", {}).get("uid")
             not in (None, old_uid), 90, what="web-1 to come back as a new pod")
    wait_for(lambda: "web-1" in ids(), 90, what="the new web-1's output")
    assert ids()["web-1"] == first["web-1"]  # the same claim, the same directory: the id it wrote before
    assert must_get(api, f"{claims(ns)}/data-web-1")["spec"]["volumeName"] == volumes["web-1"]


@pytest.fixture
def gated_setup(cluster: Cluster) -> Iterator[None]:
    set_setup_script(cluster.api, GATED_SETUP)
    try:
        yield
    finally:
        set_setup_script(cluster.api, SETUP)
        if not cluster.provisioner.alive():
            cluster.provisioner.start()


def _helper_running(api: httpx.Client, uid: str) -> bool:
    helper = get(api, f"/api/v1/namespaces/{HELPER_NS}/pods/helper-pod-create-pvc-{uid}")
    return phase(helper) == "Running"


def test_kill_9_mid_provisioning_leaves_one_volume_and_one_directory(cluster: Cluster, ns: str,
                                                                     gated_setup: None) -> None:
    api = cluster.api
    uid = create(api, claims(ns), claim("crash", "local-path", annotations={
        "volume.kubernetes.io/selected-node": cluster.node}))["metadata"]["uid"]
    wait_for(lambda: _helper_running(api, uid), 90, what="the helper pod to run its (gated) setup")
    cluster.provisioner.kill()
    cluster.provisioner.start()
    (cluster.base / f"pvc-{uid}_{ns}_crash.go").touch()  # let the helper finish now
    bound = wait_phase(api, f"{claims(ns)}/crash", "Bound")
    assert bound["spec"]["volumeName"] == f"pvc-{uid}"
    mine = [v["metadata"]["name"] for v in api.get(PVS).json()["items"]
            if (v["spec"].get("claimRef") or {}).get("uid") == uid]
    assert mine == [f"pvc-{uid}"]
    assert volume_dirs(cluster.base, uid) == [cluster.base / f"pvc-{uid}_{ns}_crash"]
    wait_for(lambda: not helper_pods(api), 60, what="the helper pod to be removed")
    (cluster.base / f"pvc-{uid}_{ns}_crash.go").unlink()
    delete(api, f"{claims(ns)}/crash")
    gone(api, f"{PVS}/pvc-{uid}")
    assert not volume_dirs(cluster.base, uid)


def test_kill_9_then_the_claim_goes_leaves_no_orphan_directory(cluster: Cluster, ns: str,
                                                               gated_setup: None) -> None:
    api = cluster.api
    uid = create(api, claims(ns), claim("fleeting", "local-path", annotations={
        "volume.kubernetes.io/selected-node": cluster.node}))["metadata"]["uid"]
    wait_for(lambda: _helper_running(api, uid), 90, what="the helper pod to run its (gated) setup")
    cluster.provisioner.kill()
    delete(api, f"{claims(ns)}/fleeting")
    gone(api, f"{claims(ns)}/fleeting")
    marker = cluster.base / f"pvc-{uid}_{ns}_fleeting.go"
    marker.touch()  # the helper makes the directory for a claim that is no more
    wait_for(lambda: phase(get(api, f"/api/v1/namespaces/{HELPER_NS}/pods/helper-pod-create-pvc-{uid}")) ==
             "Succeeded", 60, what="the orphaned helper to finish")
    assert volume_dirs(cluster.base, uid), "the helper made the directory"
    cluster.provisioner.start()
    wait_for(lambda: not volume_dirs(cluster.base, uid), 90, what="the orphan directory to be removed")
    wait_for(lambda: not helper_pods(api), 60, what="both helper pods to be removed")
    assert get(api, f"{PVS}/pvc-{uid}") is None
    marker.unlink()


GATED_TEARDOWN = '#!/bin/sh\nset -eu\nwhile [ ! -e "$VOL_DIR.go" ]; do sleep 0.1; done\nrm -rf "$VOL_DIR"\n'
TEARDOWN = '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n'


def test_kill_9_mid_teardown_still_removes_the_directory_once(cluster: Cluster, ns: str) -> None:
    api = cluster.api
    uid = create(api, claims(ns), claim("brief", "local-path", annotations={
        "volume.kubernetes.io/selected-node": cluster.node}))["metadata"]["uid"]
    wait_phase(api, f"{claims(ns)}/brief", "Bound")
    path = cluster.base / f"pvc-{uid}_{ns}_brief"
    assert path.is_dir()
    r = api.patch(f"/api/v1/namespaces/{HELPER_NS}/configmaps/local-path-config",
                  json={"data": {"teardown": GATED_TEARDOWN}}, headers=MERGE)
    assert r.status_code == 200, r.text
    marker = cluster.base / f"pvc-{uid}_{ns}_brief.go"
    try:
        delete(api, f"{claims(ns)}/brief")
        wait_for(lambda: phase(get(api, f"/api/v1/namespaces/{HELPER_NS}/pods/helper-pod-delete-pvc-{uid}")) ==
                 "Running", 90, what="the teardown helper to run (gated)")
        cluster.provisioner.kill()
        cluster.provisioner.start()
        assert path.is_dir() and get(api, f"{PVS}/pvc-{uid}") is not None  # nothing done behind the gate
        marker.touch()
        gone(api, f"{PVS}/pvc-{uid}")
        assert not path.exists()
        wait_for(lambda: not helper_pods(api), 60, what="the teardown helper to be removed")
    finally:
        r = api.patch(f"/api/v1/namespaces/{HELPER_NS}/configmaps/local-path-config",
                      json={"data": {"teardown": TEARDOWN}}, headers=MERGE)
        marker.unlink(missing_ok=True)
        if not cluster.provisioner.alive():
            cluster.provisioner.start()


@pytest.fixture(params=VERSIONS, ids=[f"kubectl{v}" for v in VERSIONS])
def kubectl(request: pytest.FixtureRequest, tmp_path: Path, cluster: Cluster, ns: str) -> Kubectl:
    binary = find_kubectl(request.param)
    if binary is None:
        pytest.skip(f"kubectl.{request.param} is not installed (looked in {kubectl_dir()})")
    return Kubectl(binary, request.param, cluster.apiserver.url, tmp_path / "kubectl", ns)


def test_kubectl_get_pv_pvc_and_describe_pvc(cluster: Cluster, ns: str, kubectl: Kubectl) -> None:
    api = cluster.api
    uid = create(api, claims(ns), claim("k", size="128Mi"))["metadata"]["uid"]
    create(api, f"/api/v1/namespaces/{ns}/pods", pod("user", "k", "sleep 3600"))
    wait_phase(api, f"{claims(ns)}/k", "Bound")
    wait_phase(api, f"/api/v1/namespaces/{ns}/pods/user", "Running")
    out = kubectl.run("get", f"pv/pvc-{uid}", "pvc/k").ok().stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0] == ["NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY", "STATUS", "CLAIM",
                        "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"], out
    assert lines[1][:8] == [f"persistentvolume/pvc-{uid}", "128Mi", "RWO", "Delete", "Bound", f"{ns}/k", "local-path",
                            "<unset>"], out
    header = next(i for i, line in enumerate(lines) if line[:2] == ["NAME", "STATUS"])
    assert lines[header] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS",
                             "VOLUMEATTRIBUTESCLASS", "AGE"], out
    assert lines[header + 1][:7] == ["persistentvolumeclaim/k", "Bound", f"pvc-{uid}", "128Mi", "RWO", "local-path",
                                     "<unset>"], out
    described = kubectl.run("describe", "pvc", "k").ok().stdout
    fields = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
              for line in described.splitlines() if ":" in line and not line.startswith(" ")}
    assert fields["Name"] == "k" and fields["Namespace"] == ns and fields["StorageClass"] == "local-path"
    assert fields["Status"] == "Bound" and fields["Volume"] == f"pvc-{uid}" and fields["Capacity"] == "128Mi"
    assert fields["Access Modes"] == "RWO" and fields["VolumeMode"] == "Filesystem"
    assert fields["Used By"] == "user", described
    assert "kubernetes.io/pvc-protection" in fields["Finalizers"]
    assert f"volume.kubernetes.io/selected-node: {cluster.node}" in described
    assert "ProvisioningSucceeded" in described and f"Successfully provisioned volume pvc-{uid}" in described
    delete(api, f"/api/v1/namespaces/{ns}/pods/user")
    delete(api, f"{claims(ns)}/k")
    gone(api, f"{PVS}/pvc-{uid}")
