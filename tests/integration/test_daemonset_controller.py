"""DaemonSets on a real cluster of the module's own: etcd, apiserver, the default scheduler, the
controller-manager (daemonset and garbagecollector controllers) and two kubelets running the pods as Docker
containers. One pod per node, placed by the scheduler through the `metadata.name In [node]` affinity the
controller writes; a node tainted NoSchedule gets none from a DaemonSet without the toleration; a
nodeSelector follows node labels; RollingUpdate with maxUnavailable 1 replaces pods one node at a time
(never both down); OnDelete waits for a delete; ControllerRevisions make real kubectl's `rollout status,
history, undo ds/x` work; deleting the DaemonSet removes its pods and revisions; `kubectl get ds` columns in
1.27 and 1.33; the official Python client reads them. Every wait has a deadline."""

from __future__ import annotations

import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster import ApiServer, Etcd, make_workdir, wait_for
from tests.controller_process import ControllerProcess
from tests.kubectl import Kubectl, find_kubectl, write_kubeconfig
from tests.scheduler_process import SchedulerProcess

JSONDict = dict[str, Any]
VERSIONS = ("1.27", "1.33")
ROLL_TIMEOUT = 120.0
TAINT = "minik8s.test/dedicated"
HASH_LABEL = "controller-revision-hash"


@dataclass
class Cluster:
    apiserver: ApiServer
    url: str
    api: httpx.Client
    nodes: list[str]


@pytest.fixture(scope="module")
def cluster(workdir: Path, own_etcd: Etcd) -> Iterator[Cluster]:
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine to run a kubelet's pods: {e}")
    from tests.node_process import KubeletProcess, cleanup, ensure_images, free_pod_cidrs

    ensure_images()
    folder = make_workdir("minik8s-ds-")
    apiserver = ApiServer(folder, own_etcd)
    apiserver.start()
    scheduler = SchedulerProcess(folder, apiserver.url)
    controllers = ControllerProcess(folder, apiserver.url, ["daemonset", "garbagecollector"])
    suffix = uuid.uuid4().hex[:6]
    kubelets = [KubeletProcess(folder, apiserver, f"ds-{suffix}-{i}", cidr)
                for i, cidr in enumerate(free_pod_cidrs(2))]
    try:
        scheduler.start()
        controllers.start()
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            for kubelet in kubelets:
                kubelet.start(api)
            yield Cluster(apiserver, apiserver.url, api, [k.node for k in kubelets])
    finally:
        cleanup(kubelets)
        controllers.stop()
        scheduler.stop()
        apiserver.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def ns(cluster: Cluster) -> Iterator[str]:
    name = f"ds-{uuid.uuid4().hex[:6]}"
    r = cluster.api.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert r.status_code == 201, r.text
    yield name
    # the pods go with their DaemonSets (garbage collector); the namespace's objects are left to the etcd's end
    for ds in cluster.api.get(f"/apis/apps/v1/namespaces/{name}/daemonsets").json().get("items") or []:
        cluster.api.delete(f"/apis/apps/v1/namespaces/{name}/daemonsets/{ds['metadata']['name']}")


def daemon_set(name: str, version: str = "1", **spec: Any) -> JSONDict:
    from tests.node_process import BUSYBOX

    labels = {"app": name}
    pod_spec = {"terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": BUSYBOX, "env": [{"name": "VERSION", "value": version}],
                                "command": ["sh", "-c", "exec sleep 3600"]}]}
    pod_spec.update(spec.pop("pod", {}))
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}, **spec}}


def get(api: httpx.Client, path: str) -> JSONDict:
    r = api.get(path)
    assert r.status_code == 200, r.text
    return r.json()


def pods_of(api: httpx.Client, ns: str, name: str) -> list[JSONDict]:
    return get(api, f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3D{name}")["items"]


def live(pods: list[JSONDict]) -> list[JSONDict]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def is_ready(pod: JSONDict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions") or [])


def version_of(pod: JSONDict) -> str:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}["VERSION"]


def placed(api: httpx.Client, ns: str, name: str, expected: dict[str, str],
           timeout: float = 90.0) -> dict[str, JSONDict]:
    """Wait until exactly the nodes in `expected` (node -> VERSION) each run one ready pod of `name` and no
    other pod of it is left (terminating ones included)."""
    def check() -> dict[str, JSONDict] | None:
        pods = pods_of(api, ns, name)
        if len(pods) != len(expected) or not all(is_ready(p) for p in pods):
            return None
        by_node = {p["spec"].get("nodeName"): p for p in pods}
        if {n: version_of(p) for n, p in by_node.items()} != expected:
            return None
        return by_node
    result = wait_for(check, timeout, 0.2, what=f"{name}'s pods on {expected}")
    assert isinstance(result, dict)
    return result


def ds_status(api: httpx.Client, ns: str, name: str) -> JSONDict:
    return get(api, f"/apis/apps/v1/namespaces/{ns}/daemonsets/{name}")


def kubectl_for(version: str, cluster: Cluster, ns: str, tmp_path: Path) -> Kubectl:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed")
    return Kubectl(binary, version, cluster.url, tmp_path / f"kubectl-{version}", ns)


def set_taint(api: httpx.Client, node: str, taints: list[JSONDict]) -> None:
    r = api.patch(f"/api/v1/nodes/{node}", json={"spec": {"taints": taints or None}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


def set_label(api: httpx.Client, node: str, key: str, value: str | None) -> None:
    r = api.patch(f"/api/v1/nodes/{node}", json={"metadata": {"labels": {key: value}}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


# -- placement -------------------------------------------------------------------------------------


def test_one_pod_per_node_through_the_scheduler(cluster: Cluster, ns: str) -> None:
    api = cluster.api
    r = api.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", json=daemon_set("agent"))
    assert r.status_code == 201, r.text
    by_node = placed(api, ns, "agent", dict.fromkeys(cluster.nodes, "1"))
    for node, pod in by_node.items():
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms == {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                                 "values": [node]}]}]}
        tolerations = {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]}
        assert {("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
                ("node.kubernetes.io/unschedulable", "NoSchedule")} <= tolerations
        assert pod["metadata"]["labels"]["pod-template-generation"] == "1"
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    status = wait_for(lambda: (s := ds_status(api, ns, "agent")["status"]).get("numberAvailable") == 2 and s, 30,
                      what="status of agent")
    assert isinstance(status, dict)
    assert status["desiredNumberScheduled"] == status["currentNumberScheduled"] == status["numberReady"] == 2
    assert status["updatedNumberScheduled"] == 2 and status["numberMisscheduled"] == 0
    revisions = get(api, f"/apis/apps/v1/namespaces/{ns}/controllerrevisions")["items"]
    assert [(r["revision"], r["metadata"]["labels"][HASH_LABEL]) for r in revisions] == [
        (1, by_node[cluster.nodes[0]]["metadata"]["labels"][HASH_LABEL])]
    events = get(api, f"/api/v1/namespaces/{ns}/events")["items"]
    created = [e for e in events if e["reason"] == "SuccessfulCreate" and e["involvedObject"]["name"] == "agent"]
    assert len(created) == 2 and all(e["message"].startswith("Created pod: agent-") for e in created)


def test_tainted_node_without_toleration_gets_none(cluster: Cluster, ns: str) -> None:
    api = cluster.api
    tainted, other = cluster.nodes[1], cluster.nodes[0]
    set_taint(api, tainted, [{"key": TAINT, "value": "db", "effect": "NoSchedule"}])
    try:
        for name, pod in (("picky", {}), ("tolerant", {"tolerations": [{"key": TAINT, "operator": "Exists"}]})):
            r = api.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", json=daemon_set(name, pod=pod))
            assert r.status_code == 201, r.text
        placed(api, ns, "tolerant", {other: "1", tainted: "1"})
        placed(api, ns, "picky", {other: "1"})
        status = ds_status(api, ns, "picky")["status"]
        assert status["desiredNumberScheduled"] == 1
        # NoSchedule keeps new pods off but evicts none: lifting it brings one
        set_taint(api, tainted, [])
        placed(api, ns, "picky", {other: "1", tainted: "1"})
    finally:
        set_taint(api, tainted, [])


def test_node_selector_follows_node_labels(cluster: Cluster, ns: str) -> None:
    api = cluster.api
    key = f"minik8s.test/ds-{ns}"
    set_label(api, cluster.nodes[0], key, "yes")
    try:
        r = api.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets",
                     json=daemon_set("selected", pod={"nodeSelector": {key: "yes"}}))
        assert r.status_code == 201, r.text
        placed(api, ns, "selected", {cluster.nodes[0]: "1"})
        set_label(api, cluster.nodes[1], key, "yes")
        placed(api, ns, "selected", {cluster.nodes[0]: "1", cluster.nodes[1]: "1"})
        set_label(api, cluster.nodes[0], key, None)  # no longer eligible: its pod goes
        placed(api, ns, "selected", {cluster.nodes[1]: "1"})
    finally:
        for node in cluster.nodes:
            set_label(api, node, key, None)


def test_a_node_added_later_gets_one_and_a_removed_node_loses_it(cluster: Cluster, ns: str) -> None:
    from tests.node_process import KubeletProcess, cleanup, free_pod_cidrs

    api = cluster.api
    r = api.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", json=daemon_set("everywhere"))
    assert r.status_code == 201, r.text
    placed(api, ns, "everywhere", dict.fromkeys(cluster.nodes, "1"))
    folder = make_workdir("minik8s-ds-third-")
    third = KubeletProcess(folder, cluster.apiserver, f"{cluster.nodes[0][:-2]}-3", free_pod_cidrs(1)[0])
    try:
        third.start(api)
        placed(api, ns, "everywhere", dict.fromkeys([*cluster.nodes, third.node], "1"))
        cleanup([third])
        assert api.delete(f"/api/v1/nodes/{third.node}").status_code == 200
        # its pod is pinned to a node that is gone: the controller deletes it (no kubelet is left to confirm,
        # so it stays terminating; the garbage of a gone node is the pod GC's)
        def released() -> bool:
            pods = [p for p in pods_of(api, ns, "everywhere") if p["spec"].get("nodeName") == third.node]
            return all(p["metadata"].get("deletionTimestamp") for p in pods)
        wait_for(released, 30, 0.2, what="the gone node's pod deleted")
        status = wait_for(lambda: (s := ds_status(api, ns, "everywhere")["status"])["desiredNumberScheduled"] == 2
                          and s, 30, what="desired back to 2")
        assert isinstance(status, dict) and status["currentNumberScheduled"] == 2
    finally:
        cleanup([third])
        api.delete(f"/api/v1/nodes/{third.node}")
        shutil.rmtree(folder, ignore_errors=True)


# -- updates ---------------------------------------------------------------------------------------


def test_rolling_update_history_undo_with_kubectl(cluster: Cluster, ns: str, tmp_path: Path) -> None:
    api = cluster.api
    kubectl = kubectl_for("1.33", cluster, ns, tmp_path)
    manifest = tmp_path / "roll.yaml"
    manifest.write_text(yaml.safe_dump(daemon_set("roll", "1")))
    assert kubectl.run("apply", "-f", str(manifest)).ok().stdout == "daemonset.apps/roll created\n"
    r = kubectl.run("rollout", "status", "ds/roll", f"--timeout={int(ROLL_TIMEOUT)}s", timeout=ROLL_TIMEOUT + 30).ok()
    assert r.stdout.splitlines()[-1] == 'daemon set "roll" successfully rolled out', r
    placed(api, ns, "roll", dict.fromkeys(cluster.nodes, "1"))

    manifest.write_text(yaml.safe_dump(daemon_set("roll", "2")))
    assert kubectl.run("apply", "-f", str(manifest)).ok().stdout == "daemonset.apps/roll configured\n"
    # maxUnavailable 1 of 2 nodes: at every sample at least one node has a ready pod, and the nodes are
    # replaced one after the other
    deadline = time.monotonic() + ROLL_TIMEOUT
    finished_at: dict[str, float] = {}
    while True:
        pods = pods_of(api, ns, "roll")
        ready = [p for p in live(pods) if is_ready(p)]
        assert ready, f"both nodes down at once during a maxUnavailable 1 rollout: {pods}"
        for p in ready:
            if version_of(p) == "2":
                finished_at.setdefault(p["spec"]["nodeName"], time.monotonic())
        if len(finished_at) == 2 and len(pods) == 2:
            break
        assert time.monotonic() < deadline, f"rollout did not finish: {pods}"
        time.sleep(0.1)
    for version in VERSIONS:
        r = kubectl_for(version, cluster, ns, tmp_path).run("rollout", "status", "ds/roll",
                                                            f"--timeout={int(ROLL_TIMEOUT)}s",
                                                            timeout=ROLL_TIMEOUT + 30).ok()
        assert r.stdout.splitlines()[-1] == 'daemon set "roll" successfully rolled out', r

    out = kubectl.run("rollout", "history", "ds/roll").ok().stdout
    lines = out.splitlines()
    assert lines[0].strip() == "daemonset.apps/roll", out
    assert [re.split(r"\s{2,}", line.strip())[0] for line in lines[2:] if line.strip()] == ["1", "2"], out
    detail = kubectl.run("rollout", "history", "ds/roll", "--revision=1").ok().stdout
    assert re.search(r"VERSION:\s+1", detail) and not re.search(r"VERSION:\s+2", detail), detail

    events = get(api, f"/api/v1/namespaces/{ns}/events")["items"]
    deleted = [e["message"] for e in events
               if e["reason"] == "SuccessfulDelete" and e["involvedObject"]["name"] == "roll"]
    assert len(deleted) == 2 and all(m.startswith("Deleted pod: roll-") for m in deleted), deleted

    r = kubectl.run("rollout", "undo", "ds/roll").ok()
    assert r.stdout == "daemonset.apps/roll rolled back\n", r
    placed(api, ns, "roll", dict.fromkeys(cluster.nodes, "1"), timeout=ROLL_TIMEOUT)
    revisions = {r["revision"] for r in get(api, f"/apis/apps/v1/namespaces/{ns}/controllerrevisions")["items"]}
    assert revisions == {2, 3}  # revision 1's template came back as revision 3
    ds = ds_status(api, ns, "roll")
    assert ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "3"


def test_on_delete_waits_for_a_delete(cluster: Cluster, ns: str) -> None:
    api = cluster.api
    r = api.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets",
                 json=daemon_set("manual", "1", updateStrategy={"type": "OnDelete"}))
    assert r.status_code == 201, r.text
    before = placed(api, ns, "manual", dict.fromkeys(cluster.nodes, "1"))
    r = api.patch(f"/apis/apps/v1/namespaces/{ns}/daemonsets/manual",
                  json={"spec": {"template": {"spec": {"containers": [
                      {"name": "c", "env": [{"name": "VERSION", "value": "2"}]}]}}}},
                  headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 200, r.text
    generation = r.json()["metadata"]["generation"]
    # the controller has seen the new template (a new revision, status observed) and replaced nothing
    wait_for(lambda: (s := ds_status(api, ns, "manual")["status"]).get("observedGeneration") == generation
             and "updatedNumberScheduled" not in s, 30, what="OnDelete status after the change (0: omitted)")
    assert len(get(api, f"/apis/apps/v1/namespaces/{ns}/controllerrevisions")["items"]) == 2
    assert {p["metadata"]["uid"] for p in pods_of(api, ns, "manual")} == {p["metadata"]["uid"] for p in before.values()}
    doomed = before[cluster.nodes[0]]
    assert api.delete(f"/api/v1/namespaces/{ns}/pods/{doomed['metadata']['name']}").status_code == 200
    placed(api, ns, "manual", {cluster.nodes[0]: "2", cluster.nodes[1]: "1"})


def test_get_ds_columns_python_client_and_delete(cluster: Cluster, ns: str, tmp_path: Path) -> None:
    api = cluster.api
    r = api.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", json=daemon_set("shown"))
    assert r.status_code == 201, r.text
    placed(api, ns, "shown", dict.fromkeys(cluster.nodes, "1"))
    wait_for(lambda: ds_status(api, ns, "shown")["status"].get("numberAvailable") == 2, 30, what="shown available")
    for version in VERSIONS:
        kubectl = kubectl_for(version, cluster, ns, tmp_path)
        out = kubectl.run("get", "ds").ok().stdout.splitlines()
        assert re.split(r"\s{2,}", out[0].strip()) == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE",
                                                        "AVAILABLE", "NODE SELECTOR", "AGE"], out
        assert re.split(r"\s{2,}", out[1].strip())[:7] == ["shown", "2", "2", "2", "2", "2", "<none>"], out
        wide = kubectl.run("get", "ds", "-o", "wide").ok().stdout.splitlines()
        assert re.split(r"\s{2,}", wide[0].strip())[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"], wide
        assert wide[1].split()[-1] == "app=shown", wide

    from kubernetes import client, config

    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
    with config.new_client_from_config(config_file=str(kubeconfig)) as api_client:
        apps = client.AppsV1Api(api_client)
        ds = apps.read_namespaced_daemon_set_status("shown", ns)
        assert ds.status.desired_number_scheduled == 2 and ds.status.number_ready == 2
        assert ds.spec.update_strategy.rolling_update.max_unavailable == 1
        revisions = apps.list_namespaced_controller_revision(ns, label_selector="app=shown").items
        assert [r.revision for r in revisions] == [1]
        apps.delete_namespaced_daemon_set("shown", ns, propagation_policy="Background")

    def gone() -> bool:
        return not pods_of(api, ns, "shown") and not get(
            api, f"/apis/apps/v1/namespaces/{ns}/controllerrevisions?labelSelector=app%3Dshown")["items"]
    wait_for(gone, 60, 0.2, what="the DaemonSet's pods and revisions to go with it")


def test_mkubectl_rollout_matches_kubectl(cluster: Cluster, ns: str, tmp_path: Path) -> None:
    from tests.integration.test_mkubectl import Mk

    api = cluster.api
    kubectl = kubectl_for("1.33", cluster, ns, tmp_path)
    mk = Mk(cluster.url, tmp_path / "mk", ns)
    r = api.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", json=daemon_set("mk", "1"))
    assert r.status_code == 201, r.text
    placed(api, ns, "mk", dict.fromkeys(cluster.nodes, "1"))
    r = api.patch(f"/apis/apps/v1/namespaces/{ns}/daemonsets/mk",
                  json={"metadata": {"annotations": {"kubernetes.io/change-cause": "to two"}},
                        "spec": {"template": {"spec": {"containers": [
                            {"name": "c", "env": [{"name": "VERSION", "value": "2"}]}]}}}},
                  headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 200, r.text
    placed(api, ns, "mk", dict.fromkeys(cluster.nodes, "2"), timeout=ROLL_TIMEOUT)
    status = mk.run("rollout", "status", "ds/mk", "--timeout=60s").ok().stdout
    assert status.splitlines()[-1] == 'daemon set "mk" successfully rolled out', status
    for args in (("rollout", "history", "ds/mk"), ("rollout", "history", "ds/mk", "--revision=1"),
                 ("rollout", "history", "ds/mk", "--revision=2")):
        assert mk.run(*args).ok().stdout == kubectl.run(*args).ok().stdout, args
    assert "to two" in mk.run("rollout", "history", "ds/mk").stdout
    for args in (("rollout", "undo", "ds/mk", "--to-revision=5"), ("rollout", "history", "ds/mk", "--revision=5")):
        mine, theirs = mk.run(*args), kubectl.run(*args)
        assert (mine.returncode, mine.stderr) == (theirs.returncode, theirs.stderr), (mine, theirs)

    assert mk.run("rollout", "undo", "ds/mk").ok().stdout == "daemonset.apps/mk rolled back\n"
    placed(api, ns, "mk", dict.fromkeys(cluster.nodes, "1"), timeout=ROLL_TIMEOUT)
    assert mk.run("rollout", "history", "ds/mk").ok().stdout == kubectl.run("rollout", "history", "ds/mk").ok().stdout

    r = api.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets",
                 json=daemon_set("manual-mk", updateStrategy={"type": "OnDelete"}))
    assert r.status_code == 201, r.text
    mine, theirs = mk.run("rollout", "status", "ds/manual-mk"), kubectl.run("rollout", "status", "ds/manual-mk")
    assert mine.returncode == theirs.returncode == 1 and mine.stderr == theirs.stderr, (mine, theirs)


def test_bad_input_is_refused_and_nothing_is_written(cluster: Cluster, ns: str, tmp_path: Path) -> None:
    api = cluster.api
    bad = daemon_set("bad")
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    r = api.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", json=bad)
    assert r.status_code == 422, r.text
    status = r.json()
    assert status["reason"] == "Invalid" and status["details"]["kind"] == "DaemonSet"
    assert status["message"] == ('DaemonSet.apps "bad" is invalid: spec.template.metadata.labels: Invalid value: '
                                 'map[string]string{"app":"other"}: `selector` does not match template `labels`')
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.template.metadata.labels"]
    assert api.get(f"/apis/apps/v1/namespaces/{ns}/daemonsets/bad").status_code == 404

    manifest = tmp_path / "bad.yaml"
    both = daemon_set("bad", updateStrategy={"type": "RollingUpdate",
                                             "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}})
    manifest.write_text(yaml.safe_dump(both))
    r = kubectl_for("1.33", cluster, ns, tmp_path).run("apply", "-f", str(manifest))
    assert r.returncode == 1, r
    assert ('The DaemonSet "bad" is invalid: spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: '
            "may not be set when maxUnavailable is non-zero") in r.stderr, r
    assert api.get(f"/apis/apps/v1/namespaces/{ns}/daemonsets/bad").status_code == 404

    r = api.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", json=daemon_set("fixed"))
    assert r.status_code == 201, r.text
    r = api.patch(f"/apis/apps/v1/namespaces/{ns}/daemonsets/fixed",
                  json={"spec": {"selector": {"matchLabels": {"app": "fixed", "more": "x"}}}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422 and "field is immutable" in r.json()["message"], r.text


def test_the_controller_writes_as_its_service_account_under_rbac(workdir: Path) -> None:
    """Over HTTPS with RBAC, the controller-manager writes as system:serviceaccount:kube-system:daemon-set-controller:
    its bootstrap role lets it create revisions and pods, write status and events (a Node object, no kubelet)."""
    from apiserver.audit import filter_events
    from tests.auth_cluster import SecureApiServer

    folder = make_workdir("minik8s-ds-rbac-")
    etcd = Etcd(folder)
    etcd.start()
    secure = SecureApiServer(folder, etcd)
    controllers = ControllerProcess(folder, secure.secure_url, ["daemonset"],
                                    "--kubeconfig", str(secure.kubeconfig("controller-manager")))
    try:
        secure.start()
        controllers.start()
        with secure.client("admin") as admin:
            resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
            r = admin.post("/api/v1/nodes", json={"metadata": {"name": "node-a"}, "status": {
                "capacity": resources, "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
            assert r.status_code == 201, r.text
            r = admin.post("/apis/apps/v1/namespaces/default/daemonsets", json=daemon_set("secured"))
            assert r.status_code == 201, r.text

            def written() -> bool:
                ds = admin.get("/apis/apps/v1/namespaces/default/daemonsets/secured").json()
                pods = admin.get("/api/v1/namespaces/default/pods").json()["items"]
                return (ds.get("status", {}).get("currentNumberScheduled") == 1 and len(pods) == 1
                        and len(admin.get("/apis/apps/v1/namespaces/default/controllerrevisions").json()["items"]) == 1)
            wait_for(written, 30, 0.2, what=f"the DaemonSet's pod, revision and status\n{controllers.log_tail()}")
        writers = {(e["objectRef"]["resource"], e["objectRef"].get("subresource")): e["user"]["username"]
                   for e in filter_events(secure.audit_events(), namespace="default")
                   if (e["verb"] in ("create", "update") and e["objectRef"]["resource"] != "daemonsets")
                   or e["objectRef"].get("subresource") == "status"}
        account = "system:serviceaccount:kube-system:daemon-set-controller"
        assert writers[("pods", None)] == writers[("controllerrevisions", None)] == account, writers
        assert writers[("daemonsets", "status")] == account, writers
        assert writers[("events", None)] == account, writers
        denied = [e for e in secure.audit_events() if e["user"]["username"] == account
                  and (e.get("responseStatus") or {}).get("code") == 403]
        assert denied == [], denied
    finally:
        controllers.stop()
        secure.stop()
        etcd.stop()
        shutil.rmtree(folder, ignore_errors=True)
