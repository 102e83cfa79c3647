"""The three-way strategic merge patch client-side apply sends (upstream
k8s.io/apimachinery/pkg/util/strategicpatch/patch.go CreateThreeWayMergePatch): the changes and
additions from the live object to the new configuration (deletions ignored, so fields the server or
controllers set survive), plus the deletions from the last-applied configuration to the new one
(only what the user wrote can be removed by the user), merged as two patches. Lists with a merge
key are diffed item by item (`$patch: delete` for removed items, `$setElementOrder/<list>` whenever
a list changes), lists of scalars with a merge strategy get `$deleteFromPrimitiveList/<list>`,
fields with `retainKeys` get `$retainKeys`. The schema is the same patch metadata the apiserver
applies these patches with (machinery/patch/schema.py)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from machinery.patch.errors import PatchError
from machinery.patch.jsonpatch import json_equal
from machinery.patch.schema import ANY, FieldMeta, SchemaType, describe, lookup
from machinery.patch.strategic import element_kind, hkey, normalize_element_order, partition
from machinery.types import Obj

_PATCH = "$patch"
_DELETE = "delete"
_REPLACE = "replace"
_RETAIN_KEYS = "$retainKeys"
_SET_ELEMENT_ORDER = "$setElementOrder"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"


# -- diffing (strategicpatch.diffMaps and friends) -----------------------------------------------


@dataclass(frozen=True)
class _DiffOptions:
    ignore_changes_and_additions: bool = False
    ignore_deletions: bool = False
    set_element_order: bool = True
    build_retain_keys: bool = False


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def _go_string(value: Any) -> str:
    """fmt.Sprintf("%v") of a JSON scalar, which upstream sorts list items by."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def diff_maps(original: Obj, modified: Obj, t: SchemaType, opts: _DiffOptions) -> Obj:
    patch: Obj = {}
    retain: list[str] = []
    for key, mod in modified.items():
        if opts.build_retain_keys and mod is not None:
            retain.append(key)
        if key not in original:
            if not opts.ignore_changes_and_additions:
                patch[key] = copy.deepcopy(mod)
            continue
        orig = original[key]
        if _json_kind(orig) != _json_kind(mod):
            if not opts.ignore_changes_and_additions:
                patch[key] = copy.deepcopy(mod)
            continue
        if isinstance(orig, dict):
            _map_diff(key, orig, mod, patch, t, opts)
        elif isinstance(orig, list):
            _list_diff(key, orig, mod, patch, t, opts)
        elif not opts.ignore_changes_and_additions and not json_equal(orig, mod):
            patch[key] = copy.deepcopy(mod)
    if not opts.ignore_deletions:
        for key in original:
            if key not in modified:
                patch[key] = None
    if retain and (patch or any(v is not None and k not in modified for k, v in original.items())):
        patch[_RETAIN_KEYS] = sorted(retain)
    return patch


def _map_diff(key: str, orig: Obj, mod: Obj, patch: Obj, t: SchemaType, opts: _DiffOptions) -> None:
    field = lookup(t, key)
    if field.strategy == _REPLACE:
        if not opts.ignore_changes_and_additions:
            patch[key] = copy.deepcopy(mod)
        return
    value = diff_maps(orig, mod, field.type, replace(opts, build_retain_keys=field.retain_keys))
    if value:
        patch[key] = value


def _list_diff(key: str, orig: list[Any], mod: list[Any], patch: Obj, t: SchemaType, opts: _DiffOptions) -> None:
    field = lookup(t, key)
    if field.strategy != "merge":
        if not opts.ignore_changes_and_additions and not json_equal(orig, mod):
            patch[key] = copy.deepcopy(mod)
        return
    add, delete, order = _diff_lists(orig, mod, field, replace(opts, build_retain_keys=field.retain_keys))
    if add:
        patch[key] = add
    if delete:
        patch[f"{_DELETE_FROM_PRIMITIVE_LIST}/{key}"] = delete
    if order:
        patch[f"{_SET_ELEMENT_ORDER}/{key}"] = order


def _diff_lists(orig: list[Any], mod: list[Any], field: FieldMeta, opts: _DiffOptions
                ) -> tuple[list[Any], list[Any], list[Any]]:
    """(items to add or change, scalars to delete, the $setElementOrder list)."""
    if not orig:
        if not mod or opts.ignore_changes_and_additions:
            return [], [], []
        return copy.deepcopy(mod), [], []
    kind = element_kind(orig, mod)
    if kind == "map":
        key = field.merge_key
        if not key:
            raise PatchError("cannot merge lists without merge key")
        items, deletions = _diff_lists_of_maps(orig, mod, field, key, opts)
        items = _order_like(items, mod, key)
        order_same = len(orig) == len(mod) and all(
            hkey(o.get(key)) == hkey(m.get(key)) for o, m in zip(orig, mod, strict=True))
        items = items + deletions
        order: list[Any] = []
        if opts.set_element_order and ((not opts.ignore_changes_and_additions and (items or not order_same))
                                       or (not opts.ignore_deletions and items)):
            order = [{key: m.get(key)} for m in mod]
        return items, [], order
    additions, deletions = _diff_lists_of_scalars(orig, mod, opts)
    additions = _order_like(additions, mod, "")
    order = []
    if opts.set_element_order and ((not opts.ignore_deletions and deletions)
                                   or (not opts.ignore_changes_and_additions and not json_equal(orig, mod))):
        order = copy.deepcopy(mod)
    return additions, deletions, order


def _order_like(items: list[Any], order: list[Any], key: str) -> list[Any]:
    """normalizeSliceOrder: sort `items` by their position in `order`."""
    def by_key(item: Any) -> Any:
        return hkey(item.get(key)) if isinstance(item, dict) else None

    ident = by_key if key else hkey
    positions: dict[Any, int] = {}
    for i, item in enumerate(order):
        positions.setdefault(ident(item), i)
    return sorted(items, key=lambda i: positions.get(ident(i), -1))


def _diff_lists_of_maps(orig: list[Obj], mod: list[Obj], field: FieldMeta, key: str, opts: _DiffOptions
                        ) -> tuple[list[Obj], list[Obj]]:
    for item in (*orig, *mod):
        if key not in item:
            raise PatchError(f"map: {item} does not contain declared merge key: {key}")
    item_type = field.type.item if field.type.kind == "list" and field.type.item else ANY
    by_key = sorted(orig, key=lambda i: _go_string(i[key]))
    mod_sorted = sorted(mod, key=lambda i: _go_string(i[key]))
    patch: list[Obj] = []
    deletions: list[Obj] = []
    i = j = 0
    while i < len(by_key) or j < len(mod_sorted):
        o = by_key[i] if i < len(by_key) else None
        m = mod_sorted[j] if j < len(mod_sorted) else None
        ok, mk = (_go_string(o[key]) if o is not None else None), (_go_string(m[key]) if m is not None else None)
        if o is not None and m is not None and ok == mk:
            value = diff_maps(o, m, item_type, opts)
            if value:
                value[key] = m[key]
                patch.append(value)
            i += 1
            j += 1
        elif o is None or (m is not None and ok is not None and mk is not None and ok > mk):
            if not opts.ignore_changes_and_additions:
                patch.append(copy.deepcopy(m))  # type: ignore[arg-type]
            j += 1
        else:
            if not opts.ignore_deletions:
                deletions.append({key: o[key], _PATCH: _DELETE})
            i += 1
    return patch, deletions


def _diff_lists_of_scalars(orig: list[Any], mod: list[Any], opts: _DiffOptions) -> tuple[list[Any], list[Any]]:
    original = sorted(orig, key=_go_string)
    modified = sorted(mod, key=_go_string)
    additions: list[Any] = []
    deletions: list[Any] = []
    i = j = 0
    while i < len(original) or j < len(modified):
        o = _go_string(original[i]) if i < len(original) else None
        m = _go_string(modified[j]) if j < len(modified) else None
        if o is not None and m is not None and o == m:
            i += 1
            j += 1
        elif m is None or (o is not None and o < m):
            if not opts.ignore_deletions:
                deletions.append(original[i])
            i += 1
        else:
            if not opts.ignore_changes_and_additions:
                additions.append(modified[j])
            j += 1
    unique: list[Any] = []
    for d in deletions:
        if not any(json_equal(d, u) for u in unique):
            unique.append(d)
    return additions, unique


# -- merging the two patches (strategicpatch.mergeMap with MergeOptions{}) ------------------------


def _merge_patches(original: Obj, patch: Obj, t: SchemaType) -> Obj:
    directive = patch.get(_PATCH)
    if directive == _REPLACE:
        return {k: v for k, v in patch.items() if k != _PATCH}
    if directive == _DELETE:
        return {}
    out = dict(original)
    for key, value in patch.items():
        if key.startswith((_SET_ELEMENT_ORDER, _DELETE_FROM_PRIMITIVE_LIST)) or key == _RETAIN_KEYS:
            out[key] = value
            continue
        if value is None or key not in out or out[key] is None or _json_kind(out[key]) != _json_kind(value):
            out[key] = value
            continue
        current = out[key]
        field = lookup(t, key)
        if isinstance(current, dict):
            out[key] = value if field.strategy == _REPLACE else _merge_patches(current, value, field.type)
        elif isinstance(current, list):
            out[key] = _merge_patch_lists(current, value, field)
        else:
            out[key] = value
    return out


def _merge_patch_lists(original: list[Any], patch: list[Any], field: FieldMeta) -> list[Any]:
    if field.strategy != "merge":
        return patch
    if not original and not patch:
        return original
    kind = element_kind(original, patch)
    if kind == "scalar":
        merged: list[Any] = []
        for item in (*original, *patch):
            if not any(json_equal(item, m) for m in merged):
                merged.append(item)
        inside, outside = partition(merged, patch, "", kind)
        return normalize_element_order(inside, outside, patch, original, "", kind)
    key = field.merge_key
    item_type = field.type.item if field.type.kind == "list" and field.type.item else ANY
    merged = list(original)
    for item in patch:
        found = next((n for n, m in enumerate(merged) if hkey(m.get(key)) == hkey(item.get(key))), None)
        if found is None:
            merged.append(item)
        else:
            merged[found] = _merge_patches(merged[found], item, item_type)
    inside, outside = partition(merged, patch, key, kind)
    return normalize_element_order(inside, outside, patch, original, key, kind)


def three_way_merge_patch(original: Obj | None, modified: Obj, current: Obj, model: Any) -> Obj:
    """strategicpatch.CreateThreeWayMergePatch(original, modified, current, schema, overwrite=true)."""
    t = describe(model) if model is not None else ANY
    delta = diff_maps(current, modified, t, _DiffOptions(ignore_deletions=True))
    deletions = diff_maps(original or {}, modified, t, _DiffOptions(ignore_changes_and_additions=True))
    return _merge_patches(deletions, delta, t)
