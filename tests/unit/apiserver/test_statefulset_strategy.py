"""apps/v1 StatefulSet: upstream's defaults, validation messages (create, update, status), the Table rows kubectl
prints, and the bootstrap RBAC (view/edit/admin, system:controller:statefulset-controller)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from apiserver.auth import bootstrap
from apiserver.auth.authz import Authorizer, RBACAuthorizer, StaticRbac
from apiserver.printers import table_for
from apiserver.registry.statefulset import SPEC_FORBIDDEN, StatefulSetStrategy
from apiserver.validation import FieldError
from machinery.api.apps_v1 import StatefulSet
from tests.unit.apiserver.test_rbac import res, user


def full(errs: list[FieldError]) -> list[str]:
    return [e.full() for e in errs]


def stateful_set(**spec: Any) -> dict[str, Any]:
    labels = {"app": "web"}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels}, "serviceName": "nginx",
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, **spec}}


def created(**spec: Any) -> dict[str, Any]:
    obj = stateful_set(**spec)
    StatefulSetStrategy().prepare_for_create(obj)
    return obj


def test_defaults_as_apps_v1() -> None:
    obj = created(volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}])
    spec = obj["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["replicas"] == 1 and spec["revisionHistoryLimit"] == 10
    assert spec["volumeClaimTemplates"][0]["spec"]["volumeMode"] == "Filesystem"
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    assert obj["status"] == {"replicas": 0, "availableReplicas": 0}
    assert StatefulSetStrategy().validate(obj) == []
    # the model reads what the strategy wrote
    assert StatefulSet.from_dict(obj).spec is not None
    on_delete = created(updateStrategy={"type": "OnDelete"})
    assert on_delete["spec"]["updateStrategy"] == {"type": "OnDelete"}


@pytest.mark.parametrize(("spec", "message"), [
    ({"podManagementPolicy": "Sometimes"},
     "spec.podManagementPolicy: Invalid value: \"Sometimes\": must be 'OrderedReady' or 'Parallel'"),
    ({"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}}},
     "spec.updateStrategy.rollingUpdate: Invalid value: {\"partition\":1}: only allowed for updateStrategy "
     "'RollingUpdate'"),
    ({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": -1}}},
     "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0"),
    ({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 0}}},
     "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: cannot be 0"),
    ({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": "150%"}}},
     'spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "150%": must not be greater than 100%'),
    ({"replicas": -1}, "spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
    ({"minReadySeconds": -2}, "spec.minReadySeconds: Invalid value: -2: must be greater than or equal to 0"),
    ({"ordinals": {"start": -1}}, "spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0"),
    ({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Keep", "whenScaled": "Retain"}},
     'spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: "Keep": supported values: '
     '"Retain", "Delete"'),
    ({"selector": {"matchLabels": {"app": "other"}}},
     'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: `selector` does not match '
     'template `labels`'),
    ({"selector": {}}, "spec.selector: Invalid value: {}: empty selector is not valid for statefulset."),
])
def test_validation_messages(spec: dict[str, Any], message: str) -> None:
    obj = stateful_set(**spec)
    StatefulSetStrategy().prepare_for_create(obj)
    obj["spec"].update(spec)  # what defaulting filled in is overridden by the case itself
    assert message in full(StatefulSetStrategy().validate(obj))


def test_template_must_always_restart_and_have_no_deadline() -> None:
    obj = created()
    obj["spec"]["template"]["spec"].update(restartPolicy="Never", activeDeadlineSeconds=5)
    assert full(StatefulSetStrategy().validate(obj)) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"',
        "spec.template.spec.activeDeadlineSeconds: Invalid value: 5: must not be specified"]


@pytest.mark.parametrize("change", [
    {"serviceName": "other"}, {"podManagementPolicy": "Parallel"}, {"revisionHistoryLimit": 3},
    {"selector": {"matchLabels": {"app": "web", "x": "y"}}},
    {"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]},
])
def test_update_forbids_all_but_the_mutable_fields(change: dict[str, Any]) -> None:
    old = created()
    new = copy.deepcopy(old)
    new["spec"].update(change)
    StatefulSetStrategy().prepare_for_update(new, old)
    assert full(StatefulSetStrategy().validate_update(new, old)) == [f"spec: Forbidden: {SPEC_FORBIDDEN}"]
    assert SPEC_FORBIDDEN == ("updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                              "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                              "'minReadySeconds' are forbidden")


def test_update_allows_the_mutable_fields_and_keeps_status() -> None:
    old = created()
    old["status"] = {"replicas": 1, "availableReplicas": 1, "readyReplicas": 1}
    new = copy.deepcopy(old)
    new["spec"].update(replicas=5, minReadySeconds=3, ordinals={"start": 2},
                       updateStrategy={"type": "OnDelete"},
                       persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete", "whenScaled": "Delete"})
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    new["status"] = {"replicas": 99}
    StatefulSetStrategy().prepare_for_update(new, old)
    assert StatefulSetStrategy().validate_update(new, old) == []
    assert new["status"] == old["status"]  # written only through /status


def test_status_counts_are_checked() -> None:
    old = created()
    new = copy.deepcopy(old)
    new["status"] = {"replicas": 1, "readyReplicas": 2, "availableReplicas": 1, "currentReplicas": -1,
                     "collisionCount": 0}
    old["status"]["collisionCount"] = 2
    StatefulSetStrategy().prepare_for_status_update(new, old)
    assert full(StatefulSetStrategy().validate_update(new, old)) == [
        "status.currentReplicas: Invalid value: -1: must be greater than or equal to 0",
        "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
        "status.collisionCount: Invalid value: 0: cannot be decremented"]


def test_table_rows_ready_over_desired_and_wide_columns() -> None:
    obj = created(replicas=3)
    obj["metadata"]["creationTimestamp"] = "2026-11-24T06:00:00Z"
    obj["status"] = {"replicas": 3, "readyReplicas": 2, "availableReplicas": 2}
    table = table_for("statefulsets", [obj], now=datetime(2026, 11, 24, 6, 5, tzinfo=UTC))
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Ready", "Age", "Containers", "Images"]
    assert [c["priority"] for c in table["columnDefinitions"]] == [0, 0, 0, 1, 1]
    assert table["rows"][0]["cells"] == ["web", "2/3", "5m", "c", "busybox"]
    obj["status"] = {"replicas": 0, "availableReplicas": 0}
    assert table_for("statefulsets", [obj])["rows"][0]["cells"][1] == "0/3"


STS_CONTROLLER = user("system:serviceaccount:kube-system:statefulset-controller", "system:serviceaccounts",
                      "system:serviceaccounts:kube-system")


@pytest.mark.parametrize(("verb", "resource", "group", "subresource", "allowed"), [
    ("create", "pods", "", "", True), ("delete", "pods", "", "", True), ("update", "pods", "", "", True),
    ("get", "statefulsets", "apps", "", True), ("update", "statefulsets", "apps", "status", True),
    ("update", "statefulsets", "apps", "finalizers", True),
    ("create", "controllerrevisions", "apps", "", True), ("patch", "controllerrevisions", "apps", "", True),
    ("delete", "controllerrevisions", "apps", "", True),
    ("create", "persistentvolumeclaims", "", "", True), ("update", "persistentvolumeclaims", "", "", True),
    ("delete", "persistentvolumeclaims", "", "", True), ("create", "events", "", "", True),
    # what it may not do: change a set's spec, touch other workloads or persistent volumes
    ("update", "statefulsets", "apps", "", False), ("create", "replicasets", "apps", "", False),
    ("create", "persistentvolumes", "", "", False), ("update", "statefulsets", "apps", "scale", False),
])
def test_controller_role(verb: str, resource: str, group: str, subresource: str, allowed: bool) -> None:
    roles, bindings = bootstrap.policy_objects()
    authorizer = Authorizer([RBACAuthorizer(StaticRbac(roles, [], bindings, []))])
    namespace = "" if resource == "persistentvolumes" else "default"
    attrs = res(STS_CONTROLLER, verb, resource, namespace, "x" if verb != "create" else "", group=group,
                subresource=subresource)
    assert authorizer.authorize(attrs)[0] is allowed


def test_view_reads_and_edit_writes_statefulsets() -> None:
    roles = bootstrap.cluster_roles()

    def grants(role: str, verb: str, resource: str) -> bool:
        return any("apps" in r.get("apiGroups", []) and resource in r.get("resources", []) and verb in r["verbs"]
                   for r in roles[role])

    for resource in ("statefulsets", "statefulsets/status", "statefulsets/scale"):
        assert grants("view", "list", resource) and not grants("view", "patch", resource)
    for role in ("edit", "admin"):
        assert grants(role, "create", "statefulsets") and grants(role, "patch", "statefulsets/scale")
    assert "system:controller:statefulset-controller" in roles
    assert "statefulset-controller" in bootstrap.CONTROLLER_ACCOUNTS
