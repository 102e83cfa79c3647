"""Warnings and audit annotations for the request being served (upstream: staging/.../apiserver/pkg/warning
and endpoints/filters/warning.go, the request context's warning recorder; audit.AddAuditAnnotation).

Any code that runs inside a request (an admission plugin, a handler) calls `add_warning(text)` or
`add_audit_annotation(key, value)`; nothing needs to be passed down. The recorder lives in a
context variable the `WarningRecorder` middleware sets per request: warnings leave as `Warning:
299 - "text"` response headers (deduplicated, in order; kubectl prints each as `Warning: text`),
audit annotations go on the request's audit event (the first value of a key wins, as upstream).
Outside a request both are no-ops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# upstream's recorder bounds: a warning is cut at 4 KiB of text (by runes there, characters here), and
# once 64 KiB are recorded further warnings are dropped, so a response's headers stay bounded
MAX_WARNING_LENGTH = 4 * 1024
MAX_TOTAL_LENGTH = 64 * 1024


class Recorder:
    __slots__ = ("audit", "total", "warnings")

    def __init__(self, audit: Any) -> None:
        self.audit = audit  # the request's audit.AuditContext, or None
        self.warnings: list[str] = []
        self.total = 0

    def add_warning(self, text: str) -> None:
        text = " ".join(text.split())  # one header line: no newlines or control whitespace
        if not text or text in self.warnings:
            return
        text = text[:MAX_WARNING_LENGTH]
        if self.total + len(text) > MAX_TOTAL_LENGTH:
            return
        self.total += len(text)
        self.warnings.append(text)

    def add_audit_annotation(self, key: str, value: str) -> None:
        if self.audit is not None:
            self.audit.event.setdefault("annotations", {}).setdefault(key, value)


_current: ContextVar[Recorder | None] = ContextVar("minik8s_request_recorder", default=None)


def add_warning(text: str) -> None:
    recorder = _current.get()
    if recorder is not None:
        recorder.add_warning(text)


def add_audit_annotation(key: str, value: str) -> None:
    recorder = _current.get()
    if recorder is not None:
        recorder.add_audit_annotation(key, value)


def header_value(text: str) -> bytes:
    """RFC 7234 warn-text: 299 (miscellaneous persistent warning), no agent, the text quoted."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'.encode("utf-8", "replace")


class WarningRecorder:
    """The ASGI middleware, inside the gate (so the request's audit context is known)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        recorder = Recorder(scope.get("audit"))
        token = _current.set(recorder)

        async def send_with_warnings(message: Message) -> None:
            if message["type"] == "http.response.start" and recorder.warnings:
                headers = list(message.get("headers") or ())
                headers.extend((b"warning", header_value(w)) for w in recorder.warnings)
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_warnings)
        finally:
            _current.reset(token)
