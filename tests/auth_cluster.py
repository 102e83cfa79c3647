"""A real apiserver with its gate switched on, for the auth, admission and audit tests: the PKI
generated into the test's work dir (`--pki-dir`), HTTPS on a free secure port, the plain port
too (system:unsecured in system:masters, handy for setting up), and an audit log.

Clients per identity: `client("scheduler")` is an httpx.Client presenting pki/scheduler.crt;
`kubeconfig("scheduler")` is the generated scheduler.conf; `issue(name, user, groups)` makes a new
identity signed by the cluster CA; `token_client(token)` sends a bearer token instead.

The apiserver reaches kubelets over HTTPS as kube-apiserver-kubelet-client (--kubelet-client-*,
--kubelet-certificate-authority); `kubelet(node, ...)` starts a real kubelet with its own kubeconfig,
serving HTTPS with its certificate from the cluster CA and wanting client certificates.
"""

from __future__ import annotations

import ssl
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from apiserver.audit import read_events
from apiserver.auth import pki
from apiserver.auth.serviceaccount import load_signing_key, sign_token
from machinery.kubeconfig import write_kubeconfig
from tests.cluster import WITHOUT_SERVICE_ACCOUNT_ADMISSION, Etcd, Process, free_port, wait_for
from tests.kubectl import Kubectl
from tests.node_process import KubeletProcess


class SecureApiServer:
    def __init__(self, workdir: Path, etcd: Etcd, *extra_args: str, nodes: Iterable[str] = ("node-a", "node-b"),
                 audit_policy: str | None = None) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.secure_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.secure_url = f"https://127.0.0.1:{self.secure_port}"
        self.root = workdir / f"pki-{self.secure_port}"
        self.audit_log = workdir / f"audit-{self.secure_port}.log"
        # the kubeconfigs name the secure port; generate them before the apiserver reuses the PKI
        self.pki = pki.ensure_pki(self.root, self.secure_url, nodes=nodes)
        argv = [sys.executable, "-m", "apiserver", "--etcd-servers", etcd.endpoint, "--bind-address", "127.0.0.1",
                "--port", str(self.port), "--secure-port", str(self.secure_port), "--pki-dir", str(self.root),
                "--audit-log-path", str(self.audit_log), "--etcd-compaction-interval", "0",
                "--watch-bookmark-interval", "1",
                "--kubelet-client-certificate", str(self.pki.kubelet_client_cert),
                "--kubelet-client-key", str(self.pki.kubelet_client_key),
                "--kubelet-certificate-authority", str(self.pki.ca_cert), *WITHOUT_SERVICE_ACCOUNT_ADMISSION]
        if audit_policy is not None:
            policy = workdir / f"audit-policy-{self.secure_port}.yaml"
            policy.write_text(audit_policy)
            argv += ["--audit-policy-file", str(policy)]
        self.process = Process("apiserver", [*argv, *extra_args], workdir / f"apiserver-{self.secure_port}.log")

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> SecureApiServer:
        self.process.start()
        wait_for(self.ready, 30, what=f"apiserver on {self.secure_url}")
        return self

    def ready(self) -> bool:
        if not self.process.alive():
            raise RuntimeError(f"apiserver exited:\n{self.process.log_tail()}")
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        self.process.stop()

    # -- identities ------------------------------------------------------------------------------

    @property
    def ca(self) -> str:
        return str(self.pki.ca_cert)

    def ssl_context(self, name: str | None = None, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca)
        if name is not None:
            cert, key = self.pki.cert(name), self.pki.key(name)
        if cert is not None and key is not None:
            ctx.load_cert_chain(cert, key)
        return ctx

    def client(self, name: str | None = None, *, user_agent: str | None = None, timeout: float = 10) -> httpx.Client:
        """HTTPS as identity `name` (a file name under pki/: admin, scheduler, kubelet-node-a, ...)."""
        headers = {"User-Agent": user_agent} if user_agent else {}
        return httpx.Client(base_url=self.secure_url, verify=self.ssl_context(name), timeout=timeout, headers=headers)

    def token_client(self, token: str, *, timeout: float = 10) -> httpx.Client:
        return httpx.Client(base_url=self.secure_url, verify=self.ssl_context(), timeout=timeout,
                            headers={"Authorization": f"Bearer {token}"})

    def plain_client(self, timeout: float = 10) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def issue(self, name: str, user: str, groups: Iterable[str] = ()) -> Path:
        """A new identity from the cluster CA: pki/NAME.crt/.key and NAME.conf; returns the kubeconfig."""
        cert, key = pki.issue_client_cert(self.root, name, user, groups)
        return write_kubeconfig(self.pki.kubeconfig(name), self.secure_url, user, ca_file=self.pki.ca_cert,
                                cert_file=cert, key_file=key, embed=True)

    def kubeconfig(self, name: str) -> Path:
        return self.pki.kubeconfig(name)

    def kubelet(self, workdir: Path, node: str, pod_cidr: str, *, tls: bool = True,
                container_runtime: str = "docker") -> KubeletProcess:
        """A kubelet (not started) talking to the secure port as system:node:NODE; with `tls` it serves
        HTTPS with the cluster CA's certificate for it and takes only client certificates from that CA."""
        layout = pki.ensure_pki(self.root, self.secure_url, nodes=[node])
        args = ["--kubeconfig", str(layout.kubeconfig(f"kubelet-{node}"))]
        client = None
        if tls:
            args += ["--tls-cert-file", str(layout.kubelet_serving_cert(node)),
                     "--tls-private-key-file", str(layout.kubelet_serving_key(node)),
                     "--client-ca-file", str(layout.ca_cert)]
            client = (layout.ca_cert, layout.kubelet_client_cert, layout.kubelet_client_key)
        return KubeletProcess(workdir, _SecureUrl(self.secure_url), node, pod_cidr,  # type: ignore[arg-type]
                              extra_args=args, tls=client, container_runtime=container_runtime)

    def ensure_service_account(self, name: str, namespace: str = "kube-system") -> dict[str, Any]:
        """The ServiceAccount NAMESPACE/NAME, created (as the admin) when missing."""
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts"
        with self.client("admin") as admin:
            r = admin.post(path, json={"metadata": {"name": name}})
            if r.status_code == 409:
                r = admin.get(f"{path}/{name}")
            assert r.status_code in (200, 201), r.text
            return r.json()  # type: ignore[no-any-return]

    def request_token(self, name: str, namespace: str = "kube-system", **spec: Any) -> str:
        """A token for the account (created when missing) through TokenRequest, as a client gets one."""
        self.ensure_service_account(name, namespace)
        with self.client("admin") as admin:
            r = admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                           json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
            assert r.status_code == 201, r.text
            return r.json()["status"]["token"]  # type: ignore[no-any-return]

    def wait_known(self, token: str, *, resource: dict[str, str] | None = None,
                   non_resource: dict[str, str] | None = None, timeout: float = 10.0) -> None:
        """Until the apiserver's TokenReview knows the token and its SubjectAccessReview allows what is asked:
        a component caches each answer (refusals too), so a test asks it only once both hold."""
        with self.client("admin") as admin:
            def allowed() -> bool:
                review = admin.post("/apis/authentication.k8s.io/v1/tokenreviews",
                                    json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                          "spec": {"token": token}}).json()["status"]
                if not review.get("authenticated"):
                    return False
                user = review["user"]
                spec: dict[str, Any] = {"user": user["username"], "groups": user.get("groups") or [],
                                        "uid": user.get("uid")}
                spec["resourceAttributes" if resource is not None else "nonResourceAttributes"] = \
                    resource if resource is not None else non_resource
                sar = admin.post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                 json={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                                       "spec": spec})
                return bool(sar.json()["status"].get("allowed"))

            wait_for(allowed, timeout, 0.1, what="the token known and allowed by the apiserver")

    def service_account_token(self, name: str, namespace: str = "kube-system", *, uid: str | None = None,
                              **kwargs: Any) -> str:
        """A token signed here with the cluster's key, as someone holding the key would: for tokens the API
        would not issue (expired, foreign issuer, a uid of our choosing). uid None: the live account's
        (the account is created when missing)."""
        if uid is None:
            uid = self.ensure_service_account(name, namespace)["metadata"]["uid"]
        return sign_token(load_signing_key(self.pki.sa_key), namespace, name, uid=uid, **kwargs)

    # -- the audit log ---------------------------------------------------------------------------

    def audit_events(self) -> list[dict[str, Any]]:
        if not self.audit_log.exists():
            return []
        return list(read_events(self.audit_log))

    def wait_audit(self, predicate: Any, timeout: float = 10.0, what: str = "audit events") -> list[dict[str, Any]]:
        """The audit events matching predicate, once there is at least one."""
        found: list[dict[str, Any]] = []

        def check() -> bool:
            nonlocal found
            found = [e for e in self.audit_events() if predicate(e)]
            return bool(found)

        wait_for(check, timeout, what=what)
        return found


class _SecureUrl:
    """What KubeletProcess reads of an apiserver (its --master): the secure URL."""

    def __init__(self, url: str) -> None:
        self.url = url


class SecureKubectl(Kubectl):
    """A real kubectl bound to the secure port with one of the generated kubeconfigs."""

    def __init__(self, binary: Path, version: str, server: SecureApiServer, identity: str, workdir: Path,
                 namespace: str | None = None) -> None:
        super().__init__(binary, version, server.secure_url, workdir, namespace)
        write_kubeconfig(self.kubeconfig, server.secure_url, identity, ca_file=server.pki.ca_cert,
                         cert_file=server.pki.cert(identity), key_file=server.pki.key(identity), embed=True,
                         namespace=namespace)


def wait_until_allowed(client: httpx.Client, method: str, path: str, allowed: bool, timeout: float = 10.0) -> None:
    """RBAC reads the watch caches: a binding takes effect a moment after it is written."""
    def check() -> bool:
        code = client.request(method, path).status_code
        return (code != 403) == allowed

    wait_for(check, timeout, what=f"{method} {path} to be {'allowed' if allowed else 'forbidden'}")


def now() -> float:
    return time.time()
