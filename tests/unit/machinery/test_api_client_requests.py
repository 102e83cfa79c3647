"""machinery.client.ApiClient's one request path, as mkubectl and every component use it, against a real
HTTP server on loopback: the Accept header a caller asks for, Warning headers handed to the warning
handler, the request logger, client-go's name check, watches of any path (Table watches) and streams;
and KubectlClient's use of them (warnings printed once, ERROR events as ApiError)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
import pytest
from aiohttp import web

from kubectl.client import TABLE_ACCEPT, KubectlClient
from machinery.client import ApiClient, ApiError, InvalidRequest, parse_warning
from machinery.kubeconfig import ClientConfig


class Server:
    """What the test server saw, and the server's base URL."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, bytes]] = []  # method, path_qs, Accept, body
        self.base = ""


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server()

    async def echo(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        state.seen.append((request.method, request.path_qs, request.headers.get("Accept", ""), body))
        if request.query.get("watch") == "true":
            response = web.StreamResponse(headers={"Warning": '299 - "watch warning"'})
            await response.prepare(request)
            await response.write(b'{"type":"ADDED","object":{"kind":"Table","rows":[]}}\n\n')
            await response.write(b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired",'
                                 b'"message":"too old"}}\n')
            return response
        if request.path.endswith("/log"):
            if request.query.get("container") == "missing":
                return web.json_response({"kind": "Status", "code": 400, "reason": "BadRequest",
                                          "message": "container missing is not valid"}, status=400)
            response = web.StreamResponse()
            await response.prepare(request)
            for line in (b"one\n", b"two\n"):
                await response.write(line)
            return response
        headers = {"Warning": '299 - "deprecated \\"thing\\""'}
        return web.json_response({"kind": "Pod", "echo": body.decode()}, headers=headers)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.base = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        await runner.cleanup()


def test_parse_warning_reads_rfc7234_values() -> None:
    assert parse_warning('299 - "a \\"quoted\\" text"') == 'a "quoted" text'
    assert parse_warning('299 apiserver "text" "Mon, 01 Jan 2024 00:00:00 GMT"') == "text"
    assert parse_warning("not a warning value") == "not a warning value"


async def test_accept_warnings_and_request_logging(server: Server) -> None:
    warnings: list[str] = []
    logged: list[tuple[str, str, Mapping[str, str], bytes | None]] = []
    client = ApiClient(ClientConfig(server=server.base), warning_handler=warnings.append,
                       request_logger=lambda *entry: logged.append(entry))
    try:
        answer = await client.request("POST", "/api/v1/namespaces/a/pods", params={"dryRun": "All", "x": None},
                                      body={"b": 1, "a": {"d": 2, "c": 3}}, accept=TABLE_ACCEPT)
    finally:
        await client.close()
    method, path_qs, accept, body = server.seen[0]
    assert (method, path_qs, accept) == ("POST", "/api/v1/namespaces/a/pods?dryRun=All", TABLE_ACCEPT)
    assert body == b'{"a":{"c":3,"d":2},"b":1}'  # keys sorted, as Go marshals a map
    assert orjson.loads(answer["echo"]) == {"a": {"c": 3, "d": 2}, "b": 1}
    assert warnings == ['deprecated "thing"']
    assert logged == [("POST", server.base + "/api/v1/namespaces/a/pods", {"dryRun": "All"}, body)]


@pytest.mark.parametrize("name", ["..", "."])
async def test_dot_names_are_refused_before_sending(server: Server, name: str) -> None:
    client = ApiClient(ClientConfig(server=server.base))
    try:
        with pytest.raises(InvalidRequest, match=f"invalid resource name \"{name}\": \\[may not be '{name}'\\]"):
            await client.request("DELETE", f"/api/v1/namespaces/default/pods/{name}")
        with pytest.raises(InvalidRequest):
            async for _ in client.watch_path(f"/api/v1/namespaces/{name}/pods"):
                pass
    finally:
        await client.close()
    assert server.seen == []


async def test_a_table_watch_of_a_path(server: Server) -> None:
    client = ApiClient(ClientConfig(server=server.base))
    try:
        events = [e async for e in client.watch_path("/api/v1/pods", {"resourceVersion": "5"}, accept=TABLE_ACCEPT)]
    finally:
        await client.close()
    assert [e.type for e in events] == ["ADDED", "ERROR"]
    assert events[0].raw == {"kind": "Table", "rows": []}
    assert getattr(events[1].object, "reason", None) == "Expired"
    _, path_qs, accept, _ = server.seen[0]
    assert path_qs == "/api/v1/pods?resourceVersion=5&watch=true" and accept == TABLE_ACCEPT


async def test_streams_and_their_errors(server: Server) -> None:
    client = ApiClient(ClientConfig(server=server.base))
    try:
        chunks = [c async for c in client.stream("/api/v1/namespaces/a/pods/p/log", {"follow": True})]
        with pytest.raises(ApiError) as raised:
            async for _ in client.stream("/api/v1/namespaces/a/pods/p/log", {"container": "missing"}):
                pass
    finally:
        await client.close()
    assert b"".join(chunks) == b"one\ntwo\n"
    assert raised.value.code == 400 and raised.value.message == "container missing is not valid"
    assert server.seen[0][1] == "/api/v1/namespaces/a/pods/p/log?follow=true"


async def test_kubectl_prints_each_warning_once_and_raises_watch_errors(server: Server) -> None:
    printed: list[str] = []
    client = KubectlClient(ClientConfig(server=server.base), warn=printed.append)
    events: list[tuple[str, dict[str, Any]]] = []
    try:
        await client.request("GET", "/api/v1/namespaces/a/pods/p")
        await client.request("GET", "/api/v1/namespaces/a/pods/p")
        with pytest.raises(ApiError) as raised:
            async for event in client.watch_events("/api/v1/pods", {}, accept=TABLE_ACCEPT):
                events.append(event)
    finally:
        await client.close()
    assert printed == ['deprecated "thing"', "watch warning"]
    assert events == [("ADDED", {"kind": "Table", "rows": []})]
    assert raised.value.code == 410 and raised.value.reason == "Expired"
