"""The disruption controller's pure parts (controllers/disruption.py), as upstream's disruption_test.go
checks them: scaled values round up, the disrupted-pods map forgets entries after 2 minutes, healthy pods
exclude deleting and promised ones, and the status' allowed count and condition."""

from __future__ import annotations

import datetime as dt

import pytest

from controllers.disruption import (
    build_disrupted_pod_map,
    count_healthy_pods,
    new_status,
    scaled_value,
)
from machinery.api.core_v1 import Pod

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
