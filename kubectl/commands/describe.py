"""`mkubectl describe TYPE [NAME_PREFIX]`, `TYPE/NAME`, `-l`, `-A`, `-f` (see kubectl/describe.py).

As kubectl: a name that does not exist is tried as a prefix of the objects' names before the
NotFound error is reported; several descriptions are separated by two blank lines.
"""

from __future__ import annotations

import argparse
from typing import Any

from kubectl.context import Context
from kubectl.describe import describe
from kubectl.errors import CommandError, format_error
from kubectl.manifests import load
from kubectl.resources import Target, targets_from_args
from machinery.api.resources import ResourceInfo
from machinery.client import ApiError
from machinery.types import Obj


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("describe", parents=[common], help="show details of a resource or group of resources")
    p.add_argument("resources", nargs="*", metavar="TYPE [NAME_PREFIX] | TYPE/NAME")
    p.add_argument("-l", "--selector", default=None, help="label selector")
    p.add_argument("-A", "--all-namespaces", action="store_true")
    p.add_argument("-f", "--filename", action="append", default=[])
    p.add_argument("-R", "--recursive", action="store_true")
    p.set_defaults(run=run)


async def _list(ctx: Context, info: ResourceInfo, namespace: str | None, selector: str | None) -> list[Obj]:
    items: list[Obj] = []
    token = ""
    while True:
        page = await ctx.client.request("GET", info.collection_path(namespace),
                                        params={"labelSelector": selector, "limit": 500, "continue": token or None})
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


async def _objects(ctx: Context, args: argparse.Namespace, target: Target
                   ) -> tuple[list[Obj], list[BaseException], bool]:
    """(objects, errors, whether they were found by name prefix)."""
    info = target.info
    if not target.names:
        return await _list(ctx, info, ctx.ns_for(info, args.all_namespaces), args.selector), [], False
    found: list[Obj] = []
    errors: list[BaseException] = []
    by_prefix = False
    for name in target.names:
        try:
            found.append(await ctx.client.request("GET", info.object_path(name, ctx.ns_for(info))))
        except ApiError as e:
            if not e.is_not_found or len(target.names) != 1:
                errors.append(e)
                continue
            # kubectl describe TYPE PREFIX: every object whose name starts with it
            matching = [o for o in await _list(ctx, info, ctx.ns_for(info), args.selector)
                        if str((o.get("metadata") or {}).get("name", "")).startswith(name)]
            if not matching:
                errors.append(e)
            found.extend(matching)
            by_prefix = True
    return found, errors, by_prefix


async def run(ctx: Context, args: argparse.Namespace) -> int:
    if args.filename:
        targets: list[Target] = []
        for manifest in load(args.filename, recursive=args.recursive):
            info = await ctx.resolver.for_object(manifest.obj)
            if info is None:
                raise CommandError(f'no matches for kind "{manifest.obj.get("kind")}"')
            targets.append(Target(info, [str((manifest.obj.get("metadata") or {}).get("name") or "")]))
    else:
        if not args.resources:
            raise CommandError("Required resource not specified.")
        targets = await targets_from_args(ctx.resolver, args.resources)
    first = True
    errors: list[BaseException] = []
    found_any = False
    for target in targets:
        objects, failures, by_prefix = await _objects(ctx, args, target)
        errors.extend(failures)
        for obj in objects:
            found_any = True
            text = await describe(ctx, target.info, obj)
            if by_prefix:  # kubectl's DescribeMatchingResources: each one followed by a newline
                ctx.out.write(text + "\n")
            else:
                ctx.out.write(text if first else "\n\n" + text)
            ctx.out.flush()
            first = False
    if not found_any and not errors:
        if all(t.info.namespaced for t in targets) and not args.all_namespaces:
            ctx.warn(f"No resources found in {ctx.namespace} namespace.")
        else:
            ctx.warn("No resources found")
    for error in errors:
        ctx.warn(format_error(error, ctx.client.server))
    return 1 if errors else 0
