"""Kubernetes strategic merge patch, following k8s.io/apimachinery/pkg/util/strategicpatch/patch.go
(StrategicMergeMapPatch: mergeMap, mergeSlice and the $patch, $retainKeys, $setElementOrder and
$deleteFromPrimitiveList directives). Objects are wire-form dicts; no function here mutates its inputs."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from machinery.patch.errors import PatchError, invalid
from machinery.patch.schema import ANY, FieldMeta, SchemaType, describe, lookup
from machinery.types import Obj

_MISSING: Any = object()


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
    t = describe(model) if model is not None else ANY
    # Work on copies, as upstream's mergeMap mutates both of its arguments.
    merged = _merge_map(copy.deepcopy(original), copy.deepcopy(patch), t)
    return {} if merged is None else merged


def _merge_map(original: Obj, patch: Obj, t: SchemaType) -> Obj | None:
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
        field = lookup(t, key)
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


def _merge_value(current: Any, value: Any, field: FieldMeta) -> Any:
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


def _fresh(value: Any, field: FieldMeta) -> Any:
    """A patch value for a field the original lacks: merged into an empty value, so directives
    and nulls inside it are processed rather than stored (upstream stores it as it is)."""
    if isinstance(value, dict):
        return _merge_map({}, value, field.type)
    if isinstance(value, list) and field.strategy == _MERGE:
        return _merge_list([], value, field)
    return value


def _item_type(field: FieldMeta) -> SchemaType:
    return (field.type.item or ANY) if field.type.kind == "list" else ANY


def _merge_list(original: list[Any], patch: list[Any], field: FieldMeta) -> list[Any]:
    """Upstream mergeSlice: merge by key (maps) or union (scalars), then order the result."""
    if not original and not patch:
        return original
    kind = element_kind(original, patch)
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
    patch_items, server_only = partition(merged, patch, merge_key, kind)
    return normalize_element_order(patch_items, server_only, patch, original, merge_key, kind)


def _merge_list_directives(
    original: list[Any], patch: list[Any], merge_key: str, item_type: SchemaType
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
            target = hkey(item[merge_key])
            original = [o for o in original if not (merge_key in o and hkey(o[merge_key]) == target)]
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


def _merge_items(original: list[Obj], patch: list[Obj], merge_key: str, item_type: SchemaType) -> list[Obj]:
    """Upstream mergeSliceWithoutSpecialElements: merge items with the same key, append others."""
    merged = list(original)
    positions: dict[Any, int] = {}
    for i, item in enumerate(merged):
        if merge_key in item:
            positions.setdefault(hkey(item[merge_key]), i)
    for item in patch:
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        key = hkey(item[merge_key])
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


def _apply_set_element_order(original: Obj, patch: Obj, t: SchemaType) -> None:
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
        field = lookup(t, name)
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
        kind = element_kind(merged, order)
        if kind == "map" and not merge_key:
            raise PatchError(f"cannot order the list {name} without a merge key")
        key = merge_key if kind == "map" else ""
        patch_items, server_only = partition(merged, order, key, kind)
        live = current if current is not _MISSING else []
        original[name] = normalize_element_order(patch_items, server_only, order, live, key, kind)
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
        return bool(hkey(left) == hkey(right))
    for item in (left, right):
        if not isinstance(item, dict):
            raise PatchError(f"expected a map, but received {json.dumps(item)}")
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
    return bool(hkey(left[merge_key]) == hkey(right[merge_key]))


def _delete_from_primitive_list(original: Obj, key: str, values: Any) -> None:
    """`$deleteFromPrimitiveList/<field>`: remove every occurrence of the values listed."""
    if not isinstance(values, list):
        raise PatchError(_BAD_PRIMITIVE_LIST)
    current = original.get(key)
    if current is None:
        return
    if not isinstance(current, list):
        raise PatchError(f"expected a list for {key}, but received {json.dumps(current)}")
    drop = {hkey(v) for v in values}
    original[key] = [v for v in current if hkey(v) not in drop]


def _directive_target(key: str, prefix: str, error: str) -> str:
    """`$setElementOrder/containers` → `containers`."""
    parts = key.split("/", 1)
    if len(parts) < 2 or parts[0] != prefix:
        raise PatchError(error)
    return parts[1]


def _no_merge_key(item: Any, merge_key: str) -> PatchError:
    return PatchError(f"map: {item} does not contain declared merge key: {merge_key}")


def element_kind(*lists: list[Any]) -> str:
    """The items' kind, map or scalar; lists of lists and mixed types are refused, as upstream."""
    kinds: set[str] = set()
    for items in lists:
        for item in items:
            if isinstance(item, list):
                raise invalid("lists of lists are not supported")
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


def hkey(value: Any) -> Any:
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
        key = hkey(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _identity(merge_key: str, kind: str) -> Callable[[Any], Any]:
    """How list items are compared for ordering: by merge key (maps) or by value (scalars)."""
    if kind == "map":
        return lambda item: hkey(item.get(merge_key)) if isinstance(item, dict) else None
    return hkey


def partition(items: list[Any], by: list[Any], merge_key: str, kind: str) -> tuple[list[Any], list[Any]]:
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


def normalize_element_order(
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
