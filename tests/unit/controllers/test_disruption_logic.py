"""The disruption controller's pure parts (controllers/disruption.py), as upstream's disruption_test.go
checks them: scaled values round up, the disrupted-pods map forgets entries after 2 minutes, healthy pods
exclude deleting and promised ones, and the status' allowed count and condition."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from controllers.disruption import (
    build_disrupted_pod_map,
    count_healthy_pods,
    new_status,
    scaled_value,
)
from machinery.api.apps_v1 import Deployment, ReplicaSet
from machinery.api.core_v1 import Pod, PodCondition
from machinery.api.meta import OwnerReference
from machinery.api.policy_v1 import PodDisruptionBudget

NOW = dt.datetime(2026, 11, 24, 12, 0, 0, tzinfo=dt.UTC)


def at(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, ready: bool = True, deleting: bool = False) -> Pod:
    meta: dict[str, object] = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = at(0)
    return Pod.from_dict({"metadata": meta, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}})


@pytest.mark.parametrize(("value", "total", "want"), [(2, 10, 2), ("50%", 3, 2), ("34%", 3, 2), ("0%", 5, 0),
                                                      ("100%", 7, 7), ("1%", 1, 1)])
def test_scaled_value_rounds_up(value: int | str, total: int, want: int) -> None:
    assert scaled_value(value, total) == want


def test_scaled_value_refuses_a_string_that_is_no_percent() -> None:
    with pytest.raises(ValueError, match="not a percentage"):
        scaled_value("half", 4)


def test_disrupted_pod_map_keeps_fresh_entries_and_drops_expired() -> None:
    pods = [pod("fresh"), pod("old"), pod("going", deleting=True), pod("untouched")]
    disrupted = {"fresh": at(30), "old": at(121), "going": at(10), "gone": at(5)}
    kept, recheck, expired = build_disrupted_pod_map(pods, disrupted, NOW)
    assert kept == {"fresh": at(30)}
    assert recheck == NOW + dt.timedelta(seconds=90)
    assert [p.metadata.name for p in expired] == ["old"]


def test_healthy_pods_exclude_unready_deleting_and_promised() -> None:
    pods = [pod("a"), pod("b", ready=False), pod("c", deleting=True), pod("d"), pod("e")]
    assert count_healthy_pods(pods, {}, NOW) == 3
    assert count_healthy_pods(pods, {"d": at(10)}, NOW) == 2
    assert count_healthy_pods(pods, {"d": at(200)}, NOW) == 3  # an expired promise counts the pod again


def test_status_allows_the_surplus_and_sets_the_condition() -> None:
    status = new_status({}, 3, current_healthy=3, desired_healthy=2, expected=3, disrupted={}, now=at(0))
    assert status["disruptionsAllowed"] == 1 and status["observedGeneration"] == 3
    cond = status["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("DisruptionAllowed", "True", "SufficientPods")
    later = new_status(status, 3, current_healthy=2, desired_healthy=2, expected=3, disrupted={"x": at(1)},
                       now=at(-60))
    assert later["disruptionsAllowed"] == 0 and later["disruptedPods"] == {"x": at(1)}
    cond = later["conditions"][0]
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == ("False", "InsufficientPods", at(-60))


def test_no_expected_pods_allows_nothing() -> None:
    status = new_status({}, 1, current_healthy=2, desired_healthy=0, expected=0, disrupted={}, now=at(0))
    assert status["disruptionsAllowed"] == 0
    assert status["conditions"][0]["reason"] == "InsufficientPods"


def test_condition_transition_time_stays_when_the_status_does_not_change() -> None:
    first = new_status({}, 1, current_healthy=3, desired_healthy=1, expected=3, disrupted={}, now=at(100))
    again = new_status(first, 1, current_healthy=2, desired_healthy=1, expected=3, disrupted={}, now=at(0))
    assert again["conditions"][0]["lastTransitionTime"] == at(100)


# -- the controller's reconcile over filled caches, a stub client and a fake clock ---------------------------


class StubClient:
    """Records the controller's writes; answers nothing else."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, Any, Any]] = []

    async def update_raw(self, resource: Any, name: str, body: Any, namespace: Any = None, **kw: Any) -> Any:
        self.writes.append(("update", name, body))
        return body

    async def patch_raw(self, resource: Any, name: str, patch: Any, patch_type: str = "merge", namespace: Any = None,
                        **kw: Any) -> Any:
        self.writes.append(("patch", name, patch))
        return patch


class StubRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


def controller() -> tuple[Any, StubClient, StubRecorder]:
    from controllers.disruption import DisruptionController
    from machinery.informer import SharedInformerFactory

    client = StubClient()
    dc = DisruptionController(client, SharedInformerFactory(client), clock=lambda: NOW)  # type: ignore[arg-type]
    recorder = StubRecorder()
    dc.recorder = recorder  # type: ignore[assignment]
    return dc, client, recorder


def owned_pod(name: str, rs_uid: str, ready: bool = True) -> Pod:
    p = pod(name, ready)
    p.metadata.labels = {"app": "web"}
    p.metadata.owner_references = [OwnerReference.from_dict({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                             "name": "web-1", "uid": rs_uid, "controller": True})]
    return p


async def test_reconcile_counts_a_deployments_scale_for_a_percent() -> None:
    dc, client, recorder = controller()
    dc.deployments.store.upsert(Deployment.from_dict({"metadata": {"name": "web", "namespace": "ns", "uid": "d1"},
                                                      "spec": {"replicas": 4, "selector": {}, "template": {}}}))
    dc.replicasets.store.upsert(ReplicaSet.from_dict({
        "metadata": {"name": "web-1", "namespace": "ns", "uid": "r1", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d1", "controller": True}]},
        "spec": {"replicas": 4, "selector": {}}}))
    for i, ready in enumerate((True, True, True, False)):
        dc.pods.store.upsert(owned_pod(f"web-{i}", "r1", ready))
    dc.pdbs.store.upsert(PodDisruptionBudget.from_dict({
        "metadata": {"name": "web", "namespace": "ns", "generation": 2, "resourceVersion": "7"},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptedPods": {"web-0": at(30), "web-9": at(10)}}}))
    assert await dc.reconcile("ns/web") == pytest.approx(90.0)  # web-0's promise expires in 90 s
    [(verb, name, body)] = client.writes
    status = body["status"]
    assert (verb, name) == ("update", "web")
    assert {k: status[k] for k in ("expectedPods", "desiredHealthy", "currentHealthy", "disruptionsAllowed",
                                   "observedGeneration")} == {"expectedPods": 4, "desiredHealthy": 2,
                                                              "currentHealthy": 2, "disruptionsAllowed": 0,
                                                              "observedGeneration": 2}
    assert status["disruptedPods"] == {"web-0": at(30)}  # web-9 is no pod of the budget any more
    assert recorder.events == []


async def test_reconcile_fails_safe_when_a_controller_is_missing() -> None:
    dc, client, recorder = controller()
    dc.pods.store.upsert(owned_pod("web-0", "gone"))
    dc.pdbs.store.upsert(PodDisruptionBudget.from_dict({
        "metadata": {"name": "web", "namespace": "ns", "generation": 1},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 3}}))
    assert await dc.reconcile("ns/web") is None
    status = client.writes[0][2]["status"]
    assert status["disruptionsAllowed"] == 0
    assert (status["conditions"][0]["reason"], status["conditions"][0]["message"]) == (
        "SyncFailed", 'found no controllers for pod "web-0"')
    assert recorder.events[0][:2] == ("Warning", "CalculateExpectedPodCountFailed")


async def test_stale_disruption_target_is_cleared_after_two_minutes() -> None:
    dc, client, _ = controller()
    fresh, stale = pod("fresh"), pod("stale")
    for p, ago in ((fresh, 30), (stale, 121)):
        assert p.status is not None and p.status.conditions is not None
        p.status.conditions.append(PodCondition(type="DisruptionTarget", status="True",
                                                last_transition_time=at(ago)))
        dc.pods.store.upsert(p)
    assert dc._keys_for_pod(fresh) == ["stale/ns/fresh"]
    assert await dc.reconcile("stale/ns/fresh") == pytest.approx(90.0)
    assert client.writes == []
    assert await dc.reconcile("stale/ns/stale") is None
    [(verb, name, patch)] = client.writes
    assert (verb, name) == ("patch", "stale")
    assert patch["status"]["conditions"][0]["type"] == "DisruptionTarget"
    assert patch["status"]["conditions"][0]["status"] == "False"
