"""PersistentVolume, PersistentVolumeClaim and StorageClass strategies against upstream's validation
messages; their Table rows; the storage admission plugins (default class, protection finalizers,
resize); the bootstrap roles of the volume controllers and the Node authorizer's pod -> claim -> volume
edges."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from apiserver import errors
from apiserver.admission.interfaces import AdmissionAttributes
from apiserver.admission.storage import add_protection_finalizer, set_default_storage_class, validate_claim_resize
from apiserver.auth import bootstrap
from apiserver.auth.authz import Attributes, Authorizer, NodeAuthorizer, RBACAuthorizer, StaticRbac
from apiserver.printers import table_for
from apiserver.registry.persistentvolume import PersistentVolumeStrategy
from apiserver.registry.persistentvolumeclaim import PersistentVolumeClaimStrategy
from apiserver.registry.storageclass import StorageClassStrategy
from apiserver.validation import FieldError
from machinery.api.resources import ResourceInfo, resource_for
from machinery.authn.user import UserInfo
from machinery.types import Obj
from machinery.volumeutil import access_modes_short, default_class, pod_claim_names


def full(errs: list[FieldError]) -> list[str]:
    return [e.full() for e in errs]


def pv(**spec: Any) -> Obj:
    base: Obj = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}
    base.update(spec)
    return {"metadata": {"name": "v"}, "spec": {k: v for k, v in base.items() if v is not None}}


def pvc(**spec: Any) -> Obj:
    base: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    base.update(spec)
    return {"metadata": {"name": "c", "namespace": "default"}, "spec": {k: v for k, v in base.items() if v is not None}}


def created(strategy: Any, obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    strategy.prepare_for_create(obj)
    return obj


# -- PersistentVolume ------------------------------------------------------------------------------


def test_volume_defaults() -> None:
    obj = created(PersistentVolumeStrategy(), pv())
    assert obj["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert obj["spec"]["volumeMode"] == "Filesystem"
    assert obj["status"]["phase"] == "Pending" and obj["status"]["lastPhaseTransitionTime"]


@pytest.mark.parametrize(("obj", "expected"), [
    (pv(), []),
    (pv(capacity=None), ["spec.capacity: Required value"]),
    (pv(capacity={"storage": "1Gi", "cpu": "1"}),
     ['spec.capacity: Unsupported value: {"cpu":"1","storage":"1Gi"}: supported values: "storage"']),
    (pv(capacity={"storage": "-1Gi"}), ['spec.capacity[storage]: Invalid value: "-1Gi": must be greater than or '
                                        'equal to 0']),
    (pv(accessModes=None), ["spec.accessModes: Required value"]),
    (pv(accessModes=["Sometimes"]), ['spec.accessModes: Unsupported value: "Sometimes": supported values: '
                                     '"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"']),
    (pv(accessModes=["ReadWriteOncePod", "ReadWriteOnce"]),
     ["spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"]),
    (pv(persistentVolumeReclaimPolicy="Recycle"),
     ['spec.persistentVolumeReclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain"']),
    (pv(hostPath=None), ["spec: Required value: must specify a volume type"]),
    (pv(local={"path": "/mnt/disk"}), ["spec.local: Forbidden: may not specify more than 1 volume type",
                                       "spec.nodeAffinity: Required value: Local volume requires node affinity"]),
    (pv(hostPath=None, local={"path": "relative"},
        nodeAffinity={"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n"]}]}]}}),
     ['spec.local.path: Invalid value: "relative": must be an absolute path']),
    (pv(hostPath={"path": "/a/../b"}), ['spec.hostPath.path: Invalid value: "/a/../b": must not contain \'..\'']),
    (pv(storageClassName="Bad_Name"), [
        'spec.storageClassName: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]),
    (pv(volumeMode="Raw"), ['spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"']),
    (pv(nodeAffinity={}), ["spec.nodeAffinity.required: Required value: must specify required node constraints"]),
])
def test_volume_validation(obj: Obj, expected: list[str]) -> None:
    assert full(PersistentVolumeStrategy().validate(obj)) == expected


def test_volume_update_keeps_source_and_mode() -> None:
    s = PersistentVolumeStrategy()
    old = created(s, pv())
    new = copy.deepcopy(old)
    new["spec"]["hostPath"]["path"] = "/elsewhere"
    new["spec"]["volumeMode"] = "Block"
    s.prepare_for_update(new, old)
    assert full(s.validate_update(new, old)) == [
        "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation",
        'volumeMode: Invalid value: "Block": field is immutable']
    growing = copy.deepcopy(old)
    growing["spec"]["capacity"] = {"storage": "2Gi"}
    growing["spec"]["claimRef"] = {"namespace": "default", "name": "c"}
    assert s.validate_update(growing, old) == []


def test_volume_status_update_stamps_phase_transitions() -> None:
    s = PersistentVolumeStrategy()
    old = created(s, pv())
    old["status"]["lastPhaseTransitionTime"] = "2020-01-01T00:00:00Z"
    same = copy.deepcopy(old)
    s.prepare_for_status_update(same, old)
    assert same["status"]["lastPhaseTransitionTime"] == "2020-01-01T00:00:00Z"
    bound = copy.deepcopy(old)
    bound["status"] = {"phase": "Bound"}
    bound["spec"]["capacity"] = {"storage": "9Gi"}  # not through /status
    s.prepare_for_status_update(bound, old)
    assert bound["status"]["phase"] == "Bound" and bound["status"]["lastPhaseTransitionTime"] != "2020-01-01T00:00:00Z"
    assert bound["spec"]["capacity"] == {"storage": "1Gi"}


# -- PersistentVolumeClaim -------------------------------------------------------------------------


@pytest.mark.parametrize(("obj", "expected"), [
    (pvc(), []),
    (pvc(accessModes=None), ["spec.accessModes: Required value: at least 1 access mode is required"]),
    (pvc(resources={}), ["spec.resources[storage]: Required value"]),
    (pvc(resources={"requests": {"storage": "0"}}), ['spec.resources[storage]: Invalid value: "0": must be greater '
                                                     'than zero']),
    (pvc(selector={"matchExpressions": [{"key": "k", "operator": "In"}]}),
     ["spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or "
      "'NotIn'"]),
    (pvc(storageClassName=""), []),
])
def test_claim_validation(obj: Obj, expected: list[str]) -> None:
    assert full(PersistentVolumeClaimStrategy().validate(obj)) == expected


def test_claim_update_rules() -> None:
    s = PersistentVolumeClaimStrategy()
    old = created(s, pvc(storageClassName="std"))
    assert old["status"] == {"phase": "Pending"} and old["spec"]["volumeMode"] == "Filesystem"
    named = copy.deepcopy(old)
    named["spec"]["volumeName"] = "v1"  # once, while unset
    assert s.validate_update(named, old) == []
    renamed = copy.deepcopy(named)
    renamed["spec"]["volumeName"] = "v2"
    assert full(s.validate_update(renamed, named)) == [
        "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName "
        "for bound claims"]
    classless = created(s, pvc())
    given = copy.deepcopy(classless)
    given["spec"]["storageClassName"] = "std"  # nil -> a class: the binder's retroactive default
    assert s.validate_update(given, classless) == []
    changed = copy.deepcopy(given)
    changed["spec"]["storageClassName"] = "gold"
    assert len(s.validate_update(changed, given)) == 1
    grown = copy.deepcopy(old)
    grown["spec"]["resources"]["requests"]["storage"] = "2Gi"
    assert s.validate_update(grown, old) == []
    assert full(s.validate_update(old, grown)) == [
        "spec.resources.requests.storage: Forbidden: field can not be less than previous value"]


# -- StorageClass --------------------------------------------------------------------------------


def test_class_defaults_validation_and_updates() -> None:
    s = StorageClassStrategy()
    sc = created(s, {"metadata": {"name": "std"}, "provisioner": "rancher.io/local-path"})
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")
    assert s.validate(sc) == []
    bad = dict(sc, provisioner="", reclaimPolicy="Recycle", volumeBindingMode="Later")
    assert full(s.validate(bad)) == [
        'provisioner: Required value', 'reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", '
        '"Retain"', 'volumeBindingMode: Unsupported value: "Later": supported values: "Immediate", '
        '"WaitForFirstConsumer"']
    changed = dict(sc, provisioner="other.io/x", parameters={"a": "b"}, reclaimPolicy="Retain",
                   volumeBindingMode="WaitForFirstConsumer", allowVolumeExpansion=True)
    assert full(s.validate_update(changed, sc)) == [
        "parameters: Forbidden: updates to parameters are forbidden.",
        "provisioner: Forbidden: updates to provisioner are forbidden.",
        "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
        'volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable']
    assert s.validate_update(dict(sc, allowVolumeExpansion=True), sc) == []


def test_default_class_is_the_newest() -> None:
    def sc(name: str, created_at: str, default: bool) -> Obj:
        ann = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
        return {"metadata": {"name": name, "creationTimestamp": created_at, "annotations": ann}}

    assert default_class([sc("a", "2026-01-01T00:00:00Z", False)]) is None
    chosen = default_class([sc("old", "2025-01-01T00:00:00Z", True), sc("new", "2026-01-01T00:00:00Z", True),
                            sc("plain", "2027-01-01T00:00:00Z", False)])
    assert chosen is not None and chosen["metadata"]["name"] == "new"


# -- Table rows ----------------------------------------------------------------------------------


NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


def rows(resource: str, obj: Obj) -> list[Any]:
    obj = {"metadata": {"creationTimestamp": "2026-11-24T11:55:00Z", **obj.pop("metadata")}, **obj}
    return [r["cells"] for r in table_for(resource, [obj], now=NOW)["rows"]]


def test_table_rows() -> None:
    volume = pv(storageClassName="std", claimRef={"namespace": "ns", "name": "c"}, capacity={"storage": "1024Mi"},
                accessModes=["ReadWriteMany", "ReadWriteOnce"], persistentVolumeReclaimPolicy="Delete",
                volumeMode="Filesystem")
    volume["status"] = {"phase": "Bound"}
    assert rows("persistentvolumes", volume) == [
        ["v", "1Gi", "RWO,RWX", "Delete", "Bound", "ns/c", "std", "<unset>", "", "5m", "Filesystem"]]
    claim = pvc(storageClassName="std", volumeName="v", volumeMode="Filesystem")
    claim["status"] = {"phase": "Bound", "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"]}
    claim["metadata"]["deletionTimestamp"] = "2026-11-24T11:59:00Z"
    assert rows("persistentvolumeclaims", claim) == [
        ["c", "Terminating", "v", "2Gi", "RWO", "std", "<unset>", "5m", "Filesystem"]]
    pending = pvc()
    pending["status"] = {"phase": "Pending"}
    assert rows("persistentvolumeclaims", pending) == [["c", "Pending", "", "", "", "", "<unset>", "5m", "<unset>"]]
    sc = {"metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
          "provisioner": "rancher.io/local-path"}
    assert rows("storageclasses", sc) == [["std (default)", "rancher.io/local-path", "Delete", "Immediate", False,
                                           "5m"]]
    assert [c["name"] for c in table_for("persistentvolumes", [])["columnDefinitions"]] == [
        "Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass",
        "VolumeAttributesClass", "Reason", "Age", "VolumeMode"]


def test_access_modes_short_is_in_upstream_order() -> None:
    assert access_modes_short(["ReadWriteOncePod", "ReadOnlyMany", "ReadWriteOnce", "ReadWriteOnce"]) == "RWO,ROX,RWOP"


# -- admission -----------------------------------------------------------------------------------


@dataclass
class _Resource:
    info: ResourceInfo

    def redecode(self, obj: Obj, operation: str, old: Obj | None, subresource: str | None) -> Obj:
        return obj


def attrs(plural: str, operation: str, obj: Obj | None, old: Obj | None = None,
          subresource: str | None = None) -> AdmissionAttributes:
    info = resource_for("", plural)
    assert info is not None
    return AdmissionAttributes(operation, _Resource(info), "default", "c", subresource, obj, old, None, False)


def classes(*items: Obj) -> Any:
    async def read() -> list[Obj]:
        return list(items)
    return read


DEFAULT_SC = {"metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
              "provisioner": "p"}


@pytest.mark.parametrize(("spec_class", "expected"), [(None, "std"), ("", ""), ("gold", "gold")])
def test_default_storage_class(spec_class: str | None, expected: str) -> None:
    claim = pvc(storageClassName=spec_class)
    asyncio.run(set_default_storage_class(attrs("persistentvolumeclaims", "CREATE", claim), classes(DEFAULT_SC)))
    assert claim["spec"]["storageClassName"] == expected


def test_no_default_class_leaves_the_claim_alone() -> None:
    claim = pvc()
    asyncio.run(set_default_storage_class(attrs("persistentvolumeclaims", "CREATE", claim),
                                          classes({"metadata": {"name": "x"}})))
    assert "storageClassName" not in claim["spec"]


def test_protection_finalizers_on_create_only() -> None:
    claim, volume = pvc(), pv()
    add_protection_finalizer(attrs("persistentvolumeclaims", "CREATE", claim))
    add_protection_finalizer(attrs("persistentvolumes", "CREATE", volume))
    assert claim["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert volume["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    updated = pvc()
    add_protection_finalizer(attrs("persistentvolumeclaims", "UPDATE", updated, pvc()))
    assert "finalizers" not in updated["metadata"]


def test_resize_needs_a_bound_claim_and_an_expandable_class() -> None:
    old = pvc(storageClassName="std")
    grown = pvc(storageClassName="std", resources={"requests": {"storage": "2Gi"}})
    with pytest.raises(errors.ApiError) as e:
        asyncio.run(validate_claim_resize(attrs("persistentvolumeclaims", "UPDATE", grown, old), classes(DEFAULT_SC)))
    assert e.value.code == 403 and "Only bound persistent volume claims can be expanded" in str(e.value.message)
    old["status"] = {"phase": "Bound"}
    with pytest.raises(errors.ApiError) as e:
        asyncio.run(validate_claim_resize(attrs("persistentvolumeclaims", "UPDATE", grown, old), classes(DEFAULT_SC)))
    assert e.value.message == ('persistentvolumeclaims "c" is forbidden: only dynamically provisioned pvc can be '
                               'resized and the storageclass that provisions the pvc must support resize')
    expandable = dict(DEFAULT_SC, allowVolumeExpansion=True)
    asyncio.run(validate_claim_resize(attrs("persistentvolumeclaims", "UPDATE", grown, old), classes(expandable)))


# -- RBAC and the Node authorizer --------------------------------------------------------------------


POD_ON_A = {"metadata": {"namespace": "default", "name": "web"},
            "spec": {"nodeName": "node-a", "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                                                        {"name": "e", "ephemeral": {}}]}}
CLAIM_VOLUMES = {("default", "data"): "pv-data", ("default", "web-e"): "pv-eph", ("default", "other"): "pv-other"}


def _authorizer() -> Authorizer:
    roles, bindings = bootstrap.policy_objects()

    def refers(node: str, resource: str, namespace: str, name: str) -> bool:
        if resource == "persistentvolumes":
            return any(v == name and refers(node, "persistentvolumeclaims", ns, c)
                       for (ns, c), v in CLAIM_VOLUMES.items())
        return node == "node-a" and namespace == "default" and name in pod_claim_names(POD_ON_A)

    return Authorizer([NodeAuthorizer(lambda ns, n: None, refers), RBACAuthorizer(StaticRbac(roles, [], bindings, []))])


def sa(name: str) -> UserInfo:
    return UserInfo(f"system:serviceaccount:kube-system:{name}",
                    ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))


NODE_A = UserInfo("system:node:node-a", ("system:nodes", "system:authenticated"))
BINDER, PVC_PROTECTION, PV_PROTECTION = sa("persistent-volume-binder"), sa("pvc-protection-controller"), \
    sa("pv-protection-controller")
VIEWER = UserInfo("viewer", ("system:authenticated",))


@pytest.mark.parametrize(("who", "verb", "resource", "sub", "namespace", "name", "group", "allowed"), [
    (BINDER, "update", "persistentvolumes", "", "", "v", "", True),
    (BINDER, "update", "persistentvolumes", "status", "", "v", "", True),
    (BINDER, "delete", "persistentvolumes", "", "", "v", "", True),
    (BINDER, "update", "persistentvolumeclaims", "status", "default", "c", "", True),
    (BINDER, "watch", "storageclasses", "", "", "", "storage.k8s.io", True),
    (BINDER, "delete", "persistentvolumeclaims", "", "default", "c", "", False),
    (PVC_PROTECTION, "update", "persistentvolumeclaims", "", "default", "c", "", True),
    (PVC_PROTECTION, "list", "pods", "", "default", "", "", True),
    (PVC_PROTECTION, "update", "persistentvolumes", "", "", "v", "", False),
    (PV_PROTECTION, "update", "persistentvolumes", "", "", "v", "", True),
    (PV_PROTECTION, "update", "persistentvolumeclaims", "", "default", "c", "", False),
    (NODE_A, "get", "persistentvolumeclaims", "", "default", "data", "", True),
    (NODE_A, "get", "persistentvolumeclaims", "", "default", "web-e", "", True),  # generic ephemeral
    (NODE_A, "update", "persistentvolumeclaims", "status", "default", "data", "", True),
    (NODE_A, "get", "persistentvolumeclaims", "", "default", "other", "", False),
    (NODE_A, "list", "persistentvolumeclaims", "", "default", "", "", False),
    (NODE_A, "update", "persistentvolumeclaims", "", "default", "data", "", False),
    (NODE_A, "get", "persistentvolumes", "", "", "pv-data", "", True),
    (NODE_A, "get", "persistentvolumes", "", "", "pv-other", "", False),
])
def test_volume_access(who: UserInfo, verb: str, resource: str, sub: str, namespace: str, name: str, group: str,
                       allowed: bool) -> None:
    attributes = Attributes(who, verb, True, "", group, "v1", resource, sub, namespace, name)
    assert _authorizer().authorize(attributes)[0] is allowed


def test_view_and_edit_claims() -> None:
    roles = {r["metadata"]["name"]: r["rules"] for r in bootstrap.policy_objects()[0]}
    view = {res for rule in roles["view"] for res in rule["resources"] if "get" in rule["verbs"]}
    edit = {res for rule in roles["edit"] for res in rule["resources"] if "create" in rule["verbs"]}
    assert {"persistentvolumeclaims", "persistentvolumeclaims/status"} <= view
    assert "persistentvolumeclaims" in edit and "persistentvolumes" not in edit
