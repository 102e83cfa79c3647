"""Resource metrics on real processes: a module's own etcd and apiserver (given `--metrics-server-url`),
one kubelet with its Docker shim, `python -m metrics_server` scraping it every 2 s. A pod burning a
CPU in a busybox loop beside an idle one: the kubelet's `/stats/summary` and `/metrics/resource`
numbers move for the one and not the other, the metrics.k8s.io API through the apiserver reports
them, and real kubectl 1.27 and 1.33 `top` them."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from machinery.quantity import parse_quantity
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
        import docker

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
        return s if done else None

    second = wait_for(later, 30, 0.5, what="the burner to burn half a CPU-second")
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
    # the second reading of the same container has a rate: about one core (the loop is single-threaded)
    assert 200_000_000 < container["cpu"]["usageNanoCores"] < 1_500_000_000, container
    assert b1["podRef"]["uid"] and b1["startTime"]
    text = httpx.get(f"{cluster.kubelet.address}/metrics/resource", timeout=30).text
    assert f'container_cpu_usage_seconds_total{{container="main",namespace="{namespace}",pod="burner"}}' in text
    assert "# TYPE node_memory_working_set_bytes gauge" in text and "scrape_error 0" in text


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
        return m if m and parse_quantity(m["containers"][0]["usage"]["cpu"]).milli_value() > 300 else None

    burner = wait_for(burning, 40, 0.5, what="the burner's PodMetrics over 300m")
    assert isinstance(burner, dict)
    assert burner["kind"] == "PodMetrics" and burner["metadata"]["labels"] == {"app": "burner"}
    assert burner["containers"][0]["name"] == "main" and burner["window"].endswith("s")
    assert parse_quantity(burner["containers"][0]["usage"]["memory"]).int_value() > 0
    idler = wait_for(lambda: pod_metrics(api, namespace, "idler"), 20, 0.5, what="the idler's PodMetrics")
    assert isinstance(idler, dict)
    assert parse_quantity(idler["containers"][0]["usage"]["cpu"]).milli_value() < 100, idler
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
    assert rows["burner"][1].endswith("m") and int(rows["burner"][1][:-1]) > 300, top_pods
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
