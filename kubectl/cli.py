"""mkubectl's command line: argparse parsers, the connection set-up, and the one place errors become
a single line on stderr and an exit code (never a traceback).

Global flags (`--kubeconfig`, `--context`, `-n`, `-s`, `--request-timeout`) may stand before or
after the command name, as with kubectl. Each command lives in kubectl/commands/<name>.py and
registers its parser with `register(subparsers, common)`; it runs as `async run(ctx, args) -> int`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, NoReturn, TypeVar, overload

from kubectl.client import USER_AGENT, KubectlClient
from kubectl.commands import COMMANDS
from kubectl.context import Context
from kubectl.errors import ExitCode, format_error
from kubectl.flags import duration
from machinery.kubeconfig import ClientConfig, KubeconfigError, load_kubeconfig

PROG = "mkubectl"
Runner = Callable[[Context, argparse.Namespace], Awaitable[int]]


_N = TypeVar("_N")  # a namespace object of the caller's type, as argparse's own


class UsageError(Exception):
    """A command line mkubectl cannot make sense of."""


class Parser(argparse.ArgumentParser):
    """argparse that reports `error: ...` and exit code 1 as kubectl does, instead of usage and 2, and
    lets a command's flags and arguments mix in any order (`describe lease -n x name`), as cobra does."""

    _intermixing = False

    @overload
    def parse_known_args(self, args: Iterable[str] | None = None, namespace: None = None
                         ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, args: Iterable[str] | None, namespace: _N) -> tuple[_N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...

    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        if self._intermixing or self._subparsers is not None:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return super().parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def error(self, message: str) -> NoReturn:
        unknown = re.match(r"argument (?:COMMAND|SUBCOMMAND): invalid choice: '([^']*)'", message)
        if unknown:
            raise UsageError(f'unknown command "{unknown.group(1)}" for "{self.prog}"')
        raise UsageError(message)


def _global_flags(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    default: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument("--kubeconfig", default=default, help="path to the kubeconfig file")
    parser.add_argument("--context", default=default, help="the kubeconfig context to use")
    parser.add_argument("-n", "--namespace", default=default, help="the namespace scope of this request")
    parser.add_argument("-s", "--server", default=default, help="the address and port of the API server")
    parser.add_argument("--request-timeout", default=default, type=duration,
                        help="how long to wait for a single server request (e.g. 30s); 0 waits forever")
    parser.add_argument("-v", "--v", default=default, type=int, help="log level (accepted, ignored)")


def build_parser() -> Parser:
    parser = Parser(prog=PROG, description="mkubectl controls the minik8s cluster manager (a mini kubectl).")
    _global_flags(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    _global_flags(common, suppress=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in COMMANDS:
        module.register(sub, common)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parsers of `parser`'s commands, by name (its subparsers action's choices)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def client_config(args: argparse.Namespace) -> ClientConfig:
    """The kubeconfig's connection, or just --server when there is no kubeconfig."""
    try:
        config = load_kubeconfig(args.kubeconfig, context=args.context, user_agent=USER_AGENT)
    except KubeconfigError:
        if args.server and not args.kubeconfig:
            config = ClientConfig(server=args.server.rstrip("/"), user_agent=USER_AGENT)
        elif args.kubeconfig or os.environ.get("KUBECONFIG") or args.context:
            raise
        else:
            # kubectl's behaviour without any kubeconfig: talk to localhost:8080
            config = ClientConfig(server="http://localhost:8080", user_agent=USER_AGENT)
    if args.server:
        server = args.server if "://" in args.server else f"http://{args.server}"
        config = replace(config, server=server.rstrip("/"))
    return config


async def _run(runner: Runner, args: argparse.Namespace, config: ClientConfig) -> int:
    # kubectl waits forever by default; mkubectl gives a single request a minute unless told (0: forever)
    timeout = 60.0 if args.request_timeout is None else (args.request_timeout or 7 * 24 * 3600.0)
    client = KubectlClient(config, timeout=timeout, verbosity=args.v or 0)
    namespace = args.namespace or config.namespace or "default"
    ctx = Context(client=client, namespace=namespace, explicit_namespace=bool(args.namespace))
    try:
        return await runner(ctx, args)
    finally:
        with contextlib.suppress(Exception):
            await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    server = ""
    try:
        parser = build_parser()
        tail: list[str] | None = None
        if "--" in argv:  # `exec POD -- COMMAND ARGS`: everything after -- belongs to the command
            cut = argv.index("--")
            argv, tail = argv[:cut], argv[cut + 1:]
        try:
            args = parser.parse_args(argv)
            if tail is not None:
                if not hasattr(args, "command_args"):
                    raise UsageError(f"unexpected arguments after --: {' '.join(tail)}")
                if args.command_args:
                    raise UsageError("exec [POD] [COMMAND] is not supported anymore. "
                                     "Use exec [POD] -- [COMMAND] instead")
                args.command_args = tail
        except UsageError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        runner: Runner | None = getattr(args, "run", None)
        if runner is None:  # `mkubectl` or `mkubectl rollout` alone: the help of what was typed
            (_subcommands(parser).get(args.command) or parser).print_help()
            return 0
        if not getattr(args, "needs_server", True):
            return asyncio.run(runner(None, args))  # type: ignore[arg-type]
        config = client_config(args)
        server = config.server
        return asyncio.run(_run(runner, args, config))
    except ExitCode as e:
        return e.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        with contextlib.suppress(Exception):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 — the pipe is gone; silence the final flush
        return 1
    except SystemExit as e:  # argparse's --help
        return e.code if isinstance(e.code, int) else 0
    except BaseException as e:
        if os.environ.get("MKUBECTL_TRACEBACK"):
            raise
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        print(format_error(e, server), file=sys.stderr)
        return 1
