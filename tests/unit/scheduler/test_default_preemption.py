"""DefaultPreemption as pure functions: which pods are victims on a node, which node is picked, and the
messages when preemption cannot help (upstream defaultpreemption's and preemption.go's table tests, in part)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework import FitError, NodeInfo, PodInfo, Snapshot
from scheduler.plugins import default_framework
from scheduler.plugins.default_preemption import (
    Candidate,
    disruption_condition,
    eligible,
    pick_one_node,
    post_filter,
    select_victims_on_node,
    split_by_pdb_violation,
)
from tests.unit.scheduler.test_scheduler_plugins import make_node, make_pod


def bound(name: str, node: str, cpu: str, priority: int, started: str = "2026-01-01T00:00:00Z",
          **extra: Any) -> PodInfo:
    info = make_pod(name, cpu=cpu, priority=priority, node_name=node, **extra)
    info.pod.status = _status(started)
    return info


def _status(started: str) -> Any:
    from machinery.api.core_v1 import PodStatus

    return PodStatus.model_validate({"startTime": started})


def cluster(*nodes: tuple[str, str, list[PodInfo]]) -> Snapshot:
    return Snapshot([NodeInfo.build(make_node(name, cpu=cpu), pods) for name, cpu, pods in nodes])


def fit_error(pod: PodInfo, snapshot: Snapshot) -> FitError:
    framework = default_framework()
    with pytest.raises(FitError) as raised:
        framework.schedule(pod, snapshot)
    return raised.value


def test_lower_priority_pods_are_victims_and_the_fewest_are_taken() -> None:
    node = NodeInfo.build(make_node("n", cpu="4"), [bound("low-a", "n", "1", 0), bound("low-b", "n", "2", 0),
                                                   bound("high", "n", "1", 100)])
    preemptor = make_pod("p", cpu="2", priority=50)
    victims, _, status = select_victims_on_node(default_framework(), preemptor, node)
    assert status.is_success
    # removing low-b alone frees 2 cpus: low-a is given back (more important ones are tried first)
    assert [v.name for v in victims] == ["low-b"]
    assert len(node.pods) == 3  # the snapshot's node is untouched


def test_equal_or_higher_priority_pods_are_never_victims() -> None:
    node = NodeInfo.build(make_node("n", cpu="2"), [bound("same", "n", "2", 50)])
    victims, _, status = select_victims_on_node(default_framework(), make_pod("p", cpu="1", priority=50), node)
    assert victims == [] and status.reasons == ("No preemption victims found for incoming pod",)


def test_removing_every_lower_pod_is_not_enough() -> None:
    node = NodeInfo.build(make_node("n", cpu="2"), [bound("low", "n", "1", 0), bound("high", "n", "1", 100)])
    victims, _, status = select_victims_on_node(default_framework(), make_pod("p", cpu="2", priority=50), node)
    assert victims == [] and status.reasons == ("Insufficient cpu",)


def test_post_filter_picks_the_node_with_the_least_important_victims() -> None:
    snapshot = cluster(("a", "2", [bound("a-mid", "a", "2", 10)]), ("b", "2", [bound("b-low", "b", "2", 1)]))
    preemptor = make_pod("p", cpu="2", priority=100)
    verdict = post_filter(default_framework(), preemptor, snapshot, fit_error(preemptor, snapshot))
    assert verdict.candidate is not None and verdict.message == ""
    assert verdict.candidate.node == "b" and [v.name for v in verdict.candidate.victims] == ["b-low"]


def test_pick_one_node_criteria_in_order() -> None:
    low, mid = bound("l", "x", "1", 1), bound("m", "x", "1", 5)
    # 1. lowest highest priority
    assert pick_one_node([Candidate("a", [mid]), Candidate("b", [low, low])]).node == "b"
    # 2. lowest sum, 3. fewest victims
    assert pick_one_node([Candidate("a", [low, low]), Candidate("b", [low])]).node == "b"
    # 4. the highest-priority victims that started latest
    early, late = bound("e", "x", "1", 1, "2026-01-01T00:00:00Z"), bound("t", "x", "1", 1, "2026-06-01T00:00:00Z")
    assert pick_one_node([Candidate("a", [early]), Candidate("b", [late])]).node == "b"


def test_messages_when_preemption_cannot_help() -> None:
    snapshot = cluster(("a", "1", [bound("a-high", "a", "1", 1000)]))
    preemptor = make_pod("p", cpu="1", priority=10)
    verdict = post_filter(default_framework(), preemptor, snapshot, fit_error(preemptor, snapshot))
    assert verdict.candidate is None
    assert verdict.message == "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    # a node no eviction can fix (a nodeSelector that does not match) is "not helpful"
    picky = make_pod("q", cpu="1", priority=10, node_selector={"disk": "ssd"})
    verdict = post_filter(default_framework(), picky, snapshot, fit_error(picky, snapshot))
    assert verdict.message == "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."


def test_preemption_policy_never_and_a_terminating_victim_on_the_nominated_node() -> None:
    snapshot = cluster(("a", "1", [bound("low", "a", "1", 0)]))
    never = make_pod("n", cpu="1", priority=10, preemptionPolicy="Never")
    assert eligible(never, snapshot) == (False, "not eligible due to preemptionPolicy=Never.")
    verdict = post_filter(default_framework(), never, snapshot, fit_error(never, snapshot))
    assert verdict.candidate is None and verdict.message == "preemption: not eligible due to preemptionPolicy=Never."

    going = bound("going", "a", "1", 0)
    going.pod.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"
    snapshot = cluster(("a", "1", [PodInfo(going.pod)]))
    waiting = make_pod("w", cpu="1", priority=10)
    waiting.pod.status = _status("2026-01-01T00:00:00Z").model_copy(update={"nominated_node_name": "a"})
    assert eligible(waiting, snapshot) == (False, "not eligible due to a terminating pod on the nominated node.")


def test_disruption_condition() -> None:
    assert disruption_condition("default-scheduler", "2026-01-01T00:00:00Z") == {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": "default-scheduler: preempting to accommodate a higher priority pod",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}


def test_room_nominated_to_a_preemptor_is_not_taken_by_a_lower_priority_pod() -> None:
    snapshot = cluster(("a", "2", []), ("b", "1", []))
    preemptor = make_pod("pre", cpu="2", priority=100)
    nominated = {"a": {preemptor.key: preemptor}}
    low = make_pod("low", cpu="1", priority=0)
    # the low pod does not fit beside the nominated one on a: b is its only node
    assert default_framework().schedule(low, snapshot, nominated=nominated).node == "b"
    # a pod as important as the nominated one must fit beside it too
    equal = make_pod("equal", cpu="1", priority=100)
    assert default_framework().schedule(equal, snapshot, nominated=nominated).node == "b"
    # a more important pod is not held back by a less important nomination
    top = make_pod("top", cpu="2", priority=1000)
    assert default_framework().schedule(top, snapshot, nominated=nominated).node == "a"
    # the nominated pod itself fits where it was nominated
    assert default_framework().schedule(preemptor, snapshot, nominated=nominated).node == "a"


def pdb(name: str, match: dict[str, str] | None, allowed: int, namespace: str = "default",
        disrupted: dict[str, str] | None = None) -> Any:
    from machinery.api.policy_v1 import PodDisruptionBudget

    return PodDisruptionBudget.model_validate({
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": match} if match is not None else None},
        "status": {"disruptionsAllowed": allowed, "disruptedPods": disrupted}})


def labelled(name: str, node: str, cpu: str, priority: int, app: str, started: str = "2026-01-01T00:00:00Z"
             ) -> PodInfo:
    info = bound(name, node, cpu, priority, started)
    info.pod.metadata.labels = {"app": app}
    info.pod.metadata.namespace = "default"
    info.namespace = "default"
    return info


def test_split_by_pdb_violation_charges_each_budget_in_order() -> None:
    a, b, c = (labelled(n, "n", "1", 0, "web") for n in ("a", "b", "c"))
    other = labelled("o", "n", "1", 0, "db")
    violating, others = split_by_pdb_violation([a, b, c, other], [pdb("web", {"app": "web"}, 1)])
    # one disruption allowed: the first pod uses it, the next two would break the budget
    assert [p.name for p in violating] == ["b", "c"] and [p.name for p in others] == ["a", "o"]


def test_split_by_pdb_violation_ignores_empty_selectors_other_namespaces_and_disrupted_pods() -> None:
    a, b = labelled("a", "n", "1", 0, "web"), labelled("b", "n", "1", 0, "web")
    budgets = [pdb("empty", {}, 0), pdb("nil", None, 0), pdb("elsewhere", {"app": "web"}, 0, namespace="other"),
               pdb("web", {"app": "web"}, 0, disrupted={"a": "2026-01-01T00:00:00Z"})]
    violating, others = split_by_pdb_violation([a, b], budgets)
    assert [p.name for p in violating] == ["b"] and [p.name for p in others] == ["a"]


def test_victims_a_budget_protects_are_given_back_first() -> None:
    # both pods are equally important; either one freed is enough. Without budgets the later-started one is the
    # victim (the earlier is tried first and given back); the budget protecting "early" changes nothing, but
    # protecting "late" makes "late" be given back first, so "early" goes.
    early = labelled("early", "n", "1", 0, "protected", started="2026-01-01T00:00:00Z")
    late = labelled("late", "n", "1", 0, "free", started="2026-01-02T00:00:00Z")
    node = NodeInfo.build(make_node("n", cpu="2"), [early, late])
    preemptor = make_pod("p", cpu="1", priority=50)
    victims, violations, status = select_victims_on_node(default_framework(), preemptor, node)
    assert status.is_success and [v.name for v in victims] == ["late"] and violations == 0
    budgets = [pdb("keep-late", {"app": "free"}, 0)]
    victims, violations, status = select_victims_on_node(default_framework(), preemptor, node, budgets)
    assert status.is_success and [v.name for v in victims] == ["early"] and violations == 0


def test_a_victim_that_must_go_despite_its_budget_counts_as_a_violation() -> None:
    only = labelled("only", "n", "2", 0, "web")
    node = NodeInfo.build(make_node("n", cpu="2"), [only])
    victims, violations, status = select_victims_on_node(default_framework(), make_pod("p", cpu="1", priority=50),
                                                         node, [pdb("web", {"app": "web"}, 0)])
    assert status.is_success and [v.name for v in victims] == ["only"] and violations == 1


def test_post_filter_prefers_the_node_whose_victims_break_no_budget() -> None:
    # node a's victim is the least important, but its budget allows no disruption: b is picked
    snapshot = cluster(("a", "2", [labelled("a-low", "a", "2", 1, "guarded")]),
                       ("b", "2", [labelled("b-mid", "b", "2", 10, "free")]))
    preemptor = make_pod("p", cpu="2", priority=100)
    error = fit_error(preemptor, snapshot)
    assert post_filter(default_framework(), preemptor, snapshot, error).candidate.node == "a"  # type: ignore[union-attr]
    verdict = post_filter(default_framework(), preemptor, snapshot, error, [pdb("g", {"app": "guarded"}, 0)])
    assert verdict.candidate is not None and verdict.candidate.node == "b"
    assert verdict.candidate.num_pdb_violations == 0
