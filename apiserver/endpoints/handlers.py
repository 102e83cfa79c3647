"""The generic REST endpoints of one resource (upstream: staging/.../apiserver/pkg/endpoints/handlers:
get, create, update, patch, delete, watch): every handler is a thin translation between HTTP and the
generic Store. apiserver/endpoints/installer.py routes requests to them and to the subresources' endpoints."""

from __future__ import annotations

import asyncio
import random
from typing import Any, cast

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from apiserver import errors, fieldmanager
from apiserver.audit import note_object
from apiserver.endpoints.request import (
    check_duplicates,
    decode_object,
    delete_options,
    int_param,
    query,
    read_body,
    wants_table,
    write_options,
)
from apiserver.endpoints.responsewriters import JSON, json_response
from apiserver.registry.generic import Store, WriteOptions
from apiserver.requestinfo import of_scope
from apiserver.storage.cacher import CachedObject, Watcher, WatchItem, event_line
from apiserver.storage.predicate import Predicate
from machinery.api.resources import ResourceInfo
from machinery.selectors import SelectorError
from machinery.tls import cancel_on_disconnect, on_disconnect, small_writes

MIN_REQUEST_TIMEOUT = 1800.0  # upstream's --min-request-timeout: a watch lasts 30-60 minutes by default


def _predicate(request: Request, namespace: str | None, store: Store) -> Predicate:
    q = query(request)
    try:
        predicate = Predicate.parse(namespace, q.get("labelSelector"), q.get("fieldSelector"))
        if predicate.field is not None:
            predicate.field.validate(store.selectable_fields)
        return predicate
    except SelectorError as e:
        raise errors.bad_request(f"unable to parse requirement: {e}" if "unable" not in str(e) else str(e)) from e


def _include_object(request: Request) -> str:
    value = query(request).get("includeObject") or "Metadata"
    if value not in ("None", "Metadata", "Object"):
        raise errors.bad_request(f'includeObject must be one of "None", "Metadata" or "Object", got "{value}"')
    return value


class ResourceHandlers:
    """The endpoints of one resource, bound to its Store."""

    def __init__(self, store: Store, min_request_timeout: float = MIN_REQUEST_TIMEOUT):
        self.store = store
        self.info: ResourceInfo = store.info
        self.min_request_timeout = min_request_timeout
        # the last bookmark line: the cache bookmarks all its watchers at one revision, and they share it
        self._bookmark: tuple[int, bytes] = (-1, b"")

    # -- collection --------------------------------------------------------------------------

    async def list_or_watch(self, request: Request, namespace: str | None = None) -> Response:
        info = of_scope(request.scope)
        q = info.query
        predicate = _predicate(request, namespace, self.store)
        if info.verb == "watch":  # the verb the authorizer saw
            return await self.watch(request, namespace, predicate)
        result = await self.store.list(namespace, predicate, limit=int_param(request, "limit"),
                                       continue_token=q.get("continue", ""),
                                       resource_version=q.get("resourceVersion", ""))
        if wants_table(request):
            return json_response(self.store.table(result.objects(), include_object=_include_object(request),
                                           resource_version=result.resource_version,
                                           continue_token=result.continue_token))
        meta: dict[str, Any] = {"resourceVersion": result.resource_version}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.raw is not None:  # splice the cached JSON rather than decode and encode it again
            head = orjson.dumps({"kind": f"{self.info.kind}List", "apiVersion": self.info.api_version,
                                 "metadata": meta})
            return Response(head[:-1] + b',"items":[' + b",".join(result.raw) + b"]}", media_type=JSON)
        return json_response({"kind": f"{self.info.kind}List", "apiVersion": self.info.api_version,
                              "metadata": meta, "items": result.items})

    async def create(self, request: Request, namespace: str | None = None) -> Response:
        opts = write_options(request)
        fieldmanager.check_manager(opts.field_manager, "CreateOptions")
        body = await self._object_body(request, opts)
        obj = await self.store.create(namespace, body, opts)
        note_object(request.scope, obj)
        return json_response(obj, 201, opts.warnings)

    async def delete_collection(self, request: Request, namespace: str | None = None) -> Response:
        options = delete_options(request, await read_body(request))
        items = await self.store.delete_collection(namespace, _predicate(request, namespace, self.store), options)
        return json_response({"kind": f"{self.info.kind}List", "apiVersion": self.info.api_version,
                              "metadata": {}, "items": items})

    # -- one object --------------------------------------------------------------------------

    async def get(self, request: Request, name: str, namespace: str | None = None) -> Response:
        obj = await self.store.get(namespace, name)
        if wants_table(request):
            return json_response(self.store.table([obj], include_object=_include_object(request),
                                           resource_version=obj["metadata"].get("resourceVersion", "")))
        return json_response(obj)

    async def update(self, request: Request, name: str, namespace: str | None = None,
                     subresource: str | None = None) -> Response:
        opts = write_options(request)
        fieldmanager.check_manager(opts.field_manager, "UpdateOptions")
        body = await self._object_body(request, opts)
        obj = await self.store.update(namespace, name, body, opts, subresource)
        return json_response(obj, 200, opts.warnings)

    async def patch(self, request: Request, name: str, namespace: str | None = None,
                    subresource: str | None = None) -> Response:
        opts = write_options(request)
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        if content_type.startswith("application/apply-patch") and not opts.field_manager:
            raise errors.ApiError(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: "
                                  "Required value: is required for apply patch")
        if opts.force and not content_type.startswith("application/apply-patch"):
            raise errors.ApiError(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: "
                                  "may not be specified for non-apply patch")
        fieldmanager.check_manager(opts.field_manager, "PatchOptions")
        body = await read_body(request)
        obj, created = await self.store.patch(namespace, name, content_type, body, opts, subresource)
        if created:
            note_object(request.scope, obj)
        return json_response(obj, 201 if created else 200, opts.warnings)

    async def delete(self, request: Request, name: str, namespace: str | None = None) -> Response:
        options = delete_options(request, await read_body(request))
        obj, gone = await self.store.delete(namespace, name, options)
        if gone:
            return json_response(self.store.deleted_answer(obj))
        # upstream answers 202 for an object left in place only when orphanDependents=false was asked for
        return json_response(obj, 202 if options.orphan_dependents is False else 200)

    async def _object_body(self, request: Request, opts: WriteOptions) -> dict[str, Any]:
        body, duplicates = decode_object(await read_body(request), request.headers.get("content-type", JSON))
        check_duplicates(duplicates, opts, self.info.kind)
        return body

    # -- watch -------------------------------------------------------------------------------

    async def watch(self, request: Request, namespace: str | None, predicate: Predicate) -> Response:
        q = query(request)
        # upstream's watch timeout: timeoutSeconds, else --min-request-timeout with jitter in [min, 2 min)
        timeout = int_param(request, "timeoutSeconds") or self.min_request_timeout * (1 + random.random())
        table = wants_table(request)
        include = _include_object(request) if table else "Object"
        bookmarks = q.flag("allowWatchBookmarks")
        try:
            watcher = await self.store.watch(namespace, predicate, q.get("resourceVersion", ""), bookmarks,
                                             encoded=not table)
        except errors.ApiError as e:
            if e.code != 410:
                raise
            # a watch answers "too old" in-stream, as upstream's cacher does
            line = orjson.dumps({"type": "ERROR", "object": e.status()}) + b"\n"
            return StreamingResponse(iter([line]), media_type=JSON)
        initial_end = q.flag("sendInitialEvents") and bookmarks
        return WatchResponse(self, watcher, timeout, table, include, initial_end)

    def _event_line(self, kind: str, obj: CachedObject, table: bool, include: str, first: bool) -> bytes:
        if not table:
            return event_line(kind, obj.raw)
        rendered = self.store.table([obj.obj()], include_object=include,
                             resource_version=str(obj.rv))
        if not first:
            rendered["columnDefinitions"] = []
        return orjson.dumps({"type": kind, "object": rendered}) + b"\n"

    def _bookmark_line(self, rv: int, initial_end: bool = False) -> bytes:
        if not initial_end and self._bookmark[0] == rv:
            return self._bookmark[1]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        line = orjson.dumps({"type": "BOOKMARK", "object": {"kind": self.info.kind,
                                                             "apiVersion": self.info.api_version,
                                                             "metadata": meta}}) + b"\n"
        if not initial_end:
            self._bookmark = (rv, line)
        return line


class WatchResponse(Response):
    """A watch stream: the watcher's batches written as they come, until the watch times out, the
    cache ends it, or the client goes away.

    Starlette's StreamingResponse would hold an anyio task group, a cancel scope, an async generator
    and a second task for each of thousands of open watches; this holds a timer and the connection's
    callback for its loss (upstream's handler likewise ends a watch on its timeout or on the request
    context's cancellation): no task of its own beside the request's, unless the server cannot say when
    the connection goes (then one small task waits for `http.disconnect`), and one coroutine frame (it
    waits on the watcher's future itself). Its stream reaches the TLS layer in small pieces
    (machinery.tls.small_writes).

    An event line the cache encoded goes out as a body message of its own (upstream writes each event): it is
    shared by every watcher that sees the event the same way, and a stream waiting for its client (its
    connection paused, or an HTTP/2 window) holds that rather than a copy of its whole backlog joined (a
    thousand watches of a lagging client each held one). Lines made for this watch alone are joined."""

    media_type = JSON

    def __init__(self, handlers: ResourceHandlers, watcher: Watcher, timeout: float, table: bool, include: str,
                 initial_end: bool) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers()
        self.handlers = handlers
        self.watcher = watcher
        self.timeout = timeout
        self.table = table
        self.include = include
        self.initial_end = initial_end
        self.lost = False  # the client went away
        self._first = True  # the first table row carries the column definitions
        self._initial = -1  # events of the initial replay left before its end bookmark (sendInitialEvents)

    def _on_lost(self) -> None:
        self.lost = True
        self.watcher.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = self.watcher
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.timeout, watcher.stop)
        on_lost = self._on_lost
        gone: asyncio.Task[None] | None = None
        if not on_disconnect(scope, on_lost):
            gone = loop.create_task(_disconnected(receive))
            gone.add_done_callback(self._gone)
        small_writes(scope)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            self._first = True
            self._initial = len(watcher.queue) if self.initial_end else -1
            end = False
            while not end:
                while not watcher.queue:
                    await watcher.wait()
                lines, end = self._encode(watcher.take())
                for line in lines:  # (a TLS connection hands each to the TLS layer in pieces: serving.PacedWrites)
                    await send({"type": "http.response.body", "body": line, "more_body": True})
                del lines  # nothing of a batch stays referenced while the watch waits for the next one
            if not self.lost:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            timer.cancel()
            if gone is not None:
                gone.cancel()
            else:
                cancel_on_disconnect(scope, on_lost)
            watcher.stop()

    def _gone(self, _: asyncio.Task[None]) -> None:
        self._on_lost()

    def _encode(self, batch: list[WatchItem]) -> tuple[list[bytes], bool]:
        """The bodies of a batch, and whether the stream ends after them: each line the cache encoded for all
        its watchers on its own (shared, not copied), the lines made for this watch alone (bookmarks, a
        replay, table rows) joined between them."""
        h, watcher = self.handlers, self.watcher
        out: list[bytes] = []
        own: list[bytes] = []
        end = False
        for item in batch:
            if item is None:
                end = True
                break
            if type(item) is bytes:  # an event line the cache encoded for all its watchers
                if own:
                    out.append(b"".join(own))
                    own.clear()
                out.append(item)
            elif type(item) is int:
                own.append(h._bookmark_line(item))
            else:
                kind, obj = cast(tuple[str, CachedObject], item)  # neither bytes nor int, exactly: a pair
                own.append(h._event_line(kind, obj, self.table, self.include, self._first))
                self._first = False
            if self._initial > 0:
                self._initial -= 1
                if self._initial == 0:
                    own.append(h._bookmark_line(watcher.start_rv, True))
        if self._initial == 0:
            if not out and not own:  # nothing to replay: the end of the initial events comes first
                own.append(h._bookmark_line(watcher.start_rv, True))
            self._initial = -1
        if own:
            out.append(b"".join(own))
        return out, end


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone away (a GET has no body to wait for)."""
    while (await receive())["type"] != "http.disconnect":
        pass
