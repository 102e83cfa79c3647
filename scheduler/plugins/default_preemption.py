"""DefaultPreemption, the PostFilter plugin (upstream pkg/scheduler/framework/plugins/defaultpreemption and
framework/preemption/preemption.go): when no node fits a pod, find the nodes where removing pods of lower
priority would make it fit, pick the fewest and least important victims on each (SelectVictimsOnNode:
remove every lower-priority pod, then give back, most important first, each one the pod still fits beside),
and choose one node (pickOneNodeForPreemption). The scheduler then marks the victims with the
DisruptionTarget condition, deletes them gracefully and sets the preemptor's status.nominatedNodeName; the
preemptor is bound there once they are gone.

Pure functions over the scheduler's snapshot; PodDisruptionBudgets are not considered (minik8s has none
yet: upstream prefers victims whose eviction violates no budget, as a best effort).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduler.framework import Code, FitError, Framework, NodeInfo, PodInfo, Snapshot, Status

NAME = "DefaultPreemption"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING_ON_NOMINATED = "not eligible due to a terminating pod on the nominated node."
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION = "PreemptionByScheduler"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass
class Candidate:
    node: str
    victims: list[PodInfo] = field(default_factory=list)


@dataclass
class Result:
    """What the PostFilter decided: a candidate (nominate its node, evict its victims) or why none."""

    candidate: Candidate | None
    message: str


def start_time(pod: PodInfo) -> dt.datetime:
    """GetPodStartTime: status.startTime, else creation (a pod not started yet counts as newest)."""
    status = pod.pod.status
    value = (status.start_time if status is not None else None) or pod.pod.metadata.creation_timestamp
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, str) and value:
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
    return dt.datetime.max.replace(tzinfo=dt.UTC)


def more_important(a: PodInfo, b: PodInfo) -> bool:
    """MoreImportantPod: higher priority, then the one that started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return start_time(a) < start_time(b)


def eligible(pod: PodInfo, snapshot: Snapshot) -> tuple[bool, str]:
    """PodEligibleToPreemptOthers."""
    spec = pod.pod.spec
    if spec is not None and spec.preemption_policy == "Never":
        return False, POLICY_NEVER
    nominated = pod.pod.status.nominated_node_name if pod.pod.status is not None else None
    if nominated:
        node = snapshot.get(nominated)
        if node is not None and any(p.terminating and p.priority < pod.priority for p in node.pods.values()):
            return False, TERMINATING_ON_NOMINATED
    return True, ""


def _without(node: NodeInfo, removed: Sequence[PodInfo]) -> NodeInfo:
    """A copy of node without `removed` (the cycle's snapshot is not changed)."""
    assert node.node is not None
    gone = {p.key for p in removed}
    copy = NodeInfo(node.name, node.node)
    for pod in node.pods.values():
        if pod.key not in gone:
            copy.add_pod(pod)
    return copy


def select_victims_on_node(framework: Framework, pod: PodInfo, node: NodeInfo) -> tuple[list[PodInfo], Status]:
    """SelectVictimsOnNode: the least important set of lower-priority pods whose removal lets pod fit."""
    lower = [p for p in node.pods.values() if p.priority < pod.priority]
    if not lower or node.node is None:
        return [], Status.unschedulable(NO_VICTIMS)
    trial = _without(node, lower)
    status = framework.run_filter_plugins(pod, trial)
    if not status.is_success:
        return [], status
    victims: list[PodInfo] = []
    # most important first: each is kept if the pod still fits beside it
    ordered = sorted(lower, key=lambda p: (-p.priority, start_time(p)))
    for candidate in ordered:
        trial.add_pod(candidate)
        if not framework.run_filter_plugins(pod, trial).is_success:
            trial.remove_pod(candidate)
            victims.append(candidate)
    return victims, Status()


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate:
    """pickOneNodeForPreemption: the lowest highest-victim priority, then the lowest sum of victim
    priorities, then the fewest victims, then the latest start of the highest-priority victims, then
    the first."""
    def highest(c: Candidate) -> int:
        return max((v.priority for v in c.victims), default=-(1 << 31))

    def total(c: Candidate) -> int:
        # upstream offsets each priority by MaxInt32+1 so that negative priorities sum sensibly
        return sum(v.priority + (1 << 31) for v in c.victims)

    def latest_start(c: Candidate) -> dt.datetime:
        top = highest(c)
        times = [start_time(v) for v in c.victims if v.priority == top]
        return min(times, default=_EPOCH)

    best = list(candidates)
    for key in (highest, total, lambda c: len(c.victims)):
        low = min(key(c) for c in best)  # type: ignore[operator]
        best = [c for c in best if key(c) == low]  # type: ignore[operator]
        if len(best) == 1:
            return best[0]
    late = max(latest_start(c) for c in best)
    return next(c for c in best if latest_start(c) == late)


def post_filter(framework: Framework, pod: PodInfo, snapshot: Snapshot, error: FitError) -> Result:
    """The PostFilter: a candidate, or upstream's message for why preemption cannot help."""
    ok, why = eligible(pod, snapshot)
    if not ok:
        return Result(None, f"preemption: {why}")
    reasons: Counter[str] = Counter()
    candidates: list[Candidate] = []
    for node in snapshot.nodes:
        status = error.node_to_status.get(node.name)
        if status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            reasons[NOT_HELPFUL] += 1
            continue
        victims, verdict = select_victims_on_node(framework, pod, node)
        if verdict.is_success and victims:
            candidates.append(Candidate(node.name, victims))
        elif verdict.is_success:  # fits without removing anyone (the cache moved meanwhile)
            reasons[NO_VICTIMS] += 1
        else:
            for reason in verdict.reasons or (NO_VICTIMS,):
                reasons[reason] += 1
    if candidates:
        return Result(pick_one_node(candidates), "")
    total = len(snapshot.nodes)
    summary = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
    return Result(None, f"preemption: 0/{total} nodes are available: {summary}.")


def disruption_condition(scheduler_name: str, now: str) -> dict[str, str]:
    """The condition a victim gets before it is deleted (upstream's PreemptionByScheduler)."""
    return {"type": DISRUPTION_TARGET, "status": "True", "reason": REASON_PREEMPTION,
            "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
            "lastTransitionTime": now}
