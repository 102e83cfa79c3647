"""PodDisruptionBudgets (upstream: pkg/apis/policy/validation/validation.go
ValidatePodDisruptionBudget and ValidatePodDisruptionBudgetStatusUpdate,
pkg/registry/policy/poddisruptionbudget/strategy.go): a budget is either minAvailable or
maxUnavailable, each a non-negative count or a percent up to 100%; its status is the disruption
controller's, written through /status."""

from __future__ import annotations

from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    invalid,
    not_supported,
    required,
    validate_label_selector,
    validate_nonnegative,
    validate_nonnegative_int_or_percent,
    validate_not_more_than_100_percent,
)
from machinery.api.policy_v1 import UNHEALTHY_POD_EVICTION_POLICIES
from machinery.types import Obj

_STATUS_COUNTS = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")
_CONDITION_STATUSES = ["False", "True", "Unknown"]


def validate_pdb_spec(spec: Obj, path: str = "spec") -> list[FieldError]:
    errs: list[FieldError] = []
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        errs.append(invalid(path, spec, "minAvailable and maxUnavailable cannot be both set"))
    for key, value in (("minAvailable", min_available), ("maxUnavailable", max_unavailable)):
        if value is not None:
            errs += validate_nonnegative_int_or_percent(value, f"{path}.{key}")
            errs += validate_not_more_than_100_percent(value, f"{path}.{key}")
    errs += validate_label_selector(spec.get("selector"), f"{path}.selector")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        errs.append(not_supported(f"{path}.unhealthyPodEvictionPolicy", policy, UNHEALTHY_POD_EVICTION_POLICIES))
    return errs


def validate_pdb_status(status: Obj, path: str = "status") -> list[FieldError]:
    """ValidatePodDisruptionBudgetStatusUpdate: counts non-negative, conditions well-formed
    (metav1 validation.ValidateConditions)."""
    errs: list[FieldError] = []
    for key in _STATUS_COUNTS:
        errs += validate_nonnegative(status.get(key), f"{path}.{key}")
    seen: set[str] = set()
    for i, c in enumerate(status.get("conditions") or []):
        cpath = f"{path}.conditions[{i}]"
        ctype = c.get("type") or ""
        if not ctype:
            errs.append(required(f"{cpath}.type"))
        elif ctype in seen:
            errs.append(FieldError("FieldValueDuplicate", f"{cpath}.type", "", ctype, True))
        seen.add(ctype)
        if c.get("status") not in _CONDITION_STATUSES:
            errs.append(not_supported(f"{cpath}.status", c.get("status"), _CONDITION_STATUSES))
        if not c.get("reason"):
            errs.append(required(f"{cpath}.reason"))
        if not c.get("lastTransitionTime"):
            errs.append(required(f"{cpath}.lastTransitionTime", "must be set"))
        errs += validate_nonnegative(c.get("observedGeneration"), f"{cpath}.observedGeneration")
    return errs


class PodDisruptionBudgetStrategy(Strategy):
    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        # a fresh status, as upstream's PrepareForCreate (the counts are never omitted)
        obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_pdb_spec(obj.get("spec") or {}) + validate_pdb_status(obj.get("status") or {})
