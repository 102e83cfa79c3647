"""Required node affinity matching (upstream k8s.io/component-helpers/scheduling/corev1/nodeaffinity),
shared by the scheduler's NodeAffinity plugin, the DaemonSet controller's node eligibility and, for a
PersistentVolume's spec.nodeAffinity, the scheduler's VolumeBinding and the volume binder.

nodeSelector needs every label equal; required affinity needs any one of its terms; a term needs all
of its matchExpressions (on labels: In, NotIn, Exists, DoesNotExist, Gt, Lt) and matchFields
(metadata.name with In/NotIn); a term with neither, or with an invalid requirement, matches no node.
"""

from __future__ import annotations

from collections.abc import Mapping

from machinery.api.core_v1 import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod
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


def node_selector_matches(selector: NodeSelector, labels: Mapping[str, str], node_name: str) -> bool:
    """A NodeSelector on its own (a PersistentVolume's spec.nodeAffinity.required, upstream's
    CheckNodeAffinity): any one term matches; an empty list matches nothing."""
    return any(NodeSelectorTermMatcher(t).matches(labels, node_name) for t in selector.node_selector_terms)
