"""ConfigMaps (upstream: pkg/registry/core/configmap/strategy.go; ValidateConfigMap and
ValidateConfigMapUpdate in pkg/apis/core/validation/validation.go).

Keys are IsConfigMapKey names, a key is in data or binaryData but not both, the values together hold
at most 1 MiB, and an `immutable: true` ConfigMap keeps its data, binaryData and immutable for good.
binaryData is []byte on the wire: a strict base64 string, refused at decoding (400) when it is not.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

from apiserver import errors
from apiserver.registry.strategy import Strategy
from apiserver.validation import FieldError, forbidden, invalid, semantic_equal
from machinery.types import Obj
from machinery.validation import byte_len, is_config_map_key

MAX_SIZE = 1024 * 1024  # core.MaxSecretSize: ConfigMaps and Secrets alike (etcd's value limit)
IMMUTABLE_WHEN_SET = "field is immutable when `immutable` is set"
_BASE64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def decode_base64(value: str) -> bytes:
    """[]byte as Go's encoding/json reads it (base64.StdEncoding: padded, '\\r' and '\\n' skipped);
    ValueError with Go's message when it is not."""
    raw = value.encode().replace(b"\r", b"").replace(b"\n", b"")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        pass
    body = raw.rstrip(b"=")
    bad = next((i for i, c in enumerate(body) if c not in _BASE64), len(body) - len(body) % 4)
    raise ValueError(f"illegal base64 data at input byte {bad}")


def decode_data(kind: str, values: dict[str, str] | None) -> dict[str, bytes]:
    """The decoded values of a []byte map; a bad one is upstream's decoding error (400 BadRequest)."""
    out = {}
    for key, value in (values or {}).items():
        try:
            out[key] = decode_base64(value)
        except ValueError as e:
            raise errors.bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: {e}') from None
    return out


def too_long(field: str) -> FieldError:
    return FieldError("FieldValueTooLong", field, f"must have at most {MAX_SIZE} bytes")


def validate_keys(keys: Mapping[str, object] | None, field: str) -> list[FieldError]:
    return [invalid(f"{field}[{key}]", key, msg) for key in (keys or {}) for msg in is_config_map_key(key)]


def validate_immutable_data(new: Obj, old: Obj, fields: tuple[str, ...]) -> list[FieldError]:
    """Once `immutable` is true, it and the data fields stay as they are."""
    if not old.get("immutable"):
        return []
    errs = []
    if not new.get("immutable"):
        errs.append(forbidden("immutable", IMMUTABLE_WHEN_SET))
    errs += [forbidden(f, IMMUTABLE_WHEN_SET) for f in fields if not semantic_equal(new.get(f), old.get(f))]
    return errs


class ConfigMapStrategy(Strategy):
    """ConfigMaps: no status, no defaults."""

    def prepare_for_create(self, obj: Obj) -> None:
        decode_data("ConfigMap", obj.get("binaryData"))

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_update(new, old)
        decode_data("ConfigMap", new.get("binaryData"))

    def validate(self, obj: Obj) -> list[FieldError]:
        data: dict[str, str] = obj.get("data") or {}
        binary = obj.get("binaryData") or {}
        errs = validate_keys(data, "data")
        errs += [invalid(f"data[{key}]", key, "duplicate of key present in binaryData")
                 for key in data if key in binary]
        errs += validate_keys(binary, "binaryData")
        size = sum(byte_len(v) for v in data.values())
        size += sum(len(v) for v in decode_data("ConfigMap", binary).values())
        if size > MAX_SIZE:
            errs.append(too_long(""))  # "" : the whole object
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_immutable_data(new, old, ("data", "binaryData"))
