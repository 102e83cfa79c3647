"""`mkubectl config view [--raw] [--minify]`, `config current-context`: read-only kubeconfig views."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from kubectl.errors import CommandError
from kubectl.printers import go_yaml
from machinery.kubeconfig import KubeconfigError, find_kubeconfig

_SECRET_DATA = ("certificate-authority-data", "client-certificate-data", "client-key-data")


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("config", parents=[common], help="view the kubeconfig")
    verbs = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND", parser_class=type(p))
    view = verbs.add_parser("view", parents=[common], help="print the kubeconfig (secrets redacted)")
    view.add_argument("--raw", action="store_true", help="show certificates and tokens")
    view.add_argument("--minify", action="store_true", help="only what the current context uses")
    view.set_defaults(run=run_view, needs_server=False)
    current = verbs.add_parser("current-context", parents=[common], help="print the current context's name")
    current.set_defaults(run=run_current, needs_server=False)


def _load(args: argparse.Namespace) -> dict[str, Any]:
    try:
        path = find_kubeconfig(args.kubeconfig)
        doc = yaml.safe_load(path.read_text()) or {}
    except (KubeconfigError, OSError, yaml.YAMLError) as e:
        raise CommandError(str(e)) from None
    if not isinstance(doc, dict):
        raise CommandError(f"{path}: not a kubeconfig")
    return doc


def _redact(doc: dict[str, Any]) -> None:
    for section, field in (("clusters", "cluster"), ("users", "user")):
        for entry in doc.get(section) or []:
            body = entry.get(field) if isinstance(entry, dict) else None
            if not isinstance(body, dict):
                continue
            for key in _SECRET_DATA:
                if key in body:
                    body[key] = "DATA+OMITTED"
            if "token" in body:
                body["token"] = "REDACTED"


def _minify(doc: dict[str, Any], context: str | None) -> None:
    name = context or doc.get("current-context")
    contexts = [c for c in doc.get("contexts") or [] if isinstance(c, dict) and c.get("name") == name]
    if not contexts:
        raise CommandError(f'context "{name}" does not exist')
    ctx = contexts[0].get("context") or {}
    doc["contexts"] = contexts
    doc["current-context"] = name
    doc["clusters"] = [c for c in doc.get("clusters") or [] if c.get("name") == ctx.get("cluster")]
    doc["users"] = [u for u in doc.get("users") or [] if u.get("name") == ctx.get("user")]


async def run_view(_ctx: Any, args: argparse.Namespace) -> int:
    doc = _load(args)
    if args.minify:
        _minify(doc, args.context)
    if not args.raw:
        _redact(doc)
    doc.setdefault("preferences", {})
    sys.stdout.write(go_yaml(doc))
    return 0


async def run_current(_ctx: Any, args: argparse.Namespace) -> int:
    doc = _load(args)
    name = doc.get("current-context")
    if not name:
        raise CommandError("current-context is not set")
    print(name)
    return 0
