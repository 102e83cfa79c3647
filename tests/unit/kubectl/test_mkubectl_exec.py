"""`mkubectl exec` speaks the v5.channel.k8s.io websocket protocol: checked against a small in-process
server playing the apiserver's part (the real end-to-end run is in tests/integration/test_mkubectl.py).

mkubectl runs as a real subprocess, so its exit code and output streams are the real ones."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import WSMsgType, web

from tests.cluster import REPO, free_port

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "p", "namespace": "default"},
       "spec": {"nodeName": "node-1",
                "containers": [{"name": "main", "image": "busybox"}, {"name": "side", "image": "busybox"}]},
       "status": {"phase": "Running"}}


class FakeApiserver:
    """GET the pod, and an exec websocket that upper-cases stdin until v5's close-stdin message."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def pod(self, request: web.Request) -> web.Response:
        return web.json_response(POD)

    async def exec(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io",))
        await ws.prepare(request)
        self.requests.append({"query": list(request.query.items()), "protocol": ws.ws_protocol})
        stdin = b""
        closed = request.query.get("stdin") != "true"
        while not closed:
            message = await ws.receive()
            if message.type != WSMsgType.BINARY:
                break
            if message.data[0] == 0:
                stdin += message.data[1:]
            elif message.data == bytes([255, 0]):
                closed = True
        await ws.send_bytes(b"\x01" + stdin.upper() + b"out\n")
        await ws.send_bytes(b"\x02" + b"err\n")
        code = 7 if stdin else 0
        status: dict[str, Any] = {"metadata": {}, "status": "Success"} if code == 0 else {
            "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": f"command terminated with non-zero exit code: exit status {code}",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
        await ws.send_bytes(b"\x03" + json.dumps(status).encode())
        await ws.close()
        return ws


@pytest.fixture
async def fake_server() -> AsyncIterator[tuple[str, FakeApiserver]]:
    fake = FakeApiserver()
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/pods/p", fake.pod)
    app.router.add_get("/api/v1/namespaces/default/pods/p/exec", fake.exec)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}", fake
    finally:
        await runner.cleanup()


async def mkubectl(server: str, tmp_path: Path, *args: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
    env = {"KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubectl", "-s", server, *args, cwd=REPO, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), 30)
    assert proc.returncode is not None
    return proc.returncode, out, err


async def test_exec_relays_streams_and_the_exit_code(fake_server: tuple[str, FakeApiserver], tmp_path: Path) -> None:
    server, fake = fake_server
    code, out, err = await mkubectl(server, tmp_path, "exec", "-i", "p", "--", "sh", "-c", "tr a-z A-Z",
                                    stdin=b"hello\n")
    assert out == b"HELLO\nout\n"
    assert err == b'Defaulted container "main" out of: main, side\nerr\ncommand terminated with exit code 7\n'
    assert code == 7
    request = fake.requests[-1]
    assert request["protocol"] == "v5.channel.k8s.io"
    assert request["query"] == [("command", "sh"), ("command", "-c"), ("command", "tr a-z A-Z"),
                                ("container", "main"), ("stdout", "true"), ("stdin", "true"), ("stderr", "true")]


async def test_exec_without_stdin_succeeds(fake_server: tuple[str, FakeApiserver], tmp_path: Path) -> None:
    server, fake = fake_server
    code, out, err = await mkubectl(server, tmp_path, "exec", "p", "-c", "side", "--", "true")
    assert (code, out, err) == (0, b"out\n", b"err\n")
    assert ("container", "side") in fake.requests[-1]["query"]


async def test_exec_usage_errors(fake_server: tuple[str, FakeApiserver], tmp_path: Path) -> None:
    server, _ = fake_server
    code, _, err = await mkubectl(server, tmp_path, "exec", "p", "-c", "nope", "--", "true")
    assert (code, err) == (1, b"error: container nope not found in pod p\n")
    code, _, err = await mkubectl(server, tmp_path, "exec", "p")
    assert (code, err) == (1, b"error: you must specify at least one command for the container\n")
    code, _, err = await mkubectl(server, tmp_path, "exec", "-t", "p", "--", "true")
    assert code == 0 and b"Unable to use a TTY - input is not a terminal or the right kind of file\n" in err
