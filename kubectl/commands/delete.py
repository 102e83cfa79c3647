"""`mkubectl delete TYPE NAME... | TYPE/NAME... | -f FILE | TYPE -l SELECTOR | TYPE --all`.

Each object is deleted with DeleteOptions `{"propagationPolicy": "Background"}` (`Foreground` or
`Orphan` per `--cascade`), `deployment.apps "x" deleted` printed as soon as the server accepts it;
then, with `--wait` (the default), mkubectl waits until every deleted object is really gone
(finalizers run, a pod's kubelet confirmed), as kubectl does.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from typing import Any

from kubectl.context import Context
from kubectl.errors import CommandError, format_error, with_source
from kubectl.flags import duration
from kubectl.manifests import load
from kubectl.printers import kind_name
from kubectl.resources import targets_from_args
from kubectl.waiting import wait_for_deletion
from machinery.api.resources import ResourceInfo
from machinery.client import ApiError

CASCADE = {"background": "Background", "true": "Background", "foreground": "Foreground", "orphan": "Orphan",
           "false": "Orphan"}


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("delete", parents=[common], help="delete resources by name, file or label selector")
    p.add_argument("resources", nargs="*", metavar="TYPE NAME... | TYPE/NAME...")
    p.add_argument("-f", "--filename", action="append", default=[])
    p.add_argument("-R", "--recursive", action="store_true")
    p.add_argument("-l", "--selector", default=None)
    p.add_argument("--field-selector", default=None)
    p.add_argument("--all", action="store_true", help="every object of the type(s) in the namespace")
    p.add_argument("-A", "--all-namespaces", action="store_true")
    p.add_argument("--cascade", default="background", type=str.lower, choices=sorted(CASCADE),
                   help="background (default), foreground or orphan")
    p.add_argument("--grace-period", type=int, default=-1, help="seconds to let pods terminate (-1: theirs)")
    p.add_argument("--now", action="store_true", help="grace period 1")
    p.add_argument("--force", action="store_true", help="with --grace-period=0: do not wait for the kubelet")
    p.add_argument("--wait", default="true", type=str.lower, choices=["true", "false"], nargs="?", const="true",
                   help="wait until the objects are gone (default true)")
    p.add_argument("--timeout", type=duration, default=0.0, help="how long to wait (0: a week)")
    p.add_argument("--ignore-not-found", action="store_true")
    p.add_argument("-o", "--output", choices=["name"])
    p.set_defaults(run=run)


@dataclass
class _Victim:
    info: ResourceInfo
    namespace: str | None
    name: str
    source: str = ""


async def _victims(ctx: Context, args: argparse.Namespace) -> list[_Victim]:
    if args.filename:
        if args.resources:
            raise CommandError("there is no need to specify a resource type as a separate argument when passing "
                               "arguments in resource/name form")
        victims = []
        for manifest in load(args.filename, recursive=args.recursive):
            info = await ctx.resolver.for_object(manifest.obj)
            if info is None:
                raise CommandError(f'resource mapping not found for kind "{manifest.obj.get("kind")}" in version '
                                   f'"{manifest.obj.get("apiVersion")}"')
            meta = manifest.obj.get("metadata") or {}
            ns = (meta.get("namespace") or ctx.namespace) if info.namespaced else None
            victims.append(_Victim(info, ns, str(meta.get("name") or ""), manifest.source))
        return victims
    if not args.resources:
        raise CommandError("You must provide one or more resources by argument or filename.")
    targets = await targets_from_args(ctx.resolver, args.resources)
    victims = []
    for target in targets:
        if target.names:
            if args.selector or args.all:
                raise CommandError("name cannot be provided when a selector is specified")
            victims.extend(_Victim(target.info, ctx.ns_for(target.info), n) for n in target.names)
            continue
        if not (args.selector or args.all or args.field_selector):
            raise CommandError("resource(s) were provided, but no name was specified")
        ns = ctx.ns_for(target.info, args.all_namespaces)
        listed = await ctx.client.request("GET", target.info.collection_path(ns), params={
            "labelSelector": args.selector, "fieldSelector": args.field_selector})
        for item in listed.get("items") or []:
            meta = item.get("metadata") or {}
            victims.append(_Victim(target.info, meta.get("namespace") if target.info.namespaced else None,
                                   meta.get("name", "")))
    return victims


async def run(ctx: Context, args: argparse.Namespace) -> int:
    victims = await _victims(ctx, args)
    grace = args.grace_period
    if args.now:
        grace = 1
    if args.force and grace == -1:
        grace = 0
    if args.force and grace == 0:
        ctx.warn("Warning: Immediate deletion does not wait for confirmation that the running resource has been "
                 "terminated. The resource may continue to run on the cluster indefinitely.")
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": CASCADE[args.cascade]}
    if grace >= 0:
        body["gracePeriodSeconds"] = grace
    errors: list[BaseException] = []
    deleted: list[tuple[_Victim, str]] = []
    for victim in victims:
        try:
            answer = await ctx.client.request("DELETE", victim.info.object_path(victim.name, victim.namespace),
                                              body=body)
        except ApiError as e:
            if not (e.is_not_found and args.ignore_not_found):
                errors.append(with_source(e, "deleting", victim.source))
            continue
        answer = answer or {}
        if answer.get("kind") == "Status":
            uid = str(((answer.get("details") or {}).get("uid")) or "")
        else:
            uid = str((answer.get("metadata") or {}).get("uid") or "")
        if args.output == "name":
            ctx.print(f"{kind_name(victim.info)}/{victim.name}")
        else:
            ctx.print(f'{kind_name(victim.info)} "{victim.name}" deleted')
        deleted.append((victim, uid))
    if not victims and not args.ignore_not_found:
        ctx.print("No resources found")
    if deleted and args.wait == "true" and not (args.force and grace == 0):
        timeout = args.timeout or 7 * 24 * 3600.0
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(wait_for_deletion(ctx, v.info, v.namespace, v.name, uid) for v, uid in deleted))
        except TimeoutError:
            pending = ", ".join(f"{v.info.plural}/{v.name}" for v, _ in deleted)
            errors.append(CommandError(f"timed out waiting for the condition on {pending}"))
    for error in errors:
        ctx.warn(format_error(error, ctx.client.server))
    return 1 if errors else 0
