"""Admission on a real apiserver: the ServiceAccount default, webhook configurations calling the
example sidecar injector (examples/webhooks/sidecar_injector.py, HTTPS with a certificate from the
cluster CA) with an AdmissionReview and applying its JSONPatch or its verdict, and webhooks that
are down or hang following their failurePolicy (Fail → refused with a clear message, Ignore →
admitted).

test_injected_pod_runs_both_containers NEEDS THE KUBELET (and Docker with the project's images):
it starts a real kubelet with its own kubeconfig (system:node:NAME over HTTPS) and is skipped when
Docker is not there."""

from __future__ import annotations

import base64
import contextlib
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.auth import pki
from tests.auth_cluster import SecureApiServer
from tests.cluster import ALL_ADMISSION, REPO, Etcd, Process, free_port, wait_for
from tests.manifests import pod

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
INJECT = {"sidecar.minik8s.io/inject": "true"}
DENY = {"sidecar.minik8s.io/deny": "true"}


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    etcd = own_etcd
    server = SecureApiServer(workdir, etcd, *ALL_ADMISSION).start()  # the ServiceAccount plugin too
    yield server
    server.stop()


@pytest.fixture(scope="module")
def webhook(secure: SecureApiServer, workdir: Path) -> Iterator[str]:
    """The example webhook server on a free port; its URL."""
    cert, key = pki.issue_serving_cert(secure.root, "sidecar-injector", ["127.0.0.1"])
    port = free_port()
    process = Process("webhook", [sys.executable, str(REPO / "examples" / "webhooks" / "sidecar_injector.py"),
                                  "--port", str(port), "--cert", str(cert), "--key", str(key)],
                      workdir / f"webhook-{port}.log")
    process.start()
    url = f"https://127.0.0.1:{port}"

    def up() -> bool:
        if not process.alive():
            raise RuntimeError(f"webhook server exited:\n{process.log_tail()}")
        try:
            return httpx.get(f"{url}/healthz", verify=secure.ssl_context(), timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, 20, what="the webhook server")
    yield url
    process.stop()


@pytest.fixture
def ns(admin: httpx.Client, secure: SecureApiServer) -> Iterator[str]:
    name = f"adm-{uuid.uuid4().hex[:8]}"
    r = admin.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": {"webhook-test": name}}})
    assert r.status_code == 201
    # what the service-account controller would make (none runs here): ServiceAccount admission wants it
    assert admin.post(f"/api/v1/namespaces/{name}/serviceaccounts", json={"metadata": {"name": "default"}}) \
        .status_code == 201
    # and what the root-ca-cert-publisher would: a pod's kube-api-access volume projects its ca.crt
    root_ca = {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": secure.pki.ca_cert.read_text()}}
    assert admin.post(f"/api/v1/namespaces/{name}/configmaps", json=root_ca).status_code == 201
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


def ca_bundle(secure: SecureApiServer) -> str:
    return base64.b64encode(secure.pki.ca_cert.read_bytes()).decode()


def hook(name: str, url: str, ns: str, caBundle: str | None = None, **extra: Any) -> dict[str, Any]:
    client: dict[str, Any] = {"url": url}
    if caBundle:
        client["caBundle"] = caBundle
    return {"name": name, "clientConfig": client,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"webhook-test": ns}},  # only this test's namespace
            "sideEffects": "None", "admissionReviewVersions": ["v1"], **extra}


@contextlib.contextmanager
def configuration(admin: httpx.Client, kind: str, *hooks: dict[str, Any]) -> Iterator[str]:
    plural = "mutatingwebhookconfigurations" if kind == "Mutating" else "validatingwebhookconfigurations"
    name = f"test-{uuid.uuid4().hex[:8]}"
    r = admin.post(f"{ADMISSION}/{plural}", json={"metadata": {"name": name}, "webhooks": list(hooks)})
    assert r.status_code == 201, r.text
    time.sleep(0.3)  # the apiserver reads configurations from its watch cache
    try:
        yield name
    finally:
        assert admin.delete(f"{ADMISSION}/{plural}/{name}").status_code == 200


def create_pod(admin: httpx.Client, ns: str, name: str, labels: dict[str, str] | None = None) -> httpx.Response:
    return admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod(name, labels={"app": "t", **(labels or {})}))


# -- built-in plugins ---------------------------------------------------------------------------------


def test_service_account_default(admin: httpx.Client, ns: str) -> None:
    r = create_pod(admin, ns, "plain")
    assert r.status_code == 201
    assert r.json()["spec"]["serviceAccountName"] == "default"
    mine = pod("mine", serviceAccountName="builder")
    r = admin.post(f"/api/v1/namespaces/{ns}/pods", json=mine)
    assert r.status_code == 403 and "serviceaccount \"builder\" not found" in r.json()["message"]
    assert admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": "builder"}}) \
        .status_code == 201
    assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=mine).json()["spec"]["serviceAccountName"] == "builder"
    # an update that leaves it out keeps it
    current = admin.get(f"/api/v1/namespaces/{ns}/pods/plain").json()
    del current["spec"]["serviceAccountName"]
    current["metadata"]["labels"]["more"] = "x"
    r = admin.put(f"/api/v1/namespaces/{ns}/pods/plain", json=current)
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["serviceAccountName"] == "default"


# -- webhooks -----------------------------------------------------------------------------------------


def test_mutating_webhook_injects_a_sidecar(secure: SecureApiServer, admin: httpx.Client, webhook: str,
                                            ns: str) -> None:
    mutate = hook("inject.sidecar.minik8s.io", f"{webhook}/mutate", ns, ca_bundle(secure),
                  objectSelector={"matchLabels": INJECT})
    with configuration(admin, "Mutating", mutate):
        r = create_pod(admin, ns, "with-sidecar", INJECT)
        assert r.status_code == 201, r.text
        created = r.json()
        containers = created["spec"]["containers"]
        assert [c["name"] for c in containers] == ["main", "sidecar"]
        sidecar = containers[1]
        assert sidecar["image"] == "minik8s/busybox:1.35"
        assert sidecar["terminationMessagePath"] == "/dev/termination-log"  # defaulted after the patch
        assert created["metadata"]["annotations"]["sidecar.minik8s.io/injected"] == "true"
        assert created["status"]["phase"] == "Pending"
        stored = admin.get(f"/api/v1/namespaces/{ns}/pods/with-sidecar").json()
        assert [c["name"] for c in stored["spec"]["containers"]] == ["main", "sidecar"]
        # no label, no sidecar (the objectSelector keeps the webhook from even being called)
        plain = create_pod(admin, ns, "without-sidecar").json()
        assert [c["name"] for c in plain["spec"]["containers"]] == ["main"]
    # the configuration is gone: nothing is injected any more
    wait_for(lambda: len(create_pod(admin, ns, f"after-{uuid.uuid4().hex[:5]}", INJECT)
                         .json()["spec"]["containers"]) == 1, 5, what="the webhook to be forgotten")


def test_validating_webhook_denies(secure: SecureApiServer, admin: httpx.Client, webhook: str, ns: str) -> None:
    validate = hook("deny.sidecar.minik8s.io", f"{webhook}/validate", ns, ca_bundle(secure))
    with configuration(admin, "Validating", validate):
        r = create_pod(admin, ns, "refused", DENY)
        assert r.status_code == 403, r.text
        body = r.json()
        assert body["kind"] == "Status" and body["reason"] == "Forbidden"
        assert body["message"] == ('admission webhook "deny.sidecar.minik8s.io" denied the request: pods labelled '
                                   "sidecar.minik8s.io/deny=true are not allowed here")
        assert admin.get(f"/api/v1/namespaces/{ns}/pods/refused").status_code == 404
        assert create_pod(admin, ns, "allowed").status_code == 201
        # a webhook's warnings reach the client (kubectl prints each as "Warning: ...")
        r = create_pod(admin, ns, "warned", {"sidecar.minik8s.io/warn": "true"})
        assert r.status_code == 201
        assert r.headers["warning"] == '299 - "pods labelled sidecar.minik8s.io/warn=true are discouraged"'


def test_webhook_needs_the_ca_that_signed_it(admin: httpx.Client, webhook: str, ns: str) -> None:
    """Without caBundle the webhook's certificate is checked against the system's CAs, and fails."""
    with configuration(admin, "Mutating", hook("untrusted.example.minik8s.io", f"{webhook}/mutate", ns)):
        r = create_pod(admin, ns, "p", INJECT)
        assert r.status_code == 500
        assert 'failed calling webhook "untrusted.example.minik8s.io"' in r.json()["message"]


@pytest.mark.parametrize("kind", ["Mutating", "Validating"])
def test_webhook_down_follows_failure_policy(admin: httpx.Client, ns: str, kind: str) -> None:
    down = f"https://127.0.0.1:{free_port()}/mutate"  # nothing listens there
    with configuration(admin, kind, hook("down.example.minik8s.io", down, ns, failurePolicy="Fail")):
        r = create_pod(admin, ns, "refused")
        assert r.status_code == 500, r.text
        body = r.json()
        assert body["reason"] == "InternalError"
        assert body["message"].startswith('Internal error occurred: failed calling webhook "down.example.minik8s.io": '
                                          f'failed to call webhook: Post "{down}"')
        assert admin.get(f"/api/v1/namespaces/{ns}/pods/refused").status_code == 404
    with configuration(admin, kind, hook("down.example.minik8s.io", down, ns, failurePolicy="Ignore")):
        assert create_pod(admin, ns, "admitted").status_code == 201


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server that accepts connections and never answers: a hung webhook."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}/mutate"
    stop.set()
    thread.join(2)
    for conn in accepted:
        conn.close()
    listener.close()


def test_webhook_timeout_follows_failure_policy(admin: httpx.Client, ns: str, silent_server: str) -> None:
    slow = hook("slow.example.minik8s.io", silent_server, ns, timeoutSeconds=1)
    with configuration(admin, "Mutating", {**slow, "failurePolicy": "Fail"}):
        started = time.monotonic()
        r = create_pod(admin, ns, "refused")
        assert r.status_code == 500
        assert "context deadline exceeded" in r.json()["message"]
        assert 0.9 < time.monotonic() - started < 5
    with configuration(admin, "Mutating", {**slow, "failurePolicy": "Ignore"}):
        assert create_pod(admin, ns, "admitted").status_code == 201


def test_webhook_configurations_are_validated(admin: httpx.Client, ns: str) -> None:
    bad = hook("bad.example.minik8s.io", "http://127.0.0.1:1/x", ns, failurePolicy="Sometimes")
    del bad["sideEffects"]
    r = admin.post(f"{ADMISSION}/validatingwebhookconfigurations", json={"metadata": {"name": "bad"},
                                                                         "webhooks": [bad]})
    assert r.status_code == 422
    text = r.json()["message"]
    assert "'https' is the only allowed URL scheme" in text
    assert "webhooks[0].failurePolicy" in text and "webhooks[0].sideEffects" in text
    created = admin.post(f"{ADMISSION}/mutatingwebhookconfigurations", json={
        "metadata": {"name": f"defaults-{ns}"}, "webhooks": [hook("d.example.minik8s.io", "https://x:1/", ns)]})
    assert created.status_code == 201
    defaulted = created.json()["webhooks"][0]
    assert (defaulted["failurePolicy"], defaulted["timeoutSeconds"], defaulted["reinvocationPolicy"]) == \
        ("Fail", 10, "Never")
    assert admin.delete(f"{ADMISSION}/mutatingwebhookconfigurations/defaults-{ns}").status_code == 200


def test_a_broken_webhook_cannot_lock_out_its_own_configuration(admin: httpx.Client, ns: str) -> None:
    everything = {**hook("all.example.minik8s.io", f"https://127.0.0.1:{free_port()}/", ns),
                  "namespaceSelector": {},
                  "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}]}
    with configuration(admin, "Validating", everything) as name:
        r = admin.patch(f"{ADMISSION}/validatingwebhookconfigurations/{name}",
                        json={"metadata": {"labels": {"touched": "yes"}}},
                        headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200  # not sent to the webhook that is down
        assert admin.post("/api/v1/namespaces", json={"metadata": {"name": f"x-{ns}"}}).status_code == 500


# -- the injected pod really runs (NEEDS THE KUBELET) -------------------------------------------------


def _docker_available() -> bool:
    try:
        import docker

        client = docker.from_env()
        try:
            client.ping()
            return True
        finally:
            client.close()
    except Exception:
        return False


class _Secure:
    def __init__(self, url: str) -> None:
        self.url = url


def test_injected_pod_runs_both_containers(secure: SecureApiServer, admin: httpx.Client, webhook: str, ns: str,
                                           workdir: Path) -> None:
    """NEEDS THE KUBELET: a real kubelet (system:node:NAME, its own kubeconfig over HTTPS) runs the pod
    the webhook changed, both containers."""
    if not _docker_available():
        pytest.skip("needs Docker (and the kubelet) to run the pod")
    from tests.node_process import KubeletProcess, cleanup, ensure_images, free_pod_cidrs

    ensure_images()
    node_name = f"adm-{uuid.uuid4().hex[:6]}"
    pki.ensure_pki(secure.root, secure.secure_url, nodes=[node_name])
    kubelet = KubeletProcess(workdir, _Secure(secure.secure_url), node_name, free_pod_cidrs(1)[0],  # type: ignore[arg-type]
                             extra_args=["--kubeconfig", str(secure.kubeconfig(f"kubelet-{node_name}"))])
    mutate = hook("inject.sidecar.minik8s.io", f"{webhook}/mutate", ns, ca_bundle(secure),
                  objectSelector={"matchLabels": INJECT})
    try:
        kubelet.start(admin)
        with configuration(admin, "Mutating", mutate):
            body = pod("web", labels={"app": "web", **INJECT}, image="minik8s/httpd:1", nodeName=node_name)
            r = admin.post(f"/api/v1/namespaces/{ns}/pods", json=body)
            assert r.status_code == 201, r.text

        def running() -> dict[str, Any] | None:
            current = admin.get(f"/api/v1/namespaces/{ns}/pods/web").json()
            statuses = (current.get("status") or {}).get("containerStatuses") or []
            if len(statuses) == 2 and all("running" in (s.get("state") or {}) for s in statuses):
                return current
            return None

        current = wait_for(running, 90, 0.5, what=f"both containers running\n{kubelet.log_tail()}")
        assert isinstance(current, dict)
        assert {s["name"] for s in current["status"]["containerStatuses"]} == {"main", "sidecar"}
        events = secure.audit_events()
        assert any(e["verb"] == "patch" and e["objectRef"].get("subresource") == "status"
                   and e["user"]["username"] == f"system:node:{node_name}" for e in events
                   if e.get("objectRef") and e["stage"] == "ResponseComplete")
    finally:
        admin.delete(f"/api/v1/namespaces/{ns}/pods/web", params={"gracePeriodSeconds": "0"})
        cleanup([kubelet])
