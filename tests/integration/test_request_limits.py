"""The request chain's limits on a real apiserver over HTTPS (upstream: server/filters/maxinflight.go,
timeout.go, endpoints/filters/request_deadline.go): --max-mutating-requests-inflight answers 429 with
Retry-After past the limit while long-running requests and system:masters are not counted,
--request-timeout (or a shorter `?timeout=`) answers 504 and cancels the work, and
--min-request-timeout ends watches without timeoutSeconds after [min, 2 min).

Writes are made slow for real: a validating webhook (HTTPS, a certificate from the cluster CA) that
holds each review until the test lets it go, called for pods labelled slow=true.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.server
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.auth import pki
from machinery.api.core_v1 import Pod
from machinery.client import ApiClient
from tests.auth_cluster import SecureApiServer, wait_until_allowed
from tests.cluster import Etcd, wait_for
from tests.manifests import pod

RBAC = "/apis/rbac.authorization.k8s.io/v1"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
REQUEST_TIMEOUT = 4.0
MIN_REQUEST_TIMEOUT = 2
SLOW = {"slow": "true"}


class HeldWebhook:
    """A validating webhook that answers "allowed" only when released: while held, every write it is
    called for stays inside the apiserver."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.arrived = 0
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.release.set()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with hook.lock:
                    hook.arrived += 1
                    release = hook.release
                release.wait(60)
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": {"uid": review["request"]["uid"], "allowed": True}}).encode()
                with contextlib.suppress(OSError):  # the apiserver may have given up on it (its deadline)
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/validate"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self.lock:
            self.release = threading.Event()
        try:
            yield
        finally:
            self.release.set()

    def wait_arrived(self, count: int) -> None:
        wait_for(lambda: self.arrived >= count, 15, what=f"{count} reviews at the webhook")

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd, "--max-requests-inflight", "1", "--max-mutating-requests-inflight",
                             "1", "--request-timeout", f"{REQUEST_TIMEOUT:g}s", "--min-request-timeout",
                             str(MIN_REQUEST_TIMEOUT)).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ns(secure: SecureApiServer, admin: httpx.Client) -> Iterator[str]:
    """A namespace where the user "writer" (not in system:masters) may create and read pods."""
    name = f"limits-{uuid.uuid4().hex[:8]}"
    assert admin.post("/api/v1/namespaces", json={"metadata": {"name": name,
                                                               "labels": {"limits-test": name}}}).status_code == 201
    role = {"metadata": {"name": "pod-writer"},
            "rules": [{"verbs": ["create", "get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]}
    assert admin.post(f"{RBAC}/namespaces/{name}/roles", json=role).status_code == 201
    binding = {"metadata": {"name": "writer"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                           "name": "pod-writer"},
               "subjects": [{"kind": "User", "name": "writer"}]}
    assert admin.post(f"{RBAC}/namespaces/{name}/rolebindings", json=binding).status_code == 201
    secure.issue("writer", "writer")
    with secure.client("writer") as writer:
        wait_until_allowed(writer, "GET", f"/api/v1/namespaces/{name}/pods", True)
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture(scope="module")
def webhook(secure: SecureApiServer, admin: httpx.Client, ns: str) -> Iterator[HeldWebhook]:
    cert, key = pki.issue_serving_cert(secure.root, "held-webhook", ["127.0.0.1"])
    hook = HeldWebhook(cert, key)
    name = f"held-{uuid.uuid4().hex[:6]}"
    config = {"metadata": {"name": name}, "webhooks": [{
        "name": "held.example.minik8s.io", "failurePolicy": "Fail", "timeoutSeconds": 30,
        "clientConfig": {"url": hook.url, "caBundle": base64.b64encode(secure.pki.ca_cert.read_bytes()).decode()},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "namespaceSelector": {"matchLabels": {"limits-test": ns}}, "objectSelector": {"matchLabels": SLOW},
        "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}
    assert admin.post(f"{ADMISSION}/validatingwebhookconfigurations", json=config).status_code == 201
    # the apiserver reads configurations from its watch cache: wait until a slow pod reaches the webhook
    probe = f"/api/v1/namespaces/{ns}/pods"
    wait_for(lambda: admin.post(probe, json=pod(f"probe-{uuid.uuid4().hex[:6]}", labels=SLOW)).status_code == 201
             and hook.arrived > 0, 15, what="the webhook to be called")
    try:
        yield hook
    finally:
        admin.delete(f"{ADMISSION}/validatingwebhookconfigurations/{name}")
        hook.close()


def status(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1", body
    return body


def test_mutating_requests_past_the_limit_get_429(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                  webhook: HeldWebhook) -> None:
    pods = f"/api/v1/namespaces/{ns}/pods"
    with secure.client("writer", timeout=30) as writer, secure.client("writer", timeout=30) as slow_writer, \
            ThreadPoolExecutor(1) as pool:
        with webhook.held():
            before = webhook.arrived
            slow = pool.submit(slow_writer.post, pods, json=pod("slow-1", labels=SLOW))
            webhook.wait_arrived(before + 1)  # the one mutating slot is taken until the webhook answers
            r = writer.post(pods, json=pod("second"))
            assert r.status_code == 429, r.text
            assert r.headers["retry-after"] == "1"
            assert status(r) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                 "message": "Too many requests, please try again later.",
                                 "reason": "TooManyRequests", "details": {"retryAfterSeconds": 1}, "code": 429}
            # reads are counted apart, and a watch not at all (--max-requests-inflight is 1 here)
            with writer.stream("GET", f"{pods}?watch=1") as watch:
                assert watch.status_code == 200
                assert writer.get(pods).status_code == 200
                assert writer.get(f"{pods}/slow-1").status_code == 404
            # system:masters is not counted
            assert admin.post(pods, json=pod("by-admin")).status_code == 201
            assert not slow.done()
        assert slow.result(timeout=30).status_code == 201
    with secure.client("writer") as writer:
        assert writer.post(pods, json=pod("second")).status_code == 201  # the slot is free again
    refused = secure.wait_audit(lambda e: e["user"]["username"] == "writer" and e["stage"] == "ResponseComplete"
                                and e.get("responseStatus", {}).get("code") == 429, what="the 429 in the audit log")
    assert refused[0]["verb"] == "create" and refused[0]["objectRef"]["resource"] == "pods"


def test_the_client_comes_back_after_retry_after(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                 webhook: HeldWebhook) -> None:
    """machinery's ApiClient (every component's client) retries a 429 after its Retry-After, as client-go does."""
    pods = f"/api/v1/namespaces/{ns}/pods"

    async def create(name: str) -> dict[str, Any]:
        async with ApiClient.from_kubeconfig(str(secure.kubeconfig("writer")), user_agent="limits-test") as client:
            return await client.create_raw(Pod, pod(name), ns)

    with secure.client("writer", timeout=30) as slow_writer, ThreadPoolExecutor(2) as pool:
        with webhook.held():
            before = webhook.arrived
            slow = pool.submit(slow_writer.post, pods, json=pod("slow-2", labels=SLOW))
            webhook.wait_arrived(before + 1)
            retried = pool.submit(asyncio.run, create("retried"))

            def refused() -> bool:
                if retried.done():
                    raise AssertionError(f"the client did not wait for the slot: {retried.result()}")
                return any(e.get("userAgent") == "limits-test" and e["stage"] == "ResponseComplete"
                           and e.get("responseStatus", {}).get("code") == 429 for e in secure.audit_events())

            wait_for(refused, 10, what="the client's create refused with 429")
        assert slow.result(timeout=30).status_code == 201
        assert retried.result(timeout=30)["metadata"]["name"] == "retried"


def test_a_request_past_its_deadline_gets_504_and_is_cancelled(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                               webhook: HeldWebhook) -> None:
    pods = f"/api/v1/namespaces/{ns}/pods"
    expected = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Timeout: request did not complete within requested timeout - context deadline exceeded",
                "reason": "Timeout", "code": 504}
    with secure.client("writer", timeout=30) as writer, webhook.held():
        r = writer.post(pods, json=pod("too-slow", labels=SLOW))  # --request-timeout
        assert r.status_code == 504, r.text
        assert status(r) == expected
        # a client's shorter ?timeout= applies: the answer comes before the server's own deadline
        started = time.monotonic()
        r = writer.post(f"{pods}?timeout=1s", json=pod("too-slow-2", labels=SLOW))
        assert r.status_code == 504, r.text
        assert status(r) == expected
        assert time.monotonic() - started < REQUEST_TIMEOUT
        # system:masters has deadlines too
        r = admin.post(f"{pods}?timeout=500ms", json=pod("too-slow-3", labels=SLOW))
        assert r.status_code == 504, r.text
    # the work was cancelled: nothing was written, and the mutating slot is free
    for name in ("too-slow", "too-slow-2", "too-slow-3"):
        assert admin.get(f"{pods}/{name}").status_code == 404
    with secure.client("writer") as writer:
        assert writer.post(pods, json=pod("after-timeouts")).status_code == 201
    secure.wait_audit(lambda e: e["user"]["username"] == "writer" and e["stage"] == "ResponseComplete"
                      and e.get("responseStatus", {}).get("code") == 504, what="the 504 in the audit log")


def test_a_malformed_timeout_is_a_bad_request(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    pods = f"/api/v1/namespaces/{ns}/pods"
    r = admin.post(f"{pods}?timeout=soon", json=pod("never"))
    assert r.status_code == 400
    assert status(r)["reason"] == "BadRequest"
    assert status(r)["message"] == 'invalid timeout specified in the request URL - time: invalid duration "soon"'
    assert admin.get(f"{pods}/never").status_code == 404


def test_a_watch_without_timeout_ends_within_min_and_twice_min(secure: SecureApiServer, ns: str) -> None:
    pods = f"/api/v1/namespaces/{ns}/pods"
    with secure.client("writer", timeout=30) as writer:
        started = time.monotonic()
        with writer.stream("GET", f"{pods}?watch=1") as watch:
            assert watch.status_code == 200
            for _ in watch.iter_lines():
                pass
        took = time.monotonic() - started
        # [min, 2 min) on the server; the upper bound allows for a busy machine
        assert MIN_REQUEST_TIMEOUT <= took < 2 * MIN_REQUEST_TIMEOUT + 2, took
        # timeoutSeconds, when given, is the watch's end, even past 2 min
        started = time.monotonic()
        seconds = 2 * MIN_REQUEST_TIMEOUT + 1
        with writer.stream("GET", f"{pods}?watch=1&timeoutSeconds={seconds}") as watch:
            for _ in watch.iter_lines():
                pass
        assert time.monotonic() - started >= seconds
