"""What nginx should serve, built from the cluster's objects (upstream internal/ingress/controller/controller.go
getBackendServers, createUpstreams, createServers; internal/ingress/types.go): one server per host (rules
without a host join the catch-all server `_`), one location per path, one upstream per Service port whose
servers are the ready endpoint addresses of the Service's EndpointSlices (never the ClusterIP, as ingress-nginx
without service-upstream). Pure: the controller hands in plain objects and writes what comes out.

Path types as ingress-nginx renders them: Exact `/foo` is `location = /foo`; Prefix `/foo` matches `/foo` and
`/foo/...` by path element (`location = /foo` and `location /foo/`); ImplementationSpecific is nginx's own
prefix match. nginx picks an exact location first, then the longest prefix: upstream's precedence. Where two
Ingresses claim the same host and path the older one wins (upstream sorts by creation time)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from machinery.api.networking_v1 import (
    INGRESS_CLASS_ANNOTATION,
    PATH_TYPE_EXACT,
    PATH_TYPE_PREFIX,
)
from machinery.types import Obj

DEFAULT_SERVER = "_"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
CONFIGURATION_SNIPPET = "nginx.ingress.kubernetes.io/configuration-snippet"
SECRET_TYPE_TLS = "kubernetes.io/tls"


@dataclass(frozen=True)
class Upstream:
    name: str  # namespace-service-port, as ingress-nginx names them
    endpoints: tuple[tuple[str, int], ...]


@dataclass
class Location:
    path: str
    exact: bool
    upstream: str | None  # None: no endpoints (503)
    ingress: str  # namespace/name, for the comment and the log
    implicit: bool = False  # the `= /foo` a Prefix `/foo` adds: an explicit Exact replaces it
    snippet: str = ""


@dataclass
class Server:
    hostname: str
    locations: dict[tuple[bool, str], Location] = field(default_factory=dict)
    default: Location | None = None  # what `location /` does when no rule says (None: the 404 default backend)
    tls: bool = False
    certificate: str | None = None  # namespace/secret of a usable certificate; None: the fallback


@dataclass
class Problem:
    """Something wrong with one Ingress that the controller reports as an event on it."""

    ingress: tuple[str, str]
    reason: str
    message: str


@dataclass
class Configuration:
    servers: dict[str, Server] = field(default_factory=dict)
    upstreams: dict[str, Upstream] = field(default_factory=dict)
    certificates: dict[str, bytes] = field(default_factory=dict)  # namespace/secret -> PEM (chain, then key)
    problems: list[Problem] = field(default_factory=list)


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _meta(obj: Obj) -> Obj:
    return _d(obj.get("metadata"))


def ingress_class_of(ingress: Obj) -> str | None:
    """spec.ingressClassName, else the deprecated annotation (upstream's IsValid reads both)."""
    name = _d(ingress.get("spec")).get("ingressClassName")
    if name:
        return str(name)
    annotation = _d(_meta(ingress).get("annotations")).get(INGRESS_CLASS_ANNOTATION)
    return str(annotation) if annotation else None


def is_ours(ingress: Obj, classes: dict[str, Obj], controller: str, ingress_class: str,
            watch_without_class: bool = False) -> bool:
    """internal/ingress/controller/store: an Ingress whose IngressClass names our controller, or whose
    deprecated annotation names our class (--ingress-class); without a class only with
    --watch-ingress-without-class."""
    name = _d(ingress.get("spec")).get("ingressClassName")
    if name:
        klass = classes.get(name)
        return klass is not None and _d(klass.get("spec")).get("controller") == controller
    annotation = _d(_meta(ingress).get("annotations")).get(INGRESS_CLASS_ANNOTATION)
    if annotation:
        return bool(annotation == ingress_class)
    return watch_without_class


def pem_of(secret: Obj) -> tuple[bytes | None, str]:
    """A TLS Secret's certificate and key as one PEM, or None and why (upstream store/backend_ssl.go)."""
    data = _d(secret.get("data"))
    try:
        cert = base64.b64decode(data.get("tls.crt") or "")
        key = base64.b64decode(data.get("tls.key") or "")
    except ValueError:
        return None, "the certificate or key is not base64"
    if not cert or not key:
        return None, "the secret has no tls.crt or tls.key"
    try:
        parsed = x509.load_pem_x509_certificate(cert)
        private = load_pem_private_key(key, password=None)
    except ValueError as e:
        return None, f"unexpected error creating SSL Cert: {e}"
    raw = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if parsed.public_key().public_bytes(*raw) != private.public_key().public_bytes(*raw):
        return None, "the certificate and the key do not match"
    return cert.rstrip(b"\n") + b"\n" + key.rstrip(b"\n") + b"\n", ""


def _service_port(service: Obj, backend_port: Obj) -> Obj | None:
    for port in _d(service.get("spec")).get("ports") or []:
        port = _d(port)
        if backend_port.get("number") and port.get("port") == backend_port["number"]:
            return port
        if backend_port.get("name") and port.get("name") == backend_port["name"]:
            return port
    return None


def endpoints_of(namespace: str, service: str, port_name: str, slices: list[Obj]) -> tuple[tuple[str, int], ...]:
    """The ready addresses of a Service port, from its EndpointSlices (upstream getEndpointsFromSlices)."""
    found: set[tuple[str, int]] = set()
    for eps in slices:
        meta = _meta(eps)
        if meta.get("namespace") != namespace or _d(meta.get("labels")).get(SERVICE_NAME_LABEL) != service:
            continue
        if eps.get("addressType") not in ("IPv4", "IPv6"):
            continue
        number = next((p.get("port") for p in map(_d, eps.get("ports") or [])
                       if (p.get("name") or "") == port_name and p.get("port")), None)
        if number is None:
            continue
        for endpoint in map(_d, eps.get("endpoints") or []):
            if _d(endpoint.get("conditions")).get("ready") is False:
                continue
            for address in endpoint.get("addresses") or []:
                found.add((str(address), int(number)))
    return tuple(sorted(found))


class _Builder:
    def __init__(self, services: dict[tuple[str, str], Obj], slices: list[Obj],
                 secrets: dict[tuple[str, str], Obj], allow_snippets: bool):
        self.services, self.slices, self.secrets = services, slices, secrets
        self.allow_snippets = allow_snippets
        self.config = Configuration()

    def upstream(self, namespace: str, backend: Obj) -> str | None:
        service = _d(backend.get("service"))
        if not service:
            return None  # a resource backend: nothing ingress-nginx can proxy to
        svc = self.services.get((namespace, service.get("name") or ""))
        if svc is None or _d(svc.get("spec")).get("type") == "ExternalName":
            return None
        port = _service_port(svc, _d(service.get("port")))
        if port is None:
            return None
        endpoints = endpoints_of(namespace, service["name"], port.get("name") or "", self.slices)
        if not endpoints:
            return None
        name = f"{namespace}-{service['name']}-{port.get('port')}"
        self.config.upstreams[name] = Upstream(name, endpoints)
        return name

    def server(self, host: str) -> Server:
        return self.config.servers.setdefault(host, Server(host))

    def add(self, ingress: Obj) -> None:
        meta = _meta(ingress)
        namespace, name = meta.get("namespace") or "default", meta.get("name") or ""
        key = f"{namespace}/{name}"
        spec = _d(ingress.get("spec"))
        snippet = ""
        if self.allow_snippets:
            snippet = str(_d(meta.get("annotations")).get(CONFIGURATION_SNIPPET) or "")
        default = None
        if spec.get("defaultBackend"):
            default = Location("/", False, self.upstream(namespace, _d(spec["defaultBackend"])), key,
                               snippet=snippet)
        rules = [_d(r) for r in spec.get("rules") or []]
        if default is not None:
            hosts = {r.get("host") or DEFAULT_SERVER for r in rules} or {DEFAULT_SERVER}
            for host in hosts:
                server = self.server(host)
                if server.default is None:
                    server.default = default
        for rule in rules:
            server = self.server(rule.get("host") or DEFAULT_SERVER)
            for item in map(_d, _d(rule.get("http")).get("paths") or []):
                upstream = self.upstream(namespace, _d(item.get("backend")))
                for exact, path, implicit in _locations(item.get("path") or "", item.get("pathType") or ""):
                    location = Location(path, exact, upstream, key, implicit, snippet)
                    current = server.locations.get((exact, path))
                    if current is None or (current.implicit and not implicit):
                        server.locations[(exact, path)] = location
        for tls in map(_d, spec.get("tls") or []):
            secret_name = tls.get("secretName") or ""
            usable = self.certificate(namespace, name, secret_name) if secret_name else None
            for host in tls.get("hosts") or []:
                server = self.server(host)
                if not server.tls or server.certificate is None:
                    server.tls, server.certificate = True, usable

    def certificate(self, namespace: str, ingress: str, secret_name: str) -> str | None:
        key = f"{namespace}/{secret_name}"
        if key in self.config.certificates:
            return key
        secret = self.secrets.get((namespace, secret_name))
        if secret is None:
            self.config.problems.append(Problem(
                (namespace, ingress), "MissingSecret",
                f'Error getting SSL certificate "{key}": local SSL certificate {key} was not found. '
                f"Using default certificate"))
            return None
        pem, why = pem_of(secret)
        if pem is None:
            self.config.problems.append(Problem((namespace, ingress), "InvalidSecret",
                                                f'Error getting SSL certificate "{key}": {why}. '
                                                f"Using default certificate"))
            return None
        self.config.certificates[key] = pem
        return key


def _locations(path: str, path_type: str) -> list[tuple[bool, str, bool]]:
    """(exact, nginx path, implicit) for one Ingress path."""
    if path_type == PATH_TYPE_EXACT:
        return [(True, path, False)]
    if path_type == PATH_TYPE_PREFIX:
        trimmed = path.rstrip("/")
        if not trimmed:
            return [(False, "/", False)]
        return [(True, trimmed, True), (False, trimmed + "/", False)]
    return [(False, path or "/", False)]  # ImplementationSpecific: nginx's prefix match


def _created(ingress: Obj) -> tuple[str, str, str]:
    meta = _meta(ingress)
    return str(meta.get("creationTimestamp") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or "")


def build(ingresses: list[Obj], services: list[Obj], slices: list[Obj], secrets: list[Obj], *,
          allow_snippets: bool = False) -> Configuration:
    """The configuration for our Ingresses (already filtered by class), oldest first."""
    by_key = {(_meta(o).get("namespace") or "", _meta(o).get("name") or ""): o for o in services}
    tls_secrets = {(_meta(o).get("namespace") or "", _meta(o).get("name") or ""): o for o in secrets}
    builder = _Builder(by_key, slices, tls_secrets, allow_snippets)
    builder.server(DEFAULT_SERVER)
    for ingress in sorted(ingresses, key=_created):
        builder.add(ingress)
    return builder.config
