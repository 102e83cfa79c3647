"""Structural schemas and the custom objects checked against them, as upstream's apiextensions-apiserver
does it: the structural rules on the CRD's own schema (pkg/apiserver/schema/validation.go
ValidateStructural), and on each custom object the OpenAPI v3 validation (pkg/apiserver/validation,
over kube-openapi's validate: the messages `spec.replicas in body must be of type integer: "string"`),
the list types (pkg/apiserver/schema/listtype), pruning of unknown fields (schema/pruning), defaulting
(schema/defaulting) and the `x-kubernetes-*` extensions.

Written here rather than on a JSON-schema library: the checks needed are upstream's (nullable,
int-or-string, preserve-unknown-fields, embedded resources, list types are not JSON Schema) and so are
the messages and field paths a client reads back; a library's own messages and its draft semantics
(e.g. `type: integer` accepting 1.0) would have to be translated back error by error.
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
import re
import uuid
from datetime import date, datetime
from typing import Any

from apiserver.validation import FieldError, duplicate, forbidden, go_value, invalid, not_supported, required

Schema = dict[str, Any]

PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"
EMBEDDED = "x-kubernetes-embedded-resource"
LIST_TYPE = "x-kubernetes-list-type"
LIST_MAP_KEYS = "x-kubernetes-list-map-keys"
MAP_TYPE = "x-kubernetes-map-type"
VALIDATIONS = "x-kubernetes-validations"

_TYPES = ("array", "boolean", "integer", "number", "object", "string")
# the JSONSchemaProps fields a v1 CRD schema may carry (apiextensions/v1 JSONSchemaProps)
_KNOWN_KEYS = frozenset({
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
    "multipleOf", "enum", "maxProperties", "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not",
    "properties", "additionalProperties", "patternProperties", "dependencies", "additionalItems", "definitions",
    "externalDocs", "example", "nullable", PRESERVE, EMBEDDED, INT_OR_STRING, LIST_MAP_KEYS, LIST_TYPE, MAP_TYPE,
    VALIDATIONS,
})


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _key(path: str, key: str) -> str:
    return f"{path}[{key}]"


# -- the CRD's schema: upstream's structural rules --------------------------------------------------

def validate_structural(schema: Any, path: str) -> list[FieldError]:
    """The rules on a version's openAPIV3Schema (at `path`): a structural schema (every specified field
    typed, root an object, metadata at most name/generateName), the extensions used consistently, and
    the keys v1 forbids. Upstream's messages and paths."""
    if not isinstance(schema, dict):
        return [invalid(path, schema, "must be an object")]
    errs = _structural(schema, path, "root")
    errs += _metadata_rules(schema, path)
    return errs


def _structural(s: Schema, path: str, level: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in s:
        if key not in _KNOWN_KEYS:
            errs.append(forbidden(_child(path, key), "unknown field"))
    if "$ref" in s:
        errs.append(forbidden(_child(path, "$ref"), "$ref is not supported"))
    if s.get("uniqueItems") is True:
        errs.append(forbidden(_child(path, "uniqueItems"),
                              "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
    if "additionalItems" in s:
        errs.append(forbidden(_child(path, "additionalItems"), "additionalItems cannot be set to false"))
    for k in ("patternProperties", "dependencies", "definitions"):
        if k in s:
            errs.append(forbidden(_child(path, k), f"{k} is not supported"))
    typ = s.get("type", "")
    if typ and typ not in _TYPES:
        errs.append(not_supported(_child(path, "type"), typ, list(_TYPES)))
    int_or_string = s.get(INT_OR_STRING) is True
    embedded = s.get(EMBEDDED) is True
    if not typ and not int_or_string and not embedded and s.get(PRESERVE) is not True:
        detail = {"root": "must not be empty at the root", "item": "must not be empty for specified array items",
                  "field": "must not be empty for specified object fields"}[level]
        errs.append(required(_child(path, "type"), detail))
    elif level == "root" and typ and typ != "object":
        errs.append(invalid(_child(path, "type"), typ, "must be object at the root"))
    if int_or_string and typ:
        errs.append(invalid(_child(path, "type"), typ, "must be empty if x-kubernetes-int-or-string is true"))
    if embedded and typ and typ != "object":
        errs.append(invalid(_child(path, "type"), typ, "must be object if x-kubernetes-embedded-resource is true"))
    if embedded and not s.get("properties") and s.get(PRESERVE) is not True:
        errs.append(required(_child(path, PRESERVE),
                             "must be true if x-kubernetes-embedded-resource is true and properties is empty"))
    if s.get(PRESERVE) is False:
        errs.append(invalid(_child(path, PRESERVE), False, "must be true or undefined"))
    if s.get(INT_OR_STRING) is False:
        errs.append(invalid(_child(path, INT_OR_STRING), False, "must be true or undefined"))
    if "properties" in s and "additionalProperties" in s and s["additionalProperties"] is not False:
        errs.append(forbidden(_child(path, "additionalProperties"),
                              "additionalProperties and properties are mutual exclusive"))
    if typ == "array" and "items" not in s:
        errs.append(required(_child(path, "items"), "must be specified"))
    if "items" in s and not isinstance(s["items"], dict):
        errs.append(forbidden(_child(path, "items"), "items must be a schema object and not an array"))
    if "pattern" in s:
        try:
            re.compile(_go_regex(s["pattern"]))
        except (re.error, TypeError) as e:
            errs.append(invalid(_child(path, "pattern"), s["pattern"], f"must be a valid regular expression, but "
                                f"isn't: {e}"))
    errs += _list_type_rules(s, path)
    errs += _default_rules(s, path)
    for name, prop in (s.get("properties") or {}).items():
        if isinstance(prop, dict):
            errs += _structural(prop, _key(_child(path, "properties"), name), "field")
    if isinstance(s.get("items"), dict):
        errs += _structural(s["items"], _child(path, "items"), "item")
    if isinstance(s.get("additionalProperties"), dict):
        errs += _structural(s["additionalProperties"], _child(path, "additionalProperties"), "field")
    for junctor in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(s.get(junctor) or []):
            if isinstance(sub, dict):
                errs += _junctor_rules(sub, f"{_child(path, junctor)}[{i}]")
    if isinstance(s.get("not"), dict):
        errs += _junctor_rules(s["not"], _child(path, "not"))
    errs += _cel_compile_rules(s, path)
    return errs


def _junctor_rules(s: Schema, path: str) -> list[FieldError]:
    """Inside allOf/anyOf/oneOf/not only value validations may appear (no types, defaults, descriptions)."""
    errs: list[FieldError] = []
    for key in ("type", "default", "description", "nullable", PRESERVE, EMBEDDED, INT_OR_STRING):
        if key in s and not (key == INT_OR_STRING and s.get(key)):
            errs.append(forbidden(_child(path, key), "must be empty to be structural"))
    return errs


def _metadata_rules(root: Schema, path: str) -> list[FieldError]:
    meta = (root.get("properties") or {}).get("metadata")
    if not isinstance(meta, dict):
        return []
    allowed = {"type"}
    extra = [k for k in meta if k not in allowed and k != "properties"]
    props = meta.get("properties") or {}
    extra_props = [k for k in props if k not in ("name", "generateName")]
    if meta.get("type") not in (None, "object") or extra or extra_props:
        return [forbidden(_key(_child(path, "properties"), "metadata"),
                          "must not specify anything other than name and generateName, but metadata is implicitly "
                          "specified")]
    errs = []
    for field_name in ("name", "generateName"):
        sub = props.get(field_name)
        if isinstance(sub, dict) and sub.get("type") not in (None, "string"):
            errs.append(invalid(_child(_key(_child(_key(_child(path, "properties"), "metadata"), "properties"),
                                            field_name), "type"), sub.get("type"), "must be string"))
    return errs


def _list_type_rules(s: Schema, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    list_type = s.get(LIST_TYPE)
    if list_type is None:
        if LIST_MAP_KEYS in s:
            errs.append(forbidden(_child(path, LIST_MAP_KEYS),
                                  "must be empty if x-kubernetes-list-type is not map"))
        return errs
    if s.get("type") != "array":
        errs.append(invalid(_child(path, "type"), s.get("type", ""), "must be array if x-kubernetes-list-type is "
                            "specified"))
        return errs
    if list_type not in ("atomic", "set", "map"):
        errs.append(not_supported(_child(path, LIST_TYPE), list_type, ["atomic", "set", "map"]))
        return errs
    items: Schema = s["items"] if isinstance(s.get("items"), dict) else {}
    if list_type == "map":
        keys = s.get(LIST_MAP_KEYS) or []
        if not keys:
            errs.append(required(_child(path, LIST_MAP_KEYS), "must not be empty if x-kubernetes-list-type is map"))
        if items.get("type") != "object":
            errs.append(invalid(_child(_child(path, "items"), "type"), items.get("type", ""),
                                "must be object if parent array's x-kubernetes-list-type is map"))
        for i, k in enumerate(keys):
            prop = (items.get("properties") or {}).get(k)
            if prop is None:
                errs.append(required(f"{_child(path, LIST_MAP_KEYS)}[{i}]",
                                     "entries must all be names of item properties"))
            elif prop.get("type") not in ("string", "integer", "boolean", "number") and not prop.get(INT_OR_STRING):
                errs.append(invalid(_child(_key(_child(_child(path, "items"), "properties"), k), "type"),
                                    prop.get("type", ""), "must be a scalar type if parent array's "
                                    "x-kubernetes-list-type is map"))
            elif "default" not in prop and k not in (items.get("required") or []):
                errs.append(required(_child(_child(path, "items"), "required"),
                                     "all map keys must be required or have a default value"))
    elif LIST_MAP_KEYS in s:
        errs.append(forbidden(_child(path, LIST_MAP_KEYS), "must be empty if x-kubernetes-list-type is not map"))
    if list_type == "set" and items.get("type") in ("object", "array"):
        errs.append(invalid(_child(_child(path, "items"), "type"), items.get("type"),
                            "must be a scalar type if parent array's x-kubernetes-list-type is set"))
    return errs


def _default_rules(s: Schema, path: str) -> list[FieldError]:
    """A default must itself validate against (and survive the pruning of) its schema."""
    if "default" not in s:
        return []
    value = s["default"]
    if value is None and not s.get("nullable"):
        return [forbidden(_child(path, "default"), "must not be null for non-nullable schema")]
    pruned = copy.deepcopy(value)
    prune(pruned, s, root=False)
    if pruned != value:
        return [invalid(_child(path, "default"), value, "must not have unknown fields")]
    errs = validate_value(value, s, _child(path, "default"))
    return [invalid(_child(path, "default"), value, e.full()) for e in errs[:1]]


def _cel_compile_rules(s: Schema, path: str) -> list[FieldError]:
    rules = s.get(VALIDATIONS)
    if rules is None:
        return []
    from apiserver.apiextensions import cel  # the CEL library loads only when a schema uses it

    errs: list[FieldError] = []
    if not isinstance(rules, list):
        return [invalid(_child(path, VALIDATIONS), rules, "must be a list")]
    for i, rule in enumerate(rules):
        errs += cel.check_rule(rule, f"{_child(path, VALIDATIONS)}[{i}]")
    return errs


# -- custom objects: validation -------------------------------------------------------------------

def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_matches(value: Any, typ: str) -> bool:
    actual = _type_of(value)
    return actual == typ or (typ == "number" and actual == "integer")


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


_FORMAT_RES = {
    "uuid": re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"),
    "hostname": re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"),
    "email": re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$"),
    "mac": re.compile(r"^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$"),
    "duration": re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$"),
}


def _format_ok(fmt: str, value: str) -> bool:
    """The formats upstream's strfmt registry knows (others are not checked, as upstream)."""
    try:
        if fmt == "date-time":
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif fmt == "date":
            date.fromisoformat(value)
        elif fmt == "ipv4":
            ipaddress.IPv4Address(value)
        elif fmt == "ipv6":
            ipaddress.IPv6Address(value)
        elif fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
        elif fmt == "byte":
            base64.b64decode(value, validate=True)
        elif fmt == "uuid":
            uuid.UUID(value)
            return bool(_FORMAT_RES["uuid"].match(value))
        elif fmt in _FORMAT_RES:
            return bool(_FORMAT_RES[fmt].match(value))
    except (ValueError, binascii.Error):
        return False
    return True


def _go_regex(pattern: str) -> str:
    """RE2 (Go) syntax Python's `re` reads differently: \\z is \\Z."""
    return pattern.replace(r"\z", r"\Z")


def validate_value(value: Any, s: Schema, path: str) -> list[FieldError]:
    """Errors of `value` (at field path `path`) against schema s, with kube-openapi's messages."""
    errs: list[FieldError] = []
    _validate(value, s, path, errs)
    return errs


def _validate(value: Any, s: Schema, path: str, errs: list[FieldError]) -> None:
    where = path or "<root>"
    if value is None:
        if s.get("nullable") or (s.get(PRESERVE) and not s.get("type")):
            return
        if s.get("type") or s.get(INT_OR_STRING):
            typ = s.get("type") or "string"
            errs.append(FieldError("FieldValueTypeInvalid", path, f'{where} in body must be of type {typ}: "null"',
                                   "null", True))
        return
    typ = s.get("type")
    if s.get(INT_OR_STRING):
        if _type_of(value) not in ("integer", "string"):
            errs.append(FieldError("FieldValueTypeInvalid", path,
                                   f'{where} in body must be of type integer,string: "{_type_of(value)}"',
                                   value, True))
            return
    elif typ and not _type_matches(value, typ):
        errs.append(FieldError("FieldValueTypeInvalid", path,
                               f'{where} in body must be of type {typ}: "{_type_of(value)}"', value, True))
        return
    if "enum" in s and value not in s["enum"]:
        errs.append(not_supported(path, value, [v if isinstance(v, str) else go_value(v) for v in s["enum"]]))
    if isinstance(value, int | float) and not isinstance(value, bool):
        _numbers(value, s, path, where, errs)
    if isinstance(value, str):
        _strings(value, s, path, where, errs)
    if isinstance(value, list):
        _arrays(value, s, path, where, errs)
    if isinstance(value, dict):
        _objects(value, s, path, where, errs)
    for junctor in ("allOf", "anyOf", "oneOf"):
        subs = [x for x in (s.get(junctor) or []) if isinstance(x, dict)]
        if not subs:
            continue
        results = [validate_value(value, {**sub, "type": sub.get("type") or typ}, path) for sub in subs]
        if junctor == "allOf":
            for r in results:
                errs.extend(r)
        elif junctor == "anyOf" and all(results):
            errs.extend(results[0])
            errs.append(invalid(path, value, f'{where} in body must validate at least one schema (anyOf)'))
        elif junctor == "oneOf" and sum(not r for r in results) != 1:
            errs.append(invalid(path, value, f"{where} in body must validate one and only one schema (oneOf)"))
    if isinstance(s.get("not"), dict) and not validate_value(value, s["not"], path):
        errs.append(invalid(path, value, f"{where} in body must not validate the schema (not)"))


def _numbers(value: float, s: Schema, path: str, where: str, errs: list[FieldError]) -> None:
    if s.get("format") == "int32" and isinstance(value, int) and not -2**31 <= value < 2**31:
        errs.append(invalid(path, value, f"{where} in body must be of type int32: \"{value}\""))
    if "minimum" in s:
        lo = s["minimum"]
        if s.get("exclusiveMinimum") and value <= lo:
            errs.append(invalid(path, value, f"{where} in body should be greater than {_num(lo)}"))
        elif value < lo:
            errs.append(invalid(path, value, f"{where} in body should be greater than or equal to {_num(lo)}"))
    if "maximum" in s:
        hi = s["maximum"]
        if s.get("exclusiveMaximum") and value >= hi:
            errs.append(invalid(path, value, f"{where} in body should be less than {_num(hi)}"))
        elif value > hi:
            errs.append(invalid(path, value, f"{where} in body should be less than or equal to {_num(hi)}"))
    if s.get("multipleOf"):
        q = value / s["multipleOf"]
        if not float(q).is_integer():
            errs.append(invalid(path, value, f"{where} in body should be a multiple of {_num(s['multipleOf'])}"))


def _strings(value: str, s: Schema, path: str, where: str, errs: list[FieldError]) -> None:
    if "maxLength" in s and len(value) > s["maxLength"]:
        errs.append(FieldError("FieldValueTooLong", path, f"may not be longer than {s['maxLength']}", value, True))
    if "minLength" in s and len(value) < s["minLength"]:
        errs.append(invalid(path, value, f"{where} in body should be at least {s['minLength']} chars long"))
    if "pattern" in s and not re.search(_go_regex(s["pattern"]), value):
        errs.append(invalid(path, value, f"{where} in body should match '{s['pattern']}'"))
    fmt = s.get("format")
    if fmt and not _format_ok(fmt, value):
        errs.append(invalid(path, value, f'{where} in body must be of type {fmt}: "{value}"'))


def _arrays(value: list[Any], s: Schema, path: str, where: str, errs: list[FieldError]) -> None:
    if "maxItems" in s and len(value) > s["maxItems"]:
        errs.append(FieldError("FieldValueTooMany", path, f"must have at most {s['maxItems']} items",
                               len(value), True))
    if "minItems" in s and len(value) < s["minItems"]:
        errs.append(invalid(path, value, f"{where} in body should have at least {s['minItems']} items"))
    items = s.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", errs)
    list_type = s.get(LIST_TYPE)
    if list_type == "set":
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                errs.append(duplicate(f"{path}[{i}]", item))
            else:
                seen.append(item)
    elif list_type == "map":
        keys = s.get(LIST_MAP_KEYS) or []
        seen_keys: list[dict[str, Any]] = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            k = {name: item.get(name) for name in keys if name in item}
            if k in seen_keys:
                errs.append(duplicate(f"{path}[{i}]", k))
            else:
                seen_keys.append(k)


def _objects(value: dict[str, Any], s: Schema, path: str, where: str, errs: list[FieldError]) -> None:
    for name in s.get("required") or []:
        if name not in value:
            errs.append(required(_child(path, name)))
    if "maxProperties" in s and len(value) > s["maxProperties"]:
        errs.append(FieldError("FieldValueTooMany", path, f"must have at most {s['maxProperties']} items",
                               len(value), True))
    if "minProperties" in s and len(value) < s["minProperties"]:
        errs.append(invalid(path, value, f"{where} in body should have at least {s['minProperties']} properties"))
    props = s.get("properties") or {}
    extra = s.get("additionalProperties")
    for name, item in value.items():
        sub = props.get(name)
        if isinstance(sub, dict):
            _validate(item, sub, _child(path, name), errs)
        elif isinstance(extra, dict):
            _validate(item, extra, _key(path, name) if path else name, errs)
    if s.get(EMBEDDED):
        _embedded(value, path, errs)


def _embedded(value: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """An x-kubernetes-embedded-resource: apiVersion and kind set, metadata valid object metadata."""
    if not value.get("apiVersion"):
        errs.append(required(_child(path, "apiVersion"), "must not be empty"))
    if not value.get("kind"):
        errs.append(required(_child(path, "kind"), "must not be empty"))
    meta = value.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        errs.append(invalid(_child(path, "metadata"), meta, "must be an object"))


# -- pruning and defaulting ------------------------------------------------------------------------

def prune(value: Any, s: Schema, *, root: bool = True, unknown: list[str] | None = None, path: str = "") -> Any:
    """Drop (in place) the fields the schema does not specify, as upstream's pruning does; the paths
    dropped go into `unknown` (for fieldValidation). At the root (and in embedded resources)
    apiVersion, kind and metadata are kept."""
    _prune(value, s, root, unknown if unknown is not None else [], path)
    return value


def _prune(value: Any, s: Schema, root: bool, unknown: list[str], path: str) -> None:
    if isinstance(value, dict):
        if s.get(PRESERVE) and not s.get("properties") and not isinstance(s.get("additionalProperties"), dict):
            return
        props = s.get("properties") or {}
        extra = s.get("additionalProperties")
        keep_meta = root or s.get(EMBEDDED)
        for name in list(value):
            if keep_meta and name in ("apiVersion", "kind", "metadata"):
                if name == "metadata" and root and isinstance(value[name], dict):
                    continue
                continue
            sub = props.get(name)
            if isinstance(sub, dict):
                _prune(value[name], sub, False, unknown, _child(path, name))
            elif isinstance(extra, dict):
                _prune(value[name], extra, False, unknown, _child(path, name))
            elif extra is True or s.get(PRESERVE):
                continue
            else:
                unknown.append(_child(path, name))
                del value[name]
    elif isinstance(value, list):
        items = s.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _prune(item, items, False, unknown, f"{path}[{i}]")


def apply_defaults(value: Any, s: Schema) -> Any:
    """Fill (in place) what the schema defaults and the object leaves out (upstream schema/defaulting)."""
    if isinstance(value, dict):
        props = s.get("properties") or {}
        for name, sub in props.items():
            if not isinstance(sub, dict):
                continue
            if "default" in sub and (name not in value or (value[name] is None and not sub.get("nullable"))):
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                apply_defaults(value[name], sub)
        extra = s.get("additionalProperties")
        if isinstance(extra, dict):
            for name in value:
                if name not in props:
                    apply_defaults(value[name], extra)
    elif isinstance(value, list):
        items = s.get("items")
        if isinstance(items, dict):
            for item in value:
                apply_defaults(item, items)
    return value


def schema_at(s: Schema, *path: str) -> Schema | None:
    """The sub-schema at property path (e.g. "spec", "replicas"), if the schema specifies it."""
    node: Any = s
    for name in path:
        if not isinstance(node, dict):
            return None
        props = node.get("properties") or {}
        node = props.get(name) if name in props else (node.get("additionalProperties")
                                                       if isinstance(node.get("additionalProperties"), dict) else None)
    return node if isinstance(node, dict) else None
