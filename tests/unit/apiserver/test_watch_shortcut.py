"""apiserver.endpoints.installer.WatchShortcut: a watch is what the gate's one RequestInfo says is a watch (the first
value of `watch`, read as a Go boolean), sent to its group-version's dispatch with the path after the
prefix; everything else goes on to the app, and a dispatch's error becomes the app's Status."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response

from apiserver.endpoints.installer import WatchShortcut
from apiserver.requestinfo import of_scope


def _run(path: str, query: bytes, method: str = "GET", fail: bool = False) -> tuple[str, list[str], int]:
    """(who answered, the paths the dispatches got, the status sent)."""
    seen: list[str] = []
    answered: list[str] = []
    sent: list[dict[str, Any]] = []

    async def dispatch(request: Request, rest: str) -> Response:
        seen.append(rest)
        if fail:
            raise ValueError("boom")
        return Response(b"{}", 200)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        answered.append("app")
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def error_response(request: Request, e: Exception) -> Response:
        return Response(str(e).encode(), 500)

    shortcut = WatchShortcut(app, {"/api/v1": dispatch, "/apis/apps/v1": dispatch}, error_response)
    scope = {"type": "http", "method": method, "path": path, "query_string": query, "headers": []}
    of_scope(scope)  # as the gate leaves it

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(shortcut(scope, receive, send))
    return ("app" if answered else "shortcut"), seen, sent[0]["status"]


@pytest.mark.parametrize(("path", "query", "rest"), [
    ("/api/v1/pods", b"watch=1", "pods"),
    ("/api/v1/namespaces/ns/pods", b"watch=true&labelSelector=a%3Db", "namespaces/ns/pods"),
    ("/apis/apps/v1/deployments", b"watch", "deployments"),  # a bare `watch` is true to Go's codec
    ("/api/v1/pods", b"watch=1&watch=0", "pods"),  # the first value counts
])
def test_a_watch_goes_to_its_group_versions_dispatch(path: str, query: bytes, rest: str) -> None:
    assert _run(path, query) == ("shortcut", [rest], 200)


@pytest.mark.parametrize(("method", "path", "query"), [
    ("GET", "/api/v1/pods", b""),
    ("GET", "/api/v1/pods", b"watch=0&watch=1"),  # a list, as the authorizer saw it
    ("GET", "/api/v1/pods", b"watch=false"),
    ("GET", "/api/v1/namespaces/ns/pods/p", b"watch=1"),  # one object: a get
    ("POST", "/api/v1/pods", b"watch=1"),
    ("GET", "/apis/batch/v1/jobs", b"watch=1"),  # a group-version without a dispatch here
    ("GET", "/healthz", b"watch=1"),
])
def test_anything_else_goes_on_to_the_app(method: str, path: str, query: bytes) -> None:
    assert _run(path, query, method) == ("app", [], 299)


def test_a_dispatch_error_is_answered_as_the_app_would() -> None:
    assert _run("/api/v1/pods", b"watch=1", fail=True) == ("shortcut", ["pods"], 500)
