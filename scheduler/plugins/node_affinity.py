"""NodeAffinity: spec.nodeSelector and requiredDuringScheduling node affinity decide which nodes a pod
may use (filter); preferredDuringScheduling terms add their weights to the nodes they match (score).

Matching is upstream's (component-helpers nodeaffinity): nodeSelector needs every label equal;
required affinity needs any one of its terms; a term needs all of its matchExpressions (on labels:
In, NotIn, Exists, DoesNotExist, Gt, Lt) and matchFields (metadata.name with In/NotIn); a term with
neither, or with an invalid requirement, matches no node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from machinery.api.core_v1 import NodeSelectorRequirement, NodeSelectorTerm, Pod
from machinery.selectors import (
    DOES_NOT_EXIST,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_IN,
    Requirement,
    SelectorError,
)
from scheduler.framework import SUCCESS, NodeInfo, PodInfo, Status, default_normalize_score

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"

_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST,
              "Gt": GREATER_THAN, "Lt": LESS_THAN}


class NodeSelectorTermMatcher:
    """One NodeSelectorTerm, compiled once."""

    __slots__ = ("_fields", "_labels", "_never")

    def __init__(self, term: NodeSelectorTerm) -> None:
        self._labels: list[Requirement] = []
        self._fields: list[tuple[str, frozenset[str]]] = []
        self._never = not term.match_expressions and not term.match_fields
        try:
            for req in term.match_expressions or ():
                self._labels.append(_label_requirement(req))
            for req in term.match_fields or ():
                self._fields.append(_field_requirement(req))
        except SelectorError:
            self._never = True

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if self._never:
            return False
        for req in self._labels:
            if not req.matches(labels):
                return False
        return all((node_name in values) == (operator == "In") for operator, values in self._fields)


def _label_requirement(req: NodeSelectorRequirement) -> Requirement:
    operator = _OPERATORS.get(req.operator)
    if operator is None:
        raise SelectorError(f"{req.operator!r} is not a valid node selector operator")
    return Requirement(req.key, operator, req.values or None)


def _field_requirement(req: NodeSelectorRequirement) -> tuple[str, frozenset[str]]:
    if req.key != "metadata.name" or req.operator not in ("In", "NotIn") or not req.values:
        raise SelectorError(f"unsupported node selector field requirement {req.key} {req.operator}")
    return req.operator, frozenset(req.values)


class RequiredNodeAffinity:
    """A pod's hard node constraints: nodeSelector AND (any required affinity term)."""

    __slots__ = ("_selector", "_terms")

    def __init__(self, pod: Pod) -> None:
        spec = pod.spec
        self._selector: dict[str, str] = dict(spec.node_selector or {}) if spec is not None else {}
        self._terms: list[NodeSelectorTermMatcher] | None = None
        affinity = spec.affinity if spec is not None else None
        node_affinity = affinity.node_affinity if affinity is not None else None
        required = node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
        if required is not None:
            self._terms = [NodeSelectorTermMatcher(t) for t in required.node_selector_terms]

    @classmethod
    def of(cls, pod: PodInfo) -> RequiredNodeAffinity:
        """The pod's compiled constraints, computed on first use and kept on the PodInfo."""
        cached = pod.state.get(NAME)
        if cached is None:
            cached = pod.state[NAME] = cls(pod.pod)
        return cached

    @property
    def empty(self) -> bool:
        return not self._selector and self._terms is None

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        for key, value in self._selector.items():
            if labels.get(key) != value:
                return False
        if self._terms is None:
            return True
        return any(term.matches(labels, node_name) for term in self._terms)


def skip(pod: PodInfo) -> bool:
    """PreFilter: no nodeSelector and no required affinity, so every node matches."""
    return RequiredNodeAffinity.of(pod).empty


def node_affinity(pod: PodInfo, node: NodeInfo) -> Status:
    required = RequiredNodeAffinity.of(pod)
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
