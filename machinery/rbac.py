"""ClusterRole aggregation (upstream pkg/controller/clusterroleaggregation): an aggregated ClusterRole's rules
are the rules of every other ClusterRole its `aggregationRule.clusterRoleSelectors` select, taken by role
name order, each rule once. The controller-manager's clusterrole-aggregation controller keeps stored roles so,
and the apiserver's bootstrap policy writes its aggregated roles (admin, edit, view) already filled the same
way, so they hold their rules before any controller runs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from machinery.selectors import selector_from_label_selector

AGGREGATE_TO_VIEW = "rbac.authorization.k8s.io/aggregate-to-view"
AGGREGATE_TO_EDIT = "rbac.authorization.k8s.io/aggregate-to-edit"
AGGREGATE_TO_ADMIN = "rbac.authorization.k8s.io/aggregate-to-admin"

Rule = dict[str, Any]


def selectors_of(role: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The role's clusterRoleSelectors; None when it does not aggregate."""
    rule = role.get("aggregationRule")
    if not isinstance(rule, Mapping) or rule.get("clusterRoleSelectors") is None:
        return None
    return list(rule.get("clusterRoleSelectors") or [])


def _semantic(rule: Mapping[str, Any]) -> Rule:
    """A rule as Go's equality.Semantic compares it: an absent list and an empty one are the same."""
    return {k: v for k, v in rule.items() if v not in (None, [], "")}


def aggregated_rules(name: str, selectors: Iterable[Mapping[str, Any]],
                     roles: Iterable[Mapping[str, Any]]) -> list[Rule]:
    """The rules of the aggregated ClusterRole `name` (upstream syncClusterRole): per selector, the selected
    roles sorted by name, itself excepted, each rule appended unless an equal one is already there."""
    by_name = sorted(roles, key=lambda r: (r.get("metadata") or {}).get("name") or "")
    out: list[Rule] = []
    seen: list[Rule] = []
    for selector in selectors:
        matches = selector_from_label_selector(selector).matches
        for role in by_name:
            meta = role.get("metadata") or {}
            if meta.get("name") == name or not matches(meta.get("labels") or {}):
                continue
            for rule in role.get("rules") or ():
                key = _semantic(rule)
                if key not in seen:
                    seen.append(key)
                    out.append(dict(rule))
    return out


def same_rules(a: Iterable[Mapping[str, Any]] | None, b: Iterable[Mapping[str, Any]] | None) -> bool:
    return [_semantic(r) for r in a or ()] == [_semantic(r) for r in b or ()]
