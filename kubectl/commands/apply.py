"""`mkubectl apply -f FILE|DIR|-`: client-side apply (default) or `--server-side` (see kubectl/apply.py)."""

from __future__ import annotations

import argparse
from typing import Any

from kubectl import apply as apply_logic


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("apply", parents=[common], help="apply a configuration to resources by file or stdin",
                       description="Create or update resources from manifests, keeping the last-applied annotation.")
    p.add_argument("-f", "--filename", action="append", default=[], help="a file, directory or - (stdin)")
    p.add_argument("-R", "--recursive", action="store_true", help="process directories recursively")
    p.add_argument("-o", "--output", choices=["name"], help="print only resource/name")
    p.add_argument("--dry-run", nargs="?", const="client", default="none", choices=["none", "client", "server"])
    p.add_argument("--server-side", action="store_true", help="server-side apply (PATCH application/apply-patch)")
    p.add_argument("--force-conflicts", action="store_true", help="server-side apply: take over conflicting fields")
    p.add_argument("--field-manager", default="", help="the manager name recorded for this apply")
    p.add_argument("--validate", nargs="?", const="strict", default="strict",
                   help="strict (default), warn, ignore: how the server treats unknown or duplicate fields")
    p.set_defaults(run=apply_logic.run)
