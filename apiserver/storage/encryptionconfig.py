"""The apiserver's --encryption-provider-config (upstream:
staging/src/k8s.io/apiserver/pkg/server/options/encryptionconfig/config.go, the types of
apiserver.config.k8s.io/v1 EncryptionConfiguration, and their validation in
pkg/apis/apiserver/validation/validation.go).

    apiVersion: apiserver.config.k8s.io/v1
    kind: EncryptionConfiguration
    resources:
    - resources: [secrets]
      providers:
      - aescbc: {keys: [{name: key1, secret: <base64 of 32 bytes>}]}
      - identity: {}

Per resource, the first provider (its first key) encrypts every write; every provider and key reads
what carries its prefix (`k8s:enc:aescbc:v1:key1:`), so keys rotate by order. KMS is not served.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from apiserver.storage.value import IDENTITY, PrefixTransformer, PrefixTransformers, Transformer

API_VERSION = "apiserver.config.k8s.io/v1"
KIND = "EncryptionConfiguration"

AES_KEY_SIZES = (16, 24, 32)
SECRETBOX_KEY_SIZES = (32,)

# provider name -> the key sizes it takes
_CIPHERS: dict[str, tuple[int, ...]] = {"aescbc": AES_KEY_SIZES, "aesgcm": AES_KEY_SIZES,
                                        "secretbox": SECRETBOX_KEY_SIZES}
_PROVIDERS = ("kms", "aesgcm", "aescbc", "secretbox", "identity")


class EncryptionConfigError(ValueError):
    pass


@dataclass
class EncryptionConfig:
    """Transformers by resource ("secrets", "deployments.apps"), with "*.group" and "*.*" wildcards."""

    transformers: dict[str, Transformer] = field(default_factory=dict)

    def transformer_for(self, group: str, plural: str) -> Transformer | None:
        """The resource's transformer, or None (stored as plaintext)."""
        name = f"{plural}.{group}" if group else plural
        for candidate in (name, f"*.{group}", "*.*"):
            if candidate in self.transformers:
                return self.transformers[candidate]
        return None


def _go_ints(sizes: tuple[int, ...]) -> str:
    return "[" + " ".join(str(s) for s in sizes) + "]"


def _validate_key(key: Any, path: str, sizes: tuple[int, ...]) -> list[str]:
    if not isinstance(key, dict):
        return [f"{path}: Invalid value: a key must be an object with name and secret"]
    errs = []
    if not key.get("name"):
        errs.append(f"{path}.name: Required value: name is a mandatory field for a key")
    secret = key.get("secret")
    if not secret:
        return [*errs, f"{path}.secret: Required value: secret is a mandatory field for a key"]
    try:
        raw = base64.b64decode(str(secret), validate=True)
    except (binascii.Error, ValueError):
        return [*errs, f'{path}.secret: Invalid value: "REDACTED": secrets must be base64 encoded']
    if len(raw) not in sizes:
        errs.append(f'{path}.secret: Invalid value: "REDACTED": secret is not of the expected length, '
                    f"got {len(raw)}, expected one of {_go_ints(sizes)}")
    return errs


def validate(doc: Any) -> list[str]:
    """upstream ValidateEncryptionConfiguration, its messages and paths."""
    if not isinstance(doc, dict) or not doc.get("resources"):
        return ["resources: Required value: at least one resources is required"]
    errs: list[str] = []
    seen: set[str] = set()
    for i, conf in enumerate(doc["resources"]):
        r, p = f"resources[{i}].resources", f"resources[{i}].providers"
        conf = conf if isinstance(conf, dict) else {}
        resources = conf.get("resources") or []
        if not resources:
            errs.append(f"{r}: Required value: at least one {r} is required")
        for j, name in enumerate(resources):
            name = str(name)
            if name == "*":
                errs.append(f'{r}[{j}]: Invalid value: "*": use \'*.\' to encrypt all the resources from core API '
                            "group or *.* to encrypt all resources")
            elif name != name.lower():
                errs.append(f'{r}[{j}]: Invalid value: "{name}": resource name should not contain capital letters')
            elif name in seen:
                errs.append(f'{r}[{j}]: Invalid value: "{name}": the same resource cannot be specified multiple times')
            seen.add(name)
        providers = conf.get("providers") or []
        if not providers:
            errs.append(f"{p}: Required value: at least one {p} is required")
        for j, provider in enumerate(providers):
            path = f"{p}[{j}]"
            found = [k for k in _PROVIDERS if isinstance(provider, dict) and provider.get(k) is not None]
            if not found:
                errs.append(f'{path}: Invalid value: "Empty Config": provider does not contain any of the expected '
                            "providers: KMS, AESGCM, AESCBC, Secretbox, Identity")
                continue
            if len(found) > 1:
                errs.append(f'{path}: Invalid value: "More than one provider specified": more than one provider '
                            "specified in a single element, should split into different list elements")
                continue
            kind = found[0]
            if kind == "kms":
                errs.append(f"{path}.kms: Unsupported value: KMS providers are not served by this apiserver")
            elif kind in _CIPHERS:
                keys = (provider[kind] or {}).get("keys") or []
                keys_path = f"{path}.{kind}.keys"
                if not keys:
                    errs.append(f"{keys_path}: Required value: at least one keys is required")
                for k, key in enumerate(keys):
                    errs += _validate_key(key, f"{keys_path}[{k}]", _CIPHERS[kind])
    return errs


def _cipher(kind: str, key: bytes) -> Transformer:
    # The cipher libraries are imported when a configuration names them, not with every apiserver:
    # cryptography's bindings ~12 MB of RSS, PyNaCl's ~1.5 MB.
    if kind == "secretbox":
        from apiserver.storage.value.encrypt.secretbox import SecretboxTransformer

        return SecretboxTransformer(key)
    from apiserver.storage.value.encrypt.aes import CBCTransformer, GCMTransformer

    return CBCTransformer(key) if kind == "aescbc" else GCMTransformer(key)


def _provider_transformers(provider: dict[str, Any]) -> list[PrefixTransformer]:
    if provider.get("identity") is not None:
        return [PrefixTransformer(b"", IDENTITY)]
    kind = next(k for k in _CIPHERS if provider.get(k) is not None)
    return [PrefixTransformer(f"k8s:enc:{kind}:v1:{key['name']}:".encode(),
                              _cipher(kind, base64.b64decode(key["secret"])))
            for key in provider[kind]["keys"]]


def parse(doc: Any) -> EncryptionConfig:
    if not isinstance(doc, dict) or doc.get("kind") != KIND or doc.get("apiVersion") != API_VERSION:
        got = f"{doc.get('apiVersion')}, Kind={doc.get('kind')}" if isinstance(doc, dict) else type(doc).__name__
        raise EncryptionConfigError(f"got unexpected config type: {got} (want {API_VERSION}, Kind={KIND})")
    errs = validate(doc)
    if errs:
        raise EncryptionConfigError("error while validating the encryption configuration: [" + ", ".join(errs) + "]")
    config = EncryptionConfig()
    for conf in doc["resources"]:
        transformers = [t for provider in conf["providers"] for t in _provider_transformers(provider)]
        chain = PrefixTransformers(*transformers)
        for name in conf["resources"]:
            # "secrets" and "secrets." both mean the core group; "*." is all of it
            config.transformers[str(name).rstrip(".") if str(name) != "*." else "*."] = chain
    return config


def load(path: str) -> EncryptionConfig:
    """Read and validate the file; EncryptionConfigError says what is wrong (the apiserver exits on it)."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise EncryptionConfigError(f"error while parsing file: {e}") from e
    return parse(doc)


def default_config(key_name: str = "key1") -> str:
    """Secrets encrypted with aescbc under a fresh 32-byte key; identity last, so Secrets written before
    encryption was on still read (and are encrypted on their next write)."""
    secret = base64.b64encode(os.urandom(32)).decode()
    return (f"apiVersion: {API_VERSION}\nkind: {KIND}\nresources:\n  - resources:\n      - secrets\n"
            f"    providers:\n      - aescbc:\n          keys:\n            - name: {key_name}\n"
            f"              secret: {secret}\n      - identity: {{}}\n")


def ensure_config(path: Path) -> bool:
    """Write default_config() to path (0600) unless it is there: a cluster's key is made once and kept
    (a new key would leave every Secret unreadable). True if written."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(default_config())
    return True
