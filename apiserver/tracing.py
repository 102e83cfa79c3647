"""The apiserver's spans (the tracing contract; machinery/tracing.py sets the exporter up): installed only
with --tracing-config-file, so a server without it runs none of this.

- `RequestTracing`, the outermost middleware: `apiserver.request` (SERVER) per request, a child of the
  caller's span when it sent a traceparent, current while the gate and the handler run, so authentication,
  authorization, admission and etcd record their steps on it. A long-running request (watch, exec, logs)
  gets a short span for its setup: it ends when the response starts. The object written or returned is
  read from the JSON answer (only when the span is sampled).
- `TracedAuthenticator`, `TracedAuthorizer`: `apiserver.authenticate` and `apiserver.authorize` around the
  gate's calls.
- admission (apiserver/admission/chain.py: `plugin_span`, `apiserver.admission`) and etcd
  (apiserver/storage/etcd.py, `apiserver.etcd`) record theirs when there is a sampled request span.

Each step is an event on the request's span (machinery/tracing.record_step: the event's time is the step's start,
`k8s.step.duration_ns` its duration), as upstream's apiserver records a request's steps (component-base/tracing:
one span per request, its steps events on it), not a child span: a child span costs the SDK an id, a sampler
decision, the processor's queue and an encoding of its own, which made tracing every create cost a fifth of the
apiserver's creates/s (bench.tracing_bench). The road server turns each such event back into a child step.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace

from apiserver.requestinfo import of_scope
from machinery import tracing

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_WRITES = frozenset({"create", "update", "patch", "delete"})
_OBJECT_VERBS = _WRITES | {"get"}
_MAX_BODY = 4 << 20  # an answer larger than this is not read for its object


class RequestTracing:
    """ASGI middleware: the `apiserver.request` span of every HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracer = tracing.TRACER
        if tracer is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or ()
        parent = tracing.extract_asgi(headers)
        if parent is None and tracing.ROOT_RATE == 0.0:  # nothing would be sampled: no span at all
            await self.app(scope, receive, send)
            return
        info = of_scope(scope)
        method = scope.get("method", "GET") if scope["type"] == "http" else "GET"
        span = tracer.start_span("apiserver.request", context=parent, kind=tracing.SERVER,
                                 start_time=time.time_ns())
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        recording = span.is_recording()
        steps = tracing.steps_on(span if recording else None)  # where authn, authz, admission and etcd look
        attrs: dict[str, Any] = {}
        if recording:
            attrs = {"http.request.method": method, "url.path": scope["path"],
                                     "k8s.verb": info.verb}
            if info.is_resource_request:
                attrs["k8s.resource"] = info.resource
                if info.subresource:  # each attribute costs the SDK a check and the exporter an encoding
                    attrs["k8s.subresource"] = info.subresource
                if info.namespace:
                    attrs["k8s.object.namespace"] = info.namespace
                if info.name:
                    attrs["k8s.object.name"] = info.name
            manager = info.query.get("fieldManager")
            if manager:
                attrs["k8s.field_manager"] = manager
            for name, value in headers:
                if name == b"user-agent":
                    attrs["user_agent.original"] = value.decode("latin-1")
            span.set_attributes(attrs)
        want_body = recording and info.verb in _OBJECT_VERBS and not info.long_running
        body: list[bytes] = []
        state = {"code": 0, "json": False, "ended": False, "size": 0}

        def finish() -> None:
            if state["ended"]:
                return
            state["ended"] = True
            if recording:
                code = int(state["code"])
                final: dict[str, Any] = {"http.response.status_code": code}
                user = scope.get("user")
                if user is not None:
                    final["enduser.id"] = user.name
                if body and state["json"]:
                    _object_attributes(span, final, b"".join(body), info.verb)
                    for key in ("k8s.object.namespace", "k8s.object.name"):  # set at the start already
                        if key in final and final[key] == attrs.get(key):
                            del final[key]
                span.set_attributes(final)  # once: each call takes the span's lock and checks every value
                if code >= 500:
                    span.set_status(trace.Status(trace.StatusCode.ERROR))
            span.end()

        async def traced_send(message: Message) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                state["code"] = message["status"]
                if want_body:
                    ctype = next((v for k, v in message.get("headers") or () if k.lower() == b"content-type"), b"")
                    state["json"] = b"json" in ctype
                if info.long_running:
                    finish()
            elif kind == "websocket.accept":
                state["code"] = 101
                finish()
            elif kind == "http.response.body" and want_body and state["json"]:
                chunk = message.get("body", b"")
                state["size"] = int(state["size"]) + len(chunk)
                if int(state["size"]) <= _MAX_BODY:
                    body.append(chunk)
                else:
                    body.clear()
                    state["json"] = False
            await send(message)

        try:
            await self.app(scope, receive, traced_send)
        except BaseException as e:
            if recording and not state["ended"]:
                span.record_exception(e)
                if not state["code"]:
                    state["code"] = 500
            raise
        finally:
            tracing.steps_off(steps)
            otel_context.detach(token)
            finish()


def _object_attributes(span: Any, final: dict[str, Any], raw: bytes, verb: str) -> None:
    """The attributes of the object in the answer, into final."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return
    if not isinstance(obj, dict) or obj.get("kind") == "Status" or "items" in obj:
        return
    final.update(tracing.object_attributes(obj))
    if verb in _WRITES:
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        current = getattr(span, "attributes", None) or {}
        # etcd's span set it on this one (the revision of the write itself: a delete's too); else the answer's
        if "k8s.etcd.revision" not in current and isinstance(rv, str) and rv.isdigit():
            final["k8s.etcd.revision"] = int(rv)


_AUTHN_OK = {"k8s.authn.result": "ok"}
_AUTHN_FAILED = {"k8s.authn.result": "unauthenticated"}


class TracedAuthenticator:
    """The gate's authenticator, each call an `apiserver.authenticate` step."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def authenticate(self, peercert: Any, authorization: bytes | None) -> Any:
        start = time.time_ns()
        user = self.inner.authenticate(peercert, authorization)
        # who it is, the request's enduser.id says
        tracing.record_step("apiserver.authenticate", start, time.time_ns(),
                            _AUTHN_OK if user is not None else _AUTHN_FAILED)
        return user

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class TracedAuthorizer:
    """The gate's authorizer, each call an `apiserver.authorize` step with the decision."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def authorize(self, a: Any) -> tuple[bool, str]:
        start = time.time_ns()
        allowed, reason = self.inner.authorize(a)
        tracing.record_step("apiserver.authorize", start, time.time_ns(),
                            {"k8s.authz.decision": "allow" if allowed else "deny", "k8s.authz.reason": reason})
        return allowed, reason

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _PluginSpan:
    """`apiserver.admission` for one admission plugin or webhook: whether a mutating one changed the object
    (compared in its JSON form before and after; a validating one has no `k8s.admission.mutated`), and
    `k8s.admission.denied` when it said no."""

    __slots__ = ("a", "before", "name", "phase", "start")

    def __init__(self, name: str, phase: str, a: Any) -> None:
        self.name, self.phase, self.a = name, phase, a
        self.before = orjson.dumps(a.obj) if phase == "mutating" and a.obj is not None else None
        self.start = time.time_ns()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        attrs: dict[str, Any] = {"k8s.admission.plugin": self.name, "k8s.admission.phase": self.phase}
        if self.phase == "mutating":
            attrs["k8s.admission.mutated"] = (self.before is not None and self.a.obj is not None
                                              and orjson.dumps(self.a.obj) != self.before)
        if exc[0] is not None and issubclass(exc[0], Exception):  # type: ignore[arg-type]
            attrs["k8s.admission.denied"] = True
        tracing.record_step("apiserver.admission", self.start, time.time_ns(), attrs)


_NOOP = contextlib.nullcontext()


# The resources each built-in admission plugin looks at (upstream's plugins' Handles and their checks of the
# resource): a step is recorded for the plugins that take part in a request, not for every one the chain asks.
# Webhooks, and plugins not named here, always get one.
_QUOTA_COUNTED = frozenset({"pods", "services", "configmaps", "secrets", "persistentvolumeclaims",
                            "replicationcontrollers", "resourcequotas"})
_WORKLOADS = frozenset({"pods", "namespaces", "podtemplates", "replicationcontrollers", "replicasets", "deployments",
                        "statefulsets", "daemonsets", "jobs", "cronjobs"})
_PLUGIN_RESOURCES: dict[str, frozenset[str]] = {
    "LimitRanger": frozenset({"pods", "persistentvolumeclaims"}),
    "ServiceAccount": frozenset({"pods"}),
    "Priority": frozenset({"pods", "priorityclasses"}),
    "DefaultStorageClass": frozenset({"persistentvolumeclaims"}),
    "DefaultIngressClass": frozenset({"ingresses"}),
    "StorageObjectInUseProtection": frozenset({"persistentvolumeclaims", "persistentvolumes"}),
    "PersistentVolumeClaimResize": frozenset({"persistentvolumeclaims"}),
    "PodSecurity": _WORKLOADS,
    "ResourceQuota": _QUOTA_COUNTED,
}


def plugin_span(name: str, phase: str, a: Any) -> contextlib.AbstractContextManager[None]:
    """The admission chain's step of one plugin (a no-op unless a sampled request span is current and the plugin
    takes part in the request)."""
    if tracing.TRACER is None:
        return _NOOP
    resources = _PLUGIN_RESOURCES.get(name)
    if resources is not None and a.store.info.plural not in resources:
        return _NOOP
    if tracing.step_span() is None:
        return _NOOP
    return _PluginSpan(name, phase, a)
