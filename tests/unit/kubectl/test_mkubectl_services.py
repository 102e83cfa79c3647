"""mkubectl's Service commands as pure parts: `create service` and `expose` build the objects kubectl 1.33
builds (the expected YAML and messages are kubectl 1.33's for the same flags and objects), the selector,
port and protocol introspection of polymorphichelpers, and the Service, Endpoints and EndpointSlice
describers line for line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from kubectl.cli import main
from kubectl.commands.create import parse_ports, service_from_options, tcp_specs, validate
from kubectl.commands.expose import exposed_service, parse_labels, service_for_object
from kubectl.describe import (
    endpoint_slice_description,
    endpoints_description,
    format_endpoint_slices,
    service_description,
)
from kubectl.errors import CommandError
from kubectl.flags import atoi, dry_run, parse_port
from kubectl.polymorphichelpers import (
    can_be_exposed,
    map_based_selector_for_object,
    ports_for_object,
    protocols_for_object,
)
from kubectl.printers import check_mutation_output, go_yaml
from machinery.api.resources import resource_for

JSONDict = dict[str, Any]


def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
            *argv: str) -> tuple[int, str, str]:
    """mkubectl's main() with no kubeconfig and no server: a client dry run needs neither."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- create service -------------------------------------------------------------------------------

CLUSTERIP_YAML = """apiVersion: v1
kind: Service
metadata:
  creationTimestamp: null
  labels:
    app: web
  name: web
spec:
  ports:
  - name: 80-8080
    port: 80
    protocol: TCP
    targetPort: 8080
  - name: "443"
    port: 443
    protocol: TCP
    targetPort: 443
  selector:
    app: web
  type: ClusterIP
status:
  loadBalancer: {}
"""

NODEPORT_YAML = """apiVersion: v1
kind: Service
metadata:
  creationTimestamp: null
  labels:
    app: np
  name: np
spec:
  ports:
  - name: "80"
    nodePort: 30080
    port: 80
    protocol: TCP
    targetPort: 80
  selector:
    app: np
  type: NodePort
status:
  loadBalancer: {}
"""

HEADLESS_YAML = """apiVersion: v1
kind: Service
metadata:
  creationTimestamp: null
  labels:
    app: h
  name: h
  namespace: foo
spec:
  clusterIP: None
  selector:
    app: h
  type: ClusterIP
status:
  loadBalancer: {}
"""

EXTERNALNAME_YAML = """apiVersion: v1
kind: Service
metadata:
  creationTimestamp: null
  labels:
    app: ext
  name: ext
spec:
  externalName: example.com
  selector:
    app: ext
  type: ExternalName
status:
  loadBalancer: {}
"""


def test_create_service_objects_are_kubectls() -> None:
    assert go_yaml(service_from_options("web", "ClusterIP", tcp_specs(["80:8080", "443"]))) == CLUSTERIP_YAML
    assert go_yaml(service_from_options("np", "NodePort", ["80"], node_port=30080)) == NODEPORT_YAML
    assert go_yaml(service_from_options("h", "ClusterIP", [], cluster_ip="None", namespace="foo")) == HEADLESS_YAML
    assert go_yaml(service_from_options("ext", "ExternalName", [], external_name="example.com")) == EXTERNALNAME_YAML


def test_tcp_flags_split_on_commas_and_repeat() -> None:
    assert tcp_specs(["80,81", "82:http"]) == ["80", "81", "82:http"]
    assert parse_ports("82:http") == (82, "http")
    assert parse_ports("0") == (0, 0)  # ParsePort(allowZero=true)


@pytest.mark.parametrize("spec, message", [
    ("abc", 'strconv.ParseUint: parsing "abc": invalid syntax'),
    ("70000", 'strconv.ParseUint: parsing "70000": value out of range'),
    ("80:Bad_Name", "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"),
    ("80:70000", "must be between 1 and 65535, inclusive"),
    ("80:0", "must be between 1 and 65535, inclusive"),
])
def test_bad_port_specs_read_like_kubectls(spec: str, message: str) -> None:
    with pytest.raises(CommandError) as err:
        parse_ports(spec)
    assert str(err.value) == message


@pytest.mark.parametrize("service_type, tcp, cluster_ip, external_name, message", [
    ("NodePort", ["80"], "None", "", "ClusterIP=None can only be used with ClusterIP service type"),
    ("ClusterIP", [], "", "", "at least one tcp port specifier must be provided"),
    ("LoadBalancer", [], "", "", "at least one tcp port specifier must be provided"),
    ("ExternalName", [], "", "Bad_", "invalid service external name Bad_"),
])
def test_create_service_validation(service_type: str, tcp: list[str], cluster_ip: str, external_name: str,
                                   message: str) -> None:
    with pytest.raises(CommandError) as err:
        validate(service_type, tcp, cluster_ip, external_name)
    assert str(err.value) == message


def test_valid_create_service_options_pass() -> None:
    validate("ClusterIP", [], "None", "")  # headless needs no port
    validate("ExternalName", [], "", "db.example.com")


def test_create_service_client_dry_run_through_the_cli(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, monkeypatch, tmp_path, "create", "service", "clusterip", "web",
                             "--tcp=80:8080", "--tcp", "443", "--dry-run=client", "-o", "yaml")
    assert (code, out, err) == (0, CLUSTERIP_YAML, "")
    code, out, err = run_cli(capsys, monkeypatch, tmp_path, "create", "svc", "loadbalancer", "lb", "--tcp=80",
                             "--dry-run=client")
    assert (code, out, err) == (0, "service/lb created (dry run)\n", "")
    code, out, _ = run_cli(capsys, monkeypatch, tmp_path, "create", "service", "clusterip", "h", "--clusterip=None",
                           "-n", "foo", "--dry-run", "-o", "yaml")
    assert (code, out) == (0, HEADLESS_YAML)


@pytest.mark.parametrize("argv, message", [
    (["create", "service", "clusterip", "--tcp=80", "--dry-run=client"], "error: exactly one NAME is required, got 0"),
    (["create", "service", "clusterip", "a", "b", "--tcp=80"], "error: exactly one NAME is required, got 2"),
    (["create", "service", "externalname", "x"], 'error: required flag(s) "external-name" not set'),
    (["create", "svc", "clusterip", "x", "--tcp=80", "--dry-run=bogus"],
     'error: Invalid dry-run value (bogus). Must be "none", "server", or "client".'),
    (["create", "service", "clusterip", "x", "--tcp=80", "-o", "wide", "--dry-run=client"],
     'error: unable to match a printer suitable for the output format "wide", allowed formats are: json,name,yaml'),
    (["create", "service", "nodeport", "x", "--tcp=99999", "--dry-run=client"],
     'error: strconv.ParseUint: parsing "99999": value out of range'),
    (["create", "service", "clusterip", "x", "--dry-run=client"],
     "error: at least one tcp port specifier must be provided"),
])
def test_create_service_errors_are_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path, argv: list[str], message: str) -> None:
    code, out, err = run_cli(capsys, monkeypatch, tmp_path, *argv)
    assert (code, out, err) == (1, "", message + "\n")


# -- expose ---------------------------------------------------------------------------------------

DEPLOYMENTS = resource_for("apps", "deployments")
PODS = resource_for("", "pods")
SERVICES = resource_for("", "services")
NODES = resource_for("", "nodes")
assert DEPLOYMENTS and PODS and SERVICES and NODES


def web_deployment(**selector: Any) -> JSONDict:
    return {"metadata": {"name": "web", "labels": {"app": "web", "tier": "fe"}},
            "spec": {"selector": selector or {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "a", "image": "x", "ports": [
                                      {"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"},
                                      {"containerPort": 53, "protocol": "TCP"}]}]}}}}


def expose_args(**flags: str) -> argparse.Namespace:
    defaults = {"selector": "", "port": "", "protocol": "", "target_port": "", "labels": "", "type": "", "name": "",
                "cluster_ip": "", "external_ip": "", "load_balancer_ip": "", "session_affinity": ""}
    return argparse.Namespace(**{**defaults, **flags})


EXPOSED_WEB_YAML = """apiVersion: v1
kind: Service
metadata:
  creationTimestamp: null
  labels:
    app: web
    tier: fe
  name: web
spec:
  ports:
  - name: port-1
    port: 80
    protocol: TCP
    targetPort: 80
  - name: port-2-udp
    port: 53
    protocol: UDP
    targetPort: 53
  - name: port-2-tcp
    port: 53
    protocol: TCP
    targetPort: 53
  selector:
    app: web
status:
  loadBalancer: {}
"""


def test_expose_deployment_takes_selector_ports_protocols_and_labels() -> None:
    """kubectl 1.33's `expose deployment web --dry-run=client -o yaml` of the same Deployment."""
    assert DEPLOYMENTS is not None
    service = service_for_object(DEPLOYMENTS, web_deployment(), expose_args(), "")
    assert go_yaml(service) == EXPOSED_WEB_YAML


def test_expose_flags_override_the_object() -> None:
    assert DEPLOYMENTS is not None and PODS is not None
    service = service_for_object(DEPLOYMENTS, web_deployment(), expose_args(
        port="8080", target_port="http", type="NodePort", name="w2"), "ns1")
    assert service["metadata"] == {"creationTimestamp": None, "labels": {"app": "web", "tier": "fe"}, "name": "w2",
                                   "namespace": "ns1"}
    assert service["spec"] == {"ports": [{"port": 8080, "protocol": "TCP", "targetPort": "http"}],
                               "selector": {"app": "web"}, "type": "NodePort"}
    udp = service_for_object(DEPLOYMENTS, web_deployment(), expose_args(port="80", protocol="UDP"), "")
    assert udp["spec"]["ports"] == [{"port": 80, "protocol": "UDP", "targetPort": 80}]
    pod = {"metadata": {"name": "solo", "labels": {"run": "solo"}},
           "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 8080}]}]}}
    solo = service_for_object(PODS, pod, expose_args(labels="a=b", session_affinity="ClientIP",
                                                     cluster_ip="10.96.0.20", target_port="9090"), "")
    assert solo["metadata"]["labels"] == {"a": "b"}
    assert solo["spec"] == {"clusterIP": "10.96.0.20", "ports": [{"port": 8080, "protocol": "TCP", "targetPort": 9090}],
                            "selector": {"run": "solo"}, "sessionAffinity": "ClientIP"}


def test_expose_headless_without_ports_and_long_names() -> None:
    assert DEPLOYMENTS is not None
    no_ports = web_deployment()
    no_ports["spec"]["template"]["spec"]["containers"][0]["ports"] = []
    no_ports["metadata"]["name"] = "x" * 70
    service = service_for_object(DEPLOYMENTS, no_ports, expose_args(cluster_ip="None"), "")
    assert service["metadata"]["name"] == "x" * 63  # DNS-1035 label length
    assert "ports" not in service["spec"] and service["spec"]["clusterIP"] == "None"


@pytest.mark.parametrize("kind, obj, flags, message", [
    ("deployment", {"metadata": {"name": "n"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
        "spec": {"containers": [{"name": "c"}]}}}}, {}, "couldn't find port via --port flag or introspection"),
    ("deployment", {"metadata": {"name": "n"}, "spec": {"selector": {"matchLabels": {"app": "ex"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["a", "b"]}]}}}, {},
     "couldn't retrieve selectors via --selector flag or introspection: couldn't convert expressions - "
     "\"[{Key:tier Operator:In Values:[a b]}]\" to map-based selector format"),
    ("deployment", {"metadata": {"name": "n"}, "spec": {"selector": {}}}, {},
     "couldn't retrieve selectors via --selector flag or introspection: invalid deployment: no selectors, "
     "therefore cannot be exposed"),
    ("pod", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}, {},
     "couldn't retrieve selectors via --selector flag or introspection: the pod has no labels and cannot be exposed"),
    ("service", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}, {},
     "couldn't retrieve selectors via --selector flag or introspection: the service has no pod selector set"),
    ("node", {"metadata": {"name": "n"}}, {}, "cannot expose a Node"),
    ("deployment", web_deployment(), {"port": "abc"}, 'strconv.Atoi: parsing "abc": invalid syntax'),
    ("deployment", web_deployment(), {"session_affinity": "foo"}, "unknown session affinity: foo"),
    ("deployment", web_deployment(), {"selector": "a"}, "unexpected label spec: a"),
    ("deployment", web_deployment(), {"labels": "=b"}, "unexpected empty label key"),
])
def test_expose_errors_are_kubectls(kind: str, obj: JSONDict, flags: dict[str, str], message: str) -> None:
    info = {"deployment": DEPLOYMENTS, "pod": PODS, "service": SERVICES, "node": NODES}[kind]
    assert info is not None
    with pytest.raises(CommandError) as err:
        service_for_object(info, obj, expose_args(**flags), "")
    assert str(err.value) == message


def test_polymorphic_helpers() -> None:
    can_be_exposed("apps", "ReplicaSet")
    with pytest.raises(ValueError, match=r"^cannot expose a StatefulSet\.apps$"):
        can_be_exposed("apps", "StatefulSet")
    service = {"spec": {"selector": {"b": "2", "a": "1"}, "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53},
                                                                   {"port": 80}]}}
    assert map_based_selector_for_object("", "Service", service) == "a=1,b=2"
    assert ports_for_object("", "Service", service) == ["53", "80"]
    assert protocols_for_object("", "Service", service) == {"53": ["UDP", "TCP"], "80": ["TCP"]}
    rc = {"spec": {"selector": {"app": "rc"},
                   "template": {"spec": {"containers": [{"ports": [{"containerPort": 1}]}]}}}}
    assert map_based_selector_for_object("", "ReplicationController", rc) == "app=rc"
    assert ports_for_object("", "ReplicationController", rc) == ["1"]
    assert parse_labels("a=1,b=") == {"a": "1", "b": ""}


def test_exposed_service_needs_a_selector_and_a_name() -> None:
    with pytest.raises(CommandError, match=r"^selector must be specified$"):
        exposed_service(name="x", selector="", ports=["80"], protocols={})
    with pytest.raises(CommandError, match=r"^name must be specified$"):
        exposed_service(name="", selector="a=b", ports=["80"], protocols={})


def test_flag_values() -> None:
    assert [dry_run(v) for v in ("none", "client", "server", "true", "false")] == [
        "none", "client", "server", "client", "none"]
    assert atoi("-12") == -12 and parse_port("65535") == 65535
    with pytest.raises(ValueError, match=r'^strconv\.Atoi: parsing "1x": invalid syntax$'):
        atoi("1x")
    with pytest.raises(ValueError, match=r'^strconv\.ParseUint: parsing "-1": invalid syntax$'):
        parse_port("-1")
    check_mutation_output("name")
    with pytest.raises(ValueError, match="output format \"table\""):
        check_mutation_output("table")


# -- describe -------------------------------------------------------------------------------------

WEB2: JSONDict = {
    "metadata": {"name": "web2", "namespace": "default"},
    "spec": {"type": "NodePort", "selector": {"app": "web"}, "clusterIP": "10.96.5.5", "clusterIPs": ["10.96.5.5"],
             "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "ClientIP",
             "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster", "externalIPs": ["1.2.3.4"],
             "ports": [{"name": "port-1", "port": 80, "protocol": "TCP", "targetPort": "http", "nodePort": 30080},
                       {"name": "port-2-udp", "port": 53, "protocol": "UDP", "targetPort": 53}]},
    "status": {"loadBalancer": {}},
}

WEB2_SLICES: list[JSONDict] = [
    {"metadata": {"name": "web2-abcde"}, "addressType": "IPv4",
     "ports": [{"name": "port-1", "port": 8080, "protocol": "TCP"}, {"name": "port-2-udp", "port": 53,
                                                                      "protocol": "UDP"}],
     "endpoints": [{"addresses": ["10.244.0.5"], "conditions": {"ready": True}},
                   {"addresses": ["10.244.1.7"], "conditions": {"ready": False}},
                   {"addresses": ["10.244.1.8"], "conditions": {"ready": True}},
                   {"addresses": ["10.244.1.9"]},
                   {"addresses": ["10.244.1.10"], "conditions": {"ready": True}}]},
    {"metadata": {"name": "web2-xyz"}, "addressType": "IPv4", "ports": [{"name": "port-2-udp", "port": 53,
                                                                         "protocol": "UDP"}],
     "endpoints": [{"addresses": ["10.244.3.1"], "conditions": {"ready": False}}]},
]

# kubectl 1.33's `describe svc web2` of the same Service and slices
WEB2_DESCRIBED = """Name:                     web2
Namespace:                default
Labels:                   <none>
Annotations:              <none>
Selector:                 app=web
Type:                     NodePort
IP Family Policy:         SingleStack
IP Families:              IPv4
IP:                       10.96.5.5
IPs:                      10.96.5.5
External IPs:             1.2.3.4
Port:                     port-1  80/TCP
TargetPort:               http/TCP
NodePort:                 port-1  30080/TCP
Endpoints:                10.244.0.5:8080,10.244.1.8:8080,10.244.1.9:8080 + 1 more...
Port:                     port-2-udp  53/UDP
TargetPort:               53/UDP
Endpoints:                10.244.0.5:53,10.244.1.8:53,10.244.1.9:53 + 1 more...
Session Affinity:         ClientIP
External Traffic Policy:  Cluster
Internal Traffic Policy:  Cluster
Events:                   <none>
"""


def test_describe_service_is_kubectls() -> None:
    assert service_description(WEB2, WEB2_SLICES, []) == WEB2_DESCRIBED


def test_describe_service_without_slices_or_defaults() -> None:
    bare = {"metadata": {"name": "ex", "namespace": "d", "labels": {"app": "ex"}},
            "spec": {"type": "ExternalName", "externalName": "example.com",
                     "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "172.18.0.2"}, {"hostname": "lb.example"}]}}}
    lines = [" ".join(line.split()) for line in service_description(bare, [], None).splitlines()]
    assert lines == ["Name: ex", "Namespace: d", "Labels: app=ex", "Annotations: <none>", "Selector: <none>",
                     "Type: ExternalName", "IP Families: <none>", "IP:", "IPs: <none>",
                     "LoadBalancer Ingress: 172.18.0.2, lb.example", "External Name: example.com",
                     "Port: <unset> 80/TCP", "TargetPort: 80/TCP", "Endpoints: <none>", "Session Affinity:"]
    # events that could not be read: no Events section, as kubectl


def test_endpoint_slice_lists() -> None:
    slices: list[JSONDict] = [{"ports": [], "endpoints": [{"addresses": [f"10.0.0.{i}"]} for i in range(2)]},
              {"ports": [{"name": "", "port": 80}], "endpoints": [{"addresses": ["fd00::1"]}]}]
    assert format_endpoint_slices(slices, "") == "10.0.0.0,10.0.0.1,[fd00::1]:80"
    assert format_endpoint_slices(slices, "other") == "10.0.0.0,10.0.0.1"
    assert format_endpoint_slices([], "") == "<none>"


ENDPOINTS_DESCRIBED = """Name:         web
Namespace:    default
Labels:       <none>
Annotations:  <none>
Subsets:
  Addresses:          10.244.0.5
  NotReadyAddresses:  10.244.1.7
  Ports:
    Name     Port  Protocol
    ----     ----  --------
    port-1   80    TCP
    <unset>  53    UDP

  Addresses:          10.244.0.6
  NotReadyAddresses:  <none>

Events:  <none>
"""


def test_describe_endpoints_is_kubectls() -> None:
    ep = {"metadata": {"name": "web", "namespace": "default"},
          "subsets": [{"addresses": [{"ip": "10.244.0.5"}], "notReadyAddresses": [{"ip": "10.244.1.7"}],
                       "ports": [{"name": "port-1", "port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
                      {"addresses": [{"ip": "10.244.0.6"}]}]}
    assert endpoints_description(ep, []) == ENDPOINTS_DESCRIBED


SLICE_DESCRIBED = """Name:         web-abcde
Namespace:    default
Labels:       kubernetes.io/service-name=web
Annotations:  <none>
AddressType:  IPv4
Ports:
  Name        Port  Protocol
  ----        ----  --------
  port-1      80    TCP
  port-2-udp  53    UDP
Endpoints:
  - Addresses:  10.244.0.5
    Conditions:
      Ready:    true
    Hostname:   <unset>
    TargetRef:  Pod/web-1
    NodeName:   n1
    Zone:       <unset>
  - Addresses:  10.244.1.9
    Conditions:
      Ready:   <unset>
    Hostname:  h1
    NodeName:  <unset>
    Zone:      <unset>
Events:        <none>
"""


def test_describe_endpoint_slice_is_kubectls() -> None:
    eps = {"metadata": {"name": "web-abcde", "namespace": "default",
                        "labels": {"kubernetes.io/service-name": "web"}},
           "addressType": "IPv4",
           "ports": [{"name": "port-1", "port": 80, "protocol": "TCP"}, {"name": "port-2-udp", "port": 53,
                                                                         "protocol": "UDP"}],
           "endpoints": [{"addresses": ["10.244.0.5"], "conditions": {"ready": True}, "nodeName": "n1",
                          "targetRef": {"kind": "Pod", "name": "web-1", "namespace": "default"}},
                         {"addresses": ["10.244.1.9"], "hostname": "h1"}]}
    assert endpoint_slice_description(eps, []) == SLICE_DESCRIBED
    empty = endpoint_slice_description({"metadata": {"name": "e"}, "addressType": "IPv4"}, None)
    assert "Ports: <unset>\n" in empty and "Endpoints: <none>\n" in empty
