"""Client-side apply: create with the last-applied annotation, or send the three-way strategic merge
patch kubectl computes from (last applied, new manifest, live object).

The patch is upstream's CreateThreeWayMergePatch (k8s.io/apimachinery strategicpatch), computed by
machinery/patch/threeway.py from the same patch metadata the apiserver applies these patches with.

The "modified" configuration is the manifest with the annotation
`kubectl.kubernetes.io/last-applied-configuration` set to the manifest's own compact JSON (keys
sorted, `"annotations":{}` when it had none, a trailing newline), exactly as kubectl writes it, so
an unchanged manifest gives the empty patch and `unchanged`.
"""

from __future__ import annotations

import argparse
import copy
import json
from dataclasses import dataclass
from typing import Any

from kubectl.context import Context
from kubectl.errors import CommandError, with_source
from kubectl.manifests import Manifest, load
from kubectl.printers import go_compact_json, resource_name
from machinery.api.resources import ResourceInfo
from machinery.client import ApiError, InvalidRequest
from machinery.patch import PatchError, three_way_merge_patch
from machinery.types import Obj

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
FIELD_MANAGER = "kubectl-client-side-apply"
MAX_PATCH_RETRIES = 5


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
    given_meta = obj.get("metadata")
    meta: dict[str, Any] = given_meta if isinstance(given_meta, dict) else {}
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
        try:
            patch = three_way_merge_patch(last_applied_of(current), modified, current, info.model)
        except PatchError as e:
            raise CommandError(str(e)) from None
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
        except (ApiError, CommandError, InvalidRequest) as e:
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
