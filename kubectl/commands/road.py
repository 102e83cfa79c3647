"""`mkubectl road TYPE/NAME [-n NS] [--follow] [-o json]`: the road of an object (issue 15), as the road
server answers it through the apiserver (`road.minik8s.io/v1alpha1`).

The object is read first, so a missing one gives kubectl's NotFound line (`Error from server (NotFound):
deployments.apps "x" not found`) and exit code 1. A road still in progress is printed live, one row per step
as it is received (rows aligned as `kubectl get -w` aligns its rows), and, once the road is Done, once more
as a finished table; a Done road is printed as the finished table at once. `--follow` streams new steps
for as long as it runs. Columns: OFFSET from the road's first step, DURATION, LANE (who: the user of an
API request, else the component and its node), OBJECT (indented by ownership: a Deployment's ReplicaSets,
their Pods), STEP (indented under the step it is part of) and DETAILS (a watch delivery's delay, an SLO
mark, the step's attributes). `-o json`: the Road object; with `--follow` its watch events, one per line.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kubectl.context import Context
from kubectl.errors import CommandError
from kubectl.printers import go_json
from kubectl.resources import targets_from_args
from kubectl.tabwriter import TabWriter, tabbed
from machinery.api.resources import ResourceInfo
from machinery.api.road_v1alpha1 import GROUP_VERSION, flatten
from machinery.types import Obj

HEADER = "OFFSET\tDURATION\tLANE\tOBJECT\tSTEP\tDETAILS"
DETAIL_WIDTH = 120  # details are cut here in tables (-o json has them all)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("road", parents=[common], help="show the road of an object: every step, who took it, when")
    p.add_argument("target", nargs="+", metavar="TYPE/NAME | TYPE NAME")
    p.add_argument("-f", "--follow", action="store_true", help="keep streaming new steps")
    p.add_argument("-o", "--output", default="", help="json")
    p.set_defaults(run=run)


def road_path(info: ResourceInfo, namespace: str | None, name: str | None = None) -> str:
    path = f"/apis/{GROUP_VERSION}"
    if info.namespaced and namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{info.plural}"
    return f"{path}/{name}" if name else path


def seconds(value: float | None) -> str:
    if value is None:
        return ""
    if value < 1:
        return f"{value * 1000:.0f}ms" if value >= 0.0005 or value == 0 else f"{value * 1e6:.0f}µs"
    return f"{value:.2f}s"


def details(step: Obj) -> str:
    parts: list[str] = []
    if step.get("delay") is not None:
        parts.append(f"delay={seconds(step['delay'])}")
    slo = step.get("slo")
    if slo:
        mark = "met" if slo.get("met") else "MISSED"
        parts.append(f"SLO {slo.get('name')} ≤{slo.get('limitSeconds')}s: {seconds(slo.get('seconds'))} {mark}")
    for key, value in (step.get("details") or {}).items():
        short = key.removeprefix("k8s.").removeprefix("object.")
        parts.append(f"{short}={value}")
    text = " ".join(parts).replace("\t", " ").replace("\n", " ")
    return text if len(text) <= DETAIL_WIDTH else text[:DETAIL_WIDTH - 1] + "…"


def row(step: Obj) -> str:
    obj = step.get("object") or {}
    who = f"{'  ' * int(step.get('depth') or 0)}{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}"
    what = f"{'  ' * int(step.get('level') or 0)}{step.get('step', '')}"
    offset = step.get("offset")
    return "\t".join([f"+{offset:.3f}s" if offset is not None else "", seconds(step.get("duration")),
                      str(step.get("lane", "")), who, what, details(step)])


def table(road: Obj) -> str:
    lines = [HEADER, *(row(st) for st in flatten(road))]
    return tabbed("\n".join(lines) + "\n", padding=3)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    output = args.output.strip()
    if output not in ("", "json"):
        raise CommandError(f'unable to match a printer suitable for the output format "{output}", allowed formats '
                           "are: json")
    targets = await targets_from_args(ctx.resolver, list(args.target))
    if len(targets) != 1 or len(targets[0].names) != 1:
        raise CommandError("road takes exactly one object: TYPE/NAME or TYPE NAME")
    info, name = targets[0].info, targets[0].names[0]
    namespace = ctx.ns_for(info)
    await ctx.client.request("GET", info.object_path(name, namespace))  # kubectl's NotFound, RBAC on the object
    road = await ctx.client.request("GET", road_path(info, namespace, name))
    done = (road.get("status") or {}).get("phase") == "Done"
    if output == "json" and not args.follow:
        ctx.out.write(go_json(road))
        return 0
    if not args.follow and done:
        ctx.out.write(table(road))
        return 0
    writer = None if output == "json" else TabWriter(ctx.out, padding=3, remember_widths=True)
    if writer is not None:
        writer.write(HEADER + "\n")
    params = {"fieldSelector": f"metadata.name={name}"}
    printed: set[str] = set()
    async for kind, obj in ctx.client.watch_events(road_path(info, namespace), params):
        if writer is None:
            ctx.out.write(json.dumps({"type": kind, "object": obj}) + "\n")
            ctx.out.flush()
        elif obj.get("kind") == "RoadStep" and obj.get("id") not in printed:
            printed.add(str(obj.get("id")))
            writer.write(row(obj) + "\n")
            writer.flush()
        if (not args.follow and obj.get("kind") == "Road"
                and (obj.get("status") or {}).get("phase") == "Done"):
            break
    if writer is not None and not args.follow:
        road = await ctx.client.request("GET", road_path(info, namespace, name))
        ctx.out.write("\n" + table(road))
    return 0
