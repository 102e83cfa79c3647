"""Real kubectl binaries (1.27 and 1.33) against a real apiserver process on a real etcd:
apply (client- and server-side), get (tables, wide, yaml, json, watch), describe with events,
delete, scale, and the error messages kubectl formats from our Status objects.

Only the apiserver runs here (no controllers, scheduler or kubelets), so a Deployment gets no
ReplicaSets and pods stay Pending; a pod with no node is deleted at once."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster import REPO, ApiServer, wait_for
from tests.kubectl import Kubectl, find_kubectl, kubectl_dir
from tests.manifests import pod

pytestmark = pytest.mark.kubectl

# the oldest and the newest: 1.27 reads OpenAPI v2 (protobuf) and aggregated discovery v2beta1, 1.33 OpenAPI v3
# (fieldValidation=Strict) and discovery v2 as every version from 1.30 does (shared/KUBECTL-WIRE.md); 1.30 itself
# runs where its protocol changed (exec: test_kubectl_rollout, protobuf bodies: test_kubectl_protobuf)
VERSIONS = ("1.27", "1.33")
EXAMPLES = REPO / "examples"
DEPLOYMENT_YAML = EXAMPLES / "nginx-deployment.yaml"
POD_YAML = EXAMPLES / "pod.yaml"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@pytest.fixture(params=VERSIONS, ids=[f"kubectl{v}" for v in VERSIONS])
def kubectl(request: pytest.FixtureRequest, tmp_path: Path) -> Kubectl:
    """kubectl.<version> bound to the session's apiserver and this test's namespace (skips before either starts
    when the binary is missing)."""
    version: str = request.param
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed (looked next to `kubectl` in {kubectl_dir()} and on PATH)")
    apiserver: ApiServer = request.getfixturevalue("apiserver")
    namespace: str = request.getfixturevalue("namespace")
    return Kubectl(binary, version, apiserver.url, tmp_path / f"kubectl-{version}", namespace)


def deployments(namespace: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments"


def pods(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def manifest(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def write_manifest(path: Path, obj: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path


def table(stdout: str) -> tuple[list[str], list[dict[str, str]]]:
    """kubectl's column output as headers and rows (columns split on runs of 2+ spaces, as kubectl pads them)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines, "no output"
    headers = re.split(r"\s{2,}", lines[0].strip())
    rows = []
    for line in lines[1:]:
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(headers), f"row {line!r} does not fit headers {headers}"
        rows.append(dict(zip(headers, cells, strict=True)))
    return headers, rows


def apply_example_deployment(kubectl: Kubectl, namespace: str) -> None:
    r = kubectl.run("apply", "-f", str(DEPLOYMENT_YAML), "-n", namespace).ok()
    assert r.stdout.strip() == "deployment.apps/nginx-deployment created", r


def create_example_pod(api: httpx.Client, namespace: str) -> dict[str, Any]:
    r = api.post(pods(namespace), json=manifest(POD_YAML))
    assert r.status_code == 201, r.text
    return r.json()


# -- apply ---------------------------------------------------------------------------------------


def test_apply_created_unchanged_configured(kubectl: Kubectl, api: httpx.Client, namespace: str,
                                            tmp_path: Path) -> None:
    apply_example_deployment(kubectl, namespace)
    created = api.get(f"{deployments(namespace)}/nginx-deployment").json()
    assert created["spec"]["replicas"] == 3
    last_applied = json.loads(created["metadata"]["annotations"][LAST_APPLIED])
    assert last_applied["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.14.2"

    r = kubectl.run("apply", "-f", str(DEPLOYMENT_YAML), "-n", namespace).ok()
    assert r.stdout.strip() == "deployment.apps/nginx-deployment unchanged", r
    again = api.get(f"{deployments(namespace)}/nginx-deployment").json()
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"], "unchanged wrote anyway"

    changed = manifest(DEPLOYMENT_YAML)
    changed["spec"]["replicas"] = 4
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.16.1"
    r = kubectl.run("apply", "-f", str(write_manifest(tmp_path / "changed.yaml", changed)), "-n", namespace).ok()
    assert r.stdout.strip() == "deployment.apps/nginx-deployment configured", r

    updated = api.get(f"{deployments(namespace)}/nginx-deployment").json()
    assert updated["spec"]["replicas"] == 4
    container = updated["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx:1.16.1"
    assert container["name"] == "nginx" and container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert updated["metadata"]["generation"] == created["metadata"]["generation"] + 1
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    last_applied = json.loads(updated["metadata"]["annotations"][LAST_APPLIED])
    assert last_applied["spec"]["replicas"] == 4
    assert last_applied["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.16.1"


def test_apply_removes_a_field_dropped_from_the_manifest(kubectl: Kubectl, api: httpx.Client, namespace: str,
                                                          tmp_path: Path) -> None:
    with_env = manifest(DEPLOYMENT_YAML)
    with_env["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"},
                                                                     {"name": "B", "value": "2"}]
    path = write_manifest(tmp_path / "d.yaml", with_env)
    kubectl.run("apply", "-f", str(path), "-n", namespace).ok()
    del with_env["spec"]["template"]["spec"]["containers"][0]["env"][0]
    r = kubectl.run("apply", "-f", str(write_manifest(path, with_env)), "-n", namespace).ok()
    assert r.stdout.strip() == "deployment.apps/nginx-deployment configured", r
    container = api.get(f"{deployments(namespace)}/nginx-deployment").json()["spec"]["template"]["spec"][
        "containers"][0]
    assert container["env"] == [{"name": "B", "value": "2"}]


def test_apply_server_side(kubectl: Kubectl, api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    r = kubectl.run("apply", "--server-side", "-f", str(DEPLOYMENT_YAML), "-n", namespace).ok()
    assert r.stdout.strip() in ("deployment.apps/nginx-deployment serverside-applied",
                                "deployment.apps/nginx-deployment created"), r
    created = api.get(f"{deployments(namespace)}/nginx-deployment").json()
    assert created["spec"]["replicas"] == 3
    assert LAST_APPLIED not in (created["metadata"].get("annotations") or {})

    changed = manifest(DEPLOYMENT_YAML)
    changed["spec"]["replicas"] = 2
    path = write_manifest(tmp_path / "ssa.yaml", changed)
    r = kubectl.run("apply", "--server-side", "-f", str(path), "-n", namespace).ok()
    assert r.stdout.strip() == "deployment.apps/nginx-deployment serverside-applied", r
    updated = api.get(f"{deployments(namespace)}/nginx-deployment").json()
    assert updated["spec"]["replicas"] == 2
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]


# -- get -----------------------------------------------------------------------------------------


def test_get_deployment_table_and_wide(kubectl: Kubectl, namespace: str) -> None:
    apply_example_deployment(kubectl, namespace)

    headers, rows = table(kubectl.run("get", "deploy", "-n", namespace).ok().stdout)
    assert headers == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert len(rows) == 1
    row = rows[0]
    assert row["NAME"] == "nginx-deployment" and row["READY"] == "0/3"
    assert row["UP-TO-DATE"] == "0" and row["AVAILABLE"] == "0"
    assert re.fullmatch(r"\d+s", row["AGE"]), row

    headers, rows = table(kubectl.run("get", "deploy", "-o", "wide", "-n", namespace).ok().stdout)
    assert headers == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert rows[0]["CONTAINERS"] == "nginx" and rows[0]["IMAGES"] == "nginx:1.14.2"
    assert rows[0]["SELECTOR"] == "app=nginx"


def test_get_deployment_yaml_and_json(kubectl: Kubectl, namespace: str) -> None:
    apply_example_deployment(kubectl, namespace)

    as_yaml = yaml.safe_load(kubectl.run("get", "deploy", "nginx-deployment", "-o", "yaml", "-n", namespace)
                             .ok().stdout)
    assert as_yaml["apiVersion"] == "apps/v1" and as_yaml["kind"] == "Deployment"
    assert as_yaml["metadata"]["name"] == "nginx-deployment" and as_yaml["metadata"]["namespace"] == namespace
    assert as_yaml["spec"]["replicas"] == 3
    assert as_yaml["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.14.2"

    as_json = json.loads(kubectl.run("get", "deploy", "nginx-deployment", "-o", "json", "-n", namespace)
                         .ok().stdout)
    assert as_json == as_yaml

    listed = json.loads(kubectl.run("get", "deploy", "-o", "json", "-n", namespace).ok().stdout)
    assert listed["kind"] == "List" and [i["metadata"]["name"] for i in listed["items"]] == ["nginx-deployment"]
    assert listed["items"][0]["kind"] == "Deployment" and listed["items"][0]["apiVersion"] == "apps/v1"


def test_get_pods_table_and_wide(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    r = kubectl.run("apply", "-f", str(POD_YAML), "-n", namespace).ok()
    assert r.stdout.strip() == "pod/nginx created", r

    headers, rows = table(kubectl.run("get", "pods", "-n", namespace).ok().stdout)
    assert headers == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [(p["NAME"], p["READY"], p["STATUS"], p["RESTARTS"]) for p in rows] == [("nginx", "0/1", "Pending", "0")]

    headers, rows = table(kubectl.run("get", "pods", "-o", "wide", "-n", namespace).ok().stdout)
    assert headers[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert rows[0]["IP"] == "<none>" and rows[0]["NODE"] == "<none>"

    # as the scheduler and a kubelet would: bind the pod, then report an IP
    r = api.post(f"{pods(namespace)}/nginx/binding", json={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "nginx"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}})
    assert r.status_code == 201, r.text
    r = api.patch(f"{pods(namespace)}/nginx/status", json={"status": {"podIP": "10.244.1.7",
                                                                      "podIPs": [{"ip": "10.244.1.7"}]}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    _, rows = table(kubectl.run("get", "pods", "-o", "wide", "-n", namespace).ok().stdout)
    assert rows[0]["IP"] == "10.244.1.7" and rows[0]["NODE"] == "node-1"


def test_get_all(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    apply_example_deployment(kubectl, namespace)
    create_example_pod(api, namespace)
    out = kubectl.run("get", "all", "-n", namespace).ok().stdout
    assert re.search(r"^pod/nginx\s+0/1\s+Pending\s+0\s+", out, re.M), out
    assert re.search(r"^deployment\.apps/nginx-deployment\s+0/3\s+0\s+0\s+", out, re.M), out


def test_get_missing_is_not_found(kubectl: Kubectl, namespace: str) -> None:
    r = kubectl.run("get", "deploy", "nonexistent", "-n", namespace)
    assert r.returncode == 1, r
    assert r.stderr.strip() == 'Error from server (NotFound): deployments.apps "nonexistent" not found', r
    assert r.stdout == ""


def test_get_pods_watch(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    create_example_pod(api, namespace)
    with kubectl.watch("get", "pods", "-w", "-n", namespace) as watch:
        header = watch.wait_for_line(lambda line: line.startswith("NAME"), what="the header")
        assert re.split(r"\s{2,}", header.strip()) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        watch.wait_for_line(lambda line: re.match(r"nginx\s+0/1\s+Pending\s+0\s+", line) is not None,
                            what="the existing pod")
        r = api.post(pods(namespace), json=pod("second"))
        assert r.status_code == 201, r.text
        watch.wait_for_line(lambda line: re.match(r"second\s+0/1\s+Pending\s+0\s+\d+s$", line) is not None,
                            what="the new pod")


def test_get_deployment_watch_by_name(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    apply_example_deployment(kubectl, namespace)
    with kubectl.watch("get", "deploy", "nginx-deployment", "-w", "-n", namespace) as watch:
        watch.wait_for_line(lambda line: re.match(r"nginx-deployment\s+0/3\s", line) is not None,
                            what="the deployment")
        r = api.patch(f"{deployments(namespace)}/nginx-deployment", json={"spec": {"replicas": 7}},
                      headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
        watch.wait_for_line(lambda line: re.match(r"nginx-deployment\s+0/7\s", line) is not None,
                            what="the change to 7 replicas")


# -- describe ------------------------------------------------------------------------------------


def fields(stdout: str) -> dict[str, str]:
    """Top-level `Key:  value` lines of describe's output."""
    out = {}
    for line in stdout.splitlines():
        if m := re.match(r"^([A-Z][\w -]*):\s*(.*)$", line):
            out[m.group(1)] = m.group(2).strip()
    return out


def test_describe_deployment(kubectl: Kubectl, namespace: str) -> None:
    apply_example_deployment(kubectl, namespace)
    out = kubectl.run("describe", "deployment", "nginx-deployment", "-n", namespace).ok().stdout
    described = fields(out)
    assert described["Name"] == "nginx-deployment"
    assert described["Namespace"] == namespace
    assert described["Labels"] == "app=nginx"
    assert described["Selector"] == "app=nginx"
    assert described["Replicas"] == "3 desired | 0 updated | 0 total | 0 available | 0 unavailable"
    assert described["StrategyType"] == "RollingUpdate"
    assert described["RollingUpdateStrategy"] == "25% max unavailable, 25% max surge"
    assert re.search(r"^\s+Image:\s+nginx:1\.14\.2$", out, re.M), out
    assert described["Events"] == "<none>"


def test_describe_pod_shows_its_events(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    created = create_example_pod(api, namespace)
    out = kubectl.run("describe", "pod", "nginx", "-n", namespace).ok().stdout
    described = fields(out)
    assert described["Name"] == "nginx" and described["Namespace"] == namespace
    assert described["Labels"] == "<none>" and described["Status"] == "Pending"
    assert described["Events"] == "<none>"

    event = {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "nginx.scheduled"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "nginx", "namespace": namespace,
                           "uid": created["metadata"]["uid"]},
        "reason": "Scheduled", "message": f"Successfully assigned {namespace}/nginx to node-1", "type": "Normal",
        "source": {"component": "default-scheduler"}, "count": 1,
        "firstTimestamp": created["metadata"]["creationTimestamp"],
        "lastTimestamp": created["metadata"]["creationTimestamp"],
    }
    r = api.post(f"/api/v1/namespaces/{namespace}/events", json=event)
    assert r.status_code == 201, r.text
    # an event about another pod of the same name (other uid) must not show
    r = api.post(f"/api/v1/namespaces/{namespace}/events", json={
        **event, "metadata": {"name": "nginx.other"}, "reason": "Other", "message": "about an older pod",
        "involvedObject": {**event["involvedObject"], "uid": "00000000-0000-0000-0000-000000000000"}})
    assert r.status_code == 201, r.text

    out = kubectl.run("describe", "pod", "nginx", "-n", namespace).ok().stdout
    events = out[out.index("\nEvents:"):]
    assert re.search(r"^\s+Type\s+Reason\s+Age\s+From\s+Message$", events, re.M), out
    assert re.search(rf"^\s+Normal\s+Scheduled\s+\S+\s+default-scheduler\s+Successfully assigned "
                     rf"{namespace}/nginx to node-1$", events, re.M), out
    assert "about an older pod" not in events


def test_get_events_sorted(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    """`--sort-by` makes kubectl ask for full objects in the Table rows (includeObject=Object)."""
    created = create_example_pod(api, namespace)
    for i, reason in enumerate(("Scheduled", "Pulling", "Pulled")):
        at = f"2026-01-01T00:00:0{3 - i}Z"  # the later the step, the earlier its timestamp
        r = api.post(f"/api/v1/namespaces/{namespace}/events", json={
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"nginx.{i}"},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "nginx", "namespace": namespace,
                               "uid": created["metadata"]["uid"]},
            "reason": reason, "message": f"step {i}", "type": "Normal", "source": {"component": "kubelet"},
            "count": 1, "firstTimestamp": at, "lastTimestamp": at})
        assert r.status_code == 201, r.text
    headers, rows = table(kubectl.run("get", "events", "--sort-by=.lastTimestamp", "-n", namespace).ok().stdout)
    assert headers == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert [(e["REASON"], e["OBJECT"], e["MESSAGE"]) for e in rows] == [
        ("Pulled", "pod/nginx", "step 2"), ("Pulling", "pod/nginx", "step 1"), ("Scheduled", "pod/nginx", "step 0")]


# -- delete, scale -------------------------------------------------------------------------------


def test_delete_deployment(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    apply_example_deployment(kubectl, namespace)
    r = kubectl.run("delete", "deployment", "nginx-deployment", "-n", namespace).ok()
    assert r.stdout.strip() == 'deployment.apps "nginx-deployment" deleted', r
    assert api.get(f"{deployments(namespace)}/nginx-deployment").status_code == 404

    r = kubectl.run("delete", "deployment", "nginx-deployment", "-n", namespace)
    assert r.returncode == 1, r
    assert r.stderr.strip() == 'Error from server (NotFound): deployments.apps "nginx-deployment" not found', r


def test_delete_pod_from_file(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    kubectl.run("apply", "-f", str(POD_YAML), "-n", namespace).ok()
    r = kubectl.run("delete", "-f", str(POD_YAML), "-n", namespace, timeout=30).ok()
    assert r.stdout.strip() == 'pod "nginx" deleted', r
    assert api.get(f"{pods(namespace)}/nginx").status_code == 404


def test_delete_bound_pod_waits_for_the_kubelet(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    """A pod on a node is deleted gracefully: kubectl watches it until the kubelet (here: the test) removes it."""
    create_example_pod(api, namespace)
    r = api.post(f"{pods(namespace)}/nginx/binding", json={"apiVersion": "v1", "kind": "Binding",
                                                           "metadata": {"name": "nginx"},
                                                           "target": {"kind": "Node", "name": "node-1"}})
    assert r.status_code == 201, r.text
    argv = kubectl.argv("delete", "pod", "nginx", "-n", namespace)
    with kubectl.watch("delete", "pod", "nginx", "-n", namespace) as deleting:
        wait_for(lambda: api.get(f"{pods(namespace)}/nginx").json()["metadata"].get("deletionTimestamp"),
                 timeout=20, what="the pod to be marked for deletion")
        assert deleting.proc.poll() is None, f"{argv} did not wait\n{deleting.output()}"
        _, rows = table(kubectl.run("get", "pods", "-n", namespace).ok().stdout)
        assert [(p["NAME"], p["STATUS"]) for p in rows] == [("nginx", "Terminating")]
        # the kubelet's last word: delete with grace period 0 once the containers are gone
        r = api.delete(f"{pods(namespace)}/nginx", params={"gracePeriodSeconds": "0"})
        assert r.status_code == 200, r.text
        deleting.wait_for_line(lambda line: line == 'pod "nginx" deleted', what="the deleted message")
        assert deleting.proc.wait(20) == 0, deleting.output()


def test_scale(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    apply_example_deployment(kubectl, namespace)
    r = kubectl.run("scale", "deploy", "nginx-deployment", "--replicas=5", "-n", namespace).ok()
    assert r.stdout.strip() == "deployment.apps/nginx-deployment scaled", r
    assert api.get(f"{deployments(namespace)}/nginx-deployment").json()["spec"]["replicas"] == 5

    r = kubectl.run("scale", "deploy", "nginx-deployment", "--replicas=2", "--current-replicas=4", "-n", namespace)
    assert r.returncode == 1, r
    assert "Expected replicas to be 4, was 5" in r.stderr, r
    assert api.get(f"{deployments(namespace)}/nginx-deployment").json()["spec"]["replicas"] == 5


# -- errors --------------------------------------------------------------------------------------


def test_apply_invalid_replicas(kubectl: Kubectl, api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    bad = manifest(DEPLOYMENT_YAML)
    bad["metadata"]["name"] = "x"
    bad["spec"]["replicas"] = -1
    r = kubectl.run("apply", "-f", str(write_manifest(tmp_path / "bad.yaml", bad)), "-n", namespace)
    assert r.returncode == 1, r
    assert r.stderr.strip() == ('The Deployment "x" is invalid: spec.replicas: Invalid value: -1: '
                                "must be greater than or equal to 0"), r
    assert api.get(f"{deployments(namespace)}/x").status_code == 404


def test_apply_unknown_field_is_refused(kubectl: Kubectl, api: httpx.Client, namespace: str,
                                        tmp_path: Path) -> None:
    unknown = manifest(DEPLOYMENT_YAML)
    unknown["spec"]["template"]["spec"]["bogusPodField"] = True
    path = write_manifest(tmp_path / "unknown.yaml", unknown)
    r = kubectl.run("apply", "-f", str(path), "-n", namespace)
    assert r.returncode == 1, r
    assert 'unknown field "spec.template.spec.bogusPodField"' in r.stderr, r
    assert api.get(f"{deployments(namespace)}/nginx-deployment").status_code == 404

    # the same on an update (a strategic-merge patch)
    apply_example_deployment(kubectl, namespace)
    r = kubectl.run("apply", "-f", str(path), "-n", namespace)
    assert r.returncode == 1, r
    assert 'unknown field "spec.template.spec.bogusPodField"' in r.stderr, r
    stored = api.get(f"{deployments(namespace)}/nginx-deployment").json()
    assert "bogusPodField" not in stored["spec"]["template"]["spec"]

    # --validate=warn: stored, with the field dropped and a warning naming it
    r = kubectl.run("apply", "--validate=warn", "-f", str(path), "-n", namespace).ok()
    assert r.stdout.strip() == "deployment.apps/nginx-deployment configured", r
    assert 'Warning: unknown field "spec.template.spec.bogusPodField"' in r.stderr, r
    # --validate=false: stored silently, the field dropped
    unknown["spec"]["replicas"] = 2
    r = kubectl.run("apply", "--validate=false", "-f", str(write_manifest(path, unknown)), "-n", namespace).ok()
    assert r.stdout.strip() == "deployment.apps/nginx-deployment configured", r
    assert "bogusPodField" not in r.stderr, r
    stored = api.get(f"{deployments(namespace)}/nginx-deployment").json()
    assert stored["spec"]["replicas"] == 2 and "bogusPodField" not in stored["spec"]["template"]["spec"]
