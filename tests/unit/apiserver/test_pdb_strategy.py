"""The PodDisruptionBudget strategy (apiserver/registry/poddisruptionbudget.py), against upstream's
pkg/apis/policy/validation: one bound, counts or percents up to 100%, the eviction policy, the status."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.registry.poddisruptionbudget import PodDisruptionBudgetStrategy, validate_pdb_spec, validate_pdb_status


def full(spec: dict[str, Any]) -> list[str]:
    return [e.full() for e in validate_pdb_spec(spec)]


@pytest.mark.parametrize("spec", [{"minAvailable": 0}, {"minAvailable": "100%"}, {"maxUnavailable": 3},
                                  {"maxUnavailable": "0%", "unhealthyPodEvictionPolicy": "AlwaysAllow"},
                                  {"minAvailable": 1, "selector": {"matchExpressions": [
                                      {"key": "app", "operator": "Exists"}]}}, {}])
def test_valid(spec: dict[str, Any]) -> None:
    assert full(spec) == []


def test_both_bounds() -> None:
    [error] = full({"minAvailable": 1, "maxUnavailable": 1})
    assert error.startswith("spec: Invalid value: ")
    assert error.endswith(": minAvailable and maxUnavailable cannot be both set")


@pytest.mark.parametrize(("spec", "want"), [
    ({"minAvailable": -2}, 'spec.minAvailable: Invalid value: -2: must be greater than or equal to 0'),
    ({"maxUnavailable": "101%"}, 'spec.maxUnavailable: Invalid value: "101%": must not be greater than 100%'),
    ({"minAvailable": "5"}, "spec.minAvailable: Invalid value: \"5\": a valid percent string must be a numeric "
                            "string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is "
                            "'[0-9]+%')"),
    ({"unhealthyPodEvictionPolicy": "Never"},
     'spec.unhealthyPodEvictionPolicy: Unsupported value: "Never": supported values: "AlwaysAllow", '
     '"IfHealthyBudget"'),
    ({"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}},
     "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or "
     "'NotIn'"),
])
def test_invalid(spec: dict[str, Any], want: str) -> None:
    assert full(spec) == [want]


def test_status_counts_and_conditions() -> None:
    assert validate_pdb_status({"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                                "expectedPods": 1}) == []
    errors = [e.full() for e in validate_pdb_status({"expectedPods": -1, "conditions": [
        {"type": "DisruptionAllowed", "status": "Maybe", "reason": "R", "lastTransitionTime": "t"},
        {"type": "DisruptionAllowed", "status": "True", "reason": "", "lastTransitionTime": "t"}]})]
    assert errors == [
        "status.expectedPods: Invalid value: -1: must be greater than or equal to 0",
        'status.conditions[0].status: Unsupported value: "Maybe": supported values: "False", "True", "Unknown"',
        'status.conditions[1].type: Duplicate value: "DisruptionAllowed"',
        "status.conditions[1].reason: Required value",
    ]


def test_create_starts_with_a_fresh_status_and_updates_keep_it() -> None:
    strategy = PodDisruptionBudgetStrategy()
    obj: dict[str, Any] = {"spec": {"minAvailable": 1}, "status": {"disruptionsAllowed": 5}}
    strategy.prepare_for_create(obj)
    assert obj["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    new: dict[str, Any] = {"spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 9}}
    strategy.prepare_for_update(new, {"spec": {"minAvailable": 1}, "status": {"disruptionsAllowed": 1}})
    assert new["status"] == {"disruptionsAllowed": 1}
