"""autoscaling/v1 HorizontalPodAutoscalers, served from the v2 storage (upstream serves both versions of one
stored resource; kubectl 1.27 to 1.32 `autoscale` create v1 objects, 1.33 tries v2 first).

An ASGI layer inside the gate (which authorized the request on its v1 path): a request to
`/apis/autoscaling/v1/...horizontalpodautoscalers...` goes to the v2 handlers with its body converted v1 → v2,
and the answer (object, list, watch events line by line, Table objects) converted back
(apiserver/registry/hpa_conversion.py). Discovery lists the version (`/apis/autoscaling/v1`). PATCH of a v1
object is refused (415): a patch would have to be applied to the v1 form of the stored object; use v2.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apiserver.registry.hpa_conversion import to_v1_answer, v1_to_v2

V1 = "/apis/autoscaling/v1"
V2 = "/apis/autoscaling/v2"
RESOURCE = "horizontalpodautoscalers"
RESOURCE_LIST = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "autoscaling/v1",
    "resources": [
        {"name": RESOURCE, "singularName": "horizontalpodautoscaler", "namespaced": True,
         "kind": "HorizontalPodAutoscaler", "shortNames": ["hpa"], "categories": ["all"],
         "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]},
        {"name": f"{RESOURCE}/status", "singularName": "", "namespaced": True, "kind": "HorizontalPodAutoscaler",
         "verbs": ["get", "patch", "update"]},
    ],
}
V1_VERSION = {"groupVersion": "autoscaling/v1", "version": "v1"}


def with_v1(groups: dict[str, Any]) -> dict[str, Any]:
    """An APIGroupList (or APIGroup) with autoscaling/v1 after v2, v2 preferred."""
    entries = groups.get("groups") if "groups" in groups else [groups]
    for entry in entries or []:
        if entry.get("name") == "autoscaling" and V1_VERSION not in entry["versions"]:
            entry["versions"].append(V1_VERSION)
    return groups


def _json(status: int, body: Any) -> tuple[Message, Message]:
    data = orjson.dumps(body)
    return ({"type": "http.response.start", "status": status,
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]},
            {"type": "http.response.body", "body": data})


class AutoscalingV1:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(V1):
            await self.app(scope, receive, send)
            return
        if path.rstrip("/") == V1 and scope["method"] == "GET":
            for message in _json(200, RESOURCE_LIST):
                await send(message)
            return
        parts = [p for p in path[len(V1):].split("/") if p]
        is_hpa = (parts[:1] == [RESOURCE]) or (len(parts) >= 3 and parts[0] == "namespaces" and parts[2] == RESOURCE)
        if not is_hpa:
            await self.app(scope, receive, send)
            return
        if scope["method"] == "PATCH":
            for message in _json(415, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                       "reason": "UnsupportedMediaType", "code": 415,
                                       "message": "patches of autoscaling/v1 HorizontalPodAutoscalers are not "
                                                  "supported by this server: patch them as autoscaling/v2"}):
                await send(message)
            return
        new_path = V2 + path[len(V1):]
        inner = dict(scope, path=new_path, raw_path=new_path.encode())
        if scope["method"] in ("POST", "PUT"):
            receive = await _converted_body(receive)
            inner["headers"] = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        await self.app(inner, receive, _ConvertingSend(send))


async def _converted_body(receive: Receive) -> Receive:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    raw = b"".join(chunks)
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        body = None  # not JSON: the handler answers it as it would
    if isinstance(body, dict) and body.get("apiVersion") == "autoscaling/v1":
        raw = orjson.dumps(v1_to_v2(body))
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


class _ConvertingSend:
    """Converts JSON answers: a whole body at once, or a watch stream line by line."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.start: Message | None = None
        self.passthrough = True
        self.streaming = False
        self.buffer = b""
        self.pending = b""

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers") or [])
            content_type = headers.get(b"content-type", b"")
            self.streaming = b"content-length" not in headers
            if b"json" not in content_type:
                self.start = None
                self.passthrough = True
                await self.send(message)
                return
            self.passthrough = False
            self.start = message
            if self.streaming:
                await self.send(message)
            return
        if message["type"] != "http.response.body" or self.passthrough:
            await self.send(message)
            return
        body = message.get("body", b"")
        more = message.get("more_body", False)
        if self.streaming:
            self.pending += body
            *lines, self.pending = self.pending.split(b"\n")
            out = b"".join(_convert(line) + b"\n" for line in lines if line.strip())
            if not more and self.pending.strip():
                out += _convert(self.pending)
                self.pending = b""
            await self.send({"type": "http.response.body", "body": out, "more_body": more})
            return
        self.buffer += body
        if more:
            return
        converted = _convert(self.buffer)
        assert self.start is not None
        sized = [(k, v) for k, v in self.start.get("headers") or [] if k != b"content-length"]
        sized.append((b"content-length", str(len(converted)).encode()))
        await self.send({**self.start, "headers": sized})
        await self.send({"type": "http.response.body", "body": converted, "more_body": False})


def _convert(raw: bytes) -> bytes:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    return orjson.dumps(to_v1_answer(body))
