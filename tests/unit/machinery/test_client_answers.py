"""machinery/client.py's raw API: an answer that is not a JSON object is a ClientError that says so,
not a list or None handed on as if it were the object (client-go: the decoder refuses it).

A real HTTP server on a free local port answers; no apiserver is needed for the shape check."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from machinery.api.core_v1 import Pod
from machinery.client import ApiClient, ClientError
from machinery.kubeconfig import ClientConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async def a_list(request: web.Request) -> web.Response:
        return web.json_response(["not", "an", "object"])

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def a_pod(request: web.Request) -> web.Response:
        return web.json_response({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "good"}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/pods/listy", a_list)
    app.router.add_get("/api/v1/namespaces/default/pods/empty", empty)
    app.router.add_get("/api/v1/namespaces/default/pods/good", a_pod)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("name", ["listy", "empty"])
async def test_an_answer_that_is_not_an_object_is_an_error(server: str, name: str) -> None:
    async with ApiClient(ClientConfig(server=server)) as client:
        path = f"/api/v1/namespaces/default/pods/{name}"
        with pytest.raises(ClientError, match=rf"GET {path}: answer is not a JSON object"):
            await client.get_raw(Pod, name, "default")


async def test_an_object_answer_is_returned(server: str) -> None:
    async with ApiClient(ClientConfig(server=server)) as client:
        assert (await client.get_raw(Pod, "good", "default"))["metadata"] == {"name": "good"}
