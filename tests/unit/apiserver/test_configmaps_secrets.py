"""ConfigMap and Secret strategies (apiserver/registry/configmap.py, secret.py) against upstream's
ValidateConfigMap/ValidateSecret messages; view/edit/node access to them (bootstrap roles and the Node
authorizer's pod -> secret/configmap edges, machinery/podutil.py)."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from apiserver import errors
from apiserver.auth import bootstrap
from apiserver.auth.authz import Attributes, Authorizer, NodeAuthorizer, RBACAuthorizer, StaticRbac
from apiserver.registry.configmap import ConfigMapStrategy, decode_base64
from apiserver.registry.secret import SecretStrategy
from apiserver.validation import FieldError
from machinery.authn.user import UserInfo
from machinery.podutil import pod_configmap_names, pod_secret_names
from machinery.types import Obj

KEY_ERR = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
           "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
MIB = 1024 * 1024


def b64(value: str | bytes) -> str:
    return base64.b64encode(value.encode() if isinstance(value, str) else value).decode()


def full(errs: list[FieldError]) -> list[str]:
    return [e.full() for e in errs]


def created(strategy: Any, obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    obj.setdefault("metadata", {"name": "x", "namespace": "default"})
    strategy.prepare_for_create(obj)
    return obj


def updated(strategy: Any, new: Obj, old: Obj) -> list[str]:
    new = copy.deepcopy(new)
    strategy.prepare_for_update(new, old)
    return full(strategy.validate_update(new, old) + strategy.validate(new))


class TestConfigMap:
    s = ConfigMapStrategy()

    def test_valid(self) -> None:
        cm = created(self.s, {"data": {"game.properties": "a=b", "UI_MODE": "dark", "-x_1": ""},
                              "binaryData": {"blob": b64(b"\x00\xff")}})
        assert self.s.validate(cm) == []

    def test_bad_keys(self) -> None:
        cm = created(self.s, {"data": {"a/b": "1", "..x": "2", ".": "3"}, "binaryData": {"sp ace": b64("x")}})
        assert full(self.s.validate(cm)) == [
            f'data[a/b]: Invalid value: "a/b": {KEY_ERR}',
            "data[..x]: Invalid value: \"..x\": must not start with '..'",
            "data[.]: Invalid value: \".\": must not be '.'",
            f'binaryData[sp ace]: Invalid value: "sp ace": {KEY_ERR}',
        ]

    def test_long_key(self) -> None:
        errs = full(self.s.validate(created(self.s, {"data": {"k" * 254: ""}})))
        assert errs == [f'data[{"k" * 254}]: Invalid value: "{"k" * 254}": must be no more than 253 characters']

    def test_key_in_data_and_binary_data(self) -> None:
        cm = created(self.s, {"data": {"k": "v"}, "binaryData": {"k": b64("v")}})
        assert full(self.s.validate(cm)) == ['data[k]: Invalid value: "k": duplicate of key present in binaryData']

    def test_size_counts_both_maps(self) -> None:
        at_limit = created(self.s, {"data": {"a": "x" * (MIB - 10)}, "binaryData": {"b": b64(b"y" * 10)}})
        assert self.s.validate(at_limit) == []
        over = created(self.s, {"data": {"a": "x" * (MIB - 10)}, "binaryData": {"b": b64(b"y" * 11)}})
        assert full(self.s.validate(over)) == [": Too long: must have at most 1048576 bytes"]

    def test_bad_base64_is_a_decoding_error(self) -> None:
        with pytest.raises(errors.ApiError) as e:
            created(self.s, {"binaryData": {"b": "not base64!"}})
        assert e.value.code == 400
        assert e.value.message == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                                   "illegal base64 data at input byte 3")

    def test_immutable(self) -> None:
        old = created(self.s, {"immutable": True, "data": {"a": "1"}, "binaryData": {"b": b64("2")}})
        assert updated(self.s, old, old) == []
        forbidden = "Forbidden: field is immutable when `immutable` is set"
        assert updated(self.s, {**old, "data": {"a": "2"}}, old) == [f"data: {forbidden}"]
        assert updated(self.s, {**old, "binaryData": {}}, old) == [f"binaryData: {forbidden}"]
        assert updated(self.s, {**old, "immutable": False}, old) == [f"immutable: {forbidden}"]
        # mutable until set; metadata may still change
        mutable = created(self.s, {"data": {"a": "1"}})
        assert updated(self.s, {**mutable, "data": {"a": "2"}, "immutable": True}, mutable) == []
        relabelled = {**old, "metadata": {**old["metadata"], "labels": {"x": "y"}}}
        assert updated(self.s, relabelled, old) == []


class TestSecret:
    s = SecretStrategy()

    def test_defaults_and_string_data(self) -> None:
        secret = created(self.s, {"data": {"a": b64("old"), "b": b64("keep")}, "stringData": {"a": "new", "c": "ü"}})
        assert secret["type"] == "Opaque"
        assert "stringData" not in secret
        assert secret["data"] == {"a": b64("new"), "b": b64("keep"), "c": b64("ü")}
        only_string = created(self.s, {"stringData": {"password": "s3cr3t"}})
        assert only_string["data"] == {"password": b64("s3cr3t")}
        assert self.s.validate(secret) == []

    def test_string_data_on_update(self) -> None:
        old = created(self.s, {"data": {"a": b64("1")}})
        new = {**old, "stringData": {"a": "2"}}
        self.s.prepare_for_update(new, old)
        assert new["data"] == {"a": b64("2")} and "stringData" not in new

    def test_bad_base64(self) -> None:
        with pytest.raises(errors.ApiError) as e:
            created(self.s, {"data": {"a": "YWJj=ZGVm"}})
        assert (e.value.code, e.value.reason) == (400, "BadRequest")
        assert "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data" in e.value.message

    def test_strict_base64(self) -> None:
        assert decode_base64("YWJj") == b"abc"
        assert decode_base64("YW\r\nJj") == b"abc"  # Go's decoder skips line breaks
        for bad in ("YWJ", "YW Jj", "YWJj!", "Y===", "-_-_"):
            with pytest.raises(ValueError, match="illegal base64 data at input byte"):
                decode_base64(bad)

    def test_keys_and_size(self) -> None:
        secret = created(self.s, {"stringData": {"a/b": "x"}})
        assert full(self.s.validate(secret)) == [f'data[a/b]: Invalid value: "a/b": {KEY_ERR}']
        big = created(self.s, {"data": {"a": b64(b"x" * MIB)}})
        assert self.s.validate(big) == []
        bigger = created(self.s, {"data": {"a": b64(b"x" * MIB), "b": b64(b"y")}})
        assert full(self.s.validate(bigger)) == ["data: Too long: must have at most 1048576 bytes"]

    @pytest.mark.parametrize(("secret_type", "data", "annotations", "expected"), [
        ("kubernetes.io/service-account-token", {}, {},
         ["metadata.annotations[kubernetes.io/service-account.name]: Required value"]),
        ("kubernetes.io/service-account-token", {}, {"kubernetes.io/service-account.name": "default"}, []),
        ("kubernetes.io/dockercfg", {}, {}, ["data[.dockercfg]: Required value"]),
        ("kubernetes.io/dockerconfigjson", {}, {}, ["data[.dockerconfigjson]: Required value"]),
        ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": '{"auths": {}}'}, {}, []),
        ("kubernetes.io/basic-auth", {}, {}, ["data[username]: Required value", "data[password]: Required value"]),
        ("kubernetes.io/basic-auth", {"password": ""}, {}, []),
        ("kubernetes.io/ssh-auth", {"ssh-privatekey": ""}, {}, ["data[ssh-privatekey]: Required value"]),
        ("kubernetes.io/ssh-auth", {"ssh-privatekey": "k"}, {}, []),
        ("kubernetes.io/tls", {"tls.crt": "c"}, {}, ["data[tls.key]: Required value"]),
        ("kubernetes.io/tls", {}, {}, ["data[tls.crt]: Required value", "data[tls.key]: Required value"]),
        ("kubernetes.io/tls", {"tls.crt": "c", "tls.key": "k"}, {}, []),
        ("bootstrap.kubernetes.io/token", {"token-id": "abcdef"}, {}, []),
        ("example.com/custom", {}, {}, []),
    ])
    def test_types(self, secret_type: str, data: dict[str, str], annotations: dict[str, str],
                   expected: list[str]) -> None:
        secret = created(self.s, {"metadata": {"name": "s", "namespace": "d", "annotations": annotations},
                                  "type": secret_type, "stringData": data})
        assert full(self.s.validate(secret)) == expected

    def test_docker_config_must_be_json(self) -> None:
        secret = created(self.s, {"type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "{"}})
        (err,) = self.s.validate(secret)
        assert err.field == "data[.dockerconfigjson]" and err.value == "<secret contents redacted>"
        secret = created(self.s, {"type": "kubernetes.io/dockercfg", "stringData": {".dockercfg": "[1]"}})
        assert full(self.s.validate(secret))[0].startswith('data[.dockercfg]: Invalid value: "<secret contents')

    def test_type_and_immutable_on_update(self) -> None:
        old = created(self.s, {"stringData": {"a": "1"}})
        assert updated(self.s, {**old, "type": "kubernetes.io/tls"}, old) == [
            'type: Invalid value: "kubernetes.io/tls": field is immutable',
            "data[tls.crt]: Required value", "data[tls.key]: Required value"]
        assert updated(self.s, {**old, "type": ""}, old) == []  # defaulted back to Opaque
        frozen = created(self.s, {"immutable": True, "stringData": {"a": "1"}})
        assert updated(self.s, {**frozen, "stringData": {"a": "2"}}, frozen) == [
            "data: Forbidden: field is immutable when `immutable` is set"]
        assert updated(self.s, {**frozen, "stringData": {"a": "1"}}, frozen) == []  # the same value: no change

    def test_field_selector_type(self) -> None:
        assert self.s.field_values({"metadata": {"name": "n"}, "type": "kubernetes.io/tls"})["type"] == \
            "kubernetes.io/tls"


# ---------------------------------------------------------------------------------------------
# Who may read them
# ---------------------------------------------------------------------------------------------

POD_ON_A: Obj = {"metadata": {"namespace": "default", "name": "web"}, "spec": {
    "nodeName": "node-a",
    "imagePullSecrets": [{"name": "regcred"}],
    "initContainers": [{"name": "init", "envFrom": [{"configMapRef": {"name": "init-env"}}]}],
    "containers": [{"name": "app",
                    "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                            {"name": "M", "valueFrom": {"configMapKeyRef": {"name": "mode", "key": "m"}}},
                            {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "envFrom": [{"secretRef": {"name": "app-env"}}]}],
    "volumes": [{"name": "v1", "secret": {"secretName": "certs"}},
                {"name": "v2", "configMap": {"name": "conf"}},
                {"name": "v3", "projected": {"sources": [{"secret": {"name": "proj-s"}},
                                                         {"configMap": {"name": "proj-c"}},
                                                         {"serviceAccountToken": {"path": "token"}}]}},
                {"name": "v4", "csi": {"driver": "x", "nodePublishSecretRef": {"name": "csi-s"}}},
                {"name": "v5", "emptyDir": {}}]}}


def test_pod_references() -> None:
    assert pod_secret_names(POD_ON_A) == {"regcred", "db", "app-env", "certs", "proj-s", "csi-s"}
    assert pod_configmap_names(POD_ON_A) == {"init-env", "mode", "conf", "proj-c"}
    assert pod_secret_names({"spec": {}}) == set() and pod_configmap_names({}) == set()


def _authorizer() -> Authorizer:
    roles, bindings = bootstrap.policy_objects()
    pods = [POD_ON_A, {"metadata": {"namespace": "default", "name": "other"},
                       "spec": {"nodeName": "node-b", "volumes": [{"name": "s", "secret": {"secretName": "b-only"}}]}}]

    def refers(node: str, resource: str, namespace: str, name: str) -> bool:
        visit = pod_secret_names if resource == "secrets" else pod_configmap_names
        return any(p["spec"]["nodeName"] == node and p["metadata"]["namespace"] == namespace and name in visit(p)
                   for p in pods)

    return Authorizer([NodeAuthorizer(lambda ns, n: None, refers), RBACAuthorizer(StaticRbac(roles, [], bindings, []))])


def _ask(user: UserInfo, verb: str, resource: str, name: str = "", namespace: str = "default",
         field_selector: str = "") -> bool:
    return _authorizer().authorize(Attributes(user, verb, True, "", "", "v1", resource, "", namespace, name,
                                              field_selector))[0]


NODE_A = UserInfo("system:node:node-a", ("system:nodes", "system:authenticated"))


@pytest.mark.parametrize(("verb", "resource", "name", "namespace", "selector", "allowed"), [
    ("get", "secrets", "db", "default", "", True),
    ("get", "secrets", "regcred", "default", "", True),
    ("get", "configmaps", "proj-c", "default", "", True),
    ("list", "secrets", "", "default", "metadata.name=certs", True),
    ("watch", "configmaps", "", "default", "metadata.name=conf", True),
    ("get", "secrets", "b-only", "default", "", False),  # used only by a pod on node-b
    ("get", "secrets", "db", "other", "", False),  # same name, another namespace
    ("get", "secrets", "conf", "default", "", False),  # a ConfigMap's name is not a Secret's
    ("list", "secrets", "", "default", "", False),
    ("list", "secrets", "", "default", "metadata.name=db,type=Opaque", False),
    ("update", "secrets", "db", "default", "", False),
    ("delete", "configmaps", "conf", "default", "", False),
])
def test_node_authorizer_graph(verb: str, resource: str, name: str, namespace: str, selector: str,
                               allowed: bool) -> None:
    assert _ask(NODE_A, verb, resource, name, namespace, selector) is allowed


def test_node_authorizer_reason() -> None:
    allowed, reason = _authorizer().authorize(Attributes(NODE_A, "get", True, "", "", "v1", "secrets", "",
                                                         "default", "b-only"))
    assert not allowed and "no relationship found between node 'node-a' and this object" in reason


def test_view_reads_configmaps_not_secrets_edit_both() -> None:
    roles = {r["metadata"]["name"]: r for r in bootstrap.policy_objects()[0]}

    def can(role: str, verb: str, resource: str) -> bool:
        return any(verb in rule.get("verbs", []) and "" in rule.get("apiGroups", [])
                   and resource in rule.get("resources", []) for rule in roles[role]["rules"])

    assert can("view", "get", "configmaps") and can("view", "watch", "configmaps")
    assert not can("view", "get", "secrets") and not can("view", "list", "secrets")
    for role in ("edit", "admin"):
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
            assert can(role, verb, "secrets") and can(role, verb, "configmaps"), (role, verb)


def test_openapi_from_the_models() -> None:
    """kubectl's validating verbs read these: []byte maps are `format: byte` strings, as upstream's."""
    from apiserver.openapi import openapi_v2_json, openapi_v3_group

    group = openapi_v3_group("api/v1")
    assert group is not None
    schemas = group["components"]["schemas"]
    secret = schemas["io.k8s.api.core.v1.Secret"]
    assert secret["properties"]["data"]["additionalProperties"] == {"format": "byte", "type": "string"}
    assert set(secret["properties"]) >= {"data", "stringData", "type", "immutable", "metadata"}
    assert secret["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Secret", "version": "v1"}]
    assert "/api/v1/namespaces/{namespace}/configmaps/{name}" in group["paths"]
    v2 = openapi_v2_json()["definitions"]["io.k8s.api.core.v1.ConfigMap"]["properties"]
    assert v2["binaryData"]["additionalProperties"]["format"] == "byte" and v2["data"]["type"] == "object"
