"""apps/v1 DaemonSet and ControllerRevision: upstream's defaults, validation messages, the template
generation annotation, and the Table rows kubectl prints."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from apiserver.printers import table_for
from apiserver.registry.daemonset import TEMPLATE_GENERATION_ANNOTATION, ControllerRevisionStrategy, DaemonSetStrategy
from apiserver.validation import FieldError


def full(errs: list[FieldError]) -> list[str]:
    return [e.full() for e in errs]


def daemon_set(**spec: Any) -> dict[str, Any]:
    labels = {"app": "agent"}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, **spec}}


def created(**spec: Any) -> dict[str, Any]:
    obj = daemon_set(**spec)
    DaemonSetStrategy().prepare_for_create(obj)
    return obj


def test_defaults_rolling_update_1_0_and_ten_revisions() -> None:
    obj = created()
    assert obj["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                             "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert obj["spec"]["revisionHistoryLimit"] == 10
    assert obj["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    assert obj["metadata"]["annotations"] == {TEMPLATE_GENERATION_ANNOTATION: "1"}
    assert obj["status"] == {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                             "numberReady": 0}
    assert DaemonSetStrategy().validate(obj) == []
    on_delete = created(updateStrategy={"type": "OnDelete"})
    assert on_delete["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert DaemonSetStrategy().validate(on_delete) == []


def test_selector_must_match_template_and_not_be_empty() -> None:
    obj = created()
    obj["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    assert full(DaemonSetStrategy().validate(obj)) == [
        'spec.template.metadata.labels: Invalid value: map[string]string{"app":"other"}: '
        "`selector` does not match template `labels`"]
    obj = created()
    obj["spec"]["selector"] = {}
    assert "spec.selector: Invalid value: " in full(DaemonSetStrategy().validate(obj))[0]
    assert full(DaemonSetStrategy().validate(obj))[0].endswith("empty selector is invalid for daemonset")


def test_template_must_restart_always_without_deadline() -> None:
    obj = created()
    obj["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    obj["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 5
    assert full(DaemonSetStrategy().validate(obj)) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"',
        "spec.template.spec.activeDeadlineSeconds: Invalid value: 5: activeDeadlineSeconds in DaemonSet is not "
        "Supported"]


def test_update_strategy_rules() -> None:
    both = created(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}})
    assert full(DaemonSetStrategy().validate(both)) == [
        "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is "
        "non-zero"]
    none = created(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}})
    assert full(DaemonSetStrategy().validate(none)) == [
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"]
    surge = created(updateStrategy={"type": "RollingUpdate",
                                    "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "20%"}})
    assert DaemonSetStrategy().validate(surge) == []
    too_much = created(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "150%"}})
    assert any("must not be greater than 100%" in e for e in full(DaemonSetStrategy().validate(too_much)))
    bad = created(updateStrategy={"type": "Recreate"})
    assert full(DaemonSetStrategy().validate(bad)) == [
        'spec.updateStrategy: Unsupported value: "Recreate": supported values: "RollingUpdate", "OnDelete"']
    negative = created(revisionHistoryLimit=-1, minReadySeconds=-2)
    assert full(DaemonSetStrategy().validate(negative)) == [
        "spec.minReadySeconds: Invalid value: -2: must be greater than or equal to 0",
        "spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0"]


def test_template_change_bumps_template_generation_and_selector_is_immutable() -> None:
    old = created()
    same = copy.deepcopy(old)
    same["spec"]["minReadySeconds"] = 3
    DaemonSetStrategy().prepare_for_update(same, old)
    assert same["metadata"]["annotations"][TEMPLATE_GENERATION_ANNOTATION] == "1"
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    DaemonSetStrategy().prepare_for_update(new, old)
    assert new["metadata"]["annotations"][TEMPLATE_GENERATION_ANNOTATION] == "2"
    moved = copy.deepcopy(old)
    moved["spec"]["selector"] = {"matchLabels": {"app": "agent", "tier": "x"}}
    assert full(DaemonSetStrategy().validate_update(moved, old))[0].startswith("spec.selector: Invalid value: ")
    assert full(DaemonSetStrategy().validate_update(moved, old))[0].endswith("field is immutable")
    bad_status = copy.deepcopy(old)
    bad_status["status"]["numberReady"] = -1
    assert full(DaemonSetStrategy().validate_update(bad_status, old)) == [
        "status.numberReady: Invalid value: -1: must be greater than or equal to 0"]


def test_controller_revision_data_is_immutable() -> None:
    revision = {"metadata": {"name": "agent-abc"}, "data": {"spec": {}}, "revision": 1}
    assert ControllerRevisionStrategy().validate(revision) == []
    assert full(ControllerRevisionStrategy().validate({**revision, "revision": -1})) == [
        "revision: Invalid value: -1: must be greater than or equal to 0"]
    changed = {**revision, "data": {"spec": {"x": 1}}, "revision": 2}
    assert full(ControllerRevisionStrategy().validate_update(changed, revision))[0].endswith("field is immutable")
    assert ControllerRevisionStrategy().validate_update({**revision, "revision": 3}, revision) == []


def test_table_rows() -> None:
    obj = created()
    obj["metadata"]["creationTimestamp"] = "2026-11-24T00:00:00Z"
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"disk": "ssd", "arch": "amd64"}
    obj["status"] = {"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 1,
                     "updatedNumberScheduled": 1, "numberAvailable": 1, "numberMisscheduled": 0}
    now = datetime(2026, 11, 24, 0, 5, tzinfo=UTC)
    table = table_for("daemonsets", [obj], now=now)
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age",
                     "Containers", "Images", "Selector"]
    assert table["rows"][0]["cells"] == ["agent", 2, 2, 1, 1, 1, "arch=amd64,disk=ssd", "5m", "c", "busybox",
                                         "app=agent"]
    revision = {"metadata": {"name": "agent-abc", "creationTimestamp": "2026-11-24T00:00:00Z",
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                                  "uid": "u", "controller": True}]}, "revision": 3}
    table = table_for("controllerrevisions", [revision], now=now)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Controller", "Revision", "Age"]
    assert table["rows"][0]["cells"] == ["agent-abc", "daemonset.apps/agent", 3, "5m"]
