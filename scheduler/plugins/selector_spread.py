"""SelectorSpread (lite): spread the pods of one owner (a ReplicaSet, ...) over nodes and zones.

Score: how many pods of the same controlling owner (same namespace, not terminating) the node
already runs, assumed pods included so a burst spreads too. NormalizeScore turns that around
(the emptiest node gets 100) and, when nodes carry topology.kubernetes.io/zone (and region)
labels, blends in the same count per zone with upstream's weight of 2/3.

Upstream's SelectorSpread counts pods matched by the selectors of the Services, ReplicaSets and
StatefulSets that select the pod; minik8s has no Services yet, so the controlling ownerReference
stands for "pods of one workload". Explicit topologySpreadConstraints are not evaluated.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.framework import MAX_NODE_SCORE, NodeInfo, PodInfo

NAME = "SelectorSpread"
ZONE_WEIGHTING = 2.0 / 3.0


def zone_key(node: NodeInfo) -> str:
    """utilnode.GetZoneKey: region and zone together; "" when the node has neither (NodeInfo works it
    out from the node's topology labels once, when the node is set)."""
    return node.zone


def selector_spread_score(pod: PodInfo, node: NodeInfo) -> int:
    if not pod.owner_uid:
        return 0
    return node.owner_counts.get((pod.namespace, pod.owner_uid), 0)


def selector_spread_scores(pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
    """selector_spread_score of every node."""
    if not pod.owner_uid:
        return [0] * len(nodes)
    owner = (pod.namespace, pod.owner_uid)
    return [node.owner_counts.get(owner, 0) for node in nodes]


def selector_spread_normalize(pod: PodInfo, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
    max_by_node = max(scores, default=0)
    zones = [node.zone for node in nodes]  # zone_key(node)
    if not any(zones):
        if max_by_node > 0:
            scores[:] = [int(MAX_NODE_SCORE * (max_by_node - score) / max_by_node) for score in scores]
        else:
            scores[:] = [MAX_NODE_SCORE] * len(scores)
        return
    by_zone: dict[str, int] = {}
    for zone, score in zip(zones, scores, strict=True):
        if zone:
            by_zone[zone] = by_zone.get(zone, 0) + score
    max_by_zone = max(by_zone.values(), default=0)
    for i, score in enumerate(scores):
        f_score = float(MAX_NODE_SCORE)
        if max_by_node > 0:
            f_score = MAX_NODE_SCORE * (max_by_node - score) / max_by_node
        if by_zone and zones[i]:
            zone_score = float(MAX_NODE_SCORE)
            if max_by_zone > 0:
                zone_score = MAX_NODE_SCORE * (max_by_zone - by_zone[zones[i]]) / max_by_zone
            f_score = f_score * (1.0 - ZONE_WEIGHTING) + ZONE_WEIGHTING * zone_score
        scores[i] = int(f_score)
