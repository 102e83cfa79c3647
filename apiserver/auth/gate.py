"""The request filter in front of every route (upstream: DefaultBuildHandlerChain's
WithRequestInfo → WithRequestDeadline → WithTimeoutForNonLongRunningRequests → WithAuthentication →
WithAudit → WithImpersonation → WithMaxInFlightLimit → WithAuthorization), one pure ASGI middleware
so a request pays for it once:

1. request info: the one RequestInfo of the request (apiserver.requestinfo: verb, API group/version,
   resource, subresource, namespace, name, the parsed query), left in scope["minik8s.request_info"]
   for everything after: the authorizer, audit and the handlers read it, none parses again;
2. deadline: --request-timeout (60 s), or the client's shorter `?timeout=`, for every request that is
   not long-running (watch, exec, attach, portforward, proxy, log); past it the work is cancelled and
   the answer is 504 Timeout;
3. authentication: on the TLS port the verified client certificate or a bearer token (nothing →
   401, except the public health and version paths, which are anonymous); on the plain
   development port every request is "system:unsecured" in system:masters, as upstream's
   insecure port was;
4. audit: the policy's level for this request; the event is written when the response completes;
5. impersonation: Impersonate-* headers (kubectl --as) switch to another user once the requester
   may impersonate it (see impersonation.py); the audit event keeps the requester and notes
   the impersonatedUser;
6. max in flight: --max-requests-inflight (400) read-only and --max-mutating-requests-inflight (200)
   other requests at once; past that 429 TooManyRequests with Retry-After: 1. Long-running requests
   and system:masters are not counted (upstream maxinflight.go);
7. authorization: system:masters first, then Node, then RBAC; nothing allows → 403.

The user goes on to the handlers in scope["user"] (admission and access reviews read it), the
audit context in scope["audit"].
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson

from apiserver import errors
from apiserver.audit import AuditContext, Auditor, RequestFacts
from apiserver.auth.authn import ANONYMOUS, PUBLIC_PATHS, UNSECURED, Authenticator
from apiserver.auth.authz import Attributes, Authorizer, forbidden
from apiserver.auth.impersonation import HEADER_PREFIX, impersonate
from apiserver.requestinfo import SCOPE_KEY, RequestInfo, request_info
from machinery.authn.user import UserInfo
from machinery.timeutil import parse_go_duration

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_UNAUTHORIZED = orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": "Unauthorized", "reason": "Unauthorized", "code": 401}) + b"\n"
# upstream maxinflight's tooManyRequests, as a Status that says when to come back
_TOO_MANY = errors.ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                            {"retryAfterSeconds": 1})
_TOO_MANY_BODY = orjson.dumps(_TOO_MANY.status()) + b"\n"
# upstream timeout.go: the request's context ran out before the handler answered
_TIMEOUT = errors.timeout("Timeout: request did not complete within requested timeout - context deadline exceeded")
_TIMEOUT_BODY = orjson.dumps(_TIMEOUT.status())
_JSON_HEADERS = [(b"content-type", b"application/json")]


def _facts(a: Attributes) -> RequestFacts:
    return RequestFacts(a.user.name, a.user.groups, a.verb, a.resource_request, a.path, a.api_group, a.api_version,
                        a.resource, a.subresource, a.namespace, a.name)


@dataclass
class Limits:
    """The request chain's limits (upstream --max-requests-inflight, --max-mutating-requests-inflight,
    --request-timeout); 0 turns one off."""

    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    request_timeout: float = 60.0


_TICK = 0.05


class Deadlines:
    """The deadlines of the requests being served, checked by one task every 50 ms while there are any: a
    timer per request (asyncio.timeout) cost more than the rest of the gate. An expired request's task is
    cancelled."""

    def __init__(self) -> None:
        self.pending: dict[asyncio.Task[Any], float] = {}
        self.expired: set[asyncio.Task[Any]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # known, current_task() need not look it up

    def add(self, at: float) -> asyncio.Task[Any]:
        """The current request's task, to be cancelled at `at` (time.monotonic())."""
        loop = self._loop
        task = asyncio.current_task(loop) if loop is not None else None
        if loop is None or task is None:
            loop = self._loop = asyncio.get_running_loop()
            task = asyncio.current_task(loop)
            assert task is not None
        self.pending[task] = at
        if self._ticker is None or self._ticker.done():
            self._ticker = loop.create_task(self._tick())
        return task

    def done(self, task: asyncio.Task[Any]) -> None:
        if self.pending.pop(task, None) is None and task in self.expired:
            self.expired.discard(task)
            task.uncancel()  # cancelled by us, and answered: the task goes on (uvicorn finishes the response)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(_TICK)
            if not self.pending:
                return  # idle: no wake-ups until a request with a deadline starts another
            now = time.monotonic()
            for task in [t for t, at in self.pending.items() if at <= now]:
                del self.pending[task]
                self.expired.add(task)
                task.cancel()


class Gate:
    """The ASGI middleware; `authn` None means no TLS port (every request is on the plain port)."""

    def __init__(self, app: ASGIApp, *, authenticator: Authenticator | None, authorizer: Authorizer,
                 auditor: Auditor | None, limits: Limits | None = None) -> None:
        self.app = app
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.auditor = auditor
        self.limits = limits or Limits()
        self.inflight = 0  # non-long-running read-only requests being served, system:masters apart
        self.mutating_inflight = 0
        self.deadlines = Deadlines()
        self._user_dicts: dict[int, tuple[UserInfo, dict[str, Any]]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        received = time.time()
        method = scope.get("method", "GET") if kind == "http" else "POST"  # a websocket exec is a create
        path = scope["path"]
        info = scope.get(SCOPE_KEY)  # the metrics middleware in front may have parsed it
        if info is None:
            info = scope[SCOPE_KEY] = request_info(method, path, scope.get("query_string") or b"")
        authorization = user_agent = None
        impersonation: list[tuple[bytes, bytes]] | None = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
            elif name == b"user-agent":
                user_agent = value
            elif name[:12] == HEADER_PREFIX:
                if impersonation is None:
                    impersonation = []
                impersonation.append((name, value))
        user: UserInfo | None
        if scope.get("scheme") in ("https", "wss"):
            peercert = scope.get("peercert")
            if self.authenticator is None:
                user = None
            else:
                user = self.authenticator.authenticate(peercert, authorization)
                if user is None and authorization is not None:
                    user = await self.authenticator.authenticate_live(authorization)
            if user is None and not peercert and not authorization and path in PUBLIC_PATHS:
                user = ANONYMOUS
        else:
            user = UNSECURED
        auditor = self.auditor
        if auditor is None and impersonation is None and user is not None and user.is_master:
            scope["user"] = user  # the fast path: nothing to decide, nothing to log, no limit on masters
            try:
                timeout = self._timeout(info)
            except errors.ApiError as e:
                await self._refuse(scope, send, e.code, orjson.dumps(e.status()), None, e.message)
                return
            await self._serve(scope, receive, send, timeout)
            return
        attrs = Attributes(user or ANONYMOUS, *info.attributes)
        ctx: AuditContext | None = None
        if auditor is not None:
            query = scope.get("query_string") or b""
            uri = path + ("?" + query.decode("latin-1") if query else "")
            client = scope.get("client")
            ctx = auditor.begin(_facts(attrs), self._user_dict(user) if user else {"username": ""},
                                uri, client[0] if client else None,
                                user_agent.decode("latin-1") if user_agent else None, received)
        try:
            timeout = self._timeout(info)  # upstream's request deadline comes before authentication
        except errors.ApiError as e:
            await self._refuse(scope, send, e.code, orjson.dumps(e.status()), ctx, e.message)
            return
        if user is None:
            await self._refuse(scope, send, 401, _UNAUTHORIZED, ctx, "Unauthorized")
            return
        if impersonation is not None:
            try:
                acting = impersonate(user, impersonation, self.authorizer)
            except errors.ApiError as e:
                await self._refuse(scope, send, e.code, orjson.dumps(e.status()), ctx, e.message)
                return
            if acting is not user:
                if ctx is not None:
                    ctx.event["impersonatedUser"] = acting.to_dict()
                user = attrs.user = acting
        # max in flight: after authentication and impersonation, before authorization (upstream's chain);
        # long-running requests and system:masters are not counted
        counted = 0
        master = user.is_master
        if not info.long_running and not master:
            if info.read_only:
                limit, current, counted = self.limits.max_requests_inflight, self.inflight, 1
            else:
                limit, current, counted = self.limits.max_mutating_requests_inflight, self.mutating_inflight, 2
            if limit <= 0:
                counted = 0
            elif current >= limit:
                await self._refuse(scope, send, 429, _TOO_MANY_BODY, ctx, _TOO_MANY.message,
                                   extra_headers=[(b"retry-after", b"1")])
                return
            elif counted == 1:
                self.inflight += 1
            else:
                self.mutating_inflight += 1
        try:
            annotations: dict[str, str] | None = None
            if not master:
                allowed, reason = self.authorizer.authorize(attrs)
                if not allowed:
                    error = forbidden(attrs, reason)
                    if ctx is not None:
                        annotations = {"authorization.k8s.io/decision": "forbid",
                                       "authorization.k8s.io/reason": reason}
                    await self._refuse(scope, send, 403, orjson.dumps(error.status()), ctx, error.message,
                                       annotations)
                    return
                if ctx is not None:
                    annotations = {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": reason}
            elif ctx is not None:
                annotations = {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}
            scope["user"] = user
            if ctx is None or auditor is None:
                await self._serve(scope, receive, send, timeout)
            else:
                scope["audit"] = ctx
                await self._audited(scope, receive, send, auditor, ctx, info.long_running, annotations, timeout)
        finally:
            if counted == 1:
                self.inflight -= 1
            elif counted == 2:
                self.mutating_inflight -= 1

    def _user_dict(self, user: UserInfo) -> dict[str, Any]:
        """user.to_dict() for the audit event, remembered per user object (the authenticator hands out one per
        certificate subject or token): the events only serialize it."""
        hit = self._user_dicts.get(id(user))
        if hit is not None and hit[0] is user:  # the user is held here, so its id is not another's
            return hit[1]
        if len(self._user_dicts) >= 1024:
            self._user_dicts.clear()
        found = user.to_dict()
        self._user_dicts[id(user)] = (user, found)
        return found

    def _timeout(self, info: RequestInfo) -> float:
        """The request's deadline in seconds, 0 for none (upstream request_deadline.go): --request-timeout
        for a request that is not long-running, or the client's shorter `?timeout=`."""
        if info.long_running:
            return 0.0
        timeout = self.limits.request_timeout
        asked = info.asked_timeout
        if asked:
            try:
                seconds = parse_go_duration(asked)
            except ValueError as e:
                raise errors.bad_request(f"invalid timeout specified in the request URL - {e}") from None
            if seconds > 0 and (timeout <= 0 or seconds < timeout):
                timeout = seconds
        return timeout

    async def _serve(self, scope: Scope, receive: Receive, send: Send, timeout: float) -> None:
        """The handler, cancelled at the deadline and answered 504 if it has not answered yet
        (upstream WithTimeoutForNonLongRunningRequests)."""
        if timeout <= 0 or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadlines = self.deadlines
        task = deadlines.add(time.monotonic() + timeout)
        try:
            await self.app(scope, receive, send)
        except asyncio.CancelledError:
            if task not in deadlines.expired:
                raise
            try:
                await send({"type": "http.response.start", "status": 504, "headers": list(_JSON_HEADERS)})
            except RuntimeError:  # half an answer is out: the connection ends, as upstream aborts the handler
                return
            await send({"type": "http.response.body", "body": _TIMEOUT_BODY})
        finally:
            deadlines.done(task)

    async def _audited(self, scope: Scope, receive: Receive, send: Send, auditor: Auditor, ctx: AuditContext,
                       long_running: bool, annotations: dict[str, str] | None, timeout: float) -> None:
        # an object with slots rather than a closure: a watch holds its send as long as it streams
        sender = _AuditedSend(send, auditor, ctx, long_running)
        wrapped_receive = receive
        request_body = ctx.request_body
        if request_body is not None:
            async def receive_wrapper() -> Message:
                message = await receive()
                if message["type"] == "http.request":
                    request_body.append(message.get("body", b""))
                return message

            wrapped_receive = receive_wrapper
        try:
            if timeout <= 0:  # no deadline (a watch): the app itself, without _serve's frame
                await self.app(scope, wrapped_receive, sender)
            else:
                await self._serve(scope, wrapped_receive, sender, timeout)
        except BaseException as e:
            auditor.panic(ctx, e)
            raise
        auditor.complete(ctx, sender.code or (403 if scope["type"] == "websocket" else 500), annotations)

    async def _refuse(self, scope: Scope, send: Send, code: int, body: bytes, ctx: AuditContext | None,
                      message: str, annotations: dict[str, str] | None = None,
                      extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:
        if scope["type"] == "websocket" and "websocket.http.response" not in (scope.get("extensions") or {}):
            await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
        elif scope["type"] == "websocket":  # the upgrade refused with the Status, as upstream answers it
            await send({"type": "websocket.http.response.start", "status": code, "headers": list(_JSON_HEADERS)})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            headers = list(_JSON_HEADERS)
            if extra_headers:
                headers += extra_headers
            if ctx is not None:
                headers.append((b"audit-id", ctx.event["auditID"].encode()))
            await send({"type": "http.response.start", "status": code, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        if ctx is not None and self.auditor is not None:
            self.auditor.complete(ctx, code, annotations, message)


class _AuditedSend:
    """An audited request's send: notes the response's code (and body, at RequestResponse), adds the Audit-Id
    header, and for a long-running request writes the ResponseStarted stage as the response starts."""

    __slots__ = ("auditor", "code", "ctx", "long_running", "send")

    def __init__(self, send: Send, auditor: Auditor, ctx: AuditContext, long_running: bool) -> None:
        self.send = send
        self.auditor = auditor
        self.ctx = ctx
        self.long_running = long_running
        self.code = 0

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        ctx = self.ctx
        if kind == "http.response.start":
            self.code = message["status"]
            headers = list(message.get("headers") or ())
            headers.append((b"audit-id", ctx.event["auditID"].encode()))
            message["headers"] = headers
            if ctx.response_body is not None:
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                ctx.response_json = b"json" in ctype and not self.long_running
            if self.long_running:
                self.auditor.response_started(ctx, self.code)
        elif kind == "http.response.body" and ctx.response_body is not None and ctx.response_json:
            ctx.response_body.append(message.get("body", b""))
        elif kind == "websocket.accept":
            self.code = 101
            if self.long_running:
                self.auditor.response_started(ctx, self.code)
        await self.send(message)
