"""machinery/managedfields: fieldsV1 encoding, field sets of typed values, comparison, the apply
merge, Update and Apply ownership, conflicts (upstream structured-merge-diff's fieldpath, typed and
merge tests, in small)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from machinery import managedfields as mf
from machinery.api.apps_v1 import Deployment
from machinery.api.core_v1 import ConfigMap, Pod, Service
from machinery.managedfields.typed import compare, merge, remove, to_set

DEPLOY = mf.from_model(Deployment)
POD = mf.from_model(Pod)


def deployment(replicas: int = 1, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": labels or None},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx",
                                                           "ports": [{"containerPort": 80}]}]}}}}


def test_fields_v1_round_trip_and_strings() -> None:
    paths = {("f:spec", "f:replicas"), ("f:spec", "f:containers", 'k:{"name":"c"}'),
             ("f:spec", "f:containers", 'k:{"name":"c"}', "f:image"), ("f:metadata", "f:finalizers", 'v:"x"'),
             ("f:spec", "f:args", "i:0")}
    encoded = mf.encode_fields(paths)
    assert encoded["f:spec"]["f:containers"]['k:{"name":"c"}'] == {".": {}, "f:image": {}}
    assert list(encoded["f:spec"]) == ["f:args", "f:containers", "f:replicas"]
    assert mf.decode_fields(encoded) == paths
    assert mf.path_string(("f:spec", "f:containers", 'k:{"name":"c"}', "f:image")) == \
        '.spec.containers[name="c"].image'
    assert mf.path_string(("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}')) == \
        '.spec.ports[port=80,protocol="TCP"]'
    assert mf.path_string(("f:metadata", "f:finalizers", 'v:"x"')) == '.metadata.finalizers[="x"]'
    assert mf.path_string(("f:spec", "f:args", "i:3")) == ".spec.args[3]"


@pytest.mark.parametrize("bad", [[], {"x:y": {}}, {"f:a": []}, {"k:{not json": {}}])
def test_decode_refuses_what_is_no_fields_v1(bad: Any) -> None:
    with pytest.raises(ValueError):
        mf.decode_fields(bad)


def test_to_set_uses_list_types_from_the_models() -> None:
    pod = {"metadata": {"labels": {"a": "1"}, "finalizers": ["f"]},
           "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "E", "value": "v"}],
                                    "ports": [{"containerPort": 80, "protocol": "UDP"}], "args": ["x"]}],
                    "tolerations": [{"key": "k"}], "nodeSelector": {}}}
    got = to_set(pod, POD)
    c = ("f:spec", "f:containers", 'k:{"name":"c"}')
    assert {
        ("f:metadata", "f:labels", "f:a"), ("f:metadata", "f:finalizers", 'v:"f"'),
        c, (*c, "f:name"), (*c, "f:image"), (*c, "f:args"),
        (*c, "f:env", 'k:{"name":"E"}'), (*c, "f:env", 'k:{"name":"E"}', "f:value"),
        (*c, "f:ports", 'k:{"containerPort":80,"protocol":"UDP"}'),
        ("f:spec", "f:tolerations"),  # atomic: no merge key
        ("f:spec", "f:nodeSelector"),  # an empty map is a leaf
    } <= got
    assert ("f:spec",) not in got and ("f:spec", "f:containers") not in got
    svc = {"spec": {"ports": [{"port": 80}]}}
    assert ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}') in to_set(svc, mf.from_model(Service))


def test_compare_and_merge() -> None:
    old = deployment(1, a="1")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    new["metadata"]["annotations"] = {"n": "v"}
    new["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    del new["metadata"]["labels"]
    added, modified, removed = compare(old, new, DEPLOY)
    side = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"side"}')
    assert modified == {("f:spec", "f:replicas")}
    assert {("f:metadata", "f:annotations"), ("f:metadata", "f:annotations", "f:n"), side, (*side, "f:image")} <= added
    assert removed == {("f:metadata", "f:labels"), ("f:metadata", "f:labels", "f:a")}
    # associative lists merge by key, keeping the live order; atomic values are replaced
    live = {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}],
                                           "tolerations": [{"key": "x"}]}}}}
    config = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "3"}, {"name": "a", "args": ["z"]}],
                                             "tolerations": [{"key": "y"}]}}}}
    got = merge(live, config, DEPLOY)["spec"]["template"]["spec"]
    assert got["containers"] == [{"name": "a", "image": "1", "args": ["z"]}, {"name": "b", "image": "2"},
                                 {"name": "c", "image": "3"}]
    assert got["tolerations"] == [{"key": "y"}]
    pruned = remove(live, {("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"a"}')}, DEPLOY)
    assert pruned["spec"]["template"]["spec"]["containers"] == [{"name": "b", "image": "2"}]


def test_apply_conflicts_force_and_prune() -> None:
    obj, entries = mf.apply({}, deployment(2, tier="web"), [], "alice", "apps/v1", "", DEPLOY, False, "t1")
    assert [(e.manager, e.operation, e.time) for e in entries] == [("alice", "Apply", "t1")]
    scale = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 5}}
    with pytest.raises(mf.Conflicts) as e:
        mf.apply(obj, scale, entries, "bob", "apps/v1", "", DEPLOY, False, "t2")
    assert str(e.value) == 'Apply failed with 1 conflict: conflict with "alice": .spec.replicas'
    assert e.value.conflicts[0].field == ".spec.replicas"
    obj, entries = mf.apply(obj, scale, entries, "bob", "apps/v1", "", DEPLOY, True, "t2")
    assert obj["spec"]["replicas"] == 5 and obj["metadata"]["name"] == "d"
    by = {e.manager: e for e in entries}
    assert ("f:spec", "f:replicas") not in by["alice"].fields
    # alice no longer applies the tier label and replicas: the label goes, replicas stay bob's
    config = deployment(2)
    del config["spec"]["replicas"]
    obj, entries = mf.apply(obj, config, entries, "alice", "apps/v1", "", DEPLOY, False, "t3")
    assert obj["metadata"].get("labels") in (None, {}) and obj["spec"]["replicas"] == 5
    # applying the same again changes nothing (the same object back)
    again, same = mf.apply(obj, config, entries, "alice", "apps/v1", "", DEPLOY, False, "t4")
    assert again is obj and same is entries


def test_update_takes_what_it_changes_and_keeps_one_entry_per_manager() -> None:
    obj, entries = mf.apply({}, deployment(2), [], "alice", "apps/v1", "", DEPLOY, False, "t1")
    new = copy.deepcopy(obj)
    new["spec"]["replicas"] = 3
    entries = mf.update(obj, new, entries, "hpa", "apps/v1", "", DEPLOY, "t2")
    by = {e.manager: e for e in entries}
    assert by["hpa"].fields == {("f:spec", "f:replicas")}
    assert ("f:spec", "f:replicas") not in by["alice"].fields
    for n in range(3):
        newer = copy.deepcopy(new)
        newer["status"] = {"replicas": n + 1}
        entries = mf.update(new, newer, entries, "kcm", "apps/v1", "status", DEPLOY, "t3")
        new = newer
    status = [e for e in entries if e.subresource == "status"]
    assert len(status) == 1 and status[0].fields == {("f:status", "f:replicas")}
    assert mf.update(new, copy.deepcopy(new), entries, "x", "apps/v1", "", DEPLOY, "t4") is entries
    wire = mf.encode_entries(entries)
    assert [w["operation"] for w in wire] == ["Apply", "Update", "Update"]
    assert wire[-1]["subresource"] == "status" and wire[-1]["fieldsType"] == "FieldsV1"
    assert [(e.manager, e.fields) for e in mf.decode_entries(wire)] == [(e.manager, e.fields) for e in
                                                                       sorted(entries, key=lambda e: e.operation)]


def test_custom_resource_schema() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "kind"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                              "kind": {"type": "string", "default": "A"}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "raw": {"type": "object", "x-kubernetes-map-type": "atomic"},
        "args": {"type": "array", "items": {"type": "string"}}}}}}
    node = mf.from_openapi(schema)
    got = to_set({"metadata": {"labels": {"l": "1"}},
                  "spec": {"items": [{"name": "n"}], "tags": ["t"], "raw": {"a": 1}, "args": ["x"]}}, node)
    assert got == {("f:metadata", "f:labels", "f:l"), ("f:spec", "f:items", 'k:{"kind":"A","name":"n"}'),
                   ("f:spec", "f:items", 'k:{"kind":"A","name":"n"}', "f:name"), ("f:spec", "f:tags", 'v:"t"'),
                   ("f:spec", "f:raw"), ("f:spec", "f:args")}


def test_config_map_data_is_granular() -> None:
    node = mf.from_model(ConfigMap)
    _, entries = mf.apply({}, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                               "data": {"a": "1", "b": "2"}}, [], "m", "v1", "", node, False, "t")
    assert mf.encode_entries(entries)[0]["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}


@pytest.mark.parametrize("obj", [
    deployment(2, a="1"),
    {"metadata": {"name": "p", "labels": {"x": "y"}, "finalizers": ["a", "b"], "annotations": {}},
     "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "E"}], "args": ["x"],
                              "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}],
                              "resources": {"requests": {"cpu": "1"}}}],
              "nodeSelector": {}, "tolerations": [{"key": "k"}], "volumes": []}},
])
def test_created_equals_the_update_from_nothing(obj: dict[str, Any]) -> None:
    node = POD if "containers" in obj.get("spec", {}) else DEPLOY
    slow = mf.encode_entries(mf.update({}, obj, [], "m", "v1", "", node, "t"))
    fast = mf.created(obj, "m", "v1", node, "t")
    assert fast == slow
    assert json_order(fast) == json_order(slow)


def json_order(value: Any) -> str:
    import json
    return json.dumps(value)  # key order too
