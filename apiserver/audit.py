"""The audit log (upstream: staging/.../apiserver/pkg/audit): every request the policy selects
becomes audit.k8s.io/v1 Event JSON lines in --audit-log-path.

The policy (--audit-policy-file, an audit.k8s.io/v1 Policy) is a list of rules; the first rule
that matches a request gives its level:
  None             not logged
  Metadata         who (user, groups, user agent, source IPs), what (verb, requestURI, objectRef),
                   the answer's code, and when (requestReceivedTimestamp, stageTimestamp)
  Request          ... and the request body (requestObject)
  RequestResponse  ... and the response body (responseObject)
With no policy file, every request is logged at Metadata. Stages: ResponseComplete for every
request; ResponseStarted too for long-running ones (watches, log follows, exec); RequestReceived
unless the policy omits it (omitStages). Requests on the plain development port are logged like
the rest, as user "system:unsecured" (group system:masters), upstream's name for that port.

`python -m apiserver.audit LOG [--resource R] [--verb V] [--user U] [--namespace N] [--name N]`
prints the matching entries as a table (who did what, with which user agent); mkubectl can
wrap it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Iterable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from machinery.api import audit_v1
from machinery.timeutil import format_rfc3339_micro

LEVELS = ("None", "Metadata", "Request", "RequestResponse")
_RANK = {level: i for i, level in enumerate(LEVELS)}


_ID_BATCH = 256
_random_hex: list[str] = []  # 32 hex digits of os.urandom each, taken from the end


# in a rule's omit set beside the stages: the request and response objects are logged without
# metadata.managedFields (upstream Policy.omitManagedFields / PolicyRule.omitManagedFields)
OMIT_MANAGED_FIELDS = "omitManagedFields"


def _without_managed_fields(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    if isinstance(obj.get("items"), list):
        obj = {**obj, "items": [_without_managed_fields(item) for item in obj["items"]]}
    return obj


def new_audit_id() -> str:
    """A random (version 4) UUID, without building a uuid.UUID; the randomness is read from the kernel
    256 ids at a time (one getrandom call per request was a visible part of the gate's cost)."""
    if not _random_hex:
        h = os.urandom(16 * _ID_BATCH).hex()
        _random_hex.extend(h[i:i + 32] for i in range(0, len(h), 32))
    h = _random_hex.pop()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


# -- the policy ----------------------------------------------------------------------------------------


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs a setattr call per field, per request
class RequestFacts:
    """What the policy looks at (and what the event says about the request)."""

    user: str
    groups: tuple[str, ...]
    verb: str
    resource_request: bool
    path: str
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


class _Rule:
    __slots__ = ("groups", "level", "namespaces", "omit", "resources", "urls", "users", "verbs")

    def __init__(self, rule: audit_v1.PolicyRule, policy_omit: frozenset[str]):
        self.level = rule.level
        self.users = frozenset(rule.users or ())
        self.groups = frozenset(rule.user_groups or ())
        self.verbs = frozenset(rule.verbs or ())
        self.resources = [(g.group or "", frozenset(g.resources or ()), frozenset(g.resource_names or ()))
                          for g in rule.resources or ()]
        self.namespaces = frozenset(rule.namespaces or ())
        self.urls = tuple(rule.non_resource_urls or ())
        self.omit = policy_omit | frozenset(rule.omit_stages or ())
        if rule.omit_managed_fields is not None:  # the rule's word over the policy's
            self.omit = (self.omit | {OMIT_MANAGED_FIELDS} if rule.omit_managed_fields
                         else self.omit - {OMIT_MANAGED_FIELDS})

    def matches(self, r: RequestFacts) -> bool:
        if self.users and r.user not in self.users:
            return False
        if self.groups and not any(g in self.groups for g in r.groups):
            return False
        if self.verbs and r.verb not in self.verbs:
            return False
        if self.resources or self.namespaces:
            if not r.resource_request:
                return False
            if self.namespaces and r.namespace not in self.namespaces:
                return False
            if self.resources and not any(self._resource_matches(g, r) for g in self.resources):
                return False
        if self.urls:
            if r.resource_request:
                return False
            if not any(u == "*" or u == r.path or (u.endswith("*") and r.path.startswith(u[:-1]))
                       for u in self.urls):
                return False
        return True

    @staticmethod
    def _resource_matches(gr: tuple[str, frozenset[str], frozenset[str]], r: RequestFacts) -> bool:
        group, resources, names = gr
        if group != r.api_group:
            return False
        if not resources:
            return True
        if names and r.name not in names:
            return False
        combined = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
        if combined in resources or "*" in resources:
            return True
        if r.subresource and f"*/{r.subresource}" in resources:
            return True
        return any(res.endswith("/*") and res[:-2] == r.resource for res in resources)


class Policy:
    """A compiled audit Policy: level_for(request) → (level, stages to omit)."""

    def __init__(self, policy: audit_v1.Policy):
        omit = frozenset(policy.omit_stages or ()) | ({OMIT_MANAGED_FIELDS} if policy.omit_managed_fields else set())
        self.rules = [_Rule(rule, omit) for rule in policy.rules]

    @classmethod
    def default(cls) -> Policy:
        """Every request at Metadata; RequestReceived omitted (the line at ResponseComplete says it all)."""
        return cls(audit_v1.Policy(omit_stages=["RequestReceived"],
                                   rules=[audit_v1.PolicyRule(level="Metadata")]))

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        doc = yaml.safe_load(Path(path).read_text())
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: an audit.k8s.io/v1 Policy is a mapping")
        return cls(audit_v1.Policy.from_dict(doc))

    def level_for(self, r: RequestFacts) -> tuple[str, frozenset[str]]:
        for rule in self.rules:
            if rule.matches(r):
                return rule.level, rule.omit
        return "None", frozenset()


# -- the log -------------------------------------------------------------------------------------------


class LogWriter:
    """Appends lines to the log file, in batches (upstream's buffered batch backend): the lines go out in one
    write at most BATCH_WAIT seconds after the first of them, or as soon as BATCH_BYTES are waiting, and at
    close(), so the log is complete and in order when the apiserver stops. A write per event loop turn was a
    visible part of what the gate costs a request."""

    BATCH_WAIT = 0.02
    BATCH_BYTES = 256 * 1024

    def __init__(self, path: str | Path):
        self.path = str(path)
        if self.path == "-":
            self.fd = sys.stdout.fileno()
        else:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._pending: list[bytes] = []
        self._size = 0
        self._timer: asyncio.TimerHandle | None = None

    def write(self, line: bytes) -> None:
        self._pending.append(line)
        self._size += len(line)
        if self._size >= self.BATCH_BYTES:
            self.flush()
        elif self._timer is None:
            try:
                self._timer = asyncio.get_running_loop().call_later(self.BATCH_WAIT, self.flush)
            except RuntimeError:  # no loop (tests, shutdown): write now
                self.flush()

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._size = 0
            while data:
                data = data[os.write(self.fd, data):]

    def close(self) -> None:
        self.flush()
        if self.path != "-":
            os.close(self.fd)


class AuditContext:
    """One request's audit event while the request runs."""

    __slots__ = ("event", "level", "omit", "request_body", "response_body", "response_json", "started")

    def __init__(self, level: str, omit: frozenset[str], event: dict[str, Any]):
        self.level = level
        self.omit = omit
        self.event = event
        self.request_body: list[bytes] | None = [] if _RANK[level] >= _RANK["Request"] else None
        self.response_body: list[bytes] | None = [] if level == "RequestResponse" else None
        self.response_json = True
        self.started = False

    def note_object(self, obj: dict[str, Any]) -> None:
        """Fill objectRef's name/namespace from the object a create made (upstream fills it from
        the request object; a generateName create only has its name afterwards)."""
        ref = self.event.get("objectRef")
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if ref is None or not isinstance(meta, dict):
            return
        if not ref.get("name") and meta.get("name"):
            ref["name"] = meta["name"]
        if meta.get("uid"):
            ref.setdefault("uid", meta["uid"])


def note_object(scope: MutableMapping[str, Any], obj: dict[str, Any]) -> None:  # scope: the ASGI scope
    ctx = scope.get("audit")
    if ctx is not None:
        ctx.note_object(obj)


class Auditor:
    def __init__(self, policy: Policy, writer: LogWriter):
        self.policy = policy
        self.writer = writer

    def begin(self, r: RequestFacts, user: dict[str, Any], request_uri: str, source_ip: str | None,
              user_agent: str | None, received: float) -> AuditContext | None:
        level, omit = self.policy.level_for(r)
        if level == "None":
            return None
        event: dict[str, Any] = {
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": level, "auditID": new_audit_id(),
            "stage": "RequestReceived", "requestURI": request_uri, "verb": r.verb, "user": user,
            "sourceIPs": [source_ip] if source_ip else [],
        }
        if user_agent:
            event["userAgent"] = user_agent
        if r.resource_request:
            ref: dict[str, Any] = {"resource": r.resource}
            if r.namespace:
                ref["namespace"] = r.namespace
            if r.name:
                ref["name"] = r.name
            if r.api_group:
                ref["apiGroup"] = r.api_group
            ref["apiVersion"] = r.api_version
            if r.subresource:
                ref["subresource"] = r.subresource
            event["objectRef"] = ref
        event["requestReceivedTimestamp"] = format_rfc3339_micro(received)
        ctx = AuditContext(level, omit, event)
        if "RequestReceived" not in omit:
            self._emit(ctx, "RequestReceived")
        return ctx

    def _emit(self, ctx: AuditContext, stage: str) -> None:
        ev = ctx.event
        ev["stage"] = stage
        ev["stageTimestamp"] = format_rfc3339_micro(time.time())
        # a copy in a block of its own size: orjson answers bytes in a buffer of at least 4 KiB, and a batch of lines
        # waiting for the writer (up to BATCH_BYTES: hundreds of them when a thousand watches open at once) held
        # one each
        self.writer.write(bytes(memoryview(orjson.dumps(ev, option=orjson.OPT_APPEND_NEWLINE))))

    def response_started(self, ctx: AuditContext, code: int) -> None:
        """Long-running requests: a line when the response starts (the complete one comes at the end)."""
        ctx.event["responseStatus"] = {"metadata": {}, "code": code}
        ctx.started = True
        if "ResponseStarted" not in ctx.omit:
            self._emit(ctx, "ResponseStarted")

    def complete(self, ctx: AuditContext, code: int, annotations: dict[str, str] | None = None,
                 message: str | None = None) -> None:
        ev = ctx.event
        status: dict[str, Any] = {"metadata": {}, "code": code}
        if message:
            status["message"] = message
        if code >= 400:
            status["status"] = "Failure"
        ev["responseStatus"] = status
        if annotations:  # before what the handlers added (apiserver.warning.add_audit_annotation)
            ev["annotations"] = {**annotations, **ev["annotations"]} if "annotations" in ev else annotations
        if ctx.request_body:
            obj = _decode(b"".join(ctx.request_body))
            if obj is not None:
                ev["requestObject"] = _without_managed_fields(obj) if OMIT_MANAGED_FIELDS in ctx.omit else obj
        if ctx.response_body and ctx.response_json:
            obj = _decode(b"".join(ctx.response_body))
            if obj is not None:
                ev["responseObject"] = _without_managed_fields(obj) if OMIT_MANAGED_FIELDS in ctx.omit else obj
        if "ResponseComplete" not in ctx.omit:
            self._emit(ctx, "ResponseComplete")

    def panic(self, ctx: AuditContext, error: BaseException) -> None:
        ctx.event["responseStatus"] = {"metadata": {}, "code": 500, "status": "Failure",
                                       "message": f"APIServer panic'd: {type(error).__name__}: {error}"}
        if "Panic" not in ctx.omit:
            self._emit(ctx, "Panic")

    def close(self) -> None:
        self.writer.close()


def _decode(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        value = yaml.safe_load(body)
    except yaml.YAMLError:
        return None
    return value if isinstance(value, dict) else None


# -- reading the log ----------------------------------------------------------------------------------


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """The events in an audit log, in order (a torn last line is skipped)."""
    with open(path, "rb") as f:
        for line in f:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(event, dict) and event.get("kind") == "Event":
                yield event


def matches(event: dict[str, Any], *, resource: str | None = None, verb: str | None = None,
            user: str | None = None, namespace: str | None = None, name: str | None = None,
            group: str | None = None, stage: str | None = "ResponseComplete") -> bool:
    """Does the event match every filter given? resource may be "pods/binding" or "deployments.apps"."""
    ref = event.get("objectRef") or {}
    if stage and event.get("stage") != stage:
        return False
    if verb and event.get("verb") != verb:
        return False
    if user and (event.get("user") or {}).get("username") != user:
        return False
    if namespace and ref.get("namespace") != namespace:
        return False
    if name and ref.get("name") != name:
        return False
    if group is not None and ref.get("apiGroup", "") != group:
        return False
    if resource:
        res, _, grp = resource.partition(".")
        res, _, sub = res.partition("/")
        if ref.get("resource") != res or (sub or "") != ref.get("subresource", ""):
            return False
        if grp and ref.get("apiGroup", "") != grp:
            return False
    return True


def filter_events(events: Iterable[dict[str, Any]], **filters: Any) -> list[dict[str, Any]]:
    return [e for e in events if matches(e, **filters)]


COLUMNS = ("TIME", "VERB", "RESOURCE", "NAMESPACE", "NAME", "CODE", "USER", "USER-AGENT")


def row(event: dict[str, Any]) -> tuple[str, ...]:
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "")
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    if ref.get("apiGroup"):
        resource += "." + ref["apiGroup"]
    return (event.get("requestReceivedTimestamp", ""), event.get("verb", ""), resource or event.get("requestURI", ""),
            ref.get("namespace", ""), ref.get("name", ""), str((event.get("responseStatus") or {}).get("code", "")),
            _who(event), event.get("userAgent", ""))


def _who(event: dict[str, Any]) -> str:
    """The requester, and whom it impersonated: `ops (as jane)`."""
    user = (event.get("user") or {}).get("username", "")
    acting = (event.get("impersonatedUser") or {}).get("username")
    return f"{user} (as {acting})" if acting else user


def format_table(rows: list[tuple[str, ...]]) -> str:
    table = [COLUMNS, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m apiserver.audit",
                                description="who did what: filter an audit log and print one line per request")
    p.add_argument("log", help="the apiserver's --audit-log-path")
    p.add_argument("--resource", help='e.g. pods, pods/binding, deployments.apps')
    p.add_argument("--verb", help="create, update, patch, delete, get, list, watch, ...")
    p.add_argument("--user", help="username, e.g. system:kube-scheduler")
    p.add_argument("--namespace", "-n")
    p.add_argument("--name")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = p.parse_args(argv)
    events = filter_events(read_events(args.log), resource=args.resource, verb=args.verb, user=args.user,
                           namespace=args.namespace, name=args.name)
    if args.output == "json":
        for e in events:
            sys.stdout.write(orjson.dumps(e).decode() + "\n")
    else:
        print(format_table([row(e) for e in events]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
