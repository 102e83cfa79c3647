"""The plugins' many-nodes forms (`*_nodes` filters, `*_scores` scores) against their per-node functions,
and the chunked filtering of a cycle against node-after-node filtering (issue 19)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from scheduler.framework import (
    SUCCESS,
    Filter,
    Framework,
    NodeInfo,
    PodInfo,
    Score,
    Snapshot,
    Status,
    failures_of,
    num_feasible_nodes_to_find,
)
from scheduler.plugins import (
    default_filters,
    default_framework,
    node_ready,
    node_resources,
    node_unschedulable,
    taint_toleration,
)
from tests.unit.scheduler.test_scheduler_plugins import make_node, make_pod, node_info


def varied_nodes(count: int, seed: int = 7) -> list[NodeInfo]:
    """Nodes of every kind a filter can turn down or a score can single out, some with pods on them."""
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        kind = rng.randrange(10)
        kwargs: dict[str, Any] = {"cpu": rng.choice(["1", "2", "4", "500m"]),
                                  "memory": rng.choice(["1Gi", "4Gi", "256Mi"]), "pods": rng.choice(["3", "110"])}
        if kind == 0:
            kwargs["taints"] = [{"key": "dedicated", "value": "gpu", "effect": rng.choice(
                ["NoSchedule", "NoExecute", "PreferNoSchedule"])}]
        elif kind == 1:
            kwargs["unschedulable"] = True
        elif kind == 2:
            kwargs["ready"] = rng.choice(["False", "Unknown", None])
        elif kind == 3:
            kwargs["memory"] = "0"
        elif kind == 4:
            kwargs["extra"] = {"example.com/gpu": "1", "ephemeral-storage": "1Gi"}
        pods = [make_pod(f"on-{i}-{j}", cpu=rng.choice(["100m", "900m"]), memory="128Mi", owner="web")
                for j in range(rng.randrange(4))]
        nodes.append(node_info(make_node(f"node-{i:03d}", **kwargs), *pods))
    return nodes


def varied_pods() -> list[PodInfo]:
    gpu = {"name": "c", "image": "nginx", "resources": {"requests": {"example.com/gpu": "1", "cpu": "100m"}}}
    storage = {"name": "c", "image": "nginx", "resources": {"requests": {"ephemeral-storage": "2Gi"}}}
    return [
        make_pod("plain", cpu="100m", memory="64Mi", owner="web"),
        make_pod("big", cpu="3", memory="3Gi"),
        make_pod("best-effort"),
        make_pod("tolerant", cpu="100m", tolerations=[{"operator": "Exists"}]),
        make_pod("gpu", containers=[gpu]),
        make_pod("storage", containers=[storage]),
    ]


FILTERS: list[tuple[Callable[..., Status], Callable[..., list[tuple[int, Status]]]]] = [
    (node_unschedulable.node_unschedulable, node_unschedulable.node_unschedulable_nodes),
    (taint_toleration.taint_toleration, taint_toleration.taint_toleration_nodes),
    (node_ready.node_ready, node_ready.node_ready_nodes),
    (node_resources.node_resources_fit, node_resources.node_resources_fit_nodes),
]


@pytest.mark.parametrize(("one", "many"), FILTERS, ids=lambda f: getattr(f, "__name__", ""))
def test_many_nodes_filters_turn_down_exactly_the_per_node_failures(
        one: Callable[..., Status], many: Callable[..., list[tuple[int, Status]]]) -> None:
    nodes = varied_nodes(120)
    turned_down = 0
    for pod in varied_pods():
        expected = failures_of(one, pod, nodes)
        assert many(pod, nodes) == expected
        turned_down += len(expected)
    assert turned_down > 0  # the nodes do exercise the filter


SCORES = [(node_resources.least_allocated_score, node_resources.least_allocated_scores),
          (node_resources.balanced_allocation_score, node_resources.balanced_allocation_scores),
          (taint_toleration.taint_toleration_score, taint_toleration.taint_toleration_scores)]


@pytest.mark.parametrize(("one", "many"), SCORES, ids=lambda f: getattr(f, "__name__", ""))
def test_many_nodes_scores_equal_the_per_node_scores(one: Callable[..., int],
                                                     many: Callable[..., list[int]]) -> None:
    nodes = varied_nodes(120)
    for pod in varied_pods():
        expected = [one(pod, node) for node in nodes]
        assert many(pod, nodes) == expected
        assert len(set(expected)) > 1 or one is taint_toleration.taint_toleration_score


def sequential_fit(framework: Framework, pod: PodInfo, nodes: Sequence[NodeInfo],
                   start: int) -> tuple[list[str], dict[str, Status], int]:
    """Node after node, filter after filter: what the chunked cycle must reproduce."""
    wanted = num_feasible_nodes_to_find(len(nodes), framework.percentage_of_nodes_to_score)
    filters = framework.filters_for(pod)
    order = nodes[start:] + nodes[:start]
    feasible: list[str] = []
    statuses: dict[str, Status] = {}
    for i, node in enumerate(order):
        for name, fn in filters:
            status = fn(pod, node)
            if status is not SUCCESS and not status.is_success:
                statuses[node.name] = status if status.plugin else Status(status.code, status.reasons, name)
                break
        else:
            feasible.append(node.name)
            if len(feasible) >= wanted:
                return feasible, statuses, i + 1
    return feasible, statuses, len(nodes)


@pytest.mark.parametrize("count", [40, 250])
def test_chunked_filtering_finds_what_node_after_node_filtering_finds(count: int) -> None:
    nodes = varied_nodes(count, seed=count)
    snapshot = Snapshot(nodes)
    for framework in (default_framework(), default_framework(percentage_of_nodes_to_score=30)):
        for pod in varied_pods():
            for start in (0, 1, count // 3, count - 1):
                feasible, statuses, processed = framework.find_nodes_that_fit(pod, snapshot, start)
                expected = sequential_fit(framework, pod, nodes, start)
                assert ([n.name for n in feasible], statuses, processed) == expected
                assert list(statuses) == list(expected[1])  # in the nodes' order too


def test_per_node_filters_without_a_many_nodes_form_are_called_node_by_node() -> None:
    turned_down = Status.unschedulable("odd")
    odd = Filter("Odd", lambda pod, node: turned_down if node.name.endswith(("1", "3", "5", "7", "9")) else SUCCESS)
    framework = Framework([*default_filters(), odd], [])
    nodes = varied_nodes(30)
    feasible, statuses, _ = framework.find_nodes_that_fit(varied_pods()[0], Snapshot(nodes))
    assert feasible and all(not n.name.endswith(("1", "3", "5", "7", "9")) for n in feasible)
    assert {s.plugin for s in statuses.values()} >= {"Odd"}


def test_a_score_plugin_that_scores_too_few_nodes_is_an_error() -> None:
    short = Score("Short", lambda pod, node: 0, 1, None, lambda pod, nodes: [0] * (len(nodes) - 1))
    framework = Framework([], [short])
    with pytest.raises(ValueError, match="plugin Short scored 1 of 2 nodes"):
        framework.prioritize_nodes(varied_pods()[0], varied_nodes(2))


def weighted_sums(framework: Framework, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
    """Every plugin's normalized scores times its weight, summed node by node: what prioritize_nodes must give."""
    totals = [0] * len(nodes)
    for plugin in framework.scores:
        scores = [plugin.score(pod, node) for node in nodes]
        plugin.normalize_score(pod, nodes, scores)
        totals = [t + s * plugin.weight for t, s in zip(totals, scores, strict=True)]
    return totals


def test_totals_are_the_weighted_sums_whether_plugins_score_every_node_alike_or_not() -> None:
    """Plugins that give every node one score (no node tainted, no preferred affinity, no sibling anywhere) are
    added once at the end: the totals are the same."""
    alike = Score("Alike", lambda pod, node: 7, 5)
    framework = Framework([], [*default_framework().scores, alike])
    untainted = [n for n in varied_nodes(120) if not n.taints]
    for nodes in (varied_nodes(120), untainted, untainted[:1]):
        for pod in varied_pods():
            assert framework.prioritize_nodes(pod, nodes) == weighted_sums(framework, pod, nodes)
    assert Framework([], [alike]).prioritize_nodes(varied_pods()[0], untainted[:3]) == [35] * 3
    assert Framework([], []).prioritize_nodes(varied_pods()[0], untainted[:3]) == [0] * 3
    assert Framework([], [alike]).prioritize_nodes(varied_pods()[0], []) == []
    too_high = Score("TooHigh", lambda pod, node: 101, 1)
    with pytest.raises(ValueError, match=r"plugin TooHigh scored node node-\d+ 101, out of 0\.\.100"):
        Framework([], [too_high]).prioritize_nodes(varied_pods()[0], untainted[:3])


def test_node_info_keeps_what_is_free_as_pods_come_and_go_and_the_node_changes() -> None:
    info = node_info(make_node(cpu="2", memory="1Gi", pods="3"))
    assert (info.free_milli_cpu, info.free_memory, info.free_pods) == (2000, 1 << 30, 3)
    pod = make_pod("a", cpu="1500m", memory="512Mi")
    info.add_pod(pod)
    assert (info.free_milli_cpu, info.free_memory, info.free_pods) == (500, 512 << 20, 2)
    info.set_node(make_node(cpu="1", memory="1Gi", pods="1"))  # shrunk under its pod: overcommitted
    assert (info.free_milli_cpu, info.free_pods) == (-500, 0)
    assert node_resources.node_resources_fit_nodes(make_pod("zero"), [info]) == [
        (0, Status.unschedulable(node_resources.TOO_MANY_PODS))]
    info.remove_pod(pod)
    assert (info.free_milli_cpu, info.free_memory, info.free_pods) == (1000, 1 << 30, 1)
    assert node_resources.node_resources_fit_nodes(make_pod("zero"), [info]) == []


@pytest.mark.parametrize(("one", "many"), SCORES[:2], ids=lambda f: getattr(f, "__name__", ""))
def test_remembered_scores_follow_the_nodes_and_the_pods_requests(one: Callable[..., int],
                                                                  many: Callable[..., list[int]]) -> None:
    nodes = varied_nodes(20)
    small, big = make_pod("small", cpu="100m", memory="64Mi"), make_pod("big", cpu="1", memory="1Gi")
    first = many(small, nodes)
    assert first == [one(small, node) for node in nodes]
    nodes[0].add_pod(make_pod("more", cpu="400m", memory="900Mi"))  # a pod comes: the node's score moves
    nodes[1].set_node(make_node(nodes[1].name, cpu="16", memory="64Gi"))  # the node grows
    second = many(small, nodes)
    assert second == [one(small, node) for node in nodes]
    assert second[:2] != first[:2] and second[2:] == first[2:]
    assert many(big, nodes) == [one(big, node) for node in nodes] != second  # other requests, other scores
