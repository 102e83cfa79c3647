"""What the apiserver process imports before it serves: not the libraries only some requests need. Each
costs its RSS for the life of every apiserver whether or not a request needs it: aiohttp ~9 MB (the client of
the kubelet, service and aggregated-API proxies), the CEL package ~12 MB (its __init__ imports its command
line: prompt_toolkit, rich, typer, pygments), PyJWT and cryptography ~15 MB (service-account keys and tokens,
the aescbc/aesgcm encryption providers), PyNaCl ~1.5 MB (the secretbox provider), croniter and dateutil ~4 MB
(CronJob schedules), h2 and hpack ~1.5 MB (HTTP/2 connections, chosen by ALPN on a TLS port)."""

from __future__ import annotations

import base64
import datetime as dt
import subprocess
import sys
from pathlib import Path

LAZY = ("aiohttp", "cel", "prompt_toolkit", "rich", "typer", "jwt", "cryptography", "nacl", "croniter", "dateutil",
        "h2", "hpack")


def test_starting_the_apiserver_imports_none_of_the_request_only_libraries() -> None:
    code = ("import sys, apiserver.__main__, apiserver.app\n"
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    loaded = set(out.stdout.split())
    assert "apiserver" in loaded
    assert not loaded & set(LAZY), sorted(loaded & set(LAZY))


def test_the_lazily_imported_cel_still_compiles_and_checks_rules() -> None:
    from apiserver.apiextensions.cel import check_rule

    assert check_rule({"rule": "self.replicas <= 10"}, "x-kubernetes-validations[0]") == []
    errs = check_rule({"rule": "self.replicas <="}, "x-kubernetes-validations[0]")
    assert errs and "compilation failed" in str(errs[0])


def test_the_lazily_imported_libraries_still_sign_verify_encrypt_and_schedule(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from apiserver.auth import serviceaccount
    from apiserver.storage.encryptionconfig import parse
    from machinery.cron import parse_standard

    key_file = tmp_path / "sa.key"
    key_file.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    token = serviceaccount.sign_token(serviceaccount.load_signing_key(key_file), "ns", "sa", now=1000.0)
    claims = serviceaccount.TokenVerifier(serviceaccount.load_public_keys(key_file)).verify(token, now=1001.0)
    assert (claims.namespace, claims.name) == ("ns", "sa")

    secret = base64.b64encode(b"k" * 32).decode()
    config = parse({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration", "resources": [
        {"resources": ["secrets"], "providers": [{"secretbox": {"keys": [{"name": "a", "secret": secret}]}},
                                                 {"aesgcm": {"keys": [{"name": "b", "secret": secret}]}},
                                                 {"aescbc": {"keys": [{"name": "c", "secret": secret}]}}]}]})
    secrets = config.transformer_for("", "secrets")
    assert secrets is not None
    stored = secrets.transform_to_storage(b"value", b"/registry/secrets/ns/s")
    assert stored.startswith(b"k8s:enc:secretbox:v1:a:")
    assert secrets.transform_from_storage(stored, b"/registry/secrets/ns/s") == (b"value", False)

    after = dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=dt.UTC)
    assert parse_standard("*/5 * * * *").next(after) == dt.datetime(2026, 1, 1, 0, 5, tzinfo=dt.UTC)
