"""mkubectl's Service commands against the real apiserver, beside real kubectl 1.27 and 1.33 on the same
objects: `expose` and `create service` build the same Services (client dry runs compared byte for byte, real
creates stored as asked), `describe svc|ep|endpointslice` and `get svc,ep,endpointslices -o wide` print the
same text, and the failures read the same one line. kubectl 1.33 sends `create service` as protobuf, so its
creates also check the apiserver's Service protobuf decoding.

Services, EndpointSlices and Endpoints are written by hand here (no controllers): what is compared is the
CLI, whatever the apiserver's defaults are.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer
from tests.integration.test_mkubectl import Mk, same_output, write
from tests.kubectl import Kubectl, find_kubectl
from tests.manifests import deployment, pod

JSONDict = dict[str, Any]
VERSIONS = ("1.27", "1.33")


def kubectl_version(apiserver: ApiServer, namespace: str, tmp_path: Path, version: str) -> Kubectl:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed: nothing to compare with")
    return Kubectl(binary, version, apiserver.url, tmp_path / f"kubectl-{version}", namespace)


@pytest.fixture
def mk(apiserver: ApiServer, namespace: str, tmp_path: Path) -> Mk:
    return Mk(apiserver.url, tmp_path, namespace)


@pytest.fixture(params=VERSIONS)
def kubectl(request: pytest.FixtureRequest, apiserver: ApiServer, namespace: str, tmp_path: Path) -> Kubectl:
    return kubectl_version(apiserver, namespace, tmp_path, request.param)


def web_deployment() -> JSONDict:
    d = deployment("web", replicas=2)
    d["metadata"]["labels"] = {"app": "web", "tier": "fe"}
    d["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": 80, "name": "http"}, {"containerPort": 53, "protocol": "UDP"},
        {"containerPort": 53, "protocol": "TCP"}]
    return d


def service(api: httpx.Client, namespace: str, name: str) -> JSONDict:
    r = api.get(f"/api/v1/namespaces/{namespace}/services/{name}")
    assert r.status_code == 200, r.text
    return r.json()


def test_expose_builds_kubectls_service(mk: Mk, kubectl: Kubectl, api: httpx.Client, namespace: str,
                                        tmp_path: Path) -> None:
    solo = pod("solo", labels={"run": "solo"})
    solo["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    mk.run("apply", "-f", str(write(tmp_path / "objs.yaml", web_deployment(), solo))).ok()
    # a port with two protocols: kubectl 1.33 (as mkubectl) makes one ServicePort per protocol, 1.27 repeats the
    # port with the last protocol seen
    compared = [["deploy/web", "--port=8080", "--target-port=http", "--name=w2", "--type=NodePort"],
                ["deployment", "web", "--port=80", "--protocol=UDP", "--session-affinity=ClientIP"],
                ["pod", "solo", "--labels=a=b", "--cluster-ip=None"], ["pod/solo", "--selector=x=y,z=w"]]
    if kubectl.version != "1.27":
        compared.append(["deployment", "web"])
    for args in compared:
        same_output(mk, kubectl, "expose", *args, "--dry-run=client", "-o", "yaml")
    assert mk.run("expose", "deployment", "web", "--port=80", "--target-port=http").ok().stdout == (
        "service/web exposed\n")
    stored = service(api, namespace, "web")
    assert stored["metadata"]["labels"] == {"app": "web", "tier": "fe"}
    assert stored["spec"]["selector"] == {"app": "web"}
    assert [(p["port"], p["protocol"], p["targetPort"]) for p in stored["spec"]["ports"]] == [(80, "TCP", "http")]
    # the same name again: the server's AlreadyExists, worded as kubectl words it
    ours = mk.fails("expose", "deployment", "web", "--port=80")
    theirs = kubectl.run("expose", "deployment", "web", "--port=80")
    assert theirs.returncode == 1 and ours == theirs.stderr.strip() == (
        'Error from server (AlreadyExists): services "web" already exists')
    assert kubectl.run("expose", "pod", "solo", "--name=solo-svc").ok().stdout == "service/solo-svc exposed\n"
    assert service(api, namespace, "solo-svc")["spec"]["selector"] == {"run": "solo"}


def test_expose_refusals_read_like_kubectls(mk: Mk, kubectl: Kubectl, api: httpx.Client, namespace: str,
                                            tmp_path: Path) -> None:
    bare = deployment("bare")
    bare["spec"]["template"]["spec"]["containers"][0].pop("ports", None)
    nolabels = pod("nolabels")
    del nolabels["metadata"]["labels"]
    mk.run("apply", "-f", str(write(tmp_path / "objs.yaml", bare, nolabels))).ok()
    for args in (["deployment", "bare"], ["pod", "nolabels", "--port=80"], ["deployment", "missing", "--port=80"],
                 ["namespace", namespace, "--port=80"], ["deployment", "bare", "--port=abc"]):
        ours = mk.fails("expose", *args)
        theirs = kubectl.run("expose", *args)
        assert theirs.returncode == 1, theirs
        assert ours == theirs.stderr.splitlines()[0], f"expose {' '.join(args)}\n{theirs}"
    assert "couldn't find port via --port flag or introspection" in mk.fails("expose", "deployment", "bare")
    # nothing was created by any refusal
    assert api.get(f"/api/v1/namespaces/{namespace}/services").json()["items"] == []


def random_node_port() -> int:
    """A NodePort for one test: the session's apiserver allocates them, other modules' Services hold some."""
    return random.randint(30000, 32767)


def create_service_args() -> list[list[str]]:
    return [["clusterip", "web", "--tcp=80:8080", "--tcp=443"],
            ["clusterip", "headless", "--clusterip=None"],
            ["nodeport", "np", "--tcp=80:http", f"--node-port={random_node_port()}"],
            ["loadbalancer", "lb", "--tcp=80"],
            ["externalname", "ext", "--external-name=db.example.com"]]


def test_create_service_builds_kubectls_service(mk: Mk, kubectl: Kubectl, api: httpx.Client,
                                                namespace: str) -> None:
    for args in create_service_args():
        same_output(mk, kubectl, "create", "service", *args, "--dry-run=client", "-o", "yaml")
        same_output(mk, kubectl, "create", "service", *args, "--dry-run=server", "-o", "name")
    # the server's refusal (one --node-port on two ports), worded as kubectl words it
    twice = ["create", "service", "nodeport", "np", "--tcp=80,81", f"--node-port={random_node_port()}"]
    theirs = kubectl.run(*twice)
    assert theirs.returncode == 1 and mk.fails(*twice) == theirs.stderr.strip()
    assert "spec.ports[1].nodePort: Duplicate value" in theirs.stderr
    assert api.get(f"/api/v1/namespaces/{namespace}/services").json()["items"] == []  # nothing stored
    assert mk.run("create", "service", "clusterip", "web", "--tcp=80:8080").ok().stdout == "service/web created\n"
    assert service(api, namespace, "web")["spec"]["ports"] == [
        {"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}]
    # real kubectl creates its own (1.33 as protobuf): the stored Service is the one it built
    node_port = random_node_port()
    assert kubectl.run("create", "service", "nodeport", "np", "--tcp=80:http", f"--node-port={node_port}"
                       ).ok().stdout == "service/np created\n"
    np = service(api, namespace, "np")
    assert np["metadata"]["labels"] == {"app": "np"} and np["spec"]["selector"] == {"app": "np"}
    assert np["spec"]["type"] == "NodePort"
    assert [(p["name"], p["port"], p["targetPort"], p["nodePort"]) for p in np["spec"]["ports"]] == [
        ("80-http", 80, "http", node_port)]
    assert kubectl.run("create", "service", "externalname", "ext", "--external-name=db.example.com").ok()
    assert service(api, namespace, "ext")["spec"]["externalName"] == "db.example.com"
    ours = mk.fails("create", "service", "clusterip", "web", "--tcp=80")
    theirs = kubectl.run("create", "service", "clusterip", "web", "--tcp=80")
    assert ours == theirs.stderr.strip() == (
        'error: failed to create ClusterIP service: services "web" already exists')


def test_create_service_refusals_change_nothing(mk: Mk, api: httpx.Client, namespace: str) -> None:
    for args, message in (
        (["nodeport", "x", "--tcp=80", "--clusterip=None"], "error: unrecognized arguments: --clusterip=None"),
        (["clusterip", "x"], "error: at least one tcp port specifier must be provided"),
        (["clusterip", "x", "--tcp=80:Bad_Name"],
         "error: must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"),
        (["externalname", "x", "--external-name=Bad_"], "error: invalid service external name Bad_"),
        (["clusterip", "--tcp=80"], "error: exactly one NAME is required, got 0"),
    ):
        assert mk.fails("create", "service", *args) == message
    assert api.get(f"/api/v1/namespaces/{namespace}/services").json()["items"] == []


def hand_written(namespace: str) -> list[JSONDict]:
    """A Service with two ports, its two EndpointSlices (ready, not ready and unset endpoints, more than three
    on one port) and its Endpoints, as the controllers would write them."""
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"app": "web"},
                                                                 "annotations": {"team": "a"}},
           "spec": {"type": "NodePort", "selector": {"app": "web"},  # the apiserver allocates IP and node ports
                    "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"},
                              {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53}]}}
    ready = [{"addresses": [f"10.244.0.{i}"], "conditions": {"ready": True, "serving": True, "terminating": False},
              "nodeName": "n1", "targetRef": {"kind": "Pod", "name": f"web-{i}", "namespace": namespace}}
             for i in range(2, 6)]
    not_ready = {"addresses": ["10.244.1.9"], "conditions": {"ready": False}, "nodeName": "n2"}
    slices = [
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "web-abcde", "labels": {"kubernetes.io/service-name": "web"}},
         "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
         "endpoints": [*ready, not_ready]},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "web-fghij", "labels": {"kubernetes.io/service-name": "web"}},
         "addressType": "IPv4", "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}],
         "endpoints": [{"addresses": ["10.244.0.2"], "hostname": "h", "zone": "z1"}]},
    ]
    endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
                 "subsets": [{"addresses": [{"ip": f"10.244.0.{i}"} for i in range(2, 6)],
                              "notReadyAddresses": [{"ip": "10.244.1.9"}],
                              "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]},
                             {"addresses": [{"ip": "10.244.0.2"}], "ports": [{"name": "dns", "port": 53,
                                                                              "protocol": "UDP"}]}]}
    return [svc, *slices, endpoints]


def test_describe_and_get_print_kubectls_text(mk: Mk, apiserver: ApiServer, api: httpx.Client, namespace: str,
                                              tmp_path: Path) -> None:
    """kubectl 1.33's text (its describe svc reads EndpointSlices; 1.27's reads Endpoints, so only 1.33)."""
    kubectl = kubectl_version(apiserver, namespace, tmp_path, "1.33")
    mk.run("apply", "-f", str(write(tmp_path / "objs.yaml", *hand_written(namespace)))).ok()
    described = same_output(mk, kubectl, "describe", "svc", "web")
    assert "Endpoints:                10.244.0.2:8080,10.244.0.3:8080,10.244.0.4:8080 + 1 more...\n" in described
    assert "Endpoints:                10.244.0.2:53\n" in described
    same_output(mk, kubectl, "describe", "endpoints", "web")
    same_output(mk, kubectl, "describe", "endpointslices")  # both, by listing
    same_output(mk, kubectl, "describe", "endpointslice", "web-fg")  # by name prefix
    same_output(mk, kubectl, "get", "svc,ep,endpointslices", "-o", "wide")
    same_output(mk, kubectl, "get", "svc/web", "ep/web", "-o", "name")
