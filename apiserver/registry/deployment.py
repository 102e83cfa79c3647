"""Deployments (upstream: pkg/apis/apps/v1/defaults.go, pkg/apis/apps/validation, pkg/registry/apps/deployment)."""

from __future__ import annotations

from apiserver.registry.replicaset import default_template, validate_replica_status, validate_selector_and_template
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    forbidden,
    int_or_percent_value,
    invalid,
    not_supported,
    required,
    semantic_equal,
    validate_immutable,
    validate_nonnegative,
    validate_nonnegative_int_or_percent,
    validate_not_more_than_100_percent,
    validate_replicas,
)
from machinery.types import Obj

STRATEGY_TYPES = ["Recreate", "RollingUpdate"]


def default_deployment(obj: Obj) -> None:
    """SetDefaults_Deployment: 1 replica, RollingUpdate 25%/25%, 10 old ReplicaSets kept, 600s to progress."""
    spec = obj.setdefault("spec", {})
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    strategy = spec.setdefault("strategy", {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if rolling is None:
            rolling = strategy["rollingUpdate"] = {}
        if rolling.get("maxUnavailable") is None:
            rolling["maxUnavailable"] = "25%"
        if rolling.get("maxSurge") is None:
            rolling["maxSurge"] = "25%"
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    if spec.get("progressDeadlineSeconds") is None:
        spec["progressDeadlineSeconds"] = 600
    default_template(spec)


def validate_strategy(strategy: Obj, path: str) -> list[FieldError]:
    """Recreate has no rollingUpdate; RollingUpdate's surge/unavailability are counts or percents, not
    both zero, and at most 100% unavailable."""
    kind = strategy.get("type") or ""
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            return [forbidden(f"{path}.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if kind != "RollingUpdate":
        return [not_supported(path, kind, STRATEGY_TYPES)]
    if rolling is None:
        return [required(f"{path}.rollingUpdate", "this should be defaulted and never be nil")]
    rpath = f"{path}.rollingUpdate"
    max_unavailable, max_surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errs = validate_nonnegative_int_or_percent(max_unavailable, f"{rpath}.maxUnavailable")
    errs += validate_nonnegative_int_or_percent(max_surge, f"{rpath}.maxSurge")
    if int_or_percent_value(max_unavailable) == 0 and int_or_percent_value(max_surge) == 0:
        errs.append(invalid(f"{rpath}.maxUnavailable", max_unavailable, "may not be 0 when `maxSurge` is 0"))
    errs += validate_not_more_than_100_percent(max_unavailable, f"{rpath}.maxUnavailable")
    return errs


class DeploymentStrategy(Strategy):
    """Deployments: defaulted rollout parameters; selector must match the template and never changes."""

    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        default_deployment(obj)
        obj["status"] = {}

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = validate_replicas(spec.get("replicas"), "spec.replicas")
        errs += validate_selector_and_template(spec, "spec")
        errs += validate_strategy(spec.get("strategy") or {}, "spec.strategy")
        min_ready = spec.get("minReadySeconds") or 0
        errs += validate_nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds")
        errs += validate_nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit")
        deadline = spec.get("progressDeadlineSeconds")
        if deadline is not None:
            errs += validate_nonnegative(deadline, "spec.progressDeadlineSeconds")
            if deadline <= min_ready:
                errs.append(invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
        return errs

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        default_deployment(new)
        super().prepare_for_update(new, old)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """The selector is immutable in apps/v1; a /status write is checked for sane counts."""
        errs = validate_immutable((new.get("spec") or {}).get("selector"), (old.get("spec") or {}).get("selector"),
                                  "spec.selector")
        status, old_status = new.get("status") or {}, old.get("status") or {}
        if not semantic_equal(status, old_status):
            errs += validate_replica_status(status, "status", ("updatedReplicas", "readyReplicas", "availableReplicas",
                                                               "unavailableReplicas"))
            if (status.get("collisionCount") or 0) < (old_status.get("collisionCount") or 0):
                errs.append(invalid("status.collisionCount", status.get("collisionCount") or 0,
                                    "cannot be decremented"))
        return errs
