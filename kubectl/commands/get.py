"""`mkubectl get`: server-side Tables printed as kubectl prints them, `-o yaml|json|name`, `-w`.

Lists are read in chunks of 500 (`limit` + `continue`, as kubectl does). Named objects that do not
exist are reported after everything found was printed, and make the exit code 1. `--sort-by`
asks for full objects in the rows (`includeObject=Object`) and sorts the rows by a JSONPath into
them; `-w` prints the list and then every watch event's row, re-watching from the last
resourceVersion when the server ends a stream.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from typing import Any

from kubectl.client import TABLE_ACCEPT
from kubectl.context import Context
from kubectl.errors import CommandError, format_error
from kubectl.manifests import load
from kubectl.printers import TablePrinter, go_json, go_yaml, print_objects, resource_name, strip_managed_fields
from kubectl.resources import Target, multiple_types_requested, targets_from_args
from machinery.api.resources import ResourceInfo
from machinery.client import ApiError
from machinery.types import Obj

CHUNK = 500
OUTPUTS = ("", "wide", "yaml", "json", "name")


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("get", parents=[common], help="display one or many resources",
                       description="List resources as tables (the server's columns), or print them as YAML/JSON.")
    p.add_argument("resources", nargs="*", metavar="TYPE[.GROUP] [NAME...] | TYPE/NAME...")
    p.add_argument("-o", "--output", default="", help="wide, yaml, json or name")
    p.add_argument("-l", "--selector", default=None, help="label selector, e.g. app=nginx,tier!=db")
    p.add_argument("--field-selector", default=None, help="field selector, e.g. status.phase=Running")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="list across all namespaces")
    p.add_argument("-w", "--watch", action="store_true", help="after listing, watch for changes")
    p.add_argument("--watch-only", action="store_true", help="watch for changes without listing first")
    p.add_argument("--show-labels", action="store_true", help="add a LABELS column")
    p.add_argument("-L", "--label-columns", action="append", default=[], help="a column per label key (a,b)")
    p.add_argument("--no-headers", action="store_true", help="omit the header line")
    p.add_argument("--sort-by", default="", help="sort rows by a JSONPath, e.g. .metadata.creationTimestamp")
    p.add_argument("-f", "--filename", action="append", default=[], help="get the objects a manifest names")
    p.add_argument("-R", "--recursive", action="store_true")
    p.add_argument("--ignore-not-found", action="store_true", help="no error for named objects that are missing")
    p.add_argument("--show-managed-fields", action="store_true", help="keep metadata.managedFields in yaml/json")
    p.add_argument("--chunk-size", type=int, default=CHUNK, help="list page size (0: one request)")
    p.set_defaults(run=run)


# -- JSONPath for --sort-by -----------------------------------------------------------------------

_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def jsonpath_value(obj: Any, path: str) -> Any:
    """The value at a simple JSONPath (`.a.b[0].c`, optionally wrapped in `{}`); None if missing."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if not text.startswith(".") and not text.startswith("["):
        text = "." + text
    value = obj
    for match in _STEP.finditer(text):
        key, index = match.groups()
        if key is not None:
            value = value.get(key) if isinstance(value, dict) else None
        else:
            idx = int(index)
            value = value[idx] if isinstance(value, list) and idx < len(value) else None
        if value is None:
            return None
    return value


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, "")
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, int | float):
        return (1, value)
    return (2, str(value))


def sort_rows(table: Obj, path: str) -> None:
    rows = table.get("rows") or []
    rows.sort(key=lambda row: _sort_key(jsonpath_value(row.get("object") or {}, path)))


# -- reading --------------------------------------------------------------------------------------


def _list_params(args: argparse.Namespace, extra_field: str | None = None) -> dict[str, Any]:
    fields = ",".join(f for f in (args.field_selector, extra_field) if f)
    return {"labelSelector": args.selector or None, "fieldSelector": fields or None}


async def list_all(ctx: Context, info: ResourceInfo, namespace: str | None, params: dict[str, Any],
                   *, accept: str | None = None, chunk: int = CHUNK) -> Obj:
    """A whole list (or Table), page by page; the pages' items/rows concatenated."""
    path = info.collection_path(namespace)
    merged: Obj | None = None
    token = ""
    while True:
        query = {**params, "limit": chunk or None, "continue": token or None}
        page = await ctx.client.request("GET", path, params=query, accept=accept)
        if merged is None:
            merged = page
        else:
            key = "rows" if accept else "items"
            merged.setdefault(key, []).extend(page.get(key) or [])
            merged["metadata"] = page.get("metadata") or {}
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            break
    assert merged is not None
    (merged.get("metadata") or {}).pop("continue", None)
    return merged


async def _from_files(ctx: Context, args: argparse.Namespace) -> list[Target]:
    targets: list[Target] = []
    for manifest in load(args.filename, recursive=args.recursive):
        info = await ctx.resolver.for_object(manifest.obj)
        if info is None:
            raise CommandError(f'no matches for kind "{manifest.obj.get("kind")}" in version '
                               f'"{manifest.obj.get("apiVersion")}"')
        name = str((manifest.obj.get("metadata") or {}).get("name") or "")
        if targets and targets[-1].info == info:
            targets[-1].names.append(name)
        else:
            targets.append(Target(info, [name]))
    return targets


async def run(ctx: Context, args: argparse.Namespace) -> int:
    output = args.output.strip()
    if output not in OUTPUTS:
        raise CommandError(f'unable to match a printer suitable for the output format "{output}", allowed formats '
                           "are: json,name,wide,yaml")
    if args.filename:
        targets = await _from_files(ctx, args)
        with_kind = len({t.info.kind for t in targets}) > 1
        single = len(targets) == 1 and len(targets[0].names) == 1
    else:
        if not args.resources:
            raise CommandError("Required resource not specified.")
        targets = await targets_from_args(ctx.resolver, args.resources)
        if args.all_namespaces and any(t.names for t in targets):
            raise CommandError("a resource cannot be retrieved by name across all namespaces")
        with_kind = multiple_types_requested(args.resources) or len(targets) > 1
        single = len(targets) == 1 and len(targets[0].names) == 1
    if args.watch or args.watch_only:
        return await _watch(ctx, args, targets, output)
    if output in ("yaml", "json", "name"):
        return await _print_objects(ctx, args, targets, output, single)
    return await _print_tables(ctx, args, targets, output, with_kind)


async def _print_objects(ctx: Context, args: argparse.Namespace, targets: list[Target], output: str,
                         single: bool) -> int:
    found: list[tuple[ResourceInfo, Obj]] = []
    errors: list[BaseException] = []
    for target in targets:
        ns = ctx.ns_for(target.info, args.all_namespaces)
        if target.names:
            for name in target.names:
                try:
                    obj = await ctx.client.request("GET", target.info.object_path(name, ctx.ns_for(target.info)))
                except ApiError as e:
                    if not (e.is_not_found and args.ignore_not_found):
                        errors.append(e)
                    continue
                found.append((target.info, obj))
        else:
            listed = await list_all(ctx, target.info, ns, _list_params(args), chunk=args.chunk_size)
            found.extend((target.info, item) for item in listed.get("items") or [])
    if args.sort_by:
        found.sort(key=lambda pair: _sort_key(jsonpath_value(pair[1], args.sort_by)))
    # nothing found: nothing printed for one named object or with --ignore-not-found, else an empty List
    if found or not (single or args.ignore_not_found):
        print_objects(ctx.out, found, output, single=single, show_managed_fields=args.show_managed_fields)
    return _report(ctx, errors)


def _report(ctx: Context, errors: list[BaseException]) -> int:
    ctx.out.flush()
    for error in errors:
        ctx.warn(format_error(error, ctx.client.server))
    return 1 if errors else 0


async def _print_tables(ctx: Context, args: argparse.Namespace, targets: list[Target], output: str,
                        with_kind: bool) -> int:
    printer = TablePrinter(ctx.out, wide=output == "wide", with_namespace=args.all_namespaces, with_kind=with_kind,
                           no_headers=args.no_headers, show_labels=args.show_labels,
                           label_columns=[c for arg in args.label_columns for c in arg.split(",")])
    errors: list[BaseException] = []
    include = {"includeObject": "Object"} if args.sort_by else {}
    for target in targets:
        info = target.info
        if target.names:
            combined: Obj | None = None
            for name in target.names:
                try:
                    table = await ctx.client.request("GET", info.object_path(name, ctx.ns_for(info)),
                                                     params=include or None, accept=TABLE_ACCEPT)
                except ApiError as e:
                    if not (e.is_not_found and args.ignore_not_found):
                        errors.append(e)
                    continue
                if combined is None:
                    combined = table
                else:
                    combined.setdefault("rows", []).extend(table.get("rows") or [])
            if combined is not None:
                if args.sort_by:
                    sort_rows(combined, args.sort_by)
                printer.print_table(info, combined)
            continue
        ns = ctx.ns_for(info, args.all_namespaces)
        table = await list_all(ctx, info, ns, {**_list_params(args), **include}, accept=TABLE_ACCEPT,
                               chunk=args.chunk_size)
        if args.sort_by:
            sort_rows(table, args.sort_by)
        printer.print_table(info, table)
    printer.flush()
    if printer.rows_printed == 0 and not errors and not args.ignore_not_found:
        namespaced = all(t.info.namespaced for t in targets) and not args.all_namespaces
        ctx.warn(f"No resources found in {ctx.namespace} namespace." if namespaced else "No resources found")
    return _report(ctx, errors)


# -- watch ------------------------------------------------------------------------------------------


async def _watch(ctx: Context, args: argparse.Namespace, targets: list[Target], output: str) -> int:
    count = sum(max(1, len(t.names)) for t in targets)
    if len(targets) != 1 or count != 1:
        raise CommandError(f"watch is only supported on individual resources and resource collections, but {count} "
                           "resources were found")
    target = targets[0]
    info = target.info
    ns = ctx.ns_for(info, args.all_namespaces)
    name_selector = f"metadata.name={target.names[0]}" if target.names else None
    params = _list_params(args, name_selector)
    table_mode = output in ("", "wide")
    accept = TABLE_ACCEPT if table_mode else None
    printer = TablePrinter(ctx.out, wide=output == "wide", with_namespace=args.all_namespaces,
                           no_headers=args.no_headers, show_labels=args.show_labels,
                           label_columns=[c for arg in args.label_columns for c in arg.split(",")])

    def emit(obj: Obj, header: bool) -> None:
        if table_mode:
            printer.print_table(info, obj, header=header)
            printer.flush()
        elif output == "name":
            ctx.out.write(resource_name(info, (obj.get("metadata") or {}).get("name", "")) + "\n")
        else:
            full = strip_managed_fields({"apiVersion": info.api_version, "kind": info.kind, **obj})
            ctx.out.write(go_json(full) if output == "json" else "---\n" + go_yaml(full))
        ctx.out.flush()

    listed = await list_all(ctx, info, ns, params, accept=accept, chunk=args.chunk_size)
    missing = target.names and not (listed.get("rows") if table_mode else listed.get("items"))
    if missing and not args.ignore_not_found:
        # kubectl reports the missing object before watching for it
        await ctx.client.request("GET", info.object_path(target.names[0], ns))
    if not args.watch_only:
        if table_mode:
            emit(listed, True)
        else:
            for item in listed.get("items") or []:
                emit(item, True)
    rv = (listed.get("metadata") or {}).get("resourceVersion") or ""
    path = info.collection_path(ns)
    while True:
        query = {**params, "resourceVersion": rv or None, "allowWatchBookmarks": "true"}
        started = time.monotonic()
        async for etype, obj in ctx.client.watch_events(path, query, accept=accept):
            meta_rv = (obj.get("metadata") or {}).get("resourceVersion")
            if meta_rv:
                rv = meta_rv
            if etype == "BOOKMARK":
                continue
            if table_mode and obj.get("kind") != "Table":
                continue
            emit(obj, args.watch_only)
        if time.monotonic() - started < 1.0:
            await asyncio.sleep(1.0)  # a server that ends watches at once is not asked again in a tight loop
