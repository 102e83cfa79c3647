"""Ingress and IngressClass validation (apiserver/registry/ingress.py), the DefaultIngressClass plugin's choice
and the Ingress table printers, against upstream's validation_test.go messages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from apiserver.admission.defaultingressclass import default_class
from apiserver.auth import bootstrap
from apiserver.auth.authz import Authorizer, RBACAuthorizer, StaticRbac
from apiserver.printers import table_for
from apiserver.registry.ingress import IngressClassStrategy, IngressStrategy
from tests.unit.apiserver.test_rbac import res, user

SVC = {"service": {"name": "web", "port": {"number": 80}}}


def ingress(*paths: dict[str, Any], host: str = "a.example.com", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x", "namespace": "default"},
            "spec": {"rules": [{"host": host, "http": {"paths": list(paths)}}], **spec}}


def errors_of(obj: dict[str, Any]) -> list[str]:
    return [e.full() for e in IngressStrategy().validate(obj)]


def test_a_good_ingress_passes() -> None:
    assert errors_of(ingress({"path": "/", "pathType": "Prefix", "backend": SVC},
                             {"path": "/x", "pathType": "Exact", "backend": SVC},
                             {"pathType": "ImplementationSpecific", "backend": SVC},
                             tls=[{"hosts": ["a.example.com"], "secretName": "tls"}])) == []
    assert errors_of(ingress({"path": "/", "pathType": "Prefix", "backend": SVC}, host="*.example.com")) == []


def test_path_type_rules() -> None:
    assert errors_of(ingress({"path": "/", "backend": SVC})) == [
        "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"]
    assert errors_of(ingress({"path": "foo", "pathType": "Exact", "backend": SVC})) == [
        'spec.rules[0].http.paths[0].path: Invalid value: "foo": must be an absolute path']
    assert errors_of(ingress({"path": "/a//b", "pathType": "Prefix", "backend": SVC})) == [
        "spec.rules[0].http.paths[0].path: Invalid value: \"/a//b\": must not contain '//'"]
    assert errors_of(ingress({"path": "/a/..", "pathType": "Prefix", "backend": SVC})) == [
        "spec.rules[0].http.paths[0].path: Invalid value: \"/a/..\": cannot end with '/..'"]
    assert errors_of(ingress({"path": "/", "pathType": "Regex", "backend": SVC})) == [
        'spec.rules[0].http.paths[0].pathType: Unsupported value: "Regex": supported values: "Exact", '
        '"ImplementationSpecific", "Prefix"']
    assert errors_of(ingress({"path": "rel", "pathType": "ImplementationSpecific", "backend": SVC})) == [
        'spec.rules[0].http.paths[0].path: Invalid value: "rel": must be an absolute path']


def test_backends_and_hosts() -> None:
    both = {**SVC, "resource": {"kind": "Bucket", "name": "b"}}
    assert errors_of(ingress({"path": "/", "pathType": "Prefix", "backend": both})) == [
        'spec.rules[0].http.paths[0].backend: Invalid value: "": cannot set both resource and service backends']
    assert errors_of(ingress({"path": "/", "pathType": "Prefix", "backend": {}})) == [
        'spec.rules[0].http.paths[0].backend: Invalid value: "": resource or service backend is required']
    no_port = {"service": {"name": "web"}}
    assert errors_of(ingress({"path": "/", "pathType": "Prefix", "backend": no_port})) == [
        "spec.rules[0].http.paths[0].backend: Required value: port name or number is required"]
    two = {"service": {"name": "web", "port": {"name": "http", "number": 80}}}
    assert errors_of(ingress({"path": "/", "pathType": "Prefix", "backend": two})) == [
        'spec.rules[0].http.paths[0].backend: Invalid value: "": cannot set both port name & port number']
    assert errors_of(ingress({"path": "/", "pathType": "Prefix", "backend": SVC}, host="10.0.0.1")) == [
        'spec.rules[0].host: Invalid value: "10.0.0.1": must be a DNS name, not an IP address']
    assert "a wildcard DNS-1123 subdomain must start with '*.'" in errors_of(
        ingress({"path": "/", "pathType": "Prefix", "backend": SVC}, host="a.*.com"))[0]
    assert errors_of({"metadata": {"name": "x"}, "spec": {}}) == [
        "spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"]


def test_class_annotation_must_match_the_class_name() -> None:
    obj = ingress({"path": "/", "pathType": "Prefix", "backend": SVC}, ingressClassName="nginx")
    obj["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "other"}
    assert errors_of(obj) == ['annotations.kubernetes.io/ingress.class: Invalid value: "other": must match '
                              '`ingressClassName` when both are specified']


def test_status_is_the_controllers() -> None:
    strategy = IngressStrategy()
    obj = ingress({"path": "/", "pathType": "Prefix", "backend": SVC})
    obj["status"] = {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}
    strategy.prepare_for_create(obj)
    assert obj["status"] == {"loadBalancer": {}}
    bad = {**obj, "status": {"loadBalancer": {"ingress": [{"ip": "nope"}, {"hostname": "1.2.3.4"}]}}}
    assert [e.field for e in strategy.validate(bad)] == ["status.loadBalancer.ingress[0].ip",
                                                         "status.loadBalancer.ingress[1].hostname"]


def test_ingress_class_rules() -> None:
    strategy = IngressClassStrategy()
    good = {"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx",
                                                    "parameters": {"kind": "Params", "name": "p"}}}
    strategy.prepare_for_create(good)
    assert good["spec"]["parameters"]["scope"] == "Cluster"
    assert strategy.validate(good) == []
    bad = {"metadata": {"name": "x"}, "spec": {"controller": "nginx"}}
    assert [e.full() for e in strategy.validate(bad)] == [
        'spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")']
    ns = {"metadata": {"name": "x"}, "spec": {"controller": "a.io/b",
                                             "parameters": {"kind": "P", "name": "p", "scope": "Namespace"}}}
    assert [e.full() for e in strategy.validate(ns)] == [
        "spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'"]
    changed = {"metadata": {"name": "nginx"}, "spec": {"controller": "example.com/other"}}
    assert [e.full() for e in strategy.validate_update(changed, good)] == [
        "spec.controller: Forbidden: may not change once set"]


def test_default_class_is_the_newest_marked_one() -> None:
    def cls(name: str, created: str, default: str | None) -> dict[str, Any]:
        annotations = {"ingressclass.kubernetes.io/is-default-class": default} if default else {}
        return {"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}}

    old, new = cls("old", "2024-01-01T00:00:00Z", "true"), cls("new", "2024-02-01T00:00:00Z", "true")
    assert default_class([old, new, cls("plain", "2024-03-01T00:00:00Z", None)])["metadata"]["name"] == "new"
    assert default_class([cls("x", "2024-01-01T00:00:00Z", "false")]) is None


def test_tables() -> None:
    now = datetime(2024, 1, 1, 0, 1, tzinfo=UTC)
    obj = ingress({"path": "/", "pathType": "Prefix", "backend": SVC}, tls=[{"secretName": "s"}])
    obj["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    obj["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.100"}]}}
    table = table_for("ingresses", [obj], now=now)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Class", "Hosts", "Address", "Ports", "Age"]
    assert table["rows"][0]["cells"] == ["x", "<none>", "a.example.com", "10.0.0.1,10.0...", "80, 443", "60s"]
    klass = {"metadata": {"name": "nginx", "creationTimestamp": "2024-01-01T00:00:00Z"},
             "spec": {"controller": "k8s.io/ingress-nginx",
                      "parameters": {"apiGroup": "k8s.example.com", "kind": "P", "name": "p"}}}
    table = table_for("ingressclasses", [klass], now=now)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Controller", "Parameters", "Age"]
    assert table["rows"][0]["cells"] == ["nginx", "k8s.io/ingress-nginx", "P.k8s.example.com/p", "60s"]


INGRESS_NGINX = user("system:ingress-nginx", "system:authenticated")


@pytest.mark.parametrize(("who", "verb", "resource", "group", "subresource", "name", "allowed"), [
    # ingress-nginx's ClusterRole: read what it renders, write only Ingress status, its Lease and events
    (INGRESS_NGINX, "list", "ingresses", "networking.k8s.io", "", "", True),
    (INGRESS_NGINX, "watch", "ingressclasses", "networking.k8s.io", "", "", True),
    (INGRESS_NGINX, "update", "ingresses", "networking.k8s.io", "status", "x", True),
    (INGRESS_NGINX, "list", "endpointslices", "discovery.k8s.io", "", "", True),
    (INGRESS_NGINX, "watch", "secrets", "", "", "", True),
    (INGRESS_NGINX, "create", "events", "", "", "", True),
    (INGRESS_NGINX, "update", "leases", "coordination.k8s.io", "", "ingress-nginx-leader", True),
    (INGRESS_NGINX, "update", "ingresses", "networking.k8s.io", "", "x", False),
    (INGRESS_NGINX, "update", "leases", "coordination.k8s.io", "", "kube-scheduler", False),
    (INGRESS_NGINX, "create", "services", "", "", "", False),
    (INGRESS_NGINX, "get", "secrets", "", "", "x", False),
    # any authenticated user gets nothing of it
    (user("someone", "system:authenticated"), "list", "ingresses", "networking.k8s.io", "", "", False),
])
def test_rbac(who: Any, verb: str, resource: str, group: str, subresource: str, name: str, allowed: bool) -> None:
    roles, bindings = bootstrap.policy_objects()
    authorizer = Authorizer([RBACAuthorizer(StaticRbac(roles, [], bindings, []))])
    attrs = res(who, verb, resource, "default", name, group=group, subresource=subresource)
    assert authorizer.authorize(attrs)[0] is allowed


def test_view_edit_admin_aggregate_ingresses() -> None:
    roles = bootstrap.cluster_roles()

    def grants(role: str, verb: str, resource: str) -> bool:
        return any("networking.k8s.io" in r.get("apiGroups", []) and resource in r.get("resources", [])
                   and verb in r["verbs"] for r in roles[role])

    assert grants("view", "list", "ingresses") and grants("view", "get", "ingresses/status")
    assert not grants("view", "create", "ingresses")
    for role in ("edit", "admin"):
        assert grants(role, "create", "ingresses") and grants(role, "delete", "ingresses")
    assert "ingress-nginx" in bootstrap.cluster_role_bindings()
