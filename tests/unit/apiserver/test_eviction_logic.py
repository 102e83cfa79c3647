"""The eviction subresource's pure rules (apiserver/registry/eviction.py), as upstream's eviction_test.go:
which pods skip the budget, which budgets cover a pod, the DisruptionAllowed condition and the 429."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.registry.eviction import (
    TOO_MANY_REQUESTS,
    can_ignore_pdb,
    pdbs_for_pod,
    set_status_condition,
    should_enforce_resource_version,
    too_many_requests,
    update_disruption_allowed_condition,
)


def pod(phase: str = "Running", deleting: bool = False, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "labels": labels or {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


@pytest.mark.parametrize(("phase", "deleting", "ignore", "enforce"), [
    ("Running", False, False, True), ("Pending", False, True, True), ("Succeeded", False, True, False),
    ("Failed", False, True, False), ("Running", True, True, True), ("Unknown", False, False, True)])
def test_which_pods_skip_the_budget(phase: str, deleting: bool, ignore: bool, enforce: bool) -> None:
    assert can_ignore_pdb(pod(phase, deleting)) is ignore
    assert should_enforce_resource_version(pod(phase, deleting)) is enforce


def test_budgets_covering_a_pod() -> None:
    def pdb(name: str, selector: Any) -> dict[str, Any]:
        spec = {} if selector == "unset" else {"selector": selector}
        return {"metadata": {"name": name}, "spec": spec}

    pdbs = [pdb("web", {"matchLabels": {"app": "web"}}), pdb("db", {"matchLabels": {"app": "db"}}),
            pdb("all", {}), pdb("none", "unset"),
            pdb("expr", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "x"]}]}),
            pdb("broken", {"matchExpressions": [{"key": "app", "operator": "Near"}]})]
    assert [p["metadata"]["name"] for p in pdbs_for_pod(pdbs, pod())] == ["web", "all", "expr"]


def test_condition_follows_allowed_and_keeps_its_transition_time() -> None:
    status: dict[str, Any] = {"disruptionsAllowed": 1}
    update_disruption_allowed_condition(status, 3)
    first = status["conditions"][0]
    assert (first["status"], first["reason"], first["observedGeneration"]) == ("True", "SufficientPods", 3)
    stamp = first["lastTransitionTime"]
    status["disruptionsAllowed"] = 0
    update_disruption_allowed_condition(status, 3)
    assert (status["conditions"][0]["status"], status["conditions"][0]["reason"]) == ("False", "InsufficientPods")
    conditions = [{"type": "A", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "t0"}]
    assert set_status_condition(conditions, {"type": "A", "status": "True", "reason": "S", "message": ""}, "t1")
    assert conditions[0]["lastTransitionTime"] == "t0" and conditions[0]["reason"] == "S"
    assert not set_status_condition(conditions, {"type": "A", "status": "True", "reason": "S", "message": ""}, "t2")
    assert stamp


def test_429_carries_the_disruption_budget_cause() -> None:
    error = too_many_requests("The disruption budget web needs 2 healthy pods and has 2 currently", 0)
    status = error.status()
    assert (status["code"], status["reason"], status["message"]) == (429, "TooManyRequests", TOO_MANY_REQUESTS)
    assert TOO_MANY_REQUESTS == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"] == {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget web "
                                             "needs 2 healthy pods and has 2 currently"}]}
    assert too_many_requests("x", 10).status()["details"]["retryAfterSeconds"] == 10


def test_a_webhook_reviews_an_eviction_as_one() -> None:
    from apiserver.admission.chain import admission_review
    from apiserver.admission.interfaces import AdmissionAttributes
    from machinery.api.resources import resource_for

    class Store:
        info = resource_for("", "pods")

    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "ns"}}
    attrs = AdmissionAttributes("CREATE", Store(), "ns", "p", "eviction", eviction, pod(), "someone", False)
    request = admission_review(attrs, "uid-1")["request"]
    assert request["kind"] == request["requestKind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert (request["subResource"], request["operation"], request["object"]) == ("eviction", "CREATE", eviction)
