"""apiserver.endpoints.installer.WatchShortcut: a watch is what the gate's one RequestInfo says is a watch
(the first value of `watch`, read as a Go boolean), sent to its group-version's dispatch with the path after
the prefix; everything else goes on to the app, and a dispatch's error becomes the app's Status. And
DispatchShortcut (at the end): every resource request of a served group-version to its dispatch."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.endpoints.installer import DispatchShortcut, WatchShortcut
from apiserver.requestinfo import of_scope


def _run(path: str, query: bytes, method: str = "GET", fail: bool | Exception = False,
         served: bool = False) -> tuple[str, list[str], int]:
    """(who answered, the paths the dispatches got, the status sent); served: through DispatchShortcut,
    whose dispatches take every resource request of their group-version, as the built-in ones do."""
    seen: list[str] = []
    answered: list[str] = []
    sent: list[dict[str, Any]] = []

    async def dispatch(request: Request, rest: str) -> Response:
        seen.append(rest)
        if fail:
            raise fail if isinstance(fail, Exception) else ValueError("boom")
        return Response(b"{}", 200)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        answered.append("app")
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def error_response(request: Request, e: Exception) -> Response:
        return Response(str(e).encode(), e.code if isinstance(e, errors.ApiError) else 500)

    dispatchers = {"/api/v1": dispatch, "/apis/apps/v1": dispatch}
    shortcut = DispatchShortcut(app, dispatchers, error_response) if served else \
        WatchShortcut(app, dispatchers, error_response)
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


@pytest.mark.parametrize(("method", "path", "rest"), [
    ("POST", "/api/v1/namespaces/ns/pods", "namespaces/ns/pods"),
    ("GET", "/api/v1/namespaces/ns/pods/p", "namespaces/ns/pods/p"),
    ("GET", "/api/v1/pods", "pods"),
    ("PUT", "/apis/apps/v1/namespaces/ns/deployments/d/scale", "namespaces/ns/deployments/d/scale"),
    ("DELETE", "/api/v1/namespaces/ns/pods/p", "namespaces/ns/pods/p"),
])
def test_a_served_group_versions_requests_go_to_its_dispatch(method: str, path: str, rest: str) -> None:
    assert _run(path, b"", method, served=True) == ("shortcut", [rest], 200)


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/apis/batch/v1/namespaces/ns/jobs"),  # not served here: the app's route (custom resources too)
    ("HEAD", "/api/v1/namespaces/ns/pods/p"),
    ("GET", "/api/v1"),  # discovery, not a resource request
    ("GET", "/healthz"),
])
def test_the_rest_of_a_served_server_goes_on_to_the_app(method: str, path: str) -> None:
    assert _run(path, b"", method, served=True) == ("app", [], 299)


def test_a_served_dispatchs_status_error_is_answered_and_any_other_propagates() -> None:
    gone = errors.ApiError(404, "NotFound", 'pods "p" not found')
    assert _run("/api/v1/namespaces/ns/pods/p", b"", served=True, fail=gone) == ("shortcut", ["namespaces/ns/pods/p"],
                                                                                  404)
    with pytest.raises(ValueError, match="boom"):  # as through the app: to the gate and the error middleware
        _run("/api/v1/namespaces/ns/pods", b"", "POST", served=True, fail=True)
