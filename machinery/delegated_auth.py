"""Delegated authorization and the secure port of the components (upstream k8s.io/apiserver's
plugin/pkg/authorizer/webhook and pkg/server/options/authorization.go as kube-controller-manager,
kube-scheduler and the kubelet use them, with component-base's /healthz and /metrics):

- `SubjectAccessReviewer`: asks the apiserver whether a user may do something (a SubjectAccessReview with
  resource or non-resource attributes) and caches the answer, allowed and denied for their own time-to-live
  (the kubelet: 5 minutes and 30 s; the control-plane components: 10 s and 10 s, upstream's defaults);
- `ComponentServer`: `--secure-port` of the controller-manager (10257) and the scheduler (10259), HTTPS only, with a
  self-signed serving certificate when none is given (upstream writes one to --cert-dir), client certificates from
  --client-ca-file as the identity, `/healthz`, `/livez` and `/readyz` open to anyone (upstream's
  --authorization-always-allow-paths), and `/metrics` (prometheus-client's registry of the process) for whoever
  the apiserver allows `get` on that path: system:monitoring, cluster-admin. A caller without a certificate is
  known by its bearer token through a TokenReview (`TokenReviewer`, upstream's delegating authenticator); with
  neither, or a token the apiserver does not know, the answer is 401.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import ipaddress
import logging
import os
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import uvicorn
from prometheus_client import REGISTRY
from prometheus_client.exposition import generate_latest

from machinery.authn.user import UserInfo, user_from_peercert
from machinery.tls import server_ssl_context, tls_options
from machinery.uvicorn_server import QuietServer

log = logging.getLogger(__name__)

SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
ALWAYS_ALLOW_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ReviewClient(Protocol):
    async def request(self, method: str, path: str, *, body: Any = None) -> Any: ...


class SubjectAccessReviewer:
    """SubjectAccessReviews with upstream's webhook authorizer cache."""

    def __init__(self, client: ReviewClient, allowed_ttl: float = 10.0, denied_ttl: float = 10.0) -> None:
        self.client = client
        self.allowed_ttl = allowed_ttl
        self.denied_ttl = denied_ttl
        self.cache: dict[tuple[Any, ...], tuple[bool, float]] = {}

    async def allowed(self, user: UserInfo, attributes: dict[str, str], *, resource: bool = True) -> bool:
        """May `user` do what `attributes` say (resourceAttributes, or nonResourceAttributes: path and verb)?
        An unreachable apiserver gives no, not cached (upstream retries)."""
        key = (user.name, tuple(user.groups), tuple(sorted(attributes.items())), resource,
               tuple(sorted((k, tuple(v)) for k, v in user.extra.items())))
        now = time.monotonic()
        cached = self.cache.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                  "spec": {"user": user.name, "groups": list(user.groups), "uid": user.uid or None,
                           "extra": {k: list(v) for k, v in user.extra.items()} or None,
                           "resourceAttributes" if resource else "nonResourceAttributes": attributes}}
        try:
            answer = await self.client.request("POST", SAR_PATH, body=review)
        except Exception as e:
            log.warning("SubjectAccessReview for %s: %s", user.name, e)
            return False
        allowed = isinstance(answer, dict) and bool((answer.get("status") or {}).get("allowed"))
        self.cache[key] = (allowed, now + (self.allowed_ttl if allowed else self.denied_ttl))
        return allowed


TOKEN_REVIEW_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"


class TokenReviewer:
    """Bearer tokens through TokenReviews (upstream's delegating authenticator: the webhook token
    authenticator with a cache, 10 s for an answer either way). An unreachable apiserver or a refused review
    is not authenticated, and not cached."""

    CACHE_SIZE = 1024

    def __init__(self, client: ReviewClient, ttl: float = 10.0) -> None:
        self.client = client
        self.ttl = ttl
        self.cache: dict[bytes, tuple[UserInfo | None, float]] = {}

    async def user(self, token: str) -> UserInfo | None:
        key = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        now = time.monotonic()
        cached = self.cache.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        try:
            answer = await self.client.request("POST", TOKEN_REVIEW_PATH, body=review)
        except Exception as e:
            log.warning("TokenReview: %s", e)
            return None
        status = (answer.get("status") or {}) if isinstance(answer, dict) else {}
        user = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            user = UserInfo(info.get("username") or "", tuple(info.get("groups") or ()), info.get("uid") or "",
                            {k: tuple(v) for k, v in (info.get("extra") or {}).items()})
        if len(self.cache) >= self.CACHE_SIZE:
            self.cache.clear()
        self.cache[key] = (user, now + self.ttl)
        return user


async def authenticate(scope: dict[str, Any], tokens: TokenReviewer | None) -> UserInfo | None:
    """The caller of a secure port: its verified client certificate, else its bearer token through a
    TokenReview (upstream's union of the x509 and the delegating token authenticators, in that order)."""
    peercert = scope.get("peercert")
    if peercert:
        user = user_from_peercert(peercert)
        if user is not None:
            return user
    if tokens is None:
        return None
    for name, value in scope.get("headers") or ():
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            text = token.strip().decode("latin-1")
            return await tokens.user(text) if scheme.lower() == b"bearer" and text else None
    return None


def self_signed(host: str, days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed serving certificate and its key (PEM) for host (certutil.GenerateSelfSignedCertKey, one
    certificate instead of a CA and a leaf).

    cryptography is imported here, not with the module: it costs 7 MB of RSS, and a process given its serving pair
    (a kubelet with --tls-cert-file, as every node is run) never makes a certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{int(time.time())}")])
    try:
        alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alt = x509.DNSName(host)
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([alt, x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def serving_context(host: str, cert_file: str | None, key_file: str | None,
                    client_ca_file: str | None) -> ssl.SSLContext:
    """The TLS context of the secure port: the given pair, or a fresh self-signed one (kept in memory: written to
    a private temporary directory only for OpenSSL to load it)."""
    if cert_file and key_file:
        return server_ssl_context(cert_file, key_file, client_ca_file)
    cert, key = self_signed(host)
    with tempfile.TemporaryDirectory(prefix="minik8s-serving-") as folder:
        cert_path, key_path = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
        with open(os.open(cert_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(cert)
        with open(os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(key)
        return server_ssl_context(cert_path, key_path, client_ca_file)


Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]


class ComponentServer:
    """The ASGI app of a component's secure port, and its uvicorn server in the component's loop."""

    def __init__(self, reviewer: SubjectAccessReviewer, healthy: Callable[[], bool] = lambda: True,
                 tokens: TokenReviewer | None = None) -> None:
        self.reviewer = reviewer
        self.tokens = tokens
        self.healthy = healthy
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is off; no websocket is served here
            return
        path, method = scope["path"], scope.get("method", "GET")
        if path in ALWAYS_ALLOW_PATHS:
            ok = self.healthy()
            await _answer(send, 200 if ok else 500, b"ok" if ok else b"[-]component not ready\nhealthz check failed",
                          "text/plain; charset=utf-8")
            return
        user = await authenticate(scope, self.tokens)
        if user is None:
            await _answer(send, 401, b"Unauthorized", "text/plain; charset=utf-8")
            return
        verb = "get" if method in ("GET", "HEAD") else method.lower()
        if not user.is_master and not await self.reviewer.allowed(user, {"path": path, "verb": verb},
                                                                  resource=False):
            await _answer(send, 403, f'forbidden: User "{user.name}" cannot {verb} path "{path}"'.encode(),
                          "text/plain; charset=utf-8")
            return
        if path == "/metrics" and method == "GET":
            await _answer(send, 200, generate_latest(REGISTRY), METRICS_CONTENT_TYPE)
            return
        await _answer(send, 404, b"404 page not found", "text/plain; charset=utf-8")

    async def start(self, host: str, port: int, context: ssl.SSLContext) -> int:
        """Serve on host:port (0: any free port); the port it listens on."""
        config = uvicorn.Config(self, host=host, port=port, log_level="warning", access_log=False, lifespan="off",
                                proxy_headers=False, timeout_graceful_shutdown=1, **tls_options(context))
        server = _EmbeddedServer(config)
        self._server = server
        self._task = asyncio.create_task(server.serve(), name="secure-port")
        while not server.started:
            if self._task.done():
                self._task.result()
                raise SystemExit(f"the secure port {host}:{port} did not start")
            await asyncio.sleep(0.02)
        return int(server.servers[0].sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, 5)


async def _answer(send: Send, status: int, body: bytes, content_type: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class _EmbeddedServer(QuietServer):
    """uvicorn inside the component's loop: the component handles signals itself."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[no-untyped-def]
        yield


def add_serving_flags(p: Any, default_port: int) -> None:
    """--secure-port and friends, as upstream's SecureServingOptions and DelegatingAuthenticationOptions."""
    p.add_argument("--secure-port", type=int, default=default_port,
                   help="HTTPS port for /healthz and /metrics; 0 serves no HTTPS at all (default %(default)s)")
    p.add_argument("--bind-address", default="0.0.0.0", help="address of the secure port (default %(default)s)")
    p.add_argument("--tls-cert-file", default=None, help="serving certificate (default: a self-signed one)")
    p.add_argument("--tls-private-key-file", default=None, help="the serving certificate's key")
    p.add_argument("--client-ca-file", default=None,
                   help="CA of the client certificates that identify callers of the secure port")


async def start_serving(args: Any, client: ReviewClient, healthy: Callable[[], bool] = lambda: True
                        ) -> tuple[ComponentServer | None, int]:
    """The component's secure port per its flags (None, 0 when --secure-port is 0), and the port it listens on."""
    if not args.secure_port:
        return None, 0
    host = "127.0.0.1" if args.bind_address in ("0.0.0.0", "::") else args.bind_address
    context = serving_context(host, args.tls_cert_file, args.tls_private_key_file, args.client_ca_file)
    server = ComponentServer(SubjectAccessReviewer(client), healthy, TokenReviewer(client))
    port = await server.start(args.bind_address, args.secure_port, context)
    log.info("serving securely on %s:%d", args.bind_address, port)
    return server, port
