"""PriorityClasses (upstream pkg/apis/scheduling/v1/defaults.go SetDefaults_PriorityClass,
pkg/apis/scheduling/validation ValidatePriorityClass / ValidatePriorityClassUpdate,
pkg/apis/scheduling/v1/helpers.go IsKnownSystemPriorityClass)."""

from __future__ import annotations

from apiserver.registry.strategy import Strategy
from apiserver.validation import FieldError, forbidden, not_supported, validate_immutable
from machinery.api.scheduling_v1 import (
    HIGHEST_USER_DEFINABLE_PRIORITY,
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    SYSTEM_PRIORITY_CLASS_PREFIX,
    SYSTEM_PRIORITY_CLASSES,
)
from machinery.types import Obj


def known_system_class_error(name: str, value: int, global_default: bool) -> str | None:
    """IsKnownSystemPriorityClass: None when (name, value, globalDefault) is one of the system classes."""
    if name not in SYSTEM_PRIORITY_CLASSES:
        return f"{name} is not a known system priority class"
    wanted = SYSTEM_PRIORITY_CLASSES[name][0]
    if value != wanted:
        return f"value of {name} PriorityClass must be {wanted}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return None


class PriorityClassStrategy(Strategy):
    def prepare_for_create(self, obj: Obj) -> None:
        if obj.get("preemptionPolicy") is None:
            obj["preemptionPolicy"] = PREEMPT_LOWER_PRIORITY

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        self.prepare_for_create(new)

    def validate(self, obj: Obj) -> list[FieldError]:
        errs: list[FieldError] = []
        name = (obj.get("metadata") or {}).get("name") or ""
        value = obj.get("value", 0)
        if name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
            why = known_system_class_error(name, value, bool(obj.get("globalDefault")))
            if why is not None:
                errs.append(forbidden("metadata.name", f"priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' "
                                                       f"prefix are reserved for system use only. error: {why}"))
        elif value > HIGHEST_USER_DEFINABLE_PRIORITY:
            errs.append(forbidden("value", f"maximum allowed value of a user defined priority is "
                                           f"{HIGHEST_USER_DEFINABLE_PRIORITY}"))
        policy = obj.get("preemptionPolicy")
        if policy is not None and policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
            errs.append(not_supported("preemptionPolicy", policy, [PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER]))
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = []
        if new.get("value") != old.get("value"):
            errs.append(forbidden("value", "may not be changed in an update."))
        errs += validate_immutable(new.get("preemptionPolicy"), old.get("preemptionPolicy"), "preemptionPolicy")
        return errs
