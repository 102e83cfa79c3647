"""Secrets (upstream: pkg/registry/core/secret/strategy.go; ValidateSecret and ValidateSecretUpdate in
pkg/apis/core/validation/validation.go; SetDefaults_Secret; stringData's merge in
Convert_v1_Secret_To_core_Secret).

`stringData` is write-only: its values are merged into `data` (base64, stringData wins) before anything
else sees the object, and it is never stored or returned. The type defaults to Opaque and never
changes; each well-known type requires its keys.
"""

from __future__ import annotations

import base64
import json

from apiserver.registry.configmap import MAX_SIZE as MAX_SECRET_SIZE
from apiserver.registry.configmap import decode_data, too_long, validate_immutable_data, validate_keys
from apiserver.registry.strategy import Strategy
from apiserver.validation import FieldError, invalid, required, validate_immutable
from machinery.types import Obj

SECRET_TYPE_OPAQUE = "Opaque"
SECRET_TYPE_SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SECRET_TYPE_DOCKERCFG = "kubernetes.io/dockercfg"
SECRET_TYPE_DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
SECRET_TYPE_BASIC_AUTH = "kubernetes.io/basic-auth"
SECRET_TYPE_SSH_AUTH = "kubernetes.io/ssh-auth"
SECRET_TYPE_TLS = "kubernetes.io/tls"
SECRET_TYPE_BOOTSTRAP_TOKEN = "bootstrap.kubernetes.io/token"

SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"
DOCKER_CONFIG_KEY = ".dockercfg"
DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson"
BASIC_AUTH_USERNAME_KEY = "username"
BASIC_AUTH_PASSWORD_KEY = "password"
SSH_AUTH_PRIVATE_KEY = "ssh-privatekey"
TLS_CERT_KEY = "tls.crt"
TLS_PRIVATE_KEY_KEY = "tls.key"

REDACTED = "<secret contents redacted>"


def merge_string_data(obj: Obj) -> None:
    """stringData's values into data, base64-encoded; stringData itself goes."""
    string_data = obj.pop("stringData", None)
    if string_data:
        data = obj.setdefault("data", {}) or {}
        obj["data"] = data
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode()


def _go_json_error(raw: bytes) -> str | None:
    """Is raw a JSON object (what json.Unmarshal into a map accepts)? The error, in Go's words."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        return f"invalid character: {e}" if raw.strip() else "unexpected end of JSON input"
    if doc is not None and not isinstance(doc, dict):
        return f"json: cannot unmarshal {type(doc).__name__} into Go value of type map[string]interface {{}}"
    return None


class SecretStrategy(Strategy):
    """Secrets: stringData merged, type defaulted; no status."""

    def prepare_for_create(self, obj: Obj) -> None:
        merge_string_data(obj)
        decode_data("Secret", obj.get("data"))
        if not obj.get("type"):
            obj["type"] = SECRET_TYPE_OPAQUE

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_update(new, old)
        merge_string_data(new)
        decode_data("Secret", new.get("data"))
        if not new.get("type"):
            new["type"] = SECRET_TYPE_OPAQUE

    def validate(self, obj: Obj) -> list[FieldError]:
        errs = validate_keys(obj.get("data"), "data")
        data = decode_data("Secret", obj.get("data"))
        if sum(len(v) for v in data.values()) > MAX_SECRET_SIZE:
            errs.append(too_long("data"))
        secret_type = obj.get("type") or ""
        if secret_type == SECRET_TYPE_SERVICE_ACCOUNT_TOKEN:
            # only the account's name: its uid and the token itself may come later from a controller
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if not annotations.get(SERVICE_ACCOUNT_NAME_KEY):
                errs.append(required(f"metadata.annotations[{SERVICE_ACCOUNT_NAME_KEY}]"))
        elif secret_type in (SECRET_TYPE_DOCKERCFG, SECRET_TYPE_DOCKER_CONFIG_JSON):
            key = DOCKER_CONFIG_KEY if secret_type == SECRET_TYPE_DOCKERCFG else DOCKER_CONFIG_JSON_KEY
            if key not in data:
                errs.append(required(f"data[{key}]"))
            elif (problem := _go_json_error(data[key])) is not None:
                errs.append(invalid(f"data[{key}]", REDACTED, problem))
        elif secret_type == SECRET_TYPE_BASIC_AUTH:
            # either may be empty, but one of them must be there
            if BASIC_AUTH_USERNAME_KEY not in data and BASIC_AUTH_PASSWORD_KEY not in data:
                errs += [required(f"data[{BASIC_AUTH_USERNAME_KEY}]"), required(f"data[{BASIC_AUTH_PASSWORD_KEY}]")]
        elif secret_type == SECRET_TYPE_SSH_AUTH:
            if not data.get(SSH_AUTH_PRIVATE_KEY):
                errs.append(required(f"data[{SSH_AUTH_PRIVATE_KEY}]"))
        elif secret_type == SECRET_TYPE_TLS:
            errs += [required(f"data[{key}]") for key in (TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY) if key not in data]
        # Opaque, bootstrap tokens and any other type: no further rules (upstream validates bootstrap
        # tokens in their own controllers)
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_immutable(new.get("type"), old.get("type"), "type")
        # stringData is already in data here, as upstream's comment says
        return errs + validate_immutable_data(new, old, ("data",))

    def field_values(self, obj: Obj) -> dict[str, str]:
        values = super().field_values(obj)
        values["type"] = obj.get("type") or ""  # upstream's SecretSelectableFields
        return values
