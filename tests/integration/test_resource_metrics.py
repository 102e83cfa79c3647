"""Resource metrics on real processes: a module's own etcd and apiserver (given `--metrics-server-url`),
one kubelet with its Docker shim, `python -m metrics_server` scraping it every 2 s. A pod burning a
CPU in a busybox loop beside an idle one: the kubelet's `/stats/summary` and `/metrics/resource`
numbers move for the one and not the other, the metrics.k8s.io API through the apiserver reports
them, and real kubectl 1.27 and 1.33 `top` them."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from kubelet.cm.cgroup_manager import CgroupManager
from kubelet.stats.cgroup_stats import read_usage
from machinery.quantity import parse_quantity
from machinery.timeutil import parse_go_duration, parse_rfc3339_nano
from tests.cluster import ApiServer, Etcd, free_port, make_workdir, wait_for
from tests.kubectl import Kubectl, find_kubectl
from tests.metrics_process import MetricsServerProcess
from tests.node_process import BUSYBOX

JSONDict = dict[str, Any]
BURN = "while :; do :; done"
IDLE = "sleep 3600"


class MetricsCluster:
    def __init__(self, apiserver: ApiServer, kubelet: Any, metrics: MetricsServerProcess) -> None:
        self.apiserver, self.kubelet, self.metrics = apiserver, kubelet, metrics
        self.node = kubelet.node


@pytest.fixture(scope="module")
def cluster(own_etcd: Etcd) -> Iterator[MetricsCluster]:
    try:
        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine to run a kubelet's pods: {e}")
    from tests.node_process import KubeletProcess, cleanup, ensure_images, free_pod_cidrs

    ensure_images()
    workdir = make_workdir("minik8s-metrics-")
    metrics_port = free_port()
    apiserver = ApiServer(workdir, own_etcd, "--etcd-compaction-interval", "0",
                          "--metrics-server-url", f"http://127.0.0.1:{metrics_port}")
    apiserver.start()
    kubelet = KubeletProcess(workdir, apiserver, f"mt-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
    metrics = MetricsServerProcess(workdir, apiserver.url, "2s", port=metrics_port)
    try:
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            kubelet.start(api)
        metrics.start()
        yield MetricsCluster(apiserver, kubelet, metrics)
    finally:
        metrics.stop()
        cleanup([kubelet])
        apiserver.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def api(cluster: MetricsCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.apiserver.url, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def namespace(api: httpx.Client) -> Iterator[str]:
    name = f"m-{uuid.uuid4().hex[:8]}"
    assert api.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    yield name
    api.delete(f"/api/v1/namespaces/{name}")


def pod(name: str, node: str, script: str, labels: dict[str, str] | None = None) -> JSONDict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {"app": name}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [
                {"name": "main", "image": BUSYBOX, "command": ["sh", "-c", script],
                 "resources": {"requests": {"cpu": "100m", "memory": "16Mi"}}}]}}


@pytest.fixture(scope="module")
def pods(api: httpx.Client, namespace: str, cluster: MetricsCluster) -> dict[str, str]:
    for name, script in (("burner", BURN), ("idler", IDLE)):
        r = api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod(name, cluster.node, script))
        assert r.status_code == 201, r.text

    def running() -> bool:
        items = api.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
        return len(items) == 2 and all(p.get("status", {}).get("phase") == "Running" for p in items)

    wait_for(running, 90, 0.25, what="the burner and idler pods to run")
    return {"burner": "burner", "idler": "idler"}


def summary(cluster: MetricsCluster) -> JSONDict:
    r = httpx.get(f"{cluster.kubelet.address}/stats/summary", timeout=30)
    assert r.status_code == 200, r.text
    data: JSONDict = r.json()
    return data


def pod_stats(data: JSONDict, namespace: str, name: str) -> JSONDict | None:
    return next((p for p in data["pods"] if p["podRef"] == {**p["podRef"], "namespace": namespace, "name": name}),
                None)


def test_stats_summary_moves_with_cpu_burnt(cluster: MetricsCluster, namespace: str, pods: dict[str, str]) -> None:
    def both() -> JSONDict | None:
        s = summary(cluster)
        return s if pod_stats(s, namespace, "burner") and pod_stats(s, namespace, "idler") else None

    first = wait_for(both, 30, 0.5, what="both pods in the summary")
    assert isinstance(first, dict)

    def later() -> JSONDict | None:
        s = summary(cluster)
        burner = pod_stats(s, namespace, "burner")
        assert burner is not None
        before = pod_stats(first, namespace, "burner")
        assert before is not None
        done = (burner["containers"][0]["cpu"]["usageCoreNanoSeconds"]
                - before["containers"][0]["cpu"]["usageCoreNanoSeconds"]) > 500_000_000
        # the rate comes from the kubelet's own refresh every housekeeping interval (10 s), two of them
        return s if done and "usageNanoCores" in burner["containers"][0]["cpu"] else None

    second = wait_for(later, 45, 0.5, what="the burner to burn half a CPU-second, with a rate")
    assert isinstance(second, dict)
    node = second["node"]
    assert node["nodeName"] == cluster.node
    assert node["cpu"]["usageCoreNanoSeconds"] > 0 and node["memory"]["workingSetBytes"] > 0
    b0, b1 = pod_stats(first, namespace, "burner"), pod_stats(second, namespace, "burner")
    i0, i1 = pod_stats(first, namespace, "idler"), pod_stats(second, namespace, "idler")
    assert b0 and b1 and i0 and i1
    burnt = b1["cpu"]["usageCoreNanoSeconds"] - b0["cpu"]["usageCoreNanoSeconds"]
    idled = i1["cpu"]["usageCoreNanoSeconds"] - i0["cpu"]["usageCoreNanoSeconds"]
    assert burnt > 500_000_000 and idled < burnt / 10, (burnt, idled)
    container = b1["containers"][0]
    assert container["name"] == "main"
    assert container["memory"]["workingSetBytes"] > 0 and container["memory"]["usageBytes"] >= \
        container["memory"]["workingSetBytes"]
    # the second reading of the same container has a rate: up to one core (the loop is single-threaded; the
    # machine is shared, so less), the idler's near nothing
    idle_rate = i1["containers"][0]["cpu"].get("usageNanoCores", 0)
    assert 50_000_000 < container["cpu"]["usageNanoCores"] < 1_500_000_000, container
    assert idle_rate < container["cpu"]["usageNanoCores"] / 10, (idle_rate, container)
    assert b1["podRef"]["uid"] and b1["startTime"]
    text = httpx.get(f"{cluster.kubelet.address}/metrics/resource", timeout=30).text
    assert f'container_cpu_usage_seconds_total{{container="main",namespace="{namespace}",pod="burner"}}' in text
    assert "# TYPE node_memory_working_set_bytes gauge" in text and "scrape_error 0" in text


def test_summary_reads_the_container_cgroups(api: httpx.Client, cluster: MetricsCluster, namespace: str,
                                            pods: dict[str, str]) -> None:
    """The kubelet reads its pods' and containers' cgroups (cAdvisor's source upstream), not Docker's stats
    API: the summary's cumulative CPU of the burner lies between two readings of its container's own cgroup
    taken around the request, its startTime is the container's creation, and the pod's figure is the pod
    cgroup's."""
    burner = api.get(f"/api/v1/namespaces/{namespace}/pods/burner").json()
    uid = burner["metadata"]["uid"]
    container_id = burner["status"]["containerStatuses"][0]["containerID"].partition("://")[2]
    cgroups = CgroupManager()
    pod_cgroup = f"{cluster.kubelet.cgroup_root}/kubepods/burstable/pod{uid}"
    before = read_usage(cgroups, f"{pod_cgroup}/{container_id}")[0].usage_core_nano_seconds.value
    pod_before = read_usage(cgroups, pod_cgroup)[0].usage_core_nano_seconds.value
    stats = pod_stats(summary(cluster), namespace, "burner")
    after = read_usage(cgroups, f"{pod_cgroup}/{container_id}")[0].usage_core_nano_seconds.value
    pod_after = read_usage(cgroups, pod_cgroup)[0].usage_core_nano_seconds.value
    assert stats is not None
    assert before <= stats["containers"][0]["cpu"]["usageCoreNanoSeconds"] <= after, (before, stats, after)
    assert pod_before <= stats["cpu"]["usageCoreNanoSeconds"] <= pod_after, (pod_before, stats, pod_after)
    client = docker.from_env()
    try:
        created = client.containers.get(container_id).attrs["Created"]
    finally:
        client.close()
    assert stats["containers"][0]["startTime"][:19] == created[:19], (stats, created)


def test_kubelet_own_metrics(cluster: MetricsCluster, pods: dict[str, str]) -> None:
    """The kubelet's /metrics: its CRI calls by operation type and its pods' start-up, parsed with
    prometheus-client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    r = httpx.get(f"{cluster.kubelet.address}/metrics", timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = [s for f in text_string_to_metric_families(r.text) for s in f.samples]

    def value(name: str, **labels: str) -> float:
        return sum(s.value for s in samples if s.name == name and all(s.labels.get(k) == v
                                                                       for k, v in labels.items()))

    # two pods started: a sandbox each, a container each, through the runtime's CRI
    assert value("kubelet_runtime_operations_total", operation_type="run_podsandbox") >= 2
    assert value("kubelet_runtime_operations_total", operation_type="start_container") >= 2
    assert value("kubelet_runtime_operations_duration_seconds_count", operation_type="create_container") >= 2
    assert value("kubelet_started_pods_total") >= 2
    started = value("kubelet_pod_start_duration_seconds_count")
    assert started >= 2 and 0 < value("kubelet_pod_start_duration_seconds_sum") < 120 * started
    assert value("process_resident_memory_bytes") > 0


def pod_metrics(api: httpx.Client, namespace: str, name: str) -> JSONDict | None:
    r = api.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{name}")
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    data: JSONDict = r.json()
    return data


def test_metrics_api_through_the_apiserver(api: httpx.Client, cluster: MetricsCluster, namespace: str,
                                           pods: dict[str, str]) -> None:
    groups = [g["name"] for g in api.get("/apis").json()["groups"]]
    assert "metrics.k8s.io" in groups
    kinds = {r["name"]: r["kind"] for r in api.get("/apis/metrics.k8s.io/v1beta1").json()["resources"]}
    assert kinds == {"nodes": "NodeMetrics", "pods": "PodMetrics"}

    def burning() -> JSONDict | None:
        m = pod_metrics(api, namespace, "burner")
        return m if m and parse_quantity(m["containers"][0]["usage"]["cpu"]).milli_value() > 50 else None

    burner = wait_for(burning, 40, 0.5, what="the burner's PodMetrics over 50m")
    assert isinstance(burner, dict)
    assert burner["kind"] == "PodMetrics" and burner["metadata"]["labels"] == {"app": "burner"}
    assert burner["containers"][0]["name"] == "main" and burner["window"].endswith("s")
    assert parse_quantity(burner["containers"][0]["usage"]["memory"]).int_value() > 0
    idler = wait_for(lambda: pod_metrics(api, namespace, "idler"), 20, 0.5, what="the idler's PodMetrics")
    assert isinstance(idler, dict)
    burnt = parse_quantity(burner["containers"][0]["usage"]["cpu"]).milli_value()
    assert parse_quantity(idler["containers"][0]["usage"]["cpu"]).milli_value() < burnt / 5, (idler, burner)
    listed = api.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods",
                     params={"labelSelector": "app=burner"}).json()
    assert listed["kind"] == "PodMetricsList" and [i["metadata"]["name"] for i in listed["items"]] == ["burner"]
    node = api.get(f"/apis/metrics.k8s.io/v1beta1/nodes/{cluster.node}")
    assert node.status_code == 200, node.text
    assert parse_quantity(node.json()["usage"]["cpu"]).milli_value() > 0
    missing = api.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/nope")
    assert missing.status_code == 404 and missing.json()["message"] == 'pods.metrics.k8s.io "nope" not found'
    bad = api.get("/apis/metrics.k8s.io/v1beta1/nodes", params={"labelSelector": "a in (b"})
    assert bad.status_code == 400 and bad.json()["reason"] == "BadRequest"


def container_start(api: httpx.Client, namespace: str, name: str) -> float:
    """When the pod's running container was created, in whole seconds (the summary's startTime: Docker's listing
    has whole seconds)."""
    def container_id() -> str | None:
        p = api.get(f"/api/v1/namespaces/{namespace}/pods/{name}").json()
        for c in p.get("status", {}).get("containerStatuses") or []:
            if (c.get("state") or {}).get("running") and c.get("containerID"):
                return str(c["containerID"].partition("://")[2])
        return None

    cid = wait_for(container_id, 90, 0.25, what=f"pod {name} to run")
    assert isinstance(cid, str)
    client = docker.from_env()
    try:
        created = parse_rfc3339_nano(client.containers.get(cid).attrs["Created"])
    finally:
        client.close()
    assert created is not None
    return float(created // 1_000_000_000)


def test_fresh_container_rated_from_its_start(api: httpx.Client, cluster: MetricsCluster, namespace: str,
                                              pods: dict[str, str]) -> None:
    """metrics-server's fresh-container rule through the real pipeline: a second metrics-server (resolution
    15 s) started when a new container is about 10 s old serves that container's rate after its first scrape,
    over the window from the container's start, while the older burner (seen once) has none yet. In a
    namespace of its own, so that the module's pod lists stay the burner and the idler."""
    fresh_ns = f"f-{uuid.uuid4().hex[:8]}"
    assert api.post("/api/v1/namespaces", json={"metadata": {"name": fresh_ns}}).status_code == 201
    r = api.post(f"/api/v1/namespaces/{fresh_ns}/pods", json=pod("fresh", cluster.node, BURN))
    assert r.status_code == 201, r.text
    workdir = make_workdir("minik8s-metrics-fresh-")
    metrics = MetricsServerProcess(workdir, cluster.apiserver.url, "15s", "--v", "4")
    try:
        start = container_start(api, fresh_ns, "fresh")
        wait_for(lambda: time.time() >= start + 10, 30, 0.05, what="the container to be 10 s old")
        metrics.start()  # ready once its first scrape is stored
        asked = [float(line.split(" asked ")[1].split()[0]) for line in metrics.process.log_path.read_text(
            ).splitlines() if f"node {cluster.node}: scraped" in line]
        assert asked, metrics.log_tail()
        age = asked[0] - start
        if not 10.1 <= age <= 14.9:
            pytest.skip(f"the first scrape came when the container was {age:.1f} s old: outside the rule's bounds")
        base = f"{metrics.url}/apis/metrics.k8s.io/v1beta1/namespaces"
        fresh = httpx.get(f"{base}/{fresh_ns}/pods/fresh", timeout=10)
        assert fresh.status_code == 200, (fresh.text, metrics.log_tail())
        window = parse_go_duration(fresh.json()["window"])
        assert 10 <= window < 15 and abs(window - age) < 1, (fresh.json(), age)
        assert parse_quantity(fresh.json()["containers"][0]["usage"]["cpu"]).milli_value() > 0
        # the burner, seen once too: rated only if it was also 10 s to one resolution (15 s) old at that scrape
        burner_age = asked[0] - container_start(api, namespace, "burner")
        burner = httpx.get(f"{base}/{namespace}/pods/burner", timeout=10)
        if 10 <= burner_age < 15:
            assert burner.status_code == 200 and abs(parse_go_duration(burner.json()["window"]) - burner_age) < 1, (
                burner.text, burner_age)
        else:
            assert burner.status_code == 404, (burner.text, burner_age)  # one point: no rate
    finally:
        metrics.stop()
        api.delete(f"/api/v1/namespaces/{fresh_ns}/pods/fresh", params={"gracePeriodSeconds": "0"})
        api.delete(f"/api/v1/namespaces/{fresh_ns}")
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_top(version: str, api: httpx.Client, cluster: MetricsCluster, namespace: str,
                     pods: dict[str, str], tmp_path: Path) -> None:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl {version} is not installed")
    kubectl = Kubectl(binary, version, cluster.apiserver.url, tmp_path, namespace)
    wait_for(lambda: pod_metrics(api, namespace, "burner") and pod_metrics(api, namespace, "idler"), 40, 0.5,
             what="metrics of both pods")
    top_pods = kubectl.run("top", "pods").ok().stdout.splitlines()
    assert top_pods[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"], top_pods
    rows = {line.split()[0]: line.split() for line in top_pods[1:]}
    assert set(rows) == {"burner", "idler"}, top_pods
    assert rows["burner"][1].endswith("m") and int(rows["burner"][1][:-1]) > 50, top_pods
    assert int(rows["idler"][1][:-1]) < int(rows["burner"][1][:-1]) / 5, top_pods
    assert rows["burner"][2].endswith("Mi"), top_pods
    containers = kubectl.run("top", "pods", "--containers", "-l", "app=burner").ok().stdout.splitlines()
    assert containers[0].split() == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"], containers
    assert containers[1].split()[:2] == ["burner", "main"], containers
    nodes = kubectl.run("top", "nodes").ok().stdout.splitlines()
    percent = ["CPU%", "MEMORY(bytes)", "MEMORY%"] if version == "1.27" else ["CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    assert nodes[0].split() == ["NAME", "CPU(cores)", *percent], nodes  # 1.33 wrote the percent columns anew
    assert nodes[1].split()[0] == cluster.node, nodes
    sorted_out = kubectl.run("top", "pods", "--sort-by=cpu", "--no-headers").ok().stdout.split()
    assert sorted_out[0] == "burner", sorted_out


# -- the HorizontalPodAutoscaler --------------------------------------------------------------------------------

HPA_PATH = "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"
SYNC = "3s"  # --horizontal-pod-autoscaler-sync-period of this module (upstream 15s: the benchmark keeps it)


@pytest.fixture(scope="module")
def controllers(cluster: MetricsCluster) -> Iterator[Any]:
    from tests.controller_process import ControllerProcess

    workdir = make_workdir("minik8s-hpa-cm-")
    process = ControllerProcess(workdir, cluster.apiserver.url,
                                ["deployment", "replicaset", "horizontalpodautoscaling"],
                                f"--horizontal-pod-autoscaler-sync-period={SYNC}")
    process.start()
    try:
        yield process
    finally:
        process.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def burning_deployment(name: str, node: str, burn_seconds: int) -> JSONDict:
    """Each pod burns a CPU for `burn_seconds` after it starts (a busybox loop), then idles."""
    script = f"end=$(( $(date +%s) + {burn_seconds} )); while [ $(date +%s) -lt $end ]; do :; done; exec sleep 3600"
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "nodeName": node, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "burn", "image": BUSYBOX, "command": ["sh", "-c", script],
                                         "resources": {"requests": {"cpu": "100m"}}}]}}}}


def hpa(name: str, target: str, **spec: Any) -> JSONDict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                     "minReplicas": 1, "maxReplicas": 3,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 50}}}], **spec}}


def get_hpa(api: httpx.Client, ns: str, name: str) -> JSONDict:
    r = api.get(f"{HPA_PATH.format(ns=ns)}/{name}")
    assert r.status_code == 200, r.text
    data: JSONDict = r.json()
    return data


def condition(obj: JSONDict, type_: str) -> JSONDict:
    return next((c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == type_), {})


def running_pods(api: httpx.Client, ns: str, app: str) -> list[JSONDict]:
    items = api.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": f"app={app}"}).json()["items"]
    return [p for p in items if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get(
        "deletionTimestamp")]


def events_of(api: httpx.Client, ns: str, name: str) -> list[JSONDict]:
    items = api.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
    return [e for e in items if e["involvedObject"].get("name") == name
            and e["involvedObject"].get("kind") == "HorizontalPodAutoscaler"]


def test_hpa_scales_a_deployment_up_under_load_and_back_down(api: httpx.Client, cluster: MetricsCluster,
                                                             namespace: str, controllers: Any) -> None:
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=burning_deployment("web", cluster.node, 40))
    assert r.status_code == 201, r.text
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 10}}
    r = api.post(HPA_PATH.format(ns=namespace), json=hpa("web", "web", behavior=behavior))
    assert r.status_code == 201, r.text
    created = r.json()
    # defaults filled as upstream: the rest of the scale-down rules, and the whole scale-up rules
    assert created["spec"]["behavior"]["scaleDown"] == {
        "stabilizationWindowSeconds": 10, "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
    assert created["spec"]["behavior"]["scaleUp"]["policies"][0] == {"type": "Pods", "value": 4, "periodSeconds": 15}

    scaled = wait_for(lambda: (h := get_hpa(api, namespace, "web"))["status"].get("desiredReplicas") == 3 and h,
                      120, 0.5, what="the HPA to want 3 replicas")
    assert isinstance(scaled, dict)
    status = scaled["status"]
    assert status["lastScaleTime"] and status["currentMetrics"][0]["type"] == "Resource"
    assert status["currentMetrics"][0]["resource"]["name"] == "cpu"
    assert status["currentMetrics"][0]["resource"]["current"]["averageUtilization"] > 50, status
    assert condition(scaled, "AbleToScale")["status"] == "True"
    assert condition(scaled, "ScalingActive") == {**condition(scaled, "ScalingActive"), "status": "True",
                                                  "reason": "ValidMetricFound"}
    wait_for(lambda: len(running_pods(api, namespace, "web")) == 3, 90, 0.5, what="3 running web pods")
    deployment = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").json()
    assert deployment["spec"]["replicas"] == 3
    rescale = wait_for(lambda: [e for e in events_of(api, namespace, "web") if e["reason"] == "SuccessfulRescale"],
                       20, 0.5, what="the SuccessfulRescale event")
    assert isinstance(rescale, list)
    assert rescale[0]["message"] == "New size: 3; reason: cpu resource utilization (percentage of request) above " \
                                    "target", rescale

    # the loops end after 40 s: below target, and after the 10 s window the HPA scales back to 1
    down = wait_for(lambda: (h := get_hpa(api, namespace, "web"))["status"].get("desiredReplicas") == 1 and h,
                    180, 0.5, what="the HPA to come back to 1 replica")
    assert isinstance(down, dict)
    wait_for(lambda: api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").json()["spec"]["replicas"] == 1,
             30, 0.5, what="the deployment scaled back to 1")
    messages = [e["message"] for e in events_of(api, namespace, "web") if e["reason"] == "SuccessfulRescale"]
    assert "New size: 1; reason: All metrics below target" in messages, messages


def test_hpa_of_a_missing_target_and_without_metrics(api: httpx.Client, cluster: MetricsCluster, namespace: str,
                                                     controllers: Any) -> None:
    r = api.post(HPA_PATH.format(ns=namespace), json=hpa("ghost", "nope"))
    assert r.status_code == 201, r.text
    found = wait_for(lambda: condition(h := get_hpa(api, namespace, "ghost"), "AbleToScale").get("status") == "False"
                     and h, 30, 0.5, what="AbleToScale False on a missing target")
    assert isinstance(found, dict)
    able = condition(found, "AbleToScale")
    assert able["reason"] == "FailedGetScale", able
    assert able["message"].startswith("the HPA controller was unable to get the target's current scale: "), able
    assert 'deployments.apps "nope" not found' in able["message"], able
    wait_for(lambda: any(e["reason"] == "FailedGetScale" for e in events_of(api, namespace, "ghost")), 20, 0.5,
             what="the FailedGetScale event")


def test_hpa_bad_input(api: httpx.Client, namespace: str) -> None:
    path = HPA_PATH.format(ns=namespace)
    r = api.post(path, json=hpa("bad", "web", minReplicas=5, maxReplicas=2))
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["reason"] == "Invalid"
    assert body["message"] == ('HorizontalPodAutoscaler.autoscaling "bad" is invalid: spec.maxReplicas: Invalid value: '
                               '2: must be greater than or equal to `minReplicas`'), body
    unknown = hpa("bad", "web")
    unknown["spec"]["metrics"] = [{"type": "Memory"}]
    r = api.post(path, json=unknown)
    assert r.status_code == 422, r.text
    causes = {c["field"]: c["message"] for c in r.json()["details"]["causes"]}
    assert causes["spec.metrics[0].type"] == ('Unsupported value: "Memory": supported values: "ContainerResource", '
                                              '"External", "Object", "Pods", "Resource"'), causes
    neither = hpa("bad", "web")
    neither["spec"]["metrics"][0]["resource"]["target"] = {"type": "Utilization"}
    r = api.post(path, json=neither)
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0] == {
        "reason": "FieldValueRequired", "field": "spec.metrics[0].resource.target.averageUtilization",
        "message": "Required value: must set either a target raw value or a target utilization"}
    policy = hpa("bad", "web",
                 behavior={"scaleUp": {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 2000}]}})
    r = api.post(path, json=policy)
    assert r.status_code == 422
    fields = [c["field"] for c in r.json()["details"]["causes"]]
    assert fields == ["spec.behavior.scaleUp.policies[0].value", "spec.behavior.scaleUp.policies[0].periodSeconds"]
    assert api.get(f"{path}/bad").status_code == 404  # nothing half-written


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_autoscale_and_get_hpa(version: str, api: httpx.Client, cluster: MetricsCluster, namespace: str,
                                       tmp_path: Path) -> None:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl {version} is not installed")
    kubectl = Kubectl(binary, version, cluster.apiserver.url, tmp_path, namespace)
    name = f"auto{version.replace('.', '')}"
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=burning_deployment(name, cluster.node, 0))
    assert r.status_code == 201, r.text
    out = kubectl.run("autoscale", f"deployment/{name}", "--min=1", "--max=4", "--cpu-percent=60").ok().stdout
    assert out.strip() == f"horizontalpodautoscaler.autoscaling/{name} autoscaled", out
    created = get_hpa(api, namespace, name)
    assert created["spec"]["minReplicas"] == 1 and created["spec"]["maxReplicas"] == 4
    assert created["spec"]["metrics"][0]["resource"]["target"] == {"type": "Utilization", "averageUtilization": 60}
    assert created["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    lines = kubectl.run("get", "hpa", name).ok().stdout.splitlines()
    assert lines[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"], lines
    row = lines[1].split()
    assert row[:4] == [name, f"Deployment/{name}", "cpu:", "<unknown>/60%"], lines
    assert row[4:6] == ["1", "4"] and row[6] in ("0", "1"), lines  # REPLICAS: 0 until the HPA's first look
    # the same object as autoscaling/v1 (what kubectl 1.27 created): one CPU target, the rest in annotations
    v1 = api.get(f"/apis/autoscaling/v1/namespaces/{namespace}/horizontalpodautoscalers/{name}")
    assert v1.status_code == 200, v1.text
    assert v1.json()["apiVersion"] == "autoscaling/v1"
    assert v1.json()["spec"] == {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                                 "minReplicas": 1, "maxReplicas": 4, "targetCPUUtilizationPercentage": 60}
    listed = api.get(f"/apis/autoscaling/v1/namespaces/{namespace}/horizontalpodautoscalers").json()
    assert listed["kind"] == "HorizontalPodAutoscalerList" and {i["apiVersion"] for i in listed["items"]} == {
        "autoscaling/v1"}
    with api.stream("GET", f"/apis/autoscaling/v1/namespaces/{namespace}/horizontalpodautoscalers",
                    params={"watch": "true", "timeoutSeconds": "1", "fieldSelector": f"metadata.name={name}"}) as w:
        events = [json.loads(line) for line in w.iter_lines() if line.strip()]
    assert events and events[0]["type"] == "ADDED", events
    assert events[0]["object"]["apiVersion"] == "autoscaling/v1", events
    assert events[0]["object"]["spec"]["targetCPUUtilizationPercentage"] == 60, events
    patch = api.patch(f"/apis/autoscaling/v1/namespaces/{namespace}/horizontalpodautoscalers/{name}",
                      content='{"spec":{"maxReplicas":5}}', headers={"Content-Type": "application/merge-patch+json"})
    assert patch.status_code == 415 and patch.json()["reason"] == "UnsupportedMediaType", patch.text


@pytest.mark.kubectl
def test_mkubectl_describe_hpa_as_kubectl_133(api: httpx.Client, cluster: MetricsCluster, namespace: str,
                                              controllers: Any, tmp_path: Path) -> None:
    from tests.integration.test_mkubectl import Mk, same_output

    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl 1.33 is not installed")
    body = burning_deployment("idle", cluster.node, 0)
    body["spec"]["replicas"] = 0  # scaling disabled: the HPA's status settles, and no event comes and goes
    assert api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=body).status_code == 201
    spec = hpa("idle", "idle", behavior={"scaleDown": {"stabilizationWindowSeconds": 60, "policies": [
        {"type": "Pods", "value": 1, "periodSeconds": 30}]}})
    spec["spec"]["metrics"].append({"type": "Resource", "resource": {"name": "memory", "target": {
        "type": "AverageValue", "averageValue": "64Mi"}}})
    assert api.post(HPA_PATH.format(ns=namespace), json=spec).status_code == 201
    settled = wait_for(lambda: condition(h := get_hpa(api, namespace, "idle"), "ScalingActive").get("reason")
                       == "ScalingDisabled" and h, 30, 0.5, what="the HPA to see scaling disabled")
    assert isinstance(settled, dict)
    kubectl = Kubectl(binary, "1.33", cluster.apiserver.url, tmp_path / "kubectl", namespace)
    described = same_output(Mk(cluster.apiserver.url, tmp_path / "mk", namespace), kubectl, "describe", "hpa", "idle")
    assert "Reference:                                             Deployment/idle" in described, described
    assert "  resource cpu on pods  (as a percentage of request):  <unknown> / 50%" in described, described
    assert "ScalingActive  False   ScalingDisabled" in described, described


def test_stats_summary_on_a_containerd_node(api: httpx.Client, cluster: MetricsCluster, namespace: str) -> None:
    """The same summary from containerd's own CRI plugin (containerd_node), which reads its cgroups."""
    if shutil.which("containerd") is None or shutil.which("runc") is None:
        pytest.skip("no containerd/runc on this host")
    from tests.node_process import KubeletProcess, cleanup, free_pod_cidrs

    workdir = make_workdir("minik8s-metrics-ctrd-")
    kubelet = KubeletProcess(workdir, cluster.apiserver, f"mc-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0],
                             container_runtime="containerd")
    try:
        kubelet.start(api)
        r = api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod("ctrd-burner", kubelet.node, BURN))
        assert r.status_code == 201, r.text

        def burnt() -> JSONDict | None:
            r = httpx.get(f"{kubelet.address}/stats/summary", timeout=30)
            assert r.status_code == 200, r.text
            found = pod_stats(r.json(), namespace, "ctrd-burner")
            if not found or not found["containers"]:
                return None
            main = found["containers"][0]
            return found if main.get("cpu", {}).get("usageCoreNanoSeconds", 0) > 300_000_000 else None

        found = wait_for(burnt, 120, 1.0, what=f"the containerd pod's CPU in the summary\n{kubelet.log_tail()}")
        assert isinstance(found, dict)
        main = found["containers"][0]
        assert main["name"] == "main" and main["memory"]["workingSetBytes"] > 0, found
        assert found["cpu"]["usageCoreNanoSeconds"] >= main["cpu"]["usageCoreNanoSeconds"] * 0.9, found
    finally:
        api.delete(f"/api/v1/namespaces/{namespace}/pods/ctrd-burner", params={"gracePeriodSeconds": "0"})
        cleanup([kubelet])
        api.delete(f"/api/v1/nodes/{kubelet.node}")
        shutil.rmtree(workdir, ignore_errors=True)
