"""TaintToleration: NoSchedule and NoExecute taints keep out pods that do not tolerate them (filter);
untolerated PreferNoSchedule taints make a node less attractive (score, fewer is better)."""

from __future__ import annotations

from collections.abc import Sequence

from machinery.taints import tolerates_taint
from scheduler.framework import SUCCESS, NodeInfo, PodInfo, Status, default_normalize_score

NAME = "TaintToleration"


def taint_toleration(pod: PodInfo, node: NodeInfo) -> Status:
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not tolerates_taint(pod.tolerations, taint):
            return Status.unschedulable(f"node(s) had untolerated taint {{{taint.key}: {taint.value or ''}}}",
                                        unresolvable=True)
    return SUCCESS


def taint_toleration_nodes(pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[tuple[int, Status]]:
    """taint_toleration's failures among nodes (only tainted nodes can fail)."""
    out = []
    for i, node in enumerate(nodes):
        if node.taints:
            status = taint_toleration(pod, node)
            if status is not SUCCESS:
                out.append((i, status))
    return out


def taint_toleration_score(pod: PodInfo, node: NodeInfo) -> int:
    """How many PreferNoSchedule taints the pod does not tolerate (normalized in reverse)."""
    if not node.taints:
        return 0
    tolerations = [t for t in pod.tolerations if not t.effect or t.effect == "PreferNoSchedule"]
    return sum(1 for taint in node.taints
               if taint.effect == "PreferNoSchedule" and not tolerates_taint(tolerations, taint))


def taint_toleration_scores(pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
    """taint_toleration_score of every node: all 0 when no node has a taint."""
    if not any(node.taints for node in nodes):
        return [0] * len(nodes)
    return [taint_toleration_score(pod, node) for node in nodes]


def taint_toleration_normalize(pod: PodInfo, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
    default_normalize_score(scores, reverse=True)
