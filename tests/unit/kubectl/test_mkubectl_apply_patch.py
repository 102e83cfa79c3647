"""Client-side apply's three-way strategic merge patch, against what kubectl 1.33 sends.

The expected patches are kubectl's for the same (last applied, new manifest, live object) triples:
they were recorded from `kubectl apply --dry-run=server -v=9` against the minik8s apiserver, and
the integration tests compare the two live (tests/integration/test_mkubectl.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubectl.apply import LAST_APPLIED, last_applied_of, modified_configuration
from machinery.api.apps_v1 import Deployment
from machinery.api.core_v1 import Pod
from machinery.patch import three_way_merge_patch
from machinery.types import Obj


def manifest() -> Obj:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "tier": "web"}},
        "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                "containers": [
                    {"name": "a", "image": "img:1", "args": ["xa", "ya"],
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                     "ports": [{"containerPort": 80}, {"containerPort": 81}],
                     "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
                    {"name": "b", "image": "img:2"},
                ],
                "volumes": [{"name": "v", "emptyDir": {}}],
            }},
        },
    }


def served(applied: Obj) -> Obj:
    """The live object the apiserver returns after `applied` was created: defaults, status, metadata."""
    obj = modified_configuration(applied)
    meta = obj["metadata"]
    meta.update({"uid": "u-1", "resourceVersion": "7", "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"})
    meta["annotations"]["deployment.kubernetes.io/revision"] = "1"
    spec = obj["spec"]
    spec.update({"progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}})
    pod = spec["template"]["spec"]
    pod.update({"dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "securityContext": {}, "terminationGracePeriodSeconds": 30})
    for c in pod["containers"]:
        c.update({"imagePullPolicy": "IfNotPresent", "resources": {},
                  "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
        for port in c.get("ports", []):
            port["protocol"] = "TCP"
    obj["status"] = {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                     "conditions": [{"type": "Available", "status": "False"},
                                    {"type": "Progressing", "status": "True"}]}
    return obj


def patch_for(new: Obj, live: Obj | None = None, model: Any = Deployment) -> Obj:
    live = served(manifest()) if live is None else live
    return three_way_merge_patch(last_applied_of(live), modified_configuration(new), live, model)


def without_annotation(patch: Obj) -> Obj:
    """The patch minus the new last-applied annotation (checked on its own)."""
    patch = copy.deepcopy(patch)
    annotations = patch.get("metadata", {}).get("annotations", {})
    annotations.pop(LAST_APPLIED, None)
    if "annotations" in patch.get("metadata", {}) and not annotations:
        del patch["metadata"]["annotations"]
    if "metadata" in patch and not patch["metadata"]:
        del patch["metadata"]
    return patch


def containers(new: Obj) -> list[Obj]:
    return new["spec"]["template"]["spec"]["containers"]


ORDER_AB = [{"name": "a"}, {"name": "b"}]


def test_the_annotation_is_the_manifest_as_kubectl_writes_it() -> None:
    obj = modified_configuration({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
                                  "spec": {"containers": [{"name": "c", "image": "i<&>"}]}})
    assert obj["metadata"]["annotations"][LAST_APPLIED] == (
        '{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{},"name":"p","namespace":"d"},'
        '"spec":{"containers":[{"image":"i\\u003c\\u0026\\u003e","name":"c"}]}}\n')
    # an annotation from an earlier apply is not part of the recorded configuration
    again = modified_configuration(obj)
    assert again["metadata"]["annotations"][LAST_APPLIED] == obj["metadata"]["annotations"][LAST_APPLIED]


def test_unchanged_manifest_gives_the_empty_patch() -> None:
    assert patch_for(manifest()) == {}


def test_image_change_sends_set_element_order_of_containers() -> None:
    new = manifest()
    new["spec"]["replicas"] = 4
    containers(new)[0]["image"] = "img:9"
    patch = patch_for(new)
    assert json.loads(patch["metadata"]["annotations"][LAST_APPLIED])["spec"]["replicas"] == 4
    assert without_annotation(patch) == {"spec": {"replicas": 4, "template": {"spec": {
        "$setElementOrder/containers": ORDER_AB, "containers": [{"image": "img:9", "name": "a"}]}}}}


def test_removed_env_var_is_a_delete_directive() -> None:
    new = manifest()
    del containers(new)[0]["env"][0]
    assert without_annotation(patch_for(new)) == {"spec": {"template": {"spec": {
        "$setElementOrder/containers": ORDER_AB,
        "containers": [{"$setElementOrder/env": [{"name": "B"}], "env": [{"$patch": "delete", "name": "A"}],
                        "name": "a"}]}}}}


def test_added_container_and_label() -> None:
    new = manifest()
    containers(new).append({"name": "c", "image": "img:3"})
    new["metadata"]["labels"]["new"] = "yes"
    assert without_annotation(patch_for(new)) == {
        "metadata": {"labels": {"new": "yes"}},
        "spec": {"template": {"spec": {"$setElementOrder/containers": [*ORDER_AB, {"name": "c"}],
                                       "containers": [{"image": "img:3", "name": "c"}]}}}}


def test_removed_label_is_null_and_new_annotation_kept() -> None:
    new = manifest()
    del new["metadata"]["labels"]["tier"]
    new["metadata"]["annotations"] = {"note": "hi"}
    patch = patch_for(new)
    assert patch["metadata"]["annotations"]["note"] == "hi"
    assert without_annotation(patch) == {"metadata": {"annotations": {"note": "hi"}, "labels": {"tier": None}}}


def test_reordered_containers_send_only_the_order() -> None:
    new = manifest()
    containers(new).reverse()
    assert without_annotation(patch_for(new)) == {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}}}


def test_lists_without_merge_strategy_are_replaced() -> None:
    new = manifest()
    containers(new)[0]["args"] = ["z"]
    containers(new)[0]["command"] = ["sh"]
    assert without_annotation(patch_for(new)) == {"spec": {"template": {"spec": {
        "$setElementOrder/containers": ORDER_AB,
        "containers": [{"args": ["z"], "command": ["sh"], "name": "a"}]}}}}


def test_dropped_field_and_port_are_deleted() -> None:
    new = manifest()
    del new["spec"]["replicas"]
    del containers(new)[0]["ports"][1]
    assert without_annotation(patch_for(new)) == {"spec": {"replicas": None, "template": {"spec": {
        "$setElementOrder/containers": ORDER_AB,
        "containers": [{"$setElementOrder/ports": [{"containerPort": 80}], "name": "a",
                        "ports": [{"$patch": "delete", "containerPort": 81}]}]}}}}


def test_removed_container_and_changed_image() -> None:
    new = manifest()
    del containers(new)[1]
    containers(new)[0]["image"] = "img:9"
    assert without_annotation(patch_for(new)) == {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "a"}],
        "containers": [{"image": "img:9", "name": "a"}, {"$patch": "delete", "name": "b"}]}}}}


def test_changed_added_and_reordered_env() -> None:
    new = manifest()
    containers(new)[0]["env"] = [{"name": "B", "value": "3"}, {"name": "A", "value": "1"}, {"name": "C", "value": "x"}]
    assert without_annotation(patch_for(new)) == {"spec": {"template": {"spec": {
        "$setElementOrder/containers": ORDER_AB,
        "containers": [{"$setElementOrder/env": [{"name": "B"}, {"name": "A"}, {"name": "C"}],
                        "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "x"}], "name": "a"}]}}}}


def test_volume_source_change_retains_keys() -> None:
    new = manifest()
    new["spec"]["template"]["spec"]["volumes"] = [{"name": "v", "hostPath": {"path": "/tmp"}}]
    assert without_annotation(patch_for(new)) == {"spec": {"template": {"spec": {
        "$setElementOrder/volumes": [{"name": "v"}],
        "volumes": [{"$retainKeys": ["hostPath", "name"], "emptyDir": None, "hostPath": {"path": "/tmp"},
                     "name": "v"}]}}}}


def test_fields_set_by_the_server_survive() -> None:
    """Nothing in the patch touches defaults or status: the deletions come from the last applied only."""
    new = manifest()
    containers(new)[1]["image"] = "img:3"
    patch = without_annotation(patch_for(new))
    assert "status" not in patch and "strategy" not in patch["spec"]
    assert patch["spec"]["template"]["spec"]["containers"] == [{"image": "img:3", "name": "b"}]


def test_without_last_applied_nothing_is_deleted() -> None:
    live = served(manifest())
    del live["metadata"]["annotations"][LAST_APPLIED]
    new = manifest()
    del new["metadata"]["labels"]["tier"]
    patch = three_way_merge_patch(None, modified_configuration(new), live, Deployment)
    assert "labels" not in patch["metadata"]
    assert list(patch["metadata"]["annotations"]) == [LAST_APPLIED]


def test_a_change_made_by_someone_else_is_overwritten_only_where_the_manifest_speaks() -> None:
    live = served(manifest())
    live["spec"]["replicas"] = 7  # `kubectl scale` since the last apply
    live["metadata"]["labels"]["added-by-hand"] = "x"
    patch = without_annotation(patch_for(manifest(), live))
    assert patch == {"spec": {"replicas": 2}}


@pytest.mark.parametrize("model", [Pod, None])
def test_scalar_merge_lists_and_unknown_models(model: Any) -> None:
    base = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": ["a", "b"]},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}
    live = modified_configuration(base)
    new = copy.deepcopy(base)
    new["metadata"]["finalizers"] = ["b", "c"]
    patch = without_annotation(three_way_merge_patch(last_applied_of(live), modified_configuration(new), live, model))
    if model is None:  # no schema: lists are replaced, as JSON merge patch does
        assert patch == {"metadata": {"finalizers": ["b", "c"]}}
    else:  # finalizers have patchStrategy merge: additions, deletions and the order
        assert patch == {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "$setElementOrder/finalizers":
                                      ["b", "c"], "finalizers": ["c"]}}


def test_a_merge_list_without_merge_key_is_a_patch_error() -> None:
    """machinery's three-way patch refuses what upstream's refuses; kubectl words it as `error: ...`."""
    from pydantic import Field

    from machinery.api.base import ApiModel, patch_strategy
    from machinery.patch import PatchError

    class Keyless(ApiModel):
        items: list[dict[str, Any]] | None = Field(None, json_schema_extra=patch_strategy("merge"))

    with pytest.raises(PatchError, match="cannot merge lists without merge key"):
        three_way_merge_patch({"items": [{"a": 1}]}, {"items": [{"a": 2}]}, {"items": [{"a": 1}]}, Keyless)
