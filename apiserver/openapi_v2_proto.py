"""A Swagger 2.0 document (as JSON data) → the gnostic OpenAPIv2 protobuf message `openapi.v2.Document`.

kubectl 1.27 and 1.28 read `/openapi/v2` only in this form
(`application/com.github.proto-openapi.spec.v2.v1.0+protobuf`) and parse it with gnostic's generated
Go types (github.com/google/gnostic, openapiv2/OpenAPIv2.proto). This is a small hand-written
protobuf wire encoder for the parts of that message our documents use, with the field numbers of the
.proto. Anything it does not know raises ValueError, so a schema feature it cannot carry is noticed
in the tests rather than silently dropped.

How gnostic maps Swagger JSON onto protobuf:
- maps (definitions, properties, paths, responses) are repeated `Named*` {name = 1, value = 2} pairs;
- vendor extensions (`x-...` keys) are `NamedAny` {name, value: Any{yaml = 2}} where the YAML text
  holds the value (JSON is valid YAML, which is what we write);
- `type` is TypeItem{value: [..]}, `items` is ItemsItem{schema: [..]}, `additionalProperties` is
  AdditionalPropertiesItem (oneof schema | boolean), `enum` and `default` are Any.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from typing import Any

CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

# Wire types.
_VARINT = 0
_FIXED64 = 1
_LEN = 2

Encoder = Callable[[Any], bytes]


# ----------------------------------------------------------------------------- wire primitives


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s travel as ten-byte two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _varint((number << 3) | wire_type)


def _len_field(number: int, payload: bytes) -> bytes:
    return _key(number, _LEN) + _varint(len(payload)) + payload


def _string(number: int, value: str) -> bytes:
    return _len_field(number, value.encode("utf-8")) if value else b""


def _bool(number: int, value: bool, *, always: bool = False) -> bytes:
    return _key(number, _VARINT) + _varint(int(value)) if value or always else b""


def _int64(number: int, value: int) -> bytes:
    return _key(number, _VARINT) + _varint(value) if value else b""


def _double(number: int, value: float) -> bytes:
    return _key(number, _FIXED64) + struct.pack("<d", float(value)) if value else b""


def yaml_text(value: Any) -> str:
    """The YAML gnostic keeps in Any.yaml: JSON, a subset of YAML that every parser reads alike."""
    return json.dumps(value, sort_keys=True) + "\n"


# ----------------------------------------------------------------------------- field kinds

# A field kind is either a scalar tag ("str", "bool", "int", "double", "any", "strs", "anys") or a
# message encoder (a function from the JSON value to the message payload); ("repeated", encoder)
# encodes each element of a JSON list as its own message.
FieldKind = str | Encoder | tuple[str, Encoder]
Table = Mapping[str, tuple[int, FieldKind]]


def _field(number: int, kind: FieldKind, value: Any, where: str) -> bytes:
    if kind == "str":
        _expect(isinstance(value, str), where, value)
        return _string(number, value)
    if kind == "bool":
        _expect(isinstance(value, bool), where, value)
        return _bool(number, value)
    if kind == "int":
        _expect(isinstance(value, int) and not isinstance(value, bool), where, value)
        return _int64(number, value)
    if kind == "double":
        _expect(isinstance(value, int | float) and not isinstance(value, bool), where, value)
        return _double(number, value)
    if kind == "any":
        return _len_field(number, _any(value))
    if kind == "strs":
        _expect(isinstance(value, list) and all(isinstance(v, str) for v in value), where, value)
        return b"".join(_len_field(number, v.encode("utf-8")) for v in value)
    if kind == "anys":
        _expect(isinstance(value, list), where, value)
        return b"".join(_len_field(number, _any(v)) for v in value)
    if isinstance(kind, tuple):
        _expect(isinstance(value, list), where, value)
        return b"".join(_len_field(number, kind[1](v)) for v in value)
    if callable(kind):
        return _len_field(number, kind(value))
    raise AssertionError(f"unknown field kind {kind!r}")


def _expect(ok: bool, where: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"openapi v2 protobuf: unexpected value at {where}: {value!r}")


def _message(name: str, table: Table, value: Any, ext: int | None = None) -> bytes:
    """Encode a JSON object as the message `name`, by `table`; `x-` keys go to field `ext`."""
    _expect(isinstance(value, Mapping), name, value)
    parts: list[tuple[int, bytes]] = []
    for key, item in value.items():
        if key.startswith("x-") and ext is not None:
            parts.append((ext, _len_field(ext, _named_any(key, item))))
            continue
        if key not in table:
            raise ValueError(f"openapi v2 protobuf: {name} has no field for {key!r}")
        number, kind = table[key]
        parts.append((number, _field(number, kind, item, f"{name}.{key}")))
    parts.sort(key=lambda part: part[0])  # stable: repeated fields keep their order
    return b"".join(data for _, data in parts)


def _any(value: Any) -> bytes:
    # message Any { google.protobuf.Any value = 1; string yaml = 2; }
    return _string(2, yaml_text(value))


def _named_any(name: str, value: Any) -> bytes:
    # message NamedAny { string name = 1; Any value = 2; }
    return _string(1, name) + _len_field(2, _any(value))


def _named(name: str, payload: bytes) -> bytes:
    # every Named* message: { string name = 1; T value = 2; }
    return _string(1, name) + _len_field(2, payload)


def _named_map(encode: Encoder) -> Encoder:
    """A JSON map → a message holding `repeated Named* additional_properties = 1`."""

    def encoder(value: Any) -> bytes:
        _expect(isinstance(value, Mapping), "map", value)
        return b"".join(_len_field(1, _named(key, encode(item))) for key, item in value.items())

    return encoder


# ----------------------------------------------------------------------------- Schema


def _type_item(value: Any) -> bytes:
    # message TypeItem { repeated string value = 1; }
    values = value if isinstance(value, list) else [value]
    return _field(1, "strs", values, "TypeItem")


def _items_item(value: Any) -> bytes:
    # message ItemsItem { repeated Schema schema = 1; }
    values = value if isinstance(value, list) else [value]
    return b"".join(_len_field(1, encode_schema(v)) for v in values)


def _additional_properties_item(value: Any) -> bytes:
    # message AdditionalPropertiesItem { oneof oneof { Schema schema = 1; bool boolean = 2; } }
    if isinstance(value, bool):
        return _bool(2, value, always=True)  # a oneof member has presence: false is sent too
    return _len_field(1, encode_schema(value))


def encode_schema(value: Any) -> bytes:
    return _message("Schema", _SCHEMA, value, ext=31)


_SCHEMA: Table = {
    "$ref": (1, "str"),
    "format": (2, "str"),
    "title": (3, "str"),
    "description": (4, "str"),
    "default": (5, "any"),
    "multipleOf": (6, "double"),
    "maximum": (7, "double"),
    "exclusiveMaximum": (8, "bool"),
    "minimum": (9, "double"),
    "exclusiveMinimum": (10, "bool"),
    "maxLength": (11, "int"),
    "minLength": (12, "int"),
    "pattern": (13, "str"),
    "maxItems": (14, "int"),
    "minItems": (15, "int"),
    "uniqueItems": (16, "bool"),
    "maxProperties": (17, "int"),
    "minProperties": (18, "int"),
    "required": (19, "strs"),
    "enum": (20, "anys"),
    "additionalProperties": (21, _additional_properties_item),
    "type": (22, _type_item),
    "items": (23, _items_item),
    "allOf": (24, ("repeated", encode_schema)),
    "properties": (25, _named_map(encode_schema)),  # Properties { repeated NamedSchema ... = 1; }
    "discriminator": (26, "str"),
    "readOnly": (27, "bool"),
    "example": (30, "any"),
}


# ----------------------------------------------------------------------------- parameters


def _primitives_items(value: Any) -> bytes:
    return _message("PrimitivesItems", _PRIMITIVES_ITEMS, value, ext=18)


_PRIMITIVES_ITEMS: Table = {
    "type": (1, "str"),
    "format": (2, "str"),
    "items": (3, _primitives_items),
    "collectionFormat": (4, "str"),
    "default": (5, "any"),
    "maximum": (6, "double"),
    "exclusiveMaximum": (7, "bool"),
    "minimum": (8, "double"),
    "exclusiveMinimum": (9, "bool"),
    "maxLength": (10, "int"),
    "minLength": (11, "int"),
    "pattern": (12, "str"),
    "maxItems": (13, "int"),
    "minItems": (14, "int"),
    "uniqueItems": (15, "bool"),
    "enum": (16, "anys"),
    "multipleOf": (17, "double"),
}

# QueryParameterSubSchema and FormDataParameterSubSchema: vendor extensions at 23.
_QUERY_PARAMETER: Table = {
    "required": (1, "bool"),
    "in": (2, "str"),
    "description": (3, "str"),
    "name": (4, "str"),
    "allowEmptyValue": (5, "bool"),
    "type": (6, "str"),
    "format": (7, "str"),
    "items": (8, _primitives_items),
    "collectionFormat": (9, "str"),
    "default": (10, "any"),
    "maximum": (11, "double"),
    "exclusiveMaximum": (12, "bool"),
    "minimum": (13, "double"),
    "exclusiveMinimum": (14, "bool"),
    "maxLength": (15, "int"),
    "minLength": (16, "int"),
    "pattern": (17, "str"),
    "maxItems": (18, "int"),
    "minItems": (19, "int"),
    "uniqueItems": (20, "bool"),
    "enum": (21, "anys"),
    "multipleOf": (22, "double"),
}

# PathParameterSubSchema and HeaderParameterSubSchema: no allowEmptyValue; vendor extensions at 22.
_PATH_PARAMETER: Table = {
    "required": (1, "bool"),
    "in": (2, "str"),
    "description": (3, "str"),
    "name": (4, "str"),
    "type": (5, "str"),
    "format": (6, "str"),
    "items": (7, _primitives_items),
    "collectionFormat": (8, "str"),
    "default": (9, "any"),
    "maximum": (10, "double"),
    "exclusiveMaximum": (11, "bool"),
    "minimum": (12, "double"),
    "exclusiveMinimum": (13, "bool"),
    "maxLength": (14, "int"),
    "minLength": (15, "int"),
    "pattern": (16, "str"),
    "maxItems": (17, "int"),
    "minItems": (18, "int"),
    "uniqueItems": (19, "bool"),
    "enum": (20, "anys"),
    "multipleOf": (21, "double"),
}

_BODY_PARAMETER: Table = {
    "description": (1, "str"),
    "name": (2, "str"),
    "in": (3, "str"),
    "required": (4, "bool"),
    "schema": (5, encode_schema),
}

# NonBodyParameter oneof: header = 1, formData = 2, query = 3, path = 4.
_NON_BODY: dict[str, tuple[int, str, Table, int]] = {
    "header": (1, "HeaderParameterSubSchema", _PATH_PARAMETER, 22),
    "formData": (2, "FormDataParameterSubSchema", _QUERY_PARAMETER, 23),
    "query": (3, "QueryParameterSubSchema", _QUERY_PARAMETER, 23),
    "path": (4, "PathParameterSubSchema", _PATH_PARAMETER, 22),
}


_JSON_REFERENCE: Table = {"$ref": (1, "str"), "description": (2, "str")}


def _parameter(value: Any) -> bytes:
    # message Parameter { oneof oneof { BodyParameter body_parameter = 1;
    #                                   NonBodyParameter non_body_parameter = 2; } }
    _expect(isinstance(value, Mapping), "Parameter", value)
    where = value.get("in")
    if where == "body":
        return _len_field(1, _message("BodyParameter", _BODY_PARAMETER, value, ext=6))
    if where not in _NON_BODY:
        raise ValueError(f"openapi v2 protobuf: parameter with in={where!r}")
    number, name, table, ext = _NON_BODY[where]
    return _len_field(2, _len_field(number, _message(name, table, value, ext=ext)))


def _parameters_item(value: Any) -> bytes:
    # message ParametersItem { oneof oneof { Parameter parameter = 1; JsonReference json_reference = 2; } }
    if isinstance(value, Mapping) and "$ref" in value:
        return _len_field(2, _message("JsonReference", _JSON_REFERENCE, value))
    return _len_field(1, _parameter(value))


# ----------------------------------------------------------------------------- responses, operations


def _schema_item(value: Any) -> bytes:
    # message SchemaItem { oneof oneof { Schema schema = 1; FileSchema file_schema = 2; } }
    return _len_field(1, encode_schema(value))


_RESPONSE: Table = {"description": (1, "str"), "schema": (2, _schema_item)}


def _responses(value: Any) -> bytes:
    # message Responses { repeated NamedResponseValue response_code = 1;
    #                     repeated NamedAny vendor_extension = 2; }
    _expect(isinstance(value, Mapping), "Responses", value)
    out = b""
    for code, response in value.items():
        if code.startswith("x-"):
            out += _len_field(2, _named_any(code, response))
            continue
        if "$ref" in response:  # ResponseValue.json_reference = 2
            item = _len_field(2, _message("JsonReference", _JSON_REFERENCE, response))
        else:  # ResponseValue.response = 1
            item = _len_field(1, _message("Response", _RESPONSE, response, ext=5))
        out += _len_field(1, _named(code, item))
    return out


def _external_docs(value: Any) -> bytes:
    return _message("ExternalDocs", {"description": (1, "str"), "url": (2, "str")}, value, ext=3)


def _operation(value: Any) -> bytes:
    return _message("Operation", _OPERATION, value, ext=13)


_OPERATION: Table = {
    "tags": (1, "strs"),
    "summary": (2, "str"),
    "description": (3, "str"),
    "externalDocs": (4, _external_docs),
    "operationId": (5, "str"),
    "produces": (6, "strs"),
    "consumes": (7, "strs"),
    "parameters": (8, ("repeated", _parameters_item)),
    "responses": (9, _responses),
    "schemes": (10, "strs"),
    "deprecated": (11, "bool"),
}

_PATH_ITEM: Table = {
    "$ref": (1, "str"),
    "get": (2, _operation),
    "put": (3, _operation),
    "post": (4, _operation),
    "delete": (5, _operation),
    "options": (6, _operation),
    "head": (7, _operation),
    "patch": (8, _operation),
    "parameters": (9, ("repeated", _parameters_item)),
}


def _paths(value: Any) -> bytes:
    # message Paths { repeated NamedAny vendor_extension = 1; repeated NamedPathItem path = 2; }
    _expect(isinstance(value, Mapping), "Paths", value)
    out = b""
    for path, item in value.items():
        if path.startswith("x-"):
            out += _len_field(1, _named_any(path, item))
        else:
            out += _len_field(2, _named(path, _message("PathItem", _PATH_ITEM, item, ext=10)))
    return out


def _info(value: Any) -> bytes:
    table: Table = {"title": (1, "str"), "version": (2, "str"), "description": (3, "str"),
                    "termsOfService": (4, "str")}
    return _message("Info", table, value, ext=7)


def _tag(value: Any) -> bytes:
    table: Table = {"name": (1, "str"), "description": (2, "str"), "externalDocs": (3, _external_docs)}
    return _message("Tag", table, value, ext=4)


_DOCUMENT: Table = {
    "swagger": (1, "str"),
    "info": (2, _info),
    "host": (3, "str"),
    "basePath": (4, "str"),
    "schemes": (5, "strs"),
    "consumes": (6, "strs"),
    "produces": (7, "strs"),
    "paths": (8, _paths),
    "definitions": (9, _named_map(encode_schema)),  # Definitions { repeated NamedSchema ... = 1; }
    "parameters": (10, _named_map(_parameter)),  # ParameterDefinitions { repeated NamedParameter = 1; }
    "responses": (11, _named_map(lambda r: _message("Response", _RESPONSE, r, ext=5))),
    "tags": (14, ("repeated", _tag)),
    "externalDocs": (15, _external_docs),
}


def encode_document(document: Mapping[str, Any]) -> bytes:
    """The Swagger 2.0 `document` as a serialized `openapi.v2.Document`."""
    return _message("Document", _DOCUMENT, document, ext=16)
