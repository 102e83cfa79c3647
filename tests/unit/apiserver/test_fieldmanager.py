"""apiserver/fieldmanager.py: the manager's name, its validation, the cap on Update entries, the
conflict Status and kubectl's last-applied annotation kept in step (upstream fieldmanager tests)."""

from __future__ import annotations

import json

import pytest

from apiserver import errors, fieldmanager
from machinery import managedfields as mf
from machinery.api.resources import RESOURCES

CM = next(r for r in RESOURCES if r.kind == "ConfigMap" and r.group == "")
NODE = mf.from_model(CM.model)


def test_manager_name() -> None:
    assert fieldmanager.manager_of("mine", "kubectl/v1.33.0 (linux/amd64)") == "mine"
    assert fieldmanager.manager_of(None, "kube-controller-manager/v1.30.0 (linux/amd64) kubernetes/abc") == \
        "kube-controller-manager"
    assert fieldmanager.manager_of(None, "OpenAPI-Generator/29.0.0/python") == "OpenAPI-Generator"
    assert fieldmanager.manager_of(None, "") is None
    assert fieldmanager.manager_of(None, "a\x00b" + "c" * 200) == "ab" + "c" * 126


@pytest.mark.parametrize(("manager", "says"), [
    ("x" * 129, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes'),
    ("a\tb", 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Invalid value: "a\tb": invalid character U+0009 '
             "(at position 1)"),
])
def test_manager_validation(manager: str, says: str) -> None:
    with pytest.raises(errors.ApiError) as e:
        fieldmanager.check_manager(manager, "PatchOptions")
    assert (e.value.code, e.value.reason, e.value.message) == (422, "Invalid", says)
    fieldmanager.check_manager("fine", "PatchOptions")


def test_update_entries_are_capped() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    for i in range(12):
        new = {**obj, "metadata": dict(obj["metadata"]), "data": {**obj["data"], f"k{i}": "v"}}
        fieldmanager.track_update(CM, NODE, obj, new, f"m{i:02d}", None, f"2026-01-01T00:00:{i:02d}Z")
        obj = new
    entries = obj["metadata"]["managedFields"]
    assert len(entries) == 10
    assert entries[0]["manager"] == "ancient-changes"
    assert entries[0]["fieldsV1"] == {"f:data": {"f:k0": {}, "f:k1": {}, "f:k2": {}}}
    assert [e["manager"] for e in entries[1:]] == [f"m{i:02d}" for i in range(3, 12)]


def test_conflict_status_and_last_applied() -> None:
    live = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {fieldmanager.LAST_APPLIED: "{}"}}, "data": {"a": "1"}}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}}
    fieldmanager.track_update(CM, NODE, {**live, "data": {}}, live, "kubectl-client-side-apply", None, "t")
    with pytest.raises(errors.ApiError) as e:
        fieldmanager.apply(CM, NODE, live, config, "kubectl", False, None, "c", "t2")
    assert e.value.code == 409 and e.value.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.a')
    assert e.value.details == {"causes": [{"reason": "FieldManagerConflict",
                                           "message": 'conflict with "kubectl-client-side-apply" using v1',
                                           "field": ".data.a"}]}
    merged = fieldmanager.apply(CM, NODE, live, config, "kubectl", True, None, "c", "t2")
    assert json.loads(merged["metadata"]["annotations"][fieldmanager.LAST_APPLIED]) == config
    other = fieldmanager.apply(CM, NODE, live, config, "helm", True, None, "c", "t2")
    assert other["metadata"]["annotations"][fieldmanager.LAST_APPLIED] == "{}"


def test_first_apply_to_an_unmanaged_object() -> None:
    live = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "9"}}
    with pytest.raises(errors.ApiError) as e:
        fieldmanager.apply(CM, NODE, live, config, "m", False, None, "c", "t")
    assert e.value.message == 'Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a'
    merged = fieldmanager.apply(CM, NODE, live, {**config, "data": {"a": "1"}}, "m", False, None, "c", "t")
    assert [(e["manager"], e["fieldsV1"]) for e in merged["metadata"]["managedFields"]] == [
        ("m", {"f:data": {"f:a": {}}}), ("before-first-apply", {"f:data": {".": {}, "f:a": {}, "f:b": {}}})]


def test_client_managed_fields() -> None:
    old = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    fieldmanager.track_create(CM, NODE, old, None, "maker", "t0")
    kept = old["metadata"]["managedFields"]
    # left out: the stored ones stay, and the writer's change is added
    new = {**old, "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}
    fieldmanager.track_update(CM, NODE, old, new, "w", None, "t1")
    assert [e["manager"] for e in new["metadata"]["managedFields"]] == ["maker", "w"]
    # cleared with [] (or [{}]): only what this write changed is recorded
    for reset in ([], [{}]):
        new = {**old, "metadata": {"name": "c", "managedFields": reset}, "data": {"a": "1", "c": "3"}}
        fieldmanager.track_update(CM, NODE, old, new, "w", None, "t1")
        assert [(e["manager"], e["fieldsV1"]) for e in new["metadata"]["managedFields"]] == [
            ("w", {"f:data": {"f:c": {}}})]
    # replaced (kubectl's move of client-side apply's fields): taken as they are
    moved = [{**kept[0], "manager": "kubectl", "operation": "Apply"}]
    new = {**old, "metadata": {"name": "c", "managedFields": moved}}
    fieldmanager.track_update(CM, NODE, old, new, "kubectl", None, "t2")
    assert new["metadata"]["managedFields"] == moved
    # through a subresource: the request's are ignored
    new = {**old, "metadata": {"name": "c", "managedFields": moved}}
    fieldmanager.track_update(CM, NODE, old, new, "kubectl", "status", "t2")
    assert new["metadata"]["managedFields"] == kept
    # invalid: the stored ones stay
    new = {**old, "metadata": {"name": "c", "managedFields": [{"operation": "Bogus"}]}}
    fieldmanager.track_update(CM, NODE, old, new, "w", None, "t3")
    assert new["metadata"]["managedFields"] == kept


def test_duplicate_keys_in_an_applied_configuration() -> None:
    deploy = next(r for r in RESOURCES if r.kind == "Deployment")
    config = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"},
              "spec": {"template": {"spec": {"containers": [{"name": "c", "env": [{"name": "A"}, {"name": "A"}],
                                                             "ports": [{"containerPort": 93}] * 2}]}}}}
    with pytest.raises(errors.ApiError) as e:
        fieldmanager.apply(deploy, mf.from_model(deploy.model), None, config, "m", False, None, "d", "t")
    assert e.value.code == 500
    assert e.value.message == (
        "failed to create typed patch object (ns/d; apps/v1, Kind=Deployment): errors:\n"
        '  .spec.template.spec.containers[name="c"].env: duplicate entries for key [name="A"]\n'
        '  .spec.template.spec.containers[name="c"].ports: duplicate entries for key '
        '[containerPort=93,protocol="TCP"]')
    single = {**config, "metadata": {"name": "d"}, "spec": {"template": {"metadata": {}, "spec": {
        "containers": [{"name": "c"}, {"name": "c"}]}}}}
    with pytest.raises(errors.ApiError) as e:
        fieldmanager.apply(deploy, mf.from_model(deploy.model), None, single, "m", False, None, "d", "t")
    assert e.value.message == ("failed to create typed patch object (/d; apps/v1, Kind=Deployment): "
                               '.spec.template.spec.containers: duplicate entries for key [name="c"]')


def test_a_write_through_scale_owns_the_replicas_as_upstreams_scale_handler() -> None:
    deployments = next(r for r in RESOURCES if r.kind == "Deployment" and r.group == "apps")
    node = mf.from_model(deployments.model)
    old = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 1, "paused": False}}
    fieldmanager.track_create(deployments, node, old, None, "maker", "t0")
    new = {**old, "metadata": dict(old["metadata"]), "spec": {**old["spec"], "replicas": 3}}
    fieldmanager.track_scale(deployments, old, new, "kubectl")
    # the maker loses .spec.replicas; the scaler's entry has it, in apps/v1, with no time (upstream ToParent)
    assert new["metadata"]["managedFields"] == [
        {"manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"},
        {"manager": "maker", "operation": "Update", "apiVersion": "apps/v1", "time": "t0", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": {"f:paused": {}}}}]
    # the same count again: nothing changes; another scaler takes it, the first one's entry goes
    again = {**new, "metadata": dict(new["metadata"])}
    fieldmanager.track_scale(deployments, new, again, "hpa")
    assert again["metadata"]["managedFields"] == new["metadata"]["managedFields"]
    other = {**new, "metadata": dict(new["metadata"]), "spec": {**new["spec"], "replicas": 5}}
    fieldmanager.track_scale(deployments, new, other, "hpa")
    assert [(e["manager"], e.get("subresource"), e["fieldsV1"]) for e in other["metadata"]["managedFields"]] == [
        ("hpa", "scale", {"f:spec": {"f:replicas": {}}}), ("maker", None, {"f:spec": {"f:paused": {}}})]
    # an entry with nothing left goes; no manager (an internal write): managedFields stay as they were
    only = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1}}
    fieldmanager.track_create(deployments, node, only, None, "maker", "t0")
    scaled = {**only, "metadata": dict(only["metadata"]), "spec": {"replicas": 2}}
    fieldmanager.track_scale(deployments, only, scaled, "kubectl")
    assert [e["manager"] for e in scaled["metadata"]["managedFields"]] == ["kubectl"]
    internal = {**only, "metadata": dict(only["metadata"]), "spec": {"replicas": 2}}
    fieldmanager.track_scale(deployments, only, internal, None)
    assert internal["metadata"]["managedFields"] == only["metadata"]["managedFields"]
