"""PATCH bodies applied to stored objects, as the apiserver's PATCH verb does upstream: the HTTP side
(content types, decoding the body, 415); the patch algorithms are machinery/patch's.

Four content types, as in k8s.io/apiserver/pkg/endpoints/handlers/patch.go:
- application/merge-patch+json: JSON merge patch (RFC 7386).
- application/json-patch+json: JSON patch (RFC 6902), error messages as evanphx/json-patch's.
- application/strategic-merge-patch+json: Kubernetes strategic merge patch, following
  k8s.io/apimachinery/pkg/util/strategicpatch/patch.go (mergeMap and friends). The patch
  metadata upstream reads from Go struct tags (patchStrategy, patchMergeKey) is read here from
  the pydantic models' `json_schema_extra` (see machinery/api/base.py).
- application/apply-patch+yaml: server-side apply; `decode_apply` reads the applied configuration,
  and apiserver/fieldmanager.py merges it and keeps the fields' ownership (machinery/managedfields).

Objects are wire-form dicts (camelCase JSON). No function here mutates its inputs.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from pydantic import BaseModel

from apiserver.validation import check_body_values
from machinery.patch import PatchError, json_merge_patch, json_patch, strategic_merge_patch
from machinery.patch.errors import invalid
from machinery.types import Obj

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# In upstream's order, for the 415 message.
PATCH_TYPES: tuple[str, ...] = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_MERGE_PATCH)


class UnsupportedPatchType(PatchError):
    """The request's Content-Type is no patch type we know (HTTP 415)."""

    code = 415
    reason = "UnsupportedMediaType"




# --- Dispatch by content type ------------------------------------------------------------------


class YamlLoader(yaml.SafeLoader):
    """A safe loader that leaves timestamps as strings, as sigs.k8s.io/yaml does."""


YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _checked(value: Any) -> Any:
    """The limits every decoded body honours (apiserver.validation.check_body_values)."""
    try:
        check_body_values(value)
    except ValueError as exc:
        raise PatchError(f"the patch could not be decoded: {exc}") from None
    return value


def _load_json(body: bytes) -> Any:
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PatchError(str(exc)) from exc
    except RecursionError:
        raise PatchError("the patch could not be decoded: nesting too deep") from None
    return _checked(value)


def _load_yaml(body: bytes) -> Any:
    """YAML (or JSON, which YAML reads too) into JSON values; map keys become strings."""
    try:
        return _checked(_jsonable(json.loads(body, parse_constant=_no_constant)))
    except (ValueError, UnicodeDecodeError, RecursionError):
        pass
    try:
        value = yaml.load(body, Loader=YamlLoader)
    except yaml.YAMLError as exc:
        raise PatchError(f"error converting YAML to JSON: {exc}") from exc
    except RecursionError:
        raise PatchError("error converting YAML to JSON: nesting too deep") from None
    _checked(value)  # before _jsonable walks it: aliases may expand without end
    return _jsonable(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {yaml_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise PatchError(f"error converting YAML to JSON: unsupported value {value!r}")


def yaml_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key)
    raise PatchError(f"error converting YAML to JSON: unsupported map key {key!r}")


def decode_apply(body: bytes) -> Obj:
    """The applied configuration of an apply patch (YAML or JSON): an object, or PatchError."""
    config = _load_yaml(body)
    if not isinstance(config, dict):
        raise PatchError(f"error decoding YAML: the apply patch must be an object, not {type(config).__name__}")
    return config


def apply_patch(original: Obj | None, patch_type: str, body: bytes, model: type[BaseModel] | None) -> Obj:
    """Apply a PATCH request body of Content-Type `patch_type` to the stored object.

    `original` is None only for server-side apply creating the object; for the other types
    the caller answers 404 first (None is then read as an empty object).
    """
    media_type = patch_type.split(";", 1)[0].strip().lower()
    if media_type not in PATCH_TYPES:
        raise UnsupportedPatchType(
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(PATCH_TYPES)
        )
    base: Obj = {} if original is None else original
    if media_type == JSON_PATCH:
        patched = json_patch(base, _load_json(body))
        if not isinstance(patched, dict):
            raise invalid("the patched document is not a JSON object")
        return patched
    patch = _load_yaml(body) if media_type == APPLY_PATCH else _load_json(body)
    if not isinstance(patch, dict):
        raise PatchError(f"the {media_type} patch must be a JSON object, not {type(patch).__name__}")
    if media_type == MERGE_PATCH:
        return json_merge_patch(base, patch)
    # Strategic merge patch, and the simplified server-side apply: the applied configuration
    # merged onto the live object (onto nothing when creating).
    return strategic_merge_patch(base, patch, model)
