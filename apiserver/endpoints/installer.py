"""Installing the REST endpoints of a group-version (upstream k8s.io/apiserver/pkg/endpoints/installer.go):
one router per group-version whose single route picks the endpoint (a generic handler of
apiserver/endpoints/handlers.py or a subresource's of apiserver/endpoints/subresources.py) from the request's
RequestInfo, and the WatchShortcut middleware that sends watches straight to that dispatch."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from apiserver import errors
from apiserver.discovery import api_resource_list
from apiserver.endpoints.handlers import MIN_REQUEST_TIMEOUT, ResourceHandlers
from apiserver.endpoints.request import check_path_name
from apiserver.endpoints.responsewriters import json_response
from apiserver.endpoints.subresources import SUBRESOURCE_HANDLERS, Endpoint, review_endpoint
from apiserver.errors import ApiError
from apiserver.registry.generic import Store
from apiserver.requestinfo import ResourcePath, of_scope
from apiserver.storage.etcd import StorageError

Dispatch = Callable[[Request, str], Awaitable[Response]]


class WatchShortcut:
    """ASGI middleware, inside the gate: a watch (the verb the gate's RequestInfo found: a GET of a
    collection with watch set, as a Go boolean) goes straight to its group-version's dispatch, past
    FastAPI's routing, exception and exit-stack layers. A watch holds its whole call chain for as long
    as it streams, and those layers held about 12 KB of frames, closures and exit stacks for each of
    thousands of open watches. Errors become a Status, as the app's exception handlers answer
    (`error_response`)."""

    def __init__(self, app: ASGIApp, dispatchers: dict[str, Dispatch],
                 error_response: Callable[[Request, Exception], Response]) -> None:
        self.app = app
        self.dispatchers = dispatchers  # group-version prefix (/api/v1, /apis/apps/v1) → its dispatch
        self.error_response = error_response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            info = of_scope(scope)  # the gate's one parse: no second reading of the query
            if info.verb == "watch":
                prefix = f"/apis/{info.api_group}/{info.api_version}" if info.api_group else f"/api/{info.api_version}"
                dispatch = self.dispatchers.get(prefix)
                if dispatch is not None:
                    response = await self._respond(scope, receive, dispatch, info.path[len(prefix) + 1:])
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _respond(self, scope: Scope, receive: Receive, dispatch: Dispatch, rest: str) -> Response:
        """The response to a watch; the Request is not kept while the watch streams."""
        request = Request(scope, receive)
        try:
            return await dispatch(request, rest)
        except Exception as e:
            return self.error_response(request, e)


class DispatchShortcut:
    """ASGI middleware, inside the warning recorder: a resource request of a built-in group-version
    (`served`: the one route FastAPI would pick for it is that group-version's dispatch) goes straight
    to the dispatch, past FastAPI's routing, dependency solving and exception layers (~15% of a pod
    create's CPU). The Status errors (ApiError, StorageError) are answered as the app's handlers answer
    them (`error_response`); anything else propagates, as it does through the app, to the gate (audit's
    Panic stage) and the server's error middleware."""

    def __init__(self, app: ASGIApp, served: dict[str, Dispatch],
                 error_response: Callable[[Request, Exception], Response]) -> None:
        self.app = app
        self.served = served  # group-version prefix → its dispatch, for the group-versions build_router made
        self.error_response = error_response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in _DISPATCHED:
            info = of_scope(scope)  # the gate's one parse
            if info.is_resource_request:
                prefix = f"/apis/{info.api_group}/{info.api_version}" if info.api_group else f"/api/{info.api_version}"
                dispatch = self.served.get(prefix)
                if dispatch is not None and info.path.startswith(prefix + "/"):
                    request = Request(scope, receive)
                    try:
                        response = await dispatch(request, info.path[len(prefix) + 1:])
                    except (ApiError, StorageError) as e:
                        response = self.error_response(request, e)
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


_DISPATCHED = frozenset(("GET", "POST", "PUT", "PATCH", "DELETE"))  # the methods of build_router's route


def build_router(stores: list[Store], min_request_timeout: float = MIN_REQUEST_TIMEOUT,
                 watch_dispatchers: dict[str, Dispatch] | None = None) -> APIRouter:
    """One router for a group-version, with one route: the request's RequestInfo (the gate's one parse of
    the path: resource, namespace, name and subresource) picks the endpoint by a dictionary lookup
    (matching a regex per resource route cost 40-100 µs a request). The dispatch goes into
    `watch_dispatchers` too, for WatchShortcut."""
    prefix = stores[0].info.prefix
    handlers = {s.info.plural: ResourceHandlers(s, min_request_timeout) for s in stores}
    subresources = {(p, sub): make(h) for p, h in handlers.items()
                    for sub in h.info.subresources if (make := SUBRESOURCE_HANDLERS.get(sub)) is not None}
    reviews = {p: review_endpoint(h) for p, h in handlers.items() if h.info.virtual}

    def target(method: str, path: str, info: ResourcePath | None) -> tuple[Endpoint, dict[str, Any]]:
        h = handlers.get(info.resource) if info else None
        if info is None or h is None:
            raise errors.page_not_found()
        if info.name is not None:
            check_path_name(info.name)  # "..", "%": no storage key is built from them
        if h.info.namespaced and info.namespace is None and (info.name is not None or method != "GET"):
            raise errors.page_not_found()  # objects of namespaced kinds live under namespaces/{ns}/
        if h.info.virtual:  # access reviews: created (answered), nothing else
            if method != "POST" or info.name is not None or info.subresource is not None:
                raise errors.ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the "
                                      f"requested resource ({method} {prefix}/{path})")
            return reviews[info.resource], {}
        kwargs: dict[str, Any] = {"namespace": info.namespace} if h.info.namespaced else {}
        if info.subresource is not None:
            endpoint = subresources.get((info.resource, info.subresource), {}).get(method)
            kwargs["name"] = info.name
        elif info.name is not None:
            endpoint = {"GET": h.get, "PUT": h.update, "PATCH": h.patch, "DELETE": h.delete}.get(method)
            kwargs["name"] = info.name
        else:
            endpoint = {"GET": h.list_or_watch, "POST": h.create, "DELETE": h.delete_collection}.get(method)
        if endpoint is None:
            if info.subresource is not None and (info.resource, info.subresource) not in subresources:
                raise errors.page_not_found()
            raise errors.ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the "
                                  f"requested resource ({method} {prefix}/{path})")
        return endpoint, kwargs

    async def dispatch(request: Request, path: str) -> Response:
        if not path and request.method == "GET":  # /api/v1/, /apis/apps/v1/: discovery, as upstream serves it
            return json_response(api_resource_list(stores[0].info.api_version))
        endpoint, kwargs = target(request.method, path, of_scope(request.scope).target)
        return await endpoint(request, **kwargs)

    async def dispatch_websocket(websocket: WebSocket, path: str) -> None:
        endpoint, kwargs = target("WEBSOCKET", path, of_scope(websocket.scope).target)
        await endpoint(websocket, **kwargs)

    if watch_dispatchers is not None:
        watch_dispatchers[prefix] = dispatch
    router = APIRouter(prefix=prefix)
    router.add_api_route("/{path:path}", dispatch, methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                         include_in_schema=False)
    router.add_api_websocket_route("/{path:path}", dispatch_websocket)
    return router
