"""How many replicas the metrics ask for (upstream pkg/controller/podautoscaler/replica_calculator.go and
metrics/utilization.go): pods grouped into ready, unready, missing and ignored; the usage ratio against the
target; a tolerance (0.1) inside which nothing changes; missing pods counted as using 100% of their request
(or the target) on a scale-down and 0% on a scale-up; unready pods as 0% on a scale-up; and no change when
those assumptions would turn the direction round. Values are in milli-units, as the resource metrics client
reads them (`Quantity.MilliValue()`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from machinery.api.core_v1 import Pod
from machinery.quantity import parse_quantity
from machinery.timeutil import parse_rfc3339

DEFAULT_TOLERANCE = 0.1
CPU_INITIALIZATION_PERIOD = 300.0  # --horizontal-pod-autoscaler-cpu-initialization-period 5m
DELAY_OF_INITIAL_READINESS_STATUS = 30.0  # --horizontal-pod-autoscaler-initial-readiness-delay 30s


class MetricsError(Exception):
    pass


@dataclass(frozen=True)
class PodMetric:
    timestamp: float
    window: float
    value: int  # milli-units


def _seconds(value: str | None) -> float | None:
    parsed = parse_rfc3339(value) if value else None
    return parsed.timestamp() if parsed else None


def group_pods(pods: list[Pod], metrics: dict[str, PodMetric], resource: str, now: float,
               cpu_initialization_period: float = CPU_INITIALIZATION_PERIOD,
               delay_of_initial_readiness_status: float = DELAY_OF_INITIAL_READINESS_STATUS,
               ) -> tuple[int, set[str], set[str], set[str]]:
    """groupPods: (ready count, unready, missing, ignored) pod names."""
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        name = pod.metadata.name or ""
        status = pod.status
        phase = status.phase if status else None
        if pod.metadata.deletion_timestamp is not None or phase == "Failed":
            ignored.add(name)
            continue
        if phase == "Pending":
            unready.add(name)
            continue
        metric = metrics.get(name)
        if metric is None:
            missing.add(name)
            continue
        if resource == "cpu":
            condition = next((c for c in (status.conditions if status else None) or [] if c.type == "Ready"), None)
            start = _seconds(status.start_time) if status else None
            if condition is None or start is None:
                is_unready = True
            else:
                transition = _seconds(condition.last_transition_time) or 0.0
                if start + cpu_initialization_period > now:
                    # still starting: unready, or not one whole metrics window since it turned ready
                    is_unready = condition.status == "False" or metric.timestamp < transition + metric.window
                else:
                    # unready and never ready since it started
                    is_unready = condition.status == "False" and start + delay_of_initial_readiness_status > transition
            if is_unready:
                unready.add(name)
                continue
        ready += 1
    return ready, unready, missing, ignored


def pod_requests(pods: list[Pod], resource: str, container: str = "") -> dict[str, int]:
    """calculatePodRequests: each pod's request of `resource` in milli-units, summed over its containers."""
    out: dict[str, int] = {}
    for pod in pods:
        total = 0
        for c in (pod.spec.containers if pod.spec else []):
            if container and c.name != container:
                continue
            requests = (c.resources.requests if c.resources else None) or {}
            if resource not in requests:
                raise MetricsError(f"missing request for {resource} in container {c.name} of Pod {pod.metadata.name}")
            total += parse_quantity(requests[resource]).milli_value()
        out[pod.metadata.name or ""] = total
    return out


def utilization_ratio(metrics: dict[str, PodMetric], requests: dict[str, int],
                      target_utilization: int) -> tuple[float, int, int]:
    """GetResourceUtilizationRatio: (usage ratio, utilization %, average raw usage)."""
    metrics_total = requests_total = entries = 0
    for name, metric in metrics.items():
        if name not in requests:
            continue  # metrics of pods we do not know: extraneous
        metrics_total += metric.value
        requests_total += requests[name]
        entries += 1
    if requests_total == 0:
        raise MetricsError("no metrics returned matched known pods")
    utilization = int(metrics_total * 100 / requests_total)
    return utilization / target_utilization, utilization, metrics_total // entries


def usage_ratio(metrics: dict[str, PodMetric], target_usage: int) -> tuple[float, int]:
    """GetMetricUsageRatio: (usage ratio, average usage)."""
    total = sum(m.value for m in metrics.values())
    average = total // len(metrics)
    return average / target_usage, average


def within_tolerance(ratio: float, tolerance: float) -> bool:
    return abs(1.0 - ratio) <= tolerance


@dataclass
class Proposal:
    replicas: int
    utilization: int | None  # percent (Utilization targets)
    raw: int  # average usage, milli-units
    timestamp: float


def resource_replicas(current_replicas: int, target: int, resource: str, pods: list[Pod],
                      metrics: dict[str, PodMetric], now: float, *, utilization: bool,
                      tolerance: float = DEFAULT_TOLERANCE, container: str = "",
                      cpu_initialization_period: float = CPU_INITIALIZATION_PERIOD,
                      delay_of_initial_readiness_status: float = DELAY_OF_INITIAL_READINESS_STATUS) -> Proposal:
    """GetResourceReplicas (utilization: target in percent of the request) and GetRawResourceReplicas
    (target an average value in milli-units)."""
    if not pods:
        raise MetricsError("no pods returned by selector while calculating replica count")
    metrics = dict(metrics)
    timestamp = max((m.timestamp for m in metrics.values()), default=now)
    ready, unready, missing, ignored = group_pods(pods, metrics, resource, now, cpu_initialization_period,
                                                  delay_of_initial_readiness_status)
    for name in ignored | unready:
        metrics.pop(name, None)
    if not metrics:
        raise MetricsError("did not receive metrics for targeted pods (pods might be unready)")
    requests = pod_requests(pods, resource, container) if utilization else {}
    if utilization:
        ratio, percent, raw = utilization_ratio(metrics, requests, target)
    else:
        ratio, raw = usage_ratio(metrics, target)
        percent = None
    scale_up_with_unready = bool(unready) and ratio > 1.0
    if not scale_up_with_unready and not missing:
        if within_tolerance(ratio, tolerance):
            return Proposal(current_replicas, percent, raw, timestamp)
        return Proposal(math.ceil(ratio * ready), percent, raw, timestamp)
    if missing:
        if ratio < 1.0:  # scale-down: the missing use all of their request (or the target, if higher)
            for name in missing:
                metrics[name] = PodMetric(now, 0, requests[name] * max(100, target) // 100 if utilization else target)
        elif ratio > 1.0:  # scale-up: the missing use nothing
            for name in missing:
                metrics[name] = PodMetric(now, 0, 0)
    if scale_up_with_unready:
        for name in unready:
            metrics[name] = PodMetric(now, 0, 0)
    new_ratio = (utilization_ratio(metrics, requests, target)[0] if utilization else usage_ratio(metrics, target)[0])
    if within_tolerance(new_ratio, tolerance) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return Proposal(current_replicas, percent, raw, timestamp)  # too small, or the direction would turn
    new_replicas = math.ceil(new_ratio * len(metrics))
    if (new_ratio < 1.0 and new_replicas > current_replicas) or (new_ratio > 1.0 and new_replicas < current_replicas):
        return Proposal(current_replicas, percent, raw, timestamp)
    return Proposal(new_replicas, percent, raw, timestamp)


# -- behavior: stabilization windows and scaling policies (horizontal.go) -------------------------------


@dataclass(frozen=True)
class ScaleEvent:
    timestamp: float
    change: int  # replicas added (scale-up events) or removed (scale-down events)


def replicas_change_per_period(period_seconds: int, events: list[ScaleEvent], now: float) -> int:
    cutoff = now - period_seconds
    return sum(e.change for e in events if e.timestamp > cutoff)


def scale_up_limit(current: int, events: list[ScaleEvent], rules: dict[str, object], now: float) -> int:
    """calculateScaleUpLimitWithScalingRules."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    result = math.inf if select == "Min" else -math.inf
    for policy in rules.get("policies") or []:  # type: ignore[attr-defined]
        start = current - replicas_change_per_period(int(policy["periodSeconds"]), events, now)
        if policy["type"] == "Pods":
            proposed = start + int(policy["value"])
        else:
            proposed = math.ceil(start * (1 + int(policy["value"]) / 100))
        result = min(result, proposed) if select == "Min" else max(result, proposed)
    return int(result) if math.isfinite(result) else current


def scale_down_limit(current: int, events: list[ScaleEvent], rules: dict[str, object], now: float) -> int:
    """calculateScaleDownLimitWithBehaviors."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    result = -math.inf if select == "Min" else math.inf
    for policy in rules.get("policies") or []:  # type: ignore[attr-defined]
        start = current + replicas_change_per_period(int(policy["periodSeconds"]), events, now)
        if policy["type"] == "Pods":
            proposed = start - int(policy["value"])
        else:
            proposed = int(start * (1 - int(policy["value"]) / 100))
        result = max(result, proposed) if select == "Min" else min(result, proposed)
    return int(result) if math.isfinite(result) else current


def stabilize(recommendations: list[tuple[float, int]], now: float, current: int, proposal: int, up_window: float,
              down_window: float) -> tuple[int, list[tuple[float, int]]]:
    """stabilizeRecommendationWithBehaviors: the proposal held between the lowest recommendation of the
    scale-up window and the highest of the scale-down window (and never past the current count in the
    direction neither allows); returns it and the recommendations to keep (this one recorded, those older
    than both windows dropped)."""
    up_cutoff, down_cutoff = now - up_window, now - down_window
    up_rec = down_rec = proposal
    for t, r in recommendations:
        if t > up_cutoff:
            up_rec = min(up_rec, r)
        if t > down_cutoff:
            down_rec = max(down_rec, r)
    kept = [(t, r) for t, r in recommendations if not (t < up_cutoff and t < down_cutoff)]
    kept.append((now, proposal))
    return min(max(current, up_rec), down_rec), kept


def rate_limited(current: int, desired: int, min_replicas: int, max_replicas: int, scale_up: dict[str, object],
                 scale_down: dict[str, object], up_events: list[ScaleEvent], down_events: list[ScaleEvent],
                 now: float) -> tuple[int, str, str]:
    """convertDesiredReplicasWithBehaviorRate: (replicas, ScalingLimited reason, message)."""
    if desired > current:
        limit = max(scale_up_limit(current, up_events, scale_up, now), current)
        if max_replicas > limit:
            allowed, reason, message = limit, "ScaleUpLimit", \
                "the desired replica count is increasing faster than the maximum scale rate"
        else:
            allowed, reason, message = max_replicas, "TooManyReplicas", \
                "the desired replica count is more than the maximum replica count"
        if desired > allowed:
            return allowed, reason, message
    elif desired < current:
        limit = min(scale_down_limit(current, down_events, scale_down, now), current)
        if min_replicas < limit:
            allowed, reason, message = limit, "ScaleDownLimit", \
                "the desired replica count is decreasing faster than the maximum scale rate"
        else:
            allowed, reason, message = min_replicas, "TooFewReplicas", \
                "the desired replica count is less than the minimum replica count"
        if desired < allowed:
            return allowed, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def rules_limited(current: int, desired: int, min_replicas: int, max_replicas: int) -> tuple[int, str, str]:
    """convertDesiredReplicasWithRules (no behavior): at most doubling (or 4) per step, within min..max."""
    limit = max(2 * current, 4)
    if max_replicas > limit:
        allowed, reason, message = limit, "ScaleUpLimit", \
            "the desired replica count is increasing faster than the maximum scale rate"
    else:
        allowed, reason, message = max_replicas, "TooManyReplicas", \
            "the desired replica count is more than the maximum replica count"
    if desired < min_replicas:
        return min_replicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
    if desired > allowed:
        return allowed, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
