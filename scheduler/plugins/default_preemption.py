"""DefaultPreemption, the PostFilter plugin (upstream pkg/scheduler/framework/plugins/defaultpreemption and
framework/preemption/preemption.go): when no node fits a pod, find the nodes where removing pods of lower
priority would make it fit, pick the fewest and least important victims on each (SelectVictimsOnNode:
remove every lower-priority pod, then give back, most important first, each one the pod still fits beside),
and choose one node (pickOneNodeForPreemption). The scheduler then marks the victims with the
DisruptionTarget condition, deletes them gracefully and sets the preemptor's status.nominatedNodeName; the
preemptor is bound there once they are gone.

PodDisruptionBudgets are respected as a best effort, as upstream's: victims whose eviction would break a budget
are given back first (filterPodsWithPDBViolation), and the node with the fewest such victims wins. Pure functions
over the scheduler's snapshot and the budgets it lists.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from machinery.api.policy_v1 import PodDisruptionBudget
from machinery.selectors import selector_from_label_selector
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
    num_pdb_violations: int = 0


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


def split_by_pdb_violation(pods: Sequence[PodInfo], pdbs: Sequence[PodDisruptionBudget]
                           ) -> tuple[list[PodInfo], list[PodInfo]]:
    """filterPodsWithPDBViolation: the pods whose eviction, in this order, would take a matching budget's
    disruptionsAllowed below zero, and the others. A budget with an empty or invalid selector matches nothing;
    a pod already in a budget's disruptedPods was counted by the apiserver and is not charged again."""
    allowed = [(pdb.status.disruptions_allowed if pdb.status is not None else 0) for pdb in pdbs]
    selectors = []
    for pdb in pdbs:
        sel = pdb.spec.selector if pdb.spec is not None else None
        try:
            selectors.append(selector_from_label_selector(sel.to_dict()) if sel is not None else None)
        except ValueError:
            selectors.append(None)
    violating: list[PodInfo] = []
    others: list[PodInfo] = []
    for info in pods:
        labels = info.pod.metadata.labels or {}
        violated = False
        for i, pdb in enumerate(pdbs):
            selector = selectors[i]
            if (not labels or pdb.metadata.namespace != info.namespace or selector is None or selector.empty
                    or not selector.matches(labels)):
                continue
            if info.name in ((pdb.status.disrupted_pods if pdb.status is not None else None) or {}):
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                violated = True
        (violating if violated else others).append(info)
    return violating, others


def select_victims_on_node(framework: Framework, pod: PodInfo, node: NodeInfo,
                           pdbs: Sequence[PodDisruptionBudget] = ()) -> tuple[list[PodInfo], int, Status]:
    """SelectVictimsOnNode: the least important set of lower-priority pods whose removal lets pod fit, and how
    many of them break a PodDisruptionBudget."""
    lower = [p for p in node.pods.values() if p.priority < pod.priority]
    if not lower or node.node is None:
        return [], 0, Status.unschedulable(NO_VICTIMS)
    trial = _without(node, lower)
    status = framework.run_filter_plugins(pod, trial)
    if not status.is_success:
        return [], 0, status
    victims: list[PodInfo] = []

    def reprieve(candidate: PodInfo) -> bool:
        """Give candidate back if the pod still fits beside it; else it is a victim."""
        trial.add_pod(candidate)
        if framework.run_filter_plugins(pod, trial).is_success:
            return True
        trial.remove_pod(candidate)
        victims.append(candidate)
        return False

    # most important first, and the pods a budget protects before the others
    ordered = sorted(lower, key=lambda p: (-p.priority, start_time(p)))
    violating, others = split_by_pdb_violation(ordered, pdbs)
    num_violations = sum(1 for candidate in violating if not reprieve(candidate))
    for candidate in others:
        reprieve(candidate)
    return victims, num_violations, Status()


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate:
    """pickOneNodeForPreemption: the fewest budget violations, then the lowest highest-victim priority, then
    the lowest sum of victim priorities, then the fewest victims, then the latest start of the highest-priority
    victims, then the first."""
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
    def violations(c: Candidate) -> int:
        return c.num_pdb_violations

    for key in (violations, highest, total, lambda c: len(c.victims)):
        low = min(key(c) for c in best)  # type: ignore[operator]
        best = [c for c in best if key(c) == low]  # type: ignore[operator]
        if len(best) == 1:
            return best[0]
    late = max(latest_start(c) for c in best)
    return next(c for c in best if latest_start(c) == late)


def post_filter(framework: Framework, pod: PodInfo, snapshot: Snapshot, error: FitError,
                pdbs: Sequence[PodDisruptionBudget] = ()) -> Result:
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
        victims, num_violations, verdict = select_victims_on_node(framework, pod, node, pdbs)
        if verdict.is_success and victims:
            candidates.append(Candidate(node.name, victims, num_violations))
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
