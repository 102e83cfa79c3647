"""`mkubectl rollout status|history|undo|restart|pause|resume TYPE NAME | TYPE/NAME` (kubectl/rollout.py)."""

from __future__ import annotations

import argparse
from typing import Any

from kubectl import rollout
from kubectl.context import Context
from kubectl.flags import duration


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("rollout", parents=[common], help="manage the rollout of a deployment")
    verbs = p.add_subparsers(dest="rollout_command", metavar="SUBCOMMAND", parser_class=type(p))

    def verb(name: str, help_text: str) -> argparse.ArgumentParser:
        parser = verbs.add_parser(name, parents=[common], help=help_text)
        parser.add_argument("resources", nargs="+", metavar="TYPE NAME | TYPE/NAME")
        return parser

    status = verb("status", "show the status of the rollout until it is done")
    status.add_argument("-w", "--watch", default="true", type=str.lower, choices=["true", "false"], nargs="?",
                        const="true", help="watch until the rollout is done (default true)")
    status.add_argument("--timeout", type=duration, default=0.0, help="give up after this long (0: never)")
    status.add_argument("--revision", type=int, default=0, help="the revision to wait for")
    status.set_defaults(run=_status)

    history = verb("history", "view the rollout history")
    history.add_argument("--revision", type=int, default=0, help="the pod template of this revision")
    history.set_defaults(run=rollout.history)

    undo = verb("undo", "roll back to a previous revision")
    undo.add_argument("--to-revision", type=int, default=0, help="the revision to roll back to (0: the previous)")
    undo.set_defaults(run=rollout.undo)

    verb("restart", "restart the pods of a deployment").set_defaults(run=rollout.restart)
    verb("pause", "pause a deployment's rollouts").set_defaults(run=_pause)
    verb("resume", "resume a paused deployment").set_defaults(run=_resume)


async def _status(ctx: Context, args: argparse.Namespace) -> int:
    args.watch = args.watch == "true"
    return await rollout.status(ctx, args)


async def _pause(ctx: Context, args: argparse.Namespace) -> int:
    return await rollout.pause_or_resume(ctx, args, True)


async def _resume(ctx: Context, args: argparse.Namespace) -> int:
    return await rollout.pause_or_resume(ctx, args, False)
