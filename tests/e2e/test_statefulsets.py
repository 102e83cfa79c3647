"""StatefulSets on a whole cluster (shared with test_services: etcd, apiserver, every controller, the scheduler, two
kubelets running Docker containers, kube-proxy and the cluster DNS): a set of 3 starts web-0, web-1, web-2 in
that order, each only once the one before is Running and Ready; each pod is named `web-<n>` with hostname
`web-<n>` under the headless Service, so `web-0.nginx.<ns>.svc.cluster.local` resolves from a pod; a deleted
pod comes back under its name; a scale-down removes the highest ordinal first; a rolling update with a
partition replaces only the ordinals at or above it, from the highest down; real kubectl 1.27 and 1.33 and
mkubectl drive `rollout status/history/undo`, `scale` and `get sts`; volumeClaimTemplates make one claim per
ordinal (`data-db-<n>`) that a recreated pod finds again (the same uid) and that goes with its pod or set as
the retention policy says (checked at the API level: the nodes cannot mount claims yet); bad input is refused
with upstream's 422 messages and writes nothing. Every wait is a condition with a deadline."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from machinery.timeutil import parse_rfc3339
from tests.cluster import wait_for
from tests.e2e.local_cluster import CLUSTER_DOMAIN, LocalCluster
from tests.integration.test_mkubectl import Mk
from tests.kubectl import Kubectl, find_kubectl
from tests.node_process import BUSYBOX

JSONDict = dict[str, Any]
VERSIONS = ("1.27", "1.33")
TIMEOUT = 150.0
HASH_LABEL = "controller-revision-hash"
# ready only after a moment, so a pod created before its predecessor is ready would be seen doing so
SERVE = "mkdir -p /w && hostname > /w/index.html && sleep 1 && touch /w/ready && exec httpd -f -p 80 -h /w"


# -- the cluster ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_cluster(service_cluster: LocalCluster) -> LocalCluster:
    """The package's cluster with the Service network (conftest's service_cluster, shared with test_services;
    overrides the plain one here)."""
    return service_cluster


@pytest.fixture(scope="module")
def api(local_cluster: LocalCluster) -> Iterator[httpx.Client]:
    with local_cluster.client(timeout=30) as client:
        yield client


@pytest.fixture
def ns(api: httpx.Client) -> Iterator[str]:
    name = f"sts-{uuid.uuid4().hex[:6]}"
    r = api.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert r.status_code == 201, r.text
    yield name
    api.delete(f"/api/v1/namespaces/{name}")


def kubectl_for(cluster: LocalCluster, ns: str, workdir: Path, version: str = "1.33") -> Kubectl:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl {version} is not installed on this machine")
    return Kubectl(binary, version, cluster.url, workdir / f"kubectl-{version}", ns)


def stateful_set(name: str, replicas: int = 3, version: str = "1", **spec: Any) -> JSONDict:
    labels = {"app": name}
    container = {"name": "web", "image": BUSYBOX, "command": ["sh", "-c", SERVE],
                 "env": [{"name": "VERSION", "value": version}], "ports": [{"containerPort": 80, "name": "http"}],
                 "readinessProbe": {"httpGet": {"path": "/ready", "port": 80}, "periodSeconds": 1,
                                    "failureThreshold": 1}}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "serviceName": "nginx", "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [container], "terminationGracePeriodSeconds": 1}},
                     **spec}}


def get(api: httpx.Client, path: str) -> JSONDict:
    r = api.get(path)
    assert r.status_code == 200, r.text
    return r.json()


def create(api: httpx.Client, path: str, body: JSONDict) -> JSONDict:
    r = api.post(path, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def pods_of(api: httpx.Client, ns: str, app: str) -> dict[str, JSONDict]:
    items = get(api, f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3D{app}")["items"]
    return {p["metadata"]["name"]: p for p in items}


def is_ready(pod: JSONDict) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp") \
        and any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])


def version_of(pod: JSONDict) -> str:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}["VERSION"]


def sts_of(api: httpx.Client, ns: str, name: str) -> JSONDict:
    return get(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets/{name}")


def ready_now(api: httpx.Client, ns: str, app: str, names: list[str],
              version: str | None = None) -> dict[str, JSONDict] | None:
    """Exactly the pods `names`, each Running and Ready (and of `version`), and no other pod of the app; or None."""
    pods = pods_of(api, ns, app)
    if sorted(pods) != sorted(names) or not all(is_ready(p) for p in pods.values()):
        return None
    if version is not None and any(version_of(p) != version for p in pods.values()):
        return None
    return pods


def all_ready(cluster: LocalCluster, api: httpx.Client, ns: str, app: str, names: list[str],
              version: str | None = None) -> dict[str, JSONDict]:
    """Wait for ready_now."""
    def check() -> dict[str, JSONDict] | None:
        return ready_now(api, ns, app, names, version)
    try:
        result = wait_for(check, TIMEOUT, 0.2, what=f"{names} ready")
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{pods_of(api, ns, app)}\n{cluster.logs()}") from None
    assert isinstance(result, dict)
    return result


def settled(api: httpx.Client, ns: str, name: str, replicas: int) -> JSONDict:
    """The set's status once the controller has observed its generation and counts every pod ready."""
    def check() -> JSONDict | None:
        sts = sts_of(api, ns, name)
        status = sts.get("status") or {}
        ok = (status.get("observedGeneration") == sts["metadata"]["generation"]
              and status.get("readyReplicas", 0) == replicas == status.get("replicas")
              and status.get("availableReplicas") == replicas
              and status.get("currentRevision") == status.get("updateRevision"))
        return sts if ok else None
    result = wait_for(check, TIMEOUT, 0.2, what=f"{name}'s status settled at {replicas}")
    assert isinstance(result, dict)
    return result


class Sampler:
    """Polls the app's pods on a thread of its own until stopped; `check(pods)` returns a complaint or None,
    and the first complaint is kept (an ordering rule broken at any sample)."""

    def __init__(self, url: str, ns: str, app: str, check: Any) -> None:
        self.url, self.ns, self.app, self.check = url, ns, app, check
        self.complaint: str | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as api:
            while not self._stop.is_set():
                try:
                    pods = pods_of(api, self.ns, self.app)
                except (httpx.HTTPError, AssertionError):
                    continue
                self.samples += 1
                if self.complaint is None:
                    self.complaint = self.check(pods)
                self._stop.wait(0.05)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


# -- ordering, identity, DNS ---------------------------------------------------------------------------------


def test_ordered_start_identity_and_dns_through_the_headless_service(local_cluster: LocalCluster, api: httpx.Client,
                                                                     ns: str, tmp_path: Path) -> None:
    create(api, f"/api/v1/namespaces/{ns}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx"},
        "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 80, "name": "http"}]}})

    def in_order(pods: dict[str, JSONDict]) -> str | None:
        for i in (1, 2):
            if f"web-{i}" in pods and not is_ready(pods.get(f"web-{i - 1}") or {"metadata": {}}):
                return f"web-{i} exists while web-{i - 1} is not Running and Ready: {sorted(pods)}"
        return None

    with Sampler(local_cluster.url, ns, "web", in_order) as sampler:
        create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets", stateful_set("web"))
        pods = all_ready(local_cluster, api, ns, "web", ["web-0", "web-1", "web-2"])
    assert sampler.complaint is None, sampler.complaint
    assert sampler.samples > 10
    sts = settled(api, ns, "web", 3)
    status = sts["status"]
    assert status["currentReplicas"] == status["updatedReplicas"] == 3
    assert status["currentRevision"].startswith("web-") and status["collisionCount"] == 0
    for i in range(3):
        pod = pods[f"web-{i}"]
        labels = pod["metadata"]["labels"]
        assert labels["statefulset.kubernetes.io/pod-name"] == f"web-{i}"
        assert labels["apps.kubernetes.io/pod-index"] == str(i)
        assert labels[HASH_LABEL] == status["updateRevision"]
        assert pod["spec"]["hostname"] == f"web-{i}" and pod["spec"]["subdomain"] == "nginx"
        ref = pod["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("StatefulSet", "web", True)
    created = [p["metadata"]["creationTimestamp"] for p in (pods["web-0"], pods["web-1"], pods["web-2"])]
    assert created == sorted(created)
    events = get(api, f"/api/v1/namespaces/{ns}/events")["items"]
    messages = sorted(e["message"] for e in events
                      if e["involvedObject"]["name"] == "web" and e["reason"] == "SuccessfulCreate")
    assert messages == [f"create Pod web-{i} in StatefulSet web successful" for i in range(3)], messages
    revisions = get(api, f"/apis/apps/v1/namespaces/{ns}/controllerrevisions")["items"]
    assert [(r["metadata"]["name"], r["revision"]) for r in revisions] == [(status["updateRevision"], 1)]

    # the EndpointSlice names each endpoint by its hostname, and the cluster DNS answers for it from a pod
    def hostnames() -> dict[str, str] | None:
        slices = get(api, f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
                          "?labelSelector=kubernetes.io%2Fservice-name%3Dnginx")["items"]
        found = {e.get("hostname"): e["addresses"][0] for s in slices for e in s.get("endpoints") or []}
        return found if len(found) == 3 else None
    by_host = wait_for(hostnames, 30, 0.2, what="nginx's slice with the pods' hostnames")
    assert by_host == {f"web-{i}": pods[f"web-{i}"]["status"]["podIP"] for i in range(3)}

    kube = kubectl_for(local_cluster, ns, tmp_path)
    fqdn = f"web-0.nginx.{ns}.svc.{CLUSTER_DOMAIN}"
    answer = kube.run("exec", "web-2", "--", "nslookup", fqdn, timeout=120).ok().stdout
    assert re.findall(r"\b10\.244\.\d+\.\d+\b", answer) == [pods["web-0"]["status"]["podIP"]], answer
    assert kube.run("exec", "web-1", "--", "hostname").ok().stdout == "web-1\n"


def test_deleted_pod_comes_back_under_its_name(local_cluster: LocalCluster, api: httpx.Client, ns: str) -> None:
    create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets", stateful_set("web"))
    before = all_ready(local_cluster, api, ns, "web", ["web-0", "web-1", "web-2"])
    r = api.delete(f"/api/v1/namespaces/{ns}/pods/web-1")
    assert r.status_code == 200, r.text
    after = wait_for(lambda: (p := ready_now(api, ns, "web", ["web-0", "web-1", "web-2"]))
                     and p["web-1"]["metadata"]["uid"] != before["web-1"]["metadata"]["uid"] and p,
                     TIMEOUT, 0.2, what="web-1 made again")
    assert isinstance(after, dict)
    assert after["web-1"]["spec"]["hostname"] == "web-1"
    assert {n: after[n]["metadata"]["uid"] for n in ("web-0", "web-2")} == {
        n: before[n]["metadata"]["uid"] for n in ("web-0", "web-2")}


def test_scale_down_removes_the_highest_ordinal_first(local_cluster: LocalCluster, api: httpx.Client, ns: str,
                                                      tmp_path: Path) -> None:
    create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets", stateful_set("web"))
    before = all_ready(local_cluster, api, ns, "web", ["web-0", "web-1", "web-2"])
    uids = {n: p["metadata"]["uid"] for n, p in before.items()}

    def highest_first(pods: dict[str, JSONDict]) -> str | None:
        for lower, higher in (("web-0", "web-1"), ("web-1", "web-2")):
            pod = pods.get(lower)
            if higher in pods and (pod is None or pod["metadata"].get("deletionTimestamp")):
                return f"{lower} going while {higher} is still there: {sorted(pods)}"
        return None

    with Sampler(local_cluster.url, ns, "web", highest_first) as sampler:
        kube = kubectl_for(local_cluster, ns, tmp_path, "1.33")
        assert kube.run("scale", "sts", "web", "--replicas=2").ok().stdout == "statefulset.apps/web scaled\n"
        all_ready(local_cluster, api, ns, "web", ["web-0", "web-1"])
        kube = kubectl_for(local_cluster, ns, tmp_path, "1.27")
        assert kube.run("scale", "sts", "web", "--replicas=1").ok().stdout == "statefulset.apps/web scaled\n"
        after = all_ready(local_cluster, api, ns, "web", ["web-0"])
    assert sampler.complaint is None, sampler.complaint
    assert after["web-0"]["metadata"]["uid"] == uids["web-0"]
    settled(api, ns, "web", 1)
    for version in VERSIONS:
        out = kubectl_for(local_cluster, ns, tmp_path, version).run("get", "sts").ok().stdout.splitlines()
        assert re.split(r"\s{2,}", out[0].strip()) == ["NAME", "READY", "AGE"], out
        assert re.split(r"\s{2,}", out[1].strip())[:2] == ["web", "1/1"], out
        wide = kubectl_for(local_cluster, ns, tmp_path, version).run("get", "sts", "-o", "wide").ok().stdout
        assert re.split(r"\s{2,}", wide.splitlines()[0].strip()) == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
        assert wide.splitlines()[1].split()[-2:] == ["web", BUSYBOX], wide
    scale = get(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets/web/scale")
    assert (scale["kind"], scale["spec"]["replicas"], scale["status"]["selector"]) == ("Scale", 1, "app=web")


# -- updates ---------------------------------------------------------------------------------------------------


def test_rolling_update_with_partition_history_and_undo(local_cluster: LocalCluster, api: httpx.Client, ns: str,
                                                        tmp_path: Path) -> None:
    kube = kubectl_for(local_cluster, ns, tmp_path)
    mk = Mk(local_cluster.url, tmp_path / "mk", ns)
    manifest = tmp_path / "web.yaml"
    manifest.write_text(yaml.safe_dump(stateful_set("web")))
    assert kube.run("apply", "-f", str(manifest)).ok().stdout == "statefulset.apps/web created\n"
    out = kube.run("rollout", "status", "sts/web", f"--timeout={int(TIMEOUT)}s", timeout=TIMEOUT + 30).ok().stdout
    assert out.splitlines()[-1] == "partitioned roll out complete: 3 new pods have been updated...", out
    before = all_ready(local_cluster, api, ns, "web", ["web-0", "web-1", "web-2"], "1")
    first = settled(api, ns, "web", 3)["status"]["currentRevision"]

    # partition 2: only web-2 moves to the new template
    patch = {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}},
                      "template": {"spec": {"containers": [{"name": "web", "env": [{"name": "VERSION",
                                                                                     "value": "2"}]}]}}}}
    r = api.patch(f"/apis/apps/v1/namespaces/{ns}/statefulsets/web", json=patch,
                  headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 200, r.text

    def partitioned() -> dict[str, JSONDict] | None:
        pods = ready_now(api, ns, "web", ["web-0", "web-1", "web-2"])
        return pods if pods is not None and version_of(pods["web-2"]) == "2" else None
    pods = wait_for(partitioned, TIMEOUT, 0.2, what="web-2 at version 2")
    assert isinstance(pods, dict)
    assert [version_of(pods[f"web-{i}"]) for i in range(3)] == ["1", "1", "2"]
    assert pods["web-0"]["metadata"]["uid"] == before["web-0"]["metadata"]["uid"]
    for version in VERSIONS:
        out = kubectl_for(local_cluster, ns, tmp_path, version).run(
            "rollout", "status", "sts/web", f"--timeout={int(TIMEOUT)}s", timeout=TIMEOUT + 30).ok().stdout
        assert out.splitlines()[-1] == "partitioned roll out complete: 1 new pods have been updated...", out
    status = sts_of(api, ns, "web")["status"]
    assert status["currentRevision"] == first != status["updateRevision"]
    assert (status["currentReplicas"], status["updatedReplicas"]) == (2, 1)
    assert pods["web-2"]["metadata"]["labels"][HASH_LABEL] == status["updateRevision"]

    # partition 0: web-1 then web-0, never web-0 before web-1 is back at the new version
    def top_down(pods: dict[str, JSONDict]) -> str | None:
        web0, web1 = pods.get("web-0"), pods.get("web-1")
        if web0 is not None and web0["metadata"]["uid"] != before["web-0"]["metadata"]["uid"] and (
                web1 is None or version_of(web1) != "2"):
            return f"web-0 replaced before web-1: {sorted(pods)}"
        return None

    with Sampler(local_cluster.url, ns, "web", top_down) as sampler:
        r = api.patch(f"/apis/apps/v1/namespaces/{ns}/statefulsets/web",
                      json={"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}},
                      headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
        all_ready(local_cluster, api, ns, "web", ["web-0", "web-1", "web-2"], "2")
    assert sampler.complaint is None, sampler.complaint
    status = settled(api, ns, "web", 3)["status"]
    assert status["currentRevision"] == status["updateRevision"] != first
    events = get(api, f"/api/v1/namespaces/{ns}/events")["items"]
    deleted = sorted(e["message"] for e in events if e["reason"] == "SuccessfulDelete"
                     and e["involvedObject"]["name"] == "web")
    assert deleted == [f"delete Pod web-{i} in StatefulSet web successful" for i in range(3)], deleted

    # history: revisions 1 and 2, printed alike by kubectl and mkubectl
    out = kube.run("rollout", "history", "sts/web").ok().stdout
    lines = out.splitlines()
    assert lines[0].strip() == "statefulset.apps/web", out
    assert [re.split(r"\s{2,}", line.strip())[0] for line in lines[2:] if line.strip()] == ["1", "2"], out
    old_kubectl = kubectl_for(local_cluster, ns, tmp_path, "1.27")
    for args in (("rollout", "history", "sts/web"), ("rollout", "history", "sts/web", "--revision=1"),
                 ("rollout", "status", "sts/web")):
        theirs = kube.run(*args).ok().stdout
        assert mk.run(*args).ok().stdout == theirs, args
        if "--revision=1" not in args:  # 1.27 prints its pod templates with two more lines (Node-Selectors, ...)
            assert old_kubectl.run(*args).ok().stdout == theirs, args
    detail = kube.run("rollout", "history", "sts/web", "--revision=1").ok().stdout
    assert re.search(r"VERSION:\s+1", detail) and not re.search(r"VERSION:\s+2", detail), detail

    # undo with kubectl 1.27: revision 1's template comes back as revision 3
    r = kubectl_for(local_cluster, ns, tmp_path, "1.27").run("rollout", "undo", "sts/web").ok()
    assert r.stdout == "statefulset.apps/web rolled back\n", r
    all_ready(local_cluster, api, ns, "web", ["web-0", "web-1", "web-2"], "1")
    revisions = {r["revision"] for r in get(api, f"/apis/apps/v1/namespaces/{ns}/controllerrevisions")["items"]}
    assert revisions == {2, 3}
    status = settled(api, ns, "web", 3)["status"]
    assert status["updateRevision"] == first  # the same revision object, renumbered
    # kubectl 1.33's undo goes back to 2, mkubectl's to 1 again
    assert kube.run("rollout", "undo", "sts/web").ok().stdout == "statefulset.apps/web rolled back\n"
    all_ready(local_cluster, api, ns, "web", ["web-0", "web-1", "web-2"], "2")
    assert mk.run("rollout", "undo", "sts/web").ok().stdout == "statefulset.apps/web rolled back\n"
    all_ready(local_cluster, api, ns, "web", ["web-0", "web-1", "web-2"], "1")
    assert {r["revision"] for r in get(api, f"/apis/apps/v1/namespaces/{ns}/controllerrevisions")["items"]} == {4, 5}
    mine, theirs = mk.run("rollout", "undo", "sts/web", "--to-revision=9"), kube.run("rollout", "undo", "sts/web",
                                                                                    "--to-revision=9")
    assert (mine.returncode, mine.stderr) == (theirs.returncode, theirs.stderr), (mine, theirs)


def test_max_unavailable_replaces_two_at_a_time(local_cluster: LocalCluster, api: httpx.Client, ns: str) -> None:
    """maxUnavailable (upstream's MaxUnavailableStatefulSet; honoured when set): two pods down at once at most, and
    at some moment two; OrderedReady still brings them back lowest first."""
    create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets", stateful_set(
        "wide", 4, updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 2}}))
    all_ready(local_cluster, api, ns, "wide", [f"wide-{i}" for i in range(4)], "1")
    most = [0]

    def at_most_two(pods: dict[str, JSONDict]) -> str | None:
        down = 4 - sum(1 for p in pods.values() if is_ready(p))
        most[0] = max(most[0], down)
        return f"{down} pods unavailable at once: {sorted(pods)}" if down > 2 else None

    with Sampler(local_cluster.url, ns, "wide", at_most_two) as sampler:
        r = api.patch(f"/apis/apps/v1/namespaces/{ns}/statefulsets/wide",
                      json={"spec": {"template": {"spec": {"containers": [
                          {"name": "web", "env": [{"name": "VERSION", "value": "2"}]}]}}}},
                      headers={"Content-Type": "application/strategic-merge-patch+json"})
        assert r.status_code == 200, r.text
        all_ready(local_cluster, api, ns, "wide", [f"wide-{i}" for i in range(4)], "2")
    assert sampler.complaint is None, sampler.complaint
    assert most[0] == 2, f"never two pods replaced at once (at most {most[0]})"
    settled(api, ns, "wide", 4)


def test_on_delete_waits_for_a_delete(local_cluster: LocalCluster, api: httpx.Client, ns: str,
                                      tmp_path: Path) -> None:
    manifest = tmp_path / "manual.yaml"
    manifest.write_text(yaml.safe_dump(stateful_set("manual", 2, updateStrategy={"type": "OnDelete"})))
    kube = kubectl_for(local_cluster, ns, tmp_path, "1.27")  # its apply validates against /openapi/v2 (protobuf)
    assert kube.run("apply", "-f", str(manifest)).ok().stdout == "statefulset.apps/manual created\n"
    before = all_ready(local_cluster, api, ns, "manual", ["manual-0", "manual-1"], "1")
    r = api.patch(f"/apis/apps/v1/namespaces/{ns}/statefulsets/manual",
                  json={"spec": {"template": {"spec": {"containers": [
                      {"name": "web", "env": [{"name": "VERSION", "value": "2"}]}]}}}},
                  headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 200, r.text
    generation = r.json()["metadata"]["generation"]
    wait_for(lambda: (s := sts_of(api, ns, "manual")["status"]).get("observedGeneration") == generation
             and s.get("currentRevision") != s.get("updateRevision"), 30, 0.2, what="the new revision observed")
    pods = pods_of(api, ns, "manual")
    assert {n: p["metadata"]["uid"] for n, p in pods.items()} == {n: p["metadata"]["uid"] for n, p in before.items()}
    assert api.delete(f"/api/v1/namespaces/{ns}/pods/manual-0").status_code == 200
    wait_for(lambda: (p := ready_now(api, ns, "manual", ["manual-0", "manual-1"])) is not None
             and version_of(p["manual-0"]) == "2", TIMEOUT, 0.2, what="manual-0 made at the new revision")
    assert version_of(pods_of(api, ns, "manual")["manual-1"]) == "1"
    r = kube.run("rollout", "status", "sts/manual")
    assert r.returncode == 1 and "rollout status is only available for RollingUpdate strategy type" in r.stderr, r


def test_min_ready_seconds_holds_the_next_pod(local_cluster: LocalCluster, api: httpx.Client, ns: str) -> None:
    create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets", stateful_set("slow", 2, minReadySeconds=3))

    def ready_but_not_available() -> bool:
        status = sts_of(api, ns, "slow").get("status") or {}
        return status.get("readyReplicas") == 1 and status.get("availableReplicas") == 0
    wait_for(ready_but_not_available, TIMEOUT, 0.05, what="slow-0 Ready and not yet available")
    assert "slow-1" not in pods_of(api, ns, "slow")
    pods = all_ready(local_cluster, api, ns, "slow", ["slow-0", "slow-1"])
    ready_at = next(c["lastTransitionTime"] for c in pods["slow-0"]["status"]["conditions"] if c["type"] == "Ready")
    created, ready = parse_rfc3339(pods["slow-1"]["metadata"]["creationTimestamp"]), parse_rfc3339(ready_at)
    assert created is not None and ready is not None
    waited = created - ready
    assert waited.total_seconds() >= 2, (ready_at, pods["slow-1"]["metadata"]["creationTimestamp"])  # 1 s stamps
    wait_for(lambda: (sts_of(api, ns, "slow").get("status") or {}).get("availableReplicas") == 2, 30, 0.2,
             what="both available")


# -- claims (API level) ----------------------------------------------------------------------------------------


def claims_of(api: httpx.Client, ns: str, app: str) -> dict[str, JSONDict]:
    items = get(api, f"/api/v1/namespaces/{ns}/persistentvolumeclaims?labelSelector=app%3D{app}")["items"]
    return {c["metadata"]["name"]: c for c in items}


def claim_set(name: str, replicas: int, policy: JSONDict | None = None) -> JSONDict:
    body = stateful_set(name, replicas, podManagementPolicy="Parallel", volumeClaimTemplates=[
        {"metadata": {"name": "data", "labels": {"tier": "db"}},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                  "resources": {"requests": {"storage": "1Gi"}}}}])
    body["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    if policy is not None:
        body["spec"]["persistentVolumeClaimRetentionPolicy"] = policy
    return body


def test_claims_per_ordinal_outlive_their_pods_and_follow_the_retention_policy(
        local_cluster: LocalCluster, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    sts = create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets",
                 claim_set("db", 3, {"whenDeleted": "Delete", "whenScaled": "Delete"}))
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"] == "Filesystem"
    uid = sts["metadata"]["uid"]

    def made() -> dict[str, JSONDict] | None:
        claims = claims_of(api, ns, "db")
        pods = pods_of(api, ns, "db")
        owned = all(any(r["uid"] == uid for r in c["metadata"].get("ownerReferences") or []) for c in claims.values())
        return claims if sorted(claims) == ["data-db-0", "data-db-1", "data-db-2"] and len(pods) == 3 and owned \
            else None
    claims = wait_for(made, 60, 0.2, what="three claims owned by the set, three pods")
    assert isinstance(claims, dict)
    for i in range(3):
        claim = claims[f"data-db-{i}"]
        assert claim["metadata"]["labels"] == {"app": "db", "tier": "db"}
        refs = claim["metadata"]["ownerReferences"]
        assert [(r["kind"], r["name"], r.get("controller")) for r in refs] == [("StatefulSet", "db", None)]
    pods = pods_of(api, ns, "db")
    volumes = {n: [v["persistentVolumeClaim"]["claimName"] for v in p["spec"]["volumes"]
                   if "persistentVolumeClaim" in v] for n, p in pods.items()}
    assert volumes == {f"db-{i}": [f"data-db-{i}"] for i in range(3)}
    events = get(api, f"/api/v1/namespaces/{ns}/events")["items"]
    claim_events = sorted(e["message"] for e in events if e["involvedObject"]["name"] == "db"
                          and e["reason"] == "SuccessfulCreate" and "Claim" in e["message"])
    assert claim_events == [f"create Claim data-db-{i} Pod db-{i} in StatefulSet db success" for i in range(3)]

    # the pod made again under its name mounts the same claim (the same object: its uid)
    old_pod = pods["db-1"]["metadata"]["uid"]
    assert api.delete(f"/api/v1/namespaces/{ns}/pods/db-1").status_code == 200
    again = wait_for(lambda: (p := pods_of(api, ns, "db").get("db-1")) and p["metadata"]["uid"] != old_pod
                     and not p["metadata"].get("deletionTimestamp") and p, 60, 0.2, what="db-1 made again")
    assert isinstance(again, dict)
    assert [v["persistentVolumeClaim"]["claimName"] for v in again["spec"]["volumes"]
            if "persistentVolumeClaim" in v] == ["data-db-1"]
    assert claims_of(api, ns, "db")["data-db-1"]["metadata"]["uid"] == claims["data-db-1"]["metadata"]["uid"]

    # whenScaled Delete: scaled-down pods' claims are handed to their pods and go with them
    r = api.patch(f"/apis/apps/v1/namespaces/{ns}/statefulsets/db/scale", json={"spec": {"replicas": 1}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    wait_for(lambda: sorted(claims_of(api, ns, "db")) == ["data-db-0"] and sorted(pods_of(api, ns, "db")) == ["db-0"],
             90, 0.2, what="db-1, db-2 and their claims gone")
    assert claims_of(api, ns, "db")["data-db-0"]["metadata"]["uid"] == claims["data-db-0"]["metadata"]["uid"]

    # a set with the default policy (Retain) leaves its claims behind when deleted; whenDeleted Delete does not
    create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets", claim_set("keep", 1))
    wait_for(lambda: sorted(claims_of(api, ns, "keep")) == ["data-keep-0"], 60, 0.2, what="keep's claim")
    assert claims_of(api, ns, "keep")["data-keep-0"]["metadata"].get("ownerReferences") is None
    for name in ("db", "keep"):
        r = api.request("DELETE", f"/apis/apps/v1/namespaces/{ns}/statefulsets/{name}",
                        json={"propagationPolicy": "Background"})
        assert r.status_code == 200, r.text
    wait_for(lambda: not claims_of(api, ns, "db") and not pods_of(api, ns, "db") and not pods_of(api, ns, "keep"),
             90, 0.2, what="db's claim gone with the set")
    assert sorted(claims_of(api, ns, "keep")) == ["data-keep-0"]

    # describe shows the claim templates (mkubectl as kubectl 1.33)
    create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets", claim_set("shown", 0))
    kube = kubectl_for(local_cluster, ns, tmp_path)
    mk = Mk(local_cluster.url, tmp_path / "mk", ns)
    wait_for(lambda: (sts_of(api, ns, "shown").get("status") or {}).get("observedGeneration") == 1, 30, 0.2,
             what="shown observed")
    theirs = kube.run("describe", "sts", "shown").ok().stdout
    assert "Volume Claims:\n  Name:          data\n" in theirs, theirs
    assert mk.run("describe", "sts", "shown").ok().stdout == theirs


# -- bad input -------------------------------------------------------------------------------------------------


def test_bad_input_is_refused_and_nothing_is_written(local_cluster: LocalCluster, api: httpx.Client, ns: str,
                                                     tmp_path: Path) -> None:
    bad = stateful_set("bad")
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    r = api.post(f"/apis/apps/v1/namespaces/{ns}/statefulsets", json=bad)
    assert r.status_code == 422, r.text
    status = r.json()
    assert (status["reason"], status["details"]["kind"], status["details"]["group"]) == ("Invalid", "StatefulSet",
                                                                                         "apps")
    assert status["message"] == ('StatefulSet.apps "bad" is invalid: spec.template.metadata.labels: Invalid value: '
                                 'map[string]string{"app":"other"}: `selector` does not match template `labels`')
    assert api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/bad").status_code == 404

    create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets", stateful_set("fixed", 0))
    forbidden = ("spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                 "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
                 "forbidden")
    for change in ({"serviceName": "other"}, {"podManagementPolicy": "Parallel"},
                   {"volumeClaimTemplates": [{"metadata": {"name": "x"}, "spec": {
                       "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}):
        r = api.patch(f"/apis/apps/v1/namespaces/{ns}/statefulsets/fixed", json={"spec": change},
                      headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 422, r.text
        assert r.json()["message"] == f'StatefulSet.apps "fixed" is invalid: {forbidden}', r.text
    stored = sts_of(api, ns, "fixed")
    assert stored["spec"]["serviceName"] == "nginx" and stored["metadata"]["generation"] == 1
    # what may change does
    r = api.patch(f"/apis/apps/v1/namespaces/{ns}/statefulsets/fixed",
                  json={"spec": {"minReadySeconds": 3, "ordinals": {"start": 5}}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump(stateful_set("bad2", podManagementPolicy="Sometimes")))
    r = kubectl_for(local_cluster, ns, tmp_path).run("apply", "-f", str(manifest))
    assert r.returncode == 1, r
    assert ('The StatefulSet "bad2" is invalid: spec.podManagementPolicy: Invalid value: "Sometimes": '
            "must be 'OrderedReady' or 'Parallel'") in r.stderr, r
    assert api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/bad2").status_code == 404


def test_ordinals_start_and_python_client(local_cluster: LocalCluster, api: httpx.Client, ns: str,
                                          tmp_path: Path) -> None:
    from kubernetes import client, config

    from tests.kubectl import write_kubeconfig

    create(api, f"/apis/apps/v1/namespaces/{ns}/statefulsets",
           stateful_set("late", 2, ordinals={"start": 3}, podManagementPolicy="Parallel"))
    pods = all_ready(local_cluster, api, ns, "late", ["late-3", "late-4"])
    assert pods["late-4"]["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "4"
    settled(api, ns, "late", 2)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", local_cluster.url)
    with config.new_client_from_config(config_file=str(kubeconfig)) as api_client:
        apps = client.AppsV1Api(api_client)
        sts = apps.read_namespaced_stateful_set_status("late", ns)
        assert sts.status.ready_replicas == 2 and sts.status.available_replicas == 2
        assert sts.spec.update_strategy.rolling_update.partition == 0
        assert sts.spec.persistent_volume_claim_retention_policy.when_deleted == "Retain"
        apps.patch_namespaced_stateful_set_scale("late", ns, {"spec": {"replicas": 1}})
    all_ready(local_cluster, api, ns, "late", ["late-3"])
    mk = Mk(local_cluster.url, tmp_path / "mk", ns)
    assert mk.run("scale", "sts/late", "--replicas=2", "--current-replicas=1").ok().stdout == (
        "statefulset.apps/late scaled\n")
    all_ready(local_cluster, api, ns, "late", ["late-3", "late-4"])
