"""PersistentVolumes, claims and StorageClasses on a real apiserver and etcd, with the real
controller-manager running persistentvolume-binder, pvc-protection and pv-protection: static and
pre-bound binding, WaitForFirstConsumer, Released with Retain and Delete, the protection finalizers,
the DefaultStorageClass admission, real kubectl 1.27 and 1.33 `get pv,pvc,sc`, the official Python
client, and bad input that stores nothing.

Volumes and classes are cluster-scoped: each test names its own with a fresh suffix (and a class of
its own), so the volumes of one test never match the claims of another."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, Etcd, wait_for
from tests.conftest import etcd_keys
from tests.controller_process import ControllerProcess
from tests.kubectl import Kubectl, find_kubectl, kubectl_dir
from tests.scheduler_process import SchedulerProcess

VERSIONS = ("1.27", "1.33")
PVS = "/api/v1/persistentvolumes"
SCS = "/apis/storage.k8s.io/v1/storageclasses"
DEFAULT_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


@pytest.fixture(scope="module")
def controllers(workdir: Any, apiserver: ApiServer) -> Iterator[ControllerProcess]:
    # no periodic resync within a test's time: binding must follow from the events themselves
    process = ControllerProcess(workdir, apiserver.url, ["persistentvolume-binder", "pvc-protection", "pv-protection"],
                                "--pvclaimbinder-sync-period", "10m")
    try:
        process.start()
        yield process
    finally:
        process.stop()


def suffix() -> str:
    return uuid.uuid4().hex[:8]


def pvcs(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/persistentvolumeclaims"


def volume(name: str, size: str, cls: str, modes: tuple[str, ...] = ("ReadWriteOnce",), policy: str | None = None,
           claim_ref: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls,
                            "hostPath": {"path": f"/tmp/minik8s-pv-test/{name}"}}
    if policy:
        spec["persistentVolumeReclaimPolicy"] = policy
    if claim_ref:
        spec["claimRef"] = claim_ref
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec}


def claim(name: str, size: str, cls: str | None, modes: tuple[str, ...] = ("ReadWriteOnce",),
          **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, **spec}
    if cls is not None:
        body["storageClassName"] = cls
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": body}


def storage_class(name: str, *, mode: str | None = None, default: bool = False, provisioner: str = "example.com/x",
                  **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                            "metadata": {"name": name}, "provisioner": provisioner, **fields}
    if mode:
        body["volumeBindingMode"] = mode
    if default:
        body["metadata"]["annotations"] = {DEFAULT_ANNOTATION: "true"}
    return body


def create(api: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = api.post(path, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def get(api: httpx.Client, path: str) -> dict[str, Any]:
    r = api.get(path)
    assert r.status_code == 200, r.text
    return r.json()


class Volumes:
    """The test's volumes and classes, deleted afterwards (finalizers cleared so nothing lingers)."""

    def __init__(self, api: httpx.Client) -> None:
        self.api, self.paths = api, []  # type: list[str]

    def add(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = create(self.api, path, body)
        self.paths.append(f"{path}/{obj['metadata']['name']}")
        return obj

    def cleanup(self) -> None:
        for path in self.paths:
            self.api.patch(path, json={"metadata": {"finalizers": None}},
                           headers={"Content-Type": "application/merge-patch+json"})
            self.api.delete(path)


@pytest.fixture
def owned(api: httpx.Client, controllers: ControllerProcess) -> Iterator[Volumes]:
    made = Volumes(api)
    try:
        yield made
    finally:
        made.cleanup()


def wait_phase(api: httpx.Client, path: str, phase: str, timeout: float = 20) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        obj = get(api, path)
        return obj if (obj.get("status") or {}).get("phase") == phase else None

    found = wait_for(reached, timeout, what=f"{path} to be {phase}")
    assert isinstance(found, dict)
    return found


def events_for(api: httpx.Client, ns: str, name: str) -> list[tuple[str, str, str]]:
    items = get(api, f"/api/v1/namespaces/{ns}/events")["items"]
    return [(e["type"], e["reason"], e["message"]) for e in items if e["involvedObject"].get("name") == name]


def wait_event(api: httpx.Client, ns: str, name: str, reason: str) -> tuple[str, str, str]:
    found = wait_for(lambda: next((e for e in events_for(api, ns, name) if e[1] == reason), None), 20,
                     what=f"event {reason} on {name}")
    assert isinstance(found, tuple)
    return found


# -- binding -------------------------------------------------------------------------------------


def test_claim_binds_the_smallest_matching_volume(api: httpx.Client, namespace: str, owned: Volumes) -> None:
    s = suffix()
    cls = f"manual-{s}"
    owned.add(PVS, volume(f"big-{s}", "5Gi", cls))
    owned.add(PVS, volume(f"fits-{s}", "2Gi", cls))
    owned.add(PVS, volume(f"rox-{s}", "1Gi", cls, modes=("ReadOnlyMany",)))  # smaller, wrong mode
    owned.add(PVS, volume(f"tiny-{s}", "512Mi", cls))  # too small
    owned.add(PVS, volume(f"other-{s}", "1Gi", f"other-{s}"))  # another class
    created = create(api, pvcs(namespace), claim("data", "1Gi", cls))
    assert created["status"]["phase"] == "Pending"
    assert created["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    bound = wait_phase(api, f"{pvcs(namespace)}/data", "Bound")
    assert bound["spec"]["volumeName"] == f"fits-{s}"
    assert bound["status"]["capacity"] == {"storage": "2Gi"}
    assert bound["status"]["accessModes"] == ["ReadWriteOnce"]
    assert bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert bound["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    pv = wait_phase(api, f"{PVS}/fits-{s}", "Bound")
    assert pv["spec"]["claimRef"]["name"] == "data" and pv["spec"]["claimRef"]["uid"] == bound["metadata"]["uid"]
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert pv["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    assert "lastPhaseTransitionTime" in pv["status"]
    for name in ("big", "rox", "tiny", "other"):
        assert get(api, f"{PVS}/{name}-{s}")["status"]["phase"] == "Available"


def test_pre_bound_both_ways(api: httpx.Client, namespace: str, owned: Volumes) -> None:
    s = suffix()
    cls = f"manual-{s}"
    owned.add(PVS, volume(f"small-{s}", "1Gi", cls))
    # the volume names its claim: it wins over the smaller volume, and keeps no bound-by-controller
    owned.add(PVS, volume(f"mine-{s}", "3Gi", cls, claim_ref={"namespace": namespace, "name": "by-volume"}))
    assert get(api, f"{PVS}/mine-{s}")["status"]["phase"] in ("Pending", "Available")
    create(api, pvcs(namespace), claim("by-volume", "1Gi", cls))
    bound = wait_phase(api, f"{pvcs(namespace)}/by-volume", "Bound")
    assert bound["spec"]["volumeName"] == f"mine-{s}"
    pv = wait_phase(api, f"{PVS}/mine-{s}", "Bound")
    assert "pv.kubernetes.io/bound-by-controller" not in (pv["metadata"].get("annotations") or {})
    # the claim names its volume
    owned.add(PVS, volume(f"named-{s}", "4Gi", cls))
    create(api, pvcs(namespace), claim("by-claim", "1Gi", cls, volumeName=f"named-{s}"))
    bound = wait_phase(api, f"{pvcs(namespace)}/by-claim", "Bound")
    assert "pv.kubernetes.io/bound-by-controller" not in bound["metadata"]["annotations"]
    assert wait_phase(api, f"{PVS}/named-{s}", "Bound")["spec"]["claimRef"]["name"] == "by-claim"
    assert get(api, f"{PVS}/small-{s}")["status"]["phase"] == "Available"
    # a claim naming a volume too small for it waits, with upstream's event
    owned.add(PVS, volume(f"wee-{s}", "1Mi", cls))
    create(api, pvcs(namespace), claim("too-big", "1Gi", cls, volumeName=f"wee-{s}"))
    event = wait_event(api, namespace, "too-big", "VolumeMismatch")
    assert event == ("Warning", "VolumeMismatch",
                     f'Cannot bind to requested volume "wee-{s}": requested PV is too small')
    assert get(api, f"{pvcs(namespace)}/too-big")["status"]["phase"] == "Pending"


def test_no_volume_and_no_class(api: httpx.Client, namespace: str, owned: Volumes) -> None:
    create(api, pvcs(namespace), claim("lonely", "1Gi", ""))
    event = wait_event(api, namespace, "lonely", "FailedBinding")
    assert event == ("Normal", "FailedBinding",
                     "no persistent volumes available for this claim and no storage class is set")
    assert get(api, f"{pvcs(namespace)}/lonely")["status"]["phase"] == "Pending"


def test_wait_for_first_consumer_then_selected_node(api: httpx.Client, namespace: str, owned: Volumes) -> None:
    s = suffix()
    cls = f"wffc-{s}"
    owned.add(SCS, storage_class(cls, mode="WaitForFirstConsumer", provisioner="kubernetes.io/no-provisioner"))
    owned.add(PVS, volume(f"local-{s}", "1Gi", cls))
    create(api, pvcs(namespace), claim("later", "1Gi", cls))
    event = wait_event(api, namespace, "later", "WaitForFirstConsumer")
    assert event == ("Normal", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
    assert get(api, f"{pvcs(namespace)}/later")["status"]["phase"] == "Pending"
    assert get(api, f"{PVS}/local-{s}")["status"]["phase"] == "Available"
    # the scheduler's choice (VolumeBinding's PreBind sets it): now the claim binds
    r = api.patch(f"{pvcs(namespace)}/later", json={"metadata": {"annotations": {
        "volume.kubernetes.io/selected-node": "node-a"}}}, headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert wait_phase(api, f"{pvcs(namespace)}/later", "Bound")["spec"]["volumeName"] == f"local-{s}"


def test_dynamic_provisioning_is_asked_of_the_class_provisioner(api: httpx.Client, namespace: str,
                                                                owned: Volumes) -> None:
    cls = f"fast-{suffix()}"
    owned.add(SCS, storage_class(cls, provisioner="rancher.io/local-path"))
    create(api, pvcs(namespace), claim("dyn", "1Gi", cls))
    event = wait_event(api, namespace, "dyn", "ExternalProvisioning")
    assert event[2].startswith("Waiting for a volume to be created either by the external provisioner "
                               "'rancher.io/local-path' or manually by the system administrator.")
    annotations = get(api, f"{pvcs(namespace)}/dyn")["metadata"]["annotations"]
    assert annotations["volume.kubernetes.io/storage-provisioner"] == "rancher.io/local-path"
    assert annotations["volume.beta.kubernetes.io/storage-provisioner"] == "rancher.io/local-path"


# -- release and reclaim ---------------------------------------------------------------------------


def test_released_retain_and_delete(api: httpx.Client, namespace: str, owned: Volumes) -> None:
    s = suffix()
    for policy in ("Retain", "Delete"):
        cls = f"{policy.lower()}-{s}"
        owned.add(PVS, volume(f"{cls}-pv", "1Gi", cls, policy=policy))
        create(api, pvcs(namespace), claim(cls, "1Gi", cls))
        wait_phase(api, f"{pvcs(namespace)}/{cls}", "Bound")
        wait_phase(api, f"{PVS}/{cls}-pv", "Bound")
        assert api.delete(f"{pvcs(namespace)}/{cls}").status_code == 200
        wait_for(lambda c=cls: api.get(f"{pvcs(namespace)}/{c}").status_code == 404, 20, what=f"claim {cls} gone")
    kept = wait_phase(api, f"{PVS}/retain-{s}-pv", "Released")
    assert kept["spec"]["claimRef"]["name"] == f"retain-{s}"  # Released keeps its claimRef: no new claim binds
    wait_for(lambda: api.get(f"{PVS}/delete-{s}-pv").status_code == 404, 20, what="the Delete volume to go")
    # a new claim of the retained volume's class does not get the Released volume
    create(api, pvcs(namespace), claim("again", "1Gi", f"retain-{s}"))
    wait_event(api, namespace, "again", "ProvisioningFailed")  # the class does not exist: nothing to provision
    assert get(api, f"{pvcs(namespace)}/again")["status"]["phase"] == "Pending"
    assert get(api, f"{PVS}/retain-{s}-pv")["status"]["phase"] == "Released"


# -- protection ------------------------------------------------------------------------------------


def test_claim_in_use_stays_terminating_until_the_pod_goes(api: httpx.Client, namespace: str,
                                                            owned: Volumes) -> None:
    s = suffix()
    cls = f"prot-{s}"
    owned.add(PVS, volume(f"prot-{s}", "1Gi", cls))
    create(api, pvcs(namespace), claim("used", "1Gi", cls))
    wait_phase(api, f"{pvcs(namespace)}/used", "Bound")
    create(api, f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "used"}}]}})
    assert api.delete(f"{pvcs(namespace)}/used").status_code == 200
    # the volume cannot go either while bound
    assert api.delete(f"{PVS}/prot-{s}").status_code == 200
    held = get(api, f"{pvcs(namespace)}/used")
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    # the protection controller has seen the deletion (its update of the volume's phase is not needed):
    # a claim it would free goes at once, so after an unrelated claim in the namespace is freed, this one
    # must still be here
    create(api, pvcs(namespace), claim("unused", "1Gi", f"none-{s}"))
    assert api.delete(f"{pvcs(namespace)}/unused").status_code == 200
    wait_for(lambda: api.get(f"{pvcs(namespace)}/unused").status_code == 404, 20, what="the unused claim to go")
    assert api.get(f"{pvcs(namespace)}/used").status_code == 200
    assert get(api, f"{PVS}/prot-{s}")["metadata"]["deletionTimestamp"]
    r = api.delete(f"/api/v1/namespaces/{namespace}/pods/user", params={"gracePeriodSeconds": "0"})
    assert r.status_code == 200, r.text
    wait_for(lambda: api.get(f"/api/v1/namespaces/{namespace}/pods/user").status_code == 404, 20, what="pod gone")
    wait_for(lambda: api.get(f"{pvcs(namespace)}/used").status_code == 404, 20, what="the claim to go")
    wait_for(lambda: api.get(f"{PVS}/prot-{s}").status_code == 404, 20, what="the volume to go once Released")


# -- default class ---------------------------------------------------------------------------------


def test_default_storage_class_admission(api: httpx.Client, namespace: str, owned: Volumes) -> None:
    s = suffix()
    owned.add(SCS, storage_class(f"std-{s}", default=True))
    got = create(api, pvcs(namespace), claim("defaulted", "1Gi", None))
    assert got["spec"]["storageClassName"] == f"std-{s}"
    kept = create(api, pvcs(namespace), claim("explicit-none", "1Gi", ""))
    assert kept["spec"]["storageClassName"] == ""
    other = create(api, pvcs(namespace), claim("named", "1Gi", "gold"))
    assert other["spec"]["storageClassName"] == "gold"
    sc = get(api, f"{SCS}/std-{s}")
    assert sc["reclaimPolicy"] == "Delete" and sc["volumeBindingMode"] == "Immediate"


# -- kubectl and the Python client -----------------------------------------------------------------


@pytest.fixture(params=VERSIONS, ids=[f"kubectl{v}" for v in VERSIONS])
def kubectl(request: pytest.FixtureRequest, tmp_path: Path, apiserver: ApiServer, namespace: str) -> Kubectl:
    binary = find_kubectl(request.param)
    if binary is None:
        pytest.skip(f"kubectl.{request.param} is not installed (looked in {kubectl_dir()})")
    return Kubectl(binary, request.param, apiserver.url, tmp_path / "kubectl", namespace)


def test_kubectl_get_pv_pvc_sc(kubectl: Kubectl, api: httpx.Client, namespace: str, owned: Volumes) -> None:
    s = suffix()
    cls = f"k-{s}"
    owned.add(SCS, storage_class(cls, allowVolumeExpansion=True))
    owned.add(PVS, volume(f"k-{s}", "2Gi", cls, modes=("ReadWriteOnce", "ReadOnlyMany")))
    create(api, pvcs(namespace), claim("kc", "1Gi", cls))
    wait_phase(api, f"{pvcs(namespace)}/kc", "Bound")
    wait_phase(api, f"{PVS}/k-{s}", "Bound")
    out = kubectl.run("get", f"pv/k-{s}", "pvc/kc", f"sc/{cls}").ok().stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header_pv = out.splitlines()[0]
    assert header_pv.split() == ["NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY", "STATUS", "CLAIM",
                                 "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"], out
    assert lines[1][:8] == [f"persistentvolume/k-{s}", "2Gi", "RWO,ROX", "Retain", "Bound", f"{namespace}/kc", cls,
                            "<unset>"], out
    pvc_header = next(i for i, line in enumerate(lines) if line[:2] == ["NAME", "STATUS"])
    assert lines[pvc_header] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS",
                                 "VOLUMEATTRIBUTESCLASS", "AGE"], out
    assert lines[pvc_header + 1][:7] == ["persistentvolumeclaim/kc", "Bound", f"k-{s}", "2Gi", "RWO,ROX", cls,
                                         "<unset>"], out
    sc_header = next(i for i, line in enumerate(lines) if line[:2] == ["NAME", "PROVISIONER"])
    assert lines[sc_header] == ["NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION",
                                "AGE"], out
    assert lines[sc_header + 1][:5] == [f"storageclass.storage.k8s.io/{cls}", "example.com/x", "Delete",
                                        "Immediate", "true"], out
    wide = kubectl.run("get", "pvc", "kc", "-o", "wide").ok().stdout
    assert wide.splitlines()[0].split()[-1] == "VOLUMEMODE" and wide.splitlines()[1].split()[-1] == "Filesystem"


def test_default_class_shows_default_in_kubectl(kubectl: Kubectl, owned: Volumes) -> None:
    name = f"d-{suffix()}"
    owned.add(SCS, storage_class(name, default=True))
    out = kubectl.run("get", "sc", name).ok().stdout
    assert out.splitlines()[1].split()[:2] == [name, "(default)"], out


def test_official_python_client(apiserver: ApiServer, namespace: str, owned: Volumes) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    s = suffix()
    configuration = client.Configuration()
    configuration.host = apiserver.url
    with client.ApiClient(configuration) as api_client:
        core, storage = client.CoreV1Api(api_client), client.StorageV1Api(api_client)
        sc = storage.create_storage_class(client.V1StorageClass(
            metadata=client.V1ObjectMeta(name=f"py-{s}"), provisioner="example.com/py"))
        owned.paths.append(f"{SCS}/py-{s}")
        assert sc.reclaim_policy == "Delete" and sc.volume_binding_mode == "Immediate"
        core.create_persistent_volume(client.V1PersistentVolume(
            metadata=client.V1ObjectMeta(name=f"py-{s}"),
            spec=client.V1PersistentVolumeSpec(capacity={"storage": "1Gi"}, access_modes=["ReadWriteOnce"],
                                               storage_class_name=f"py-{s}",
                                               host_path=client.V1HostPathVolumeSource(path="/tmp/py"))))
        owned.paths.append(f"{PVS}/py-{s}")
        core.create_namespaced_persistent_volume_claim(namespace, client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name="py"),
            spec=client.V1PersistentVolumeClaimSpec(access_modes=["ReadWriteOnce"], storage_class_name=f"py-{s}",
                                                    resources=client.V1VolumeResourceRequirements(
                                                        requests={"storage": "1Gi"}))))

        def bound() -> bool:
            return core.read_namespaced_persistent_volume_claim("py", namespace).status.phase == "Bound"

        wait_for(bound, 20, what="py claim Bound")
        pv = core.read_persistent_volume(f"py-{s}")
        assert pv.status.phase == "Bound" and pv.spec.claim_ref.name == "py"
        assert [c.metadata.name for c in core.list_namespaced_persistent_volume_claim(namespace).items] == ["py"]
        with pytest.raises(ApiException) as e:
            core.patch_namespaced_persistent_volume_claim("py", namespace, {"spec": {"accessModes": ["ReadWriteMany"]}})
        assert e.value.status == 422


# -- bad input -------------------------------------------------------------------------------------


BAD_VOLUMES = [
    ({"spec": {"accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}}, "spec.capacity: Required value"),
    ({"spec": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}}}, "spec.accessModes: Required value"),
    ({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}},
     "spec: Required value: must specify a volume type"),
    ({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"},
               "persistentVolumeReclaimPolicy": "Recycle"}},
     'spec.persistentVolumeReclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain"'),
    ({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "local": {"path": "/x"}}},
     "spec.nodeAffinity: Required value: Local volume requires node affinity"),
    ({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["Sometimes"], "hostPath": {"path": "/x"}}},
     'spec.accessModes: Unsupported value: "Sometimes"'),
]


@pytest.mark.parametrize(("body", "message"), BAD_VOLUMES)
def test_bad_volumes_store_nothing(api: httpx.Client, etcd: Etcd, body: dict[str, Any], message: str) -> None:
    name = f"bad-{suffix()}"
    r = api.post(PVS, json={"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, **body})
    assert r.status_code == 422, r.text
    assert r.json()["reason"] == "Invalid" and message in r.json()["message"], r.text
    assert etcd_keys(etcd, f"/registry/persistentvolumes/{name}") == {}


def test_bad_claims_and_classes_store_nothing(api: httpx.Client, etcd: Etcd, namespace: str,
                                             owned: Volumes) -> None:
    r = api.post(pvcs(namespace), json={"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                        "metadata": {"name": "nosize"}, "spec": {"accessModes": ["ReadWriteOnce"]}})
    assert r.status_code == 422 and "spec.resources[storage]: Required value" in r.json()["message"], r.text
    r = api.post(pvcs(namespace), json=claim("nomode", "1Gi", "x", modes=()))
    assert r.status_code == 422
    assert "spec.accessModes: Required value: at least 1 access mode is required" in r.json()["message"], r.text
    r = api.post(pvcs(namespace), json=claim("zero", "0", "x"))
    assert r.status_code == 422 and "must be greater than zero" in r.json()["message"], r.text
    assert etcd_keys(etcd, f"/registry/persistentvolumeclaims/{namespace}/") == {}
    name = f"bad-{suffix()}"
    r = api.post(SCS, json=storage_class(name, reclaimPolicy="Recycle"))
    assert r.status_code == 422
    assert 'reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain"' in r.json()["message"]
    r = api.post(SCS, json=storage_class(name, mode="Later"))
    assert r.status_code == 422 and 'volumeBindingMode: Unsupported value: "Later"' in r.json()["message"]
    assert etcd_keys(etcd, f"/registry/storageclasses/{name}") == {}
    # updates: a class's provisioner, a claim's spec; growing a claim whose class forbids it
    owned.add(SCS, storage_class(name))
    r = api.patch(f"{SCS}/{name}", json={"provisioner": "example.com/other"},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422 and "provisioner: Forbidden: updates to provisioner are forbidden." in r.text
    create(api, pvcs(namespace), claim("fixed", "1Gi", name))
    before = get(api, f"{pvcs(namespace)}/fixed")
    r = api.patch(f"{pvcs(namespace)}/fixed", json={"spec": {"accessModes": ["ReadWriteMany"]}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422 and "spec: Forbidden: spec is immutable after creation" in r.text
    r = api.patch(f"{pvcs(namespace)}/fixed", json={"spec": {"resources": {"requests": {"storage": "2Gi"}}}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 403 and "Only bound persistent volume claims can be expanded" in r.text
    after = get(api, f"{pvcs(namespace)}/fixed")
    assert after["spec"] == before["spec"]


# -- the scheduler's VolumeBinding -----------------------------------------------------------------


@pytest.fixture(scope="module")
def volume_scheduler(workdir: Any, apiserver: ApiServer) -> Iterator[SchedulerProcess]:
    """A scheduler of its own name: it takes only this module's pods, not other tests' pending ones."""
    process = SchedulerProcess(workdir, apiserver.url, f"pv-scheduler-{suffix()}")
    try:
        process.start()
        yield process
    finally:
        process.stop()


def ready_node(api: httpx.Client, name: str) -> None:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    create(api, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {"kubernetes.io/hostname": name}}, "status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})


def local_volume(name: str, size: str, cls: str, node: str) -> dict[str, Any]:
    body = volume(name, size, cls)
    del body["spec"]["hostPath"]
    body["spec"]["local"] = {"path": f"/mnt/disks/{name}"}
    body["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
    return body


def pod_with_claim(name: str, claim_name: str, scheduler: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}}


def test_scheduler_volume_binding(api: httpx.Client, namespace: str, owned: Volumes,
                                  volume_scheduler: SchedulerProcess) -> None:
    s = suffix()
    node, cls = f"pvnode-{s}", f"wffc-{s}"
    ready_node(api, node)
    owned.paths.append(f"/api/v1/nodes/{node}")
    pods = f"/api/v1/namespaces/{namespace}/pods"
    try:
        # a missing claim, and an unbound Immediate claim, keep a pod unscheduled with upstream's words
        create(api, pods, pod_with_claim("no-claim", "nope", volume_scheduler.name))
        event = wait_event(api, namespace, "no-claim", "FailedScheduling")
        assert 'persistentvolumeclaim "nope" not found' in event[2], event
        create(api, pvcs(namespace), claim("unbound", "1Gi", f"none-{s}"))
        create(api, pods, pod_with_claim("waits", "unbound", volume_scheduler.name))
        event = wait_event(api, namespace, "waits", "FailedScheduling")
        assert "pod has unbound immediate PersistentVolumeClaims" in event[2], event
        # a WaitForFirstConsumer claim: the pod is scheduled, the claim learns the node, then binds
        owned.add(SCS, storage_class(cls, mode="WaitForFirstConsumer", provisioner="kubernetes.io/no-provisioner"))
        # local volumes: the smaller one is on another node, so only the node filter keeps it out
        owned.add(PVS, local_volume(f"wffc-{s}", "2Gi", cls, node))
        owned.add(PVS, local_volume(f"elsewhere-{s}", "1Gi", cls, f"other-{s}"))
        create(api, pvcs(namespace), claim("late", "1Gi", cls))
        wait_event(api, namespace, "late", "WaitForFirstConsumer")
        create(api, pods, pod_with_claim("consumer", "late", volume_scheduler.name))
        wait_for(lambda: get(api, f"{pods}/consumer")["spec"].get("nodeName") == node, 20, what="pod scheduled")
        bound = wait_phase(api, f"{pvcs(namespace)}/late", "Bound")
        assert bound["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
        assert bound["spec"]["volumeName"] == f"wffc-{s}"
        assert get(api, f"{PVS}/elsewhere-{s}")["status"]["phase"] == "Available"
        # a bound local volume of another node keeps its pod off this one
        owned.add(PVS, local_volume(f"pinned-{s}", "1Gi", f"pin-{s}", f"other-{s}"))
        create(api, pvcs(namespace), claim("pinned", "1Gi", f"pin-{s}"))
        wait_phase(api, f"{pvcs(namespace)}/pinned", "Bound")
        create(api, pods, pod_with_claim("stranded", "pinned", volume_scheduler.name))
        event = wait_event(api, namespace, "stranded", "FailedScheduling")
        assert "node(s) had volume node affinity conflict" in event[2], event
    finally:
        api.request("DELETE", pods, json={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})


def test_kubectl_apply_and_describe(kubectl: Kubectl, api: httpx.Client, namespace: str, owned: Volumes) -> None:
    """apply validates against the OpenAPI documents (v2 protobuf for 1.27, v3 for 1.33) and then patches."""
    s = suffix()
    manifest = f"""
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: ap-{s}}}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: ap-{s}}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  storageClassName: ap-{s}
  hostPath: {{path: /tmp/ap-{s}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: ap}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ap-{s}
  resources: {{requests: {{storage: 1Gi}}}}
"""
    owned.paths += [f"{SCS}/ap-{s}", f"{PVS}/ap-{s}"]
    out = kubectl.run("apply", "-f", "-", stdin=manifest).ok().stdout
    assert f"storageclass.storage.k8s.io/ap-{s} created" in out and f"persistentvolume/ap-{s} created" in out
    assert "persistentvolumeclaim/ap created" in out
    wait_phase(api, f"{pvcs(namespace)}/ap", "Bound")
    grown = manifest.replace("capacity: {storage: 1Gi}", "capacity: {storage: 2Gi}")
    again = kubectl.run("apply", "-f", "-", stdin=grown).ok().stdout
    assert f"persistentvolume/ap-{s} configured" in again and "persistentvolumeclaim/ap unchanged" in again
    assert get(api, f"{PVS}/ap-{s}")["spec"]["capacity"] == {"storage": "2Gi"}
    described = kubectl.run("describe", "pvc", "ap").ok().stdout
    assert f"Volume:        ap-{s}" in described and "Bound" in described, described


def test_retroactive_default_storage_class(api: httpx.Client, namespace: str, owned: Volumes) -> None:
    """A claim made while no class was default gets the default class once one exists, then binds."""
    s = suffix()
    defaults = [c["metadata"]["name"] for c in get(api, SCS)["items"]
                if (c["metadata"].get("annotations") or {}).get(DEFAULT_ANNOTATION) == "true"]
    assert defaults == [], f"another test left a default class: {defaults}"
    early = create(api, pvcs(namespace), claim("early", "1Gi", None))
    assert "storageClassName" not in early["spec"]
    owned.add(PVS, volume(f"late-default-{s}", "1Gi", f"late-default-{s}"))
    owned.add(SCS, storage_class(f"late-default-{s}", default=True))
    bound = wait_phase(api, f"{pvcs(namespace)}/early", "Bound")
    assert bound["spec"]["storageClassName"] == f"late-default-{s}"
    assert bound["spec"]["volumeName"] == f"late-default-{s}"
