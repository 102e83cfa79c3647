"""`mkubectl logs [-f] [--tail N] [-c C] [-p] [--timestamps] [--since D] POD | TYPE/NAME`.

GET pods/{name}/log, streamed to stdout as it arrives (for `-f` until the server ends it). As
kubectl: the pod is read first so a pod with several containers defaults to its
`kubectl.kubernetes.io/default-container` or its first container (saying so on stderr), and
`deployment/x` or `replicaset/x` means the first of its pods.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kubectl.context import Context
from kubectl.describe import label_selector_string
from kubectl.errors import CommandError
from kubectl.flags import duration
from kubectl.resources import Target, targets_from_args
from machinery.api.resources import resource_for
from machinery.client import ApiError
from machinery.types import Obj

PODS = resource_for("", "pods")
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("logs", parents=[common], help="print the logs of a container in a pod")
    p.add_argument("target", metavar="POD | TYPE/NAME")
    p.add_argument("container_arg", nargs="?", metavar="CONTAINER")
    p.add_argument("-c", "--container", default=None)
    p.add_argument("-f", "--follow", action="store_true", help="stream the logs")
    p.add_argument("--tail", type=int, default=-1, help="lines of recent log to show (-1: all)")
    p.add_argument("-p", "--previous", action="store_true", help="the previous instance of the container")
    p.add_argument("--timestamps", action="store_true", help="prefix each line with its RFC3339 timestamp")
    p.add_argument("--since", type=duration, default=None, help="only logs newer than this (e.g. 5s, 2m)")
    p.add_argument("--limit-bytes", type=int, default=None)
    p.set_defaults(run=run)


async def _pod_for(ctx: Context, target: Target) -> Obj:
    assert PODS is not None
    info, name = target.info, target.names[0]
    if info.kind == "Pod":
        try:
            return await ctx.client.request("GET", PODS.object_path(name, ctx.namespace))
        except ApiError as e:
            if e.is_not_found:  # kubectl's own wording for logs
                raise CommandError(f'error from server (NotFound): pods "{name}" not found in namespace '
                                   f'"{ctx.namespace}"') from None
            raise
    if info.kind not in ("Deployment", "ReplicaSet"):
        raise CommandError(f"cannot get the logs from {info.kind.lower()}")
    owner = await ctx.client.request("GET", info.object_path(name, ctx.namespace))
    selector = label_selector_string((owner.get("spec") or {}).get("selector"))
    listed = await ctx.client.request("GET", PODS.collection_path(ctx.namespace), params={"labelSelector": selector})
    pods = sorted(listed.get("items") or [], key=lambda p: (
        (p.get("status") or {}).get("phase") != "Running", (p.get("metadata") or {}).get("creationTimestamp", "")))
    if not pods:
        raise CommandError(f"timed out waiting for the condition: no pods for {info.kind.lower()}/{name}")
    if len(pods) > 1:
        ctx.warn(f"Found {len(pods)} pods, using pod/{pods[0]['metadata']['name']}")
    return pods[0]


def _container(ctx: Context, pod: Obj, requested: str | None) -> str:
    spec = pod.get("spec") or {}
    names = [c["name"] for c in spec.get("containers") or []]
    others = [c["name"] for c in (spec.get("initContainers") or []) + (spec.get("ephemeralContainers") or [])]
    pod_name = (pod.get("metadata") or {}).get("name", "")
    if requested:
        if requested not in names and requested not in others:
            raise CommandError(f"container {requested} is not valid for pod {pod_name}")
        return requested
    default = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CONTAINER)
    if default in names:
        return str(default)
    if len(names) > 1:
        ctx.warn(f'Defaulted container "{names[0]}" out of: {", ".join(names + others)}')
    return names[0] if names else ""


async def run(ctx: Context, args: argparse.Namespace) -> int:
    assert PODS is not None
    if "/" in args.target:
        targets = await targets_from_args(ctx.resolver, [args.target])
    else:
        targets = [Target(PODS, [args.target])]
    pod = await _pod_for(ctx, targets[0])
    container = _container(ctx, pod, args.container or args.container_arg)
    params: dict[str, Any] = {"container": container}
    if args.follow:
        params["follow"] = "true"
    if args.tail >= 0:
        params["tailLines"] = args.tail
    if args.previous:
        params["previous"] = "true"
    if args.timestamps:
        params["timestamps"] = "true"
    if args.since is not None:
        params["sinceSeconds"] = max(1, int(args.since))
    if args.limit_bytes:
        params["limitBytes"] = args.limit_bytes
    name = pod["metadata"]["name"]
    out = sys.stdout.buffer if ctx.out is sys.stdout else None
    async for chunk in ctx.client.stream(PODS.object_path(name, ctx.namespace, "log"), params):
        if out is not None:
            out.write(chunk)
            out.flush()
        else:
            ctx.out.write(chunk.decode(errors="replace"))
            ctx.out.flush()
    return 0
