"""ClusterRole aggregation as upstream's controller computes it (machinery/rbac.py), and the bootstrap policy's
aggregated roles (admin, edit, view) built and reconciled with it."""

from __future__ import annotations

from typing import Any

from apiserver.auth import bootstrap
from machinery.rbac import AGGREGATE_TO_EDIT, aggregated_rules, same_rules, selectors_of


def role(name: str, labels: dict[str, str], *rules: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "rules": list(rules)}


def rule(verb: str, resource: str) -> dict[str, Any]:
    return {"verbs": [verb], "apiGroups": [""], "resources": [resource]}


def test_rules_come_by_role_name_each_once_and_never_from_the_role_itself() -> None:
    roles = [role("zeta", {"a": "1"}, rule("get", "pods")),
             role("alpha", {"a": "1"}, rule("list", "pods"), {**rule("get", "pods"), "resourceNames": []}),
             role("self", {"a": "1"}, rule("delete", "pods")),
             role("other", {"b": "1"}, rule("get", "secrets"))]
    # alpha before zeta; alpha's second rule equals zeta's (an empty list is no list, as Go's Semantic)
    assert aggregated_rules("self", [{"matchLabels": {"a": "1"}}], roles) == [
        rule("list", "pods"), {**rule("get", "pods"), "resourceNames": []}]
    # selectors in order: what the second picks comes after
    assert aggregated_rules("self", [{"matchLabels": {"b": "1"}}, {"matchLabels": {"a": "1"}}], roles)[0] == \
        rule("get", "secrets")
    assert aggregated_rules("self", [{"matchLabels": {"c": "1"}}], roles) == []
    assert same_rules([rule("get", "pods")], [{**rule("get", "pods"), "nonResourceURLs": None}])
    assert selectors_of({"aggregationRule": {"clusterRoleSelectors": []}}) == []
    assert selectors_of({"rules": []}) is None


def test_bootstrap_admin_edit_and_view_are_aggregated_and_filled() -> None:
    roles, _ = bootstrap.policy_objects()
    by_name = {r["metadata"]["name"]: r for r in roles}
    view, edit, admin = by_name["view"], by_name["edit"], by_name["admin"]
    assert edit["aggregationRule"] == {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE_TO_EDIT: "true"}}]}
    assert view["metadata"]["labels"][AGGREGATE_TO_EDIT] == "true"
    # the same rules the controller would write: filled from the roles each selects
    for r in (view, edit, admin):
        assert same_rules(r["rules"], aggregated_rules(r["metadata"]["name"], selectors_of(r) or [], roles))
    assert all(x in edit["rules"] for x in view["rules"]) and all(x in admin["rules"] for x in edit["rules"])
    assert len(view["rules"]) < len(edit["rules"]) < len(admin["rules"])
    assert any("metrics.k8s.io" in x["apiGroups"] for x in view["rules"])  # system:aggregated-metrics-reader


def test_reconcile_keeps_an_aggregated_roles_gathered_rules_and_adds_missing_labels() -> None:
    roles, _ = bootstrap.policy_objects()
    wanted = next(r for r in roles if r["metadata"]["name"] == "edit")
    extra = rule("get", "widgets")
    stored = {**wanted, "rules": [*wanted["rules"], extra], "metadata": {**wanted["metadata"]}}
    assert bootstrap.reconciled(stored, wanted) is None  # gathered rules are the controller's, not reverted
    old = {**stored, "metadata": {"name": "edit", "labels": {}}, "aggregationRule": None}  # an older version's
    fixed = bootstrap.reconciled(old, wanted)
    assert fixed is not None and fixed["aggregationRule"] == wanted["aggregationRule"]
    assert extra in fixed["rules"] and fixed["metadata"]["labels"] == wanted["metadata"]["labels"]
    plain = next(r for r in roles if r["metadata"]["name"] == "system:monitoring")
    tampered = {**plain, "rules": []}
    assert bootstrap.reconciled(tampered, plain)["rules"] == plain["rules"]  # type: ignore[index]
    frozen = {**tampered, "metadata": {**plain["metadata"], "annotations": {bootstrap.AUTOUPDATE: "false"}}}
    assert bootstrap.reconciled(frozen, plain) is None
