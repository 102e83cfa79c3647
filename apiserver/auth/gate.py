"""The request filter in front of every route (upstream: DefaultBuildHandlerChain's
WithRequestInfo → WithAuthentication → WithAudit → WithAuthorization), one pure ASGI middleware
so a request pays for it once:

1. request info: verb, API group/version, resource, subresource, namespace, name (or a path);
2. authentication: on the TLS port the verified client certificate or a bearer token (nothing →
   401, except the public health and version paths, which are anonymous); on the plain
   development port every request is "system:unsecured" in system:masters, as upstream's
   insecure port was;
3. audit: the policy's level for this request; the event is written when the response completes;
4. impersonation: Impersonate-* headers (kubectl --as) switch to another user once the requester
   may impersonate it (see impersonation.py); the audit event keeps the requester and notes
   the impersonatedUser;
5. authorization: system:masters first, then Node, then RBAC; nothing allows → 403.

The user goes on to the handlers in scope["user"] (admission and access reviews read it), the
audit context in scope["audit"].
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

import orjson

from apiserver import errors
from apiserver.audit import AuditContext, Auditor, RequestFacts
from apiserver.auth.authn import ANONYMOUS, PUBLIC_PATHS, UNSECURED, Authenticator, UserInfo
from apiserver.auth.authz import Attributes, Authorizer, forbidden
from apiserver.auth.impersonation import HEADER_PREFIX, impersonate
from apiserver.requestinfo import resolve
from machinery.api.resources import RESOURCES

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_UNAUTHORIZED = orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
_JSON_HEADERS = [(b"content-type", b"application/json")]
_LONG_RUNNING_SUBRESOURCES = frozenset({"log", "exec", "attach", "portforward", "proxy"})


def _namespaced_by_group_version() -> dict[tuple[str, str], frozenset[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for info in RESOURCES:
        names = out.setdefault((info.group, info.version), set())
        if info.namespaced:
            names.add(info.plural)
    return {k: frozenset(v) for k, v in out.items()}


_GROUP_VERSIONS = _namespaced_by_group_version()


_REQUEST_CACHE_SIZE = 4096
# (method, path, query) -> what request_attributes says besides the user: the same paths come again and again
# (a controller's creates, a kubelet's status writes), and parsing one costs more than the dictionary lookup
_requests: dict[tuple[str, str, bytes], tuple[Any, ...]] = {}


def request_attributes(user: UserInfo, method: str, path: str, query: bytes) -> Attributes:
    """The authorizer's view of a request (upstream RequestInfoFactory.NewRequestInfo)."""
    key = (method, path, query)
    fields = _requests.get(key)
    if fields is None:
        fields = _parse_request(method, path, query)
        if len(_requests) >= _REQUEST_CACHE_SIZE:
            _requests.clear()
        _requests[key] = fields
    return Attributes(user, *fields)


def _parse_request(method: str, path: str, query: bytes) -> tuple[Any, ...]:
    """Attributes' fields after the user: (verb, resource_request, path, group, version, resource, subresource,
    namespace, name, field_selector)."""
    group = version = rest = None
    if path.startswith("/api/"):
        version, _, rest = path[5:].partition("/")
        group = ""
    elif path.startswith("/apis/"):
        group, _, tail = path[6:].partition("/")
        version, _, rest = tail.partition("/")
    if rest and group is not None and version is not None:
        namespaced = _GROUP_VERSIONS.get((group, version))
        if namespaced is not None:
            watch = False
            field_selector = ""
            if query and method == "GET":
                q = parse_qs(query.decode("latin-1"))
                watch = (q.get("watch") or [""])[0] in ("true", "1")
                field_selector = (q.get("fieldSelector") or [""])[0]
            info = resolve(method, rest, namespaced, watch)
            if info is not None:
                return (info.verb, True, path, group, version, info.resource, info.subresource or "",
                        info.namespace or "", info.name or "", field_selector)
    return (method.lower(), False, path)


def _facts(a: Attributes) -> RequestFacts:
    return RequestFacts(a.user.name, a.user.groups, a.verb, a.resource_request, a.path, a.api_group, a.api_version,
                        a.resource, a.subresource, a.namespace, a.name)


def _long_running(a: Attributes) -> bool:
    return a.verb == "watch" or a.subresource in _LONG_RUNNING_SUBRESOURCES


class Gate:
    """The ASGI middleware; `authn` None means no TLS port (every request is on the plain port)."""

    def __init__(self, app: ASGIApp, *, authenticator: Authenticator | None, authorizer: Authorizer,
                 auditor: Auditor | None) -> None:
        self.app = app
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.auditor = auditor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        received = time.time()
        method = scope.get("method", "GET") if kind == "http" else "POST"  # a websocket exec is a create
        path = scope["path"]
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
            if user is None and not peercert and not authorization and path in PUBLIC_PATHS:
                user = ANONYMOUS
        else:
            user = UNSECURED
        auditor = self.auditor
        if auditor is None and impersonation is None and user is not None and user.is_master:
            scope["user"] = user  # the fast path: nothing to decide, nothing to log
            await self.app(scope, receive, send)
            return
        attrs = request_attributes(user or ANONYMOUS, method, path, scope.get("query_string") or b"")
        ctx: AuditContext | None = None
        if auditor is not None:
            query = scope.get("query_string") or b""
            uri = path + ("?" + query.decode("latin-1") if query else "")
            client = scope.get("client")
            ctx = auditor.begin(_facts(attrs), user.to_dict() if user else {"username": ""},
                                uri, client[0] if client else None,
                                user_agent.decode("latin-1") if user_agent else None, received)
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
        annotations: dict[str, str] | None = None
        if not user.is_master:
            allowed, reason = self.authorizer.authorize(attrs)
            if not allowed:
                error = forbidden(attrs, reason)
                if ctx is not None:
                    annotations = {"authorization.k8s.io/decision": "forbid", "authorization.k8s.io/reason": reason}
                await self._refuse(scope, send, 403, orjson.dumps(error.status()), ctx, error.message, annotations)
                return
            if ctx is not None:
                annotations = {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": reason}
        elif ctx is not None:
            annotations = {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}
        scope["user"] = user
        if ctx is None or auditor is None:
            await self.app(scope, receive, send)
            return
        scope["audit"] = ctx
        await self._audited(scope, receive, send, auditor, ctx, _long_running(attrs), annotations)

    async def _audited(self, scope: Scope, receive: Receive, send: Send, auditor: Auditor, ctx: AuditContext,
                       long_running: bool, annotations: dict[str, str] | None) -> None:
        code = 0
        audit_id = ctx.event["auditID"].encode()
        request_body, response_body = ctx.request_body, ctx.response_body

        async def send_wrapper(message: Message) -> None:
            nonlocal code
            kind = message["type"]
            if kind == "http.response.start":
                code = message["status"]
                headers = list(message.get("headers") or ())
                headers.append((b"audit-id", audit_id))
                message["headers"] = headers
                if response_body is not None:
                    ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                    ctx.response_json = b"json" in ctype and not long_running
                if long_running:
                    auditor.response_started(ctx, code)
            elif kind == "http.response.body" and response_body is not None and ctx.response_json:
                response_body.append(message.get("body", b""))
            elif kind == "websocket.accept":
                code = 101
                if long_running:
                    auditor.response_started(ctx, code)
            await send(message)

        wrapped_receive = receive
        if request_body is not None:
            async def receive_wrapper() -> Message:
                message = await receive()
                if message["type"] == "http.request":
                    request_body.append(message.get("body", b""))
                return message

            wrapped_receive = receive_wrapper
        try:
            await self.app(scope, wrapped_receive, send_wrapper)
        except BaseException as e:
            auditor.panic(ctx, e)
            raise
        auditor.complete(ctx, code or (403 if scope["type"] == "websocket" else 500), annotations)

    async def _refuse(self, scope: Scope, send: Send, code: int, body: bytes, ctx: AuditContext | None,
                      message: str, annotations: dict[str, str] | None = None) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
        else:
            headers = list(_JSON_HEADERS)
            if ctx is not None:
                headers.append((b"audit-id", ctx.event["auditID"].encode()))
            await send({"type": "http.response.start", "status": code, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        if ctx is not None and self.auditor is not None:
            self.auditor.complete(ctx, code, annotations, message)
