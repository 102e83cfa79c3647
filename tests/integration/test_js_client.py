"""The JavaScript client, @kubernetes/client-node (pinned in tests/js/package-lock.json, installed by
hack/setup.sh), against a secure minik8s (every admission plugin, x509 admin from its kubeconfig).
tests/js/client_test.mjs runs the steps a user of the client runs in a namespace of its own — typed CoreV1Api
calls, merge, strategic-merge and JSON patches, a replace and a stale one, server-side apply and discovery
through the generic KubernetesObjectApi, a watch from a list's resourceVersion, an informer — and prints what
each step saw as one JSON line; this module judges each line, so a failure names the step. Refusals must
arrive as the client's own ApiException with upstream's Status in its body."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.auth_cluster import SecureApiServer
from tests.cluster import ALL_ADMISSION, Etcd
from tests.node_js import JS_DIR, modules_installed, node_binary

SCRIPT = JS_DIR / "client_test.mjs"


@pytest.fixture(scope="module")
def secure(workdir: Path, etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, etcd, *ALL_ADMISSION).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def node() -> str:
    """node, checked (with tests/js/node_modules) before an apiserver starts."""
    binary = node_binary()
    modules_installed()
    return binary


@pytest.fixture(scope="module")
def steps(node: str, secure: SecureApiServer) -> dict[str, dict[str, Any]]:
    """Each step's line from one run of the script; a step that threw is reported with the lines before it."""
    ns = f"jsclient-{uuid.uuid4().hex[:6]}"
    run = subprocess.run([node, str(SCRIPT), str(secure.kubeconfig("admin")), ns],
                         capture_output=True, text=True, timeout=180, cwd=JS_DIR)
    lines: dict[str, dict[str, Any]] = {}
    for line in run.stdout.splitlines():
        record = json.loads(line)
        lines[record.pop("step")] = record
    failed = {name: r["threw"] for name, r in lines.items() if "threw" in r}
    assert run.returncode == 0 and not failed, (
        f"client_test.mjs exited {run.returncode}; failed steps: {json.dumps(failed, indent=1)}\n"
        f"steps done: {list(lines)}\nstderr: {run.stderr[-3000:]}")
    return lines


def test_discovery_and_version(steps: dict[str, dict[str, Any]]) -> None:
    assert steps["version"]["gitVersion"].startswith("v1.")
    assert steps["discovery"] == {"groupVersion": "v1", "configmaps": {
        "kind": "ConfigMap", "namespaced": True,
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]}}


def test_create_get_and_list_by_label(steps: dict[str, dict[str, Any]]) -> None:
    made = steps["create"]
    assert made["name"] == "one" and made["labels"] == {"app": "js"} and made["data"] == {"k": "v"}
    assert made["kind"] == "ConfigMap" and made["apiVersion"] == "v1"
    assert made["uid"] and made["resourceVersion"]
    # no fieldManager given: upstream names the manager after the User-Agent's product (node-fetch/1.0 ...)
    assert made["managedFields"] == [{"manager": "node-fetch", "operation": "Update", "subresource": None}]
    got = steps["get"]
    assert (got["uid"], got["resourceVersion"], got["data"]) == (made["uid"], made["resourceVersion"], {"k": "v"})
    listed = steps["listByLabel"]
    assert listed["names"] == ["one"] and listed["resourceVersion"] and listed["kind"] == "ConfigMapList"


def test_patches_of_each_type_and_replace(steps: dict[str, dict[str, Any]]) -> None:
    assert steps["mergePatch"]["data"] == {"k": "v", "k2": "v2"}
    smp = steps["strategicMergePatch"]
    assert smp["data"] == {"k": "changed"} and smp["labels"] == {"tier": "b"}
    assert steps["jsonPatch"]["data"] == {"k2": "v2", "k3": "v3"}
    replaced = steps["replace"]
    assert replaced["data"] == {"only": "this"}
    assert int(replaced["resourceVersion"]) > int(replaced["previousResourceVersion"])
    stale = steps["staleReplace"]
    assert stale["refused"] and stale["apiException"] and stale["code"] == 409
    assert stale["status"]["reason"] == "Conflict" and stale["status"]["kind"] == "Status"
    assert stale["status"]["message"] == ('Operation cannot be fulfilled on configmaps "two": the object has been '
                                          'modified; please apply your changes to the latest version and try again')


def test_server_side_apply_and_generic_objects(steps: dict[str, dict[str, Any]]) -> None:
    applied = steps["serverSideApply"]
    assert applied["data"] == {"a": "1"}
    assert applied["managedFields"] == [{"manager": "js-client-test", "operation": "Apply", "subresource": None}]
    generic = steps["genericRead"]
    assert generic["kind"] == "Deployment" and generic["name"] == "web" and generic["replicas"] == 0
    assert generic["typedNames"] == ["web"]


def test_scale_subresource_owns_the_replicas_and_an_apply_conflicts(steps: dict[str, dict[str, Any]]) -> None:
    scaled = steps["scale"]
    assert scaled["scale"] == {"kind": "Scale", "apiVersion": "autoscaling/v1", "replicas": 2, "selector": "app=web"}
    assert scaled["replicas"] == 2
    # upstream's scale handler: the writer through /scale owns .spec.replicas, with subresource "scale"
    assert scaled["managedFields"] == [{"manager": "node-fetch", "operation": "Update", "subresource": "scale"},
                                       {"manager": "node-fetch", "operation": "Update", "subresource": None}]
    conflict = scaled["conflict"]
    assert conflict["refused"] and conflict["apiException"] and conflict["code"] == 409
    assert conflict["status"]["reason"] == "Conflict"
    assert conflict["status"]["message"] == ('Apply failed with 1 conflict: conflict with "node-fetch" with '
                                             'subresource "scale" using apps/v1: .spec.replicas')
    assert conflict["status"]["details"]["causes"] == [{
        "reason": "FieldManagerConflict", "field": ".spec.replicas",
        "message": 'conflict with "node-fetch" with subresource "scale" using apps/v1'}]


def test_delete_and_refusals_are_the_clients_errors(steps: dict[str, dict[str, Any]]) -> None:
    # upstream answers a delete of a ConfigMap (no graceful deletion) with a Status of Success
    deleted = steps["delete"]
    assert (deleted["kind"], deleted["status"]) == ("Status", "Success")
    assert deleted["details"] == {"name": "one", "kind": "configmaps", "uid": steps["create"]["uid"]}
    missing = steps["notFound"]
    assert missing["refused"] and missing["apiException"] and missing["code"] == 404
    assert missing["contentType"].startswith("application/json")
    assert {k: missing["status"][k] for k in ("kind", "apiVersion", "status", "reason", "code", "message")} == {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
        "message": 'configmaps "one" not found'}
    assert missing["status"]["details"] == {"name": "one", "kind": "configmaps"}
    exists = steps["alreadyExists"]
    assert exists["refused"] and exists["code"] == 409 and exists["status"]["reason"] == "AlreadyExists"
    assert exists["status"]["message"] == 'configmaps "two" already exists'
    invalid = steps["invalid"]
    assert invalid["refused"] and invalid["apiException"] and invalid["code"] == 422
    assert invalid["status"]["reason"] == "Invalid" and invalid["status"]["code"] == 422
    assert invalid["status"]["message"].startswith('ConfigMap "Not_A_Name" is invalid: metadata.name: Invalid value: '
                                                   '"Not_A_Name": a lowercase RFC 1123 subdomain must consist of')
    causes = invalid["status"]["details"]["causes"]
    assert [(c["reason"], c["field"]) for c in causes] == [("FieldValueInvalid", "metadata.name")]


def test_watch_sees_added_modified_deleted_in_order(steps: dict[str, dict[str, Any]]) -> None:
    watched = steps["watchEvents"]
    assert watched["closedEarly"] is None
    # every change after the list's resourceVersion, in order, each with the object as it was then
    assert [(e["type"], e["name"], e["data"]) for e in watched["events"]] == [
        ("MODIFIED", "one", {"k": "v", "k2": "v2"}),
        ("MODIFIED", "two", {"k": "changed"}),
        ("MODIFIED", "one", {"k2": "v2", "k3": "v3"}),
        ("MODIFIED", "two", {"only": "this"}),
        ("ADDED", "three", {"a": "1"}),
        ("DELETED", "one", {"k2": "v2", "k3": "v3"}),
        ("ADDED", "four", {"k": "4"}),
    ]
    versions = [int(e["resourceVersion"]) for e in watched["events"]]
    assert int(steps["watchStart"]["resourceVersion"]) < versions[0] and versions == sorted(set(versions))
    assert watched["events"][2]["resourceVersion"] == steps["jsonPatch"]["resourceVersion"]


def test_the_namespace_is_deleted_at_the_end(steps: dict[str, dict[str, Any]]) -> None:
    assert steps["cleanup"] == {"deleted": steps["createNamespace"]["name"]}


def test_informer_lists_then_follows(steps: dict[str, dict[str, Any]]) -> None:
    informed = steps["informer"]
    assert informed["informerError"] is None
    assert {"two", "three", "four"} <= set(informed["added"]) and "one" not in informed["added"]
    assert informed["updated"][-1] == "four" and informed["cachedData"] == {"k": "informed"}
    assert {"two", "three", "four"} <= set(informed["listed"])
