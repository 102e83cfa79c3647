"""Bad input gets a Status naming the problem, and writes nothing to etcd."""

from __future__ import annotations

import httpx
import pytest

from tests.cluster import Etcd
from tests.conftest import etcd_keys
from tests.manifests import deployment, pod


def _status(r: httpx.Response, code: int, reason: str) -> dict:
    assert r.status_code == code, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == code and body["reason"] == reason and body["message"]
    return body


def _invalid_deployment(change: str) -> dict:
    d = deployment("bad")
    if change == "negative-replicas":
        d["spec"]["replicas"] = -1
    elif change == "selector-mismatch":
        d["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    elif change == "bad-name":
        d["metadata"]["name"] = "Bad_Name"
    elif change == "no-image":
        del d["spec"]["template"]["spec"]["containers"][0]["image"]
    elif change == "string-replicas":
        d["spec"]["replicas"] = "3"
    elif change == "bad-label":
        d["metadata"]["labels"] = {"app": "x" * 64}
    elif change == "path-traversal":
        d["metadata"]["name"] = "../../nodes/x"
    return d


@pytest.mark.parametrize(("change", "field"), [
    ("negative-replicas", "spec.replicas"),
    ("selector-mismatch", "spec.template.metadata.labels"),
    ("bad-name", "metadata.name"),
    ("no-image", "spec.template.spec.containers[0].image"),
    ("string-replicas", "spec.replicas"),
    ("bad-label", "metadata.labels"),
    ("path-traversal", "metadata.name"),
])
def test_invalid_deployment_is_422_naming_the_field(api: httpx.Client, namespace: str, etcd: Etcd,
                                                    change: str, field: str) -> None:
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=_invalid_deployment(change))
    body = _status(r, 422, "Invalid")
    assert any(c["field"] == field for c in body["details"]["causes"]), body
    assert body["message"].startswith('Deployment.apps "')
    assert etcd_keys(etcd, f"/registry/deployments/{namespace}/") == {}


def test_negative_replicas_message_is_upstreams(api: httpx.Client, namespace: str) -> None:
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=_invalid_deployment("negative-replicas"))
    assert _status(r, 422, "Invalid")["message"] == (
        'Deployment.apps "bad" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0')


def test_selector_is_immutable(api: httpx.Client, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    created = api.post(base, json=deployment("immutable")).json()
    created["spec"]["selector"] = {"matchLabels": {"app": "immutable", "extra": "x"}}
    created["spec"]["template"]["metadata"]["labels"]["extra"] = "x"
    body = _status(api.put(f"{base}/immutable", json=created), 422, "Invalid")
    assert "field is immutable" in body["message"]


@pytest.mark.parametrize(("content", "content_type"), [
    (b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ', "application/json"),
    (b"apiVersion: v1\nkind: Pod\nmetadata: [name: x", "application/yaml"),
    (b"[1, 2, 3]", "application/json"),
    (b"", "application/json"),
])
def test_malformed_bodies_are_400(api: httpx.Client, namespace: str, etcd: Etcd, content: bytes,
                                  content_type: str) -> None:
    r = api.post(f"/api/v1/namespaces/{namespace}/pods", content=content, headers={"content-type": content_type})
    _status(r, 400, "BadRequest")
    assert etcd_keys(etcd, f"/registry/pods/{namespace}/") == {}


def test_unknown_content_type_is_415(api: httpx.Client, namespace: str) -> None:
    r = api.post(f"/api/v1/namespaces/{namespace}/pods", content=b"x", headers={"content-type": "text/csv"})
    _status(r, 415, "UnsupportedMediaType")


def test_yaml_body_is_accepted(api: httpx.Client, namespace: str) -> None:
    body = (b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: from-yaml\n"
            b"spec:\n  containers:\n  - name: c\n    image: x:1\n")
    r = api.post(f"/api/v1/namespaces/{namespace}/pods", content=body, headers={"content-type": "application/yaml"})
    assert r.status_code == 201, r.text


def test_mismatched_kind_and_api_version_are_400(api: httpx.Client, namespace: str, etcd: Etcd) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    wrong_version = deployment("v")
    wrong_version["apiVersion"] = "apps/v2"
    assert "apps/v2" in _status(api.post(base, json=wrong_version), 400, "BadRequest")["message"]
    wrong_kind = deployment("k")
    wrong_kind["kind"] = "ReplicaSet"
    _status(api.post(base, json=wrong_kind), 400, "BadRequest")
    assert etcd_keys(etcd, f"/registry/deployments/{namespace}/") == {}


def test_namespace_mismatch_is_400(api: httpx.Client, namespace: str) -> None:
    r = api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod("x", namespace="elsewhere"))
    assert "namespace" in _status(r, 400, "BadRequest")["message"]


def test_missing_namespace_is_404(api: httpx.Client) -> None:
    r = api.post("/api/v1/namespaces/does-not-exist/pods", json=pod("x"))
    assert _status(r, 404, "NotFound")["message"] == 'namespaces "does-not-exist" not found'


def test_body_over_3_mib_is_413(api: httpx.Client, namespace: str, etcd: Etcd) -> None:
    big = pod("big")
    big["metadata"]["annotations"] = {"blob": "x" * (3 * 1024 * 1024 + 10)}
    _status(api.post(f"/api/v1/namespaces/{namespace}/pods", json=big), 413, "RequestEntityTooLarge")
    assert etcd_keys(etcd, f"/registry/pods/{namespace}/") == {}


def test_unknown_fields_per_field_validation(api: httpx.Client, namespace: str, etcd: Etcd) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    d = deployment("fv")
    d["spec"]["replicaz"] = 3
    body = _status(api.post(base, params={"fieldValidation": "Strict"}, json=d), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "spec.replicaz"
    assert etcd_keys(etcd, f"/registry/deployments/{namespace}/") == {}
    r = api.post(base, params={"fieldValidation": "Warn"}, json=d)
    assert r.status_code == 201 and 'unknown field \\"spec.replicaz\\"' in r.headers["warning"]
    assert "replicaz" not in r.json()["spec"]
    d["metadata"]["name"] = "fv2"
    r = api.post(base, params={"fieldValidation": "Ignore"}, json=d)
    assert r.status_code == 201 and "warning" not in r.headers


def test_duplicate_fields_per_field_validation(api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    dup = (b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dup","name":"dup"},'
           b'"spec":{"containers":[{"name":"c","image":"x:1"}]}}')
    body = _status(api.post(base, params={"fieldValidation": "Strict"}, content=dup,
                            headers={"content-type": "application/json"}), 422, "Invalid")
    assert 'duplicate field "metadata.name"' in body["message"]
    r = api.post(base, params={"fieldValidation": "Warn"}, content=dup, headers={"content-type": "application/json"})
    assert r.status_code == 201 and "duplicate field" in r.headers["warning"]


def test_bad_query_parameters(api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    _status(api.get(base, params={"limit": "abc"}), 400, "BadRequest")
    _status(api.post(base, params={"fieldValidation": "Loud"}, json=pod("q")), 400, "BadRequest")
    _status(api.get(base, params={"watch": "true", "resourceVersion": "x"}), 400, "BadRequest")


def test_unknown_paths_and_methods(api: httpx.Client) -> None:
    _status(api.get("/api/v1/widgets"), 404, "NotFound")
    _status(api.get("/apis/apps/v9"), 404, "NotFound")
    _status(api.put("/api/v1/namespaces/default/pods"), 405, "MethodNotAllowed")


def test_bad_patches(api: httpx.Client, namespace: str, etcd: Etcd) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    before = api.post(base, json=deployment("bp")).json()
    _status(api.patch(f"{base}/bp", content=b"{not json", headers={"content-type": "application/merge-patch+json"}),
            400, "BadRequest")
    _status(api.patch(f"{base}/bp", content=b'[{"op":"replace","path":"/spec/nope/x","value":1}]',
                      headers={"content-type": "application/json-patch+json"}), 422, "Invalid")
    _status(api.patch(f"{base}/bp", content=b'{"spec":{"replicas":-5}}',
                      headers={"content-type": "application/merge-patch+json"}), 422, "Invalid")
    _status(api.patch(f"{base}/bp", content=b"{}", headers={"content-type": "application/xml"}),
            415, "UnsupportedMediaType")
    _status(api.patch(f"{base}/missing", content=b'{"spec":{"replicas":1}}',
                      headers={"content-type": "application/merge-patch+json"}), 404, "NotFound")
    after = api.get(f"{base}/bp").json()
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_status_body_is_upstreams_raw_text(api: httpx.Client, namespace: str) -> None:
    """Some clients compare the raw body: fields in upstream's order (kind, apiVersion, metadata, status,
    message, reason, details, code), compact, ending in the newline Go's json.Encoder writes. The expected
    texts are upstream's own (the CHANGELOG-1.11 example of `kubectl get pods abc`, and an AlreadyExists)."""
    r = api.get(f"/api/v1/namespaces/{namespace}/pods/abc")
    assert r.text == ('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                      '"message":"pods \\"abc\\" not found","reason":"NotFound",'
                      '"details":{"name":"abc","kind":"pods"},"code":404}\n')
    assert api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=deployment("dup")).status_code == 201
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=deployment("dup"))
    assert r.text == ('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                      '"message":"deployments.apps \\"dup\\" already exists","reason":"AlreadyExists",'
                      '"details":{"name":"dup","group":"apps","kind":"deployments"},"code":409}\n')
    # a path that names nothing: upstream's empty details
    r = api.get("/api/v1/nosuchthing")
    assert r.text == ('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                      '"message":"the server could not find the requested resource","reason":"NotFound",'
                      '"details":{},"code":404}\n')
