"""The JavaScript client, @kubernetes/client-node (pinned in tests/js/package-lock.json, installed by
hack/setup.sh), against a secure minik8s (every admission plugin, x509 admin from its kubeconfig).
tests/js/client_test.mjs runs the steps a user of the client runs in a namespace of its own — typed CoreV1Api
calls, merge, strategic-merge and JSON patches, a replace and a stale one, server-side apply and discovery
through the generic KubernetesObjectApi, a watch from a list's resourceVersion, an informer — and prints what
each step saw as one JSON line; this module judges each line, so a failure names the step. Refusals must
arrive as the client's own ApiException with upstream's Status in its body. tests/js/pod_test.mjs does the same
with a pod on a real kubelet (Docker): its log once and followed, exec and port-forward over the client's
websockets."""

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
from tests.node_process import KubeletProcess, cleanup, ensure_images, free_pod_cidrs


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


def run_script(node: str, script: str, *args: str) -> dict[str, dict[str, Any]]:
    """Each step's line from one run of tests/js/SCRIPT; a step that threw fails the test, naming it."""
    run = subprocess.run([node, str(JS_DIR / script), *args], capture_output=True, text=True, timeout=240,
                         cwd=JS_DIR)
    lines: dict[str, dict[str, Any]] = {}
    for line in run.stdout.splitlines():
        record = json.loads(line)
        lines[record.pop("step")] = record
    failed = {name: r["threw"] for name, r in lines.items() if "threw" in r}
    assert run.returncode == 0 and not failed, (
        f"{script} exited {run.returncode}; failed steps: {json.dumps(failed, indent=1)}\n"
        f"steps done: {list(lines)}\nstderr: {run.stderr[-3000:]}")
    return lines


@pytest.fixture(scope="module")
def steps(node: str, secure: SecureApiServer) -> dict[str, dict[str, Any]]:
    return run_script(node, "client_test.mjs", str(secure.kubeconfig("admin")), f"jsclient-{uuid.uuid4().hex[:6]}")


@pytest.fixture(scope="module")
def kubelet(secure: SecureApiServer, workdir: Path) -> Iterator[KubeletProcess]:
    """A real kubelet (Docker) on this module's apiserver; skipped without a Docker engine, as the other
    modules' kubelets."""
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine to run a kubelet's pods: {e}")
    ensure_images()
    kubelet = secure.kubelet(workdir, f"js-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
    try:
        with secure.client("admin", timeout=30) as api:
            kubelet.start(api, timeout=60)
        yield kubelet
    finally:
        cleanup([kubelet])
        with secure.client("admin", timeout=30) as api:
            api.delete(f"/api/v1/nodes/{kubelet.node}")


@pytest.fixture(scope="module")
def pod_steps(node: str, secure: SecureApiServer, kubelet: KubeletProcess) -> dict[str, dict[str, Any]]:
    return run_script(node, "pod_test.mjs", str(secure.kubeconfig("admin")), f"jspod-{uuid.uuid4().hex[:6]}",
                      kubelet.node)


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


def test_pod_logs_once_and_followed(pod_steps: dict[str, dict[str, Any]]) -> None:
    made = pod_steps["createPod"]
    assert made["phase"] == "Pending" and made["serviceAccountName"] == "default"
    assert "Running" in pod_steps["running"]["phases"]
    assert pod_steps["log"]["text"] == "hello-from-js\nsecond line\n"
    followed = pod_steps["logFollow"]
    assert followed["text"] == "second line\n" and followed["stillOpen"]  # tailLines=1, open while it runs
    refused = pod_steps["logRefused"]
    assert refused["refused"] and refused["apiException"] and refused["code"] == 400


def test_exec_over_the_clients_websocket(pod_steps: dict[str, dict[str, Any]]) -> None:
    failed = pod_steps["exec"]
    assert failed["protocol"] == "v5.channel.k8s.io"  # the newest the client offers, as kubectl 1.30+
    assert (failed["stdout"], failed["stderr"]) == ("out\n", "err\n")
    # the Status on the error channel, worded as containerd's CRI (Go's [a b c] for the argv)
    assert failed["status"] == {
        "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
        "message": "command terminated with non-zero exit code: error executing command "
                   "[sh -c echo out; echo err >&2; exit 3], exit code 3",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}
    ok = pod_steps["execOk"]
    assert ok["stdout"] == "fine\n" and ok["status"] == {"metadata": {}, "status": "Success"}
    # stdin, ended by the v5 protocol's close of stream 0: the command sees its end and exits
    piped = pod_steps["execStdin"]
    assert piped["stdout"] == "FROM STDIN\n" and piped["status"]["status"] == "Success"


def test_port_forward_over_the_clients_websocket(pod_steps: dict[str, dict[str, Any]]) -> None:
    forwarded = pod_steps["portForward"]
    assert (forwarded["status"], forwarded["text"]) == (200, "served-in-the-pod\n")
    assert forwarded["protocols"] == ["v4.channel.k8s.io"]  # port-forward speaks v4, the client offers v5 first


def test_pod_deletion_is_graceful_and_watched(pod_steps: dict[str, dict[str, Any]]) -> None:
    deleted = pod_steps["deletePod"]
    assert deleted["kind"] == "Pod" and deleted["deletionTimestamp"] and deleted["gracePeriod"] == 1
    assert deleted["lastTypes"] == ["DELETED"]
    assert list(pod_steps["cleanup"]) == ["deleted"]
