"""The `road.minik8s.io/v1alpha1` API, as the apiserver proxies it (apiserver/endpoints/aggregator.py):

    GET /apis/road.minik8s.io/v1alpha1                                   APIResourceList
    GET /apis/road.minik8s.io/v1alpha1/namespaces/NS/RESOURCE/NAME       the Road of that object
    GET /apis/road.minik8s.io/v1alpha1/RESOURCE/NAME                     (a cluster-scoped object)
    GET .../namespaces/NS/RESOURCE?watch=true&fieldSelector=metadata.name=NAME

RESOURCE is the plural of the object's resource (`deployments`, `pods`, `services`, `jobs`, ...). A Road is
the object, its steps (model.Store.road) and nested the roads of what it owns; `status.phase` is
InProgress or Done. The watch (as `kubectl get -w` watches one object by name) streams one JSON event per
line: first `ADDED` with the Road's summary (kind Road, no steps), then `ADDED` with a `RoadStep` for every
step known, then each new step as it is received (`MODIFIED` when a step already sent changes, e.g. a watch
delivery joined to its write later), and `MODIFIED` with the Road's summary when its phase changes. An
object that neither exists nor has a road is 404 NotFound with upstream's message
(`deployments.apps "x" not found`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from machinery.api.resources import RESOURCES, ResourceInfo
from machinery.api.road_v1alpha1 import GROUP, GROUP_VERSION, flatten
from machinery.status import failure
from road.model import Obj, Store
from road.page import HTML, page, wants_page

PREFIX = f"/apis/{GROUP_VERSION}"
PHASE_CHECK = 0.25  # how often a watch looks whether its road's phase changed without a new step


def _served() -> dict[str, ResourceInfo]:
    out: dict[str, ResourceInfo] = {}
    for info in RESOURCES:
        if not info.virtual and "get" in info.verbs:
            out.setdefault(info.plural, info)
    return out


SERVED = _served()
RESOURCE_LIST: Obj = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
    "resources": [{"name": plural, "singularName": "", "namespaced": info.namespaced, "kind": "Road",
                   "verbs": ["get", "watch"]} for plural, info in sorted(SERVED.items())],
}
API_GROUP: Obj = {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
                  "versions": [{"groupVersion": GROUP_VERSION, "version": "v1alpha1"}],
                  "preferredVersion": {"groupVersion": GROUP_VERSION, "version": "v1alpha1"}}


def status(code: int, reason: str, message: str, details: Obj | None = None) -> web.Response:
    return web.json_response(failure(code, reason, message, details), status=code)


def not_found(info: ResourceInfo, name: str) -> web.Response:
    return status(404, "NotFound", f'{info.group_resource} "{name}" not found',
                  {"name": name, "group": info.group, "kind": info.plural})


# (info, namespace, name) -> the object's uid, None when it does not exist
Lookup = Callable[[ResourceInfo, str, str], Awaitable[str | None]]


class Hub:
    """Wakes every watch when the store changed."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Event] = set()

    def notify(self) -> None:
        for waiter in self._waiters:
            waiter.set()

    @contextlib.contextmanager
    def waiter(self) -> Any:
        event = asyncio.Event()
        self._waiters.add(event)
        try:
            yield event
        finally:
            self._waiters.discard(event)


def summary(road: Obj) -> Obj:
    return {k: v for k, v in road.items() if k not in ("steps", "roads")}


def step_object(step: Obj) -> Obj:
    return {"apiVersion": GROUP_VERSION, "kind": "RoadStep", **step}


class RoadApi:
    def __init__(self, store: Store, hub: Hub, lookup: Lookup) -> None:
        self.store = store
        self.hub = hub
        self.lookup = lookup

    def routes(self) -> list[web.RouteDef]:
        return [web.get(PREFIX, self.resources), web.get(f"/apis/{GROUP}", self.group),
                web.get(PREFIX + "/namespaces/{namespace}/{resource}/{name}", self.get),
                web.get(PREFIX + "/namespaces/{namespace}/{resource}", self.collection),
                web.get(PREFIX + "/{resource}/{name}", self.get),
                web.get(PREFIX + "/{resource}", self.collection)]

    async def resources(self, _: web.Request) -> web.Response:
        return web.json_response(RESOURCE_LIST)

    async def group(self, _: web.Request) -> web.Response:
        return web.json_response(API_GROUP)

    def _info(self, request: web.Request) -> ResourceInfo | web.Response:
        resource = request.match_info["resource"]
        info = SERVED.get(resource)
        namespaced = "namespace" in request.match_info
        if info is None or info.namespaced != namespaced:
            return status(404, "NotFound", "the server could not find the requested resource")
        return info

    async def _uid(self, info: ResourceInfo, namespace: str, name: str) -> str | None:
        uid = await self.lookup(info, namespace, name)
        if uid is None:
            uid = self.store.uid_for(info.kind, namespace, name)
        return uid

    async def get(self, request: web.Request) -> web.StreamResponse:
        info = self._info(request)
        if isinstance(info, web.Response):
            return info
        if wants_page(request.headers.get("Accept")):  # a browser: the page, which reads the road itself
            return web.Response(body=page(), headers={"Content-Type": HTML, "Cache-Control": "no-store"})
        namespace = request.match_info.get("namespace", "")
        name = request.match_info["name"]
        uid = await self._uid(info, namespace, name)
        if uid is None:
            return not_found(info, name)
        road = self.store.road(uid)
        _fill_object(road, info, namespace, name, uid)
        return web.json_response(road)

    async def collection(self, request: web.Request) -> web.StreamResponse:
        info = self._info(request)
        if isinstance(info, web.Response):
            return info
        watch = request.query.get("watch", "")
        if watch in ("", "0", "false", "False"):
            return status(405, "MethodNotAllowed", "roads are read one at a time: GET "
                                                   f"{request.path}/NAME, or watch one with ?watch=true&"
                                                   "fieldSelector=metadata.name=NAME")
        name = ""
        for term in (request.query.get("fieldSelector") or "").split(","):
            key, _, value = term.partition("=")
            if key.strip() == "metadata.name":
                name = value.lstrip("=").strip()
        if not name:
            return status(400, "BadRequest", "a road is watched by name: fieldSelector=metadata.name=NAME")
        namespace = request.match_info.get("namespace", "")
        uid = await self._uid(info, namespace, name)
        if uid is None:
            return not_found(info, name)
        timeout = request.query.get("timeoutSeconds")
        deadline = time.monotonic() + float(timeout) if timeout and timeout.isdigit() else None
        response = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-store"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        with self.hub.waiter() as changed:
            await self._stream(response, info, namespace, name, uid, changed, deadline)
        return response

    async def _stream(self, response: web.StreamResponse, info: ResourceInfo, namespace: str, name: str, uid: str,
                      changed: asyncio.Event, deadline: float | None) -> None:
        sent: dict[str, str] = {}
        phase = None
        first = True
        while True:
            # nothing new: has the phase changed with time alone?
            if not first and not changed.is_set() and self.store.status(uid, self.store.clock())["phase"] == phase:
                if not await self._wait(changed, deadline):
                    return
                continue
            changed.clear()
            road = self.store.road(uid)
            _fill_object(road, info, namespace, name, uid)
            lines: list[bytes] = []
            now_phase = road["status"]["phase"]
            if first:
                lines.append(_event("ADDED", summary(road)))
            for step in flatten(road):
                text = json.dumps(step, sort_keys=True)
                old = sent.get(step["id"])
                if old != text:
                    lines.append(_event("ADDED" if old is None else "MODIFIED", step_object(step)))
                    sent[step["id"]] = text
            if not first and now_phase != phase:
                lines.append(_event("MODIFIED", summary(road)))
            phase = now_phase
            first = False
            if lines:
                try:
                    await response.write(b"".join(lines))
                except (ConnectionResetError, RuntimeError):
                    return
            if not await self._wait(changed, deadline):
                return

    @staticmethod
    async def _wait(changed: asyncio.Event, deadline: float | None) -> bool:
        """Until the store changed or PHASE_CHECK passed; False once the watch's timeout is over."""
        wait = PHASE_CHECK
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), wait)
        return True


def _event(kind: str, obj: Obj) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def _fill_object(road: Obj, info: ResourceInfo, namespace: str, name: str, uid: str) -> None:
    """A road of an object that has no step yet still says what it is the road of."""
    obj = road["object"]
    obj.setdefault("apiVersion", info.api_version)
    if not obj.get("apiVersion"):
        obj["apiVersion"] = info.api_version
    if not obj.get("kind"):
        obj["kind"] = info.kind
    if not obj.get("name"):
        obj["name"] = name
        road["metadata"]["name"] = name
    if namespace and not obj.get("namespace"):
        obj["namespace"] = namespace
        road["metadata"]["namespace"] = namespace
    obj["uid"] = uid
