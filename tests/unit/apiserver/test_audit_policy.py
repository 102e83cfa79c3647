"""The audit policy (first matching rule gives the level, upstream's matching rules for users,
groups, verbs, resources, namespaces and non-resource URLs), the events an Auditor writes at
each level, and reading and filtering a log."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from apiserver.audit import (
    Auditor,
    LogWriter,
    Policy,
    RequestFacts,
    filter_events,
    format_table,
    main,
    read_events,
    row,
)
from machinery.api import audit_v1

POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: None
  userGroups: ["system:nodes"]
  verbs: ["watch", "get"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods/binding", "*/status"]
- level: Request
  resources:
  - group: apps
    resources: ["deployments"]
  namespaces: ["prod"]
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets"]
    resourceNames: ["special"]
- level: RequestResponse
  resources:
  - group: coordination.k8s.io
  omitStages: [ResponseComplete]
- level: Metadata
"""


def facts(verb: str = "get", resource: str = "pods", *, user: str = "alice", groups: tuple[str, ...] = (),
          group: str = "", sub: str = "", namespace: str = "default", name: str = "", path: str = "",
          resource_request: bool = True) -> RequestFacts:
    return RequestFacts(user, groups, verb, resource_request, path, group, "v1", resource, sub, namespace, name)


@pytest.fixture
def policy(tmp_path: Path) -> Policy:
    f = tmp_path / "policy.yaml"
    f.write_text(POLICY)
    return Policy.load(f)


class TestPolicy:
    def test_first_match_wins(self, policy: Policy) -> None:
        assert policy.level_for(facts(user="system:kube-proxy", verb="create"))[0] == "None"
        assert policy.level_for(facts("create"))[0] == "Metadata"

    def test_non_resource_urls(self, policy: Policy) -> None:
        assert policy.level_for(facts(path="/healthz/etcd", resource_request=False, resource=""))[0] == "None"
        assert policy.level_for(facts(path="/version", resource_request=False, resource=""))[0] == "None"
        assert policy.level_for(facts(path="/api", resource_request=False, resource=""))[0] == "Metadata"
        # a resource rule never matches a non-resource request and the other way round
        assert policy.level_for(facts(path="/healthz", resource_request=True))[0] == "Metadata"

    def test_groups_and_verbs(self, policy: Policy) -> None:
        node = ("system:nodes", "system:authenticated")
        assert policy.level_for(facts("watch", groups=node))[0] == "None"
        assert policy.level_for(facts("patch", groups=node))[0] == "Metadata"

    def test_resources_and_subresources(self, policy: Policy) -> None:
        assert policy.level_for(facts("create", sub="binding"))[0] == "RequestResponse"
        assert policy.level_for(facts("patch", sub="status"))[0] == "RequestResponse"
        assert policy.level_for(facts("patch", "nodes", sub="status", namespace=""))[0] == "RequestResponse"
        assert policy.level_for(facts("patch"))[0] == "Metadata"  # pods without a subresource

    def test_namespaces(self, policy: Policy) -> None:
        assert policy.level_for(facts("create", "deployments", group="apps", namespace="prod"))[0] == "Request"
        assert policy.level_for(facts("create", "deployments", group="apps", namespace="dev"))[0] == "Metadata"

    def test_resource_names(self, policy: Policy) -> None:
        assert policy.level_for(facts("get", "secrets", name="special"))[0] == "Metadata"

    def test_group_without_resources_matches_the_whole_group(self, policy: Policy) -> None:
        level, omit = policy.level_for(facts("update", "leases", group="coordination.k8s.io"))
        assert level == "RequestResponse"
        assert omit == {"RequestReceived", "ResponseComplete"}

    def test_no_rule_matches_means_none(self) -> None:
        policy = Policy(audit_v1.Policy(rules=[audit_v1.PolicyRule(level="Metadata", verbs=["create"])]))
        assert policy.level_for(facts("get"))[0] == "None"

    def test_default_policy_is_metadata_for_everything(self) -> None:
        level, omit = Policy.default().level_for(facts("watch"))
        assert level == "Metadata" and omit == {"RequestReceived"}

    def test_bad_policy_is_refused(self, tmp_path: Path) -> None:
        f = tmp_path / "bad.yaml"
        f.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n")
        with pytest.raises(ValidationError):
            Policy.load(f)


# -- events -------------------------------------------------------------------------------------------


def write_one(tmp_path: Path, level: str, omit: tuple[str, ...] = ("RequestReceived",)) -> list[dict[str, Any]]:
    path = tmp_path / f"audit-{level}.log"
    auditor = Auditor(Policy(audit_v1.Policy(omit_stages=list(omit), rules=[audit_v1.PolicyRule(level=level)])),
                      LogWriter(path))
    user = {"username": "alice", "groups": ["devs", "system:authenticated"]}
    ctx = auditor.begin(facts("create", "pods", namespace="ns"), user, "/api/v1/namespaces/ns/pods?dryRun=All",
                        "127.0.0.1", "curl/8", 1_700_000_000.25)
    if level == "None":
        assert ctx is None
        auditor.close()
        return []
    assert ctx is not None
    if ctx.request_body is not None:
        ctx.request_body.append(b'{"metadata": {"generateName": "p-"}}')
    if ctx.response_body is not None:
        ctx.response_body.append(b'{"metadata": {"name": "p-abcde", "uid": "u-1"}}')
    ctx.note_object({"metadata": {"name": "p-abcde", "uid": "u-1"}})
    auditor.complete(ctx, 201, {"authorization.k8s.io/decision": "allow"})
    auditor.close()
    return list(read_events(path))


class TestEvents:
    def test_metadata(self, tmp_path: Path) -> None:
        [event] = write_one(tmp_path, "Metadata")
        assert event["stage"] == "ResponseComplete"
        assert event["level"] == "Metadata"
        assert event["verb"] == "create"
        assert event["requestURI"] == "/api/v1/namespaces/ns/pods?dryRun=All"
        assert event["user"] == {"username": "alice", "groups": ["devs", "system:authenticated"]}
        assert event["sourceIPs"] == ["127.0.0.1"] and event["userAgent"] == "curl/8"
        assert event["objectRef"] == {"resource": "pods", "namespace": "ns", "name": "p-abcde", "uid": "u-1",
                                      "apiVersion": "v1"}
        assert event["responseStatus"]["code"] == 201
        assert event["requestReceivedTimestamp"] == "2023-11-14T22:13:20.250000Z"
        assert event["stageTimestamp"] >= event["requestReceivedTimestamp"]
        assert event["annotations"] == {"authorization.k8s.io/decision": "allow"}
        assert "requestObject" not in event and "responseObject" not in event
        audit_v1.Event.from_dict(event)  # the documented shape

    def test_request_and_request_response(self, tmp_path: Path) -> None:
        [request] = write_one(tmp_path, "Request")
        assert request["requestObject"] == {"metadata": {"generateName": "p-"}}
        assert "responseObject" not in request
        [both] = write_one(tmp_path, "RequestResponse")
        assert both["requestObject"] == {"metadata": {"generateName": "p-"}}
        assert both["responseObject"] == {"metadata": {"name": "p-abcde", "uid": "u-1"}}

    def test_none_and_stages(self, tmp_path: Path) -> None:
        assert write_one(tmp_path, "None") == []
        events = write_one(tmp_path, "Metadata", omit=())
        assert [e["stage"] for e in events] == ["RequestReceived", "ResponseComplete"]
        assert events[0]["auditID"] == events[1]["auditID"]
        assert "responseStatus" not in events[0]

    async def test_lines_go_out_in_batches(self, tmp_path: Path) -> None:
        path = tmp_path / "batched.log"
        writer = LogWriter(path)
        writer.write(b"1\n")
        writer.write(b"2\n")
        assert path.read_bytes() == b""  # not yet: the batch waits
        deadline = time.monotonic() + 5
        while not path.read_bytes() and time.monotonic() < deadline:
            await asyncio.sleep(writer.BATCH_WAIT / 2)
        assert path.read_bytes() == b"1\n2\n"  # one write, in order
        writer.close()

    async def test_a_waiting_line_is_held_in_a_block_of_its_own_size(self, tmp_path: Path) -> None:
        import tracemalloc

        path = tmp_path / "compact.log"
        auditor = Auditor(Policy(audit_v1.Policy(rules=[audit_v1.PolicyRule(level="Metadata")])), LogWriter(path))
        user = {"username": "alice", "groups": ["system:authenticated"]}
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            for i in range(200):  # a thousand watches opening at once: their lines wait for the batch
                ctx = auditor.begin(facts("watch", "pods"), user, f"/api/v1/pods?watch=1&resourceVersion={i}",
                                    "127.0.0.1", "client-go", time.time())
                assert ctx is not None
                auditor.response_started(ctx, 200)
            grown = tracemalloc.take_snapshot().compare_to(before, "filename")
        finally:
            tracemalloc.stop()
        waiting = auditor.writer._pending
        assert len(waiting) == 400 and not path.read_bytes()  # RequestReceived and ResponseStarted, not written yet
        held = sum(d.size_diff for d in grown if d.traceback[0].filename.endswith("audit.py"))
        # orjson answers its bytes in a buffer of at least 4 KiB: kept as they are, the 400 lines would take 1.6 MB
        assert held < 2 * sum(len(line) for line in waiting) + 100 * 1024, held
        auditor.close()
        events = list(read_events(path))
        assert [e["stage"] for e in events[:2]] == ["RequestReceived", "ResponseStarted"] and len(events) == 400

    async def test_a_full_batch_and_close_write_at_once(self, tmp_path: Path) -> None:
        path = tmp_path / "full.log"
        writer = LogWriter(path)
        line = b"x" * 1023 + b"\n"
        for _ in range(writer.BATCH_BYTES // len(line)):
            writer.write(line)
        assert path.stat().st_size == writer.BATCH_BYTES  # full: out without waiting
        writer.write(b"last\n")
        writer.close()  # what is pending at shutdown is written, after the rest
        data = path.read_bytes()
        assert len(data) == writer.BATCH_BYTES + 5 and data.endswith(b"x\nlast\n")


# -- reading the log ----------------------------------------------------------------------------------


def event(verb: str, resource: str, user: str, *, sub: str = "", group: str = "", name: str = "x",
          stage: str = "ResponseComplete", agent: str = "ua") -> dict[str, Any]:
    ref: dict[str, Any] = {"resource": resource, "namespace": "default", "name": name, "apiVersion": "v1"}
    if sub:
        ref["subresource"] = sub
    if group:
        ref["apiGroup"] = group
    return {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": "1", "stage": stage,
            "requestURI": "/", "verb": verb, "user": {"username": user}, "userAgent": agent, "objectRef": ref,
            "responseStatus": {"code": 201}, "requestReceivedTimestamp": "2026-01-01T00:00:00.000000Z"}


LOG = [
    event("create", "deployments", "kubernetes-admin", group="apps", name="nginx", agent="kubectl/v1.30"),
    event("create", "replicasets", "system:serviceaccount:kube-system:deployment-controller", group="apps"),
    event("create", "pods", "system:serviceaccount:kube-system:replicaset-controller", name="nginx-1"),
    event("create", "pods", "system:kube-scheduler", sub="binding", name="nginx-1"),
    event("create", "pods", "system:kube-scheduler", sub="binding", name="nginx-1", stage="ResponseStarted"),
]


def test_filters() -> None:
    assert [e["user"]["username"] for e in filter_events(LOG, resource="pods")] == [
        "system:serviceaccount:kube-system:replicaset-controller"]
    assert len(filter_events(LOG, resource="pods/binding")) == 1
    assert len(filter_events(LOG, resource="deployments.apps", verb="create")) == 1
    assert filter_events(LOG, resource="deployments.extensions") == []
    assert len(filter_events(LOG, user="system:kube-scheduler", stage=None)) == 2
    assert len(filter_events(LOG, group="apps")) == 2


def test_table_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert row(LOG[3])[2] == "pods/binding"
    assert row(LOG[0])[2] == "deployments.apps"
    table = format_table([row(e) for e in LOG[:2]])
    assert table.splitlines()[0].split() == ["TIME", "VERB", "RESOURCE", "NAMESPACE", "NAME", "CODE", "USER",
                                              "USER-AGENT"]
    log = tmp_path / "audit.log"
    log.write_text("".join(json.dumps(e) + "\n" for e in LOG) + '{"torn')
    assert main([str(log), "--resource", "pods/binding"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "system:kube-scheduler" in out[1] and "nginx-1" in out[1]


@pytest.mark.parametrize(("policy_omits", "rule_omits", "omitted"), [
    (True, None, True), (True, False, False), (None, True, True), (None, None, False)])
def test_omit_managed_fields(tmp_path: Path, policy_omits: bool | None, rule_omits: bool | None,
                             omitted: bool) -> None:
    path = tmp_path / "mf.log"
    rule = audit_v1.PolicyRule(level="RequestResponse", omit_managed_fields=rule_omits)
    auditor = Auditor(Policy(audit_v1.Policy(rules=[rule], omit_managed_fields=policy_omits)), LogWriter(path))
    ctx = auditor.begin(facts("create", "pods", namespace="ns"), {"username": "a"}, "/api/v1/namespaces/ns/pods",
                        None, None, 1_700_000_000.0)
    assert ctx is not None and ctx.request_body is not None and ctx.response_body is not None
    managed = [{"manager": "m", "operation": "Update"}]
    ctx.request_body.append(json.dumps({"metadata": {"name": "p", "managedFields": managed}}).encode())
    ctx.response_body.append(json.dumps({"kind": "PodList", "metadata": {},
                                         "items": [{"metadata": {"name": "p", "managedFields": managed}}]}).encode())
    auditor.complete(ctx, 201)
    auditor.close()
    [event] = [e for e in read_events(path) if e["stage"] == "ResponseComplete"]
    assert ("managedFields" in event["requestObject"]["metadata"]) is not omitted
    assert ("managedFields" in event["responseObject"]["items"][0]["metadata"]) is not omitted
