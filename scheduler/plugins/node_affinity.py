"""NodeAffinity: spec.nodeSelector and requiredDuringScheduling node affinity decide which nodes a pod
may use (filter); preferredDuringScheduling terms add their weights to the nodes they match (score).

Matching is upstream's (component-helpers nodeaffinity): nodeSelector needs every label equal;
required affinity needs any one of its terms; a term needs all of its matchExpressions (on labels:
In, NotIn, Exists, DoesNotExist, Gt, Lt) and matchFields (metadata.name with In/NotIn); a term with
neither, or with an invalid requirement, matches no node.
"""

from __future__ import annotations

from collections.abc import Sequence

from machinery.nodeaffinity import NodeSelectorTermMatcher, RequiredNodeAffinity
from scheduler.framework import SUCCESS, NodeInfo, PodInfo, Status, default_normalize_score

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"


def required_of(pod: PodInfo) -> RequiredNodeAffinity:
    """The pod's compiled constraints, computed on first use and kept on the PodInfo."""
    cached = pod.state.get(NAME)
    if cached is None:
        cached = pod.state[NAME] = RequiredNodeAffinity(pod.pod)
    return cached


def skip(pod: PodInfo) -> bool:
    """PreFilter: no nodeSelector and no required affinity, so every node matches."""
    return required_of(pod).empty


def node_affinity(pod: PodInfo, node: NodeInfo) -> Status:
    required = required_of(pod)
    if required.empty or required.matches(node.labels, node.name):
        return SUCCESS
    return Status.unschedulable(ERR_REASON_POD, unresolvable=True)


def _preferred_terms(pod: PodInfo) -> list[tuple[int, NodeSelectorTermMatcher]]:
    key = NAME + "/preferred"
    cached = pod.state.get(key)
    if cached is None:
        cached = []
        spec = pod.pod.spec
        affinity = spec.affinity if spec is not None else None
        node_affinity = affinity.node_affinity if affinity is not None else None
        if node_affinity is not None:
            for term in node_affinity.preferred_during_scheduling_ignored_during_execution or ():
                if term.weight:
                    cached.append((term.weight, NodeSelectorTermMatcher(term.preference)))
        pod.state[key] = cached
    return cached


def node_affinity_score(pod: PodInfo, node: NodeInfo) -> int:
    """The sum of the weights of the preferred terms the node matches (normalized to 0..100)."""
    return sum(weight for weight, term in _preferred_terms(pod) if term.matches(node.labels, node.name))


def node_affinity_scores(pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
    """node_affinity_score of every node: all 0 for a pod without preferred terms."""
    terms = _preferred_terms(pod)
    if not terms:
        return [0] * len(nodes)
    return [sum(weight for weight, term in terms if term.matches(node.labels, node.name)) for node in nodes]


def node_affinity_normalize(pod: PodInfo, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
    default_normalize_score(scores)
