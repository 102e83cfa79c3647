"""The HPA's arithmetic (controllers/podautoscaler/replica_calculator.py) against upstream's
replica_calculator_test.go and horizontal_test.go cases: tolerance, missing and unready pods,
AverageValue, the scale-up and scale-down policies, and the rules without behavior."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.podautoscaler.replica_calculator import (
    MetricsError,
    PodMetric,
    ScaleEvent,
    group_pods,
    rate_limited,
    resource_replicas,
    rules_limited,
    scale_down_limit,
    scale_up_limit,
)
from machinery.api.core_v1 import Pod
from machinery.timeutil import format_rfc3339

NOW = 1_800_000_000.0
STARTED = NOW - 3600  # long past the CPU initialization period


def pod(name: str, cpu: str = "100m", phase: str = "Running", ready: str | None = "True",
        started: float | None = STARTED, ready_since: float = STARTED + 10, deleting: bool = False) -> Pod:
    status: dict[str, Any] = {"phase": phase}
    if started is not None:
        status["startTime"] = format_rfc3339(started)
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "lastTransitionTime": format_rfc3339(ready_since)}]
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if deleting:
        meta["deletionTimestamp"] = format_rfc3339(NOW)
    return Pod.from_dict({"metadata": meta, "spec": {"containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}, "status": status})


def metric(milli: int, at: float = NOW - 5, window: float = 15) -> PodMetric:
    return PodMetric(at, window, milli)


def replicas(current: int, target: int, pods: list[Pod], metrics: dict[str, PodMetric],
             utilization: bool = True) -> Any:
    return resource_replicas(current, target, "cpu", pods, metrics, NOW, utilization=utilization)


def test_scale_up_by_utilization() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    p = replicas(3, 30, pods, {"a": metric(50), "b": metric(50), "c": metric(50)})
    assert (p.replicas, p.utilization, p.raw) == (5, 50, 50)  # ceil(50/30 * 3)


def test_within_tolerance_keeps_the_count() -> None:
    pods = [pod("a"), pod("b")]
    p = replicas(2, 50, pods, {"a": metric(54), "b": metric(54)})  # ratio 1.08
    assert p.replicas == 2 and p.utilization == 54


def test_scale_down() -> None:
    pods = [pod(n) for n in "abcd"]
    assert replicas(4, 50, pods, {n: metric(10) for n in "abcd"}).replicas == 1  # ceil(0.2 * 4)


def test_missing_pods_count_as_full_request_on_scale_down() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    # a and b use 10% of 100m, c has no metric: assumed to use 100% on the way down
    p = replicas(3, 50, pods, {"a": metric(10), "b": metric(10)})
    assert p.replicas == 3  # (10+10+100)/300 = 40% → ratio 0.8 → ceil(0.8 * 3) = 3


def test_missing_pods_count_as_zero_on_scale_up() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    p = replicas(3, 50, pods, {"a": metric(100), "b": metric(100)})
    assert p.replicas == 4  # (100+100+0)/300 = 66% → 1.33 → ceil(1.33*3) = 4


def test_unready_pods_zero_on_scale_up_and_ignored_otherwise() -> None:
    pods = [pod("a"), pod("b", ready="False", started=NOW - 60, ready_since=NOW - 60), pod("c", phase="Pending")]
    p = replicas(3, 50, pods, {"a": metric(100), "b": metric(100)})
    # a alone reads 200% → scale up: b and c counted as 0 → (100+0+0)/300 = 33% → ratio 0.67: the direction
    # would turn, so nothing changes
    assert p.replicas == 3
    ready, unready, missing, ignored = group_pods(pods, {"a": metric(100), "b": metric(100)}, "cpu", NOW)
    assert (ready, unready, missing, ignored) == (1, {"b", "c"}, set(), set())


def test_deleted_and_failed_pods_are_ignored() -> None:
    pods = [pod("a"), pod("b", deleting=True), pod("c", phase="Failed")]
    assert group_pods(pods, {"a": metric(1), "b": metric(1), "c": metric(1)}, "cpu", NOW)[3] == {"b", "c"}


def test_sample_from_before_ready_plus_window_is_unready_while_initializing() -> None:
    young = pod("a", started=NOW - 30, ready_since=NOW - 10)
    assert group_pods([young], {"a": metric(100, at=NOW - 2, window=15)}, "cpu", NOW)[1] == {"a"}
    assert group_pods([young], {"a": metric(100, at=NOW + 10, window=15)}, "cpu", NOW + 10)[0] == 1


def test_average_value() -> None:
    pods = [pod("a"), pod("b")]
    p = replicas(2, 100, pods, {"a": metric(300), "b": metric(300)}, utilization=False)
    assert (p.replicas, p.utilization, p.raw) == (6, None, 300)


def test_errors() -> None:
    with pytest.raises(MetricsError, match="no pods returned by selector"):
        replicas(1, 50, [], {})
    with pytest.raises(MetricsError, match="did not receive metrics for targeted pods"):
        replicas(1, 50, [pod("a", phase="Pending")], {"a": metric(1)})
    no_request = Pod.from_dict({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "x"}]},
                                "status": {"phase": "Running", "startTime": format_rfc3339(STARTED), "conditions": [
                                    {"type": "Ready", "status": "True",
                                     "lastTransitionTime": format_rfc3339(STARTED)}]}})
    with pytest.raises(MetricsError, match="missing request for cpu in container c of Pod a"):
        replicas(1, 50, [no_request], {"a": metric(1)})


UP = {"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                          {"type": "Percent", "value": 100, "periodSeconds": 15}]}
DOWN = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def test_scale_up_limit_max_of_policies_less_what_the_period_added() -> None:
    assert scale_up_limit(1, [], UP, NOW) == 5  # max(1+4, 1*2)
    assert scale_up_limit(10, [], UP, NOW) == 20
    # 3 of the 5 came within the last 15 s: the period started at 2
    assert scale_up_limit(5, [ScaleEvent(NOW - 5, 3)], UP, NOW) == 6
    assert scale_up_limit(5, [ScaleEvent(NOW - 5, 3)], {**UP, "selectPolicy": "Min"}, NOW) == 4
    assert scale_up_limit(5, [], {**UP, "selectPolicy": "Disabled"}, NOW) == 5


def test_scale_down_limit() -> None:
    assert scale_down_limit(10, [], DOWN, NOW) == 0
    pods_policy = {"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}
    assert scale_down_limit(5, [], pods_policy, NOW) == 4
    assert scale_down_limit(4, [ScaleEvent(NOW - 30, 1)], pods_policy, NOW) == 4  # one already this minute


def test_rate_limited_reasons() -> None:
    assert rate_limited(1, 10, 1, 3, UP, DOWN, [], [], NOW) == (
        3, "TooManyReplicas", "the desired replica count is more than the maximum replica count")
    assert rate_limited(1, 10, 1, 20, UP, DOWN, [], [], NOW) == (
        5, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
    pods_policy = {"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}
    assert rate_limited(5, 1, 1, 10, UP, pods_policy, [], [], NOW) == (
        4, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")
    assert rate_limited(3, 2, 1, 10, UP, DOWN, [], [], NOW)[1:] == (
        "DesiredWithinRange", "the desired count is within the acceptable range")


def test_rules_without_behavior() -> None:
    assert rules_limited(1, 10, 1, 20) == (4, "ScaleUpLimit",
                                           "the desired replica count is increasing faster than the maximum scale rate")
    assert rules_limited(5, 30, 1, 8)[:2] == (8, "TooManyReplicas")
    assert rules_limited(5, 0, 2, 8)[:2] == (2, "TooFewReplicas")
    assert rules_limited(5, 6, 2, 8)[:2] == (6, "DesiredWithinRange")


def test_stabilization_windows() -> None:
    from controllers.podautoscaler.replica_calculator import stabilize

    recs: list[tuple[float, int]] = []
    # scale-down window 300 s: a lower proposal is held at the highest recent recommendation
    stabilized, recs = stabilize(recs, NOW, 1, 3, 0, 300)
    assert stabilized == 3
    stabilized, recs = stabilize(recs, NOW + 15, 3, 1, 0, 300)
    assert stabilized == 3  # 3 was recommended 15 s ago
    stabilized, recs = stabilize(recs, NOW + 301, 3, 1, 0, 300)
    assert stabilized == 1 and recs == [(NOW + 15, 1), (NOW + 301, 1)]  # the 3 left the window and the list
    # scale-up window 60 s: a higher proposal is held at the lowest recent one, never below the current count
    recs = [(NOW - 30, 2)]
    assert stabilize(recs, NOW, 2, 6, 60, 0)[0] == 2
    assert stabilize([(NOW - 90, 2)], NOW, 2, 6, 60, 0)[0] == 6
