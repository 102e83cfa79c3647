"""Services end to end (issue 11) on one process-based cluster (conftest's service_cluster, shared with
test_statefulsets): etcd, apiserver (its own Service
CIDR on this host), controller-manager with the EndpointSlice and Endpoints controllers, scheduler, two kubelets
on real Docker and CNI bridges, one kube-proxy on the host's real packet filter (a chain prefix of its own) and
the cluster DNS. Driven as users drive it: mkubectl and real kubectl 1.27 / 1.33, the official Python client,
and a busybox pod on node a that fetches through the Service.

- a Deployment whose pods serve their own names, exposed by mkubectl: `wget http://web`, `http://web.<ns>` and
  `http://web.<ns>.svc.cluster.local` from the busybox pod reach pods on both nodes (distinct backends counted
  over N requests, each on a new connection); a NodePort answers from the host; a headless Service resolves
  to every ready pod IP;
- scale down, delete a pod, fail a readiness probe: the endpoint leaves the slice (or turns not ready) and
  gets no new connections; a Service without a ready endpoint refuses at once (REJECT), not a hang;
- real kubectl 1.27 and 1.33: `expose deployment`, `create service clusterip/nodeport`, `get
  svc,endpointslices -o wide` with upstream's columns, `describe svc` (mkubectl's text the same as 1.33's);
- the official Python client creates a Service and reads its EndpointSlices;
- kill -9 kube-proxy and the DNS while traffic flows: what was programmed keeps serving, and after the
  restart new Services route and resolve; when the cluster stops, no rule of its chain prefix is left.

Every wait is a condition with a deadline; the fixtures remove the cluster and its rules even when a
test fails.
"""

from __future__ import annotations

import ipaddress
import json
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from tests.cluster import wait_for
from tests.e2e.local_cluster import CLUSTER_DOMAIN, LocalCluster
from tests.integration.test_mkubectl import Mk, age_blind
from tests.kubectl import Kubectl, find_kubectl, write_kubeconfig
from tests.node_process import BUSYBOX, HTTPD

JSONDict = dict[str, Any]
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
REQUESTS = 40  # per name: with 4 backends, a miss of one node has odds of 2^-40
# each pod serves its own name (a busybox httpd over a one-line page), and is ready while /w/ready exists
SERVE_NAME = "mkdir -p /w && hostname > /w/index.html && touch /w/ready && exec httpd -f -p 80 -h /w"


# -- the cluster and what the tests share ---------------------------------------------------------------


@pytest.fixture(scope="module")
def local_cluster(service_cluster: LocalCluster) -> LocalCluster:
    """The package's cluster with the Service network (conftest's service_cluster, shared with test_statefulsets;
    overrides the plain one here); it asserts that no rule of its chain prefix is left when it stops."""
    return service_cluster


@pytest.fixture(scope="module")
def svc_api(local_cluster: LocalCluster) -> Iterator[httpx.Client]:
    with local_cluster.client(timeout=30) as api:
        yield api


@pytest.fixture(scope="module")
def ns(svc_api: httpx.Client) -> Iterator[str]:
    name = f"svc-{uuid.uuid4().hex[:6]}"
    r = svc_api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert r.status_code == 201, r.text
    yield name
    svc_api.delete(f"/api/v1/namespaces/{name}")
    wait_for(lambda: svc_api.get(f"/api/v1/namespaces/{name}").status_code == 404, 90, 0.2,
             what=f"namespace {name} deleted")


@pytest.fixture(scope="module")
def mk(local_cluster: LocalCluster, ns: str, tmp_path_factory: pytest.TempPathFactory) -> Mk:
    return Mk(local_cluster.url, tmp_path_factory.mktemp("mk"), ns)


def kubectl_for(cluster: LocalCluster, namespace: str, workdir: Path, version: str = "1.33") -> Kubectl:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl {version} is not installed on this machine: this end-to-end test drives it")
    return Kubectl(binary, version, cluster.url, workdir / f"kubectl-{version}", namespace)


@pytest.fixture(scope="module")
def kube(local_cluster: LocalCluster, ns: str, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return kubectl_for(local_cluster, ns, tmp_path_factory.mktemp("kubectl"))


def serving_deployment(name: str, replicas: int) -> JSONDict:
    labels = {"app": name}
    container = {"name": "httpd", "image": HTTPD, "command": ["sh", "-c", SERVE_NAME],
                 "ports": [{"containerPort": 80, "name": "http"}],
                 "readinessProbe": {"httpGet": {"path": "/ready", "port": 80}, "periodSeconds": 1,
                                    "failureThreshold": 1}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [container], "terminationGracePeriodSeconds": 1}}}}


def create(api: httpx.Client, path: str, body: JSONDict) -> JSONDict:
    r = api.post(path, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def get(api: httpx.Client, path: str) -> JSONDict:
    r = api.get(path)
    assert r.status_code == 200, r.text
    return r.json()


def ready_pods(api: httpx.Client, ns: str, app: str) -> list[JSONDict]:
    pods = get(api, f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3D{app}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])]


def wait_ready(cluster: LocalCluster, api: httpx.Client, ns: str, app: str, count: int,
               spread: bool = False) -> list[JSONDict]:
    def check() -> list[JSONDict] | None:
        pods = ready_pods(api, ns, app)
        total = get(api, f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3D{app}")["items"]
        if len(pods) != count or len(total) != count:
            return None
        if spread and len({p["spec"]["nodeName"] for p in pods}) < 2:
            return None
        return pods

    try:
        return wait_for(check, 90, 0.2, what=f"{count} ready pods of {app}")  # type: ignore[return-value]
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{cluster.logs()}") from None


def slice_addresses(api: httpx.Client, ns: str, service: str, ready_only: bool = True) -> set[str]:
    slices = get(api, f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
                      f"?labelSelector={SERVICE_NAME_LABEL}%3D{service}")["items"]
    return {a for s in slices for e in s.get("endpoints") or [] for a in e.get("addresses") or []
            if not ready_only or (e.get("conditions") or {}).get("ready") is not False}


def wait_slice(api: httpx.Client, ns: str, service: str, ips: set[str], timeout: float = 30) -> None:
    last: list[set[str]] = [set()]

    def check() -> bool:
        last[0] = slice_addresses(api, ns, service)
        return last[0] == ips

    try:
        wait_for(check, timeout, 0.1, what=f"the ready endpoints of {service} to be {sorted(ips)}")
    except TimeoutError as e:
        raise AssertionError(f"{e}; last seen {sorted(last[0])}") from None


@pytest.fixture(scope="module")
def web(local_cluster: LocalCluster, svc_api: httpx.Client, ns: str, mk: Mk) -> list[JSONDict]:
    """Four pods of `web` over both nodes, exposed by mkubectl as `web` (ClusterIP), `web-np` (NodePort) and
    `web-headless` (clusterIP None); the ready pods."""
    create(svc_api, f"/apis/apps/v1/namespaces/{ns}/deployments", serving_deployment("web", 4))
    pods = wait_ready(local_cluster, svc_api, ns, "web", 4, spread=True)
    assert mk.run("expose", "deployment", "web", "--port=80", "--target-port=http").ok().stdout == (
        "service/web exposed\n")
    assert mk.run("expose", "deployment", "web", "--name=web-np", "--type=NodePort", "--port=80").ok().stdout == (
        "service/web-np exposed\n")
    assert mk.run("expose", "deployment", "web", "--name=web-headless", "--cluster-ip=None", "--port=80"
                  ).ok().stdout == "service/web-headless exposed\n"
    return pods


@pytest.fixture(scope="module")
def busybox(local_cluster: LocalCluster, svc_api: httpx.Client, ns: str) -> str:
    """A busybox pod on node a: the client inside the cluster."""
    node_a = local_cluster.node_names[0]
    create(svc_api, f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "labels": {"role": "client"}},
        "spec": {"nodeName": node_a, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "sh", "image": BUSYBOX, "command": ["sleep", "3600"]}]}})
    wait_for(lambda: get(svc_api, f"/api/v1/namespaces/{ns}/pods/client").get("status", {}).get("phase") == "Running",
             60, 0.2, what="the busybox client pod running on node a")
    return "client"


def in_pod(kube: Kubectl, pod: str, script: str, timeout: float = 120) -> str:
    return kube.run("exec", pod, "--", "sh", "-c", script, timeout=timeout).ok().stdout


def fetch_many(kube: Kubectl, pod: str, url: str, n: int = REQUESTS) -> list[str]:
    """n GETs of url from the pod, each a new connection (busybox wget; its -T crashes this busybox, so
    `timeout`); a failure is the line FAIL."""
    lines = in_pod(kube, pod, f"for i in $(seq {n}); do timeout 3 wget -q -O - {url} || echo FAIL; done")
    return lines.split()


def backends_by_node(pods: list[JSONDict]) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}


# -- the CLI: mkubectl, real kubectl 1.27 and 1.33, the official Python client -------------------------------


SERVICE_COLUMNS = ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"]
SLICE_COLUMNS = ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_real_kubectl_exposes_creates_lists_and_describes(local_cluster: LocalCluster, svc_api: httpx.Client,
                                                          namespace: str, tmp_path: Path, version: str) -> None:
    kube = kubectl_for(local_cluster, namespace, tmp_path, version)
    mk = Mk(local_cluster.url, tmp_path / "mk", namespace)
    create(svc_api, f"/apis/apps/v1/namespaces/{namespace}/deployments", serving_deployment("shop", 2))
    assert kube.run("expose", "deployment", "shop", "--port=80", "--target-port=http").ok().stdout == (
        "service/shop exposed\n")
    assert kube.run("create", "service", "clusterip", "shop-c", "--tcp=80:8080").ok().stdout == (
        "service/shop-c created\n")
    assert kube.run("create", "service", "nodeport", "shop-n", "--tcp=80:80").ok().stdout == (
        "service/shop-n created\n")
    shop = get(svc_api, f"/api/v1/namespaces/{namespace}/services/shop")
    assert shop["spec"]["selector"] == {"app": "shop"}
    assert [(p["port"], p["targetPort"]) for p in shop["spec"]["ports"]] == [(80, "http")]
    network = ipaddress.ip_network(local_cluster.service_cidr)
    for name in ("shop", "shop-c", "shop-n"):
        ip = get(svc_api, f"/api/v1/namespaces/{namespace}/services/{name}")["spec"]["clusterIP"]
        assert ipaddress.ip_address(ip) in network, f"{name} got {ip}, outside {network}"
    node_port = get(svc_api, f"/api/v1/namespaces/{namespace}/services/shop-n")["spec"]["ports"][0]["nodePort"]
    assert 30000 <= node_port <= 32767
    pods = wait_ready(local_cluster, svc_api, namespace, "shop", 2)
    wait_slice(svc_api, namespace, "shop", {p["status"]["podIP"] for p in pods})

    shop = get(svc_api, f"/api/v1/namespaces/{namespace}/services/shop")
    listed = kube.run("get", "svc,endpointslices", "-o", "wide").ok().stdout
    headers = [line.split() for line in listed.splitlines() if line.startswith("NAME")]
    assert headers[0] == SERVICE_COLUMNS and headers[1] == SLICE_COLUMNS, listed
    rows = {cells[0]: cells for cells in (line.split() for line in listed.splitlines())
            if cells and cells[0] != "NAME"}
    assert rows["service/shop"][1:5] == ["ClusterIP", shop["spec"]["clusterIP"], "<none>", "80/TCP"], listed
    assert rows["service/shop"][-1] == "app=shop" and rows["service/shop-n"][4] == f"80:{node_port}/TCP", listed
    described = kube.run("describe", "svc", "shop").ok().stdout
    lines = [" ".join(line.split()) for line in described.splitlines()]
    for expected in ("Selector: app=shop", "Type: ClusterIP", f"IP: {shop['spec']['clusterIP']}",
                     "Port: <unset> 80/TCP", "TargetPort: http/TCP", "Session Affinity: None"):
        assert expected in lines, described
    endpoints = next(line for line in lines if line.startswith("Endpoints:"))
    assert sorted(endpoints.split()[1].split(",")) == sorted(f"{p['status']['podIP']}:80" for p in pods), described
    if version == "1.33":  # mkubectl's text is 1.33's (1.27's describe read the Endpoints object)
        assert mk.run("describe", "svc", "shop").ok().stdout == described
        assert age_blind(mk.run("get", "svc,endpointslices", "-o", "wide").ok().stdout) == age_blind(
            kube.run("get", "svc,endpointslices", "-o", "wide").ok().stdout)


def test_mkubectl_refusals_change_nothing(local_cluster: LocalCluster, svc_api: httpx.Client, namespace: str,
                                          tmp_path: Path) -> None:
    mk = Mk(local_cluster.url, tmp_path, namespace)
    bare = serving_deployment("bare", 1)
    del bare["spec"]["template"]["spec"]["containers"][0]["ports"]
    create(svc_api, f"/apis/apps/v1/namespaces/{namespace}/deployments", bare)
    assert mk.fails("expose", "deployment", "bare") == "error: couldn't find port via --port flag or introspection"
    assert mk.fails("expose", "node", local_cluster.node_names[0], "--port=80") == "error: cannot expose a Node"
    assert mk.fails("expose", "deployment", "nope", "--port=80") == (
        'Error from server (NotFound): deployments.apps "nope" not found')
    assert mk.fails("create", "service", "nodeport", "x") == "error: at least one tcp port specifier must be provided"
    assert get(svc_api, f"/api/v1/namespaces/{namespace}/services")["items"] == []


def test_python_client_creates_a_service_and_reads_its_slices(local_cluster: LocalCluster, svc_api: httpx.Client,
                                                              ns: str, web: list[JSONDict], tmp_path: Path) -> None:
    api_client = k8s_config.new_client_from_config(config_file=str(write_kubeconfig(tmp_path / "kc",
                                                                                     local_cluster.url)))
    try:
        core, discovery = k8s_client.CoreV1Api(api_client), k8s_client.DiscoveryV1Api(api_client)
        body = k8s_client.V1Service(
            api_version="v1", kind="Service", metadata=k8s_client.V1ObjectMeta(name="py-web"),
            spec=k8s_client.V1ServiceSpec(selector={"app": "web"}, ports=[
                k8s_client.V1ServicePort(name="http", port=8080, target_port="http", protocol="TCP")]))
        created = core.create_namespaced_service(ns, body)
        assert created.metadata is not None and created.spec is not None and created.spec.ports
        assert created.metadata.name == "py-web" and created.spec.ports[0].target_port == "http"
        read = core.read_namespaced_service("py-web", ns)
        assert read.spec is not None and read.spec.selector == {"app": "web"}
        expected = {p["status"]["podIP"] for p in ready_pods(svc_api, ns, "web")}

        def slices() -> list[Any]:
            return discovery.list_namespaced_endpoint_slice(ns, label_selector=f"{SERVICE_NAME_LABEL}=py-web").items

        wait_for(lambda: {a for s in slices() for e in s.endpoints or [] for a in e.addresses} == expected, 30, 0.2,
                 what="py-web's EndpointSlices listing the web pods")
        (eps,) = slices()
        assert eps.address_type == "IPv4"
        assert [(p.name, p.port, p.protocol) for p in eps.ports] == [("http", 80, "TCP")]  # the named port resolved
        assert all(e.conditions.ready and e.target_ref.kind == "Pod" and e.node_name for e in eps.endpoints)
        owner = eps.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.controller) == ("Service", "py-web", True)
    finally:
        api_client.close()


# -- traffic through the Service network -------------------------------------------------------------------


def test_pod_reaches_the_service_by_every_name_on_both_nodes(local_cluster: LocalCluster, svc_api: httpx.Client,
                                                             ns: str, web: list[JSONDict], busybox: str,
                                                             kube: Kubectl) -> None:
    wait_slice(svc_api, ns, "web", {p["status"]["podIP"] for p in web})
    node_of = backends_by_node(web)
    for url in ("http://web", f"http://web.{ns}", f"http://web.{ns}.svc.{CLUSTER_DOMAIN}"):
        seen = Counter(fetch_many(kube, busybox, url))
        assert "FAIL" not in seen and set(seen) <= set(node_of), f"{url}: {seen}"
        assert len(seen) >= 3, f"{url} reached only {dict(seen)} over {REQUESTS} requests"
        assert {node_of[name] for name in seen} == set(local_cluster.node_names), f"{url}: {seen}"


def test_node_port_answers_from_the_host(local_cluster: LocalCluster, svc_api: httpx.Client, ns: str,
                                         web: list[JSONDict]) -> None:
    wait_slice(svc_api, ns, "web-np", {p["status"]["podIP"] for p in web})
    node_port = get(svc_api, f"/api/v1/namespaces/{ns}/services/web-np")["spec"]["ports"][0]["nodePort"]
    node = get(svc_api, f"/api/v1/nodes/{local_cluster.node_names[0]}")
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    seen = Counter(httpx.get(f"http://{address}:{node_port}/", timeout=3, trust_env=False).text.strip()
                   for _ in range(20))
    assert set(seen) <= set(backends_by_node(web)) and len(seen) >= 2, dict(seen)


def test_headless_service_resolves_to_every_pod_ip(local_cluster: LocalCluster, svc_api: httpx.Client, ns: str,
                                                   web: list[JSONDict], busybox: str, kube: Kubectl) -> None:
    ips = {p["status"]["podIP"] for p in web}
    wait_slice(svc_api, ns, "web-headless", ips)
    answer = in_pod(kube, busybox, f"nslookup web-headless.{ns}.svc.{CLUSTER_DOMAIN}")
    found = set(re.findall(r"\b10\.244\.\d+\.\d+\b", answer))
    assert found == ips, answer
    assert get(svc_api, f"/api/v1/namespaces/{ns}/services/web-headless")["spec"]["clusterIP"] == "None"


def test_endpoints_leave_on_scale_down_delete_and_failed_readiness(
        local_cluster: LocalCluster, svc_api: httpx.Client, ns: str, busybox: str, kube: Kubectl) -> None:
    create(svc_api, f"/apis/apps/v1/namespaces/{ns}/deployments", serving_deployment("churn", 4))
    create(svc_api, f"/api/v1/namespaces/{ns}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "churn"},
        "spec": {"selector": {"app": "churn"}, "ports": [{"port": 80, "targetPort": "http"}]}})
    ip = get(svc_api, f"/api/v1/namespaces/{ns}/services/churn")["spec"]["clusterIP"]
    pods = wait_ready(local_cluster, svc_api, ns, "churn", 4)
    wait_slice(svc_api, ns, "churn", {p["status"]["podIP"] for p in pods})

    # scale to 3: the removed pod's endpoint goes, and no request reaches it
    r = svc_api.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/churn/scale",
                      content=json.dumps({"spec": {"replicas": 3}}),
                      headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    pods = wait_ready(local_cluster, svc_api, ns, "churn", 3)
    wait_slice(svc_api, ns, "churn", {p["status"]["podIP"] for p in pods})
    served = set(fetch_many(kube, busybox, f"http://{ip}/"))
    assert served <= {p["metadata"]["name"] for p in pods}, served

    # delete one pod: its endpoint goes (its replacement's comes), it gets nothing new
    victim, victim_ip = pods[0]["metadata"]["name"], pods[0]["status"]["podIP"]
    assert svc_api.delete(f"/api/v1/namespaces/{ns}/pods/{victim}").status_code == 200
    wait_for(lambda: victim_ip not in slice_addresses(svc_api, ns, "churn", ready_only=False), 30, 0.1,
             what=f"{victim}'s endpoint gone from the slice")
    pods = wait_ready(local_cluster, svc_api, ns, "churn", 3)
    wait_slice(svc_api, ns, "churn", {p["status"]["podIP"] for p in pods})
    served = set(fetch_many(kube, busybox, f"http://{ip}/"))
    assert victim not in served and served <= {p["metadata"]["name"] for p in pods}, served

    # fail one pod's readiness: its endpoint stays in the slice but not ready, and gets nothing new
    sick = pods[0]
    in_pod(kube, sick["metadata"]["name"], "rm /w/ready")
    wait_slice(svc_api, ns, "churn", {p["status"]["podIP"] for p in pods[1:]})
    assert sick["status"]["podIP"] in slice_addresses(svc_api, ns, "churn", ready_only=False)
    served = set(fetch_many(kube, busybox, f"http://{ip}/"))
    assert sick["metadata"]["name"] not in served and served, served


def test_service_without_ready_endpoints_refuses_at_once(local_cluster: LocalCluster, svc_api: httpx.Client,
                                                         ns: str, busybox: str, kube: Kubectl) -> None:
    create(svc_api, f"/api/v1/namespaces/{ns}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "nobody"},
        "spec": {"selector": {"app": "nobody"}, "ports": [{"port": 80}]}})
    ip = get(svc_api, f"/api/v1/namespaces/{ns}/services/nobody")["spec"]["clusterIP"]

    def refused() -> str | None:  # once kube-proxy has the Service, a REJECT answers (the 10 s never run out)
        started = time.monotonic()
        done = kube.run("exec", busybox, "--", "timeout", "10", "wget", "-q", "-O", "-", f"http://{ip}/")
        took = time.monotonic() - started
        return done.stderr if done.returncode != 0 and "refused" in done.stderr and took < 5 else None

    wait_for(refused, 30, 0.5, what=f"a connection to the endpoint-less {ip}:80 refused within 5 s")


def test_kill_9_proxy_and_dns_mid_traffic_then_converge(local_cluster: LocalCluster, svc_api: httpx.Client,
                                                        ns: str, web: list[JSONDict], busybox: str,
                                                        kube: Kubectl) -> None:
    assert local_cluster.proxy is not None and local_cluster.dns is not None
    wait_slice(svc_api, ns, "web-np", {p["status"]["podIP"] for p in web})
    node_port = get(svc_api, f"/api/v1/namespaces/{ns}/services/web-np")["spec"]["ports"][0]["nodePort"]
    node = get(svc_api, f"/api/v1/nodes/{local_cluster.node_names[0]}")
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    outcomes: list[tuple[float, bool]] = []
    stop = threading.Event()

    def traffic() -> None:  # the host keeps asking the NodePort throughout
        while not stop.is_set():
            try:
                ok = httpx.get(f"http://{address}:{node_port}/", timeout=2, trust_env=False).status_code == 200
            except httpx.HTTPError:
                ok = False
            outcomes.append((time.monotonic(), ok))
            time.sleep(0.05)

    worker = threading.Thread(target=traffic, daemon=True)
    worker.start()
    try:
        wait_for(lambda: sum(ok for _, ok in outcomes) >= 5, 20, 0.05, what="traffic through the NodePort")
        killed_at = time.monotonic()
        local_cluster.proxy.kill()
        local_cluster.dns.kill()
        # while they are down, the rules already programmed keep serving; new Services wait for the restart
        create(svc_api, f"/api/v1/namespaces/{ns}/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "late"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}})
        wait_for(lambda: sum(ok for t, ok in outcomes if t > killed_at) >= 10, 20, 0.05,
                 what="the NodePort still answering with kube-proxy dead")
        local_cluster.proxy.start()
        local_cluster.dns.start()
        wait_for(lambda: set(fetch_many(kube, busybox, "http://late", 8)) <= set(backends_by_node(web)), 30, 0.5,
                 what="the Service created while kube-proxy and the DNS were down reachable by name")
    finally:
        stop.set()
        worker.join(5)
    after = [ok for t, ok in outcomes if t > killed_at]
    assert after and sum(after) / len(after) >= 0.95, f"{after.count(False)} of {len(after)} requests failed"
