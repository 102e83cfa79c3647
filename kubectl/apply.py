"""Client-side apply: create with the last-applied annotation, or send the three-way strategic merge
patch kubectl computes from (last applied, new manifest, live object).

The patch is upstream's CreateThreeWayMergePatch (k8s.io/apimachinery strategicpatch): the
changes and additions from the live object to the new manifest (deletions ignored, so fields the
server or controllers set survive), plus the deletions from the last-applied configuration to the
new manifest (only what the user wrote can be removed by the user), merged as two patches. Lists
with a merge key are diffed item by item (`$patch: delete` for removed items,
`$setElementOrder/<list>` whenever a list changes), lists of scalars with a merge strategy get
`$deleteFromPrimitiveList/<list>`, fields with `retainKeys` get `$retainKeys`. The schema is the
pydantic models' `json_schema_extra`, read through apiserver.patch's model-walking helpers, the
same ones the apiserver applies these patches with.

The "modified" configuration is the manifest with the annotation
`kubectl.kubernetes.io/last-applied-configuration` set to the manifest's own compact JSON (keys
sorted, `"annotations":{}` when it had none, a trailing newline), exactly as kubectl writes it, so
an unchanged manifest gives the empty patch and `unchanged`.
"""

from __future__ import annotations

import argparse
import copy
import json
from dataclasses import dataclass, replace
from typing import Any

from apiserver.patch import (
    _ANY,
    _describe,
    _element_kind,
    _Field,
    _hkey,
    _json_equal,
    _lookup,
    _normalize_element_order,
    _partition,
    _Type,
)
from kubectl.context import Context
from kubectl.errors import CommandError, with_source
from kubectl.manifests import Manifest, load
from kubectl.printers import go_compact_json, resource_name
from machinery.api.resources import ResourceInfo
from machinery.client import ApiError
from machinery.types import Obj

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
FIELD_MANAGER = "kubectl-client-side-apply"
MAX_PATCH_RETRIES = 5

_PATCH = "$patch"
_DELETE = "delete"
_REPLACE = "replace"
_RETAIN_KEYS = "$retainKeys"
_SET_ELEMENT_ORDER = "$setElementOrder"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"


# -- the modified configuration -----------------------------------------------------------------


def last_applied_of(obj: Obj) -> Obj | None:
    """The configuration recorded by the last apply (None if there is none or it is not JSON)."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def modified_configuration(manifest: Obj) -> Obj:
    """kubectl's GetModifiedConfiguration(annotate=true): the manifest carrying its own JSON."""
    obj = copy.deepcopy(manifest)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    annotations = dict(meta.get("annotations") or {})
    annotations.pop(LAST_APPLIED, None)
    meta["annotations"] = annotations
    applied = go_compact_json(obj) + "\n"
    meta["annotations"] = {**annotations, LAST_APPLIED: applied}
    return obj


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


def diff_maps(original: Obj, modified: Obj, t: _Type, opts: _DiffOptions) -> Obj:
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
        elif not opts.ignore_changes_and_additions and not _json_equal(orig, mod):
            patch[key] = copy.deepcopy(mod)
    if not opts.ignore_deletions:
        for key in original:
            if key not in modified:
                patch[key] = None
    if retain and (patch or any(v is not None and k not in modified for k, v in original.items())):
        patch[_RETAIN_KEYS] = sorted(retain)
    return patch


def _map_diff(key: str, orig: Obj, mod: Obj, patch: Obj, t: _Type, opts: _DiffOptions) -> None:
    field = _lookup(t, key)
    if field.strategy == _REPLACE:
        if not opts.ignore_changes_and_additions:
            patch[key] = copy.deepcopy(mod)
        return
    value = diff_maps(orig, mod, field.type, replace(opts, build_retain_keys=field.retain_keys))
    if value:
        patch[key] = value


def _list_diff(key: str, orig: list[Any], mod: list[Any], patch: Obj, t: _Type, opts: _DiffOptions) -> None:
    field = _lookup(t, key)
    if field.strategy != "merge":
        if not opts.ignore_changes_and_additions and not _json_equal(orig, mod):
            patch[key] = copy.deepcopy(mod)
        return
    add, delete, order = _diff_lists(orig, mod, field, replace(opts, build_retain_keys=field.retain_keys))
    if add:
        patch[key] = add
    if delete:
        patch[f"{_DELETE_FROM_PRIMITIVE_LIST}/{key}"] = delete
    if order:
        patch[f"{_SET_ELEMENT_ORDER}/{key}"] = order


def _diff_lists(orig: list[Any], mod: list[Any], field: _Field, opts: _DiffOptions
                ) -> tuple[list[Any], list[Any], list[Any]]:
    """(items to add or change, scalars to delete, the $setElementOrder list)."""
    if not orig:
        if not mod or opts.ignore_changes_and_additions:
            return [], [], []
        return copy.deepcopy(mod), [], []
    kind = _element_kind(orig, mod)
    if kind == "map":
        key = field.merge_key
        if not key:
            raise CommandError("cannot merge lists without merge key")
        items, deletions = _diff_lists_of_maps(orig, mod, field, key, opts)
        items = _order_like(items, mod, key)
        order_same = len(orig) == len(mod) and all(
            _hkey(o.get(key)) == _hkey(m.get(key)) for o, m in zip(orig, mod, strict=True))
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
                                   or (not opts.ignore_changes_and_additions and not _json_equal(orig, mod))):
        order = copy.deepcopy(mod)
    return additions, deletions, order


def _order_like(items: list[Any], order: list[Any], key: str) -> list[Any]:
    """normalizeSliceOrder: sort `items` by their position in `order`."""
    ident = (lambda i: _hkey(i.get(key)) if isinstance(i, dict) else None) if key else _hkey
    positions: dict[Any, int] = {}
    for i, item in enumerate(order):
        positions.setdefault(ident(item), i)
    return sorted(items, key=lambda i: positions.get(ident(i), -1))


def _diff_lists_of_maps(orig: list[Obj], mod: list[Obj], field: _Field, key: str, opts: _DiffOptions
                        ) -> tuple[list[Obj], list[Obj]]:
    for item in (*orig, *mod):
        if key not in item:
            raise CommandError(f"map: {item} does not contain declared merge key: {key}")
    item_type = field.type.item if field.type.kind == "list" and field.type.item else _ANY
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
        if not any(_json_equal(d, u) for u in unique):
            unique.append(d)
    return additions, unique


# -- merging the two patches (strategicpatch.mergeMap with MergeOptions{}) ------------------------


def _merge_patches(original: Obj, patch: Obj, t: _Type) -> Obj:
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
        field = _lookup(t, key)
        if isinstance(current, dict):
            out[key] = value if field.strategy == _REPLACE else _merge_patches(current, value, field.type)
        elif isinstance(current, list):
            out[key] = _merge_patch_lists(current, value, field)
        else:
            out[key] = value
    return out


def _merge_patch_lists(original: list[Any], patch: list[Any], field: _Field) -> list[Any]:
    if field.strategy != "merge":
        return patch
    if not original and not patch:
        return original
    kind = _element_kind(original, patch)
    if kind == "scalar":
        merged: list[Any] = []
        for item in (*original, *patch):
            if not any(_json_equal(item, m) for m in merged):
                merged.append(item)
        inside, outside = _partition(merged, patch, "", kind)
        return _normalize_element_order(inside, outside, patch, original, "", kind)
    key = field.merge_key
    item_type = field.type.item if field.type.kind == "list" and field.type.item else _ANY
    merged = list(original)
    for item in patch:
        found = next((n for n, m in enumerate(merged) if _hkey(m.get(key)) == _hkey(item.get(key))), None)
        if found is None:
            merged.append(item)
        else:
            merged[found] = _merge_patches(merged[found], item, item_type)
    inside, outside = _partition(merged, patch, key, kind)
    return _normalize_element_order(inside, outside, patch, original, key, kind)


def three_way_merge_patch(original: Obj | None, modified: Obj, current: Obj, model: Any) -> Obj:
    """strategicpatch.CreateThreeWayMergePatch(original, modified, current, schema, overwrite=true)."""
    t = _describe(model) if model is not None else _ANY
    delta = diff_maps(current, modified, t, _DiffOptions(ignore_deletions=True))
    deletions = diff_maps(original or {}, modified, t, _DiffOptions(ignore_changes_and_additions=True))
    return _merge_patches(deletions, delta, t)


# -- the command ----------------------------------------------------------------------------------


@dataclass
class _Item:
    manifest: Manifest
    info: ResourceInfo
    name: str
    namespace: str | None


def _suffix(dry_run: str) -> str:
    return {"client": " (dry run)", "server": " (server dry run)"}.get(dry_run, "")


async def _prepare(ctx: Context, manifest: Manifest) -> _Item:
    obj = manifest.obj
    info = await ctx.resolver.for_object(obj)
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = str(meta.get("name") or "")
    if info is None:
        raise CommandError(
            f'resource mapping not found for name: "{name}" namespace: "{meta.get("namespace") or ""}" from '
            f'"{manifest.source}": no matches for kind "{obj.get("kind")}" in version "{obj.get("apiVersion")}"')
    if not name:
        if meta.get("generateName"):
            raise CommandError(f"from {manifest.source}: cannot use generate name with apply")
        raise CommandError(f'error when retrieving current configuration of {info.kind} from server for: '
                           f'"{manifest.source}": resource name may not be empty')
    namespace: str | None = None
    if info.namespaced:
        given = meta.get("namespace")
        if given and ctx.explicit_namespace and given != ctx.namespace:
            raise CommandError(
                f'the namespace from the provided object "{given}" does not match the namespace "{ctx.namespace}". '
                f"You must pass '--namespace={given}' to perform this operation.")
        namespace = str(given or ctx.namespace)
        obj.setdefault("metadata", {})["namespace"] = namespace
    return _Item(manifest, info, name, namespace)


async def _apply_one(ctx: Context, item: _Item, args: argparse.Namespace) -> str:
    client = ctx.client
    info, name, namespace, source = item.info, item.name, item.namespace, item.manifest.source
    validation = {"strict": "Strict", "true": "Strict", "warn": "Warn", "ignore": "Ignore", "false": "Ignore"}
    params: dict[str, Any] = {"fieldValidation": validation.get(str(args.validate).lower(), "Strict")}
    if args.dry_run == "server":
        params["dryRun"] = "All"
    if args.server_side:
        params.update({"fieldManager": args.field_manager or "kubectl", "force": "true" if args.force_conflicts
                       else "false"})
        try:
            await client.request("PATCH", info.object_path(name, namespace), params=params, body=item.manifest.obj,
                                 content_type="application/apply-patch+yaml")
        except ApiError as e:
            raise with_source(e, "applying patch", source) from None
        return "serverside-applied"
    params["fieldManager"] = args.field_manager or FIELD_MANAGER
    modified = modified_configuration(item.manifest.obj)
    try:
        current = await client.request("GET", info.object_path(name, namespace))
    except ApiError as e:
        if not e.is_not_found:
            raise with_source(e, "retrieving current configuration of", source) from None
        if args.dry_run == "client":
            return "created"
        try:
            await client.request("POST", info.collection_path(namespace), params=params, body=modified)
        except ApiError as e2:
            raise with_source(e2, "creating", source) from None
        return "created"
    if last_applied_of(current) is None and args.dry_run == "none":
        ctx.warn(f"Warning: resource {info.plural}/{name} is missing the {LAST_APPLIED} annotation which is required "
                 "by kubectl apply. kubectl apply should only be used on resources created declaratively by either "
                 "kubectl create --save-config or kubectl apply. The missing annotation will be patched "
                 "automatically.")
    for attempt in range(MAX_PATCH_RETRIES + 1):
        patch = three_way_merge_patch(last_applied_of(current), modified, current, info.model)
        if not patch:
            return "unchanged"
        if args.dry_run == "client":
            return "configured"
        try:
            await client.request("PATCH", info.object_path(name, namespace), params=params, body=patch,
                                 content_type="application/strategic-merge-patch+json")
            return "configured"
        except ApiError as e:
            if not e.is_conflict or attempt == MAX_PATCH_RETRIES:
                raise with_source(e, "applying patch", source) from None
        current = await client.request("GET", info.object_path(name, namespace))
    raise AssertionError("unreachable")


async def run(ctx: Context, args: argparse.Namespace) -> int:
    if not args.filename:
        raise CommandError("must specify one of -f and -k")
    manifests = load(args.filename, recursive=args.recursive)
    if not manifests:
        raise CommandError("no objects passed to apply")
    failures: list[BaseException] = []
    for manifest in manifests:
        try:
            item = await _prepare(ctx, manifest)
            result = await _apply_one(ctx, item, args)
        except (ApiError, CommandError) as e:
            failures.append(e)
            continue
        if args.output == "name":
            ctx.print(resource_name(item.info, item.name))
        else:
            ctx.print(f"{resource_name(item.info, item.name)} {result}{_suffix(args.dry_run)}")
    if failures:
        from kubectl.errors import format_error

        for failure in failures:
            ctx.warn(format_error(failure, ctx.client.server))
        return 1
    return 0
