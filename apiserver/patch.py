"""PATCH bodies applied to stored objects, as the apiserver's PATCH verb does upstream.

Four content types, as in k8s.io/apiserver/pkg/endpoints/handlers/patch.go:
- application/merge-patch+json: JSON merge patch (RFC 7386).
- application/json-patch+json: JSON patch (RFC 6902), error messages as evanphx/json-patch's.
- application/strategic-merge-patch+json: Kubernetes strategic merge patch, following
  k8s.io/apimachinery/pkg/util/strategicpatch/patch.go (mergeMap and friends). The patch
  metadata upstream reads from Go struct tags (patchStrategy, patchMergeKey) is read here from
  the pydantic models' `json_schema_extra` (see machinery/api/base.py).
- application/apply-patch+yaml: a simplified server-side apply (the applied configuration is
  strategic-merged onto the live object; no field ownership).

Objects are wire-form dicts (camelCase JSON). No function here mutates its inputs.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel

from apiserver.validation import check_body_values
from machinery.types import Obj

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# In upstream's order, for the 415 message.
PATCH_TYPES: tuple[str, ...] = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_MERGE_PATCH)

# Upstream's apiserver refuses bigger JSON patches (maxJSONPatchOperations).
MAX_JSON_PATCH_OPERATIONS = 10000


class PatchError(ValueError):
    """A patch that cannot be applied; `code`/`reason` say which Status the apiserver returns."""

    code: int = 400
    reason: str = "BadRequest"

    def __init__(self, message: str, *, code: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        if reason is not None:
            self.reason = reason


class UnsupportedPatchType(PatchError):
    """The request's Content-Type is no patch type we know (HTTP 415)."""

    code = 415
    reason = "UnsupportedMediaType"


def _invalid(message: str) -> PatchError:
    """An error upstream reports as 422 (json-patch application failures, lists of lists)."""
    return PatchError(message, code=422, reason="Invalid")


# --- JSON merge patch (RFC 7386) ---------------------------------------------------------------


def json_merge_patch(original: Obj, patch: Obj) -> Obj:
    """RFC 7386: null deletes, objects merge recursively, anything else replaces."""
    if not isinstance(original, dict) or not isinstance(patch, dict):
        raise PatchError("a JSON merge patch and the object it applies to must be JSON objects")
    return _merge_patch_into(copy.deepcopy(original), patch)


def _merge_patch_into(target: Obj, patch: Obj) -> Obj:
    """Merge `patch` into `target` in place (target is already our own copy)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            target[key] = _merge_patch_into(current if isinstance(current, dict) else {}, value)
        else:
            target[key] = copy.deepcopy(value)
    return target


# --- JSON patch (RFC 6902) ---------------------------------------------------------------------


_MISSING: Any = object()
_INDEX = re.compile(r"-?[0-9]+")


def json_patch(original: Any, operations: list[Any]) -> Any:
    """RFC 6902: apply the operations in order to a copy of `original`; any failure fails all."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a JSON array of operations")
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise _invalid(
            f"The allowed count of operations in the request is {MAX_JSON_PATCH_OPERATIONS}, "
            f"but the request has {len(operations)}"
        )
    doc = copy.deepcopy(original)
    for operation in operations:
        if not isinstance(operation, dict):
            raise _invalid(f"a JSON patch operation must be a JSON object, not {operation!r}")
        kind = operation.get("op")
        handler = _OPERATIONS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            raise _invalid(f"Unexpected kind: {kind if isinstance(kind, str) else 'unknown'}")
        doc = handler(doc, operation)
    return doc


def _pointer(operation: Obj, field: str) -> tuple[str, list[str]]:
    """The JSON pointer in `field` of an operation, and its unescaped tokens (~1 is /, ~0 is ~)."""
    op = operation["op"]
    if field not in operation:
        raise _invalid(
            "operation missing path field" if field == "path" else f"{op} operation, missing from field"
        )
    pointer = operation[field]
    if not isinstance(pointer, str):
        raise _invalid(f"{op} operation failed to decode {field}")
    if pointer == "":
        return pointer, []
    if not pointer.startswith("/"):
        raise _invalid(f'{op} operation does not apply: JSON pointer "{pointer}" does not start with "/"')
    return pointer, [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _value(operation: Obj) -> Any:
    """The operation's value, copied so the result never shares it with the request."""
    if "value" not in operation:
        raise _invalid(f"{operation['op']} operation, missing value field")
    return copy.deepcopy(operation["value"])


def _list_index(token: str, length: int, *, adding: bool) -> int | None:
    """A list index as evanphx/json-patch reads it (negative counts from the end), or None."""
    if adding and token == "-":
        return length
    if not _INDEX.fullmatch(token):
        return None
    index = int(token)
    limit = length + 1 if adding else length
    if index < 0:
        index += limit
    return index if 0 <= index < limit else None


def _parent(doc: Any, tokens: list[str]) -> Any:
    """The container holding the pointer's last token, or _MISSING."""
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            node = node.get(token, _MISSING)
        elif isinstance(node, list):
            index = _list_index(token, len(node), adding=False)
            node = _MISSING if index is None else node[index]
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node if isinstance(node, dict | list) else _MISSING


def _get(container: dict[str, Any] | list[Any], token: str) -> Any:
    """The member named by `token`, or _MISSING."""
    if isinstance(container, dict):
        return container.get(token, _MISSING)
    index = _list_index(token, len(container), adding=False)
    return _MISSING if index is None else container[index]


def _add_at(doc: Any, tokens: list[str], value: Any, op: str, path: str) -> Any:
    """Add (or, for an object member, set) `value` at the pointer; returns the new document."""
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    if parent is _MISSING:
        raise _invalid(f'{op} operation does not apply: doc is missing path: "{path}"')
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
        return doc
    index = _list_index(tokens[-1], len(parent), adding=True)
    if index is None:
        raise _invalid(f"error in {op} for path: '{path}': Unable to access invalid index: {tokens[-1]}")
    parent.insert(index, value)
    return doc


def _remove_at(doc: Any, tokens: list[str], op: str, path: str, what: str = "path") -> Any:
    """Remove and return the value at the pointer."""
    parent = _parent(doc, tokens) if tokens else _MISSING
    if parent is _MISSING:
        raise _invalid(f'{op} operation does not apply: doc is missing {what}: "{path}"')
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise _invalid(f"{op} operation does not apply: doc is missing key: {path}")
        return parent.pop(tokens[-1])
    index = _list_index(tokens[-1], len(parent), adding=False)
    if index is None:
        raise _invalid(f"error in {op} for path: '{path}': Unable to access invalid index: {tokens[-1]}")
    return parent.pop(index)


def _op_add(doc: Any, operation: Obj) -> Any:
    path, tokens = _pointer(operation, "path")
    return _add_at(doc, tokens, _value(operation), "add", path)


def _op_remove(doc: Any, operation: Obj) -> Any:
    path, tokens = _pointer(operation, "path")
    _remove_at(doc, tokens, "remove", path)
    return doc


def _op_replace(doc: Any, operation: Obj) -> Any:
    path, tokens = _pointer(operation, "path")
    value = _value(operation)
    if not tokens:
        if not isinstance(value, dict | list):
            raise _invalid("replace operation value must be object or array")
        return value
    parent = _parent(doc, tokens)
    if parent is _MISSING:
        raise _invalid(f"replace operation does not apply: doc is missing path: {path}")
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise _invalid(f"replace operation does not apply: doc is missing key: {path}")
        parent[tokens[-1]] = value
        return doc
    index = _list_index(tokens[-1], len(parent), adding=False)
    if index is None:
        raise _invalid(f"replace operation does not apply: doc is missing key: {path}")
    parent[index] = value
    return doc


def _op_move(doc: Any, operation: Obj) -> Any:
    source, source_tokens = _pointer(operation, "from")
    path, tokens = _pointer(operation, "path")
    if _get_pointer(doc, source_tokens) is _MISSING:
        _missing_from("move", source)
    if source_tokens == tokens:
        return doc
    if tokens[: len(source_tokens)] == source_tokens:
        raise _invalid(f"move operation does not apply: path {path} is a child of from {source}")
    value = _remove_at(doc, source_tokens, "move", source, "from path")
    return _add_at(doc, tokens, value, "move", path)


def _op_copy(doc: Any, operation: Obj) -> Any:
    source, source_tokens = _pointer(operation, "from")
    path, tokens = _pointer(operation, "path")
    value = _get_pointer(doc, source_tokens)
    if value is _MISSING:
        _missing_from("copy", source)
    return _add_at(doc, tokens, copy.deepcopy(value), "copy", path)


def _op_test(doc: Any, operation: Obj) -> Any:
    path, tokens = _pointer(operation, "path")
    expected = _value(operation)
    if tokens:
        parent = _parent(doc, tokens)
        if parent is _MISSING:
            raise _invalid(f"test operation does not apply: is missing path: {path}")
        actual = _get(parent, tokens[-1])
        if actual is _MISSING:
            if isinstance(parent, list):
                raise _invalid(
                    f"error in test for path: '{path}': Unable to access invalid index: {tokens[-1]}"
                )
            actual = None  # as upstream: an absent member tests equal to null
    else:
        actual = doc
    if not _json_equal(actual, expected):
        raise _invalid(f"test operation failed: testing value {path} failed")
    return doc


def _get_pointer(doc: Any, tokens: list[str]) -> Any:
    """The value at the pointer, or _MISSING."""
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    return _MISSING if parent is _MISSING else _get(parent, tokens[-1])


def _missing_from(op: str, source: str) -> Any:
    raise _invalid(f"{op} operation does not apply: doc is missing from path: {source}")


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: numbers by value, but booleans are not numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


_OPERATIONS: dict[str, Callable[[Any, Obj], Any]] = {
    "add": _op_add,
    "remove": _op_remove,
    "replace": _op_replace,
    "move": _op_move,
    "copy": _op_copy,
    "test": _op_test,
}


# --- Patch metadata read from the pydantic models ----------------------------------------------


@dataclass(frozen=True, slots=True)
class _Type:
    """What the schema says a value is: a model, a map or list of something, a scalar, or unknown."""

    kind: Literal["any", "scalar", "model", "map", "list"]
    model: type[BaseModel] | None = None
    item: _Type | None = None  # map values / list items


@dataclass(frozen=True, slots=True)
class _Field:
    """A field's type and its strategic-merge-patch metadata."""

    type: _Type
    strategy: str = ""  # "merge" | "replace" | ""
    merge_key: str = ""
    retain_keys: bool = False


_ANY = _Type("any")
_SCALAR = _Type("scalar")
_UNKNOWN = _Field(_ANY)
_STRUCTURED = ("model", "map", "list")


def _describe(tp: Any) -> _Type:
    """Reduce a type annotation (Optional, unions, Annotated, containers) to a _Type."""
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _describe(get_args(tp)[0])
    if origin is Union or origin is types.UnionType:
        described = [_describe(arg) for arg in get_args(tp) if arg is not type(None)]
        structured = [d for d in described if d.kind in _STRUCTURED]
        if structured:
            return structured[0]
        return described[0] if len(described) == 1 else _SCALAR
    if origin is Literal:
        return _SCALAR
    if origin in (list, tuple, set, frozenset, Sequence):
        args = [a for a in get_args(tp) if a is not Ellipsis]
        return _Type("list", item=_describe(args[0]) if args else _ANY)
    if origin in (dict, Mapping):
        args = get_args(tp)
        return _Type("map", item=_describe(args[1]) if len(args) == 2 else _ANY)
    if isinstance(tp, type):
        if issubclass(tp, BaseModel):
            return _Type("model", model=tp)
        if issubclass(tp, str | int | float | bool | bytes):
            return _SCALAR
        if issubclass(tp, list | tuple):
            return _Type("list", item=_ANY)
        if issubclass(tp, dict):
            return _Type("map", item=_ANY)
    return _ANY


def _parse_strategy(value: Any) -> tuple[str, bool]:
    """`merge`, `replace`, `retainKeys` or `merge,retainKeys` → (strategy, retain_keys)."""
    if not isinstance(value, str):
        return "", False
    parts = [p.strip() for p in value.split(",") if p.strip()]
    others = [p for p in parts if p != "retainKeys"]
    return (others[0] if others else ""), "retainKeys" in parts


@functools.cache
def _model_fields(model: type[BaseModel]) -> Mapping[str, _Field]:
    """Wire name → metadata of every field of `model` (cached: read once per model class)."""
    fields: dict[str, _Field] = {}
    for name, info in model.model_fields.items():
        wire = info.serialization_alias or info.alias or name
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        strategy, retain_keys = _parse_strategy(extra.get("x-kubernetes-patch-strategy"))
        merge_key = extra.get("x-kubernetes-patch-merge-key")
        fields[wire] = _Field(
            _describe(info.annotation), strategy, merge_key if isinstance(merge_key, str) else "", retain_keys
        )
    return types.MappingProxyType(fields)


def _lookup(t: _Type, key: str) -> _Field:
    """The metadata of member `key` of a value of type `t` (unknown members: none)."""
    if t.kind == "model" and t.model is not None:
        return _model_fields(t.model).get(key, _UNKNOWN)
    if t.kind == "map":
        return _Field(t.item or _ANY)
    return _UNKNOWN


# --- Strategic merge patch ---------------------------------------------------------------------

_DIRECTIVE = "$patch"
_DELETE = "delete"
_REPLACE = "replace"
_MERGE = "merge"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
_SET_ELEMENT_ORDER = "$setElementOrder"

_BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
_BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
_BAD_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"


def strategic_merge_patch(original: Obj, patch: Obj, model: type[BaseModel] | None) -> Obj:
    """Kubernetes strategic merge patch of `original` by `patch`, guided by `model`'s metadata.

    With no model (or where the model says nothing, e.g. dict[str, Any]) it behaves as a JSON
    merge patch: maps merge, lists are replaced.
    """
    if not isinstance(original, dict) or not isinstance(patch, dict):
        raise PatchError("a strategic merge patch and the object it applies to must be JSON objects")
    t = _describe(model) if model is not None else _ANY
    # Work on copies, as upstream's mergeMap mutates both of its arguments.
    merged = _merge_map(copy.deepcopy(original), copy.deepcopy(patch), t)
    return {} if merged is None else merged


def _merge_map(original: Obj, patch: Obj, t: _Type) -> Obj | None:
    """Upstream mergeMap: merge `patch` into `original` (both ours to change); None = delete it."""
    if _DIRECTIVE in patch:
        directive = patch.pop(_DIRECTIVE)
        if directive == _REPLACE:
            return _merge_map({}, patch, t)
        if directive == _DELETE:
            return None
        raise PatchError(f"unknown patch type: {directive} in map: {patch}")

    _apply_retain_keys(original, patch)
    _apply_set_element_order(original, patch, t)

    deletions: list[tuple[str, Any]] = []
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            deletions.append(
                (_directive_target(key, _DELETE_FROM_PRIMITIVE_LIST, _BAD_PRIMITIVE_LIST), value)
            )
            continue
        if value is None:
            original.pop(key, None)
            continue
        field = _lookup(t, key)
        merged = _merge_value(original[key], value, field) if key in original else _fresh(value, field)
        if merged is None:
            original.pop(key, None)
        else:
            original[key] = merged
    # After the additions, so a patch that both adds to and deletes from a list (kubectl sends
    # disjoint sets) gives the same result whatever its key order.
    for key, values in deletions:
        _delete_from_primitive_list(original, key, values)
    return original


def _merge_value(current: Any, value: Any, field: _Field) -> Any:
    """Merge a patch value into the present value of a field (None = delete the field)."""
    if isinstance(current, dict) and isinstance(value, dict):
        if field.strategy == _REPLACE:
            return _fresh(value, field)
        return _merge_map(current, value, field.type)
    if isinstance(current, list) and isinstance(value, list):
        if field.strategy == _MERGE:
            return _merge_list(current, value, field)
        return value
    return _fresh(value, field)


def _fresh(value: Any, field: _Field) -> Any:
    """A patch value for a field the original lacks: merged into an empty value, so directives
    and nulls inside it are processed rather than stored (upstream stores it as it is)."""
    if isinstance(value, dict):
        return _merge_map({}, value, field.type)
    if isinstance(value, list) and field.strategy == _MERGE:
        return _merge_list([], value, field)
    return value


def _item_type(field: _Field) -> _Type:
    return (field.type.item or _ANY) if field.type.kind == "list" else _ANY


def _merge_list(original: list[Any], patch: list[Any], field: _Field) -> list[Any]:
    """Upstream mergeSlice: merge by key (maps) or union (scalars), then order the result."""
    if not original and not patch:
        return original
    kind = _element_kind(original, patch)
    merge_key = field.merge_key
    if kind == "scalar":
        merged = _dedupe([*original, *patch])
        return _order_merged(merged, patch, original, "", kind)
    if not merge_key:
        raise PatchError("cannot merge lists without merge key for type map")
    item_type = _item_type(field)
    original, patch = _merge_list_directives(original, patch, merge_key, item_type)
    merged = _merge_items(original, patch, merge_key, item_type)
    return _order_merged(merged, patch, original, merge_key, kind)


def _order_merged(
    merged: list[Any], patch: list[Any], original: list[Any], merge_key: str, kind: str
) -> list[Any]:
    """Patch items in the patch's order, interleaved with server-only items in their order."""
    patch_items, server_only = _partition(merged, patch, merge_key, kind)
    return _normalize_element_order(patch_items, server_only, patch, original, merge_key, kind)


def _merge_list_directives(
    original: list[Any], patch: list[Any], merge_key: str, item_type: _Type
) -> tuple[list[Any], list[Any]]:
    """Upstream mergeSliceWithSpecialElements: apply `$patch: delete`/`replace` list items."""
    rest: list[Any] = []
    replace = False
    for item in patch:
        if _DIRECTIVE not in item:
            rest.append(item)
            continue
        directive = item[_DIRECTIVE]
        if directive == _DELETE:
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            target = _hkey(item[merge_key])
            original = [o for o in original if not (merge_key in o and _hkey(o[merge_key]) == target)]
        elif directive == _REPLACE:
            replace = True
        elif directive == _MERGE:
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type: {directive} in map: {item}")
    if replace:
        replaced = [_merge_map({}, item, item_type) for item in rest]
        return [item for item in replaced if item is not None], []
    return original, rest


def _merge_items(original: list[Obj], patch: list[Obj], merge_key: str, item_type: _Type) -> list[Obj]:
    """Upstream mergeSliceWithoutSpecialElements: merge items with the same key, append others."""
    merged = list(original)
    positions: dict[Any, int] = {}
    for i, item in enumerate(merged):
        if merge_key in item:
            positions.setdefault(_hkey(item[merge_key]), i)
    for item in patch:
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        key = _hkey(item[merge_key])
        if key in positions:
            result = _merge_map(merged[positions[key]], item, item_type)
            merged[positions[key]] = result if result is not None else {}
        else:
            result = _merge_map({}, item, item_type)
            positions[key] = len(merged)
            merged.append(result if result is not None else {})
    return merged


def _apply_retain_keys(original: Obj, patch: Obj) -> None:
    """`$retainKeys`: drop the original's keys not listed; every patched key must be listed."""
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS)
    if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
        raise PatchError(_BAD_RETAIN_KEYS)
    keep = set(retain)
    for key, value in patch.items():
        if value is None or key.startswith((_DELETE_FROM_PRIMITIVE_LIST, _SET_ELEMENT_ORDER)):
            continue
        if key not in keep:
            raise PatchError(_BAD_RETAIN_KEYS)
    for key in [k for k in original if k not in keep]:
        del original[key]


def _apply_set_element_order(original: Obj, patch: Obj, t: _Type) -> None:
    """Upstream mergePatchIntoOriginal: merge each list that has a `$setElementOrder/<field>`
    and order it: the order list > the patch's order > the live order."""
    for directive_key in [k for k in patch if k.startswith(_SET_ELEMENT_ORDER)]:
        order = patch.pop(directive_key)
        name = _directive_target(directive_key, _SET_ELEMENT_ORDER, _BAD_SET_ELEMENT_ORDER)
        if not isinstance(order, list):
            raise PatchError(_BAD_SET_ELEMENT_ORDER)
        current, value = original.get(name, _MISSING), patch.get(name, _MISSING)
        for found in (current, value):
            if found is not _MISSING and not isinstance(found, list):
                raise PatchError(f"expected a list for {name}, but received {json.dumps(found)}")
        field = _lookup(t, name)
        merge_key = field.merge_key
        _validate_set_element_order(value if value is not _MISSING else [], order, merge_key)
        if value is _MISSING:
            if current is _MISSING:
                continue
            merged = current
        elif current is _MISSING:
            merged = _fresh(value, field)
        else:
            merged = _merge_value(current, value, field)
        kind = _element_kind(merged, order)
        if kind == "map" and not merge_key:
            raise PatchError(f"cannot order the list {name} without a merge key")
        key = merge_key if kind == "map" else ""
        patch_items, server_only = _partition(merged, order, key, kind)
        live = current if current is not _MISSING else []
        original[name] = _normalize_element_order(patch_items, server_only, order, live, key, kind)
        patch.pop(name, None)


def _validate_set_element_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """The patch list's items (deletions aside) must appear in the order list, in that order."""
    if not order or not patch_list:
        return
    items = patch_list
    if merge_key:
        for item in patch_list:
            if not isinstance(item, dict):
                raise PatchError(f"expected a map, but received {json.dumps(item)}")
        items = [item for item in patch_list if item.get(_DIRECTIVE) != _DELETE]
    i = j = 0
    while i < len(items) and j < len(order):
        if isinstance(items[i], dict) and _DIRECTIVE in items[i]:
            i += 1
            continue
        if _merge_key_equal(items[i], order[j], merge_key):
            i += 1
        j += 1
    if i < len(items):
        raise PatchError(
            f"The order in patch list:\n{patch_list}\n doesn't match {_SET_ELEMENT_ORDER} list:\n{order}\n"
        )


def _merge_key_equal(left: Any, right: Any, merge_key: str) -> bool:
    if not merge_key:
        return _hkey(left) == _hkey(right)
    for item in (left, right):
        if not isinstance(item, dict):
            raise PatchError(f"expected a map, but received {json.dumps(item)}")
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
    return _hkey(left[merge_key]) == _hkey(right[merge_key])


def _delete_from_primitive_list(original: Obj, key: str, values: Any) -> None:
    """`$deleteFromPrimitiveList/<field>`: remove every occurrence of the values listed."""
    if not isinstance(values, list):
        raise PatchError(_BAD_PRIMITIVE_LIST)
    current = original.get(key)
    if current is None:
        return
    if not isinstance(current, list):
        raise PatchError(f"expected a list for {key}, but received {json.dumps(current)}")
    drop = {_hkey(v) for v in values}
    original[key] = [v for v in current if _hkey(v) not in drop]


def _directive_target(key: str, prefix: str, error: str) -> str:
    """`$setElementOrder/containers` → `containers`."""
    parts = key.split("/", 1)
    if len(parts) < 2 or parts[0] != prefix:
        raise PatchError(error)
    return parts[1]


def _no_merge_key(item: Any, merge_key: str) -> PatchError:
    return PatchError(f"map: {item} does not contain declared merge key: {merge_key}")


def _element_kind(*lists: list[Any]) -> str:
    """The items' kind, map or scalar; lists of lists and mixed types are refused, as upstream."""
    kinds: set[str] = set()
    for items in lists:
        for item in items:
            if isinstance(item, list):
                raise _invalid("lists of lists are not supported")
            kinds.add(_scalar_class(item))
    if len(kinds) > 1:
        raise PatchError(f"list element types are not identical: {list(lists)}")
    return "map" if kinds == {"map"} else "scalar"


def _scalar_class(value: Any) -> str:
    if isinstance(value, dict):
        return "map"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null"


def _hkey(value: Any) -> Any:
    """A hashable stand-in for a JSON value: equal JSON values give equal keys (1 == 1.0, but
    True is not 1)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if value is None:
        return ("null",)
    return ("json", json.dumps(value, sort_keys=True, default=str))


def _dedupe(items: list[Any]) -> list[Any]:
    """Drop repeated scalars, keeping first occurrences."""
    seen: set[Any] = set()
    out: list[Any] = []
    for item in items:
        key = _hkey(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _identity(merge_key: str, kind: str) -> Callable[[Any], Any]:
    """How list items are compared for ordering: by merge key (maps) or by value (scalars)."""
    if kind == "map":
        return lambda item: _hkey(item.get(merge_key)) if isinstance(item, dict) else None
    return _hkey


def _partition(items: list[Any], by: list[Any], merge_key: str, kind: str) -> tuple[list[Any], list[Any]]:
    """Split `items` into those present in `by` and the rest (upstream partition*ByPresentInList)."""
    if kind == "map":
        for item in items:
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
        for item in by:
            if not isinstance(item, dict):
                raise PatchError(f"expected a map, but received {json.dumps(item)}")
    identity = _identity(merge_key, kind)
    present = {identity(item) for item in by if kind != "map" or merge_key in item}
    inside = [item for item in items if identity(item) in present]
    outside = [item for item in items if identity(item) not in present]
    return inside, outside


def _positions(order: list[Any], identity: Callable[[Any], Any]) -> dict[Any, int]:
    """First index of each identity in `order`."""
    positions: dict[Any, int] = {}
    for i, item in enumerate(order):
        positions.setdefault(identity(item), i)
    return positions


def _normalize_slice_order(items: list[Any], order: list[Any], merge_key: str, kind: str) -> list[Any]:
    """Sort `items` (stably) by their position in `order`; `$patch: delete` items go last."""
    to_delete: list[Any] = []
    if kind == "map":
        for item in (*items, *order):
            if not isinstance(item, dict):
                raise PatchError(f"expected a map, but received {json.dumps(item)}")
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
        to_delete = [item for item in items if item.get(_DIRECTIVE) == _DELETE]
        items = [item for item in items if item.get(_DIRECTIVE) != _DELETE]
    identity = _identity(merge_key, kind)
    positions = _positions(order, identity)
    return sorted(items, key=lambda item: positions.get(identity(item), -1)) + to_delete


def _normalize_element_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
    kind: str,
) -> list[Any]:
    """Upstream normalizeElementOrder: sort each part, then merge them by the live order."""
    patch_items = _normalize_slice_order(patch_items, patch_order, merge_key, kind)
    server_only = _normalize_slice_order(server_only, server_order, merge_key, kind)
    identity = _identity(merge_key, kind)
    positions = _positions(server_order, identity)
    # Upstream mergeSortedSlice: a server-only item goes first only when both it and the next
    # patch item are in the live list and it came first there; so new items come before the
    # server-only items that follow them.
    merged: list[Any] = []
    i = j = 0
    while i < len(server_only) and j < len(patch_items):
        left = positions.get(identity(server_only[i]), -1)
        right = positions.get(identity(patch_items[j]), -1)
        if left >= 0 and right >= 0 and left < right:
            merged.append(server_only[i])
            i += 1
        else:
            merged.append(patch_items[j])
            j += 1
    return merged + server_only[i:] + patch_items[j:]


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
            raise _invalid("the patched document is not a JSON object")
        return patched
    patch = _load_yaml(body) if media_type == APPLY_PATCH else _load_json(body)
    if not isinstance(patch, dict):
        raise PatchError(f"the {media_type} patch must be a JSON object, not {type(patch).__name__}")
    if media_type == MERGE_PATCH:
        return json_merge_patch(base, patch)
    # Strategic merge patch, and the simplified server-side apply: the applied configuration
    # merged onto the live object (onto nothing when creating).
    return strategic_merge_patch(base, patch, model)
