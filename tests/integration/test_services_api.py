"""Services, Endpoints and EndpointSlices through two real apiserver processes on one real etcd of this
module's own: CRUD and upstream's errors, ClusterIP and NodePort allocation (taken, out of range,
duplicated, freed on delete and type change, never leaked by a failed create, distinct under 50
concurrent creates spread over both apiservers, never one IP twice when both race for it), the
`kubernetes` Service and its endpoints as the apiservers' leases say, a selector-less Service with
hand-written Endpoints, services/status, RBAC of the new identities, real kubectl 1.27 and 1.33
(create service, expose, get -o wide) and the official Python client."""

from __future__ import annotations

import base64
import concurrent.futures
import ipaddress
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, Etcd, wait_for
from tests.conftest import etcd_keys
from tests.kubectl import Kubectl, find_kubectl

ADDRESSES = ("198.51.100.10", "198.51.100.11")  # what each apiserver advertises (TEST-NET-2: never dialled)
RANGE = "10.96.0.0/12"


@pytest.fixture(scope="module")
def apiservers(workdir: Path, own_etcd: Etcd) -> Iterator[tuple[ApiServer, ApiServer]]:
    servers = [ApiServer(workdir, own_etcd, "--advertise-address", ip, "--etcd-compaction-interval", "0")
               for ip in ADDRESSES]
    try:
        for server in servers:
            server.start()
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="module")
def one(apiservers: tuple[ApiServer, ApiServer]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=apiservers[0].url, timeout=20) as client:
        yield client


@pytest.fixture(scope="module")
def two(apiservers: tuple[ApiServer, ApiServer]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=apiservers[1].url, timeout=20) as client:
        yield client


@pytest.fixture
def ns(one: httpx.Client) -> Iterator[str]:
    name = f"svc-{uuid.uuid4().hex[:8]}"
    r = one.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert r.status_code == 201, r.text
    yield name
    for item in one.get(f"/api/v1/namespaces/{name}/services").json().get("items", []):
        one.delete(f"/api/v1/namespaces/{name}/services/{item['metadata']['name']}")  # gives their IPs back
    one.delete(f"/api/v1/namespaces/{name}")


def svc(name: str, **spec: Any) -> dict[str, Any]:
    if spec.get("type") != "ExternalName":
        spec.setdefault("ports", [{"port": 80}])
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def services(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/services" + (f"/{name}" if name else "")


def allocated(etcd: Etcd, key: str, base: int) -> set[int]:
    """The items a RangeAllocation in etcd marks taken, each as base + its offset."""
    stored = etcd_keys(etcd, key).get(key)
    if stored is None:
        return set()
    bits = int.from_bytes(base64.b64decode(json.loads(stored)["data"]), "big")
    return {base + i for i, bit in enumerate(reversed(bin(bits)[2:])) if bit == "1"}


def taken_ips(etcd: Etcd) -> set[str]:
    first = int(ipaddress.ip_address("10.96.0.1"))
    return {str(ipaddress.ip_address(i)) for i in allocated(etcd, "/registry/ranges/serviceips", first)}


def taken_ports(etcd: Etcd) -> set[int]:
    return allocated(etcd, "/registry/ranges/servicenodeports", 30000)


def message(r: httpx.Response) -> str:
    body = r.json()
    assert body["kind"] == "Status", body
    return str(body["message"])


# -- CRUD and defaults ------------------------------------------------------------------------------


def test_crud_defaults_and_freeing_on_delete(one: httpx.Client, own_etcd: Etcd, ns: str) -> None:
    r = one.post(services(ns), json=svc("web", selector={"app": "web"}, ports=[{"port": 80, "targetPort": "http"}]))
    assert r.status_code == 201, r.text
    spec = r.json()["spec"]
    ip = spec["clusterIP"]
    assert spec["clusterIPs"] == [ip] and spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["ipFamilies"] == ["IPv4"] and spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": "http"}]
    assert r.json()["status"] == {"loadBalancer": {}}
    assert int(ip.split(".")[1]) >= 96 and ip in taken_ips(own_etcd)
    got = one.get(services(ns, "web")).json()
    got["metadata"].setdefault("labels", {})["tier"] = "front"
    r = one.put(services(ns, "web"), json=got)
    assert r.status_code == 200 and r.json()["spec"]["clusterIP"] == ip
    listed = one.get(services(ns), params={"fieldSelector": f"spec.clusterIP={ip}"}).json()
    assert [s["metadata"]["name"] for s in listed["items"]] == ["web"]
    assert one.delete(services(ns, "web")).status_code == 200
    assert one.get(services(ns, "web")).status_code == 404
    assert ip not in taken_ips(own_etcd)


def test_bad_service_names_and_specs_change_nothing(one: httpx.Client, own_etcd: Etcd, ns: str) -> None:
    before = taken_ips(own_etcd), taken_ports(own_etcd)
    r = one.post(services(ns), json=svc("1web"))
    assert r.status_code == 422 and "a DNS-1035 label must consist of lower case alphanumeric" in message(r)
    r = one.post(services(ns), json=svc("np", type="NodePort", ports=[{"port": 80}, {"port": 81}]))
    assert r.status_code == 422
    assert message(r) == ('Service "np" is invalid: [spec.ports[0].name: Required value, spec.ports[1].name: '
                          "Required value]")
    assert (taken_ips(own_etcd), taken_ports(own_etcd)) == before
    assert one.get(services(ns)).json()["items"] == []


# -- ClusterIP allocation ---------------------------------------------------------------------------


def test_taken_and_out_of_range_cluster_ips(one: httpx.Client, own_etcd: Etcd, ns: str) -> None:
    r = one.post(services(ns), json=svc("taken", clusterIP="10.96.0.1"))  # the kubernetes Service's
    assert r.status_code == 422
    assert message(r) == ('Service "taken" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.1"}: '
                          "failed to allocate IP 10.96.0.1: provided IP is already allocated")
    assert r.json()["details"]["causes"][0]["field"] == "spec.clusterIPs"
    r = one.post(services(ns), json=svc("far", clusterIP="10.200.0.5"))
    assert r.status_code == 422
    assert message(r) == ('Service "far" is invalid: spec.clusterIPs: Invalid value: []string{"10.200.0.5"}: '
                          "failed to allocate IP 10.200.0.5: provided IP is not in the valid range. The range of "
                          f"valid IPs is {RANGE}")
    assert one.get(services(ns)).json()["items"] == []
    # a static pick in the lower band (cluster DNS's 10.96.0.10 is one) is honoured, and then taken
    r = one.post(services(ns), json=svc("static", clusterIP="10.96.0.42"))
    assert r.status_code == 201 and r.json()["spec"]["clusterIPs"] == ["10.96.0.42"]
    r = one.post(services(ns), json=svc("again", clusterIP="10.96.0.42"))
    assert r.status_code == 422 and "provided IP is already allocated" in message(r)


def test_cluster_ip_is_immutable(one: httpx.Client, ns: str) -> None:
    created = one.post(services(ns), json=svc("web")).json()
    created["spec"]["clusterIP"] = created["spec"]["clusterIPs"][0] = "10.96.0.43"
    r = one.put(services(ns, "web"), json=created)
    assert r.status_code == 422
    assert message(r) == 'Service "web" is invalid: spec.clusterIP: Invalid value: "10.96.0.43": field is immutable'


def test_failed_creates_give_back_what_they_took(one: httpx.Client, own_etcd: Etcd, ns: str) -> None:
    assert one.post(services(ns), json=svc("web")).status_code == 201
    # the name is taken: the IP and port it asked for were taken first, and given back
    r = one.post(services(ns), json=svc("web", type="NodePort", clusterIP="10.96.0.44",
                                        ports=[{"port": 80, "nodePort": 30444}]))
    assert r.status_code == 409, r.text
    # the namespace is missing: likewise
    r = one.post(services("no-such-ns"), json=svc("web", clusterIP="10.96.0.45"))
    assert r.status_code == 404, r.text
    assert "10.96.0.44" not in taken_ips(own_etcd) and "10.96.0.45" not in taken_ips(own_etcd)
    assert 30444 not in taken_ports(own_etcd)
    # a dry run takes nothing
    r = one.post(services(ns), params={"dryRun": "All"}, json=svc("dry", clusterIP="10.96.0.46"))
    assert r.status_code == 201 and r.json()["spec"]["clusterIP"] == "10.96.0.46"
    assert "10.96.0.46" not in taken_ips(own_etcd) and one.get(services(ns, "dry")).status_code == 404


def test_fifty_concurrent_creates_over_two_apiservers_get_fifty_ips(one: httpx.Client, two: httpx.Client,
                                                                    own_etcd: Etcd, ns: str) -> None:
    def create(i: int) -> str:
        client = one if i % 2 else two
        r = client.post(services(ns), json=svc(f"web-{i}"))
        assert r.status_code == 201, r.text
        return str(r.json()["spec"]["clusterIP"])

    with concurrent.futures.ThreadPoolExecutor(max_workers=25) as pool:
        ips = list(pool.map(create, range(50)))
    assert len(set(ips)) == 50
    assert set(ips) <= taken_ips(own_etcd)


def test_two_apiservers_racing_for_one_ip_give_it_once(one: httpx.Client, two: httpx.Client, own_etcd: Etcd,
                                                       ns: str) -> None:
    def create(client: httpx.Client, name: str, ip: str) -> httpx.Response:
        return client.post(services(ns), json=svc(name, clusterIP=ip))

    for round_ in range(8):
        ip = f"10.96.1.{round_ + 1}"
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(create, client, f"race-{round_}-{side}", ip)
                       for client, side in ((one, "a"), (two, "b"))]
            answers = [f.result() for f in futures]
        codes = sorted(r.status_code for r in answers)
        assert codes == [201, 422], [r.text for r in answers]
        holders = [s for s in one.get(services(ns)).json()["items"] if s["spec"].get("clusterIP") == ip]
        assert len(holders) == 1


# -- NodePort allocation ----------------------------------------------------------------------------


def test_node_ports_taken_out_of_range_duplicated_and_freed(one: httpx.Client, two: httpx.Client, own_etcd: Etcd,
                                                            ns: str) -> None:
    r = one.post(services(ns), json=svc("np", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["externalTrafficPolicy"] == "Cluster" and 30080 in taken_ports(own_etcd)
    r = two.post(services(ns), json=svc("np2", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
    assert r.status_code == 422
    assert message(r) == ('Service "np2" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is '
                          "already allocated")
    r = one.post(services(ns), json=svc("np3", type="NodePort", ports=[{"port": 80, "nodePort": 20080}]))
    assert r.status_code == 422
    assert message(r) == ('Service "np3" is invalid: spec.ports[0].nodePort: Invalid value: 20080: provided port is '
                          "not in the valid range. The range of valid ports is 30000-32767")
    r = one.post(services(ns), json=svc("np4", type="NodePort", ports=[{"name": "a", "port": 80, "nodePort": 30081},
                                                                        {"name": "b", "port": 81, "nodePort": 30081}]))
    assert r.status_code == 422
    assert message(r) == 'Service "np4" is invalid: spec.ports[1].nodePort: Duplicate value: 30081'
    assert 30081 not in taken_ports(own_etcd)
    # picked ports: TCP and UDP of one number share one, as upstream's
    r = one.post(services(ns), json=svc("dns", type="NodePort", ports=[
        {"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]))
    assert r.status_code == 201, r.text
    picked = {p["nodePort"] for p in r.json()["spec"]["ports"]}
    assert len(picked) == 1 and picked <= taken_ports(own_etcd)
    # deleted: the port is free for the next Service
    assert one.delete(services(ns, "np")).status_code == 200
    assert 30080 not in taken_ports(own_etcd)
    r = two.post(services(ns), json=svc("np2", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
    assert r.status_code == 201, r.text


def test_type_changes_allocate_and_free_node_ports(one: httpx.Client, own_etcd: Etcd, ns: str) -> None:
    created = one.post(services(ns), json=svc("web")).json()
    created["spec"]["type"] = "NodePort"
    r = one.put(services(ns, "web"), json=created)
    assert r.status_code == 200, r.text
    port = r.json()["spec"]["ports"][0]["nodePort"]
    assert 30000 <= port <= 32767 and port in taken_ports(own_etcd)
    assert r.json()["spec"]["clusterIP"] == created["spec"]["clusterIP"]
    back = r.json()
    back["spec"]["type"] = "ClusterIP"
    r = one.put(services(ns, "web"), json=back)
    assert r.status_code == 200, r.text
    assert "nodePort" not in r.json()["spec"]["ports"][0] and port not in taken_ports(own_etcd)
    # to ExternalName: the cluster IP goes back too
    ip = r.json()["spec"]["clusterIP"]
    r = one.patch(services(ns, "web"), headers={"Content-Type": "application/merge-patch+json"},
                  content=json.dumps({"spec": {"type": "ExternalName", "externalName": "db.example.com"}}))
    assert r.status_code == 200, r.text
    assert "clusterIP" not in r.json()["spec"] and ip not in taken_ips(own_etcd)


def test_external_name_rules(one: httpx.Client, ns: str) -> None:
    r = one.post(services(ns), json=svc("db", type="ExternalName", externalName="db.example.com"))
    assert r.status_code == 201 and "clusterIP" not in r.json()["spec"]
    r = one.post(services(ns), json=svc("nameless", type="ExternalName"))
    assert r.status_code == 422 and message(r) == 'Service "nameless" is invalid: spec.externalName: Required value'
    r = one.post(services(ns), json=svc("withip", type="ExternalName", externalName="db.example.com",
                                        clusterIP="10.96.0.47"))
    assert r.status_code == 422
    assert message(r) == ('Service "withip" is invalid: spec.clusterIPs: Forbidden: may not be set for ExternalName '
                          "services")


# -- status, Endpoints, the kubernetes Service --------------------------------------------------------


def test_status_only_through_the_status_subresource(one: httpx.Client, ns: str) -> None:
    created = one.post(services(ns), json=svc("lb", type="LoadBalancer")).json()
    created["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.50"}]}}
    r = one.put(services(ns, "lb"), json=created)
    assert r.status_code == 200 and r.json()["status"] == {"loadBalancer": {}}
    current = r.json()
    current["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.50"}]}}
    current["spec"]["type"] = "ClusterIP"  # ignored by /status
    r = one.put(services(ns, "lb") + "/status", json=current)
    assert r.status_code == 200, r.text
    assert r.json()["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.50", "ipMode": "VIP"}]
    assert r.json()["spec"]["type"] == "LoadBalancer"
    current = r.json()
    current["status"] = {"loadBalancer": {"ingress": [{"ip": "nope"}]}}
    r = one.put(services(ns, "lb") + "/status", json=current)
    assert r.status_code == 422 and "status.loadBalancer.ingress[0].ip" in message(r)


def test_selectorless_service_with_hand_written_endpoints(one: httpx.Client, ns: str) -> None:
    assert one.post(services(ns), json=svc("external-db", ports=[{"port": 5432}])).status_code == 201
    endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "external-db"},
                 "subsets": [{"addresses": [{"ip": "192.0.2.42"}], "ports": [{"port": 5432}]}]}
    r = one.post(f"/api/v1/namespaces/{ns}/endpoints", json=endpoints)
    assert r.status_code == 201, r.text
    assert r.json()["subsets"][0]["ports"] == [{"port": 5432, "protocol": "TCP"}]
    endpoints["metadata"]["name"] = "loopback"
    endpoints["subsets"][0]["addresses"] = [{"ip": "127.0.0.1"}]
    r = one.post(f"/api/v1/namespaces/{ns}/endpoints", json=endpoints)
    assert r.status_code == 422
    assert message(r) == ('Endpoints "loopback" is invalid: subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": '
                          "may not be in the loopback range (127.0.0.0/8, ::1/128)")
    table = one.get(f"/api/v1/namespaces/{ns}/endpoints",
                    headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [row["cells"][:2] for row in table["rows"]] == [["external-db", "192.0.2.42:5432"]]


def endpoint_ips(client: httpx.Client) -> tuple[list[str], list[str]]:
    endpoints = client.get("/api/v1/namespaces/default/endpoints/kubernetes").json()
    slice_ = client.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes").json()
    from_endpoints = [a["ip"] for s in endpoints.get("subsets") or [] for a in s.get("addresses") or []]
    from_slice = [a for e in slice_.get("endpoints") or [] for a in e["addresses"]]
    return from_endpoints, from_slice


def test_kubernetes_service_lists_the_live_apiservers(apiservers: tuple[ApiServer, ApiServer], one: httpx.Client,
                                                      own_etcd: Etcd, workdir: Path) -> None:
    wait_for(lambda: endpoint_ips(one) == (list(ADDRESSES), list(ADDRESSES)), 30, what="both apiservers listed")
    service = one.get("/api/v1/namespaces/default/services/kubernetes").json()
    assert service["spec"]["clusterIP"] == "10.96.0.1" and "selector" not in service["spec"]
    (port,) = service["spec"]["ports"]
    assert (port["name"], port["port"], port["protocol"]) == ("https", 443, "TCP")
    assert service["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    slice_ = one.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes").json()
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == "kubernetes"
    assert slice_["addressType"] == "IPv4" and slice_["ports"][0]["name"] == "https"
    port_named = slice_["ports"][0]["port"]
    assert port_named in (apiservers[0].port, apiservers[1].port)
    # a third apiserver joins, and on a clean stop leaves at once (its lease is given back); the port the
    # endpoints name stays, as its apiservers still serve on it
    third = ApiServer(workdir, own_etcd, "--advertise-address", "198.51.100.12", "--etcd-compaction-interval", "0")
    third.start()
    try:
        wait_for(lambda: "198.51.100.12" in endpoint_ips(one)[1], 30, what="the third apiserver listed")
    finally:
        third.stop()
    wait_for(lambda: endpoint_ips(one) == (list(ADDRESSES), list(ADDRESSES)), 30, what="the third gone")
    endpoints = one.get("/api/v1/namespaces/default/endpoints/kubernetes").json()
    assert endpoints["subsets"][0]["ports"][0]["port"] == port_named


# -- RBAC of the new identities ------------------------------------------------------------------------


@pytest.mark.parametrize(("user", "groups", "method", "path", "allowed"), [
    ("system:kube-proxy", [], "GET", "/api/v1/services", True),
    ("system:kube-proxy", [], "GET", "/apis/discovery.k8s.io/v1/endpointslices", True),
    ("system:kube-proxy", [], "POST", "/api/v1/namespaces/default/services", False),
    ("system:serviceaccount:kube-system:kube-dns", ["system:serviceaccounts"], "GET",
     "/apis/discovery.k8s.io/v1/endpointslices", True),
    ("system:serviceaccount:kube-system:kube-dns", ["system:serviceaccounts"], "GET", "/api/v1/pods", False),
    ("system:serviceaccount:kube-system:endpointslice-controller", [], "GET",
     "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes", True),
    ("system:serviceaccount:kube-system:endpoint-controller", [], "DELETE",
     "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes", False),
    ("system:node:n1", ["system:nodes"], "GET", "/api/v1/services", True),
    ("system:node:n1", ["system:nodes"], "GET", "/api/v1/endpoints", False),
])
def test_new_identities_get_what_their_roles_give(one: httpx.Client, user: str, groups: list[str], method: str,
                                                  path: str, allowed: bool) -> None:
    headers = [("Impersonate-User", user), *(("Impersonate-Group", g) for g in groups)]
    body = svc("rbac-probe") if method == "POST" else None
    r = one.request(method, path, headers=headers, json=body)
    assert (r.status_code != 403) == allowed, r.text


# -- real kubectl and the official Python client --------------------------------------------------------


def table(stdout: str) -> list[dict[str, str]]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    headers = re.split(r"\s{2,}", lines[0].strip())
    return [dict(zip(headers, re.split(r"\s{2,}", line.strip()), strict=True)) for line in lines[1:]]


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_create_expose_and_get_wide(apiservers: tuple[ApiServer, ApiServer], ns: str, version: str,
                                            tmp_path: Path) -> None:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed")
    kubectl = Kubectl(binary, version, apiservers[0].url, tmp_path / "kubectl", ns)
    node_port = 32000 + int(version.split(".")[1])
    kubectl.run("create", "deployment", "web", "--image=nginx", "--port=80").ok()
    assert kubectl.run("expose", "deployment", "web", "--port=80", "--target-port=8080").ok().stdout.strip() == \
        "service/web exposed"
    kubectl.run("create", "service", "clusterip", "cip", "--tcp=80:8080").ok()
    kubectl.run("create", "service", "nodeport", "np", "--tcp=80:8080", f"--node-port={node_port}").ok()
    kubectl.run("create", "service", "externalname", "db", "--external-name=db.example.com").ok()
    kubectl.run("create", "service", "loadbalancer", "lb", "--tcp=443:8443").ok()
    r = kubectl.run("create", "service", "clusterip", "taken", "--tcp=80:80", "--clusterip=10.96.0.1")
    assert r.returncode != 0
    assert ('Service "taken" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.1"}: failed to allocate '
            "IP 10.96.0.1: provided IP is already allocated") in r.stderr
    out = kubectl.run("get", "svc", "-o", "wide").ok().stdout
    assert out.splitlines()[0].split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"]
    rows = {row["NAME"]: row for row in table(out)}
    assert set(rows) == {"web", "cip", "np", "db", "lb"}
    assert rows["web"]["TYPE"] == "ClusterIP" and rows["web"]["PORT(S)"] == "80/TCP"
    assert rows["web"]["SELECTOR"] == "app=web" and rows["web"]["EXTERNAL-IP"] == "<none>"
    assert re.fullmatch(r"10\.(9[6-9]|10[0-9]|11[01])\.\d+\.\d+", rows["cip"]["CLUSTER-IP"])
    assert rows["np"]["PORT(S)"] == f"80:{node_port}/TCP"
    assert (rows["db"]["CLUSTER-IP"], rows["db"]["EXTERNAL-IP"], rows["db"]["PORT(S)"]) == \
        ("<none>", "db.example.com", "<none>")
    assert rows["lb"]["EXTERNAL-IP"] == "<pending>" and re.fullmatch(r"443:3\d{4}/TCP", rows["lb"]["PORT(S)"])
    described = kubectl.run("describe", "svc", "np").ok().stdout
    assert re.search(rf"NodePort:\s+80-8080\s+{node_port}/TCP", described), described
    slices = kubectl.run("get", "endpointslices", "-n", "default").ok().stdout
    assert slices.splitlines()[0].split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]


def test_official_python_client_creates_a_service(apiservers: tuple[ApiServer, ApiServer], ns: str) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    configuration = kubernetes.client.Configuration()
    configuration.host = apiservers[0].url
    with kubernetes.client.ApiClient(configuration) as api_client:
        core = kubernetes.client.CoreV1Api(api_client)
        body = kubernetes.client.V1Service(
            metadata=kubernetes.client.V1ObjectMeta(name="py"),
            spec=kubernetes.client.V1ServiceSpec(type="NodePort", selector={"app": "py"},
                                                 ports=[kubernetes.client.V1ServicePort(port=80, target_port=8080)]))
        created = core.create_namespaced_service(ns, body)
        assert created.spec.cluster_ip and created.spec.ports[0].node_port >= 30000
        assert created.spec.ports[0].protocol == "TCP" and created.spec.session_affinity == "None"
        read = core.read_namespaced_service("py", ns)
        assert read.spec.cluster_ip == created.spec.cluster_ip
        slices = kubernetes.client.DiscoveryV1Api(api_client).list_namespaced_endpoint_slice(
            "default", label_selector="kubernetes.io/service-name=kubernetes")
        assert [s.metadata.name for s in slices.items] == ["kubernetes"]
        core.delete_namespaced_service("py", ns)


def test_repair_gives_back_what_no_service_holds(workdir: Path, own_etcd: Etcd, one: httpx.Client, ns: str) -> None:
    """Upstream's repair controllers: an IP and a port taken in etcd by nobody's Service (an apiserver died
    between taking and writing) go back after three repair runs; what a Service holds stays."""
    import asyncio

    from apiserver.registry.allocator import NodePortAllocator, ServiceIPAllocator
    from apiserver.storage.etcd import EtcdStorage

    held = one.post(services(ns), json=svc("held", type="NodePort", ports=[{"port": 80, "nodePort": 30555}])).json()

    async def leak() -> None:
        storage = EtcdStorage([own_etcd.endpoint])
        try:
            await ServiceIPAllocator(storage, RANGE).allocate("10.96.2.2")
            await NodePortAllocator(storage, "30000-32767").allocate(30556)
        finally:
            await storage.close()

    asyncio.run(leak())
    assert "10.96.2.2" in taken_ips(own_etcd) and 30556 in taken_ports(own_etcd)
    repairer = ApiServer(workdir, own_etcd, "--service-allocation-repair-interval", "0.2",
                         "--advertise-address", "198.51.100.13", "--etcd-compaction-interval", "0")
    repairer.start()
    try:
        wait_for(lambda: "10.96.2.2" not in taken_ips(own_etcd) and 30556 not in taken_ports(own_etcd), 30,
                 what="the leaked IP and port given back")
    finally:
        repairer.stop()
    assert held["spec"]["clusterIP"] in taken_ips(own_etcd) and 30555 in taken_ports(own_etcd)


def test_headless_load_balancer_ports_and_back_from_external_name(one: httpx.Client, own_etcd: Etcd,
                                                                  ns: str) -> None:
    before = taken_ips(own_etcd)
    r = one.post(services(ns), json=svc("headless", clusterIP="None", selector={"app": "db"}))
    assert r.status_code == 201, r.text
    spec = r.json()["spec"]
    assert spec["clusterIPs"] == ["None"] and spec["ipFamilies"] == ["IPv4"] and taken_ips(own_etcd) == before
    # a LoadBalancer with externalTrafficPolicy Local gets a health-check node port besides its ports' ones
    r = one.post(services(ns), json=svc("lb", type="LoadBalancer", externalTrafficPolicy="Local"))
    assert r.status_code == 201, r.text
    spec = r.json()["spec"]
    assert {spec["healthCheckNodePort"], spec["ports"][0]["nodePort"]} <= taken_ports(own_etcd)
    assert spec["healthCheckNodePort"] != spec["ports"][0]["nodePort"]
    r = one.post(services(ns), json=svc("lb-no-ports", type="LoadBalancer", allocateLoadBalancerNodePorts=False))
    assert r.status_code == 201 and "nodePort" not in r.json()["spec"]["ports"][0]
    # deleting the LoadBalancer frees both of its ports
    assert one.delete(services(ns, "lb")).status_code == 200
    assert not {spec["healthCheckNodePort"], spec["ports"][0]["nodePort"]} & taken_ports(own_etcd)
    # ExternalName -> ClusterIP: now it needs an IP, and gets one
    one.post(services(ns), json=svc("alias", type="ExternalName", externalName="db.example.com"))
    r = one.patch(services(ns, "alias"), headers={"Content-Type": "application/merge-patch+json"},
                  content=json.dumps({"spec": {"type": "ClusterIP", "externalName": None,
                                               "ports": [{"port": 5432}]}}))
    assert r.status_code == 200, r.text
    ip = r.json()["spec"]["clusterIP"]
    assert ip in taken_ips(own_etcd) and r.json()["spec"]["ipFamilyPolicy"] == "SingleStack"
