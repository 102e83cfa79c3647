"""The apiserver's side of the pod's own volumes (issue 12): the ServiceAccount admission plugin's kube-api-access
volume (apiserver/admission/serviceaccount.py), projected/downwardAPI/subPathExpr validation and defaults
(apiserver/registry/pod.py), the Node authorizer's serviceaccounts/token edge and NodeRestriction's TokenRequest
check, and the root-ca-cert-publisher's RBAC role. No processes."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from apiserver import errors
from apiserver.admission.noderestriction import admit_token_request
from apiserver.admission.serviceaccount import (
    DEFAULT_API_TOKEN_MOUNT_PATH,
    admit_pod,
    mount_service_account_token,
    token_volume_source,
)
from apiserver.auth import bootstrap
from apiserver.auth.authz import Attributes, Authorizer, NodeAuthorizer, RBACAuthorizer, StaticRbac
from apiserver.registry.generic import WriteOptions
from apiserver.registry.pod import default_pod_spec, validate_pod_spec
from apiserver.registry.token import TokenIssuer, create_token
from machinery.api.resources import resource_for
from machinery.authn.user import UserInfo


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "prod"},
            "spec": {"containers": [{"name": "app", "image": "img"}],
                     "initContainers": [{"name": "init", "image": "img"}], **spec}}


# -- admission --------------------------------------------------------------------------------------------


def test_kube_api_access_volume_is_mounted_everywhere() -> None:
    p = pod()
    admit_pod(p, {"metadata": {"name": "default"}})
    volumes = p["spec"]["volumes"]
    assert len(volumes) == 1 and re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", volumes[0]["name"])
    assert volumes[0]["projected"] == token_volume_source()
    sources = volumes[0]["projected"]["sources"]
    assert sources[0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}
    assert sources[1] == {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    assert sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"] == "metadata.namespace"
    for key in ("containers", "initContainers"):
        assert p["spec"][key][0]["volumeMounts"] == [{"name": volumes[0]["name"], "readOnly": True,
                                                      "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]


@pytest.mark.parametrize(("pod_pref", "account_pref", "mounted"), [
    (None, None, True), (None, False, False), (True, False, True), (False, True, False), (False, None, False)])
def test_automount_preferences(pod_pref: bool | None, account_pref: bool | None, mounted: bool) -> None:
    p = pod() if pod_pref is None else pod(automountServiceAccountToken=pod_pref)
    account: dict[str, Any] = {"metadata": {"name": "default"}}
    if account_pref is not None:
        account["automountServiceAccountToken"] = account_pref
    admit_pod(p, account)
    assert bool(p["spec"].get("volumes")) is mounted


def test_existing_mount_and_volume_are_kept() -> None:
    p = pod(volumes=[{"name": "kube-api-access-mine", "projected": {"sources": []}}])
    p["spec"]["containers"][0]["volumeMounts"] = [{"name": "x", "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]
    mount_service_account_token(p)
    assert [v["name"] for v in p["spec"]["volumes"]] == ["kube-api-access-mine"]  # not a second one
    assert p["spec"]["containers"][0]["volumeMounts"] == [{"name": "x", "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]
    assert p["spec"]["initContainers"][0]["volumeMounts"][0]["name"] == "kube-api-access-mine"


def test_image_pull_secrets_from_the_account() -> None:
    p = pod()
    admit_pod(p, {"automountServiceAccountToken": False, "imagePullSecrets": [{"name": "regcred"}]})
    assert p["spec"]["imagePullSecrets"] == [{"name": "regcred"}] and "volumes" not in p["spec"]


# -- validation and defaults -------------------------------------------------------------------------------


def errors_of(volumes: list[dict[str, Any]], mounts: list[dict[str, Any]] | None = None) -> list[str]:
    spec = {"containers": [{"name": "app", "image": "img", "volumeMounts": mounts or []}], "volumes": volumes}
    default_pod_spec(spec)
    return [e.full() for e in validate_pod_spec(spec, "spec")]


def test_admitted_volume_is_valid_and_defaulted() -> None:
    spec = copy.deepcopy(pod())
    admit_pod(spec, {})
    assert errors_of(spec["spec"]["volumes"]) == []
    volume = {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}},
                                                     {"downwardAPI": {"items": [{"path": "n", "fieldRef": {
                                                         "fieldPath": "metadata.name"}}]}}]}}
    spec2 = {"containers": [{"name": "app", "image": "img"}], "volumes": [volume]}
    default_pod_spec(spec2)
    sources = spec2["volumes"][0]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["expirationSeconds"] == 3600
    assert sources[1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    assert spec2["volumes"][0]["projected"]["defaultMode"] == 0o644


@pytest.mark.parametrize(("volume", "message"), [
    ({"projected": {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 599}}]}},
     "spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 599: may not specify "
     "a duration less than 10 minutes"),
    ({"projected": {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": (1 << 32) + 1}}]}},
     "spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 4294967297: may not "
     "specify a duration larger than 2^32 seconds"),
    ({"projected": {"sources": [{"serviceAccountToken": {"path": "../t"}}]}},
     "spec.volumes[0].projected.path: Invalid value: \"../t\": must not contain '..'"),
    ({"projected": {"sources": [{"configMap": {"name": "a", "items": [{"key": "k", "path": "x"}]}},
                                {"secret": {"name": "b", "items": [{"key": "k", "path": "x"}]}}]}},
     'spec.volumes[0].projected: Invalid value: "b": conflicting duplicate paths'),
    ({"projected": {"sources": [{"configMap": {"name": "a"}, "secret": {"name": "b"}}]}},
     "spec.volumes[0].projected.sources[0]: Forbidden: may not specify more than 1 volume type per source"),
    ({"projected": {"sources": [{"configMap": {}}]}},
     "spec.volumes[0].projected.sources[0].configMap.name: Required value"),
    ({"downwardAPI": {"items": [{"path": "x", "fieldRef": {"fieldPath": "spec.nodeName"}}]}},
     'spec.volumes[0].downwardAPI.fieldRef.fieldPath: Unsupported value: "spec.nodeName": supported values: '
     '"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"'),
    ({"downwardAPI": {"items": [{"path": "x", "resourceFieldRef": {"resource": "limits.cpu"}}]}},
     "spec.volumes[0].downwardAPI.resourceFieldRef.containerName: Required value"),
    ({"downwardAPI": {"items": [{"path": "x"}]}},
     "spec.volumes[0].downwardAPI: Required value: one of fieldRef and resourceFieldRef is required"),
    ({"downwardAPI": {"items": [{"path": "x", "mode": 0o1000, "fieldRef": {"fieldPath": "metadata.name"}}]}},
     "spec.volumes[0].downwardAPI.mode: Invalid value: 512: must be a number between 0 and 0777 (octal), both "
     "inclusive"),
    ({"downwardAPI": {"items": [{"path": "x", "fieldRef": {"fieldPath": "metadata.name"},
                                 "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu"}}]}},
     'spec.volumes[0].downwardAPI: Invalid value: "resource": fieldRef and resourceFieldRef can not be specified '
     "simultaneously"),
])
def test_bad_projections(volume: dict[str, Any], message: str) -> None:
    assert message in errors_of([{"name": "v", **volume}])


def test_remembered_valid_sources() -> None:
    """A valid volume source is remembered (every pod carries the same kube-api-access volume), whatever its name and
    place; a name or a source that is wrong is still found each time, at its own path."""
    source = token_volume_source()
    assert errors_of([{"name": "kube-api-access-aaaaa", "projected": source}]) == []
    # the same source again: the volume's own name is still checked, and where it stands
    assert errors_of([{"name": "ok", "projected": {"sources": []}},
                      {"name": "Bad_Name", "projected": copy.deepcopy(source)}]) == [
        'spec.volumes[1].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
        "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
    bad = copy.deepcopy(source)
    bad["sources"][0]["serviceAccountToken"]["expirationSeconds"] = 60
    for _ in range(2):  # an invalid source is not remembered
        found = errors_of([{"name": "a", "projected": source}, {"name": "b", "projected": bad}])
        assert [e.split(":")[0] for e in found] == ["spec.volumes[1].projected.sources[0].serviceAccountToken"
                                                    ".expirationSeconds"]
    # no JSON for a 70-bit integer: validated as it is, and refused as upstream refuses it
    huge = {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 1 << 70}}]}
    assert any("may not specify a duration larger than 2^32 seconds" in e
               for e in errors_of([{"name": "v", "projected": huge}]))


@pytest.mark.parametrize(("path", "reasons"), [
    ("token", []),
    ("a..b/c..", []),  # ".." inside a name is no parent step
    ("/abs", ["must be a relative path"]),
    ("a/../b", ["must not contain '..'"]),
    ("a\\..\\b", ["must not contain '..'"]),
    ("..data", ["must not start with '..'"]),
    ("/../x", ["must be a relative path", "must not contain '..'"]),
])
def test_projected_paths(path: str, reasons: list[str]) -> None:
    """Each local path of a projection (a token's, an item's, a downward API file's) as upstream's
    validateLocalNonReservedPath: relative, no parent step, not a reserved `..name`."""
    sources = [{"serviceAccountToken": {"path": path, "expirationSeconds": 3600}},
               {"configMap": {"name": "c", "items": [{"key": "k", "path": path + "-i"}]}},
               {"downwardAPI": {"items": [{"path": path + "-d",
                                           "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['app']"}}]}}]
    found = errors_of([{"name": "v", "projected": {"sources": sources}}])
    for reason in reasons:  # one error per source
        assert [f for f in found if f.endswith(reason)] == [f for f in found if reason in f] and \
            sum(reason in f for f in found) == 3, found
    assert len(found) == 3 * len(reasons), found
    if reasons:
        assert found[0].startswith("spec.volumes[0].projected.path: Invalid value: ")


def test_downward_api_subscripts() -> None:
    def files(field_path: str) -> list[str]:
        item = {"path": "x", "fieldRef": {"apiVersion": "v1", "fieldPath": field_path}}
        return errors_of([{"name": "v", "downwardAPI": {"items": [item]}}])

    assert files("metadata.labels['app']") == []
    assert files("metadata.annotations['Example.com/Key']") == []
    assert files("metadata.name['x']") == ['spec.volumes[0].downwardAPI.fieldRef: Invalid value: "metadata.name": '
                                          "does not support subscript"]
    assert files("metadata.labels['bad key']")


def test_sub_path_expr_validation() -> None:
    volumes = [{"name": "v", "emptyDir": {}}]
    assert errors_of(volumes, [{"name": "v", "mountPath": "/m", "subPathExpr": "$(POD)"}]) == []
    assert errors_of(volumes, [{"name": "v", "mountPath": "/m", "subPath": "a", "subPathExpr": "b"}]) == [
        'spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "b": subPathExpr and subPath are mutually '
        "exclusive"]
    assert errors_of(volumes, [{"name": "v", "mountPath": "/m", "subPathExpr": "/abs"}]) == [
        'spec.containers[0].volumeMounts.subPathExpr: Invalid value: "/abs": must be a relative path']


# -- the Node authorizer and NodeRestriction ------------------------------------------------------------------


NODE_A = UserInfo("system:node:node-a", ("system:nodes", "system:authenticated"))
PODS = [{"metadata": {"namespace": "prod", "name": "web", "uid": "u-web"},
         "spec": {"nodeName": "node-a", "serviceAccountName": "builder"}},
        {"metadata": {"namespace": "prod", "name": "db", "uid": "u-db"},
         "spec": {"nodeName": "node-b", "serviceAccountName": "dba"}}]


def _authorize(verb: str, sub: str, name: str, namespace: str = "prod") -> tuple[bool, str]:
    roles, bindings = bootstrap.policy_objects()

    def refers(node: str, resource: str, ns: str, n: str) -> bool:
        assert resource == "serviceaccounts"
        return any(p["spec"]["nodeName"] == node and p["metadata"]["namespace"] == ns
                   and p["spec"]["serviceAccountName"] == n for p in PODS)

    authorizer = Authorizer([NodeAuthorizer(lambda ns, n: None, refers),
                             RBACAuthorizer(StaticRbac(roles, [], bindings, []))])
    return authorizer.authorize(Attributes(NODE_A, verb, True, "", "", "v1", "serviceaccounts", sub, namespace, name))


def test_node_authorizer_tokens() -> None:
    assert _authorize("create", "token", "builder")[0] is True
    assert _authorize("create", "token", "dba")[0] is False  # runs only on node-b
    assert _authorize("create", "token", "builder", "other")[0] is False
    assert _authorize("get", "", "builder")[0] is False
    assert "can only create tokens for individual service accounts" in _authorize("get", "", "builder")[1]


def test_node_restriction_token_requests() -> None:
    info = resource_for("", "serviceaccounts")
    assert info is not None

    async def get_pod(name: str) -> dict[str, Any]:
        for p in PODS:
            if p["metadata"]["name"] == name:
                return p
        raise errors.not_found(resource_for("", "pods"), name)  # type: ignore[arg-type]

    def refused(spec: dict[str, Any]) -> str:
        with pytest.raises(errors.ApiError) as e:
            asyncio.run(admit_token_request(info, "builder", {"spec": spec}, get_pod, "node-a"))
        return f"{e.value.code} {e.value.message}"

    def ref(name: str, uid: str = "") -> dict[str, Any]:
        return {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}}

    asyncio.run(admit_token_request(info, "builder", {"spec": ref("web", "u-web")}, get_pod, "node-a"))
    prefix = '403 serviceaccounts "builder" is forbidden: '
    assert refused({}) == prefix + "node requested token not bound to a pod"
    assert refused({"boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": "s"}}) == \
        prefix + "node requested token not bound to a pod"
    assert refused(ref("web")) == prefix + "node requested token with a pod binding without a uid"
    assert refused(ref("web", "u-old")) == prefix + ("the UID in the bound object reference (u-old) does not match "
                                                     "the UID in record. The object might have been deleted and then "
                                                     "recreated")
    assert refused(ref("db", "u-db")) == prefix + "node requested token bound to a pod scheduled on a different node"
    assert refused(ref("gone", "u")) == '404 pods "gone" not found'


def test_root_ca_cert_publisher_role() -> None:
    roles, bindings = bootstrap.policy_objects()
    role = next(r for r in roles if r["metadata"]["name"] == "system:controller:root-ca-cert-publisher")
    assert {"verbs": ["create", "update"], "apiGroups": [""], "resources": ["configmaps"]} in role["rules"]
    binding = next(b for b in bindings if b["metadata"]["name"] == "system:controller:root-ca-cert-publisher")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "root-ca-cert-publisher",
                                    "namespace": "kube-system"}]


# -- the kube-api-access token's extension ---------------------------------------------------------------------


class _Store:
    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.cacher = type("Cacher", (), {"rv": 10**9})()

    async def get(self, namespace: str | None, name: str) -> dict[str, Any]:
        return self.objects[name]


def _token(spec: dict[str, Any], extend: bool = True) -> dict[str, Any]:
    issuer = TokenIssuer(ec.generate_private_key(ec.SECP256R1()), "https://kubernetes.default.svc",
                         ("https://kubernetes.default.svc",), extend_expiration=extend)
    accounts = _Store({"default": {"metadata": {"name": "default", "uid": "sa-uid", "resourceVersion": "1"}}})
    pods = _Store({"web": {"metadata": {"name": "web", "uid": "u-web", "resourceVersion": "2"},
                           "spec": {"serviceAccountName": "default"}}})
    answer = asyncio.run(create_token(accounts, pods, issuer, "prod", "default",  # type: ignore[arg-type]
                                      {"spec": spec}, WriteOptions()))
    token = answer["status"]["token"].split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    return {"claims": claims, "answer": answer}


BOUND = {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u-web"}}


def test_pod_bound_3607_second_tokens_are_extended() -> None:
    got = _token({"expirationSeconds": 3607, **BOUND})
    claims = got["claims"]
    assert claims["exp"] - claims["iat"] == 365 * 24 * 3600
    assert claims["kubernetes.io"]["warnafter"] == claims["iat"] + 3607
    assert claims["kubernetes.io"]["pod"] == {"name": "web", "uid": "u-web"}
    assert got["answer"]["spec"]["expirationSeconds"] == 3607  # what the kubelet refreshes by
    for spec, extend in (({"expirationSeconds": 3607, **BOUND}, False),  # --service-account-extend-token-expiration
                         ({"expirationSeconds": 3607}, True),  # not bound to a pod
                         ({"expirationSeconds": 3600, **BOUND}, True),  # not the kube-api-access volume's 3607
                         ({"expirationSeconds": 3607, "audiences": ["vault"], **BOUND}, True)):  # another audience
        claims = _token(spec, extend)["claims"]
        assert claims["exp"] - claims["iat"] == spec["expirationSeconds"], spec
        assert "warnafter" not in claims["kubernetes.io"], spec
