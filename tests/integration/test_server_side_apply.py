"""Server-side apply with managedFields against the session's real apiserver and etcd (upstream:
k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager, test/integration/apiserver/apply): two managers
conflict with upstream's message and causes, force takes ownership, fields a manager stops applying
are removed, Update operations are recorded per manager, kubectl 1.27 and 1.33 (`apply
--server-side`, `--force-conflicts`, the move from client-side apply, `diff`), a CRD's list-map-keys,
the official Python client, dry runs, and bad input answered with upstream's Status."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster import ApiServer, wait_for
from tests.integration.test_crd import delete_crd, established
from tests.kubectl import Kubectl, find_kubectl, kubectl_dir

APPLY = {"content-type": "application/apply-patch+yaml"}
VERSIONS = ("1.27", "1.33")


def deployment(name: str, replicas: int = 1, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name, **labels}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                                           "ports": [{"containerPort": 80}]}]}}}}


def apply(api: httpx.Client, path: str, obj: dict[str, Any], manager: str, **params: str) -> httpx.Response:
    return api.patch(path, content=json.dumps(obj), headers=APPLY, params={"fieldManager": manager, **params})


def managers(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields") or []}


def test_conflicts_force_and_removal(api: httpx.Client, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    r = apply(api, path, deployment("web", 2, tier="front"), "alice")
    assert r.status_code == 201, r.text
    entry = managers(r.json())[("alice", "Apply", "")]
    assert entry["f:spec"]["f:replicas"] == {}
    assert entry["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"web"}']["f:ports"] == {
        'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}
    # the same value is no conflict: both own it
    same = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}}
    assert apply(api, path, same, "carol").status_code == 200
    # another value is
    other = {**same, "spec": {"replicas": 3}}
    r = apply(api, path, other, "bob")
    assert r.status_code == 409, r.text
    status = r.json()
    assert status["reason"] == "Conflict"
    assert status["message"] == ('Apply failed with 2 conflicts: conflicts with "alice":\n- .spec.replicas\n'
                                 'conflicts with "carol":\n- .spec.replicas')
    assert status["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alice"', "field": ".spec.replicas"},
        {"reason": "FieldManagerConflict", "message": 'conflict with "carol"', "field": ".spec.replicas"}]
    carol_less = {**same, "metadata": {"name": "web", "annotations": {"owner": "carol"}}, "spec": {}}
    assert apply(api, path, carol_less, "carol").status_code == 200
    r = apply(api, path, other, "bob")
    assert r.status_code == 409 and r.json()["message"] == (
        'Apply failed with 1 conflict: conflict with "alice": .spec.replicas')
    r = apply(api, path, other, "bob", force="true")
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["spec"]["replicas"] == 3
    owners = managers(got)
    assert "f:replicas" not in owners[("alice", "Apply", "")]["f:spec"]
    assert owners[("bob", "Apply", "")] == {"f:spec": {"f:replicas": {}}}
    # alice stops applying the tier label: removed, as nobody else owns it; replicas stay (bob's)
    r = apply(api, path, deployment("web", 3), "alice")
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["labels"] == {"app": "web"}
    assert r.json()["spec"]["replicas"] == 3
    # an Update operation (a PUT by a controller) takes what it changed; its entry is one per manager
    obj = r.json()
    obj["spec"]["replicas"] = 5
    r = api.put(path, json=obj, headers={"user-agent": "kube-controller-manager/v1.30.0 (linux/amd64)"})
    assert r.status_code == 200, r.text
    owners = managers(r.json())
    assert owners[("kube-controller-manager", "Update", "")] == {"f:spec": {"f:replicas": {}}}
    assert ("bob", "Apply", "") not in owners  # it owned nothing else: its entry is gone
    for replicas in (1, 2, 3):
        status = {**r.json(), "status": {"replicas": replicas, "observedGeneration": 1}}
        r = api.put(path + "/status", json=status, params={"fieldManager": "kcm"})
        assert r.status_code == 200, r.text
    entries = r.json()["metadata"]["managedFields"]
    status_entries = [e for e in entries if e.get("subresource") == "status"]
    assert [(e["manager"], e["operation"]) for e in status_entries] == [("kcm", "Update")]
    assert status_entries[0]["fieldsV1"] == {"f:status": {"f:observedGeneration": {}, "f:replicas": {}}}
    assert all(e["fieldsType"] == "FieldsV1" and e["apiVersion"] == "apps/v1" and e["time"] for e in entries)


def test_dry_run_leaves_etcd_untouched(api: httpx.Client, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/dry"
    r = apply(api, path, deployment("dry"), "alice", dryRun="All")
    assert r.status_code == 201 and r.json()["metadata"]["managedFields"][0]["manager"] == "alice"
    assert api.get(path).status_code == 404
    before = apply(api, path, deployment("dry"), "alice").json()
    r = apply(api, path, deployment("dry", 4), "bob", dryRun="All", force="true")
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 4
    after = api.get(path).json()
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["metadata"]["managedFields"] == before["metadata"]["managedFields"]


@pytest.mark.parametrize(("body", "params", "code", "message"), [
    ("{}", {}, 422, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for '
                    "apply patch"),
    ('{"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}', {"fieldManager": "m"}, 400,
     "the kind in the data (ConfigMap) does not match the expected kind (Deployment)"),
    ('{"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "cm"}}', {"fieldManager": "m"}, 400,
     "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1"),
    ('{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "other"}}', {"fieldManager": "m"}, 400,
     "the name of the object (other) does not match the name on the URL (bad)"),
    ('{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad", "managedFields": []}}',
     {"fieldManager": "m"}, 400, "metadata.managedFields must be nil"),
    ("apiVersion: apps/v1\nkind: [Deployment\n", {"fieldManager": "m"}, 400, "error converting YAML to JSON"),
    ('{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad"}, "spec": {"template": {"spec": '
     '{"containers": [{"name": "c", "image": "i"}, {"name": "c", "image": "j"}]}}}}', {"fieldManager": "m"}, 500,
     "failed to create typed patch object (/bad; apps/v1, Kind=Deployment): .spec.template.spec.containers: "
     'duplicate entries for key [name="c"]'),
    ("{}", {"fieldManager": "x" * 129}, 422,
     'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes'),
])
def test_bad_apply(api: httpx.Client, namespace: str, body: str, params: dict[str, str], code: int,
                   message: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/bad"
    r = api.patch(path, content=body, headers=APPLY, params=params)
    assert r.status_code == code, r.text
    assert r.json()["message"].startswith(message), r.json()
    assert api.get(path).status_code == 404  # nothing half-written


def test_force_only_for_apply(api: httpx.Client, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/f"
    assert apply(api, path, deployment("f"), "alice").status_code == 201
    r = api.patch(path, json={"spec": {"replicas": 2}}, params={"force": "true"},
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 422
    assert r.json()["message"] == ('PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be '
                                   "specified for non-apply patch")


def item_crd(group: str) -> dict[str, Any]:
    items = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
             "items": {"type": "object", "required": ["name"],
                       "properties": {"name": {"type": "string"}, "size": {"type": "integer"}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"shelves.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "shelves", "singular": "shelf", "kind": "Shelf", "listKind": "ShelfList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                       "spec": {"type": "object", "properties": {
                                           "items": items, "tags": {"type": "array", "items": {"type": "string"}},
                                           "color": {"type": "string"}}}}}}}]}}


@pytest.fixture
def shelves(api: httpx.Client) -> Iterator[str]:
    group = f"s{uuid.uuid4().hex[:8]}.example.com"
    r = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=item_crd(group))
    assert r.status_code == 201, r.text
    wait_for(lambda: established(api, f"shelves.{group}"), 20, what="Established")
    yield group
    delete_crd(api, f"shelves.{group}")


def test_custom_resource_list_map_keys(api: httpx.Client, namespace: str, shelves: str) -> None:
    path = f"/apis/{shelves}/v1/namespaces/{namespace}/shelves/s"
    wait_for(lambda: api.get(f"/apis/{shelves}/v1/namespaces/{namespace}/shelves").status_code == 200, 20,
             what="served")

    def shelf(spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": f"{shelves}/v1", "kind": "Shelf", "metadata": {"name": "s"}, "spec": spec}

    r = apply(api, path, shelf({"items": [{"name": "a", "size": 1}], "tags": ["x"]}), "alice")
    assert r.status_code == 201, r.text
    r = apply(api, path, shelf({"items": [{"name": "b", "size": 2}], "tags": ["y"]}), "bob")
    assert r.status_code == 409  # tags is atomic (no list-type): a conflict; items merge by name
    assert r.json()["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alice"', "field": ".spec.tags"}]
    r = apply(api, path, shelf({"items": [{"name": "b", "size": 2}]}), "bob")
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["items"] == [{"name": "a", "size": 1}, {"name": "b", "size": 2}]
    assert managers(r.json())[("bob", "Apply", "")] == {
        "f:spec": {"f:items": {'k:{"name":"b"}': {".": {}, "f:name": {}, "f:size": {}}}}}
    r = apply(api, path, shelf({"items": [{"name": "a", "size": 5}]}), "bob")
    assert r.status_code == 409 and r.json()["message"] == (
        'Apply failed with 1 conflict: conflict with "alice": .spec.items[name="a"].size')
    r = apply(api, path, shelf({"tags": ["x"]}), "alice")  # alice drops her item
    assert r.status_code == 200, r.text
    assert r.json()["spec"] == {"items": [{"name": "b", "size": 2}], "tags": ["x"]}


@pytest.fixture(params=VERSIONS, ids=[f"kubectl{v}" for v in VERSIONS])
def kubectl(request: pytest.FixtureRequest, tmp_path: Path) -> Kubectl:
    version: str = request.param
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed (looked next to `kubectl` in {kubectl_dir()} and on PATH)")
    apiserver: ApiServer = request.getfixturevalue("apiserver")
    namespace: str = request.getfixturevalue("namespace")
    return Kubectl(binary, version, apiserver.url, tmp_path / f"kubectl-{version}", namespace)


def write(tmp_path: Path, obj: dict[str, Any], name: str = "obj.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj))
    return str(path)


@pytest.mark.kubectl
def test_kubectl_conflicts_migration_and_diff(kubectl: Kubectl, api: httpx.Client, namespace: str,
                                              tmp_path: Path) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/app"
    # client-side apply first: kubectl-client-side-apply's Update entry and the last-applied annotation
    kubectl.run("apply", "-f", write(tmp_path, deployment("app", 2, tier="front", team="a"))).ok()
    got = api.get(path).json()
    assert ("kubectl-client-side-apply", "Update", "") in managers(got)
    # server-side apply without the team label: kubectl moves the client-side fields to its Apply entry,
    # so the label it no longer applies is removed
    out = kubectl.run("apply", "--server-side", "-f", write(tmp_path, deployment("app", 2, tier="front"))).ok()
    assert "serverside-applied" in out.stdout
    got = api.get(path).json()
    assert got["metadata"]["labels"] == {"app": "app", "tier": "front"}
    owners = managers(got)
    assert ("kubectl", "Apply", "") in owners and ("kubectl-client-side-apply", "Update", "") not in owners
    # another manager conflicts, and wins with --force-conflicts
    scaled = deployment("app", 4, tier="front")
    r = kubectl.run("apply", "--server-side", "--field-manager=scaler", "-f", write(tmp_path, scaled, "s.yaml"))
    assert r.returncode != 0
    assert 'conflict with "kubectl": .spec.replicas' in r.stderr, r.stderr
    assert "--force-conflicts" in r.stderr  # kubectl's advice on how to go on
    kubectl.run("apply", "--server-side", "--field-manager=scaler", "--force-conflicts", "-f",
                write(tmp_path, scaled, "s.yaml")).ok()
    got = api.get(path).json()
    assert got["spec"]["replicas"] == 4
    assert managers(got)[("scaler", "Apply", "")]["f:spec"]["f:replicas"] == {}
    # kubectl diff --server-side: a dry-run apply; exit 1 with the change, nothing written
    rv = got["metadata"]["resourceVersion"]
    r = kubectl.run("diff", "--server-side", "--field-manager=scaler", "--force-conflicts", "-f",
                    write(tmp_path, deployment("app", 6, tier="front"), "s.yaml"))
    assert r.returncode == 1, r
    assert "-  replicas: 4" in r.stdout and "+  replicas: 6" in r.stdout
    assert api.get(path).json()["metadata"]["resourceVersion"] == rv
    # managedFields are hidden by kubectl get -o yaml unless asked for
    assert "managedFields" not in kubectl.run("get", "deployment", "app", "-o", "yaml").ok().stdout
    assert "managedFields" in kubectl.run("get", "deployment", "app", "-o", "yaml", "--show-managed-fields").ok().stdout
    # kubectl create (protobuf from kubectl 1.32 on) and kubectl label: their own managers' Update entries
    kubectl.run("create", "deployment", "made", "--image=nginx:1.25").ok()
    kubectl.run("label", "deployment", "made", "extra=yes").ok()
    owners = managers(api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/made").json())
    assert set(owners) == {("kubectl-create", "Update", ""), ("kubectl-label", "Update", "")}
    assert owners[("kubectl-label", "Update", "")] == {"f:metadata": {"f:labels": {"f:extra": {}}}}
    assert owners[("kubectl-create", "Update", "")]["f:spec"]["f:template"]["f:spec"]["f:containers"][
        'k:{"name":"nginx"}']["f:image"] == {}


@pytest.mark.kubectl
def test_kubectl_diff_custom_resource(kubectl: Kubectl, api: httpx.Client, namespace: str, shelves: str,
                                      tmp_path: Path) -> None:
    wait_for(lambda: api.get(f"/apis/{shelves}/v1/namespaces/{namespace}/shelves").status_code == 200, 20,
             what="served")
    shelf = {"apiVersion": f"{shelves}/v1", "kind": "Shelf", "metadata": {"name": "k"},
             "spec": {"color": "red", "items": [{"name": "a", "size": 1}]}}
    assert "serverside-applied" in kubectl.run("apply", "--server-side", "-f", write(tmp_path, shelf)).ok().stdout
    shelf["spec"]["color"] = "blue"
    r = kubectl.run("diff", "--server-side", "-f", write(tmp_path, shelf))
    assert r.returncode == 1, r
    assert "-  color: red" in r.stdout and "+  color: blue" in r.stdout
    r = kubectl.run("diff", "-f", write(tmp_path, shelf))  # client-side diff: a dry-run merge patch
    assert r.returncode == 1 and "+  color: blue" in r.stdout, r
    got = api.get(f"/apis/{shelves}/v1/namespaces/{namespace}/shelves/k").json()
    assert got["spec"]["color"] == "red"


def test_python_client_apply(apiserver: ApiServer, namespace: str) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    config = kubernetes.client.Configuration()
    config.host = apiserver.url
    with kubernetes.client.ApiClient(config) as client:
        core = kubernetes.client.CoreV1Api(client)
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py"}, "data": {"a": "1"}}
        cm = core.patch_namespaced_config_map("py", namespace, body, field_manager="py-apply",
                                              _content_type="application/apply-patch+yaml")
        assert cm.data == {"a": "1"}
        assert [(e.manager, e.operation) for e in cm.metadata.managed_fields] == [("py-apply", "Apply")]
        assert cm.metadata.managed_fields[0].fields_v1 == {"f:data": {"f:a": {}}}
        with pytest.raises(kubernetes.client.ApiException) as e:
            core.patch_namespaced_config_map("py", namespace, {**body, "data": {"a": "2"}}, field_manager="other",
                                             _content_type="application/apply-patch+yaml")
        assert e.value.status == 409
        assert json.loads(e.value.body)["message"] == (
            'Apply failed with 1 conflict: conflict with "py-apply": .data.a')
        cm = core.patch_namespaced_config_map("py", namespace, {**body, "data": {"a": "2"}}, field_manager="other",
                                              force=True, _content_type="application/apply-patch+yaml")
        assert cm.data == {"a": "2"}
        # an Update by the client (no fieldManager): the User-Agent's product names it
        cm.data["b"] = "3"
        cm = core.replace_namespaced_config_map("py", namespace, cm)
        assert ("OpenAPI-Generator", "Update") in [(e.manager, e.operation) for e in cm.metadata.managed_fields]
