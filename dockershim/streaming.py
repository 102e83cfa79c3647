"""The shim's streaming server for Exec, Attach and PortForward (upstream pkg/kubelet/cri/streaming/server.go
with its remotecommand and portforward websocket protocols, as cri-dockerd serves them).

`Exec` hands out a one-time URL `http://<address>:<port>/exec/<token>` (a token lives 1 minute,
as upstream's request cache keeps it); the client — the kubelet relaying kubectl — upgrades it to
a websocket with subprotocol v5.channel.k8s.io, v4.channel.k8s.io or channel.k8s.io. Every binary
message starts with its channel: 0 stdin, 1 stdout, 2 stderr, 3 the final Status, 4 terminal
resize; in v5, `[255, 0]` closes stdin. The exit code travels in the Status on channel 3 (reason
NonZeroExitCode), as the kubelet's server has always framed it.

`Attach` hands out `/attach/<token>`: the same channels over Docker's attach to the container's own
stdin/stdout/stderr (stdin only if the container was created with `stdin: true`); it ends with a
Success Status when the container's output ends (upstream ServeAttach). `PortForward` hands out
`/portforward/<token>`, served by dockershim/portforward.py inside the sandbox's network namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiodocker
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from dockershim.portforward import (
    PORTFORWARD_PROTOCOLS,
    connect_in_netns,
    parse_ports,
    port_prefix,
    pump_socket,
)
from machinery.cri import api_pb2 as cri
from machinery.uvicorn_server import QuietServer

log = logging.getLogger(__name__)

EXEC_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io")
STDIN_CH, STDOUT_CH, STDERR_CH, ERROR_CH, RESIZE_CH, CLOSE_CH = 0, 1, 2, 3, 4, 255
TOKEN_TTL = 60.0  # upstream's CacheTTL


def exec_status(exit_code: int | None, command: list[str], error: str | None = None) -> dict[str, Any]:
    """The Status sent on the error channel when the command ends (client-go reads exit codes from it)."""
    if error:
        return {"metadata": {}, "status": "Failure", "message": error, "reason": "InternalError", "code": 500}
    if not exit_code:
        return {"metadata": {}, "status": "Success"}
    # containerd's CRI words it (error executing command %v, exit code %d): Go prints the argv as [a b c]
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command [{' '.join(command)}], "
                       f"exit code {exit_code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(exit_code)}]}}


@dataclass
class PendingExec:
    container_id: str  # for a port-forward, the sandbox's
    request: cri.ExecRequest | cri.AttachRequest | cri.PortForwardRequest
    expires: float


class _Server(QuietServer):
    def install_signal_handlers(self) -> None:  # the shim's own handlers stay
        pass


class StreamingServer:
    def __init__(self, docker: aiodocker.Docker, address: str = "127.0.0.1", port: int = 0) -> None:
        self.docker = docker
        self.address = address
        self.port = port
        self._pending: dict[str, PendingExec] = {}
        self.app = Starlette(routes=[WebSocketRoute("/exec/{token}", self.exec_ws),
                                     WebSocketRoute("/attach/{token}", self.attach_ws),
                                     WebSocketRoute("/portforward/{token}", self.portforward_ws)])
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.address, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off",
                                ws="websockets-sansio", proxy_headers=False, timeout_graceful_shutdown=1)
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="streaming-server")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the streaming server did not start")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 3)

    def register(self, container_id: str,
                 request: cri.ExecRequest | cri.AttachRequest | cri.PortForwardRequest) -> str:
        now = time.monotonic()
        for token in [t for t, p in self._pending.items() if p.expires < now]:
            del self._pending[token]
        token = secrets.token_urlsafe(12)
        self._pending[token] = PendingExec(container_id, request, now + TOKEN_TTL)
        kind = {cri.ExecRequest: "exec", cri.AttachRequest: "attach"}.get(type(request), "portforward")
        return f"{self.base_url}/{kind}/{token}"

    async def _take(self, websocket: WebSocket, kind: type[Any],
                    protocols: tuple[str, ...]) -> tuple[PendingExec, str] | None:
        """The pending request of the URL's token and the subprotocol chosen, or None once refused."""
        offered = list(websocket.scope.get("subprotocols") or [])
        protocol = next((p for p in protocols if p in offered), None)
        pending = self._pending.pop(websocket.path_params["token"], None)
        if pending is None or pending.expires < time.monotonic() or not isinstance(pending.request, kind):
            await _deny(websocket, 404, "NotFound", "session not found or expired")
            return None
        if protocol is None and (offered or kind is not cri.PortForwardRequest):
            await _deny(websocket, 400, "BadRequest",
                        f"no supported subprotocol among {offered}; expected one of {list(protocols)}")
            return None
        return pending, protocol or ""

    async def exec_ws(self, websocket: WebSocket) -> None:
        taken = await self._take(websocket, cri.ExecRequest, EXEC_PROTOCOLS)
        if taken is None:
            return
        pending, protocol = taken
        req = pending.request
        assert isinstance(req, cri.ExecRequest)
        command = list(req.cmd)
        try:
            execution = await self.docker.containers.container(pending.container_id).exec(
                command, stdin=req.stdin, stdout=req.stdout or req.tty, stderr=req.stderr and not req.tty,
                tty=req.tty)
            stream = execution.start(detach=False)
            await stream.__aenter__()
        except aiodocker.DockerError as e:
            await _deny(websocket, 500, "InternalError", f"exec: {e.message}")
            return
        await websocket.accept(subprotocol=protocol)
        try:
            if await self._pump(websocket, protocol, stream, execution.resize):
                exit_code: int | None = None
                error = None
                try:
                    exit_code = await exec_exit_code(execution)
                except aiodocker.DockerError as e:
                    error = f"exec: {e.message}"
                await _final_status(websocket, protocol, exec_status(exit_code, command, error))
        finally:
            with contextlib.suppress(Exception):
                await stream.close()

    async def attach_ws(self, websocket: WebSocket) -> None:
        """Docker's attach to the container's streams (cri-dockerd's Attach → docker AttachToContainer)."""
        taken = await self._take(websocket, cri.AttachRequest, EXEC_PROTOCOLS)
        if taken is None:
            return
        pending, protocol = taken
        req = pending.request
        assert isinstance(req, cri.AttachRequest)
        container = self.docker.containers.container(pending.container_id)
        try:
            info = await container.show()
            if not (info.get("State") or {}).get("Running"):
                await _deny(websocket, 500, "InternalError", f"container not running ({pending.container_id})")
                return
            stdin = req.stdin and bool((info.get("Config") or {}).get("OpenStdin"))
            stream = container.attach(stdin=stdin, stdout=req.stdout or req.tty, stderr=req.stderr and not req.tty)
            await stream.__aenter__()
        except aiodocker.DockerError as e:
            await _deny(websocket, 500, "InternalError", f"attach: {e.message}")
            return
        await websocket.accept(subprotocol=protocol)
        try:
            if await self._pump(websocket, protocol, stream, container.resize):
                await _final_status(websocket, protocol, {"metadata": {}, "status": "Success"})
        finally:
            with contextlib.suppress(Exception):
                await stream.close()

    async def portforward_ws(self, websocket: WebSocket) -> None:
        taken = await self._take(websocket, cri.PortForwardRequest, PORTFORWARD_PROTOCOLS)
        if taken is None:
            return
        pending, protocol = taken
        req = pending.request
        assert isinstance(req, cri.PortForwardRequest)
        try:
            ports = parse_ports(websocket.query_params.getlist("ports")) or list(req.port)
        except ValueError as e:
            await _deny(websocket, 400, "BadRequest", str(e))
            return
        if not ports:
            await _deny(websocket, 400, "BadRequest", "query parameter \"port\" is required")
            return
        try:
            info = await self.docker.containers.container(pending.container_id).show()
        except aiodocker.DockerError as e:
            await _deny(websocket, 500, "InternalError", f"port-forward: {e.message}")
            return
        pid = int((info.get("State") or {}).get("Pid") or 0)
        await websocket.accept(subprotocol=protocol or None)
        lock = asyncio.Lock()

        async def send(frame: bytes) -> None:
            async with lock:
                await websocket.send_bytes(frame)

        inbound: list[asyncio.Queue[bytes | None]] = [asyncio.Queue(maxsize=64) for _ in ports]
        for i, port in enumerate(ports):
            await send(bytes([2 * i]) + port_prefix(port))
            await send(bytes([2 * i + 1]) + port_prefix(port))

        ended: set[int] = set()  # ports whose connection is over: what the client still sends them is dropped

        async def forward(i: int, port: int) -> None:
            try:
                if not pid:
                    raise OSError(f"sandbox {pending.container_id} is not running")
                sock = await connect_in_netns(pid, port)
            except OSError as e:
                ended.add(i)
                message = (f"error forwarding port {port} to pod {pending.container_id}, uid : failed to connect to "
                           f"localhost:{port} inside namespace \"{pending.container_id}\", {e}")
                log.info("port-forward: %s", message)
                await send(bytes([2 * i + 1]) + message.encode())
                return
            try:
                await pump_socket(sock, send, inbound[i], 2 * i)
            finally:
                ended.add(i)
                while not inbound[i].empty():
                    inbound[i].get_nowait()

        async def receive() -> None:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                data = message.get("bytes") or b""
                if data and data[0] % 2 == 0 and data[0] // 2 < len(ports) and len(data) > 1 \
                        and data[0] // 2 not in ended:
                    await inbound[data[0] // 2].put(data[1:])

        async def forward_all() -> None:
            await asyncio.gather(*(forward(i, p) for i, p in enumerate(ports)))

        tasks = [asyncio.create_task(receive()), asyncio.create_task(forward_all())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await websocket.close(1000)

    async def _pump(self, websocket: WebSocket, protocol: str, stream: Any,
                    resize: Callable[..., Awaitable[Any]]) -> bool:
        """Frames ↔ the hijacked Docker stream until the output ends (True: report the Status) or the
        client goes away (False)."""
        v5 = protocol.startswith("v5.")

        async def outbound() -> None:
            while (message := await stream.read_out()) is not None:
                channel = STDERR_CH if message.stream == 2 else STDOUT_CH
                await websocket.send_bytes(bytes([channel]) + message.data)

        async def inbound() -> None:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    raise WebSocketDisconnect(message.get("code", 1000))
                data = message.get("bytes")
                if data is None and message.get("text") is not None:
                    data = message["text"].encode()
                if not data:
                    continue
                channel, payload = data[0], data[1:]
                if channel == STDIN_CH:
                    if payload:
                        await stream.write_in(payload)
                elif channel == RESIZE_CH:
                    with contextlib.suppress(ValueError, KeyError, TypeError, aiodocker.DockerError):
                        size = json.loads(payload)
                        await resize(h=int(size["Height"]), w=int(size["Width"]))
                elif channel == CLOSE_CH and v5 and payload[:1] == bytes([STDIN_CH]):
                    _close_stdin(stream)

        out_task = asyncio.create_task(outbound())
        in_task = asyncio.create_task(inbound())
        try:
            done, _ = await asyncio.wait({out_task, in_task}, return_when=asyncio.FIRST_COMPLETED)
            if in_task in done and in_task.exception() is not None:
                return False  # the client went away: nothing to report to
            if out_task in done:
                with contextlib.suppress(Exception):
                    out_task.result()
        finally:
            in_task.cancel()
            out_task.cancel()
            await asyncio.gather(in_task, out_task, return_exceptions=True)
        return True


async def _final_status(websocket: WebSocket, protocol: str, status: dict[str, Any]) -> None:
    """The Status on the error channel (v1 `channel.k8s.io`: only a failure's message), then the close."""
    with contextlib.suppress(Exception):
        if protocol == "channel.k8s.io":
            if status["status"] != "Success":
                await websocket.send_bytes(bytes([ERROR_CH]) + status["message"].encode())
        else:
            await websocket.send_bytes(bytes([ERROR_CH]) + json.dumps(status).encode())
        await websocket.close(1000)


async def exec_exit_code(execution: Any, wait: float = 2.0) -> int:
    """The exit code of a finished exec: it lands a moment after its output closes."""
    deadline = asyncio.get_running_loop().time() + wait
    info = await execution.inspect()
    while info.get("Running") and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
        info = await execution.inspect()
    return int(info.get("ExitCode") or 0)


def _close_stdin(stream: Any) -> None:
    """Half-close the hijacked exec connection: the process reads EOF, its output still flows back.
    (aiodocker's Stream.close() closes both directions, so the transport is reached directly.)"""
    with contextlib.suppress(Exception):
        transport = stream._resp.connection.transport
        if transport is not None and transport.can_write_eof():
            transport.write_eof()


async def _deny(websocket: WebSocket, code: int, reason: str, message: str) -> None:
    """Refuse the upgrade with an HTTP answer carrying a Status."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    try:
        await websocket.send_denial_response(JSONResponse(body, status_code=code))
    except RuntimeError:
        with contextlib.suppress(Exception):
            await websocket.close(1008, message[:120])
