"""Real kubectl (1.27 and 1.33; exec 1.30+) on a Deployment that really rolls: the session's apiserver, the
deployment, replicaset and garbage-collector controllers as a process, and one kubelet running the pods as
Docker containers (the pod template names the node: no scheduler needed).

rollout status (waits while the rollout cannot finish, exit codes), pause/resume, history (change-cause, one
revision's template), undo (to the previous revision and --to-revision: kubectl reads the ReplicaSets and
patches the Deployment itself), restart (a new ReplicaSet from the restartedAt template annotation), get
events --sort-by=.metadata.creationTimestamp on the events the controllers and kubelet wrote, logs (-c,
--tail, deploy/NAME) and logs -f streaming lines as the container writes them, exec. Every wait has a
deadline; a binary that is missing skips its test and says so."""

from __future__ import annotations

import itertools
import re
import shutil
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster import ApiServer, make_workdir, wait_for
from tests.controller_process import ControllerProcess
from tests.kubectl import Kubectl, find_kubectl, kubectl_dir
from tests.node_process import BUSYBOX

pytestmark = pytest.mark.kubectl

VERSIONS = ("1.27", "1.33")
EXEC_VERSIONS = ("1.30", "1.33")  # 1.27-1.29 speak exec over SPDY only
CHANGE_CAUSE = "kubernetes.io/change-cause"
REVISION = "deployment.kubernetes.io/revision"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
ROLLOUT_TIMEOUT = 120.0

JSONDict = dict[str, Any]


def binary_or_skip(version: str) -> Path:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed (looked next to `kubectl` in {kubectl_dir()} and on PATH)")
    return binary


@pytest.fixture(params=VERSIONS, ids=[f"kubectl{v}" for v in VERSIONS])
def kubectl(request: pytest.FixtureRequest, tmp_path: Path) -> Kubectl:
    """kubectl.<version> bound to the session's apiserver and this test's namespace."""
    version: str = request.param
    binary = binary_or_skip(version)
    apiserver: ApiServer = request.getfixturevalue("apiserver")
    namespace: str = request.getfixturevalue("namespace")
    return Kubectl(binary, version, apiserver.url, tmp_path / f"kubectl-{version}", namespace)


@pytest.fixture(scope="module")
def controllers(apiserver: ApiServer) -> Iterator[ControllerProcess]:
    workdir = make_workdir("minik8s-rollout-cm-")
    process = ControllerProcess(workdir, apiserver.url, ["deployment", "replicaset", "garbagecollector"])
    process.start()
    try:
        yield process
    finally:
        process.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def web(node: str, version: str) -> JSONDict:
    """One replica that prints its version and sleeps; a change of VERSION is a new revision."""
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": labels, "annotations": {CHANGE_CAUSE: f"version {version}"}},
        "spec": {
            "replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "nodeName": node, "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": BUSYBOX, "env": [{"name": "VERSION", "value": version}],
                                "command": ["sh", "-c", "echo version $VERSION; exec sleep 3600"]}]}},
        },
    }


def apply(kubectl: Kubectl, path: Path, obj: JSONDict, expected: str) -> None:
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    r = kubectl.run("apply", "-f", str(path)).ok()
    assert r.stdout == f"deployment.apps/web {expected}\n", r


def rollout_done(kubectl: Kubectl) -> None:
    r = kubectl.run("rollout", "status", "deployment/web", f"--timeout={int(ROLLOUT_TIMEOUT)}s",
                    timeout=ROLLOUT_TIMEOUT + 30).ok()
    lines = r.stdout.splitlines()
    assert lines[-1] == 'deployment "web" successfully rolled out', r
    assert all(line.startswith("Waiting for deployment") for line in lines[:-1]), r


def history(kubectl: Kubectl) -> list[tuple[str, str]]:
    """`rollout history`'s rows as (revision, change-cause), after checking its frame."""
    out = kubectl.run("rollout", "history", "deployment/web").ok().stdout
    lines = out.splitlines()
    assert lines[0] == "deployment.apps/web " and re.split(r"\s{2,}", lines[1]) == ["REVISION", "CHANGE-CAUSE"], out
    assert lines[-1] == "", out
    return [tuple(re.split(r"\s{2,}", line, maxsplit=1)) for line in lines[2:-1]]  # type: ignore[misc]


def get(api: httpx.Client, path: str) -> JSONDict:
    r = api.get(path)
    assert r.status_code == 200, r.text
    return r.json()


def live_pods(api: httpx.Client, namespace: str) -> list[JSONDict]:
    items = get(api, f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dweb")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def env_of(template: JSONDict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in template["spec"]["containers"][0].get("env") or []}


def running_version(api: httpx.Client, namespace: str) -> tuple[str, str]:
    """(VERSION of the one live pod, the revision of its ReplicaSet) once the old pods are gone."""
    pods = wait_for(lambda: (ps := live_pods(api, namespace)) and len(ps) == 1
                    and len(get(api, f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dweb")["items"]) == 1
                    and ps, 60, 0.2, what="one pod of the deployment left")
    assert isinstance(pods, list)
    (p,) = pods
    owner = next(o for o in p["metadata"]["ownerReferences"] if o.get("controller"))
    rs = get(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets/{owner['name']}")
    return env_of(p)["VERSION"], rs["metadata"]["annotations"][REVISION]


def test_rollout_status_history_undo_restart(kubectl: Kubectl, api: httpx.Client, namespace: str,
                                             controllers: ControllerProcess, kubelet_node: str,
                                             tmp_path: Path) -> None:
    path = tmp_path / "web.yaml"
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    apply(kubectl, path, web(kubelet_node, "1"), "created")
    rollout_done(kubectl)
    assert running_version(api, namespace) == ("1", "1")

    # paused, a new template cannot roll out: status says so and keeps waiting until resume
    r = kubectl.run("rollout", "pause", "deployment/web").ok()
    assert r.stdout == "deployment.apps/web paused\n", r
    apply(kubectl, path, web(kubelet_node, "2"), "configured")
    with kubectl.watch("rollout", "status", "deployment/web", f"--timeout={int(ROLLOUT_TIMEOUT)}s") as status:
        status.wait_for_line(lambda line: line == 'Waiting for deployment "web" rollout to finish: 0 out of 1 new '
                                                  "replicas have been updated...", 60, what="the paused state")
        assert status.proc.poll() is None, status.output()
        r = kubectl.run("rollout", "resume", "deployment/web").ok()
        assert r.stdout == "deployment.apps/web resumed\n", r
        status.wait_for_line(lambda line: line == 'deployment "web" successfully rolled out', ROLLOUT_TIMEOUT,
                             what="the end of the rollout")
        assert status.proc.wait(30) == 0, status.output()
    assert running_version(api, namespace) == ("2", "2")

    # history: one row per ReplicaSet revision, the change-cause copied from the Deployment
    assert history(kubectl) == [("1", "version 1"), ("2", "version 2")]
    detail = kubectl.run("rollout", "history", "deployment/web", "--revision=1").ok().stdout
    assert detail.startswith("deployment.apps/web with revision #1\nPod Template:\n"), detail
    assert re.search(r"^\s+VERSION:\s+1$", detail, re.M) and not re.search(r"VERSION:\s+2", detail), detail
    assert re.search(r"^\s+Labels:\s+app=web$", detail, re.M), detail
    r = kubectl.run("rollout", "history", "deployment/web", "--revision=7")
    assert r.returncode == 1 and "unable to find the specified revision" in r.stderr, r

    # undo: kubectl reads the ReplicaSets and patches the Deployment; revision 1 comes back as 3
    r = kubectl.run("rollout", "undo", "deployment/web").ok()
    assert r.stdout == "deployment.apps/web rolled back\n", r
    d = get(api, deployment)
    assert env_of(d["spec"]["template"]) == {"VERSION": "1"}
    assert d["metadata"]["annotations"][CHANGE_CAUSE] == "version 1"
    rollout_done(kubectl)
    assert running_version(api, namespace) == ("1", "3")
    assert history(kubectl) == [("2", "version 2"), ("3", "version 1")]

    r = kubectl.run("rollout", "undo", "deployment/web", "--to-revision=2").ok()
    assert r.stdout == "deployment.apps/web rolled back\n", r
    rollout_done(kubectl)
    assert running_version(api, namespace) == ("2", "4")
    assert history(kubectl) == [("3", "version 1"), ("4", "version 2")]
    before = get(api, deployment)
    r = kubectl.run("rollout", "undo", "deployment/web", "--to-revision=9")
    assert r.returncode == 1 and r.stderr.strip() == "error: unable to find specified revision 9 in history", r
    assert get(api, deployment)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    # restart: the restartedAt annotation makes a new template, so a new ReplicaSet and new pods
    old_pods = {p["metadata"]["name"] for p in live_pods(api, namespace)}
    r = kubectl.run("rollout", "restart", "deployment/web").ok()
    assert r.stdout == "deployment.apps/web restarted\n", r
    restarted_at = get(api, deployment)["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT]
    rollout_done(kubectl)
    assert running_version(api, namespace) == ("2", "5")
    (p,) = live_pods(api, namespace)
    assert p["metadata"]["name"] not in old_pods
    assert p["metadata"]["annotations"][RESTARTED_AT] == restarted_at
    assert [rev for rev, _ in history(kubectl)] == ["3", "4", "5"]

    # the container of the running revision, through the deployment
    logs = wait_for(lambda: kubectl.run("logs", "deployment/web").ok().stdout, 30, 0.5, what="logs of the pod")
    assert logs == "version 2\n"

    check_events_sorted_by_creation(kubectl, api, namespace)


def check_events_sorted_by_creation(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:
    """`get events --sort-by=.metadata.creationTimestamp` (kubectl asks for full objects in the Table rows) lists
    every event of the namespace, oldest first; what the controllers and the kubelet reported is among them."""
    r = kubectl.run("get", "events", "--sort-by=.metadata.creationTimestamp").ok()
    lines = r.stdout.splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], r
    rows = [tuple(re.split(r"\s{2,}", line.strip(), maxsplit=4)[2:]) for line in lines[1:]]

    def object_of(e: JSONDict) -> str:
        o = e["involvedObject"]
        return f"{o['kind'].lower()}/{o['name']}"

    events = get(api, f"/api/v1/namespaces/{namespace}/events")["items"]
    created: dict[tuple[str, ...], list[str]] = {}
    for e in events:
        created.setdefault((e["reason"], object_of(e), e["message"].strip()), []).append(
            e["metadata"]["creationTimestamp"])
    assert Counter(rows) == Counter({k: len(v) for k, v in created.items()}), r
    for earlier, later in itertools.pairwise(rows):
        assert min(created[earlier]) <= max(created[later]), f"{earlier} listed before {later}\n{r.stdout}"
    reasons = {reason for reason, _, _ in rows}
    assert {"ScalingReplicaSet", "SuccessfulCreate", "Started"} <= reasons, r.stdout
    assert ("ScalingReplicaSet", "deployment/web") in {(reason, obj) for reason, obj, _ in rows}, r.stdout


def test_rollout_status_exit_codes(kubectl: Kubectl, api: httpx.Client, namespace: str,
                                   controllers: ControllerProcess, tmp_path: Path) -> None:
    """A rollout that cannot finish (its pods sit on a node no kubelet serves): --timeout ends it with exit 1;
    once the progress deadline passes the controller says so and kubectl stops with that error; unknown: 1."""
    stuck = web("no-such-node", "1")
    stuck["spec"]["progressDeadlineSeconds"] = 3
    apply(kubectl, tmp_path / "stuck.yaml", stuck, "created")
    r = kubectl.run("rollout", "status", "deployment/web", "--timeout=1s")
    assert r.returncode == 1, r
    assert r.stderr.strip().splitlines()[-1] == "error: timed out waiting for the condition", r

    def deadline_exceeded() -> bool:
        conditions = get(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/web")["status"].get("conditions")
        return any(c["type"] == "Progressing" and c["reason"] == "ProgressDeadlineExceeded" for c in conditions or [])

    wait_for(deadline_exceeded, 60, 0.2, what="the Progressing condition to say ProgressDeadlineExceeded")
    r = kubectl.run("rollout", "status", "deployment/web", f"--timeout={int(ROLLOUT_TIMEOUT)}s")
    assert r.returncode == 1, r
    assert r.stderr.strip() == 'error: deployment "web" exceeded its progress deadline', r

    r = kubectl.run("rollout", "status", "deployment/nope")
    assert r.returncode == 1, r
    assert r.stderr.strip() == 'Error from server (NotFound): deployments.apps "nope" not found', r


# -- logs and exec on one pod of this module -------------------------------------------------------------


@pytest.fixture(scope="module")
def ticker(apiserver: ApiServer, kubelet_node: str) -> Iterator[tuple[str, str]]:
    """(namespace, pod): container `c` prints `start` then `tick N` every 0.2 s; container `d` prints `other`."""
    namespace = f"t-logs-{uuid.uuid4().hex[:8]}"
    script = 'echo start; i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 0.2; done'
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ticker"}, "spec": {
        "nodeName": kubelet_node, "terminationGracePeriodSeconds": 1, "containers": [
            {"name": "c", "image": BUSYBOX, "command": ["sh", "-c", script]},
            {"name": "d", "image": BUSYBOX, "command": ["sh", "-c", "echo other; exec sleep 3600"]}]}}
    with httpx.Client(base_url=apiserver.url, timeout=10) as api:
        r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": namespace}})
        assert r.status_code == 201, r.text
        try:
            r = api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod)
            assert r.status_code == 201, r.text

            def running() -> bool:
                statuses = (get(api, f"/api/v1/namespaces/{namespace}/pods/ticker").get("status") or {}).get(
                    "containerStatuses") or []
                return len(statuses) == 2 and all("running" in s["state"] for s in statuses)

            wait_for(running, 90, 0.2, what="both containers of the ticker running")
            yield namespace, "ticker"
        finally:
            api.delete(f"/api/v1/namespaces/{namespace}/pods/ticker", params={"gracePeriodSeconds": "0"})
            api.delete(f"/api/v1/namespaces/{namespace}")


@pytest.fixture(params=VERSIONS, ids=[f"kubectl{v}" for v in VERSIONS])
def pod_kubectl(request: pytest.FixtureRequest, tmp_path: Path, ticker: tuple[str, str]) -> Kubectl:
    binary = binary_or_skip(request.param)
    apiserver: ApiServer = request.getfixturevalue("apiserver")
    return Kubectl(binary, request.param, apiserver.url, tmp_path / "kubectl", ticker[0])


def tick(line: str) -> int | None:
    m = re.fullmatch(r"tick (\d+)", line)
    return int(m.group(1)) if m else None


def test_logs(pod_kubectl: Kubectl, ticker: tuple[str, str]) -> None:
    kubectl, (_, pod) = pod_kubectl, ticker
    wait_for(lambda: len(kubectl.run("logs", pod, "-c", "c").ok().stdout.splitlines()) >= 3, 30, 0.2,
             what="a few ticks")
    lines = kubectl.run("logs", pod, "-c", "c").ok().stdout.splitlines()
    assert lines[0] == "start" and [tick(line) for line in lines[1:]] == list(range(1, len(lines))), lines
    assert kubectl.run("logs", pod, "-c", "d").ok().stdout == "other\n"
    r = kubectl.run("logs", pod).ok()  # two containers: the first, with a note on stderr
    assert r.stdout.startswith("start\ntick 1\n"), r
    assert r.stderr.strip() == 'Defaulted container "c" out of: c, d', r
    (last,) = kubectl.run("logs", pod, "-c", "c", "--tail=1").ok().stdout.splitlines()
    assert (tick(last) or 0) >= len(lines) - 1, last
    r = kubectl.run("logs", pod, "-c", "nope")  # kubectl checks the name itself against the pod it read
    assert (r.returncode, r.stderr) == (1, "error: container nope is not valid for pod ticker\n"), r


def test_logs_follow_streams_new_lines(pod_kubectl: Kubectl, ticker: tuple[str, str]) -> None:
    """`logs -f --tail=1`: the newest line at once, then every line written after it, in order, while the
    command keeps running."""
    kubectl, (_, pod) = pod_kubectl, ticker
    with kubectl.watch("logs", "-f", pod, "-c", "c", "--tail=1") as follow:
        first = tick(follow.wait_for_line(lambda line: tick(line) is not None, 60, what="the newest tick"))
        assert first is not None
        follow.wait_for_line(lambda line: (tick(line) or 0) >= first + 5, 60, what="five ticks written later")
        assert [tick(line) for line in follow.lines] == list(range(first, first + len(follow.lines))), follow.output()
        assert follow.proc.poll() is None, follow.output()


@pytest.mark.parametrize("version", EXEC_VERSIONS, ids=[f"kubectl{v}" for v in EXEC_VERSIONS])
def test_exec(version: str, apiserver: ApiServer, ticker: tuple[str, str], tmp_path: Path) -> None:
    namespace, pod = ticker
    kubectl = Kubectl(binary_or_skip(version), version, apiserver.url, tmp_path / "kubectl", namespace)
    r = kubectl.run("exec", pod, "-c", "d", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (r.returncode, r.stdout) == (3, "out\n"), r
    assert r.stderr.splitlines() == ["err", "command terminated with exit code 3"], r
    r = kubectl.run("exec", "-i", pod, "-c", "d", "--", "tr", "a-z", "A-Z", stdin="piped in\n").ok()
    assert r.stdout == "PIPED IN\n", r
    r = kubectl.run("exec", pod, "--", "hostname").ok()  # no -c: the first container, with a note
    assert r.stdout == "ticker\n" and 'Defaulted container "c" out of: c, d' in r.stderr, r
    # what the container sees is the pod's: its environment and its process, not the host's
    env = kubectl.run("exec", pod, "-c", "d", "--", "sh", "-c", "echo $HOSTNAME; cat /proc/1/cmdline").ok().stdout
    assert env.split("\n", 1)[0] == "ticker" and "sleep" in env, env
    r = kubectl.run("exec", pod, "-c", "nope", "--", "true")
    assert r.returncode == 1, r
    assert r.stderr.strip() == "Error from server (BadRequest): container nope is not valid for pod ticker", r
    r = kubectl.run("exec", "nope", "--", "true")
    assert r.returncode == 1 and r.stderr.strip() == 'Error from server (NotFound): pods "nope" not found', r
