"""Leases (upstream: pkg/apis/coordination/validation): leader election and node heartbeats."""

from __future__ import annotations

from apiserver.registry.strategy import Strategy
from apiserver.validation import FieldError, forbidden, invalid, not_supported, validate_qualified_name
from machinery.types import Obj

# upstream coordination.CoordinatedLeaseStrategy values that need no domain prefix
LEASE_STRATEGIES = ["OldestEmulationVersion"]


class LeaseStrategy(Strategy):
    """Leases: a positive duration, a non-negative transition count; no defaults, no status."""

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs: list[FieldError] = []
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and duration <= 0:
            errs.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
        transitions = spec.get("leaseTransitions")
        if transitions is not None and transitions < 0:
            errs.append(invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))
        strategy = spec.get("strategy")
        if strategy:
            if "/" not in strategy:
                if strategy not in LEASE_STRATEGIES:
                    errs.append(not_supported("spec.strategy", strategy, LEASE_STRATEGIES))
            else:
                errs += validate_qualified_name(strategy, "spec.strategy")
        if spec.get("preferredHolder") and not strategy:
            errs.append(forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"))
        return errs
