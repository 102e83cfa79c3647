"""mkubectl as a real subprocess against the real apiserver (and, where a test needs them, the real
controller-manager and a real kubelet), compared with real kubectl 1.33 on the same objects.

Every mkubectl run checks that no Python traceback reached stderr; every wait is a condition with
a deadline. Where kubectl 1.33 (or Docker, for the kubelet) is missing, the test that needs it says
so and skips.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests import warm_python
from tests.cluster import REPO, ApiServer, free_port, make_workdir, wait_for
from tests.controller_process import ControllerProcess
from tests.kubectl import Kubectl, KubectlWatch, Result, find_kubectl, kubectl_dir, write_kubeconfig
from tests.manifests import deployment, node, pod

JSONDict = dict[str, Any]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
KUBECTL_VERSION = "1.33"
_ENV_DROP = ("KUBECONFIG", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


# -- running mkubectl ------------------------------------------------------------------------------


class Mk:
    """mkubectl (`python -m kubectl`) bound to one apiserver and namespace through its own kubeconfig. Each run
    is a process of its own, forked from a warm interpreter (tests/warm_python.py) unless another command is given
    (the console script)."""

    def __init__(self, server: str, workdir: Path, namespace: str | None = None,
                 command: list[str] | None = None) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = write_kubeconfig(workdir / "mk-kubeconfig", server, namespace)
        self.command = command or [sys.executable, "-m", "kubectl"]
        home = workdir / "mk-home"
        home.mkdir(exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP and not k.startswith("MKUBECTL")}
        self.env["HOME"] = str(home)

    def argv(self, *args: str) -> list[str]:
        return [*self.command, "--kubeconfig", str(self.kubeconfig), *args]

    def run(self, *args: str, timeout: float = 60, stdin: str | None = None) -> Result:
        argv = self.argv(*args)
        try:
            if warm_python.warm_module(argv):  # a fresh process forked from a warm interpreter
                returncode, stdout, stderr = warm_python.run(argv, env=self.env, cwd=self.workdir, stdin=stdin,
                                                             timeout=timeout)
            else:
                done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                                      env=self.env, cwd=self.workdir)
                returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as e:
            raise TimeoutError(f"{' '.join(argv)} still running after {timeout}s\n{e.stdout}\n{e.stderr}") from None
        result = Result(argv, returncode, stdout, stderr)
        assert "Traceback" not in stderr, f"a traceback reached the user\n{result}"
        return result

    def fails(self, *args: str, stdin: str | None = None) -> str:
        """Run, expect exit code 1 and exactly one line on stderr; that line."""
        result = self.run(*args, stdin=stdin)
        assert result.returncode == 1, result
        lines = result.stderr.splitlines()
        assert len(lines) == 1, f"expected one error line\n{result}"
        return lines[0]

    def watch(self, *args: str) -> KubectlWatch:
        return KubectlWatch(self.argv(*args), self.env, self.workdir)


@pytest.fixture
def mk(apiserver: ApiServer, namespace: str, tmp_path: Path) -> Mk:
    return Mk(apiserver.url, tmp_path, namespace)


@pytest.fixture
def kubectl(apiserver: ApiServer, namespace: str, tmp_path: Path) -> Kubectl:
    binary = find_kubectl(KUBECTL_VERSION)
    if binary is None:
        pytest.skip(f"kubectl.{KUBECTL_VERSION} is not installed (looked next to `kubectl` in {kubectl_dir()} "
                    "and on PATH): nothing to compare with")
    return Kubectl(binary, KUBECTL_VERSION, apiserver.url, tmp_path / "kubectl", namespace)


@pytest.fixture(scope="module")
def controllers(apiserver: ApiServer) -> Iterator[ControllerProcess]:
    """The deployment, replicaset and garbage-collector controllers, for this module's tests that need them."""
    workdir = make_workdir("minik8s-mkubectl-cm-")
    process = ControllerProcess(workdir, apiserver.url, ["deployment", "replicaset", "garbagecollector"])
    process.start()
    try:
        yield process
    finally:
        process.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def write(path: Path, *docs: JSONDict) -> Path:
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return path


_AGE = re.compile(r"\b\d+(?:y\d*d?|d\d*h?|h\d*m?|m\d*s?|s)\b")


def age_blind(text: str) -> list[list[str]]:
    """The cells of each line (split where kubectl pads), with ages like 5s, 3m20s, 2d blanked out."""
    return [[_AGE.sub("<age>", cell) for cell in re.split(r"\s{2,}", line.rstrip())] for line in text.splitlines()]


def same_output(mk: Mk, kubectl: Kubectl, *args: str, attempts: int = 4) -> str:
    """mkubectl's and kubectl's stdout for the same arguments, byte for byte. Ages are computed by the
    server per request, so a pair of runs straddling a second boundary is retried (a few times at most);
    if the ages never agree (a slow machine), the outputs must still agree cell for cell apart from them."""
    ours = theirs = ""
    for _ in range(attempts):
        ours = mk.run(*args).ok().stdout
        theirs = kubectl.run(*args).ok().stdout
        if ours == theirs:
            return ours
    assert age_blind(ours) == age_blind(theirs), (
        f"mkubectl and kubectl {' '.join(args)} differ\n--- mkubectl\n{ours}--- kubectl\n{theirs}")
    return ours


def request_bodies(stderr: str, method: str) -> list[Any]:
    """The bodies mkubectl logged with -v=8 for requests of `method`."""
    bodies: list[Any] = []
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"mkubectl: {method} ") and i + 1 < len(lines) and lines[i + 1].startswith(
                "mkubectl: Request Body: "):
            bodies.append(json.loads(lines[i + 1].removeprefix("mkubectl: Request Body: ")))
    return bodies


def kubectl_patch(stderr: str) -> Any:
    """The PATCH body kubectl logged with -v=9."""
    for line in stderr.splitlines():
        if "Request Body" in line and "helper.go" in line and 'body=""' not in line:
            return json.loads(json.loads(line.split("body=", 1)[1]))
    raise AssertionError(f"no request body in kubectl's log:\n{stderr[-2000:]}")


def deployments(ns: str) -> str:
    return f"/apis/apps/v1/namespaces/{ns}/deployments"


def pods_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- apply ------------------------------------------------------------------------------------------


def test_apply_created_unchanged_configured(mk: Mk, api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    manifest = deployment("web", replicas=3, image="nginx:1.14.2")
    path = write(tmp_path / "web.yaml", manifest)
    assert mk.run("apply", "-f", str(path)).ok().stdout == "deployment.apps/web created\n"
    created = api.get(f"{deployments(namespace)}/web").json()
    expected = dict(manifest, metadata={**manifest["metadata"], "annotations": {}, "namespace": namespace})
    assert created["metadata"]["annotations"][LAST_APPLIED] == json.dumps(
        expected, sort_keys=True, separators=(",", ":")) + "\n", "not the annotation kubectl writes"

    assert mk.run("apply", "-f", str(path)).ok().stdout == "deployment.apps/web unchanged\n"
    again = api.get(f"{deployments(namespace)}/web").json()
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"], "unchanged wrote anyway"

    manifest["spec"]["replicas"] = 4
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.16.1"
    result = mk.run("apply", "-f", str(write(path, manifest)), "-v=8").ok()
    assert result.stdout == "deployment.apps/web configured\n"
    (patch,) = request_bodies(result.stderr, "PATCH")
    assert "fieldManager=kubectl-client-side-apply" in result.stderr
    last_applied = patch["metadata"]["annotations"].pop(LAST_APPLIED)
    assert patch == {"metadata": {"annotations": {}}, "spec": {"replicas": 4, "template": {"spec": {
        "$setElementOrder/containers": [{"name": "web"}],
        "containers": [{"image": "nginx:1.16.1", "name": "web"}]}}}}
    assert json.loads(last_applied)["spec"]["replicas"] == 4
    updated = api.get(f"{deployments(namespace)}/web").json()
    assert updated["spec"]["replicas"] == 4
    container = updated["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx:1.16.1" and container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]


SCENARIOS: dict[str, Callable[[JSONDict], None]] = {
    "image": lambda d: d["spec"]["template"]["spec"]["containers"][0].update(image="nginx:1.16.1"),
    "env removed": lambda d: d["spec"]["template"]["spec"]["containers"][0]["env"].pop(0),
    "container added": lambda d: d["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "x"}),
    "label removed": lambda d: d["metadata"]["labels"].pop("tier"),
    "replicas dropped": lambda d: d["spec"].pop("replicas"),
    "port removed": lambda d: d["spec"]["template"]["spec"]["containers"][0]["ports"].pop(),
    "containers reordered": lambda d: d["spec"]["template"]["spec"]["containers"].reverse(),
    "volume source": lambda d: d["spec"]["template"]["spec"].update(
        volumes=[{"name": "scratch", "hostPath": {"path": "/tmp"}}]),
}


@pytest.mark.kubectl
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_apply_sends_kubectls_patch(scenario: str, mk: Mk, kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:
    """The same three objects (last applied, new manifest, live) give kubectl's patch, directive for directive."""
    base = deployment("web", replicas=2)
    base["metadata"]["labels"]["tier"] = "front"
    spec = base["spec"]["template"]["spec"]
    spec["containers"][0].update(env=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                                 ports=[{"containerPort": 80}, {"containerPort": 81}],
                                 volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}])
    spec["containers"].append({"name": "second", "image": "busybox"})
    spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    mk.run("apply", "-f", str(write(tmp_path / "base.yaml", base))).ok()
    changed = json.loads(json.dumps(base))
    SCENARIOS[scenario](changed)
    path = write(tmp_path / "changed.yaml", changed)
    ours = request_bodies(mk.run("apply", "-f", str(path), "--dry-run=server", "-v=8").ok().stderr, "PATCH")
    theirs = kubectl_patch(kubectl.run("apply", "-f", str(path), "--dry-run=server", "-v=9").ok().stderr)
    assert ours == [theirs]
    # and an object mkubectl applied is one kubectl considers applied by itself
    assert kubectl.run("apply", "-f", str(tmp_path / "base.yaml")).ok().stdout == "deployment.apps/web unchanged\n"


def test_apply_directory_multi_document_and_stdin(mk: Mk, api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    folder = tmp_path / "manifests"
    folder.mkdir()
    write(folder / "a.yaml", pod("one"), pod("two"))
    (folder / "b.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                               "items": [deployment("three")]}))
    (folder / "README.md").write_text("not a manifest")
    assert mk.run("apply", "-f", str(folder)).ok().stdout == (
        "pod/one created\npod/two created\ndeployment.apps/three created\n")
    stdin = yaml.safe_dump(pod("four"))
    assert mk.run("apply", "-f", "-", stdin=stdin).ok().stdout == "pod/four created\n"
    names = {p["metadata"]["name"] for p in api.get(pods_path(namespace)).json()["items"]}
    assert names == {"one", "two", "four"}
    assert mk.run("apply", "-f", str(folder), "-o", "name").ok().stdout == (
        "pod/one\npod/two\ndeployment.apps/three\n")


def test_apply_reports_each_failure_and_goes_on(mk: Mk, api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    bad = deployment("bad")
    bad["spec"]["replicas"] = -1
    other = pod("fine")
    other["metadata"]["namespace"] = "elsewhere"
    path = write(tmp_path / "mixed.yaml", bad, pod("good"))
    result = mk.run("apply", "-f", str(path))
    assert result.returncode == 1 and result.stdout == "pod/good created\n"
    assert result.stderr == ('The Deployment "bad" is invalid: spec.replicas: Invalid value: -1: '
                             "must be greater than or equal to 0\n")
    line = mk.fails("apply", "-f", str(write(tmp_path / "ns.yaml", other)), "-n", namespace)
    assert line == (f'error: the namespace from the provided object "elsewhere" does not match the namespace '
                    f'"{namespace}". You must pass \'--namespace=elsewhere\' to perform this operation.')


def test_apply_server_side(mk: Mk, api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    path = write(tmp_path / "ssa.yaml", deployment("ssa"))
    assert mk.run("apply", "--server-side", "-f", str(path)).ok().stdout == "deployment.apps/ssa serverside-applied\n"
    stored = api.get(f"{deployments(namespace)}/ssa").json()
    assert LAST_APPLIED not in (stored["metadata"].get("annotations") or {})


# -- get ------------------------------------------------------------------------------------------------


@pytest.fixture
def objects(api: httpx.Client, namespace: str) -> Iterator[str]:
    """Two deployments, three pods (one bound with an IP), and a labelled node: what the get tests print.
    The node is removed afterwards, so no other test's scheduler sees it."""
    for d in (deployment("web", replicas=3, image="nginx:1.14.2"), deployment("api", replicas=1, app="backend")):
        assert api.post(deployments(namespace), json=d).status_code == 201
    for p in (pod("pending-1", labels={"app": "web"}), pod("pending-2", labels={"app": "other"}),
              pod("bound", labels={"app": "web"})):
        assert api.post(pods_path(namespace), json=p).status_code == 201
    r = api.post(f"{pods_path(namespace)}/bound/binding", json={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "mk-node"}})
    assert r.status_code == 201, r.text
    r = api.patch(f"{pods_path(namespace)}/bound/status", json={"status": {"podIP": "10.244.9.7", "hostIP": "10.0.0.9",
                                                                            "podIPs": [{"ip": "10.244.9.7"}]}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    tag = uuid.uuid4().hex[:8]
    n = node(f"mk-{tag}")
    n["metadata"]["labels"].update({"mkubectl-test": tag, "node-role.kubernetes.io/worker": ""})
    assert api.post("/api/v1/nodes", json=n).status_code == 201
    r = api.patch(f"/api/v1/nodes/mk-{tag}/status", json={"status": {
        "addresses": [{"type": "InternalIP", "address": "10.0.0.9"}, {"type": "Hostname", "address": f"mk-{tag}"}],
        "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
        "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
                        "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
        "nodeInfo": {"kubeletVersion": "v1.30.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
                     "kernelVersion": "6.1.0", "containerRuntimeVersion": "docker://20.10.24",
                     "operatingSystem": "linux", "architecture": "amd64", "machineID": "m", "systemUUID": "s",
                     "bootID": "b", "kubeProxyVersion": "v1.30.0"}}},
        headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    yield tag
    api.delete(f"/api/v1/nodes/mk-{tag}")


@pytest.mark.kubectl
@pytest.mark.parametrize("args", [
    ("get", "pods"), ("get", "pods", "-o", "wide"), ("get", "po", "bound", "pending-1"),
    ("get", "deployments"), ("get", "deploy", "-o", "wide"), ("get", "deploy,po"), ("get", "all"),
    ("get", "pods", "-l", "app=web", "--show-labels"), ("get", "pods", "-L", "app"),
    ("get", "deploy/web", "pod/bound"), ("get", "pods", "--no-headers"),
    ("get", "pods", "--field-selector", "spec.nodeName=mk-node"),
    ("get", "pods", "-o", "yaml"), ("get", "pod", "bound", "-o", "json"), ("get", "deploy", "web", "-o", "yaml"),
    ("get", "deploy,po", "-o", "name"),
], ids=lambda a: " ".join(a[1:]))
def test_get_prints_what_kubectl_prints(args: tuple[str, ...], mk: Mk, kubectl: Kubectl, objects: str) -> None:
    same_output(mk, kubectl, *args)


@pytest.mark.kubectl
def test_get_nodes_and_all_namespaces_like_kubectl(mk: Mk, kubectl: Kubectl, objects: str, namespace: str) -> None:
    same_output(mk, kubectl, "get", "nodes", "-l", f"mkubectl-test={objects}")
    same_output(mk, kubectl, "get", "nodes", "-l", f"mkubectl-test={objects}", "-o", "wide")
    out = same_output(mk, kubectl, "get", "pods", "-A", "-l", "app=web", "--field-selector",
                      f"metadata.namespace={namespace}")
    assert out.splitlines()[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [[namespace, "bound"], [namespace, "pending-1"]]


def test_get_columns(mk: Mk, objects: str, namespace: str) -> None:
    """The columns without a kubectl to compare with: headers, wide columns, kind prefixes."""
    lines = mk.run("get", "pods", "-o", "wide").ok().stdout.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                                             "NOMINATED NODE", "READINESS GATES"]
    bound = next(line for line in lines if line.startswith("bound "))
    assert re.split(r"\s{2,}", bound)[5:7] == ["10.244.9.7", "mk-node"]
    out = mk.run("get", "deploy,po").ok().stdout
    assert re.search(r"^deployment\.apps/web\s+0/3\s+0\s+0\s+\d+s$", out, re.M), out
    assert re.search(r"^pod/pending-1\s+0/1\s+Pending\s+0\s+\d+s$", out, re.M), out
    assert "\n\nNAME " in out, "a blank line and a new header between kinds"


def test_get_missing_names_and_empty_lists(mk: Mk, objects: str, namespace: str) -> None:
    result = mk.run("get", "pods", "bound", "missing")
    assert result.returncode == 1
    assert result.stdout.splitlines()[1].startswith("bound ")
    assert result.stderr == 'Error from server (NotFound): pods "missing" not found\n'
    result = mk.run("get", "pods", "-l", "app=nothing").ok()
    assert (result.stdout, result.stderr) == ("", f"No resources found in {namespace} namespace.\n")
    assert mk.run("get", "pods", "missing", "--ignore-not-found").ok().stdout == ""
    assert mk.fails("get", "pods", "x", "-A") == "error: a resource cannot be retrieved by name across all namespaces"


def test_get_watch_prints_rows_as_they_change(mk: Mk, api: httpx.Client, namespace: str) -> None:
    assert api.post(pods_path(namespace), json=pod("first")).status_code == 201
    with mk.watch("get", "pods", "-w") as watch:
        header = watch.wait_for_line(lambda line: line.startswith("NAME"), what="the header")
        assert re.split(r"\s{2,}", header.strip()) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        watch.wait_for_line(lambda line: re.match(r"first\s+0/1\s+Pending\s+0\s+\d+s$", line) is not None,
                            what="the existing pod")
        assert api.post(pods_path(namespace), json=pod("second")).status_code == 201
        watch.wait_for_line(lambda line: re.match(r"second\s+0/1\s+Pending\s+0\s+\d+s$", line) is not None,
                            what="the new pod")
        assert api.delete(f"{pods_path(namespace)}/first").status_code == 200
        watch.wait_for_line(lambda line: line.startswith("first "), what="the deletion's row")
        assert watch.proc.poll() is None, "get -w ended by itself"
    with mk.watch("get", "pod", "second", "-w", "-o", "name") as named:
        named.wait_for_line(lambda line: line == "pod/second", what="the named pod")


@pytest.mark.kubectl
def test_get_events_sorted(mk: Mk, kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    created = api.post(pods_path(namespace), json=pod("evented")).json()
    for i, reason in enumerate(("Scheduled", "Pulling", "Pulled")):
        at = f"2026-01-01T00:00:0{3 - i}Z"
        r = api.post(f"/api/v1/namespaces/{namespace}/events", json={
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"evented.{i}"},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "evented", "namespace": namespace,
                               "uid": created["metadata"]["uid"]},
            "reason": reason, "message": f"step {i}", "type": "Normal", "source": {"component": "kubelet"},
            "count": 1, "firstTimestamp": at, "lastTimestamp": at})
        assert r.status_code == 201, r.text
    out = same_output(mk, kubectl, "get", "events", "--sort-by=.lastTimestamp")
    assert [line.split()[2] for line in out.splitlines()[1:]] == ["Pulled", "Pulling", "Scheduled"]
    same_output(mk, kubectl, "get", "events", "--sort-by=.metadata.creationTimestamp")


# -- describe ------------------------------------------------------------------------------------------


def make_ready(api: httpx.Client, namespace: str, name: str) -> None:
    """Play the kubelet: the pod runs and is ready."""
    r = api.patch(f"{pods_path(namespace)}/{name}/status", json={"status": {
        "phase": "Running", "startTime": now(),
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now()},
                       {"type": "ContainersReady", "status": "True", "lastTransitionTime": now()}]}},
        headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


def pods_of(api: httpx.Client, namespace: str, app: str) -> list[JSONDict]:
    return api.get(pods_path(namespace), params={"labelSelector": f"app={app}"}).json()["items"]


def replicasets_of(api: httpx.Client, namespace: str, app: str) -> list[JSONDict]:
    return api.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets",
                   params={"labelSelector": f"app={app}"}).json()["items"]


@pytest.mark.kubectl
def test_describe_prints_what_kubectl_prints(mk: Mk, kubectl: Kubectl, api: httpx.Client, namespace: str,
                                             objects: str, controllers: ControllerProcess, tmp_path: Path) -> None:
    rolled = deployment("rolled", replicas=2)
    rolled["spec"]["template"]["spec"]["containers"][0].update(
        env=[{"name": "MODE", "value": "fast"}], command=["nginx", "-g", "daemon off;"],
        resources={"limits": {"cpu": "500m", "memory": "64Mi"}},
        readinessProbe={"httpGet": {"path": "/", "port": 80}, "periodSeconds": 5})
    mk.run("apply", "-f", str(write(tmp_path / "rolled.yaml", rolled))).ok()
    wait_for(lambda: len(pods_of(api, namespace, "rolled")) == 2, 20, what="the deployment's pods")
    first = pods_of(api, namespace, "rolled")[0]["metadata"]["name"]
    make_ready(api, namespace, first)
    r = api.post(f"/api/v1/namespaces/{namespace}/events", json={
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "bound.scheduled"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "bound", "namespace": namespace,
                           "uid": api.get(f"{pods_path(namespace)}/bound").json()["metadata"]["uid"]},
        "reason": "Scheduled", "message": f"Successfully assigned {namespace}/bound to mk-node", "type": "Normal",
        "source": {"component": "default-scheduler"}, "count": 3, "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": now()})
    assert r.status_code == 201, r.text
    wait_for(lambda: (api.get(f"{deployments(namespace)}/rolled").json().get("status") or {}).get(
        "availableReplicas") == 1, 20, what="one available replica")
    rs = replicasets_of(api, namespace, "rolled")[0]["metadata"]["name"]
    for args in (("describe", "deployment", "rolled"), ("describe", "rs", rs), ("describe", "pod", first),
                 ("describe", "pod", "bound"), ("describe", "pods", "pending"), ("describe", "deploy"),
                 ("describe", "node", f"mk-{objects}"), ("describe", "namespace", namespace)):
        same_output(mk, kubectl, *args)


def test_describe_sections_and_errors(mk: Mk, api: httpx.Client, namespace: str, objects: str) -> None:
    out = mk.run("describe", "pod", "bound").ok().stdout
    assert re.search(r"^Node:\s+mk-node/10\.0\.0\.9$", out, re.M), out
    assert re.search(r"^Events:\s+<none>$", out, re.M), out
    out = mk.run("describe", "deploy", "web").ok().stdout
    # (the controllers of other tests in this module may be running: the counts may have moved)
    assert re.search(r"^Replicas:\s+3 desired \| \d+ updated \| \d+ total \| \d+ available \| \d+ unavailable$",
                     out, re.M), out
    assert mk.fails("describe", "deploy", "nope") == 'Error from server (NotFound): deployments.apps "nope" not found'


# -- delete, scale ---------------------------------------------------------------------------------------


def test_delete_by_name_file_and_selector(mk: Mk, api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    path = write(tmp_path / "things.yaml", pod("a", labels={"group": "x"}), pod("b", labels={"group": "x"}),
                 pod("c", labels={"group": "y"}), deployment("d"))
    mk.run("apply", "-f", str(path)).ok()
    assert mk.run("delete", "pod", "a").ok().stdout == 'pod "a" deleted\n'
    assert mk.run("delete", "pods", "-l", "group=x").ok().stdout == 'pod "b" deleted\n'
    assert mk.run("delete", "pods", "-l", "group=none").ok().stdout == "No resources found\n"
    result = mk.run("delete", "-f", str(path), "--ignore-not-found").ok()
    assert result.stdout == 'pod "c" deleted\ndeployment.apps "d" deleted\n'
    # the Deployment's pods, when the module's controllers made some, go by the garbage collector (background)
    wait_for(lambda: api.get(pods_path(namespace)).json()["items"] == [], 20, 0.1, what="no pod left")
    assert mk.fails("delete", "pod", "a") == 'Error from server (NotFound): pods "a" not found'
    assert mk.fails("delete", "pods") == "error: resource(s) were provided, but no name was specified"


def test_delete_waits_until_the_kubelet_confirms(mk: Mk, api: httpx.Client, namespace: str) -> None:
    assert api.post(pods_path(namespace), json=pod("bound")).status_code == 201
    r = api.post(f"{pods_path(namespace)}/bound/binding", json={"apiVersion": "v1", "kind": "Binding",
                                                               "metadata": {"name": "bound"},
                                                               "target": {"kind": "Node", "name": "node-1"}})
    assert r.status_code == 201, r.text
    with mk.watch("delete", "pod", "bound") as deleting:
        deleting.wait_for_line(lambda line: line == 'pod "bound" deleted', what="the deleted message")
        wait_for(lambda: api.get(f"{pods_path(namespace)}/bound").json()["metadata"].get("deletionTimestamp"),
                 20, what="the pod to be marked for deletion")
        with pytest.raises(subprocess.TimeoutExpired):  # still waiting for the kubelet's confirmation
            deleting.proc.wait(0.5)
        # the kubelet's last word: delete with grace period 0 once the containers are gone
        assert api.delete(f"{pods_path(namespace)}/bound", params={"gracePeriodSeconds": "0"}).status_code == 200
        assert deleting.proc.wait(20) == 0, deleting.output()
    assert api.post(pods_path(namespace), json=pod("stuck", nodeName="node-1")).status_code == 201
    result = mk.run("delete", "pod", "stuck", "--timeout=1s")
    assert result.returncode == 1 and result.stdout == 'pod "stuck" deleted\n'
    assert result.stderr == "error: timed out waiting for the condition on pods/stuck\n"
    assert mk.run("delete", "pod", "stuck", "--wait=false").ok().stdout == 'pod "stuck" deleted\n'


def test_delete_cascade(mk: Mk, api: httpx.Client, namespace: str, controllers: ControllerProcess,
                        tmp_path: Path) -> None:
    for name in ("orphaned", "foreground"):
        mk.run("apply", "-f", str(write(tmp_path / f"{name}.yaml", deployment(name, replicas=1)))).ok()
    wait_for(lambda: replicasets_of(api, namespace, "orphaned") and replicasets_of(api, namespace, "foreground")
             and pods_of(api, namespace, "foreground"), 20, what="replica sets and pods")
    assert mk.run("delete", "deploy", "orphaned", "--cascade=orphan", "-v=8").ok().stdout == (
        'deployment.apps "orphaned" deleted\n')
    wait_for(lambda: not replicasets_of(api, namespace, "orphaned")[0]["metadata"].get("ownerReferences"), 20,
             what="the replica set orphaned")
    result = mk.run("delete", "deploy", "foreground", "--cascade=foreground", "-v=8").ok()
    assert request_bodies(result.stderr, "DELETE")[0]["propagationPolicy"] == "Foreground"
    # mkubectl returned only once the deployment was gone, and foreground means its dependents went first
    assert api.get(f"{deployments(namespace)}/foreground").status_code == 404
    assert not replicasets_of(api, namespace, "foreground")


def test_scale(mk: Mk, api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    mk.run("apply", "-f", str(write(tmp_path / "d.yaml", deployment("web", replicas=3)))).ok()
    result = mk.run("scale", "deploy", "web", "--replicas=5", "-v=8").ok()
    assert result.stdout == "deployment.apps/web scaled\n"
    assert request_bodies(result.stderr, "PATCH") == [{"spec": {"replicas": 5}}]
    assert "/deployments/web/scale" in result.stderr
    assert api.get(f"{deployments(namespace)}/web").json()["spec"]["replicas"] == 5
    # a precondition's scale is a GET and a PUT of that resourceVersion: it waits until the module's controllers,
    # when they run, are done writing the Deployment's status (kubectl retries a 409, mkubectl not yet)
    quiet(api, f"{deployments(namespace)}/web")
    assert mk.run("scale", "deployment/web", "--replicas=2", "--current-replicas=5").ok().stdout == (
        "deployment.apps/web scaled\n")
    assert mk.fails("scale", "deploy", "web", "--replicas=1", "--current-replicas=4") == (
        "error: Expected replicas to be 4, was 2")
    assert api.get(f"{deployments(namespace)}/web").json()["spec"]["replicas"] == 2


def quiet(api: httpx.Client, path: str, still: float = 0.5) -> None:
    """Wait until the object at path keeps one resourceVersion for `still` seconds (controllers done with it)."""
    seen: list[str] = []

    def unchanged() -> bool:
        seen.append(api.get(path).json()["metadata"]["resourceVersion"])
        return len(seen) > 1 and seen[-1] == seen[-2]

    wait_for(unchanged, 20, still, what=f"{path} to stay unchanged for {still}s")


# -- rollout ---------------------------------------------------------------------------------------------


def test_rollout_status_follows_the_rollout(mk: Mk, api: httpx.Client, namespace: str,
                                            controllers: ControllerProcess, tmp_path: Path) -> None:
    mk.run("apply", "-f", str(write(tmp_path / "web.yaml", deployment("web", replicas=3)))).ok()
    with mk.watch("rollout", "status", "deployment/web", "--timeout=90s") as status:
        pods = wait_for(lambda: len(pods_of(api, namespace, "web")) == 3 and pods_of(api, namespace, "web"), 20,
                        what="three pods")
        assert isinstance(pods, list)
        status.wait_for_line(lambda line: line == 'Waiting for deployment "web" rollout to finish: 0 of 3 updated '
                                                  "replicas are available...", what="0 of 3")
        for i, p in enumerate(pods[:2], start=1):
            make_ready(api, namespace, p["metadata"]["name"])
            status.wait_for_line(lambda line, i=i: line == f'Waiting for deployment "web" rollout to finish: {i} of 3 '
                                                           "updated replicas are available...", what=f"{i} of 3")
        make_ready(api, namespace, pods[2]["metadata"]["name"])
        status.wait_for_line(lambda line: line == 'deployment "web" successfully rolled out', what="the end")
        assert status.proc.wait(20) == 0, status.output()
    assert mk.run("rollout", "status", "deploy", "web").ok().stdout == 'deployment "web" successfully rolled out\n'


def test_rollout_status_times_out(mk: Mk, namespace: str, controllers: ControllerProcess, tmp_path: Path) -> None:
    mk.run("apply", "-f", str(write(tmp_path / "slow.yaml", deployment("slow", replicas=2)))).ok()
    started = time.monotonic()
    result = mk.run("rollout", "status", "deploy/slow", "--timeout=2s")
    assert result.returncode == 1, result
    assert 1.5 < time.monotonic() - started < 30
    assert result.stderr == "error: timed out waiting for the condition\n"
    assert result.stdout.startswith("Waiting for deployment")
    assert mk.fails("rollout", "status", "deploy/nope") == (
        'Error from server (NotFound): deployments.apps "nope" not found')


def test_rollout_history_undo_restart(mk: Mk, api: httpx.Client, namespace: str, controllers: ControllerProcess,
                                      tmp_path: Path) -> None:
    manifest = deployment("web", replicas=1, image="busybox:1")
    path = write(tmp_path / "web.yaml", manifest)
    mk.run("apply", "-f", str(path)).ok()
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    mk.run("apply", "-f", str(write(path, manifest))).ok()
    wait_for(lambda: len(replicasets_of(api, namespace, "web")) == 2, 20, what="two revisions")
    history = "deployment.apps/web \nREVISION  CHANGE-CAUSE\n1         <none>\n2         <none>\n\n"
    assert mk.run("rollout", "history", "deployment/web").ok().stdout == history
    revision = mk.run("rollout", "history", "deployment/web", "--revision=1").ok().stdout
    assert revision.startswith("deployment.apps/web with revision #1\nPod Template:\n")
    assert "    Image:\tbusybox:1\n" in revision

    result = mk.run("rollout", "undo", "deployment/web", "-v=8").ok()
    assert result.stdout == "deployment.apps/web rolled back\n"
    assert "application/json-patch+json" not in result.stdout
    (ops,) = request_bodies(result.stderr, "PATCH")
    assert [(op["op"], op["path"]) for op in ops] == [("replace", "/spec/template"),
                                                      ("replace", "/metadata/annotations")]
    template = api.get(f"{deployments(namespace)}/web").json()["spec"]["template"]
    assert template["spec"]["containers"][0]["image"] == "busybox:1"
    wait_for(lambda: mk.run("rollout", "history", "deploy/web").stdout.endswith(
        "2         <none>\n3         <none>\n\n"), 20, what="revision 1 to come back as 3")
    assert mk.run("rollout", "undo", "deploy/web", "--to-revision=3").ok().stdout == (
        "deployment.apps/web skipped rollback (current template already matches revision 3)\n")
    assert mk.fails("rollout", "undo", "deploy/web", "--to-revision=9") == (
        "error: unable to find specified revision 9 in history")

    assert mk.run("rollout", "restart", "deploy/web").ok().stdout == "deployment.apps/web restarted\n"
    template = api.get(f"{deployments(namespace)}/web").json()["spec"]["template"]
    assert "kubectl.kubernetes.io/restartedAt" in template["metadata"]["annotations"]
    assert mk.run("rollout", "pause", "deploy/web").ok().stdout == "deployment.apps/web paused\n"
    assert mk.fails("rollout", "restart", "deploy/web") == (
        "error: can't restart paused deployment (run rollout resume first)")
    assert mk.run("rollout", "resume", "deploy/web").ok().stdout == "deployment.apps/web resumed\n"


@pytest.mark.kubectl
def test_rollout_history_like_kubectl(mk: Mk, kubectl: Kubectl, api: httpx.Client, namespace: str,
                                      controllers: ControllerProcess, tmp_path: Path) -> None:
    manifest = deployment("web", replicas=1, image="busybox:1")
    path = write(tmp_path / "web.yaml", manifest)
    mk.run("apply", "-f", str(path)).ok()
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    manifest["spec"]["template"]["metadata"]["annotations"] = {"kubernetes.io/change-cause": "bump to 2"}
    mk.run("apply", "-f", str(write(path, manifest))).ok()
    wait_for(lambda: len(replicasets_of(api, namespace, "web")) == 2, 20, what="two revisions")
    same_output(mk, kubectl, "rollout", "history", "deploy/web")
    same_output(mk, kubectl, "rollout", "history", "deploy/web", "--revision=2")


@pytest.mark.kubectl
def test_rollout_on_a_real_node_like_kubectl(mk: Mk, kubectl: Kubectl, api: httpx.Client, namespace: str,
                                             controllers: ControllerProcess, kubelet_node: str, tmp_path: Path) -> None:
    """Pods that really run: `rollout status` ends with exit 0 and `logs deploy/web` reads the container of the
    deployment's pod; a rollout stuck past its progress deadline ends both CLIs with exit 1 and the same line."""
    from tests.node_process import BUSYBOX

    web = deployment("web", replicas=1, image=BUSYBOX)
    web["spec"]["template"]["spec"].update(nodeName=kubelet_node, terminationGracePeriodSeconds=1)
    web["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "echo version 1; exec sleep 3600"]
    mk.run("apply", "-f", str(write(tmp_path / "web.yaml", web))).ok()
    done = mk.run("rollout", "status", "deploy/web", "--timeout=120s", timeout=150).ok()
    assert done.stdout.splitlines()[-1] == 'deployment "web" successfully rolled out', done
    assert all(line.startswith("Waiting for deployment") for line in done.stdout.splitlines()[:-1]), done
    assert mk.run("logs", "deploy/web").ok().stdout == "version 1\n"
    assert kubectl.run("logs", "deploy/web").ok().stdout == "version 1\n"

    stuck = deployment("stuck", replicas=1, image=BUSYBOX)
    stuck["spec"]["progressDeadlineSeconds"] = 2
    stuck["spec"]["template"]["spec"]["nodeName"] = "no-such-node"  # no kubelet: the pod never runs
    mk.run("apply", "-f", str(write(tmp_path / "stuck.yaml", stuck))).ok()
    wait_for(lambda: any(c["reason"] == "ProgressDeadlineExceeded" for c in (api.get(
        f"{deployments(namespace)}/stuck").json().get("status") or {}).get("conditions") or []), 60, 0.2,
        what="the progress deadline to pass")
    expected = 'error: deployment "stuck" exceeded its progress deadline'
    assert mk.fails("rollout", "status", "deploy/stuck") == expected
    theirs = kubectl.run("rollout", "status", "deploy/stuck")
    assert (theirs.returncode, theirs.stderr) == (1, expected + "\n"), theirs


# -- logs and exec on a real kubelet -------------------------------------------------------------------


def test_logs_and_exec_through_a_kubelet(mk: Mk, api: httpx.Client, namespace: str, kubelet_node: str) -> None:
    from tests.node_process import BUSYBOX

    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "talker"}, "spec": {
        "nodeName": kubelet_node, "containers": [
            {"name": "c", "image": BUSYBOX, "command": ["sh", "-c", "echo one; echo two; echo three; sleep 3600"]},
            {"name": "d", "image": BUSYBOX, "command": ["sh", "-c", "echo other; sleep 3600"]}]}}
    assert api.post(pods_path(namespace), json=manifest).status_code == 201

    def talking() -> bool:
        p = api.get(f"{pods_path(namespace)}/talker").json()
        statuses = (p.get("status") or {}).get("containerStatuses") or []
        return len(statuses) == 2 and all("running" in s["state"] for s in statuses) and mk.run(
            "logs", "talker", "-c", "c").stdout == "one\ntwo\nthree\n"

    wait_for(talking, 60, 0.2, what="the pod running and logging")
    assert mk.run("logs", "talker", "-c", "c", "--tail", "1").ok().stdout == "three\n"
    result = mk.run("logs", "talker").ok()
    assert (result.stdout, result.stderr) == ("one\ntwo\nthree\n", 'Defaulted container "c" out of: c, d\n')
    assert mk.run("logs", "pod/talker", "d").ok().stdout == "other\n"
    stamped = mk.run("logs", "talker", "-c", "d", "--timestamps").ok().stdout
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z other\n", stamped), stamped
    assert mk.fails("logs", "talker", "-c", "nope") == "error: container nope is not valid for pod talker"
    assert mk.fails("logs", "nope") == (
        f'error: error from server (NotFound): pods "nope" not found in namespace "{namespace}"')
    with mk.watch("logs", "-f", "talker", "-c", "c", "--tail", "1") as follow:
        follow.wait_for_line(lambda line: line == "three", what="the tail")
        mk.run("exec", "talker", "-c", "c", "--", "sh", "-c", "echo four > /proc/1/fd/1").ok()
        follow.wait_for_line(lambda line: line == "four", what="a line written after -f started")

    result = mk.run("exec", "talker", "-c", "c", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (result.returncode, result.stdout) == (3, "out\n"), result
    assert result.stderr == "err\ncommand terminated with exit code 3\n"
    assert mk.run("exec", "-i", "talker", "-c", "c", "--", "tr", "a-z", "A-Z", stdin="piped in\n").ok().stdout == (
        "PIPED IN\n")
    assert mk.run("exec", "talker", "-c", "d", "--", "hostname").ok().stdout == "talker\n"
    assert mk.fails("exec", "talker", "-c", "nope", "--", "true") == "error: container nope not found in pod talker"

    # -it: a terminal in raw mode on this side, a TTY on the other, the exit code relayed
    output, code = run_in_terminal(mk.argv("exec", "-it", "talker", "-c", "c", "--", "sh"),
                                   b"echo hi-$((40+2)); exit 4\r", mk.env)
    assert b"hi-42" in output and b"command terminated with exit code 4" in output, output
    assert code == 4


def run_in_terminal(argv: list[str], typed: bytes, env: dict[str, str], timeout: float = 30.0,
                    prompt: bytes = b"/ # ") -> tuple[bytes, int]:
    """Run argv on a pseudo-terminal, type `typed` once the remote shell shows its prompt (typed
    earlier, a loaded machine's shell may not be reading yet), return (output, exit code)."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: become mkubectl
        os.execve(argv[0], argv, env)
    output = b""
    deadline = time.monotonic() + timeout
    sent = False
    try:
        while time.monotonic() < deadline:
            if not sent and prompt in output:
                os.write(fd, typed)
                sent = True
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break  # the child closed the terminal: it is done
                if not chunk:
                    break
                output += chunk
        else:
            os.kill(pid, 9)
            raise TimeoutError(f"{' '.join(argv)} still running after {timeout}s: {output!r}")
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return output, os.waitstatus_to_exitcode(status)


def test_previous_logs_of_a_restarted_container(mk: Mk, api: httpx.Client, namespace: str, kubelet_node: str) -> None:
    from tests.node_process import BUSYBOX

    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "flaky"}, "spec": {
        "nodeName": kubelet_node, "containers": [
            {"name": "c", "image": BUSYBOX, "command": ["sh", "-c", "echo attempt; sleep 1; exit 1"]}]}}
    assert api.post(pods_path(namespace), json=manifest).status_code == 201

    def restarted() -> bool:
        statuses = (api.get(f"{pods_path(namespace)}/flaky").json().get("status") or {}).get("containerStatuses")
        return bool(statuses) and statuses[0].get("restartCount", 0) >= 1

    wait_for(restarted, 60, 0.2, what="a restart")
    assert mk.run("logs", "flaky", "--previous").ok().stdout == "attempt\n"
    assert mk.run("logs", "flaky", "-p", "--tail=1").ok().stdout == "attempt\n"


# -- errors ----------------------------------------------------------------------------------------------


def test_error_paths_are_one_line(mk: Mk, api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    port = free_port()
    refused = f"The connection to the server 127.0.0.1:{port} was refused - did you specify the right host or port?"
    dead = Mk(f"http://127.0.0.1:{port}", tmp_path / "dead", namespace)
    for args in (("get", "pods"), ("get", "foo"), ("describe", "pod", "x"), ("delete", "pod", "x"),
                 ("logs", "x"), ("exec", "x", "--", "true"), ("scale", "deploy", "x", "--replicas=1"),
                 ("rollout", "status", "deploy/x"), ("apply", "-f", str(write(tmp_path / "p.yaml", pod("p")))),
                 ("version",)):
        assert dead.fails(*args) == refused, args

    assert mk.fails("get", "deploy", "nope") == 'Error from server (NotFound): deployments.apps "nope" not found'
    assert mk.fails("get", "foo") == 'error: the server doesn\'t have a resource type "foo"'
    bad = deployment("x")
    bad["spec"]["replicas"] = -1
    assert mk.fails("apply", "-f", str(write(tmp_path / "bad.yaml", bad))) == (
        'The Deployment "x" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0')
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: a\n"
                      "    image: b\n     foo: bar\n")
    assert mk.fails("apply", "-f", str(broken)) == (
        f"error: error parsing {broken}: error converting YAML to JSON: yaml: line 9: mapping values are not "
        "allowed in this context")

    # Conflict: a manifest saved with `get -o yaml` is applied after someone else changed the object
    mk.run("apply", "-f", str(write(tmp_path / "web.yaml", deployment("web")))).ok()
    stale = yaml.safe_load(mk.run("get", "deploy", "web", "-o", "yaml").ok().stdout)
    mk.run("scale", "deploy", "web", "--replicas=5").ok()
    stale["spec"]["replicas"] = 7
    line = mk.fails("apply", "-f", str(write(tmp_path / "stale.yaml", stale)))
    assert line.startswith("Error from server (Conflict): ") and line.endswith(
        'Operation cannot be fulfilled on deployments.apps "web": the object has been modified; please apply your '
        "changes to the latest version and try again"), line


def test_no_traceback_for_anything(mk: Mk, tmp_path: Path) -> None:
    for args in (("bogus",), ("get",), ("get", "pods", "-o", "xml"), ("get", "pods", "--chunk-size", "x"),
                 ("delete", "--timeout", "5 minutes", "pod", "x"), ("exec", "x"), ("logs",),
                 ("scale", "deploy", "x"), ("rollout", "undo", "deploy/x", "--to-revision=-1"),
                 ("rollout", "status", "rs/x"), ("apply",), ("apply", "-f", str(tmp_path / "missing.yaml")),
                 ("get", "deploy", "a", "deploy/b"), ("describe",),
                 ("--kubeconfig", str(tmp_path / "none"), "get", "po")):
        result = mk.run(*args)
        assert result.returncode != 0 and result.stderr.strip(), (args, result)
        assert len(result.stderr.strip().splitlines()) == 1, (args, result)
    assert mk.run("--help").ok().stdout.startswith("usage: mkubectl")


def test_version_and_config_view(mk: Mk, apiserver: ApiServer) -> None:
    out = mk.run("version").ok().stdout.splitlines()
    assert out[0].startswith("Client Version: v") and out[1].startswith("Server Version: v")
    assert json.loads(mk.run("version", "--client", "-o", "json").ok().stdout)["clientVersion"]["gitVersion"]
    config = yaml.safe_load(mk.run("config", "view").ok().stdout)
    assert config["clusters"][0]["cluster"]["server"] == apiserver.url
    assert mk.run("config", "current-context").ok().stdout == "minik8s\n"


def test_console_script_and_no_shadowing(apiserver: ApiServer, namespace: str, tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "mkubectl"
    if not script.exists():
        pytest.skip(f"the console script is not installed in {script.parent} (pip install -e .)")
    mk = Mk(apiserver.url, tmp_path, namespace, command=[str(script)])
    assert mk.run("version").ok().stdout.startswith("Client Version: ")
    assert mk.run("get", "pods").ok().stderr == f"No resources found in {namespace} namespace.\n"
    real = shutil.which("kubectl")
    assert real is None or (Path(real).name != "mkubectl" and "mkubectl" not in Path(real).resolve().name)
    assert not (REPO / "kubectl" / "kubectl").exists()
