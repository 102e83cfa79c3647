"""CustomResourceDefinitions against a real apiserver on a real etcd: a CRD is served at once (discovery,
CRUD, list, watch, status and scale subresources, Tables from additionalPrinterColumns), its schema
prunes, defaults and validates (422 with upstream's paths and messages, CEL rules with self and
oldSelf), several versions share one storage, and a deleted CRD takes its objects with it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, wait_for
from tests.conftest import etcd_keys

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def widget_crd(group: str, *, scope: str = "Namespaced", versions: list[dict[str, Any]] | None = None,
               plural: str = "widgets", kind: str = "Widget", short_names: list[str] | None = None) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "x-kubernetes-validations": [
                    {"rule": "self.size <= self.maxSize", "message": "size may not exceed maxSize"},
                    {"rule": "!has(oldSelf.color) || self.color == oldSelf.color", "message": "color is immutable"},
                ],
                "properties": {
                    "size": {"type": "integer", "minimum": 1},
                    "maxSize": {"type": "integer", "default": 10},
                    "color": {"type": "string", "enum": ["red", "green", "blue"]},
                    "name": {"type": "string", "maxLength": 8, "pattern": "^[a-z]+$"},
                    "port": {"x-kubernetes-int-or-string": True},
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "replicas": {"type": "integer", "minimum": 0},
                },
            },
            "status": {
                "type": "object",
                "properties": {"phase": {"type": "string"}, "replicas": {"type": "integer"},
                               "selector": {"type": "string"}},
            },
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List",
                      "shortNames": short_names if short_names is not None else ["wd"], "categories": ["all"]},
            "versions": versions or [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                         "statusReplicasPath": ".status.replicas",
                                                         "labelSelectorPath": ".status.selector"}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }],
        },
    }


def established(api: httpx.Client, name: str) -> bool:
    r = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    conditions = {c["type"]: c["status"] for c in (r.json().get("status") or {}).get("conditions") or []}
    return conditions.get("Established") == "True"


def create_crd(api: httpx.Client, crd: dict[str, Any]) -> dict[str, Any]:
    r = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
    assert r.status_code == 201, r.text
    name = crd["metadata"]["name"]
    wait_for(lambda: established(api, name), 20, what=f"CRD {name} Established")
    group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
    version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
    wait_for(lambda: api.get(f"/apis/{group}/{version}/{plural}").status_code == 200, 20, what=f"{plural} served")
    return r.json()


def delete_crd(api: httpx.Client, name: str) -> None:
    api.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    wait_for(lambda: api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").status_code == 404,
             30, what=f"CRD {name} gone")


@pytest.fixture
def group() -> str:
    return f"t{uuid.uuid4().hex[:8]}.example.com"


@pytest.fixture
def widgets(api: httpx.Client, group: str) -> Iterator[str]:
    """A namespaced Widget CRD in a group of the test's own; its URL prefix."""
    crd = create_crd(api, widget_crd(group))
    yield f"/apis/{group}/v1"
    delete_crd(api, crd["metadata"]["name"])


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"kind": "Widget", "metadata": {"name": name}, "spec": {"size": 1, **spec}}


# -- the CRD itself -------------------------------------------------------------------------------

def test_crd_status_names_and_conditions(api: httpx.Client, widgets: str, group: str) -> None:
    crd = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}").json()
    conditions = {c["type"]: c for c in crd["status"]["conditions"]}
    assert conditions["NamesAccepted"]["status"] == "True"
    assert conditions["NamesAccepted"]["reason"] == "NoConflicts"
    assert conditions["Established"]["status"] == "True"
    assert conditions["Established"]["reason"] == "InitialNamesAccepted"
    accepted = crd["status"]["acceptedNames"]
    assert accepted["plural"] == "widgets" and accepted["kind"] == "Widget" and accepted["shortNames"] == ["wd"]
    assert crd["status"]["storedVersions"] == ["v1"]
    assert crd["spec"]["conversion"] == {"strategy": "None"}


def test_conflicting_plural_is_not_accepted(api: httpx.Client, widgets: str, group: str) -> None:
    other = widget_crd(group, plural="gizmos", kind="Widget", short_names=["gz"])  # kind taken by widgets
    other["spec"]["names"]["singular"] = "gizmo"
    r = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=other)
    assert r.status_code == 201, r.text
    try:
        def names_refused() -> bool:
            got = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.{group}").json()
            return any(c["type"] == "NamesAccepted" and c["status"] == "False"
                       for c in (got.get("status") or {}).get("conditions") or [])

        wait_for(names_refused, 20, what="NamesAccepted False")
        got = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.{group}").json()
        conditions = {c["type"]: c for c in got["status"]["conditions"]}
        assert conditions["NamesAccepted"]["reason"] == "KindConflict"
        assert conditions["NamesAccepted"]["message"] == '"Widget" is already in use'
        assert conditions["Established"]["status"] == "False"
        assert api.get(f"/apis/{group}/v1/gizmos").status_code == 404
    finally:
        delete_crd(api, f"gizmos.{group}")


@pytest.mark.parametrize("change, field, message", [
    (lambda c: c["metadata"].update(name="wrong.example.com"), "metadata.name",
     'Invalid value: "wrong.example.com": must be spec.names.plural+"."+spec.group'),
    (lambda c: c["spec"]["versions"].append({**c["spec"]["versions"][0], "name": "v2"}), "spec.versions",
     "must have exactly one version marked as storage version"),
    (lambda c: c["spec"]["versions"][0].update(storage=False), "spec.versions",
     "must have exactly one version marked as storage version"),
    (lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].update(
        loose={"description": "no type"}),
     "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[loose].type",
     "Required value: must not be empty for specified object fields"),
    (lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"].update(type="string"),
     "spec.versions[0].schema.openAPIV3Schema.type", 'Invalid value: "string": must be object at the root'),
    (lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].update(
        {"x-kubernetes-validations": [{"rule": "self.size >"}]}),
     "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule",
     "compilation failed"),
    (lambda c: c["spec"].update(group="example"), "spec.group",
     'Invalid value: "example": should be a domain with at least one dot'),
    (lambda c: c["spec"]["versions"][0].pop("schema"), "spec.versions[0].schema.openAPIV3Schema",
     "Required value: schemas are required"),
])
def test_bad_crds_are_refused(api: httpx.Client, group: str, change: Any, field: str, message: str) -> None:
    crd = widget_crd(group)
    change(crd)
    r = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
    assert r.status_code == 422, r.text
    status = r.json()
    assert status["reason"] == "Invalid"
    assert status["details"]["kind"] == "CustomResourceDefinition"
    causes = [c for c in status["details"]["causes"] if c["field"] == field]
    assert causes, status
    assert message in causes[0]["message"], causes
    assert api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
                   ).status_code == 404


# -- serving -----------------------------------------------------------------------------------------

def test_discovery_lists_the_new_group(api: httpx.Client, widgets: str, group: str) -> None:
    groups = {g["name"]: g for g in api.get("/apis").json()["groups"]}
    assert groups[group]["preferredVersion"] == {"groupVersion": f"{group}/v1", "version": "v1"}
    resources = {r["name"]: r for r in api.get(f"/apis/{group}/v1").json()["resources"]}
    assert resources["widgets"]["kind"] == "Widget"
    assert resources["widgets"]["namespaced"] is True
    assert resources["widgets"]["shortNames"] == ["wd"]
    assert resources["widgets"]["categories"] == ["all"]
    assert resources["widgets/status"]["verbs"] == ["get", "patch", "update"]
    assert resources["widgets/scale"]["kind"] == "Scale"
    assert api.get(f"/apis/{group}").json()["versions"] == [{"groupVersion": f"{group}/v1", "version": "v1"}]


def test_crud_is_stored_under_the_group(api: httpx.Client, etcd: Any, widgets: str, namespace: str) -> None:
    base = f"{widgets}/namespaces/{namespace}/widgets"
    r = api.post(base, json={"apiVersion": widgets.removeprefix("/apis/"), **widget("one", color="red")})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["spec"] == {"size": 1, "maxSize": 10, "color": "red"}  # defaulted
    assert created["metadata"]["generation"] == 1 and created["metadata"]["uid"]
    group = widgets.split("/")[2]
    keys = etcd_keys(etcd, f"/registry/{group}/widgets/{namespace}/")
    assert list(keys) == [f"/registry/{group}/widgets/{namespace}/one"]
    assert json.loads(keys[f"/registry/{group}/widgets/{namespace}/one"])["spec"]["color"] == "red"
    got = api.get(f"{base}/one").json()
    assert got["apiVersion"] == f"{group}/v1" and got["kind"] == "Widget"
    # merge patch and JSON patch; strategic merge is refused as upstream
    r = api.patch(f"{base}/one", content=json.dumps({"spec": {"size": 2}}),
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["spec"]["size"] == 2 and r.json()["metadata"]["generation"] == 2
    r = api.patch(f"{base}/one", content=json.dumps([{"op": "replace", "path": "/spec/size", "value": 3}]),
                  headers={"Content-Type": "application/json-patch+json"})
    assert r.status_code == 200 and r.json()["spec"]["size"] == 3
    r = api.patch(f"{base}/one", content=json.dumps({"spec": {"size": 4}}),
                  headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 415, r.text
    assert r.json()["reason"] == "UnsupportedMediaType"
    # list with a field selector, and a 404 in upstream's words
    api.post(base, json=widget("two"))
    listed = api.get(base, params={"fieldSelector": "metadata.name=two"}).json()
    assert listed["kind"] == "WidgetList" and [i["metadata"]["name"] for i in listed["items"]] == ["two"]
    r = api.get(f"{base}/missing")
    assert r.status_code == 404 and r.json()["message"] == f'widgets.{group} "missing" not found'
    assert api.delete(f"{base}/one").status_code == 200
    assert api.get(f"{base}/one").status_code == 404


def test_schema_errors_are_422_with_upstreams_paths(api: httpx.Client, widgets: str, namespace: str) -> None:
    base = f"{widgets}/namespaces/{namespace}/widgets"
    bad = {"kind": "Widget", "metadata": {"name": "bad"},
           "spec": {"size": "big", "color": "pink", "name": "toolongname", "tags": ["a", "a"]}}
    r = api.post(base, json=bad)
    assert r.status_code == 422, r.text
    status = r.json()
    group = widgets.split("/")[2]
    assert status["message"].startswith(f'Widget.{group} "bad" is invalid: [')
    causes = {c["field"]: c for c in status["details"]["causes"]}
    assert causes["spec.size"]["message"] == 'Invalid value: "string": spec.size in body must be of type integer: ' \
                                             '"string"' or "must be of type integer" in causes["spec.size"]["message"]
    assert causes["spec.color"]["reason"] == "FieldValueNotSupported"
    assert causes["spec.color"]["message"] == 'Unsupported value: "pink": supported values: "red", "green", "blue"'
    assert causes["spec.name"]["reason"] == "FieldValueTooLong"
    assert causes["spec.tags[1]"]["reason"] == "FieldValueDuplicate"
    r = api.post(base, json={"kind": "Widget", "metadata": {"name": "bad"}, "spec": {"size": 0}})
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0] == {
        "reason": "FieldValueInvalid", "field": "spec.size",
        "message": "Invalid value: 0: spec.size in body should be greater than or equal to 1"}
    r = api.post(base, json={"kind": "Widget", "metadata": {"name": "bad"}, "spec": {}})
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0]["field"] == "spec.size"
    assert r.json()["details"]["causes"][0]["reason"] == "FieldValueRequired"
    assert api.get(f"{base}/bad").status_code == 404


def test_pruning_and_field_validation(api: httpx.Client, widgets: str, namespace: str) -> None:
    base = f"{widgets}/namespaces/{namespace}/widgets"
    body = widget("pruned", port="http", extra={"anything": {"goes": 1}})
    body["spec"]["unknown"] = True
    body["topLevel"] = "x"
    r = api.post(base, json=body)
    assert r.status_code == 201, r.text
    assert "unknown" not in r.json()["spec"] and "topLevel" not in r.json()
    assert r.json()["spec"]["extra"] == {"anything": {"goes": 1}}  # x-kubernetes-preserve-unknown-fields
    assert r.json()["spec"]["port"] == "http"  # int-or-string
    assert 'unknown field \\"spec.unknown\\"' in r.headers.get("warning", "")
    body["metadata"]["name"] = "strict"
    r = api.post(base, json=body, params={"fieldValidation": "Strict"})
    assert r.status_code == 422
    assert any(c["field"] == "spec.unknown" and 'unknown field "spec.unknown"' in c["message"]
               for c in r.json()["details"]["causes"])


def test_cel_rules_with_self_and_old_self(api: httpx.Client, widgets: str, namespace: str) -> None:
    base = f"{widgets}/namespaces/{namespace}/widgets"
    r = api.post(base, json=widget("celled", size=11))
    assert r.status_code == 422, r.text
    cause = r.json()["details"]["causes"][0]
    assert cause == {"reason": "FieldValueInvalid", "field": "spec",
                     "message": 'Invalid value: "object": size may not exceed maxSize'}
    assert api.post(base, json=widget("celled", size=3, color="red")).status_code == 201
    r = api.patch(f"{base}/celled", content=json.dumps({"spec": {"color": "blue"}}),
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422, r.text
    assert r.json()["details"]["causes"][0]["message"] == 'Invalid value: "object": color is immutable'
    r = api.patch(f"{base}/celled", content=json.dumps({"spec": {"size": 5}}),
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


def test_status_subresource_is_separate(api: httpx.Client, widgets: str, namespace: str) -> None:
    base = f"{widgets}/namespaces/{namespace}/widgets"
    body = widget("st")
    body["status"] = {"phase": "Ignored"}
    created = api.post(base, json=body).json()
    assert "status" not in created  # status is the subresource's to write
    obj = api.get(f"{base}/st").json()
    obj["status"] = {"phase": "Ready"}
    r = api.put(f"{base}/st/status", json=obj)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == {"phase": "Ready"}
    assert r.json()["metadata"]["generation"] == 1  # status writes do not bump generation
    obj = r.json()
    obj["spec"]["size"] = 2
    obj["status"] = {"phase": "Overwritten"}
    r = api.put(f"{base}/st", json=obj)
    assert r.status_code == 200
    assert r.json()["status"] == {"phase": "Ready"} and r.json()["spec"]["size"] == 2


def test_scale_subresource(api: httpx.Client, widgets: str, namespace: str) -> None:
    base = f"{widgets}/namespaces/{namespace}/widgets"
    api.post(base, json=widget("sc", replicas=1))
    r = api.get(f"{base}/sc/scale")
    assert r.status_code == 200, r.text
    assert r.json()["kind"] == "Scale" and r.json()["spec"] == {"replicas": 1}
    r = api.patch(f"{base}/sc/scale", content=json.dumps({"spec": {"replicas": 4}}),
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["replicas"] == 4
    assert api.get(f"{base}/sc").json()["spec"]["replicas"] == 4


def test_table_from_printer_columns(api: httpx.Client, widgets: str, namespace: str) -> None:
    base = f"{widgets}/namespaces/{namespace}/widgets"
    api.post(base, json=widget("tb", size=7, color="green"))
    table = api.get(base, headers={"Accept": TABLE}).json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Color", "Phase", "Age"]
    assert [c["priority"] for c in table["columnDefinitions"]] == [0, 0, 0, 1, 0]
    cells = table["rows"][0]["cells"]
    assert cells[:4] == ["tb", 7, "green", None]
    assert cells[4].endswith("s")


def test_watch_sees_custom_objects(api: httpx.Client, apiserver: ApiServer, widgets: str, namespace: str) -> None:
    base = f"{widgets}/namespaces/{namespace}/widgets"
    rv = api.get(base).json()["metadata"]["resourceVersion"]
    with httpx.Client(base_url=apiserver.url, timeout=20) as watcher, \
            watcher.stream("GET", base, params={"watch": "true", "resourceVersion": rv}) as stream:
        api.post(base, json=widget("watched"))
        for line in stream.iter_lines():
            event = json.loads(line)
            if event["type"] == "ADDED":
                assert event["object"]["metadata"]["name"] == "watched"
                assert event["object"]["kind"] == "Widget"
                break


def test_cluster_scoped_and_two_versions(api: httpx.Client, group: str) -> None:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"size": {"type": "integer"}}}}}}
    crd = widget_crd(group, scope="Cluster", plural="gadgets", kind="Gadget", versions=[
        {"name": "v1beta1", "served": True, "storage": False, "schema": schema, "deprecated": True},
        {"name": "v1", "served": True, "storage": True, "schema": schema}])
    create_crd(api, crd)
    try:
        r = api.post(f"/apis/{group}/v1beta1/gadgets", json={"kind": "Gadget", "apiVersion": f"{group}/v1beta1",
                                                              "metadata": {"name": "g"}, "spec": {"size": 1}})
        assert r.status_code == 201, r.text
        assert r.json()["apiVersion"] == f"{group}/v1beta1"
        assert "namespace" not in r.json()["metadata"]
        got = api.get(f"/apis/{group}/v1/gadgets/g").json()
        assert got["apiVersion"] == f"{group}/v1" and got["spec"] == {"size": 1}
        old = api.get(f"/apis/{group}/v1beta1/gadgets").json()
        assert old["apiVersion"] == f"{group}/v1beta1" and old["items"][0]["apiVersion"] == f"{group}/v1beta1"
        assert api.get(f"/apis/{group}").json()["preferredVersion"]["version"] == "v1"
        r = api.get(f"/apis/{group}/v1beta1/gadgets/g")
        assert r.headers["warning"] == f'299 - "{group}/v1beta1 Gadget is deprecated"'
        assert "warning" not in api.get(f"/apis/{group}/v1/gadgets/g").headers
    finally:
        delete_crd(api, f"gadgets.{group}")


def test_deleting_the_crd_deletes_its_objects(api: httpx.Client, etcd: Any, group: str, namespace: str) -> None:
    crd = create_crd(api, widget_crd(group))
    base = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    for i in range(3):
        assert api.post(base, json=widget(f"w{i}")).status_code == 201
    r = api.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}")
    assert r.status_code == 200, r.text
    assert "customresourcecleanup.apiextensions.k8s.io" in r.json()["metadata"]["finalizers"]
    assert any(c["type"] == "Terminating" and c["status"] == "True" for c in r.json()["status"]["conditions"])
    wait_for(lambda: api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
                             ).status_code == 404, 30, what="CRD gone")
    assert etcd_keys(etcd, f"/registry/{group}/widgets/") == {}
    wait_for(lambda: api.get(base).status_code == 404, 20, what="widgets no longer served")
    assert group not in {g["name"] for g in api.get("/apis").json()["groups"]}


def test_a_starting_apiserver_is_ready_only_once_it_serves_the_crds(api: httpx.Client, workdir: Any, etcd: Any,
                                                                     widgets: str, namespace: str) -> None:
    assert api.post(f"{widgets}/namespaces/{namespace}/widgets", json=widget("early")).status_code == 201
    third = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
    third.start()  # returns once /readyz answers ok
    try:
        r = httpx.get(f"{third.url}{widgets}/namespaces/{namespace}/widgets/early", timeout=10)
        assert r.status_code == 200, r.text
    finally:
        third.stop()


def test_two_apiservers_both_serve_a_new_crd(api: httpx.Client, workdir: Any, etcd: Any, group: str,
                                             namespace: str) -> None:
    second = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
    second.start()
    try:
        with httpx.Client(base_url=second.url, timeout=10) as other:
            create_crd(api, widget_crd(group))
            wait_for(lambda: other.get(f"/apis/{group}/v1/widgets").status_code == 200, 20,
                     what="the second apiserver serving widgets")
            r = other.post(f"/apis/{group}/v1/namespaces/{namespace}/widgets", json=widget("via-second"))
            assert r.status_code == 201, r.text
            assert api.get(f"/apis/{group}/v1/namespaces/{namespace}/widgets/via-second").status_code == 200
            delete_crd(api, f"widgets.{group}")
            wait_for(lambda: other.get(f"/apis/{group}/v1/widgets").status_code == 404, 20,
                     what="the second apiserver no longer serving widgets")
    finally:
        second.stop()


def test_rbac_bootstrap_roles_do_not_cover_custom_resources(api: httpx.Client, widgets: str,
                                                            namespace: str) -> None:
    """As upstream: `edit` in a namespace writes ConfigMaps but not a CRD's objects until a role grants them
    (the caller impersonates a user, as kubectl --as does)."""
    group = widgets.split("/")[2]
    user = f"u-{uuid.uuid4().hex[:6]}"
    as_user = {"Impersonate-User": user}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": f"{user}-edit"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}
    assert api.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
                    json=binding).status_code == 201
    wait_for(lambda: api.post(f"/api/v1/namespaces/{namespace}/configmaps", headers=as_user,
                              json={"metadata": {"generateName": "cm-"}}).status_code == 201, 20,
             what="edit in effect")
    base = f"{widgets}/namespaces/{namespace}/widgets"
    r = api.post(base, headers=as_user, json=widget("denied"))
    assert r.status_code == 403, r.text
    assert r.json()["message"] == (f'widgets.{group} is forbidden: User "{user}" cannot create resource "widgets" '
                                   f'in API group "{group}" in the namespace "{namespace}"')
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": f"{user}-widgets"},
            "rules": [{"apiGroups": [group], "resources": ["widgets"], "verbs": ["create", "get"]}]}
    assert api.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", json=role).status_code == 201
    binding["metadata"]["name"] = f"{user}-widgets"
    binding["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{user}-widgets"}
    assert api.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
                    json=binding).status_code == 201
    wait_for(lambda: api.post(base, headers=as_user, json=widget("allowed")).status_code == 201, 20,
             what="the role on widgets in effect")


def test_a_terminating_crd_waits_for_its_objects_and_refuses_new_ones(api: httpx.Client, group: str,
                                                                      namespace: str) -> None:
    crd = create_crd(api, widget_crd(group))
    name = crd["metadata"]["name"]
    base = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    held = widget("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]  # nobody but the test removes it
    assert api.post(base, json=held).status_code == 201
    assert api.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").status_code == 200

    def terminating() -> dict[str, Any] | None:
        got = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").json()
        conditions = {c["type"]: c for c in got["status"]["conditions"]}
        found = conditions.get("Terminating")
        return found if found and found["reason"] == "InstanceDeletionInProgress" else None

    condition = wait_for(terminating, 20, what="Terminating: InstanceDeletionInProgress")
    assert isinstance(condition, dict) and condition["status"] == "True"
    wait_for(lambda: api.get(f"{base}/held").json()["metadata"].get("deletionTimestamp"), 20,
             what="the held object marked for deletion")
    r = api.post(base, json=widget("late"))
    assert r.status_code == 405, r.text
    assert r.json()["message"] == "create not allowed while custom resource definition is terminating"
    r = api.patch(f"{base}/held", content=json.dumps({"metadata": {"finalizers": None}}),
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    wait_for(lambda: api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").status_code == 404,
             30, what="the CRD gone once its last object went")


def test_selectable_fields_extend_field_selectors(api: httpx.Client, group: str, namespace: str) -> None:
    crd = widget_crd(group)
    crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.color"}]
    create_crd(api, crd)
    try:
        base = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
        for name, color in (("r", "red"), ("g", "green"), ("b", "blue")):
            assert api.post(base, json=widget(name, color=color)).status_code == 201
        listed = api.get(base, params={"fieldSelector": "spec.color=green"}).json()
        assert [i["metadata"]["name"] for i in listed["items"]] == ["g"]
        listed = api.get(base, params={"fieldSelector": "spec.color!=green", "resourceVersion": "0"}).json()
        assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["b", "r"]
        r = api.get(base, params={"fieldSelector": "spec.size=1"})
        assert r.status_code == 400, r.text
        bad = widget_crd(f"x{group}")
        bad["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.tags"}]
        r = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=bad)
        assert r.status_code == 422
        assert r.json()["details"]["causes"][0]["field"] == "spec.versions[0].selectableFields[0].jsonPath"
    finally:
        delete_crd(api, f"widgets.{group}")


def test_updating_the_crd_changes_what_is_served(api: httpx.Client, widgets: str, group: str,
                                                 namespace: str) -> None:
    base = f"{widgets}/namespaces/{namespace}/widgets"
    body = widget("before")
    body["spec"]["weight"] = 5
    assert "weight" not in api.post(base, json=body).json()["spec"]  # not in the schema yet: pruned
    url = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}"
    crd = api.get(url).json()
    version = crd["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["weight"] = {"type": "integer"}
    version["additionalPrinterColumns"] = [{"name": "Weight", "type": "integer", "jsonPath": ".spec.weight"}]
    r = api.put(url, json=crd)
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["generation"] == 2
    body["metadata"] = {"generateName": "after-"}
    kept: list[str] = []

    def weight_kept() -> bool:
        r = api.post(base, json=body)
        if r.status_code == 201 and r.json()["spec"].get("weight") == 5:
            kept.append(r.json()["metadata"]["name"])
            return True
        return False

    wait_for(weight_kept, 20, what="the new schema in effect")
    table = api.get(f"{base}/{kept[0]}", headers={"Accept": TABLE}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Weight"]
    assert table["rows"][0]["cells"] == [kept[0], 5]
    changed = api.get(url).json()
    changed["spec"]["scope"] = "Cluster"
    r = api.put(url, json=changed)
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0]["field"] == "spec.scope"


AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"


def test_aggregated_discovery_lists_custom_resources(api: httpx.Client, widgets: str, group: str) -> None:
    for wanted in (AGGREGATED_V2, AGGREGATED_V2BETA1):
        r = api.get("/apis", headers={"Accept": f"{wanted},application/json"})
        assert r.status_code == 200
        assert r.headers["content-type"] == wanted
        document = r.json()
        assert document["kind"] == "APIGroupDiscoveryList"
        assert document["apiVersion"] == "apidiscovery.k8s.io/" + wanted.split("v=")[1].split(";")[0]
        groups = {g["metadata"]["name"]: g for g in document["items"]}
        assert "apps" in groups and "" not in groups
        version = groups[group]["versions"][0]
        assert version["version"] == "v1" and version["freshness"] == "Current"
        widgets_entry = next(r for r in version["resources"] if r["resource"] == "widgets")
        assert widgets_entry["responseKind"] == {"group": group, "version": "v1", "kind": "Widget"}
        assert widgets_entry["scope"] == "Namespaced" and widgets_entry["shortNames"] == ["wd"]
        assert {s["subresource"] for s in widgets_entry["subresources"]} == {"status", "scale"}
    core = api.get("/api", headers={"Accept": AGGREGATED_V2}).json()
    assert [item["metadata"].get("name", "") for item in core["items"]] == [""]
    pods = next(r for r in core["items"][0]["versions"][0]["resources"] if r["resource"] == "pods")
    assert pods["shortNames"] == ["po"] and pods["categories"] == ["all"]
    plain = api.get("/apis", headers={"Accept": "application/json"})
    assert plain.json()["kind"] == "APIGroupList"


def test_aggregated_discovery_feature_gate(workdir: Any, etcd: Any) -> None:
    second = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0",
                       "--feature-gates", "AggregatedDiscoveryEndpoint=false")
    second.start()
    try:
        r = httpx.get(f"{second.url}/apis", headers={"Accept": f"{AGGREGATED_V2},application/json"})
        assert r.json()["kind"] == "APIGroupList"
    finally:
        second.stop()
