"""Encryption at rest (apiserver/storage/value/, apiserver/storage/encryptionconfig.py): the ciphers
round-trip with upstream's exact prefixes and layouts, key rotation by provider order, and upstream's
EncryptionConfiguration validation errors."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import nacl.secret
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from apiserver.storage.encryptionconfig import EncryptionConfigError, load, parse
from apiserver.storage.value import IDENTITY, TransformError
from apiserver.storage.value.encrypt.aes import CBCTransformer, GCMTransformer
from apiserver.storage.value.encrypt.secretbox import SecretboxTransformer

KEY = b"/registry/secrets/default/s"
PLAIN = b'{"kind":"Secret","data":{"password":"czNjcjN0"}}'


def key(n: int = 32) -> str:
    return base64.b64encode(os.urandom(n)).decode()


def config(*providers: dict[str, Any], resources: tuple[str, ...] = ("secrets",)) -> dict[str, Any]:
    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
            "resources": [{"resources": list(resources), "providers": list(providers)}]}


def aescbc(*keys: tuple[str, str]) -> dict[str, Any]:
    return {"aescbc": {"keys": [{"name": n, "secret": s} for n, s in keys]}}


class TestCiphers:
    def test_cbc_layout_matches_upstream(self) -> None:
        raw = os.urandom(32)
        stored = CBCTransformer(raw).transform_to_storage(PLAIN, KEY)
        iv, body = stored[:16], stored[16:]
        assert len(body) % 16 == 0 and len(body) > len(PLAIN)  # PKCS#7 always pads
        padded = Cipher(algorithms.AES(raw), modes.CBC(iv)).decryptor().update(body)
        assert padded[:len(PLAIN)] == PLAIN and set(padded[len(PLAIN):]) == {len(body) - len(PLAIN)}
        assert CBCTransformer(raw).transform_from_storage(stored, b"any key") == (PLAIN, False)

    def test_cbc_errors(self) -> None:
        t = CBCTransformer(os.urandom(16))
        with pytest.raises(TransformError, match="shorter than the required size"):
            t.transform_from_storage(b"short", KEY)
        with pytest.raises(TransformError, match="not a multiple of the block size"):
            t.transform_from_storage(os.urandom(40), KEY)
        # another key's data: CBC has no integrity check, so the padding test is what usually catches it
        other = CBCTransformer(os.urandom(16)).transform_to_storage(PLAIN, KEY)
        try:
            assert t.transform_from_storage(other, KEY)[0] != PLAIN
        except TransformError as e:
            assert str(e) in ("invalid PKCS7 data (empty or not padded)", "invalid padding on input")

    def test_gcm_binds_the_etcd_key(self) -> None:
        raw = os.urandom(24)
        stored = GCMTransformer(raw).transform_to_storage(PLAIN, KEY)
        assert AESGCM(raw).decrypt(stored[:12], stored[12:], KEY) == PLAIN
        assert GCMTransformer(raw).transform_from_storage(stored, KEY) == (PLAIN, False)
        with pytest.raises(TransformError, match="message authentication failed"):
            GCMTransformer(raw).transform_from_storage(stored, b"/registry/secrets/default/other")

    def test_secretbox_layout(self) -> None:
        raw = os.urandom(32)
        stored = SecretboxTransformer(raw).transform_to_storage(PLAIN, KEY)
        assert len(stored) == 24 + 16 + len(PLAIN)  # nonce, Poly1305 tag, ciphertext
        assert nacl.secret.SecretBox(raw).decrypt(stored[24:], stored[:24]) == PLAIN
        with pytest.raises(TransformError):
            SecretboxTransformer(os.urandom(32)).transform_from_storage(stored, KEY)

    def test_each_write_differs(self) -> None:
        for t in (CBCTransformer(os.urandom(32)), GCMTransformer(os.urandom(32)), SecretboxTransformer(os.urandom(32))):
            assert t.transform_to_storage(PLAIN, KEY) != t.transform_to_storage(PLAIN, KEY)


class TestConfig:
    @pytest.mark.parametrize(("provider", "prefix"), [
        ("aescbc", b"k8s:enc:aescbc:v1:key1:"),
        ("aesgcm", b"k8s:enc:aesgcm:v1:key1:"),
        ("secretbox", b"k8s:enc:secretbox:v1:key1:"),
    ])
    def test_prefixes(self, provider: str, prefix: bytes) -> None:
        t = parse(config({provider: {"keys": [{"name": "key1", "secret": key()}]}})).transformer_for("", "secrets")
        assert t is not None
        stored = t.transform_to_storage(PLAIN, KEY)
        assert stored.startswith(prefix) and PLAIN not in stored and b"czNjcjN0" not in stored
        assert t.transform_from_storage(stored, KEY) == (PLAIN, False)

    def test_rotation_by_order(self) -> None:
        k1, k2 = key(), key()
        before = parse(config(aescbc(("key1", k1)), {"identity": {}})).transformer_for("", "secrets")
        assert before is not None
        old = before.transform_to_storage(PLAIN, KEY)
        # step 1 of upstream's rotation: key2 added second (every apiserver can read it), then first
        after = parse(config(aescbc(("key2", k2), ("key1", k1)), {"identity": {}})).transformer_for("", "secrets")
        assert after is not None
        assert after.transform_from_storage(old, KEY) == (PLAIN, True)  # read with key1: stale
        new = after.transform_to_storage(PLAIN, KEY)
        assert new.startswith(b"k8s:enc:aescbc:v1:key2:")
        assert after.transform_from_storage(new, KEY) == (PLAIN, False)
        # plaintext written before encryption was on: identity (last) still reads it
        assert after.transform_from_storage(PLAIN, KEY) == (PLAIN, True)
        # a key dropped from the file: what it wrote can no longer be read
        only_k2 = parse(config(aescbc(("key2", k2)))).transformer_for("", "secrets")
        assert only_k2 is not None
        with pytest.raises(TransformError, match="no matching prefix found"):
            only_k2.transform_from_storage(old, KEY)
        with pytest.raises(TransformError, match="no matching prefix found"):
            only_k2.transform_from_storage(PLAIN, KEY)

    def test_identity_first_writes_plaintext_and_refuses_ciphertext_it_cannot_read(self) -> None:
        k1 = key()
        encrypted = parse(config(aescbc(("key1", k1)))).transformer_for("", "secrets")
        assert encrypted is not None
        stored = encrypted.transform_to_storage(PLAIN, KEY)
        decrypting = parse(config({"identity": {}}, aescbc(("key1", k1)))).transformer_for("", "secrets")
        assert decrypting is not None
        assert decrypting.transform_to_storage(PLAIN, KEY) == PLAIN
        assert decrypting.transform_from_storage(stored, KEY) == (PLAIN, True)
        identity_only = parse(config({"identity": {}})).transformer_for("", "secrets")
        assert identity_only is not None
        with pytest.raises(TransformError, match="identity transformer tried to read encrypted data"):
            identity_only.transform_from_storage(stored, KEY)

    def test_resources(self) -> None:
        c = parse(config(aescbc(("k", key())), resources=("secrets", "configmaps", "deployments.apps")))
        assert c.transformer_for("", "secrets") is c.transformer_for("", "configmaps") is not None
        assert c.transformer_for("apps", "deployments") is not None
        assert c.transformer_for("", "pods") is None and c.transformer_for("apps", "replicasets") is None
        core = parse(config(aescbc(("k", key())), resources=("*.",)))
        assert core.transformer_for("", "pods") is not None and core.transformer_for("apps", "deployments") is None
        everything = parse(config(aescbc(("k", key())), resources=("*.*",)))
        assert everything.transformer_for("rbac.authorization.k8s.io", "roles") is not None
        assert IDENTITY.transform_from_storage(PLAIN, KEY) == (PLAIN, False)

    @pytest.mark.parametrize(("doc", "message"), [
        (config(aescbc(("key1", key(20)))), 'resources[0].providers[0].aescbc.keys[0].secret: Invalid value: '
         '"REDACTED": secret is not of the expected length, got 20, expected one of [16 24 32]'),
        (config({"secretbox": {"keys": [{"name": "k", "secret": key(16)}]}}),
         "secret is not of the expected length, got 16, expected one of [32]"),
        (config(aescbc(("key1", "%%%"))), "secrets must be base64 encoded"),
        (config(aescbc(("", key())),), "resources[0].providers[0].aescbc.keys[0].name: Required value: "
         "name is a mandatory field for a key"),
        (config(aescbc(("key1", ""))), "keys[0].secret: Required value: secret is a mandatory field for a key"),
        (config({"aescbc": {"keys": []}}), "resources[0].providers[0].aescbc.keys: Required value: "
         "at least one keys is required"),
        (config({}), 'resources[0].providers[0]: Invalid value: "Empty Config": provider does not contain any of '
         "the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"),
        (config({"identity": {}, "aescbc": {"keys": [{"name": "k", "secret": key()}]}}),
         "more than one provider specified in a single element, should split into different list elements"),
        (config(), "resources[0].providers: Required value: at least one resources[0].providers is required"),
        (config({"identity": {}}, resources=()), "resources[0].resources: Required value: at least one "
         "resources[0].resources is required"),
        (config({"identity": {}}, resources=("Secrets",)), "resource name should not contain capital letters"),
        (config({"identity": {}}, resources=("*",)), "use '*.' to encrypt all the resources from core API group"),
        ({**config({"identity": {}}), "resources": []}, "resources: Required value: at least one resources is "
         "required"),
        ({**config({"identity": {}}), "kind": "Other"}, "got unexpected config type"),
    ])
    def test_validation(self, doc: dict[str, Any], message: str) -> None:
        with pytest.raises(EncryptionConfigError) as e:
            parse(doc)
        assert message in str(e.value)

    def test_load(self, tmp_path: Path) -> None:
        path = tmp_path / "encryption-config.yaml"
        path.write_text(f"""apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aesgcm:
          keys:
            - name: key1
              secret: {key(16)}
      - identity: {{}}
""")
        t = load(str(path)).transformer_for("", "secrets")
        assert t is not None and t.transform_to_storage(PLAIN, KEY).startswith(b"k8s:enc:aesgcm:v1:key1:")
        path.write_text("resources: [")
        with pytest.raises(EncryptionConfigError, match="error while parsing file"):
            load(str(path))
        with pytest.raises(EncryptionConfigError, match="error while parsing file"):
            load(str(tmp_path / "missing.yaml"))


def test_cluster_pki_writes_the_encryption_config_once(tmp_path: Path) -> None:
    """local-up and compose: the PKI step makes pki/encryption-config.yaml (0600) once and keeps it."""
    from apiserver.auth.pki import ensure_pki

    pki = ensure_pki(tmp_path)
    path = pki.encryption_config
    assert path == tmp_path.resolve() / "pki" / "encryption-config.yaml"
    assert path.stat().st_mode & 0o777 == 0o600
    first = path.read_text()
    t = load(str(path)).transformer_for("", "secrets")
    assert t is not None and t.transform_to_storage(PLAIN, KEY).startswith(b"k8s:enc:aescbc:v1:key1:")
    assert t.transform_from_storage(PLAIN, KEY) == (PLAIN, True)  # identity last: older plaintext reads
    ensure_pki(tmp_path)
    assert path.read_text() == first  # a new key would make every Secret unreadable
