"""apiserver.requestinfo: one parse of a request, as upstream's RequestInfoFactory and parameter codec read it
(first value of a repeated parameter, Go's booleans and durations, which requests are long-running)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from apiserver.auth.authn import Authenticator
from apiserver.auth.authz import AlwaysAllow, Authorizer
from apiserver.auth.gate import Gate, Limits
from apiserver.requestinfo import Query, request_info
from machinery.authn.user import UserInfo
from machinery.timeutil import parse_go_duration


def test_a_repeated_parameter_counts_by_its_first_value() -> None:
    q = Query(b"fieldSelector=spec.nodeName%3Dnode-1&fieldSelector=&dryRun=All&dryRun=All")
    assert q.get("fieldSelector") == "spec.nodeName=node-1"
    assert q["fieldSelector"] == "spec.nodeName=node-1"
    assert Query(b"fieldSelector=&fieldSelector=spec.nodeName%3Dnode-1").get("fieldSelector") == ""
    assert q.getlist("dryRun") == ["All", "All"]
    assert q.get("limit") is None and q.get("limit", "5") == "5" and "limit" not in q
    with pytest.raises(KeyError):
        q["limit"]


@pytest.mark.parametrize(("raw", "watch"), [(b"watch=0&watch=1", False), (b"watch=1&watch=0", True),
                                            (b"watch=false", False), (b"watch=FALSE", False), (b"watch=true", True),
                                            (b"watch=", True), (b"watch=yes", True), (b"", False)])
def test_watch_is_decoded_as_upstreams_parameter_codec_decodes_a_bool(raw: bytes, watch: bool) -> None:
    info = request_info("GET", "/api/v1/namespaces/default/pods", raw)
    assert info.verb == ("watch" if watch else "list")
    assert info.long_running is watch
    assert info.read_only


def test_the_authorizer_reads_the_same_selector_as_the_handler() -> None:
    info = request_info("GET", "/api/v1/pods", b"fieldSelector=spec.nodeName%3Dnode-1&fieldSelector=")
    assert info.attributes[-1] == info.query.get("fieldSelector") == "spec.nodeName=node-1"


@pytest.mark.parametrize(("method", "path", "long_running", "read_only"), [
    ("GET", "/api/v1/namespaces/d/pods/p/log", True, True),
    ("POST", "/api/v1/namespaces/d/pods/p/exec", True, False),
    ("GET", "/api/v1/namespaces/d/pods/p/attach", True, True),
    ("POST", "/api/v1/namespaces/d/pods/p/portforward", True, False),
    ("GET", "/api/v1/nodes/n/proxy", True, True),
    ("POST", "/api/v1/namespaces/d/pods", False, False),
    ("DELETE", "/api/v1/namespaces/d/pods", False, False),
    ("GET", "/api/v1/namespaces/d/pods/p", False, True),
    ("GET", "/healthz", False, True),
    ("POST", "/some/path", False, False),
])
def test_long_running_and_read_only_as_upstream(method: str, path: str, long_running: bool, read_only: bool) -> None:
    info = request_info(method, path, b"")
    assert (info.long_running, info.read_only) == (long_running, read_only)


def test_the_same_request_is_parsed_once() -> None:
    assert request_info("GET", "/api/v1/pods", b"limit=5") is request_info("GET", "/api/v1/pods", b"limit=5")


@pytest.mark.parametrize(("text", "seconds"), [("0", 0.0), ("30s", 30.0), ("1m30s", 90.0), ("250ms", 0.25),
                                               ("1.5h", 5400.0), ("-2s", -2.0), ("1h0m0s", 3600.0)])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "soon", "5 s", "s", "1m30"])
def test_malformed_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match=f'time: invalid duration "{text}"'):
        parse_go_duration(text)


# -- the gate's limits, on the gate alone (an ASGI app that waits until it is let go) --------------------


class _Held:
    """An ASGI app that answers 200 once released, remembering whether it was cancelled."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = 0
        self.cancelled = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.entered += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def _gate(app: _Held, limits: Limits) -> Gate:
    users = {"t": UserInfo("someone", ("system:authenticated",)), "m": UserInfo("boss", ("system:masters",))}
    return Gate(app, authenticator=Authenticator(users), authorizer=Authorizer([AlwaysAllow()]), auditor=None,
                limits=limits)


async def _call(gate: Gate, method: str, path: str, query: bytes = b"", token: str = "t") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "scheme": "https", "method": method, "path": path, "query_string": query,
             "headers": [(b"authorization", f"Bearer {token}".encode())]}
    await gate(scope, receive, send)
    return sent


def test_gate_counts_mutating_requests_apart_from_long_running_and_masters() -> None:
    async def main() -> None:
        app = _Held()
        gate = _gate(app, Limits(max_requests_inflight=1, max_mutating_requests_inflight=1, request_timeout=0))
        first = asyncio.create_task(_call(gate, "POST", "/api/v1/namespaces/d/pods"))
        while app.entered < 1:
            await asyncio.sleep(0)
        refused = await _call(gate, "POST", "/api/v1/namespaces/d/pods")
        assert refused[0]["status"] == 429 and (b"retry-after", b"1") in refused[0]["headers"]
        watch = asyncio.create_task(_call(gate, "GET", "/api/v1/namespaces/d/pods", b"watch=1"))
        read = asyncio.create_task(_call(gate, "GET", "/api/v1/namespaces/d/pods"))
        master = asyncio.create_task(_call(gate, "POST", "/api/v1/namespaces/d/pods", token="m"))
        while app.entered < 4:  # the watch, a read and the master's write all got in
            await asyncio.sleep(0)
        assert (gate.inflight, gate.mutating_inflight) == (1, 1)
        app.release.set()
        for task in (first, watch, read, master):
            assert (await task)[0]["status"] == 200
        assert (gate.inflight, gate.mutating_inflight) == (0, 0)

    asyncio.run(main())


def test_gate_limit_zero_disables() -> None:
    async def main() -> None:
        app = _Held()
        gate = _gate(app, Limits(max_requests_inflight=0, max_mutating_requests_inflight=0, request_timeout=0))
        tasks = [asyncio.create_task(_call(gate, "POST", "/api/v1/namespaces/d/pods")) for _ in range(5)]
        while app.entered < 5:
            await asyncio.sleep(0)
        app.release.set()
        assert [(await t)[0]["status"] for t in tasks] == [200] * 5

    asyncio.run(main())


def test_gate_deadline_cancels_the_work_and_answers_504() -> None:
    async def main() -> None:
        app = _Held()
        gate = _gate(app, Limits(request_timeout=0.05))
        sent = await _call(gate, "POST", "/api/v1/namespaces/d/pods")
        assert sent[0]["status"] == 504 and app.cancelled == 1
        assert orjson.loads(sent[1]["body"])["reason"] == "Timeout"
        assert gate.mutating_inflight == 0

    asyncio.run(main())


def test_gate_deadlines_as_request_deadline_sets_them() -> None:
    gate = _gate(_Held(), Limits(request_timeout=60))
    pods = "/api/v1/namespaces/d/pods"
    assert gate._timeout(request_info("GET", pods, b"")) == 60
    assert gate._timeout(request_info("GET", pods, b"timeout=5s")) == 5  # shorter: the client's
    assert gate._timeout(request_info("GET", pods, b"timeout=2m")) == 60  # longer: the server's
    assert gate._timeout(request_info("GET", pods, b"timeout=0s")) == 60  # 0: no limit of the client's
    assert gate._timeout(request_info("GET", pods, b"watch=1&timeout=5s")) == 0  # long-running: none


def test_gate_audits_each_user_as_itself(tmp_path: Any) -> None:
    """The audit event's user (remembered per user object) is the requester's, token by token, request by request."""
    from apiserver.audit import Auditor, LogWriter, Policy, read_events

    users = {"a": UserInfo("alice", ("devs", "system:authenticated")),
             "b": UserInfo("bob", ("system:authenticated",), "uid-b", {"scopes": ("x",)})}
    log = tmp_path / "audit.log"
    auditor = Auditor(Policy.default(), LogWriter(log))
    app = _Held()
    app.release.set()
    gate = Gate(app, authenticator=Authenticator(users), authorizer=Authorizer([AlwaysAllow()]), auditor=auditor)

    async def calls() -> None:
        for token in ("a", "b", "a", "b"):
            await _call(gate, "GET", "/api/v1/namespaces/default/pods", token=token)

    asyncio.run(calls())
    auditor.close()
    seen = [e["user"] for e in read_events(log)]
    alice = {"username": "alice", "groups": ["devs", "system:authenticated"]}
    bob = {"username": "bob", "uid": "uid-b", "groups": ["system:authenticated"], "extra": {"scopes": ["x"]}}
    assert seen == [alice, bob, alice, bob]
