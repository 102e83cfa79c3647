"""ingress_nginx's pure parts: which Ingresses are ours, upstreams from EndpointSlices, path types as
locations, conflicts, TLS Secrets (model.py), and the nginx.conf they render to (template.py)."""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ingress_nginx import __main__ as main
from ingress_nginx.model import build, endpoints_of, is_ours
from ingress_nginx.template import Settings, render

CLASSES = {"nginx": {"spec": {"controller": "k8s.io/ingress-nginx"}}, "other": {"spec": {"controller": "x.io/y"}}}


def ingress(name: str, *rules: dict[str, Any], created: str = "2024-01-01T00:00:00Z", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": {"rules": list(rules), **spec}}


def rule(host: str, *paths: tuple[str, str, str]) -> dict[str, Any]:
    return {"host": host, "http": {"paths": [
        {"path": p, "pathType": t, "backend": {"service": {"name": svc, "port": {"number": 80}}}}
        for p, t, svc in paths]}}


def service(name: str, port_name: str = "http") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"ports": [{"name": port_name, "port": 80, "targetPort": 8080}]}}


def eps(name: str, *addresses: tuple[str, bool | None], port_name: str = "http") -> dict[str, Any]:
    return {"metadata": {"name": f"{name}-x", "namespace": "ns", "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4", "ports": [{"name": port_name, "port": 8080}],
            "endpoints": [{"addresses": [a], **({"conditions": {"ready": r}} if r is not None else {})}
                          for a, r in addresses]}


def test_which_ingresses_are_ours() -> None:
    ours = {"spec": {"ingressClassName": "nginx"}, "metadata": {}}
    assert is_ours(ours, CLASSES, "k8s.io/ingress-nginx", "nginx")
    assert not is_ours({"spec": {"ingressClassName": "other"}, "metadata": {}}, CLASSES, "k8s.io/ingress-nginx",
                       "nginx")
    assert not is_ours({"spec": {"ingressClassName": "gone"}, "metadata": {}}, CLASSES, "k8s.io/ingress-nginx",
                       "nginx")
    annotated = {"spec": {}, "metadata": {"annotations": {"kubernetes.io/ingress.class": "nginx"}}}
    assert is_ours(annotated, CLASSES, "k8s.io/ingress-nginx", "nginx")
    assert not is_ours({"spec": {}, "metadata": {}}, CLASSES, "k8s.io/ingress-nginx", "nginx")
    assert is_ours({"spec": {}, "metadata": {}}, CLASSES, "k8s.io/ingress-nginx", "nginx", watch_without_class=True)


def test_upstreams_are_the_ready_endpoint_addresses() -> None:
    slices = [eps("web", ("10.0.0.2", True), ("10.0.0.1", None), ("10.0.0.3", False)),
              eps("web", ("10.0.0.9", True), port_name="other")]
    assert endpoints_of("ns", "web", "http", slices) == (("10.0.0.1", 8080), ("10.0.0.2", 8080))
    assert endpoints_of("other-ns", "web", "http", slices) == ()


def test_path_types_become_locations() -> None:
    config = build([ingress("a", rule("h", ("/exact", "Exact", "web"), ("/app/", "Prefix", "web"),
                                      ("/impl", "ImplementationSpecific", "web")))],
                   [service("web")], [eps("web", ("10.0.0.1", True))], [])
    server = config.servers["h"]
    assert sorted((e, p) for e, p in server.locations) == [(False, "/app/"), (False, "/impl"), (True, "/app"),
                                                          (True, "/exact")]
    assert {loc.upstream for loc in server.locations.values()} == {"ns-web-80"}
    assert config.upstreams["ns-web-80"].endpoints == (("10.0.0.1", 8080),)


def test_the_older_ingress_wins_and_an_explicit_exact_beats_a_prefixs() -> None:
    older = ingress("older", rule("h", ("/x", "Prefix", "a")), created="2024-01-01T00:00:00Z")
    newer = ingress("newer", rule("h", ("/x/", "Prefix", "b"), ("/x", "Exact", "b")), created="2024-02-01T00:00:00Z")
    config = build([newer, older], [service("a"), service("b")], [eps("a", ("10.0.0.1", True)),
                                                                   eps("b", ("10.0.0.2", True))], [])
    locations = config.servers["h"].locations
    assert locations[(False, "/x/")].upstream == "ns-a-80"  # older wins the prefix
    assert locations[(True, "/x")].upstream == "ns-b-80"  # an explicit Exact replaces the Prefix's implicit one


def test_backends_without_endpoints_answer_503_and_hostless_rules_join_the_catch_all() -> None:
    config = build([ingress("a", rule("", ("/none", "Prefix", "empty"), ("/missing", "Prefix", "gone")))],
                   [service("empty")], [], [])
    text = render(config, Settings("/run/x", 8880, 8443, fallback_certificate="/run/x/ssl/fake.pem"))
    assert config.servers["_"].locations[(False, "/none/")].upstream is None
    assert "return 503;" in text
    assert 'return 404 "default backend - 404";' in text


def _secret(name: str, cert_cn: str, key_matches: bool = True) -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    other = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cert_cn)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    pem_key = (key if key_matches else other).private_bytes(serialization.Encoding.PEM,
                                                           serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption())
    return {"metadata": {"name": name, "namespace": "ns"}, "type": "kubernetes.io/tls",
            "data": {"tls.crt": base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode(),
                     "tls.key": base64.b64encode(pem_key).decode()}}


def test_tls_from_secrets_and_the_fallback() -> None:
    ingresses = [ingress("good", rule("g.example.com", ("/", "Prefix", "web")),
                         tls=[{"hosts": ["g.example.com"], "secretName": "good"}]),
                 ingress("missing", rule("m.example.com", ("/", "Prefix", "web")),
                         tls=[{"hosts": ["m.example.com"], "secretName": "nope"}]),
                 ingress("bad", rule("b.example.com", ("/", "Prefix", "web")),
                         tls=[{"hosts": ["b.example.com"], "secretName": "bad"}])]
    config = build(ingresses, [service("web")], [eps("web", ("10.0.0.1", True))],
                   [_secret("good", "g.example.com"), _secret("bad", "b.example.com", key_matches=False)])
    assert config.servers["g.example.com"].certificate == "ns/good"
    assert b"BEGIN CERTIFICATE" in config.certificates["ns/good"]
    assert config.servers["m.example.com"].tls and config.servers["m.example.com"].certificate is None
    assert [(p.ingress, p.reason) for p in config.problems] == [(("ns", "bad"), "InvalidSecret"),
                                                                (("ns", "missing"), "MissingSecret")]
    assert config.problems[1].message == ('Error getting SSL certificate "ns/nope": local SSL certificate ns/nope was '
                                          "not found. Using default certificate")
    text = render(config, Settings("/run/x", 8880, 8443, fallback_certificate="/run/x/ssl/fake.pem"))
    assert "ssl_certificate /run/x/ssl/ns-good.pem;" in text
    assert "return 308 https://$host:8443$request_uri;" in text


def test_render_is_stable_and_wildcards_match_one_label() -> None:
    config = build([ingress("w", rule("*.example.com", ("/", "Prefix", "web")))], [service("web")],
                   [eps("web", ("10.0.0.1", True))], [])
    settings = Settings("/run/x", 8880, 8443, fallback_certificate="/f.pem")
    text = render(config, settings)
    assert "server_name ~^[^.]+\\.example\\.com$;" in text
    assert "server 10.0.0.1:8080 max_fails=0;" in text
    assert text == render(build([ingress("w", rule("*.example.com", ("/", "Prefix", "web")))], [service("web")],
                                [eps("web", ("10.0.0.1", True))], []), settings)


def test_flags() -> None:
    args = main.parse_args(["--master", "http://x"])
    assert (args.http_port, args.https_port, args.ingress_class, args.controller_class) == (
        8880, 8443, "nginx", "k8s.io/ingress-nginx")
    with pytest.raises(SystemExit):
        main.parse_args([])
    with pytest.raises(SystemExit):
        main.parse_args(["--master", "http://x", "--http-port", "8443"])
