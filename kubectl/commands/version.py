"""`mkubectl version [--client] [-o json|yaml]`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kubectl.context import Context
from kubectl.printers import go_json, go_yaml
from machinery.client import KUBE_VERSION

CLIENT_VERSION = {
    "major": KUBE_VERSION.lstrip("v").split(".")[0],
    "minor": KUBE_VERSION.split(".")[1],
    "gitVersion": f"{KUBE_VERSION}-mkubectl",
    "platform": f"{sys.platform}/python{sys.version_info.major}.{sys.version_info.minor}",
}


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("version", parents=[common], help="print the client and server version information")
    p.add_argument("--client", action="store_true", help="the client version only (no server needed)")
    p.add_argument("-o", "--output", choices=["json", "yaml"])
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    doc: dict[str, Any] = {"clientVersion": CLIENT_VERSION}
    if not args.client:
        doc["serverVersion"] = await ctx.client.request("GET", "/version")
    if args.output == "json":
        ctx.out.write(go_json(doc))
    elif args.output == "yaml":
        ctx.out.write(go_yaml(doc))
    else:
        ctx.print(f"Client Version: {CLIENT_VERSION['gitVersion']}")
        if "serverVersion" in doc:
            ctx.print(f"Server Version: {doc['serverVersion'].get('gitVersion', '')}")
    return 0
