"""`kubectl auth whoami` (authentication.k8s.io SelfSubjectReview) against a real apiserver with its gate on:
the caller's user info as the request was authenticated — a client certificate's CN and O, a service-account
token's name, uid, groups and extra, an impersonated user instead of the impersonator — with kubectl 1.27
(which asks v1beta1) and 1.33 (v1, as protobuf); and the review over plain HTTP in each served version."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from machinery.kubeconfig import write_kubeconfig
from tests.auth_cluster import SecureApiServer, SecureKubectl, wait_until_allowed
from tests.cluster import Etcd
from tests.kubectl import Kubectl, find_kubectl

RBAC = "/apis/rbac.authorization.k8s.io/v1"
VERSIONS = pytest.mark.parametrize("version", ["1.27", "1.33"])


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd).start()
    yield server
    server.stop()


def binary_or_skip(version: str) -> Path:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed")
    return binary


def whoami(k: Kubectl, *args: str) -> dict[str, object]:
    r = k.run(*args, "auth", "whoami", "-o", "json", "-v=6").ok()
    return json.loads(r.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", ["v1", "v1beta1", "v1alpha1"])
def test_review_in_each_version(secure: SecureApiServer, version: str) -> None:
    secure.issue(f"whoami-{version}", "alice", ["team-a", "team-b"])
    with secure.client(f"whoami-{version}") as alice:
        r = alice.post(f"/apis/authentication.k8s.io/{version}/selfsubjectreviews",
                       json={"apiVersion": f"authentication.k8s.io/{version}", "kind": "SelfSubjectReview"})
        assert r.status_code == 201, r.text
        review = r.json()
        assert review["apiVersion"] == f"authentication.k8s.io/{version}" and review["kind"] == "SelfSubjectReview"
        assert review["status"] == {"userInfo": {"username": "alice",
                                                 "groups": ["team-a", "team-b", "system:authenticated"]}}
        assert review["metadata"]["creationTimestamp"]
        # alice may only create one (system:basic-user)
        assert alice.get(f"/apis/authentication.k8s.io/{version}/selfsubjectreviews").status_code == 403
    with secure.client("admin") as admin:
        # nothing is stored: the resource is create-only
        assert admin.get(f"/apis/authentication.k8s.io/{version}/selfsubjectreviews").status_code == 405
        group = admin.get("/apis/authentication.k8s.io").json()
        assert group["preferredVersion"]["version"] == "v1"
        resources = admin.get(f"/apis/authentication.k8s.io/{version}").json()["resources"]
        assert {"name": "selfsubjectreviews", "singularName": "selfsubjectreview", "namespaced": False,
                "kind": "SelfSubjectReview", "verbs": ["create"]} in resources


def test_a_body_of_another_kind_is_refused(secure: SecureApiServer) -> None:
    with secure.client("admin") as admin:
        r = admin.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                       json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview", "spec": {}})
        assert r.status_code == 422, r.text
        assert r.json()["reason"] == "Invalid" and "spec" in r.json()["message"]


@pytest.mark.kubectl
@VERSIONS
def test_kubectl_whoami_with_a_client_certificate(secure: SecureApiServer, version: str, tmp_path: Path) -> None:
    k = SecureKubectl(binary_or_skip(version), version, secure, "admin", tmp_path)
    r = k.run("auth", "whoami", "-v=6").ok()
    # 1.27 asks authentication.k8s.io/v1beta1 (SelfSubjectReview was beta then), 1.28+ v1
    wanted = "v1beta1" if version == "1.27" else "v1"
    assert re.search(rf'/apis/authentication\.k8s\.io/{wanted}/selfsubjectreviews"? (status=")?201', r.stderr), r.stderr
    lines = [line.split() for line in r.stdout.strip().splitlines()]
    assert lines[0] == ["ATTRIBUTE", "VALUE"]
    assert lines[1] == ["Username", "kubernetes-admin"]
    assert lines[2] == ["Groups", "[system:masters", "system:authenticated]"]
    review = whoami(k)
    assert review["apiVersion"] == f"authentication.k8s.io/{wanted}"
    assert review["status"] == {"userInfo": {"username": "kubernetes-admin",
                                             "groups": ["system:masters", "system:authenticated"]}}


@pytest.mark.kubectl
@VERSIONS
def test_kubectl_whoami_with_a_service_account_token(secure: SecureApiServer, version: str, tmp_path: Path) -> None:
    name = f"robot-{uuid.uuid4().hex[:6]}"
    account = secure.ensure_service_account(name, "default")
    token = secure.request_token(name, "default")
    k = Kubectl(binary_or_skip(version), version, secure.secure_url, tmp_path)
    write_kubeconfig(k.kubeconfig, secure.secure_url, name, ca_file=secure.pki.ca_cert, token=token, embed=True)
    info = whoami(k)["status"]["userInfo"]  # type: ignore[index]
    assert info["username"] == f"system:serviceaccount:default:{name}"
    assert info["uid"] == account["metadata"]["uid"]
    assert info["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    r = k.run("auth", "whoami").ok()
    assert ["Username", f"system:serviceaccount:default:{name}"] in [line.split() for line in r.stdout.splitlines()]
    # a token that is no token: kubectl's own error, the 401 it got
    write_kubeconfig(k.kubeconfig, secure.secure_url, name, ca_file=secure.pki.ca_cert, token="not-a-token",
                     embed=True)
    r = k.run("auth", "whoami")
    assert r.returncode != 0 and "Unauthorized" in r.stderr


@pytest.fixture
def ops_may_impersonate_jane(secure: SecureApiServer) -> Iterator[None]:
    secure.issue("whoami-ops", "ops-who")
    suffix = uuid.uuid4().hex[:6]
    role = {"metadata": {"name": f"whoami-impersonate-{suffix}"},
            "rules": [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"], "resourceNames": ["jane"]},
                      {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["groups"],
                       "resourceNames": ["devs"]}]}
    binding = {"metadata": {"name": f"whoami-ops-{suffix}"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": role["metadata"]["name"]},
               "subjects": [{"kind": "User", "name": "ops-who"}]}
    with secure.client("admin") as admin:
        assert admin.post(f"{RBAC}/clusterroles", json=role).status_code == 201
        assert admin.post(f"{RBAC}/clusterrolebindings", json=binding).status_code == 201
        with secure.client("whoami-ops") as ops:
            ops.headers["Impersonate-User"] = "jane"
            wait_until_allowed(ops, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", True)
        yield
        admin.delete(f"{RBAC}/clusterrolebindings/{binding['metadata']['name']}")
        admin.delete(f"{RBAC}/clusterroles/{role['metadata']['name']}")


@pytest.mark.kubectl
@VERSIONS
def test_kubectl_whoami_as_an_impersonated_user(secure: SecureApiServer, version: str, tmp_path: Path,
                                                ops_may_impersonate_jane: None) -> None:
    k = SecureKubectl(binary_or_skip(version), version, secure, "whoami-ops", tmp_path)
    assert whoami(k)["status"] == {"userInfo": {"username": "ops-who", "groups": ["system:authenticated"]}}
    assert whoami(k, "--as=jane", "--as-group=devs")["status"] == {
        "userInfo": {"username": "jane", "groups": ["devs", "system:authenticated"]}}
    r = k.run("--as=bob", "auth", "whoami")
    assert r.returncode != 0  # kubectl turns any 403 of the review into its own words
    assert "the selfsubjectreviews API is not enabled in the cluster or you do not have permission" in r.stderr
    with secure.client("whoami-ops") as ops:
        r = ops.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={}, headers={"Impersonate-User": "bob"})
        assert r.status_code == 403
        assert 'users "bob" is forbidden: User "ops-who" cannot impersonate resource "users"' in r.json()["message"]


def test_an_http_client_sees_the_same(secure: SecureApiServer) -> None:
    """The admin over a plain httpx client: the same answer kubectl printed."""
    with secure.client("admin") as admin:
        r = admin.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={})
        assert r.status_code == 201 and r.headers["content-type"].startswith("application/json")
        assert r.json()["status"]["userInfo"]["username"] == "kubernetes-admin"
    with httpx.Client(base_url=secure.secure_url, verify=secure.ssl_context(), timeout=5) as anonymous:
        assert anonymous.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={}).status_code == 401
