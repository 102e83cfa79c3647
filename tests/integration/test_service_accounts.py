"""Service accounts are objects (issue 10, finding 6), on a real apiserver over HTTPS with real
identities: a service-account token is good only while its account (and a pod it is bound to)
lives with the uid the token names; TokenRequest (serviceaccounts/NAME/token) issues tokens with
upstream's defaults and refusals; the ServiceAccount admission plugin refuses pods of accounts that
do not exist; the service-account controller keeps a `default` account in every namespace; the
controller-manager's controllers run on tokens it gets through TokenRequest and keep working past
their expiry; real kubectl creates, lists, describes accounts and `create token`.

The apiserver here runs every admission plugin (the other test apiservers leave ServiceAccount
admission off, as upstream's integration tests do), and shortens tokens to
--service-account-max-token-expiration=12s so a refresh happens within the test."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.auth_cluster import SecureApiServer, SecureKubectl, wait_until_allowed
from tests.cluster import ALL_ADMISSION, Etcd, wait_for
from tests.controller_process import ControllerProcess
from tests.kubectl import find_kubectl
from tests.manifests import deployment, pod

ISSUER = "https://kubernetes.default.svc.cluster.local"
MAX_EXPIRATION = 12  # seconds: --service-account-max-token-expiration of this module's apiserver
RBAC = "/apis/rbac.authorization.k8s.io/v1"
NS_PREFIX = "sa"  # namespaces of the conftest's `ns` fixture


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd, *ALL_ADMISSION,
                             "--service-account-max-token-expiration", f"{MAX_EXPIRATION}s").start()
    yield server
    server.stop()


def accounts(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/serviceaccounts" + (f"/{name}" if name else "")


def token_request(admin: httpx.Client, ns: str, name: str, **spec: Any) -> httpx.Response:
    return admin.post(f"{accounts(ns, name)}/token",
                      json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})


def create_account(admin: httpx.Client, ns: str, name: str) -> dict[str, Any]:
    r = admin.post(accounts(ns), json={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # type: ignore[no-any-return]


def code_with(secure: SecureApiServer, token: str) -> int:
    """What the apiserver answers a token on discovery (allowed for every authenticated user)."""
    with secure.token_client(token) as client:
        return client.get("/apis").status_code


def replicaset(name: str, replicas: int) -> dict[str, Any]:
    return {**deployment(name, replicas), "kind": "ReplicaSet"}


def status_of(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert body["kind"] == "Status", body
    return body  # type: ignore[no-any-return]


# -- authentication against the live objects ---------------------------------------------------------


def test_signed_token_of_an_account_that_does_not_exist_is_401(secure: SecureApiServer, ns: str) -> None:
    # correctly signed with the cluster's key, right issuer and audience: but there is no such account
    token = secure.service_account_token("ghost", ns, uid=str(uuid.uuid4()))
    with secure.token_client(token) as client:
        r = client.get("/apis")
    assert r.status_code == 401
    assert status_of(r) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_token_of_a_deleted_and_recreated_account_is_401(secure: SecureApiServer, admin: httpx.Client,
                                                         ns: str) -> None:
    create_account(admin, ns, "robot")
    old = token_request(admin, ns, "robot").json()["status"]["token"]
    assert code_with(secure, old) == 200
    assert admin.delete(accounts(ns, "robot")).status_code == 200
    wait_for(lambda: code_with(secure, old) == 401, 10, what="the deleted account's token to be refused")
    create_account(admin, ns, "robot")  # same name, a new uid
    new = token_request(admin, ns, "robot").json()["status"]["token"]
    assert code_with(secure, new) == 200
    assert code_with(secure, old) == 401
    # a token naming the right account with a uid of our choosing is refused too
    assert code_with(secure, secure.service_account_token("robot", ns, uid="not-the-uid")) == 401


def test_pod_bound_token_is_401_once_the_pod_is_deleted(secure: SecureApiServer, admin: httpx.Client,
                                                        ns: str) -> None:
    account = create_account(admin, ns, "worker")
    created = admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod("job", serviceAccountName="worker"))
    assert created.status_code == 201, created.text
    uid = created.json()["metadata"]["uid"]
    r = token_request(admin, ns, "worker", boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "job"})
    assert r.status_code == 201, r.text
    token = r.json()["status"]["token"]
    k8s = claims(token)["kubernetes.io"]
    assert k8s == {"namespace": ns, "serviceaccount": {"name": "worker", "uid": account["metadata"]["uid"]},
                   "pod": {"name": "job", "uid": uid}}
    assert code_with(secure, token) == 200
    # the bound pod is deleted (unscheduled: at once): the token goes with it, the account stays
    assert admin.delete(f"/api/v1/namespaces/{ns}/pods/job").status_code == 200
    wait_for(lambda: code_with(secure, token) == 401, 10, what="the pod-bound token to be refused")
    assert admin.get(accounts(ns, "worker")).status_code == 200
    # a new pod of the same name is another pod (another uid): the old token stays dead
    assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod("job", serviceAccountName="worker")).status_code == 201
    assert code_with(secure, token) == 401


def test_a_valid_token_is_not_refused_while_a_restarted_apiserver_fills_its_caches(
        secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    """Right after a start the watch caches are still listing: a valid token the caches have not seen is
    checked in storage (upstream's token getter falls back to a live GET), never 401 (kopf drops
    credentials refused once, and went silent after an apiserver restart)."""
    create_account(admin, ns, "restarts")
    token = token_request(admin, ns, "restarts").json()["status"]["token"]
    for _ in range(3):
        secure.stop()
        secure.process.start()
        codes: list[int] = []
        with secure.token_client(token, timeout=5) as client:

            def answered(client: httpx.Client = client, codes: list[int] = codes) -> bool:
                try:
                    codes.append(client.get(f"/api/v1/namespaces/{ns}/serviceaccounts/restarts").status_code)
                except httpx.HTTPError:
                    return False  # not listening yet
                return codes[-1] != 401 and len(codes) >= 20

            wait_for(answered, 30, 0.002, what="the restarted apiserver answering the token")
        wait_for(secure.ready, 30, what="the restarted apiserver ready")
        assert 401 not in codes, codes


def test_token_for_another_audience_is_not_accepted_here(secure: SecureApiServer, admin: httpx.Client,
                                                         ns: str) -> None:
    create_account(admin, ns, "aud")
    r = token_request(admin, ns, "aud", audiences=["vault"])
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["audiences"] == ["vault"]
    assert claims(r.json()["status"]["token"])["aud"] == ["vault"]
    assert code_with(secure, r.json()["status"]["token"]) == 401


# -- TokenReview -------------------------------------------------------------------------------------

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


def token_review(client: httpx.Client, token: str, audiences: list[str] | None = None) -> httpx.Response:
    spec: dict[str, Any] = {"token": token}
    if audiences is not None:
        spec["audiences"] = audiences
    return client.post(TOKEN_REVIEWS, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                            "spec": spec})


def test_token_review_says_who_a_token_is_for_the_audiences_asked(secure: SecureApiServer, admin: httpx.Client,
                                                                   ns: str) -> None:
    account = create_account(admin, ns, "reviewed")
    token = token_request(admin, ns, "reviewed", audiences=[ISSUER, "vault"]).json()["status"]["token"]
    r = token_review(admin, token)
    assert r.status_code == 201, r.text
    status = r.json()["status"]
    assert status["authenticated"] is True and status["audiences"] == [ISSUER]
    assert status["user"]["username"] == f"system:serviceaccount:{ns}:reviewed"
    assert status["user"]["uid"] == account["metadata"]["uid"]
    assert set(status["user"]["groups"]) == {"system:serviceaccounts", f"system:serviceaccounts:{ns}",
                                             "system:authenticated"}
    assert r.json()["spec"]["token"] == token  # the review comes back as sent, with its answer
    assert token_review(admin, token, ["vault"]).json()["status"]["audiences"] == ["vault"]
    other = token_review(admin, token, ["elsewhere"]).json()["status"]
    assert other["authenticated"] is False
    assert other["error"] == (f'token audiences ["{ISSUER}" "vault"] is invalid for the target audiences '
                              '["elsewhere"]')
    garbage = token_review(admin, "not-a-token").json()["status"]
    assert garbage["authenticated"] is False and garbage["error"] == "invalid bearer token"
    assert admin.delete(accounts(ns, "reviewed")).status_code == 200
    wait_for(lambda: token_review(admin, token).json()["status"]["authenticated"] is False, 10,
             what="the deleted account's token to be refused by review")
    assert "not found" in token_review(admin, token).json()["status"]["error"]
    # listed in discovery, create only
    resources = admin.get("/apis/authentication.k8s.io/v1").json()["resources"]
    assert {"name": "tokenreviews", "namespaced": False, "kind": "TokenReview"}.items() <= next(
        r for r in resources if r["name"] == "tokenreviews").items()


def test_token_review_refusals(secure: SecureApiServer, admin: httpx.Client) -> None:
    empty = admin.post(TOKEN_REVIEWS, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                            "spec": {}})
    assert empty.status_code == 400
    assert status_of(empty)["message"] == "token is required for TokenReview in authentication"
    assert status_of(empty)["reason"] == "BadRequest"
    secure.issue("reviewer-nobody", "nora")
    with secure.client("reviewer-nobody") as nora:
        denied = token_review(nora, "whatever")
        assert denied.status_code == 403
        assert status_of(denied)["message"] == ('tokenreviews.authentication.k8s.io is forbidden: User "nora" '
                                                'cannot create resource "tokenreviews" in API group '
                                                '"authentication.k8s.io" at the cluster scope')
    assert admin.get(TOKEN_REVIEWS).status_code == 405


# -- TokenRequest ------------------------------------------------------------------------------------


def test_token_request_defaults_and_claims(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    account = create_account(admin, ns, "builder")
    before = int(time.time())
    r = token_request(admin, ns, "builder", expirationSeconds=600)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["apiVersion"] == "authentication.k8s.io/v1" and body["kind"] == "TokenRequest"
    assert body["metadata"]["name"] == "builder" and body["metadata"]["namespace"] == ns
    assert body["spec"]["audiences"] == [ISSUER]  # --api-audiences defaults to the issuer
    # 600s asked; --service-account-max-token-expiration shortens it, and says so
    assert body["spec"]["expirationSeconds"] == MAX_EXPIRATION
    assert r.headers["warning"] == f'299 - "requested expiration of 600 seconds shortened to {MAX_EXPIRATION} seconds"'
    token = body["status"]["token"]
    c = claims(token)
    assert c["iss"] == ISSUER and c["aud"] == [ISSUER]
    assert c["sub"] == f"system:serviceaccount:{ns}:builder"
    assert before <= c["iat"] == c["nbf"] <= time.time() and c["exp"] == c["iat"] + MAX_EXPIRATION
    assert c["jti"] and c["kubernetes.io"] == {"namespace": ns, "serviceaccount": {
        "name": "builder", "uid": account["metadata"]["uid"]}}
    expires = datetime.fromisoformat(body["status"]["expirationTimestamp"].replace("Z", "+00:00")).timestamp()
    assert expires == c["exp"]
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header["alg"] == "ES256" and header["kid"]
    # and it authenticates, until it expires
    assert code_with(secure, token) == 200
    wait_for(lambda: time.time() > c["exp"] + 0.5, MAX_EXPIRATION + 5, what="the token's expiry")
    assert code_with(secure, token) == 401


def test_token_request_refusals(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    create_account(admin, ns, "svc")
    # too short: 422, as upstream's ValidateTokenRequest words it
    r = token_request(admin, ns, "svc", expirationSeconds=599)
    assert r.status_code == 422
    assert status_of(r)["reason"] == "Invalid"
    assert status_of(r)["message"] == ('TokenRequest.authentication.k8s.io "svc" is invalid: spec.expirationSeconds: '
                                       "Invalid value: 599: may not specify a duration less than 10 minutes")
    assert status_of(r)["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                                                  "message": "Invalid value: 599: may not specify a duration less "
                                                             "than 10 minutes"}]
    r = token_request(admin, ns, "svc", expirationSeconds=(1 << 32) + 1)
    assert r.status_code == 422 and "larger than 2^32 seconds" in status_of(r)["message"]
    r = admin.post(f"{accounts(ns, 'svc')}/token", json={"metadata": {"name": "other"}, "spec": {}})
    assert r.status_code == 422 and "metadata.name: Invalid value" in status_of(r)["message"]
    # no such account, no such pod: 404
    r = token_request(admin, ns, "nobody")
    assert r.status_code == 404 and status_of(r)["message"] == 'serviceaccounts "nobody" not found'
    r = token_request(admin, ns, "svc", boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "nope"})
    assert r.status_code == 404 and status_of(r)["message"] == 'pods "nope" not found'
    # what may not be bound: kinds not served, a pod running as another account, a pod's old uid
    r = token_request(admin, ns, "svc", boundObjectRef={"kind": "Secret", "apiVersion": "v1", "name": "s"})
    assert r.status_code == 400 and status_of(r)["message"] == "cannot bind token to object of type /v1, Kind=Secret"
    assert admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": "default"}}) \
        .status_code == 201
    assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod("p")).status_code == 201  # runs as default
    r = token_request(admin, ns, "svc", boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "p"})
    assert r.status_code == 400 and "to pod running with different serviceaccount name" in status_of(r)["message"]
    r = token_request(admin, ns, "default", boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "p",
                                                            "uid": "an-old-uid"})
    assert r.status_code == 409 and status_of(r)["reason"] == "Conflict"
    # nothing was written: the account is as it was, no TokenRequest objects exist
    assert admin.get(accounts(ns, "svc")).status_code == 200
    # a malformed body: 400, a field of the wrong type: 422; never a 500
    r = admin.post(f"{accounts(ns, 'svc')}/token", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and status_of(r)["reason"] == "BadRequest"
    r = token_request(admin, ns, "svc", expirationSeconds="an hour")
    assert r.status_code == 422 and status_of(r)["details"]["causes"][0]["field"] == "spec.expirationSeconds"
    r = token_request(admin, ns, "svc", audiences="not-a-list")
    assert r.status_code == 422 and status_of(r)["details"]["causes"][0]["field"] == "spec.audiences"


def test_token_request_is_authorized_as_create_serviceaccounts_token(secure: SecureApiServer, admin: httpx.Client,
                                                                     ns: str) -> None:
    create_account(admin, ns, "target")
    secure.issue("sa-reader", "sa-reader")
    path = f"{accounts(ns, 'target')}/token"
    with secure.client("sa-reader") as reader:
        r = reader.post(path, json={"spec": {}})
        assert r.status_code == 403
        assert status_of(r)["message"] == (f'serviceaccounts "target" is forbidden: User "sa-reader" cannot create '
                                           f'resource "serviceaccounts/token" in API group "" in the namespace "{ns}"')
        assert admin.post(f"{RBAC}/namespaces/{ns}/roles", json={
            "metadata": {"name": "tokens"},
            "rules": [{"verbs": ["create"], "apiGroups": [""], "resources": ["serviceaccounts/token"]}]}
        ).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/{ns}/rolebindings", json={
            "metadata": {"name": "tokens"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                        "name": "tokens"},
            "subjects": [{"kind": "User", "name": "sa-reader"}]}).status_code == 201
        wait_until_allowed(reader, "POST", path, True)
        assert reader.post(path, json={"spec": {}}).status_code == 201


# -- admission ---------------------------------------------------------------------------------------


def test_pod_of_an_account_that_does_not_exist_is_refused(admin: httpx.Client, ns: str) -> None:
    r = admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod("orphan", serviceAccountName="missing"))
    assert r.status_code == 403
    assert status_of(r)["message"] == (f'pods "orphan" is forbidden: error looking up service account '
                                       f'{ns}/missing: serviceaccount "missing" not found')
    assert admin.get(f"/api/v1/namespaces/{ns}/pods/orphan").status_code == 404  # nothing written
    create_account(admin, ns, "missing")  # read through to etcd if the watch cache has not seen it yet
    assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod("orphan", serviceAccountName="missing")) \
        .status_code == 201


# -- the controllers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def controllers(workdir: Path, secure: SecureApiServer) -> Iterator[ControllerProcess]:
    """The service-account and replicaset controllers over HTTPS as system:kube-controller-manager, each
    controller on tokens of its own account (12s tokens here: refreshed every ~10s)."""
    process = ControllerProcess(workdir, secure.secure_url, ["serviceaccount", "replicaset"],
                                "--kubeconfig", str(secure.kubeconfig("controller-manager")))
    process.start()
    yield process
    process.stop()


def test_default_account_appears_in_a_new_namespace_and_comes_back(admin: httpx.Client, ns: str,
                                                                    controllers: ControllerProcess) -> None:
    def default_uid() -> str | None:
        r = admin.get(accounts(ns, "default"))
        return r.json()["metadata"]["uid"] if r.status_code == 200 else None

    wait_for(lambda: default_uid() is not None, 15, what=f"the default service account in {ns}")
    first = default_uid()
    assert admin.delete(accounts(ns, "default")).status_code == 200
    wait_for(lambda: default_uid() not in (None, first), 15, what="the default service account to come back")
    # kube-system holds the controllers' own accounts, made by the controller-manager
    names = {a["metadata"]["name"] for a in admin.get(accounts("kube-system")).json()["items"]}
    assert {"default", "service-account-controller", "replicaset-controller"} <= names


def test_controllers_keep_working_past_their_tokens_expiry(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                           controllers: ControllerProcess) -> None:
    def obtained() -> list[str]:
        return [line for line in controllers.log_text().splitlines()
                if "obtained a token for kube-system/replicaset-controller" in line]

    wait_for(lambda: obtained(), 15, what="the replicaset controller's first token")
    first = len(obtained())
    started = time.time()
    wait_for(lambda: admin.get(accounts(ns, "default")).status_code == 200, 15, what="the default account")
    # the scenario itself: the token the controller holds has run out (12s); its next write refreshes it
    wait_for(lambda: time.time() > started + MAX_EXPIRATION + 1, MAX_EXPIRATION + 5, what="the first token's expiry")
    assert admin.post(f"/apis/apps/v1/namespaces/{ns}/replicasets", json=replicaset("web", replicas=2)) \
        .status_code == 201

    def pods() -> int:
        return len(admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"])

    wait_for(lambda: pods() == 2, 20, what="the replicaset's pods")
    created = secure.wait_audit(lambda e: e.get("verb") == "create" and e["objectRef"].get("resource") == "pods"
                                and e["objectRef"].get("namespace") == ns and e["responseStatus"]["code"] == 201,
                                what="the pods' creation in the audit log")
    assert {e["user"]["username"] for e in created} == {"system:serviceaccount:kube-system:replicaset-controller"}
    assert not [e for e in secure.audit_events() if e["responseStatus"]["code"] == 401
                and "replicaset-controller" in e.get("userAgent", "")]
    assert len(obtained()) > first  # a new token was asked for before the write


# -- real kubectl ------------------------------------------------------------------------------------


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_create_get_describe_and_create_token(secure: SecureApiServer, ns: str, version: str,
                                                      tmp_path: Path) -> None:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed")
    kubectl = SecureKubectl(binary, version, secure, "admin", tmp_path / "admin", ns)
    assert kubectl.run("create", "serviceaccount", "deployer").ok().stdout.strip() == \
        "serviceaccount/deployer created"
    table = kubectl.run("get", "sa", "deployer").ok().stdout.splitlines()
    assert table[0].split() == ["NAME", "SECRETS", "AGE"]
    assert table[1].split()[:2] == ["deployer", "0"]
    described = kubectl.run("describe", "serviceaccount", "deployer").ok().stdout
    assert "Name:" in described and "deployer" in described and f"Namespace:           {ns}" in described
    token = kubectl.run("create", "token", "deployer", "--duration=20m").ok().stdout.strip()
    c = claims(token)
    assert c["sub"] == f"system:serviceaccount:{ns}:deployer" and c["exp"] - c["iat"] == MAX_EXPIRATION
    assert code_with(secure, token) == 200
    # bound to a pod that runs as the account: the token names the pod, and dies with it
    kubectl.run("run", "bound", "--image=busybox:1.36", "--overrides",
                json.dumps({"spec": {"serviceAccountName": "deployer"}})).ok()
    bound = kubectl.run("create", "token", "deployer", "--bound-object-kind=Pod", "--bound-object-name=bound").ok()
    bound_token = bound.stdout.strip()
    assert claims(bound_token)["kubernetes.io"]["pod"]["name"] == "bound"
    assert code_with(secure, bound_token) == 200
    kubectl.run("delete", "pod", "bound", "--wait=false").ok()
    wait_for(lambda: code_with(secure, bound_token) == 401, 10, what="the pod-bound token to be refused")
    # the token reviewed as a component delegating authentication would (upstream's TokenReview)
    review = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
    answer = yaml.safe_load(kubectl.run("create", "-f", "-", "-o", "yaml", stdin=review).ok().stdout)
    assert answer["kind"] == "TokenReview" and answer["status"]["authenticated"] is True
    assert answer["status"]["user"]["username"] == f"system:serviceaccount:{ns}:deployer"
    assert answer["status"]["audiences"] == [ISSUER]
    missing = kubectl.run("create", "token", "nobody")
    assert missing.returncode != 0 and 'serviceaccounts "nobody" not found' in missing.stderr
    short = kubectl.run("create", "token", "deployer", "--duration=1m")
    assert short.returncode != 0 and "may not specify a duration less than 10 minutes" in short.stderr


# -- the batch controllers under their own roles -----------------------------------------------------


@pytest.fixture(scope="module")
def batch_controllers(workdir: Path, secure: SecureApiServer, controllers: ControllerProcess
                      ) -> Iterator[ControllerProcess]:
    """The job, cronjob and ttl-after-finished controllers over HTTPS, each on its own account's tokens (the
    module's other controller-manager keeps the namespaces' default accounts)."""
    process = ControllerProcess(workdir, secure.secure_url, ["job", "cronjob", "ttl-after-finished"],
                                "--kubeconfig", str(secure.kubeconfig("controller-manager")))
    process.start()
    yield process
    process.stop()


def test_batch_controllers_work_under_their_bootstrap_roles(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                            batch_controllers: ControllerProcess) -> None:
    """A Job whose deadline passes: its pod is created, then deleted, its tracking finalizer removed, the Job
    marked Failed, then deleted by its TTL; a CronJob prunes a finished Job beyond its history limit. Every
    write is made by the controller's own account and none is refused."""
    wait_for(lambda: admin.get(accounts(ns, "default")).status_code == 200, 15, what="the default account")
    batch = f"/apis/batch/v1/namespaces/{ns}"
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    assert admin.post(f"{batch}/jobs", json={"metadata": {"name": "late"}, "spec": {
        "activeDeadlineSeconds": 2, "ttlSecondsAfterFinished": 1, "template": template}}).status_code == 201
    wait_for(lambda: admin.get(f"{batch}/jobs/late").status_code == 404, 30,
             what="the Job to fail on its deadline and be deleted after its TTL")
    wait_for(lambda: admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"] == [], 15,
             what="its pod to be gone (deleted, finalizer removed)")

    cronjob = admin.post(f"{batch}/cronjobs", json={"metadata": {"name": "rare"}, "spec": {
        "schedule": "0 0 1 1 *", "successfulJobsHistoryLimit": 0, "jobTemplate": {"spec": {"template": template}}}})
    assert cronjob.status_code == 201, cronjob.text
    owner = {"apiVersion": "batch/v1", "kind": "CronJob", "name": "rare", "uid": cronjob.json()["metadata"]["uid"],
             "controller": True}
    assert admin.post(f"{batch}/jobs", json={"metadata": {"name": "rare-1", "ownerReferences": [owner]},
                                             "spec": {"suspend": True, "template": template}}).status_code == 201

    def finish() -> bool:
        current = admin.get(f"{batch}/jobs/rare-1").json()
        current["status"] = {"conditions": [{"type": "Complete", "status": "True", "reason": "T", "message": "t"}]}
        return admin.put(f"{batch}/jobs/rare-1/status", json=current).status_code == 200

    wait_for(finish, 15, 0.1, what="the owned Job's Complete status")
    wait_for(lambda: admin.get(f"{batch}/jobs/rare-1").status_code == 404, 20, what="the history to be pruned")

    def writes_by(account: str) -> list[dict[str, Any]]:
        return [e for e in secure.audit_events() if e["user"]["username"] == f"system:serviceaccount:kube-system:"
                f"{account}" and e.get("verb") in ("create", "update", "patch", "delete")
                and e["objectRef"].get("namespace") == ns]

    def done_by(account: str) -> set[tuple[str, str]]:
        return {(e["verb"], e["objectRef"]["resource"]) for e in writes_by(account)
                if e["responseStatus"]["code"] < 300}

    assert done_by("job-controller") >= {("create", "pods"), ("delete", "pods"), ("patch", "pods"), ("update", "jobs")}
    assert ("delete", "jobs") in done_by("ttl-after-finished-controller")
    assert ("delete", "jobs") in done_by("cronjob-controller")
    refused = [e for account in ("job-controller", "cronjob-controller", "ttl-after-finished-controller")
               for e in writes_by(account) if e["responseStatus"]["code"] in (401, 403)]
    assert refused == []
