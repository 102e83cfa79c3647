"""The gate of a real apiserver over HTTPS: who may come in (client certificates from the cluster
CA, static and service-account tokens; nothing or anything broken → 401, a foreign CA → no
handshake), what each component identity may do (the bootstrap RBAC policy and the Node
authorizer + NodeRestriction), RBAC objects changed at run time, access reviews, and real
kubectl (`auth can-i`, get, a Forbidden error) with the generated kubeconfigs."""

from __future__ import annotations

import contextlib
import http.server
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.auth import pki
from apiserver.auth.serviceaccount import sign_token
from tests.auth_cluster import SecureApiServer, SecureKubectl, wait_until_allowed
from tests.cluster import REPO, Etcd, wait_for
from tests.kubectl import find_kubectl
from tests.manifests import deployment, node, pod
from tests.node_process import BUSYBOX, KubeletProcess, cleanup, ensure_images, free_pod_cidrs

RBAC = "/apis/rbac.authorization.k8s.io/v1"
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
TOKENS = 'ops-token-1,ops-bot,uid-ops,"system:masters"\nplain-token-2,nobody,uid-nobody\n'


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    etcd = own_etcd
    tokens = workdir / "tokens.csv"
    tokens.write_text(TOKENS)
    server = SecureApiServer(workdir, etcd, "--token-auth-file", str(tokens)).start()
    yield server
    server.stop()


def sa_token(secure: SecureApiServer, name: str) -> str:
    return secure.request_token(name)


def status(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1", body
    return body


# -- authentication ----------------------------------------------------------------------------------


def test_no_credentials_is_401_with_a_status(secure: SecureApiServer) -> None:
    with secure.client() as anonymous:
        for method, path in [("GET", "/api/v1/pods"), ("GET", "/api"), ("GET", "/apis/apps/v1"),
                             ("POST", "/apis/apps/v1/namespaces/default/deployments"), ("GET", "/openapi/v2")]:
            r = anonymous.request(method, path, json={} if method == "POST" else None)
            assert r.status_code == 401, (method, path, r.text)
            assert status(r) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                 "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
        for path in ("/healthz", "/livez", "/readyz", "/version"):  # public, as system:public-info-viewer
            assert anonymous.get(path).status_code == 200, path


def test_certificate_from_another_ca_is_refused_in_the_handshake(secure: SecureApiServer, tmp_path: Path) -> None:
    foreign = pki.CA.create("someone-elses-ca")
    cert, key = foreign.issue("kubernetes-admin", ["system:masters"])
    (tmp_path / "f.crt").write_bytes(pki.cert_pem(cert))
    (tmp_path / "f.key").write_bytes(pki.key_pem(key))
    ctx = secure.ssl_context(cert=tmp_path / "f.crt", key=tmp_path / "f.key")
    with httpx.Client(base_url=secure.secure_url, verify=ctx, timeout=5) as client, \
            pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)) as err:
        client.get("/api/v1/namespaces")
    assert "unknown ca" in str(err.value).lower() or "certificate" in str(err.value).lower() or \
        isinstance(err.value, httpx.RemoteProtocolError | httpx.ReadError)
    with secure.client("admin") as admin:  # and the server is fine
        assert admin.get("/api/v1/namespaces").status_code == 200


def test_broken_credentials_are_401_never_5xx(secure: SecureApiServer) -> None:
    other_key = pki.new_key()
    good = sa_token(secure, "deployment-controller")
    header, claims, signature = good.split(".")
    tokens = [
        "garbage", "a.b.c", "...", "x" * 5000, f"{header}.{claims}.", f"{header}.{claims}.{signature[:-4]}AAAA",
        f"{claims}.{header}.{signature}", sign_token(other_key, "kube-system", "deployment-controller"),
        secure.service_account_token("deployment-controller", expiration_seconds=5, now=time.time() - 60),
        secure.service_account_token("x", issuer="https://elsewhere"),
    ]
    for token in tokens:
        with secure.token_client(token) as client:
            r = client.get("/api/v1/pods")
            assert r.status_code == 401, (token[:40], r.text)
            assert status(r)["reason"] == "Unauthorized"
    with secure.client() as client:
        for header_value in (b"Bearer \xff\xfe\xfd", b"Basic YWRtaW46YWRtaW4=", b"Bearer", b"bearer a b", b"x"):
            r = client.get("/api/v1/pods", headers={"Authorization": header_value})
            assert r.status_code == 401, header_value


def test_static_tokens(secure: SecureApiServer) -> None:
    with secure.token_client("ops-token-1") as ops:
        assert ops.get("/api/v1/pods").status_code == 200  # in system:masters
    with secure.token_client("plain-token-2") as nobody:
        r = nobody.get("/api/v1/pods")
        assert r.status_code == 403
        assert status(r)["message"] == ('pods is forbidden: User "nobody" cannot list resource "pods" in API group "" '
                                        "at the cluster scope")
        assert nobody.get("/apis").status_code == 200  # discovery is for every authenticated user


def test_forwarded_headers_do_not_make_the_secure_port_the_plain_one(secure: SecureApiServer) -> None:
    """The secure port's client on 127.0.0.1 without credentials stays anonymous whatever X-Forwarded-Proto and
    X-Forwarded-For it sends (uvicorn's proxy-headers middleware, on by default for 127.0.0.1, made it the plain
    port's system:unsecured, in system:masters)."""
    with secure.client() as anonymous:
        for headers in ({"X-Forwarded-Proto": "http"}, {"X-Forwarded-Proto": "http", "X-Forwarded-For": "10.0.0.1"},
                        {"X-Forwarded-Proto": "ws"}):
            r = anonymous.get("/api/v1/namespaces/kube-system/secrets", headers=headers)
            assert r.status_code == 401, (headers, r.status_code, r.text[:200])


def test_identities_reach_the_audit_log(secure: SecureApiServer) -> None:
    expected = {
        "admin": ("kubernetes-admin", ["system:masters", "system:authenticated"]),
        "scheduler": ("system:kube-scheduler", ["system:authenticated"]),
        "kubelet-node-a": ("system:node:node-a", ["system:nodes", "system:authenticated"]),
    }
    marker = uuid.uuid4().hex
    for name in expected:
        with secure.client(name, user_agent=f"who-{name}-{marker}") as client:
            client.get("/api/v1/nodes")
    with secure.token_client(sa_token(secure, "replicaset-controller")) as client:
        client.headers["User-Agent"] = f"who-rs-{marker}"
        client.get("/api/v1/nodes")
    by_agent: dict[str, Any] = {}

    def logged() -> bool:
        by_agent.update({e["userAgent"]: e["user"] for e in secure.audit_events() if marker in e.get("userAgent", "")})
        return len(by_agent) == 4

    wait_for(logged, 10, what="the four requests in the audit log")
    for name, (user, groups) in expected.items():
        assert by_agent[f"who-{name}-{marker}"] == {"username": user, "groups": groups}
    account = secure.ensure_service_account("replicaset-controller")
    rs_user = by_agent[f"who-rs-{marker}"]
    credential = rs_user["extra"]["authentication.kubernetes.io/credential-id"]
    assert rs_user == {
        "username": "system:serviceaccount:kube-system:replicaset-controller",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
        "uid": account["metadata"]["uid"],  # the account's uid and the token's id, as upstream logs them
        "extra": {"authentication.kubernetes.io/credential-id": credential}}
    assert credential[0].startswith("JTI=")


def test_plain_port_is_system_unsecured(secure: SecureApiServer) -> None:
    marker = uuid.uuid4().hex
    with secure.plain_client() as plain:
        r = plain.get("/api/v1/namespaces/kube-system", headers={"User-Agent": marker})
        assert r.status_code == 200
    [event] = secure.wait_audit(lambda e: e.get("userAgent") == marker)
    assert event["user"] == {"username": "system:unsecured", "groups": ["system:masters", "system:authenticated"]}


# -- authorization: each component's identity --------------------------------------------------------


def pod_path(ns: str, name: str = "", sub: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/pods" + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


MATRIX: list[tuple[str, str, str, dict[str, Any] | None, bool]] = [
    # (identity, method, path ({ns} is replaced), body, allowed)
    ("scheduler", "GET", "/api/v1/pods", None, True),
    ("scheduler", "GET", "/api/v1/nodes", None, True),
    ("scheduler", "POST", "/api/v1/namespaces/{ns}/pods/p/binding",
     {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-a"}}, True),
    ("scheduler", "DELETE", "/apis/apps/v1/namespaces/{ns}/deployments/web", None, False),
    ("scheduler", "POST", "/api/v1/namespaces/{ns}/pods", pod("x"), False),
    ("scheduler", "GET", "/apis/apps/v1/deployments", None, False),
    ("controller-manager", "GET", "/apis/apps/v1/replicasets", None, True),
    ("controller-manager", "GET", f"{RBAC}/clusterroles", None, True),
    ("controller-manager", "DELETE", "/api/v1/namespaces/{ns}/pods/p", None, False),
    ("sa:deployment-controller", "POST", "/apis/apps/v1/namespaces/{ns}/replicasets", None, True),
    ("sa:deployment-controller", "PUT", "/apis/apps/v1/namespaces/{ns}/deployments/web/status", None, True),
    ("sa:deployment-controller", "POST", "/api/v1/namespaces/{ns}/pods", pod("x"), False),
    ("sa:replicaset-controller", "POST", "/api/v1/namespaces/{ns}/pods", None, True),
    ("sa:replicaset-controller", "DELETE", "/api/v1/namespaces/{ns}/pods/p", None, True),
    ("sa:replicaset-controller", "DELETE", "/apis/apps/v1/namespaces/{ns}/deployments/web", None, False),
    ("sa:generic-garbage-collector", "DELETE", "/apis/apps/v1/namespaces/{ns}/replicasets/r", None, True),
    ("sa:generic-garbage-collector", "POST", "/api/v1/namespaces/{ns}/pods", pod("x"), False),
    ("kubelet-node-a", "GET", "/apis/apps/v1/namespaces/{ns}/deployments", None, False),
    ("kubelet-node-a", "POST", "/api/v1/namespaces/{ns}/events", None, True),
    ("admin", "DELETE", f"{RBAC}/clusterrolebindings/does-not-exist", None, True),
]


@pytest.mark.parametrize(("identity", "method", "path", "body", "allowed"), MATRIX,
                         ids=[f"{i}-{m}-{p.rsplit('/', 2)[-2]}/{p.rsplit('/', 1)[-1]}" for i, m, p, _, _ in MATRIX])
def test_component_matrix(secure: SecureApiServer, ns: str, identity: str, method: str, path: str,
                          body: dict[str, Any] | None, allowed: bool) -> None:
    client = secure.token_client(sa_token(secure, identity[3:])) if identity.startswith("sa:") \
        else secure.client(identity)
    with client:
        r = client.request(method, path.format(ns=ns), json=body if body is not None else (
            {} if method in ("POST", "PUT") else None))
    if allowed:
        assert r.status_code not in (401, 403), r.text  # 404/422 are fine: the gate let it through
    else:
        assert r.status_code == 403, r.text
        assert status(r)["reason"] == "Forbidden"


def test_forbidden_message_has_upstreams_shape(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    assert admin.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment("web")).status_code == 201
    with secure.client("scheduler") as scheduler:
        r = scheduler.delete(f"/apis/apps/v1/namespaces/{ns}/deployments/web")
    assert r.status_code == 403
    assert status(r) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": f'deployments.apps "web" is forbidden: User "system:kube-scheduler" cannot delete resource '
                   f'"deployments" in API group "apps" in the namespace "{ns}"',
        "details": {"name": "web", "group": "apps", "kind": "deployments"}}
    assert admin.get(f"/apis/apps/v1/namespaces/{ns}/deployments/web").status_code == 200


# -- authorization: kubelets ---------------------------------------------------------------------------


@pytest.fixture
def nodes_and_pods(admin: httpx.Client, ns: str) -> Iterator[str]:
    for name in ("node-a", "node-b"):
        r = admin.post("/api/v1/nodes", json=node(name))
        assert r.status_code in (201, 409), r.text
    for name, where in (("on-a", "node-a"), ("on-b", "node-b")):
        assert admin.post(pod_path(ns), json=pod(name, nodeName=where)).status_code == 201
    yield ns


def test_kubelet_may_touch_only_its_own_node_lease_and_pods(secure: SecureApiServer, nodes_and_pods: str) -> None:
    ns = nodes_and_pods
    merge = {"Content-Type": "application/merge-patch+json"}
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    with secure.client("kubelet-node-a") as kubelet:
        # its own Node, and no other
        assert kubelet.patch("/api/v1/nodes/node-a/status", json=ready, headers=merge).status_code == 200
        r = kubelet.patch("/api/v1/nodes/node-b/status", json=ready, headers=merge)
        assert r.status_code == 403
        assert status(r)["message"] == ('nodes "node-b" is forbidden: User "system:node:node-a" cannot patch '
                                        'resource "nodes/status" in API group "" at the cluster scope: '
                                        "node 'node-a' cannot modify node 'node-b'")
        assert kubelet.delete("/api/v1/nodes/node-b").status_code == 403
        r = kubelet.post("/api/v1/nodes", json=node("node-c"))  # NodeRestriction reads the body
        assert r.status_code == 403
        assert 'node "node-a" is not allowed to modify node "node-c"' in status(r)["message"]
        assert kubelet.get("/api/v1/nodes").status_code == 200
        # its own Lease
        leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        for name in ("node-a", "node-b"):
            lease = {"metadata": {"name": name}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}}
            r = kubelet.post(leases, json=lease)
            assert r.status_code == (201 if name == "node-a" else 403), r.text
        assert kubelet.get(f"{leases}/node-a").status_code == 200
        assert kubelet.get(f"{leases}/node-b").status_code == 403
        # pods: listed by node only; status and delete of its own pods only
        assert kubelet.get("/api/v1/pods").status_code == 403
        assert kubelet.get("/api/v1/pods", params={"fieldSelector": "spec.nodeName=node-b"}).status_code == 403
        r = kubelet.get("/api/v1/pods", params={"fieldSelector": "spec.nodeName=node-a"})
        assert r.status_code == 200
        assert {p["metadata"]["name"] for p in r.json()["items"] if p["metadata"]["namespace"] == ns} == {"on-a"}
        running = {"status": {"phase": "Running"}}
        assert kubelet.patch(pod_path(ns, "on-a", "status"), json=running, headers=merge).status_code == 200
        r = kubelet.patch(pod_path(ns, "on-b", "status"), json=running, headers=merge)
        assert r.status_code == 403
        assert status(r)["message"].endswith("no relationship found between node 'node-a' and this object")
        assert kubelet.get(pod_path(ns, "on-b")).status_code == 403
        assert kubelet.get(pod_path(ns, "on-a")).status_code == 200
        assert kubelet.patch(pod_path(ns, "on-a"), json={"metadata": {"labels": {"x": "y"}}},
                             headers=merge).status_code == 403  # only status
        assert kubelet.post(pod_path(ns), json=pod("mine")).status_code == 403
        assert kubelet.delete(pod_path(ns, "on-b"), params={"gracePeriodSeconds": "0"}).status_code == 403
        assert kubelet.delete(pod_path(ns, "on-a"), params={"gracePeriodSeconds": "0"}).status_code == 200
        wait_for(lambda: kubelet.delete(pod_path(ns, "on-a")).status_code == 404, 5,
                 what="a deleted pod to be 404 for the kubelet, as it confirms deletions")
    with secure.client("kubelet-node-b") as other:
        assert other.patch(pod_path(ns, "on-b", "status"), json=running, headers=merge).status_code == 200


# -- one parse of the request: a repeated parameter counts by its first value, for everyone -------------


def _names_in(body: dict[str, Any], ns: str) -> set[str]:
    return {p["metadata"]["name"] for p in body["items"] if p["metadata"]["namespace"] == ns}


def _watched_names(client: httpx.Client, url: str, ns: str) -> set[str]:
    """The pods of ns a watch from the start delivers before it times out (the url asks timeoutSeconds=1)."""
    names: set[str] = set()
    with client.stream("GET", url) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line:
                event = json.loads(line)
                assert event["type"] != "ERROR", event
                if event["object"]["metadata"].get("namespace") == ns:
                    names.add(event["object"]["metadata"]["name"])
    return names


@pytest.mark.parametrize("query", ["fieldSelector=spec.nodeName%3Dnode-a&fieldSelector=",
                                   "fieldSelector=spec.nodeName%3Dnode-a&fieldSelector=spec.nodeName%3Dnode-b",
                                   "fieldSelector=spec.nodeName%3Dnode-a&fieldSelector=metadata.name%21%3Dx"])
def test_a_kubelet_cannot_widen_its_pod_selector_with_a_second_copy(secure: SecureApiServer, nodes_and_pods: str,
                                                                     query: str) -> None:
    """The authorizer and the storage read the same (first) fieldSelector: node-a's kubelet sees node-a's pods."""
    ns = nodes_and_pods
    with secure.client("kubelet-node-a") as kubelet:
        r = kubelet.get(f"/api/v1/pods?{query}")
        assert r.status_code == 200, r.text
        assert _names_in(r.json(), ns) == {"on-a"}
        r = kubelet.get(f"/api/v1/namespaces/{ns}/pods?{query}")  # namespaced too
        assert r.status_code == 200, r.text
        assert _names_in(r.json(), ns) == {"on-a"}
        assert _watched_names(kubelet, f"/api/v1/pods?watch=1&timeoutSeconds=1&{query}", ns) == {"on-a"}
        assert _watched_names(kubelet, f"/api/v1/pods?{query}&watch=true&watch=false&timeoutSeconds=1",
                              ns) == {"on-a"}


@pytest.mark.parametrize("query", ["fieldSelector=&fieldSelector=spec.nodeName%3Dnode-a",
                                   "fieldSelector=spec.nodeName%3Dnode-b&fieldSelector=spec.nodeName%3Dnode-a"])
def test_a_kubelet_is_refused_when_the_first_selector_is_not_its_node(secure: SecureApiServer, nodes_and_pods: str,
                                                                      query: str) -> None:
    with secure.client("kubelet-node-a") as kubelet:
        for url in (f"/api/v1/pods?{query}", f"/api/v1/pods?watch=1&timeoutSeconds=1&{query}"):
            r = kubelet.get(url)
            assert r.status_code == 403, r.text
            assert "can only list/watch pods with spec.nodeName field selector set to 'node-a'" in status(r)["message"]


def test_a_list_only_user_cannot_watch_with_a_second_watch_parameter(secure: SecureApiServer, admin: httpx.Client,
                                                                     ns: str) -> None:
    """`watch=0&watch=1` is a list for the authorizer and for the handler (first value, as upstream);
    `watch=1&watch=0` is a watch, which a user who may only list is refused."""
    secure.issue("lister", "lister")
    role = {"metadata": {"name": "pod-lister"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}
    assert admin.post(f"{RBAC}/namespaces/{ns}/roles", json=role).status_code == 201
    binding = {"metadata": {"name": "lister"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                           "name": "pod-lister"},
               "subjects": [{"kind": "User", "name": "lister"}]}
    assert admin.post(f"{RBAC}/namespaces/{ns}/rolebindings", json=binding).status_code == 201
    assert admin.post(pod_path(ns), json=pod("seen")).status_code == 201
    with secure.client("lister") as lister:
        wait_until_allowed(lister, "GET", pod_path(ns), True)
        for query in ("watch=0&watch=1", "watch=false&watch=true", "watch=false&watch=1&watch=true"):
            # timeoutSeconds: were it served as a watch, the stream would end after a second rather than hang
            r = lister.get(f"{pod_path(ns)}?{query}&timeoutSeconds=1")
            assert r.status_code == 200, r.text
            body = r.json()  # one PodList, not a stream of watch events
            assert body["kind"] == "PodList", r.text[:200]
            assert {p["metadata"]["name"] for p in body["items"]} == {"seen"}
        for query in ("watch=1&watch=0", "watch=true&watch=false", "watch=&watch=0"):
            r = lister.get(f"{pod_path(ns)}?{query}&timeoutSeconds=1")
            assert r.status_code == 403, r.text
            assert status(r)["message"] == (f'pods is forbidden: User "lister" cannot watch resource "pods" in API '
                                            f'group "" in the namespace "{ns}"')
    # the audit log records the verb the handler served
    events = secure.wait_audit(lambda e: e["user"]["username"] == "lister" and "watch=0&watch=1" in e["requestURI"]
                               and e["stage"] == "ResponseComplete", what="the lister's list in the audit log")
    assert {e["verb"] for e in events} == {"list"}


# -- RBAC at run time ---------------------------------------------------------------------------------


def test_rbac_objects_changed_at_run_time_take_effect(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                      tmp_path: Path) -> None:
    secure.issue("alice", "alice", ["team-a"])
    alice = secure.client("alice")
    pods = pod_path(ns)
    with alice:
        assert alice.get(pods).status_code == 403
        role = {"metadata": {"name": "pod-reader"},
                "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}
        assert admin.post(f"{RBAC}/namespaces/{ns}/roles", json=role).status_code == 201
        rb = {"metadata": {"name": "alice-reads"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                               "kind": "Role", "name": "pod-reader"},
              "subjects": [{"kind": "Group", "name": "team-a"}]}
        r = admin.post(f"{RBAC}/namespaces/{ns}/rolebindings", json=rb)
        assert r.status_code == 201, r.text
        assert r.json()["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"  # defaulted
        wait_until_allowed(alice, "GET", pods, True)
        assert alice.get("/api/v1/namespaces/default/pods").status_code == 403  # only in its namespace
        assert alice.post(pods, json=pod("x")).status_code == 403  # only the verbs granted
        # widen the role: create pods too
        role["rules"][0]["verbs"].append("create")
        current = admin.get(f"{RBAC}/namespaces/{ns}/roles/pod-reader").json()
        current["rules"] = role["rules"]
        assert admin.put(f"{RBAC}/namespaces/{ns}/roles/pod-reader", json=current).status_code == 200
        wait_until_allowed(alice, "POST", pods, True)
        # the binding's roleRef may not change
        binding = admin.get(f"{RBAC}/namespaces/{ns}/rolebindings/alice-reads").json()
        binding["roleRef"]["name"] = "other"
        r = admin.put(f"{RBAC}/namespaces/{ns}/rolebindings/alice-reads", json=binding)
        assert r.status_code == 422 and "cannot change roleRef" in r.text
        # and away again
        assert admin.delete(f"{RBAC}/namespaces/{ns}/rolebindings/alice-reads").status_code == 200
        wait_until_allowed(alice, "GET", pods, False)


def test_rbac_names_may_hold_colons(admin: httpx.Client) -> None:
    name = f"test:reader:{uuid.uuid4().hex[:6]}"
    role = {"metadata": {"name": name}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]}
    assert admin.post(f"{RBAC}/clusterroles", json=role).status_code == 201
    assert admin.get(f"{RBAC}/clusterroles/{name}").json()["rules"] == role["rules"]
    bad = {"metadata": {"name": "bad"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]}
    r = admin.post(f"{RBAC}/namespaces/default/roles", json=bad)
    assert r.status_code == 422 and "namespaced rules cannot apply to non-resource URLs" in r.text
    assert admin.delete(f"{RBAC}/clusterroles/{name}").status_code == 200


def test_bootstrap_policy_is_served(admin: httpx.Client) -> None:
    names = {r["metadata"]["name"] for r in admin.get(f"{RBAC}/clusterroles").json()["items"]}
    assert {"cluster-admin", "system:kube-scheduler", "system:kube-controller-manager",
            "system:controller:deployment-controller", "system:controller:replicaset-controller"} <= names
    binding = admin.get(f"{RBAC}/clusterrolebindings/cluster-admin").json()
    assert binding["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                                    "name": "system:masters"}]


# -- access reviews ------------------------------------------------------------------------------------


def review(verb: str, resource: str, group: str = "", namespace: str = "default", sub: str = "") -> dict[str, Any]:
    attrs = {"verb": verb, "resource": resource, "group": group, "namespace": namespace}
    if sub:
        attrs["subresource"] = sub
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": None}, "spec": {"resourceAttributes": attrs},
            "status": {"allowed": False}}


def test_self_subject_access_review(secure: SecureApiServer) -> None:
    with secure.client("scheduler") as scheduler:
        r = scheduler.post(SSAR, json=review("create", "pods", sub="binding"))
        assert r.status_code == 201, r.text
        assert r.json()["status"]["allowed"] is True
        assert "system:kube-scheduler" in r.json()["status"]["reason"]
        assert scheduler.post(SSAR, json=review("delete", "deployments", "apps")).json()["status"] == {
            "allowed": False}
        assert scheduler.get(SSAR).status_code == 403  # authorization comes first: nobody may list reviews
        assert scheduler.post(SSAR, json={"spec": {}}).status_code == 422
    with secure.client("admin") as admin:
        assert admin.get(SSAR).status_code == 405
        sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": "system:kube-scheduler", "resourceAttributes": {"verb": "list", "resource": "nodes"}}}
        r = admin.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=sar)
        assert r.status_code == 201 and r.json()["status"]["allowed"] is True
    # asking about others is not for everyone (the scheduler may: its secure port's delegated authorization asks,
    # as upstream's system:kube-scheduler role allows)
    secure.issue("sar-jane", "jane")
    with secure.client("sar-jane") as jane:
        assert jane.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=sar).status_code == 403
    with secure.client("scheduler") as scheduler:
        assert scheduler.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=sar).status_code == 201


# -- real kubectl --------------------------------------------------------------------------------------


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_with_generated_kubeconfigs(secure: SecureApiServer, admin: httpx.Client, ns: str, version: str,
                                            tmp_path: Path) -> None:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed")
    as_admin = SecureKubectl(binary, version, secure, "admin", tmp_path / "admin", ns)
    as_scheduler = SecureKubectl(binary, version, secure, "scheduler", tmp_path / "scheduler", ns)
    as_kubelet = SecureKubectl(binary, version, secure, "kubelet-node-a", tmp_path / "kubelet", ns)

    assert as_admin.run("auth", "can-i", "*", "*").ok().stdout.strip() == "yes"
    assert as_scheduler.run("auth", "can-i", "create", "pods", "--subresource=binding").ok().stdout.strip() == "yes"
    assert as_scheduler.run("auth", "can-i", "list", "nodes").ok().stdout.strip() == "yes"
    denied = as_scheduler.run("auth", "can-i", "delete", "deployments")
    assert denied.returncode == 1 and denied.stdout.strip() == "no"
    assert as_kubelet.run("auth", "can-i", "create", "deployments.apps").stdout.strip() == "no"

    as_admin.run("apply", "-f", str(REPO / "examples" / "nginx-deployment.yaml")).ok()
    assert "nginx" in as_admin.run("get", "deployments").ok().stdout
    r = as_scheduler.run("delete", "deployment", "nginx-deployment")
    assert r.returncode != 0
    assert (f'Error from server (Forbidden): deployments.apps "nginx-deployment" is forbidden: '
            f'User "system:kube-scheduler" cannot delete resource "deployments" in API group "apps" '
            f'in the namespace "{ns}"') in r.stderr
    assert admin.get(f"/apis/apps/v1/namespaces/{ns}/deployments/nginx-deployment").status_code == 200


def test_tls_needs_the_cluster_ca(secure: SecureApiServer) -> None:
    """The serving certificate is the cluster CA's: a client without that CA does not trust it."""
    with httpx.Client(base_url=secure.secure_url, verify=ssl.create_default_context(), timeout=5) as client, \
            pytest.raises(httpx.ConnectError):
        client.get("/healthz")


# -- impersonation (kubectl --as) ------------------------------------------------------------------------


@pytest.fixture
def impersonation(secure: SecureApiServer, admin: httpx.Client, ns: str) -> Iterator[str]:
    """User "ops" may impersonate user jane and group devs; jane may read pods in ns."""
    secure.issue("ops", "ops")
    suffix = uuid.uuid4().hex[:6]
    role = {"metadata": {"name": f"impersonate-jane-{suffix}"},
            "rules": [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"], "resourceNames": ["jane"]},
                      {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["groups"],
                       "resourceNames": ["devs"]}]}
    binding = {"metadata": {"name": f"ops-impersonates-{suffix}"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": role["metadata"]["name"]},
               "subjects": [{"kind": "User", "name": "ops"}]}
    reader = {"metadata": {"name": "pod-reader"},
              "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}
    jane_reads = {"metadata": {"name": "jane-reads"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
                  "subjects": [{"kind": "User", "name": "jane"}]}
    for path, body in ((f"{RBAC}/clusterroles", role), (f"{RBAC}/clusterrolebindings", binding),
                       (f"{RBAC}/namespaces/{ns}/roles", reader), (f"{RBAC}/namespaces/{ns}/rolebindings", jane_reads)):
        r = admin.post(path, json=body)
        assert r.status_code == 201, r.text
    with secure.client("ops", user_agent="ops-check") as ops:
        ops.headers["Impersonate-User"] = "jane"
        wait_until_allowed(ops, "GET", pod_path(ns), True)
    yield ns
    admin.delete(f"{RBAC}/clusterrolebindings/{binding['metadata']['name']}")
    admin.delete(f"{RBAC}/clusterroles/{role['metadata']['name']}")


@pytest.mark.kubectl
def test_kubectl_as_impersonates_when_rbac_allows(secure: SecureApiServer, admin: httpx.Client, impersonation: str,
                                                  tmp_path: Path) -> None:
    ns = impersonation
    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl.1.33 is not installed")
    assert admin.post(pod_path(ns), json=pod("web")).status_code == 201
    as_ops = SecureKubectl(binary, "1.33", secure, "ops", tmp_path / "ops", ns)
    as_scheduler = SecureKubectl(binary, "1.33", secure, "scheduler", tmp_path / "scheduler", ns)

    # ops itself may not read pods; acting as jane (and jane in devs) it may, as jane may here
    r = as_ops.run("get", "pods")
    assert r.returncode != 0 and 'User "ops" cannot list resource "pods"' in r.stderr
    assert as_ops.run("--as=jane", "get", "pods", "-o", "name").ok().stdout.split() == ["pod/web"]
    assert as_ops.run("--as=jane", "--as-group=devs", "get", "pod", "web", "-o", "name").ok().stdout.strip() == \
        "pod/web"
    # ... but jane may not delete: authorized as jane, not as ops
    r = as_ops.run("--as=jane", "delete", "pod", "web")
    assert r.returncode != 0
    assert (f'Error from server (Forbidden): pods "web" is forbidden: User "jane" cannot delete resource "pods" '
            f'in API group "" in the namespace "{ns}"') in r.stderr
    # denied: a user ops may not impersonate, a group it may not, and a requester with no impersonate right
    r = as_ops.run("--as=bob", "get", "pods")
    assert r.returncode != 0
    assert ('Error from server (Forbidden): users "bob" is forbidden: User "ops" cannot impersonate resource '
            '"users" in API group "" at the cluster scope') in r.stderr
    r = as_ops.run("--as=jane", "--as-group=system:masters", "delete", "pod", "web")
    assert r.returncode != 0
    assert ('groups "system:masters" is forbidden: User "ops" cannot impersonate resource "groups" in API group "" '
            "at the cluster scope") in r.stderr
    # kubectl discovers first; a forbidden discovery prints only "Forbidden: unknown" (client-go cannot read the
    # Status there, as against upstream), so the scheduler's own discovery fills its cache first
    as_scheduler.run("get", "nodes").ok()
    r = as_scheduler.run("--as=jane", "get", "pods")
    assert r.returncode != 0
    assert 'User "system:kube-scheduler" cannot impersonate resource "users" in API group ""' in r.stderr
    # kubectl auth can-i --as answers for jane
    assert as_ops.run("--as=jane", "auth", "can-i", "list", "pods").ok().stdout.strip() == "yes"
    denied = as_ops.run("--as=jane", "auth", "can-i", "delete", "pods")
    assert denied.returncode == 1 and denied.stdout.strip() == "no"
    assert admin.get(pod_path(ns, "web")).status_code == 200  # nothing was deleted


def test_impersonation_reaches_the_audit_log(secure: SecureApiServer, impersonation: str) -> None:
    ns = impersonation
    marker = uuid.uuid4().hex
    with secure.client("ops", user_agent=f"imp-{marker}") as ops:
        assert ops.get(pod_path(ns), headers={"Impersonate-User": "jane"}).status_code == 200
        assert ops.get(pod_path(ns), headers={"Impersonate-User": "bob"}).status_code == 403
    wait_for(lambda: len([e for e in secure.audit_events() if e.get("userAgent") == f"imp-{marker}"]) == 2, 10,
             what="both requests in the audit log")
    events = [e for e in secure.audit_events() if e.get("userAgent") == f"imp-{marker}"]
    allowed = next(e for e in events if e["responseStatus"]["code"] == 200)
    denied = next(e for e in events if e["responseStatus"]["code"] == 403)
    assert allowed["user"] == {"username": "ops", "groups": ["system:authenticated"]}
    assert allowed["impersonatedUser"] == {"username": "jane", "groups": ["system:authenticated"]}
    assert allowed["annotations"]["authorization.k8s.io/reason"].startswith('RBAC: allowed by RoleBinding "jane-reads')
    assert denied["user"]["username"] == "ops" and "impersonatedUser" not in denied
    assert denied["responseStatus"]["message"].startswith('users "bob" is forbidden')


def test_malformed_impersonation_is_a_bad_request_and_changes_nothing(secure: SecureApiServer, admin: httpx.Client,
                                                                     ns: str) -> None:
    for headers in ({"Impersonate-Group": "system:masters"}, {"Impersonate-Uid": "1"},
                    {"Impersonate-Extra-Scopes": "x"}):
        r = admin.post(pod_path(ns), json=pod("sneaky"), headers=headers)
        assert r.status_code == 400, r.text
        body = status(r)
        assert body["reason"] == "BadRequest" and "without impersonating a user" in body["message"]
    with secure.client() as anonymous:  # no credentials: 401 comes first
        assert anonymous.get("/api/v1/pods", headers={"Impersonate-User": "kubernetes-admin"}).status_code == 401
    with secure.client("scheduler") as scheduler:  # impersonating a master needs the right to
        r = scheduler.post(pod_path(ns), json=pod("sneaky"), headers={"Impersonate-User": "kubernetes-admin",
                                                                     "Impersonate-Group": "system:masters"})
        assert r.status_code == 403 and status(r)["message"].startswith('users "kubernetes-admin" is forbidden')
    assert admin.get(pod_path(ns, "sneaky")).status_code == 404


# -- apiserver → kubelet over HTTPS ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_kubelet(secure: SecureApiServer, workdir: Path) -> Iterator[KubeletProcess]:
    """A real kubelet serving HTTPS with the cluster CA's certificate and wanting client certificates."""
    ensure_images()
    kubelet = secure.kubelet(workdir, f"tls-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
    try:
        with secure.client("admin") as admin:
            kubelet.start(admin, timeout=60)
        yield kubelet
    finally:
        cleanup([kubelet])


def _kubelet_get(kubelet: KubeletProcess, secure: SecureApiServer, path: str,
                 identity: str | None = None) -> httpx.Response:
    with httpx.Client(base_url=kubelet.address, verify=secure.ssl_context(identity), timeout=10) as client:
        return client.get(path)


def test_logs_and_exec_reach_the_kubelet_over_tls(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                  tls_kubelet: KubeletProcess, tmp_path: Path) -> None:
    assert tls_kubelet.address.startswith("https://")
    body = pod("talker", image=BUSYBOX, nodeName=tls_kubelet.node)
    body["spec"]["containers"][0]["command"] = ["sh", "-c", "echo hello-over-tls; exec sleep 3600"]
    body["spec"]["terminationGracePeriodSeconds"] = 0
    assert admin.post(pod_path(ns), json=body).status_code == 201

    def logged() -> str | None:
        r = admin.get(pod_path(ns, "talker", "log"))
        return r.text if r.status_code == 200 and "hello-over-tls" in r.text else None

    wait_for(logged, 90, 0.5, what=f"the pod's log through the apiserver\n{tls_kubelet.log_tail()}")
    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl.1.33 is not installed")
    kubectl = SecureKubectl(binary, "1.33", secure, "admin", tmp_path / "admin", ns)
    assert kubectl.run("logs", "talker").ok().stdout == "hello-over-tls\n"
    done = kubectl.run("exec", "talker", "--", "sh", "-c", "echo out-$((6*7)); echo err >&2; exit 3")
    assert (done.returncode, done.stdout) == (3, "out-42\n"), done
    assert "err" in done.stderr


def test_spdy_exec_over_tls_is_authorized_and_audited(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                      tls_kubelet: KubeletProcess, tmp_path: Path) -> None:
    """kubectl 1.27 (SPDY/3.1) over HTTPS with its client certificate: the upgrade on the TLS connection, the
    kubelet reached over TLS, the exit code; the audit entry says create pods/exec, 101 (issue 18)."""
    body = pod("spdy", image=BUSYBOX, nodeName=tls_kubelet.node)
    body["spec"]["containers"][0]["command"] = ["sleep", "3600"]
    body["spec"]["terminationGracePeriodSeconds"] = 0
    assert admin.post(pod_path(ns), json=body).status_code == 201
    wait_for(lambda: admin.get(pod_path(ns, "spdy")).json().get("status", {}).get("phase") == "Running", 90, 0.5,
             what=f"the spdy pod running\n{tls_kubelet.log_tail()}")
    binary = find_kubectl("1.27")
    if binary is None:
        pytest.fail("kubectl.1.27 is not installed")
    kubectl = SecureKubectl(binary, "1.27", secure, "admin", tmp_path / "admin", ns)
    done = kubectl.run("exec", "-i", "spdy", "--", "sh", "-c", "tr a-z A-Z; exit 3", stdin="over tls\n")
    assert (done.returncode, done.stdout) == (3, "OVER TLS\n"), done
    [event] = secure.wait_audit(lambda e: e["stage"] == "ResponseComplete" and
                                (e.get("objectRef") or {}).get("subresource") == "exec" and
                                (e.get("objectRef") or {}).get("namespace") == ns, 30, what="the exec's audit entry")
    assert (event["verb"], event["responseStatus"]["code"], event["user"]["username"]) == \
        ("create", 101, "kubernetes-admin"), event


def test_kubelet_refuses_callers_without_the_apiservers_certificate(secure: SecureApiServer, ns: str,
                                                                    tls_kubelet: KubeletProcess) -> None:
    path = f"/containerLogs/{ns}/talker/main"
    assert _kubelet_get(tls_kubelet, secure, "/healthz").status_code == 200  # open, for health checks
    r = _kubelet_get(tls_kubelet, secure, path)  # no client certificate
    assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"
    for identity, user in (("scheduler", "system:kube-scheduler"),
                           (f"kubelet-{tls_kubelet.node}", f"system:node:{tls_kubelet.node}")):
        r = _kubelet_get(tls_kubelet, secure, path, identity)
        assert r.status_code == 403, r.text
        assert r.json()["message"] == f"Forbidden (user={user}, verb=get, resource=nodes, subresource=proxy)"
    r = _kubelet_get(tls_kubelet, secure, "/pods", "scheduler")
    assert r.status_code == 403
    # the apiserver's own identity is let in
    pki_dir = secure.pki
    ctx = secure.ssl_context(cert=pki_dir.kubelet_client_cert, key=pki_dir.kubelet_client_key)
    with httpx.Client(base_url=tls_kubelet.address, verify=ctx, timeout=10) as client:
        assert client.get("/pods").status_code == 200
    # plain HTTP and certificates of another CA do not get through the handshake
    with pytest.raises(httpx.HTTPError):
        httpx.get(tls_kubelet.address.replace("https://", "http://") + path, timeout=5)
    foreign = pki.CA.create("elsewhere")
    cert, key = foreign.issue(pki.KUBELET_CLIENT_USER, [pki.MASTERS_GROUP])
    folder = secure.root / "foreign"
    folder.mkdir(exist_ok=True)
    (folder / "f.crt").write_bytes(pki.cert_pem(cert))
    (folder / "f.key").write_bytes(pki.key_pem(key))
    with httpx.Client(base_url=tls_kubelet.address, verify=secure.ssl_context(cert=folder / "f.crt",
                                                                              key=folder / "f.key"),
                      timeout=5) as client, pytest.raises(httpx.HTTPError):
        client.get(path)


def test_websocket_exec_straight_to_the_kubelet_needs_its_certificate(secure: SecureApiServer, ns: str,
                                                                      tls_kubelet: KubeletProcess) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    url = tls_kubelet.address.replace("https://", "wss://") + f"/exec/{ns}/talker/main?command=id&stdout=true"
    with pytest.raises(InvalidStatus) as err:
        connect(url, ssl=secure.ssl_context("scheduler"), subprotocols=["v5.channel.k8s.io"],  # type: ignore[list-item]
                open_timeout=10)
    assert err.value.response.status_code == 403


@contextlib.contextmanager
def _https_server(cert: Path, key: Path) -> Iterator[tuple[int, list[str]]]:
    """A real HTTPS server on 127.0.0.1 answering 200 to anything; yields its port and the paths it served."""
    served: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"not a kubelet\n")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], served
    finally:
        server.shutdown()
        server.server_close()


def test_apiserver_verifies_the_kubelets_serving_certificate(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                             tmp_path: Path) -> None:
    """--kubelet-certificate-authority: a "kubelet" whose certificate is another CA's, or the cluster CA's for
    another host, gets no request from the apiserver (and the client a Status, not a 5xx from a crash)."""
    foreign = pki.CA.create("elsewhere")
    cert, key = foreign.issue("impostor", client=False, server_hosts=["127.0.0.1"])
    (tmp_path / "foreign.crt").write_bytes(pki.cert_pem(cert))
    (tmp_path / "foreign.key").write_bytes(pki.key_pem(key))
    wrong_host = pki.issue_serving_cert(secure.root, "wrong-host", ["kubelet.elsewhere.example"])
    node_name = f"fake-{uuid.uuid4().hex[:6]}"
    assert admin.post("/api/v1/nodes", json=node(node_name)).status_code == 201
    try:
        assert admin.post(pod_path(ns), json=pod("p", nodeName=node_name)).status_code == 201
        for cert_file, key_file, why in ((tmp_path / "foreign.crt", tmp_path / "foreign.key", "another CA"),
                                         (*wrong_host, "another host")):
            with _https_server(cert_file, key_file) as (port, served):
                addresses = {"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                                        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}
                r = admin.patch(f"/api/v1/nodes/{node_name}/status", json=addresses,
                                headers={"Content-Type": "application/merge-patch+json"})
                assert r.status_code == 200, r.text
                r = admin.get(pod_path(ns, "p", "log"))
                assert r.status_code == 500, (why, r.text)
                assert "certificate verify failed" in status(r)["message"], (why, r.text)
                assert served == [], why
    finally:
        admin.delete(f"/api/v1/nodes/{node_name}")
