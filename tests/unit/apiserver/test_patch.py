"""The patch engine (machinery/patch, applied by apiserver/patch.py): JSON merge patch, JSON patch, strategic
merge patch and apply, as upstream."""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from apiserver.patch import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    UnsupportedPatchType,
    apply_patch,
)
from machinery.api.base import ApiModel, merge_key, patch_strategy
from machinery.patch import (
    MAX_JSON_PATCH_OPERATIONS,
    PatchError,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)
from machinery.patch.schema import describe, model_fields

# --- Small models shaped like Pod and Deployment -----------------------------------------------


class Meta(ApiModel):
    name: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = Field(None, json_schema_extra=patch_strategy("merge"))
    owner_references: list[OwnerRef] | None = Field(None, json_schema_extra=merge_key("uid"))


class OwnerRef(ApiModel):
    uid: str
    name: str | None = None


class EnvVar(ApiModel):
    name: str
    value: str | None = None


class Port(ApiModel):
    container_port: int
    protocol: str | None = None
    name: str | None = None


class Container(ApiModel):
    name: str
    image: str | None = None
    args: list[str] | None = None
    ports: list[Port] | None = Field(None, json_schema_extra=merge_key("containerPort"))
    env: list[EnvVar] | None = Field(None, json_schema_extra=merge_key("name"))
    resources: dict[str, Any] | None = None


class Volume(ApiModel):
    name: str
    host_path: dict[str, str] | None = None
    empty_dir: dict[str, Any] | None = None


class Toleration(ApiModel):
    key: str | None = None
    effect: str | None = None


class Affinity(ApiModel):
    node_affinity: dict[str, Any] | None = None
    pod_affinity: dict[str, Any] | None = None


class PodSpec(ApiModel):
    containers: list[Container] = Field(json_schema_extra=merge_key("name"))
    init_containers: list[Container] | None = Field(None, json_schema_extra=merge_key("name"))
    volumes: list[Volume] | None = Field(None, json_schema_extra=merge_key("name", "merge,retainKeys"))
    tolerations: list[Toleration] | None = None
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = Field(None, json_schema_extra=patch_strategy("replace"))
    sidecars: dict[str, Container] | None = None  # a map of models, to test dict[str, Model]


class Condition(ApiModel):
    type: str
    status: str
    reason: str | None = None


class PodStatus(ApiModel):
    phase: str | None = None
    conditions: list[Condition] | None = Field(None, json_schema_extra=merge_key("type"))


class Pod(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Pod"] = "Pod"
    metadata: Meta = Field(default_factory=Meta)
    spec: PodSpec | None = None
    status: PodStatus | None = None


class PodTemplate(ApiModel):
    metadata: Meta | None = None
    spec: PodSpec | None = None


class RollingUpdate(ApiModel):
    max_surge: int | str | None = None
    max_unavailable: int | str | None = None


class Strategy(ApiModel):
    type: str | None = None
    rolling_update: RollingUpdate | None = None


class DeploymentSpec(ApiModel):
    replicas: int | None = None
    selector: dict[str, Any] | None = None
    template: PodTemplate | None = None
    strategy: Strategy | None = Field(None, json_schema_extra=patch_strategy("retainKeys"))


class Deployment(ApiModel):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["Deployment"] = "Deployment"
    metadata: Meta = Field(default_factory=Meta)
    spec: DeploymentSpec | None = None


for _model in (Meta, PodSpec, Pod, PodTemplate, DeploymentSpec, Deployment):
    _model.model_rebuild()


def pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def names(items: list[dict[str, Any]]) -> list[Any]:
    return [item["name"] for item in items]


DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "nginx",
        "labels": {"app": "nginx"},
        "annotations": {"deployment.kubernetes.io/revision": "1"},
    },
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "nginx"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
        "template": {
            "metadata": {"labels": {"app": "nginx"}},
            "spec": {
                "containers": [
                    {
                        "name": "nginx",
                        "image": "nginx:1.14.2",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "env": [{"name": "A", "value": "1"}],
                    }
                ]
            },
        },
    },
}

LAST_APPLIED = '{"apiVersion":"apps/v1","kind":"Deployment"}\n'

# What kubectl apply sends after the image in the manifest changed.
KUBECTL_APPLY_PATCH: dict[str, Any] = {
    "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": LAST_APPLIED}},
    "spec": {
        "template": {
            "spec": {
                "$setElementOrder/containers": [{"name": "nginx"}],
                "containers": [{"image": "nginx:1.16", "name": "nginx"}],
            }
        }
    },
}

# What kubectl rollout restart sends.
KUBECTL_RESTART_PATCH: dict[str, Any] = {
    "spec": {
        "template": {
            "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-02T03:04:05Z"}}
        }
    }
}


# --- JSON merge patch --------------------------------------------------------------------------


# The object-patch examples of RFC 7386 appendix A.
@pytest.mark.parametrize(
    ("original", "patch", "result"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
        ({"a": "x"}, {"a": {"b": 1}}, {"a": {"b": 1}}),
    ],
)
def test_merge_patch_rfc7386_examples(original: dict[str, Any], patch: dict[str, Any], result: Any) -> None:
    assert json_merge_patch(original, patch) == result


def test_merge_patch_replaces_lists_and_merges_maps() -> None:
    original = copy.deepcopy(DEPLOYMENT)
    patched = json_merge_patch(
        original,
        {"spec": {"replicas": 5, "template": {"spec": {"containers": [{"name": "x", "image": "y"}]}}}},
    )
    assert patched["spec"]["replicas"] == 5
    assert patched["spec"]["template"]["spec"]["containers"] == [{"name": "x", "image": "y"}]
    assert patched["spec"]["selector"] == DEPLOYMENT["spec"]["selector"]
    assert original == DEPLOYMENT


def test_merge_patch_never_mutates_or_shares() -> None:
    original = {"a": {"b": [1]}, "c": {"d": 1}}
    patch = {"a": {"e": [2]}, "c": None}
    frozen = copy.deepcopy((original, patch))
    patched = json_merge_patch(original, patch)
    assert (original, patch) == frozen
    patched["a"]["b"].append(9)
    patched["a"]["e"].append(9)
    assert (original, patch) == frozen


def test_merge_patch_refuses_non_objects() -> None:
    with pytest.raises(PatchError):
        json_merge_patch({}, [1])  # type: ignore[arg-type]
    with pytest.raises(PatchError):
        json_merge_patch([], {})  # type: ignore[arg-type]


# --- JSON patch --------------------------------------------------------------------------------


def test_json_patch_operations() -> None:
    doc = {"a": {"b": [1, 2, 3]}, "c": "x", "m/n": 1, "t~u": 2}
    ops = [
        {"op": "add", "path": "/a/d", "value": {"e": 1}},
        {"op": "add", "path": "/a/b/1", "value": 9},
        {"op": "add", "path": "/a/b/-", "value": 10},
        {"op": "add", "path": "/c", "value": "replaced by add"},
        {"op": "remove", "path": "/a/b/0"},
        {"op": "replace", "path": "/a/b/0", "value": 8},
        {"op": "replace", "path": "/m~1n", "value": 11},
        {"op": "remove", "path": "/t~0u"},
        {"op": "copy", "from": "/a/d", "path": "/f"},
        {"op": "move", "from": "/a/b", "path": "/g"},
        {"op": "test", "path": "/g", "value": [8, 2, 3, 10]},
        {"op": "test", "path": "/f/e", "value": 1.0},
        {"op": "test", "path": "/absent", "value": None},
    ]
    assert json_patch(doc, ops) == {
        "a": {"d": {"e": 1}},
        "c": "replaced by add",
        "m/n": 11,
        "f": {"e": 1},
        "g": [8, 2, 3, 10],
    }
    assert doc == {"a": {"b": [1, 2, 3]}, "c": "x", "m/n": 1, "t~u": 2}


def test_json_patch_copy_is_independent() -> None:
    patched = json_patch({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/c"}])
    patched["c"]["b"] = 2
    assert patched["a"] == {"b": 1}


def test_json_patch_negative_indices_and_moves_in_lists() -> None:
    doc = {"l": ["a", "b", "c"]}
    assert json_patch(doc, [{"op": "remove", "path": "/l/-1"}]) == {"l": ["a", "b"]}
    assert json_patch(doc, [{"op": "replace", "path": "/l/-3", "value": "z"}]) == {"l": ["z", "b", "c"]}
    assert json_patch(doc, [{"op": "add", "path": "/l/3", "value": "d"}]) == {"l": ["a", "b", "c", "d"]}
    assert json_patch(doc, [{"op": "move", "from": "/l/0", "path": "/l/-"}]) == {"l": ["b", "c", "a"]}
    assert json_patch(doc, [{"op": "move", "from": "/l/1", "path": "/l/1"}]) == doc


def test_json_patch_root() -> None:
    assert json_patch({"a": 1}, [{"op": "copy", "from": "", "path": "/b"}]) == {"a": 1, "b": {"a": 1}}
    assert json_patch({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}]) == {"b": 2}
    assert json_patch({"a": 1}, [{"op": "add", "path": "", "value": [1]}]) == [1]
    assert json_patch({"a": 1}, [{"op": "test", "path": "", "value": {"a": 1}}]) == {"a": 1}


def test_json_patch_rollout_undo() -> None:
    """kubectl rollout undo replaces the pod template and the annotations."""
    template = copy.deepcopy(DEPLOYMENT["spec"]["template"])
    template["spec"]["containers"][0]["image"] = "nginx:1.13"
    annotations = {"deployment.kubernetes.io/revision": "1"}
    ops = [
        {"op": "replace", "path": "/spec/template", "value": template},
        {"op": "replace", "path": "/metadata/annotations", "value": annotations},
    ]
    patched = json_patch(DEPLOYMENT, ops)
    assert patched["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.13"
    assert patched["metadata"]["annotations"] == annotations
    assert DEPLOYMENT["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.14.2"


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        (
            [{"op": "replace", "path": "/spec/foo", "value": 1}],
            "replace operation does not apply: doc is missing key: /spec/foo",
        ),
        (
            [{"op": "replace", "path": "/x/foo", "value": 1}],
            "replace operation does not apply: doc is missing path: /x/foo",
        ),
        (
            [{"op": "replace", "path": "/spec/l/5", "value": 1}],
            "replace operation does not apply: doc is missing key: /spec/l/5",
        ),
        ([{"op": "replace", "path": "", "value": 1}], "replace operation value must be object or array"),
        (
            [{"op": "add", "path": "/x/y", "value": 1}],
            'add operation does not apply: doc is missing path: "/x/y"',
        ),
        ([{"op": "add", "path": "/spec/l/9", "value": 1}], "Unable to access invalid index: 9"),
        ([{"op": "add", "path": "/spec/l/x", "value": 1}], "Unable to access invalid index: x"),
        ([{"op": "add", "path": "/spec/l/0"}], "add operation, missing value field"),
        ([{"op": "add", "path": "/spec/l/0/deeper", "value": 1}], "doc is missing path"),
        (
            [{"op": "remove", "path": "/spec/nope"}],
            "remove operation does not apply: doc is missing key: /spec/nope",
        ),
        ([{"op": "remove", "path": "/x/y"}], 'remove operation does not apply: doc is missing path: "/x/y"'),
        ([{"op": "remove", "path": "/spec/l/2"}], "Unable to access invalid index: 2"),
        ([{"op": "remove", "path": ""}], "remove operation does not apply"),
        (
            [{"op": "move", "from": "/nope", "path": "/a"}],
            "move operation does not apply: doc is missing from path: /nope",
        ),
        ([{"op": "move", "path": "/a"}], "move operation, missing from field"),
        ([{"op": "move", "from": "/spec", "path": "/spec/child"}], "is a child of from"),
        ([{"op": "move", "from": "/spec/l", "path": "/x/y"}], "doc is missing path"),
        (
            [{"op": "copy", "from": "/nope", "path": "/a"}],
            "copy operation does not apply: doc is missing from path: /nope",
        ),
        ([{"op": "copy", "from": "/spec", "path": "/x/y"}], "doc is missing path"),
        (
            [{"op": "test", "path": "/spec/l/0", "value": 2}],
            "test operation failed: testing value /spec/l/0 failed",
        ),
        ([{"op": "test", "path": "/spec/flag", "value": 1}], "test operation failed"),
        ([{"op": "test", "path": "/spec/l", "value": [1, 2, 3]}], "test operation failed"),
        ([{"op": "test", "path": "/spec", "value": {"l": [1, 2]}}], "test operation failed"),
        (
            [{"op": "test", "path": "/x/y", "value": 1}],
            "test operation does not apply: is missing path: /x/y",
        ),
        ([{"op": "test", "path": "/spec/l/7", "value": 1}], "Unable to access invalid index: 7"),
        ([{"op": "test", "path": "/spec"}], "test operation, missing value field"),
        ([{"op": "frobnicate", "path": "/a"}], "Unexpected kind: frobnicate"),
        ([{"path": "/a"}], "Unexpected kind: unknown"),
        ([{"op": "add", "value": 1}], "operation missing path field"),
        ([{"op": "add", "path": 5, "value": 1}], "add operation failed to decode path"),
        ([{"op": "add", "path": "spec", "value": 1}], 'does not start with "/"'),
        (["add"], "must be a JSON object"),
        ([{"op": "add", "path": "/spec/flag/x", "value": 1}], "doc is missing path"),
    ],
)
def test_json_patch_errors(ops: list[Any], message: str) -> None:
    doc = {"spec": {"l": [1, 2], "flag": True}}
    with pytest.raises(PatchError) as error:
        json_patch(doc, ops)
    assert message in str(error.value)
    assert error.value.code == 422
    assert doc == {"spec": {"l": [1, 2], "flag": True}}


def test_json_patch_fails_as_a_whole() -> None:
    doc = {"a": 1}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 2}])
    assert doc == {"a": 1}


def test_json_patch_refuses_non_lists_and_too_many_operations() -> None:
    with pytest.raises(PatchError, match="array of operations") as error:
        json_patch({}, {"op": "add"})  # type: ignore[arg-type]
    assert error.value.code == 400
    too_many = [{"op": "test", "path": "", "value": {}}] * (MAX_JSON_PATCH_OPERATIONS + 1)
    with pytest.raises(PatchError, match="allowed count of operations"):
        json_patch({}, too_many)


# --- Strategic merge patch: what kubectl sends -------------------------------------------------


def test_smp_kubectl_apply_image_change() -> None:
    original = copy.deepcopy(DEPLOYMENT)
    patched = strategic_merge_patch(original, KUBECTL_APPLY_PATCH, Deployment)
    container = patched["spec"]["template"]["spec"]["containers"][0]
    assert container == {**DEPLOYMENT["spec"]["template"]["spec"]["containers"][0], "image": "nginx:1.16"}
    assert len(patched["spec"]["template"]["spec"]["containers"]) == 1
    assert patched["metadata"]["annotations"] == {
        "deployment.kubernetes.io/revision": "1",
        "kubectl.kubernetes.io/last-applied-configuration": LAST_APPLIED,
    }
    assert "$setElementOrder/containers" not in patched["spec"]["template"]["spec"]
    assert original == DEPLOYMENT
    Deployment.model_validate(patched)


def test_smp_kubectl_rollout_restart() -> None:
    patched = strategic_merge_patch(DEPLOYMENT, KUBECTL_RESTART_PATCH, Deployment)
    assert patched["spec"]["template"]["metadata"] == {
        "labels": {"app": "nginx"},
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-02T03:04:05Z"},
    }
    assert patched["spec"]["template"]["spec"] == DEPLOYMENT["spec"]["template"]["spec"]


def test_smp_kubectl_apply_strategy_switch_with_retain_keys() -> None:
    """RollingUpdate → Recreate: kubectl sends $retainKeys so rollingUpdate is dropped."""
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": None, "type": "Recreate"}}}
    patched = strategic_merge_patch(DEPLOYMENT, patch, Deployment)
    assert patched["spec"]["strategy"] == {"type": "Recreate"}


def test_smp_kubectl_apply_removing_a_container() -> None:
    original = pod(containers=[{"name": "a", "image": "a"}, {"name": "b", "image": "b"}])
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}],
            "containers": [{"$patch": "delete", "name": "b"}],
        }
    }
    assert strategic_merge_patch(original, patch, Pod)["spec"]["containers"] == [{"name": "a", "image": "a"}]


# --- Strategic merge patch: lists merged by key ------------------------------------------------


def test_smp_merges_nested_lists_by_key() -> None:
    original = pod(
        containers=[
            {
                "name": "app",
                "image": "app:1",
                "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            }
        ]
    )
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "ports": [{"containerPort": 80, "name": "http"}],
                    "env": [{"name": "B", "value": None}, {"name": "C", "value": "3"}],
                }
            ]
        }
    }
    container = strategic_merge_patch(original, patch, Pod)["spec"]["containers"][0]
    assert container["image"] == "app:1"
    assert container["ports"] == [
        {"containerPort": 80, "protocol": "TCP", "name": "http"},
        {"containerPort": 443},
    ]
    # B keeps its place in the list, C is new: new items go before the server-only items that
    # follow them in upstream's ordering.
    assert container["env"] == [{"name": "A", "value": "1"}, {"name": "B"}, {"name": "C", "value": "3"}]


def test_smp_new_items_are_placed_as_upstream_does() -> None:
    original = pod(containers=[{"name": "a"}, {"name": "b"}, {"name": "c"}])
    added = strategic_merge_patch(original, {"spec": {"containers": [{"name": "d"}]}}, Pod)
    assert names(added["spec"]["containers"]) == ["d", "a", "b", "c"]
    mixed = strategic_merge_patch(original, {"spec": {"containers": [{"name": "b"}, {"name": "d"}]}}, Pod)
    assert names(mixed["spec"]["containers"]) == ["a", "b", "d", "c"]


@pytest.mark.parametrize(
    ("original", "patch", "result"),
    [
        # upstream: "preserve the order from the patch in a merging list"
        (
            [{"name": "1"}, {"name": "2", "image": "b"}, {"name": "3"}],
            [{"name": "3", "image": "c"}, {"name": "1", "image": "a"}, {"name": "2", "args": ["x"]}],
            [
                {"name": "3", "image": "c"},
                {"name": "1", "image": "a"},
                {"name": "2", "image": "b", "args": ["x"]},
            ],
        ),
        # upstream: "preserve the order from the patch in a merging list 2"
        (
            [{"name": "1"}, {"name": "2", "image": "b"}, {"name": "3"}],
            [{"name": "3", "image": "c"}, {"name": "1", "image": "a"}],
            [{"name": "2", "image": "b"}, {"name": "3", "image": "c"}, {"name": "1", "image": "a"}],
        ),
    ],
)
def test_smp_preserves_patch_order(original: list[Any], patch: list[Any], result: list[Any]) -> None:
    assert strategic_merge_patch(pod(containers=original), {"spec": {"containers": patch}}, Pod)["spec"] == {
        "containers": result
    }


def test_smp_delete_directive_removes_every_match() -> None:
    original = pod(containers=[{"name": "1"}, {"name": "1"}, {"name": "2", "image": "a"}, {"name": "3"}])
    patch = {"spec": {"containers": [{"name": "1", "$patch": "delete"}, {"name": "3", "$patch": "delete"}]}}
    assert strategic_merge_patch(original, patch, Pod)["spec"]["containers"] == [{"name": "2", "image": "a"}]
    # Deleting what is not there is no error.
    patch = {"spec": {"containers": [{"name": "9", "$patch": "delete"}]}}
    assert len(strategic_merge_patch(original, patch, Pod)["spec"]["containers"]) == 4


def test_smp_replace_directive_in_list() -> None:
    original = pod(containers=[{"name": "a", "image": "a"}, {"name": "b"}])
    patch = {"spec": {"containers": [{"name": "c", "image": "c", "args": None}, {"$patch": "replace"}]}}
    assert strategic_merge_patch(original, patch, Pod)["spec"]["containers"] == [{"name": "c", "image": "c"}]
    emptied = strategic_merge_patch(original, {"spec": {"containers": [{"$patch": "replace"}]}}, Pod)
    assert emptied["spec"]["containers"] == []


def test_smp_conditions_and_owner_references_merge_by_their_keys() -> None:
    original = {
        "metadata": {"ownerReferences": [{"uid": "u1", "name": "rs1"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "Scheduled", "status": "True"}]
        },
    }
    patch = {
        "metadata": {"ownerReferences": [{"uid": "u2", "name": "rs2"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Started"}]},
    }
    patched = strategic_merge_patch(original, patch, Pod)
    assert patched["metadata"]["ownerReferences"] == [
        {"uid": "u2", "name": "rs2"},
        {"uid": "u1", "name": "rs1"},
    ]
    assert patched["status"]["conditions"] == [
        {"type": "Ready", "status": "True", "reason": "Started"},
        {"type": "Scheduled", "status": "True"},
    ]


def test_smp_merge_key_values_compare_as_json() -> None:
    original = pod(containers=[{"name": "a", "ports": [{"containerPort": 80}, {"containerPort": 81}]}])
    patch = {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80.0, "name": "web"}]}]}}
    ports = strategic_merge_patch(original, patch, Pod)["spec"]["containers"][0]["ports"]
    assert ports == [{"containerPort": 80.0, "name": "web"}, {"containerPort": 81}]


def test_smp_list_added_where_original_has_none() -> None:
    original = pod(containers=[{"name": "a"}])
    patch = {
        "spec": {
            "initContainers": [
                {"name": "x", "image": None, "env": [{"name": "E", "value": "1"}]},
                {"name": "gone", "$patch": "delete"},
            ]
        }
    }
    patched = strategic_merge_patch(original, patch, Pod)
    assert patched["spec"]["initContainers"] == [{"name": "x", "env": [{"name": "E", "value": "1"}]}]


def test_smp_merging_empty_lists() -> None:
    original = pod(containers=[])
    assert strategic_merge_patch(original, {"spec": {"containers": []}}, Pod)["spec"]["containers"] == []


# --- Strategic merge patch: primitive lists ----------------------------------------------------


def test_smp_merges_primitive_lists_with_merge_strategy() -> None:
    original = {"metadata": {"finalizers": ["a", "b"]}}
    patched = strategic_merge_patch(original, {"metadata": {"finalizers": ["b", "c", "c"]}}, Pod)
    assert patched["metadata"]["finalizers"] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("original", "patch", "result"),
    [
        ([1, 2, 3], [3, 1, 2], [3, 1, 2]),  # upstream: preserve the order from the patch
        ([1, 2, 3], [3, 1], [2, 3, 1]),
        ([1, 2], [2, 3], [1, 2, 3]),  # upstream: unique scalars when merging lists
    ],
)
def test_smp_primitive_list_order(original: list[int], patch: list[int], result: list[int]) -> None:
    class Item(BaseModel):
        ints: list[int] | None = Field(None, json_schema_extra=patch_strategy("merge"))

    assert strategic_merge_patch({"ints": original}, {"ints": patch}, Item) == {"ints": result}


def test_smp_delete_from_primitive_list() -> None:
    """kubectl removing finalizer b: upstream "delete items in lists of scalars"."""
    original = {"metadata": {"finalizers": ["a", "b", "c", "b", "d"]}}
    patch = {
        "metadata": {
            "$setElementOrder/finalizers": ["a", "c", "e"],
            "$deleteFromPrimitiveList/finalizers": ["b"],
            "finalizers": ["e"],
        }
    }
    assert strategic_merge_patch(original, patch, Pod)["metadata"]["finalizers"] == ["a", "c", "e", "d"]
    only_delete = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "zz"]}}
    assert strategic_merge_patch(original, only_delete, Pod)["metadata"]["finalizers"] == ["b", "c", "b", "d"]
    absent = strategic_merge_patch({"metadata": {}}, only_delete, Pod)
    assert absent == {"metadata": {}}


def test_smp_lists_without_merge_strategy_are_replaced() -> None:
    original = pod(
        containers=[{"name": "a", "args": ["x", "y"]}],
        tolerations=[{"key": "k1"}, {"key": "k2"}],
    )
    patch = {"spec": {"containers": [{"name": "a", "args": ["z"]}], "tolerations": [{"key": "k3"}]}}
    patched = strategic_merge_patch(original, patch, Pod)
    assert patched["spec"]["containers"] == [{"name": "a", "args": ["z"]}]
    assert patched["spec"]["tolerations"] == [{"key": "k3"}]


# --- Strategic merge patch: maps, directives and strategies ------------------------------------


def test_smp_null_deletes_and_maps_merge() -> None:
    original = {"metadata": {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "y"}}}
    patch = {"metadata": {"labels": {"a": None, "c": "3"}, "annotations": None, "name": None}}
    assert strategic_merge_patch(original, patch, Pod) == {"metadata": {"labels": {"b": "2", "c": "3"}}}


def test_smp_replace_directive_on_map() -> None:
    original = {"metadata": {"labels": {"a": "1", "b": "2"}}}
    patch = {"metadata": {"labels": {"$patch": "replace", "c": "3", "d": None}}}
    assert strategic_merge_patch(original, patch, Pod) == {"metadata": {"labels": {"c": "3"}}}
    # On the whole object (upstream: "add key and delete all keys from map").
    assert strategic_merge_patch({"name": 1, "value": 1}, {"other": "a", "$patch": "replace"}, None) == {
        "other": "a"
    }


def test_smp_delete_directive_on_map() -> None:
    original = pod(containers=[{"name": "a"}], nodeSelector={"disk": "ssd"})
    patched = strategic_merge_patch(original, {"spec": {"nodeSelector": {"$patch": "delete"}}}, Pod)
    assert "nodeSelector" not in patched["spec"]
    absent = strategic_merge_patch({"spec": {}}, {"spec": {"nodeSelector": {"$patch": "delete"}}}, Pod)
    assert absent == {"spec": {}}
    assert strategic_merge_patch({"a": 1}, {"$patch": "delete"}, Pod) == {}


def test_smp_replace_strategy_field_is_replaced_whole() -> None:
    original = pod(affinity={"nodeAffinity": {"a": 1}, "podAffinity": {"b": 2}})
    patch = {"spec": {"affinity": {"podAffinity": {"c": 3}}}}
    assert strategic_merge_patch(original, patch, Pod)["spec"]["affinity"] == {"podAffinity": {"c": 3}}


def test_smp_retain_keys() -> None:
    original = {"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}}
    patch = {"spec": {"volumes": [{"name": "v", "$retainKeys": ["emptyDir", "name"], "emptyDir": {}}]}}
    assert strategic_merge_patch(original, patch, Pod)["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]
    # Without the directive a retainKeys field merges as usual.
    patch = {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}
    assert strategic_merge_patch(original, patch, Pod)["spec"]["volumes"] == [
        {"name": "v", "hostPath": {"path": "/x"}, "emptyDir": {}}
    ]


def test_smp_type_change_replaces() -> None:
    assert strategic_merge_patch({"a": [1]}, {"a": {"b": None, "c": 1}}, None) == {"a": {"c": 1}}
    assert strategic_merge_patch({"a": {"b": 1}}, {"a": [1]}, None) == {"a": [1]}
    assert strategic_merge_patch({"a": {"b": 1}}, {"a": "x"}, None) == {"a": "x"}


def test_smp_without_model_behaves_as_merge_patch() -> None:
    original = {"spec": {"containers": [{"name": "a"}], "labels": {"x": "1"}}}
    patch = {"spec": {"containers": [{"name": "b"}], "labels": {"y": "2", "x": None}}}
    expected = {"spec": {"containers": [{"name": "b"}], "labels": {"y": "2"}}}
    assert strategic_merge_patch(original, patch, None) == expected
    assert strategic_merge_patch(original, patch, None) == json_merge_patch(original, patch)


def test_smp_untyped_fields_behave_as_merge_patch() -> None:
    original = pod(
        containers=[{"name": "a", "resources": {"limits": {"cpu": "1"}, "claims": [{"name": "x"}]}}]
    )
    patch = {
        "spec": {"containers": [{"name": "a", "resources": {"limits": {"memory": "1Gi"}, "claims": []}}]}
    }
    resources = strategic_merge_patch(original, patch, Pod)["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"cpu": "1", "memory": "1Gi"}, "claims": []}


def test_smp_map_of_models() -> None:
    original = pod(containers=[], sidecars={"log": {"name": "log", "env": [{"name": "A", "value": "1"}]}})
    patch = {"spec": {"sidecars": {"log": {"name": "log", "env": [{"name": "B", "value": "2"}]}}}}
    env = strategic_merge_patch(original, patch, Pod)["spec"]["sidecars"]["log"]["env"]
    assert env == [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]


def test_smp_unknown_fields_are_merged_without_metadata() -> None:
    patched = strategic_merge_patch(pod(containers=[]), {"spec": {"bogus": [1]}, "extra": {"a": None}}, Pod)
    assert patched["spec"]["bogus"] == [1]
    assert patched["extra"] == {}


def test_smp_never_mutates_inputs() -> None:
    original = copy.deepcopy(DEPLOYMENT)
    patch = {
        "spec": {
            "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "nginx"}, {"name": "side"}],
                    "containers": [{"name": "side", "image": "s"}, {"name": "gone", "$patch": "delete"}],
                }
            },
        },
        "metadata": {"$patch": "replace", "name": "nginx"},
    }
    frozen_patch = copy.deepcopy(patch)
    patched = strategic_merge_patch(original, patch, Deployment)
    assert original == DEPLOYMENT
    assert patch == frozen_patch
    assert patched["metadata"] == {"name": "nginx"}
    patched["spec"]["template"]["spec"]["containers"][0]["image"] = "changed"
    assert original == DEPLOYMENT


# --- Strategic merge patch: $setElementOrder ---------------------------------------------------


def test_smp_set_element_order_reorders() -> None:
    original = pod(containers=[{"name": "1"}, {"name": "2", "image": "2"}])
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "4"}, {"name": "1"}, {"name": "2"}, {"name": "3"}],
            "containers": [{"name": "4", "image": "4"}, {"name": "3", "image": "3"}],
        }
    }
    patched = strategic_merge_patch(original, patch, Pod)
    assert patched["spec"]["containers"] == [
        {"name": "4", "image": "4"},
        {"name": "1"},
        {"name": "2", "image": "2"},
        {"name": "3", "image": "3"},
    ]


def test_smp_set_element_order_keeps_server_only_items() -> None:
    original = pod(containers=[{"name": "a"}, {"name": "server"}, {"name": "b"}])
    patch = {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}
    # Upstream's mergeSortedSlice: a server-only item goes before the next ordered item when it
    # came first in the live list.
    assert names(strategic_merge_patch(original, patch, Pod)["spec"]["containers"]) == ["server", "b", "a"]


def test_smp_set_element_order_with_items_not_in_list() -> None:
    """upstream: "$setElementOrder contains item that is not present in the list to be merged"."""
    original = pod(containers=[{"name": "1"}, {"name": "3"}])
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "3"}, {"name": "2"}, {"name": "1"}],
            "containers": [{"name": "3", "image": "3"}, {"name": "1", "image": "1"}],
        }
    }
    assert strategic_merge_patch(original, patch, Pod)["spec"]["containers"] == [
        {"name": "3", "image": "3"},
        {"name": "1", "image": "1"},
    ]
    ints = {"metadata": {"finalizers": ["1", "3"]}}
    only_order = {"metadata": {"$setElementOrder/finalizers": ["3", "2", "1"]}}
    assert strategic_merge_patch(ints, only_order, Pod)["metadata"]["finalizers"] == ["3", "1"]


def test_smp_set_element_order_with_replace_directive() -> None:
    original = pod(containers=[{"name": "a"}, {"name": "b"}])
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "d"}, {"name": "c"}],
            "containers": [{"$patch": "replace"}, {"name": "d"}, {"name": "c"}],
        }
    }
    assert names(strategic_merge_patch(original, patch, Pod)["spec"]["containers"]) == ["d", "c"]


def test_smp_set_element_order_for_absent_lists() -> None:
    patch = {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}
    assert strategic_merge_patch({"spec": {}}, patch, Pod) == {"spec": {}}
    patch["spec"]["containers"] = [{"name": "b"}, {"name": "a", "image": None}]
    assert strategic_merge_patch({"spec": {}}, patch, Pod) == {
        "spec": {"containers": [{"name": "b"}, {"name": "a"}]}
    }


# --- Strategic merge patch: errors -------------------------------------------------------------


@pytest.mark.parametrize(
    ("original", "patch", "message"),
    [
        (
            pod(containers=[{"name": "1"}]),
            {"spec": {"containers": [{"image": "b"}]}},
            "does not contain declared merge key: name",
        ),
        (
            pod(containers=[{"name": "1"}]),
            {"spec": {"containers": [{"$patch": "delete"}]}},
            "does not contain declared merge key: name",
        ),
        (
            pod(containers=[{"image": "no name"}]),
            {"spec": {"containers": [{"name": "a"}]}},
            "does not contain declared merge key: name",
        ),
        (
            pod(containers=[{"name": "1"}, {"name": "3"}, {"name": "2"}]),
            {
                "spec": {
                    "$setElementOrder/containers": [{"name": "1"}, {"name": "2"}, {"name": "3"}],
                    "containers": [{"name": "3", "image": "3"}, {"name": "1", "image": "1"}],
                }
            },
            "doesn't match $setElementOrder list",
        ),
        (
            {"metadata": {"finalizers": ["1", "3", "2"]}},
            {"metadata": {"$setElementOrder/finalizers": ["1", "2", "3"], "finalizers": ["3", "1"]}},
            "doesn't match $setElementOrder list",
        ),
        (
            pod(containers=[{"name": "1"}]),
            {"spec": {"$setElementOrder/containers": [{"image": "x"}], "containers": [{"name": "1"}]}},
            "does not contain declared merge key: name",
        ),
        (
            pod(containers=[{"name": "1"}]),
            {"spec": {"$setElementOrder/containers": {"name": "1"}}},
            "invalid patch format of setElementOrder list",
        ),
        (
            pod(containers=[]),
            {"spec": {"$setElementOrder": []}},
            "invalid patch format of setElementOrder list",
        ),
        (
            pod(containers=[{"name": "1"}]),
            {"spec": {"$setElementOrder/containers": [{"name": "1"}], "containers": ["1"]}},
            "expected a map",
        ),
        (
            pod(containers=[{"name": "1"}]),
            {"spec": {"$setElementOrder/containers": ["1"], "containers": [{"name": "1"}]}},
            "expected a map",
        ),
        (
            pod(containers=[{"name": "1"}]),
            {"spec": {"$setElementOrder/containers": [{"image": "1"}]}},
            "does not contain declared merge key: name",
        ),
        (
            pod(containers=[]),
            {"spec": {"$setElementOrderX/containers": []}},
            "invalid patch format of setElementOrder list",
        ),
        (
            pod(containers=[{"name": "1"}]),
            {"spec": {"$setElementOrder/containers": [{"name": "1"}], "containers": None}},
            "expected a list for containers",
        ),
        (
            {"metadata": {"finalizers": ["a"]}},
            {"metadata": {"$deleteFromPrimitiveList": ["a"]}},
            "invalid patch format of primitive list",
        ),
        (
            {"metadata": {"finalizers": ["a"]}},
            {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
            "invalid patch format of primitive list",
        ),
        (
            {"metadata": {"finalizers": "a"}},
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
            "expected a list for finalizers",
        ),
        (
            {"metadata": {"labels": {}}},
            {"metadata": {"labels": {"$patch": "frob"}}},
            "unknown patch type: frob",
        ),
        (
            pod(containers=[{"name": "1"}]),
            {"spec": {"containers": [{"name": "1", "$patch": "frob"}]}},
            "unknown patch type: frob",
        ),
        (
            pod(containers=[{"name": "1"}]),
            {"spec": {"containers": [{"name": "1", "$patch": "merge"}]}},
            "merging lists cannot yet be specified in the patch",
        ),
        ({"metadata": {"labels": {}}}, {"metadata": {"$patch": "merge"}}, "unknown patch type: merge"),
        (
            pod(volumes=[{"name": "v"}]),
            {"spec": {"volumes": [{"name": "v", "$retainKeys": "name"}]}},
            "invalid patch format of retainKeys",
        ),
        (
            pod(volumes=[{"name": "v"}]),
            {"spec": {"volumes": [{"name": "v", "$retainKeys": ["name"], "emptyDir": {}}]}},
            "invalid patch format of retainKeys",
        ),
        ({"metadata": {"finalizers": [["a"]]}}, {"metadata": {"finalizers": ["b"]}}, "lists of lists"),
        ({"metadata": {"finalizers": ["a"]}}, {"metadata": {"finalizers": [1]}}, "not identical"),
        (pod(containers=[{"name": "a"}]), {"spec": {"containers": ["a"]}}, "not identical"),
    ],
)
def test_smp_errors(original: dict[str, Any], patch: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError) as error:
        strategic_merge_patch(original, patch, Pod)
    assert message in str(error.value)


def test_smp_merge_strategy_without_merge_key_on_maps() -> None:
    class Item(BaseModel):
        things: list[dict[str, Any]] | None = Field(None, json_schema_extra=patch_strategy("merge"))

    with pytest.raises(PatchError, match="cannot merge lists without merge key"):
        strategic_merge_patch({"things": [{"a": 1}]}, {"things": [{"a": 2}]}, Item)
    with pytest.raises(PatchError, match="without a merge key"):
        strategic_merge_patch({"things": [{"a": 1}]}, {"$setElementOrder/things": [{"a": 1}]}, Item)


def test_smp_merges_lists_of_other_json_values() -> None:
    class Item(BaseModel):
        flags: list[Any] | None = Field(None, json_schema_extra=patch_strategy("merge"))
        keyed: list[dict[str, Any]] | None = Field(None, json_schema_extra=merge_key("id"))

    assert strategic_merge_patch({"flags": [True]}, {"flags": [False, True]}, Item) == {
        "flags": [False, True]
    }
    assert strategic_merge_patch({"flags": [None]}, {"flags": [None]}, Item) == {"flags": [None]}
    with pytest.raises(PatchError, match="not identical"):
        strategic_merge_patch({"flags": [True]}, {"flags": [1]}, Item)
    original = {"keyed": [{"id": {"a": 1}, "v": 1}, {"id": {"a": 2}}]}
    patched = strategic_merge_patch(original, {"keyed": [{"id": {"a": 1}, "v": 2}]}, Item)
    assert patched == {"keyed": [{"id": {"a": 1}, "v": 2}, {"id": {"a": 2}}]}


def test_smp_refuses_non_objects() -> None:
    with pytest.raises(PatchError):
        strategic_merge_patch({}, [], Pod)  # type: ignore[arg-type]
    with pytest.raises(PatchError):
        strategic_merge_patch(None, {}, Pod)  # type: ignore[arg-type]


# --- Model metadata ----------------------------------------------------------------------------


def test_field_metadata_is_read_from_the_model_and_cached() -> None:
    fields = model_fields(PodSpec)
    assert set(fields) >= {"containers", "initContainers", "volumes", "nodeSelector", "affinity"}
    assert (fields["containers"].strategy, fields["containers"].merge_key) == ("merge", "name")
    assert fields["containers"].type.item is not None and fields["containers"].type.item.model is Container
    assert (fields["volumes"].strategy, fields["volumes"].retain_keys) == ("merge", True)
    assert fields["affinity"].strategy == "replace"
    assert fields["nodeSelector"].type.kind == "map"
    assert model_fields(PodSpec) is fields
    assert model_fields.cache_info().hits > 0


def test_aliases_are_wire_names() -> None:
    class Aliased(ApiModel):
        pod_cidrs: list[str] | None = Field(None, alias="podCIDRs", json_schema_extra=patch_strategy("merge"))

    assert "podCIDRs" in model_fields(Aliased)
    # New items go first, as upstream orders them.
    assert strategic_merge_patch({"podCIDRs": ["a"]}, {"podCIDRs": ["b"]}, Aliased) == {
        "podCIDRs": ["b", "a"]
    }


def test_describe_annotations() -> None:
    assert describe(Annotated[list[Container] | None, "doc"]).kind == "list"
    assert describe(int | str).kind == "scalar"
    assert describe(Literal["a"]).kind == "scalar"
    assert describe(Any).kind == "any"
    assert describe(str | Container | None).model is Container
    assert describe(dict[str, Container]).item == describe(Container)
    assert describe(dict).kind == "map"
    assert describe(list).kind == "list"
    assert describe(tuple[int, ...]).item == describe(int)


# --- apply_patch -------------------------------------------------------------------------------


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def test_apply_patch_dispatches_by_content_type() -> None:
    merge = apply_patch(DEPLOYMENT, MERGE_PATCH, body({"spec": {"replicas": 1}}), Deployment)
    assert merge["spec"]["replicas"] == 1
    strategic = apply_patch(
        DEPLOYMENT, STRATEGIC_MERGE_PATCH + "; charset=utf-8", body(KUBECTL_APPLY_PATCH), Deployment
    )
    assert strategic["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.16"
    ops = [{"op": "replace", "path": "/spec/replicas", "value": 7}]
    assert apply_patch(DEPLOYMENT, JSON_PATCH, body(ops), Deployment)["spec"]["replicas"] == 7
    assert DEPLOYMENT["spec"]["replicas"] == 3


def test_apply_patch_merge_patch_replaces_lists_where_strategic_merges() -> None:
    patch = body({"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "s"}]}}}})
    merged = apply_patch(DEPLOYMENT, MERGE_PATCH, patch, Deployment)
    assert names(merged["spec"]["template"]["spec"]["containers"]) == ["side"]
    strategic = apply_patch(DEPLOYMENT, STRATEGIC_MERGE_PATCH, patch, Deployment)
    assert names(strategic["spec"]["template"]["spec"]["containers"]) == ["side", "nginx"]


def test_apply_patch_unsupported_type() -> None:
    with pytest.raises(UnsupportedPatchType) as error:
        apply_patch(DEPLOYMENT, "application/json", b"{}", Deployment)
    assert error.value.code == 415
    assert error.value.reason == "UnsupportedMediaType"
    assert "application/strategic-merge-patch+json" in str(error.value)
    assert isinstance(error.value, PatchError)


@pytest.mark.parametrize("patch_type", [MERGE_PATCH, STRATEGIC_MERGE_PATCH, JSON_PATCH])
def test_apply_patch_bad_json(patch_type: str) -> None:
    with pytest.raises(PatchError, match="Expecting") as error:
        apply_patch(DEPLOYMENT, patch_type, b"{not json", Deployment)
    assert error.value.code == 400


@pytest.mark.parametrize("patch_type", [MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH])
def test_apply_patch_needs_an_object(patch_type: str) -> None:
    with pytest.raises(PatchError, match="must be a JSON object"):
        apply_patch(DEPLOYMENT, patch_type, b"[1, 2]", Deployment)


def test_apply_patch_json_patch_errors() -> None:
    with pytest.raises(PatchError, match="array of operations"):
        apply_patch(DEPLOYMENT, JSON_PATCH, b'{"op": "add"}', Deployment)
    with pytest.raises(PatchError, match="not a JSON object"):
        apply_patch(DEPLOYMENT, JSON_PATCH, body([{"op": "replace", "path": "", "value": []}]), Deployment)


def test_apply_patch_none_original_is_empty() -> None:
    assert apply_patch(None, MERGE_PATCH, b'{"a": {"b": null, "c": 1}}', None) == {"a": {"c": 1}}


APPLIED_YAML = b"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
  annotations:
    built: 2026-01-02T03:04:05Z
    empty: null
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
      - name: side
        image: busybox
"""


def test_server_side_apply_creates() -> None:
    created = apply_patch(None, APPLY_PATCH, APPLIED_YAML, Deployment)
    assert created["metadata"] == {"name": "nginx", "annotations": {"built": "2026-01-02T03:04:05Z"}}
    assert names(created["spec"]["template"]["spec"]["containers"]) == ["nginx", "side"]
    assert created["spec"]["replicas"] == 2


def test_server_side_apply_updates() -> None:
    updated = apply_patch(DEPLOYMENT, APPLY_PATCH, APPLIED_YAML, Deployment)
    containers = updated["spec"]["template"]["spec"]["containers"]
    assert names(containers) == ["nginx", "side"]
    assert containers[0]["image"] == "nginx:1.25"
    assert containers[0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert updated["spec"]["selector"] == DEPLOYMENT["spec"]["selector"]
    assert updated["metadata"]["labels"] == {"app": "nginx"}


def test_server_side_apply_accepts_json_and_converts_yaml_keys() -> None:
    assert apply_patch(None, APPLY_PATCH, body({"a": 1}), None) == {"a": 1}
    assert apply_patch(None, APPLY_PATCH, b"a:\n  2: x\n  true: y\n  null: z\n  1.5: w\n", None) == {
        "a": {"2": "x", "true": "y", "null": "z", "1.5": "w"}
    }


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"a: [1, 2\n", "error converting YAML to JSON"),
        (b"a: 1\n---\nb: 2\n", "error converting YAML to JSON"),
        (b"a: !!binary aGVsbG8=\n", "unsupported value"),
        (b"? [1, 2]\n: x\n", "error converting YAML to JSON"),
        (b"- 1\n", "must be a JSON object"),
        (b"? !!binary aGk=\n: x\n", "unsupported map key"),
    ],
)
def test_server_side_apply_errors(payload: bytes, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply_patch(DEPLOYMENT, APPLY_PATCH, payload, Deployment)


# --- With the real API types -------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_deployment() -> type[BaseModel]:
    apps_v1 = pytest.importorskip("machinery.api.apps_v1")
    return apps_v1.Deployment


def test_real_deployment_kubectl_apply(real_deployment: type[BaseModel]) -> None:
    patched = apply_patch(DEPLOYMENT, STRATEGIC_MERGE_PATCH, body(KUBECTL_APPLY_PATCH), real_deployment)
    assert patched["spec"]["template"]["spec"]["containers"] == [
        {**DEPLOYMENT["spec"]["template"]["spec"]["containers"][0], "image": "nginx:1.16"}
    ]
    real_deployment.model_validate(patched)


def test_real_deployment_rollout_restart_and_scale(real_deployment: type[BaseModel]) -> None:
    restarted = apply_patch(DEPLOYMENT, STRATEGIC_MERGE_PATCH, body(KUBECTL_RESTART_PATCH), real_deployment)
    assert "kubectl.kubernetes.io/restartedAt" in restarted["spec"]["template"]["metadata"]["annotations"]
    scaled = apply_patch(restarted, MERGE_PATCH, body({"spec": {"replicas": 0}}), real_deployment)
    assert scaled["spec"]["replicas"] == 0
    real_deployment.model_validate(scaled)


def test_real_deployment_merges_env_ports_and_conditions(real_deployment: type[BaseModel]) -> None:
    original = copy.deepcopy(DEPLOYMENT)
    original["status"] = {"conditions": [{"type": "Available", "status": "False"}]}
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "nginx",
                            "env": [{"name": "B", "value": "2"}],
                            "ports": [{"containerPort": 80, "name": "http"}],
                        }
                    ]
                }
            }
        },
        "status": {"conditions": [{"type": "Progressing", "status": "True"}]},
    }
    patched = strategic_merge_patch(original, patch, real_deployment)
    container = patched["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP", "name": "http"}]
    assert [c["type"] for c in patched["status"]["conditions"]] == ["Progressing", "Available"]
    real_deployment.model_validate(patched)


def test_real_deployment_rollout_undo(real_deployment: type[BaseModel]) -> None:
    template = copy.deepcopy(DEPLOYMENT["spec"]["template"])
    template["spec"]["containers"][0]["image"] = "nginx:1.13"
    ops = [
        {"op": "replace", "path": "/spec/template", "value": template},
        {
            "op": "replace",
            "path": "/metadata/annotations",
            "value": {"deployment.kubernetes.io/revision": "1"},
        },
    ]
    undone = apply_patch(DEPLOYMENT, JSON_PATCH, body(ops), real_deployment)
    assert undone["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.13"
    real_deployment.model_validate(undone)
