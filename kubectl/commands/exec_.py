"""`mkubectl exec [-i] [-t] POD [-c CONTAINER] -- COMMAND [ARG...]` over the v5.channel.k8s.io websocket.

Every message carries one stream: the first byte is the channel (0 stdin, 1 stdout, 2 stderr,
3 the final Status, 4 terminal resizes, 255 "close this stream" in v5). The command's exit code
is taken from the Status (`NonZeroExitCode`, cause `ExitCode`) and becomes mkubectl's own, with
kubectl's `command terminated with exit code N` on stderr. With `-t` the local terminal is put in
raw mode and its size is sent at start and on every SIGWINCH.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
from typing import Any

import aiohttp

from kubectl.context import Context
from kubectl.errors import CommandError, ExitCode, RawError
from machinery.api.meta import Status
from machinery.api.resources import resource_for
from machinery.client import ApiError

PODS = resource_for("", "pods")
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("exec", parents=[common], help="execute a command in a container",
                       usage="mkubectl exec [-i] [-t] POD [-c CONTAINER] -- COMMAND [ARG...]")
    p.add_argument("pod", metavar="POD")
    p.add_argument("command_args", nargs="*", metavar="-- COMMAND [ARG...]")
    p.add_argument("-c", "--container", default=None)
    p.add_argument("-i", "--stdin", action="store_true", help="pass stdin to the container")
    p.add_argument("-t", "--tty", action="store_true", help="stdin is a TTY")
    p.add_argument("-q", "--quiet", action="store_true", help="only the remote command's output")
    p.set_defaults(run=run)


def _pick_container(ctx: Context, pod: dict[str, Any], requested: str | None, quiet: bool) -> str:
    spec = pod.get("spec") or {}
    names = [c["name"] for c in spec.get("containers") or []]
    others = [c["name"] for c in (spec.get("initContainers") or []) + (spec.get("ephemeralContainers") or [])]
    name = pod["metadata"]["name"]
    if requested:
        if requested not in names and requested not in others:
            raise CommandError(f"container {requested} not found in pod {name}")
        return requested
    default = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CONTAINER)
    if default in names:
        return str(default)
    if len(names) > 1 and not quiet:
        ctx.warn(f'Defaulted container "{names[0]}" out of: {", ".join(names + others)}')
    return names[0] if names else ""


def exit_code_of(status: dict[str, Any]) -> int:
    """0 for Success; the ExitCode cause of NonZeroExitCode; else raise the failure as an ApiError."""
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                with contextlib.suppress(TypeError, ValueError):
                    return int(cause.get("message"))
        return 1
    parsed = Status.model_validate({k: v for k, v in status.items() if k in Status.model_fields or k in (
        "apiVersion", "kind", "metadata", "status", "message", "reason", "details", "code")})
    raise ApiError(parsed, int(status.get("code") or 500))


class _Terminal:
    """Raw mode for the local terminal while a `-t` session runs."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._saved: Any = None

    def __enter__(self) -> _Terminal:
        import termios
        import tty

        self._saved = termios.tcgetattr(self.fd)
        tty.setraw(self.fd)
        return self

    def __exit__(self, *exc: object) -> None:
        import termios

        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def size(self) -> dict[str, int]:
        cols, rows = os.get_terminal_size(self.fd)
        return {"Width": cols, "Height": rows}


async def _pump_stdin(ws: aiohttp.ClientWebSocketResponse, v5: bool) -> None:
    """Send stdin on channel 0; at its end, v5's close-stream message. The blocking reads run in a
    daemon thread, so a session that ends while stdin is still open does not wait for it."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    def reader() -> None:
        fd = sys.stdin.fileno()
        while True:
            try:
                data = os.read(fd, 32 * 1024)
            except OSError:
                data = b""
            try:
                loop.call_soon_threadsafe(queue.put_nowait, data)
            except RuntimeError:  # the loop is gone: the session is over
                return
            if not data:
                return

    threading.Thread(target=reader, name="mkubectl-stdin", daemon=True).start()
    while True:
        data = await queue.get()
        if not data:
            if v5:
                await ws.send_bytes(bytes([CLOSE, STDIN]))
            return
        await ws.send_bytes(bytes([STDIN]) + data)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    assert PODS is not None
    command = list(args.command_args)
    if not command:
        raise CommandError("you must specify at least one command for the container")
    name = args.pod.split("/", 1)[1] if args.pod.startswith(("pod/", "pods/", "po/")) else args.pod
    pod = await ctx.client.request("GET", PODS.object_path(name, ctx.namespace))
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise CommandError(f"cannot exec into a container in a completed pod; current phase is {phase}")
    if not (pod.get("spec") or {}).get("nodeName"):
        raise CommandError(f"unable to upgrade connection: pod {name} does not have a host assigned")
    container = _pick_container(ctx, pod, args.container, args.quiet)
    tty = args.tty
    if tty and not (args.stdin and sys.stdin.isatty()):
        if not args.quiet:
            ctx.warn("Unable to use a TTY - input is not a terminal or the right kind of file")
        tty = False
    query = [("command", c) for c in command] + [("container", container), ("stdout", "true")]
    if args.stdin:
        query.append(("stdin", "true"))
    if not tty:
        query.append(("stderr", "true"))
    else:
        query.append(("tty", "true"))
    try:
        ws = await ctx.client.websocket(PODS.object_path(name, ctx.namespace, "exec"), query, PROTOCOLS)
    except aiohttp.WSServerHandshakeError as e:
        raise RawError(f"error: unable to upgrade connection: {e.status} {e.message}") from None
    v5 = ws.protocol == "v5.channel.k8s.io"
    status: dict[str, Any] | None = None
    out, err = sys.stdout.buffer, sys.stderr.buffer
    terminal = _Terminal(sys.stdin.fileno()) if tty else None
    tasks: list[asyncio.Future[None]] = []
    try:
        with terminal if terminal is not None else contextlib.nullcontext():
            if terminal is not None:
                await ws.send_bytes(bytes([RESIZE]) + json.dumps(terminal.size()).encode())
                loop = asyncio.get_running_loop()

                def resized() -> None:
                    if terminal is not None:
                        tasks.append(asyncio.ensure_future(
                            ws.send_bytes(bytes([RESIZE]) + json.dumps(terminal.size()).encode())))

                loop.add_signal_handler(signal.SIGWINCH, resized)
            if args.stdin:
                tasks.append(asyncio.create_task(_pump_stdin(ws, v5)))
            async for message in ws:
                if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                    continue
                channel, data = message.data[0], message.data[1:]
                if channel == STDOUT:
                    out.write(data)
                    out.flush()
                elif channel == STDERR:
                    err.write(data)
                    err.flush()
                elif channel == ERROR and data:
                    status = json.loads(data)
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await ws.close()
        if terminal is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_signal_handler(signal.SIGWINCH)
    if status is None:
        return 0
    code = exit_code_of(status)
    if code:
        if not args.quiet:
            ctx.warn(f"command terminated with exit code {code}")
        raise ExitCode(code)
    return 0
