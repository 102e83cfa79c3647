"""`mkubectl scale TYPE NAME --replicas=N [--current-replicas=M] [--resource-version=V]`.

As kubectl's scaler: without preconditions one merge PATCH of the scale subresource
(`{"spec":{"replicas":N}}`); with them, GET the Scale, check, and PUT it back (the resourceVersion
it was read at guards the write).
"""

from __future__ import annotations

import argparse
from typing import Any

from kubectl.context import Context
from kubectl.errors import CommandError, format_error
from kubectl.printers import resource_name
from kubectl.resources import Target, targets_from_args
from machinery.client import ApiError, InvalidRequest


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("scale", parents=[common], help="set a new size for a deployment or replica set")
    p.add_argument("resources", nargs="*", metavar="TYPE NAME | TYPE/NAME")
    p.add_argument("--replicas", type=int, default=None, required=False)
    p.add_argument("--current-replicas", type=int, default=-1, help="precondition: the current size")
    p.add_argument("--resource-version", default="", help="precondition: the current resourceVersion")
    p.add_argument("-l", "--selector", default=None)
    p.add_argument("--all", action="store_true")
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    if args.replicas is None or args.replicas < 0:
        raise CommandError("The --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0")
    targets: list[Target] = await targets_from_args(ctx.resolver, args.resources)
    pairs: list[tuple[Any, str]] = []
    for target in targets:
        if target.names:
            pairs.extend((target.info, n) for n in target.names)
        elif args.selector or args.all:
            listed = await ctx.client.request("GET", target.info.collection_path(ctx.ns_for(target.info)),
                                              params={"labelSelector": args.selector})
            pairs.extend((target.info, i["metadata"]["name"]) for i in listed.get("items") or [])
        else:
            raise CommandError("resource(s) were provided, but no name was specified")
    errors: list[BaseException] = []
    for info, name in pairs:
        if "scale" not in info.subresources:
            errors.append(CommandError(f'cannot scale {info.plural}: no scale subresource'))
            continue
        path = info.object_path(name, ctx.ns_for(info), "scale")
        try:
            if args.current_replicas >= 0 or args.resource_version:
                scale = await ctx.client.request("GET", path)
                current = (scale.get("spec") or {}).get("replicas", 0)
                rv = (scale.get("metadata") or {}).get("resourceVersion", "")
                if args.current_replicas >= 0 and current != args.current_replicas:
                    raise CommandError(f"Expected replicas to be {args.current_replicas}, was {current}")
                if args.resource_version and rv != args.resource_version:
                    raise CommandError(f"Expected resource version to be {args.resource_version}, was {rv}")
                scale.setdefault("spec", {})["replicas"] = args.replicas
                await ctx.client.request("PUT", path, body=scale)
            else:
                await ctx.client.request("PATCH", path, body={"spec": {"replicas": args.replicas}},
                                         content_type="application/merge-patch+json")
        except (ApiError, CommandError, InvalidRequest) as e:
            errors.append(e)
            continue
        ctx.print(f"{resource_name(info, name)} scaled")
    for error in errors:
        ctx.warn(format_error(error, ctx.client.server))
    return 1 if errors else 0
