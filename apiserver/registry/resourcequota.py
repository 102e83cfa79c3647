"""ResourceQuotas and LimitRanges (upstream pkg/apis/core/validation ValidateResourceQuota,
ValidateLimitRange; pkg/registry/core/resourcequota/strategy.go: status is cleared on create and
written only through /status, by the quota admission plugin and the resource-quota controller)."""

from __future__ import annotations

from typing import Any

from apiserver.admission.limitranger import default_limit_range_item
from apiserver.registry.strategy import Strategy
from apiserver.validation import FieldError, forbidden, invalid, not_supported, required, validate_quantity
from machinery.quantity import Quantity
from machinery.quota import SCOPE_OPERATORS, SCOPES
from machinery.types import Obj
from machinery.validation import is_qualified_name

_BEST_EFFORT_RESOURCES = frozenset({"pods", "count/pods"})
_SCOPES_WITHOUT_VALUES = frozenset({"Terminating", "NotTerminating", "BestEffort", "NotBestEffort"})


def _resource_list(values: Any, path: str, errs: list[FieldError]) -> dict[str, Quantity]:
    """ValidateResourceQuantityValue over a ResourceList: qualified names, valid non-negative quantities."""
    out: dict[str, Quantity] = {}
    for name, raw in (values or {}).items():
        field = f"{path}[{name}]"
        errs += [invalid(field, name, m) for m in is_qualified_name(name)]
        q, q_errs = validate_quantity(raw, field)
        errs += q_errs
        if q is None:
            continue
        if q.value < 0:
            errs.append(invalid(field, str(q), "must be greater than or equal to 0"))
        out[name] = q
    return out


class ResourceQuotaStrategy(Strategy):
    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        obj.pop("status", None)  # the controller and admission fill it

    def validate(self, obj: Obj) -> list[FieldError]:
        errs: list[FieldError] = []
        spec = obj.get("spec") or {}
        hard = _resource_list(spec.get("hard"), "spec.hard", errs)
        scopes = list(spec.get("scopes") or [])
        for i, scope in enumerate(scopes):
            if scope not in SCOPES:
                errs.append(not_supported(f"spec.scopes[{i}]", scope, list(SCOPES)))
        expressions = ((spec.get("scopeSelector") or {}).get("matchExpressions")) or []
        for i, expr in enumerate(expressions):
            path = f"spec.scopeSelector.matchExpressions[{i}]"
            scope, operator, values = expr.get("scopeName"), expr.get("operator"), expr.get("values") or []
            if scope not in SCOPES:
                errs.append(not_supported(f"{path}.scopeName", scope, list(SCOPES)))
            if operator not in SCOPE_OPERATORS:
                errs.append(not_supported(f"{path}.operator", operator, list(SCOPE_OPERATORS)))
            elif operator in ("In", "NotIn") and not values:
                errs.append(required(f"{path}.values", "must be at least one value when `operator` is 'In' or "
                                                        "'NotIn' for scope selector"))
            elif operator in ("Exists", "DoesNotExist") and values:
                errs.append(invalid(f"{path}.values", values, "must be no value when `operator` is 'Exist' or "
                                                              "'DoesNotExist' for scope selector"))
            if scope in _SCOPES_WITHOUT_VALUES and operator not in ("Exists", "DoesNotExist"):
                errs.append(invalid(f"{path}.operator", operator, "must be 'Exist' when scope is any of "
                                    "ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, "
                                    "ResourceQuotaScopeBestEffort or ResourceQuotaScopeNotBestEffort"))
            scopes.append(scope)
        if ("Terminating" in scopes and "NotTerminating" in scopes) or ("BestEffort" in scopes
                                                                          and "NotBestEffort" in scopes):
            errs.append(invalid("spec.scopes", spec.get("scopes"), "conflicting scopes"))
        if "BestEffort" in scopes:
            for name in hard:
                if name not in _BEST_EFFORT_RESOURCES:
                    errs.append(invalid(f"spec.hard[{name}]", name, "unsupported scope applied to resource"))
        return errs

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_status_update(new, old)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs: list[FieldError] = []
        status = new.get("status") or {}
        _resource_list(status.get("hard"), "status.hard", errs)
        _resource_list(status.get("used"), "status.used", errs)
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if sorted(old_spec.get("scopes") or []) != sorted(new_spec.get("scopes") or []):
            errs.append(invalid("spec.scopes", new_spec.get("scopes"), "field is immutable"))
        return errs


LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")


class LimitRangeStrategy(Strategy):
    def prepare_for_create(self, obj: Obj) -> None:
        for item in ((obj.get("spec") or {}).get("limits")) or []:
            if isinstance(item, dict):
                default_limit_range_item(item)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        self.prepare_for_create(new)

    def validate(self, obj: Obj) -> list[FieldError]:
        """ValidateLimitRange: min ≤ defaultRequest ≤ default ≤ max per resource, ratios ≥ 1 and
        within max/min, no defaults on Pod limits, storage bounds on claims."""
        errs: list[FieldError] = []
        for i, item in enumerate(((obj.get("spec") or {}).get("limits")) or []):
            path = f"spec.limits[{i}]"
            kind = item.get("type") or ""
            if kind not in LIMIT_TYPES and "/" not in kind:
                errs.append(not_supported(f"{path}.type", kind, list(LIMIT_TYPES)))
            bounds = {key: _resource_list(item.get(key), f"{path}.{key}", errs)
                      for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")}
            mx, mn, default, request, ratio = (bounds[k] for k in ("max", "min", "default", "defaultRequest",
                                                                   "maxLimitRequestRatio"))
            if kind == "Pod":
                if item.get("default"):
                    errs.append(forbidden(f"{path}.default", "may not be specified when `type` is 'Pod'"))
                if item.get("defaultRequest"):
                    errs.append(forbidden(f"{path}.defaultRequest", "may not be specified when `type` is 'Pod'"))
            elif kind == "PersistentVolumeClaim" and "storage" not in mn and "storage" not in mx:
                errs.append(required(f"{path}.limits", "either minimum or maximum storage value is required, "
                                                       "but neither was provided"))
            for name in sorted({*mx, *mn, *default, *request}):
                lo, hi, d, r = mn.get(name), mx.get(name), default.get(name), request.get(name)
                if lo is not None and hi is not None and lo > hi:
                    errs.append(invalid(f"{path}.min[{name}]", str(lo), f"min value {lo} is greater than max value "
                                                                        f"{hi}"))
                if r is not None:
                    if lo is not None and lo > r:
                        errs.append(invalid(f"{path}.defaultRequest[{name}]", str(r),
                                            f"min value {lo} is greater than default request value {r}"))
                    if hi is not None and r > hi:
                        errs.append(invalid(f"{path}.defaultRequest[{name}]", str(r),
                                            f"default request value {r} is greater than max value {hi}"))
                    if d is not None and r > d:
                        errs.append(invalid(f"{path}.defaultRequest[{name}]", str(r),
                                            f"default request value {r} is greater than default limit value {d}"))
                if d is not None:
                    if lo is not None and lo > d:
                        errs.append(invalid(f"{path}.default[{name}]", str(d),
                                            f"min value {lo} is greater than default value {d}"))
                    if hi is not None and d > hi:
                        errs.append(invalid(f"{path}.default[{name}]", str(d),
                                            f"default value {d} is greater than max value {hi}"))
            for name, q in ratio.items():
                field = f"{path}.maxLimitRequestRatio[{name}]"
                if q.value < 1:
                    errs.append(invalid(field, str(q), f"ratio {q} is less than 1"))
                lo, hi = mn.get(name), mx.get(name)
                if lo is not None and hi is not None and not lo.is_zero() and q.value > hi.value / lo.value:
                    errs.append(invalid(field, str(q), f"ratio {q} is greater than max/min = "
                                                       f"{float(hi.value / lo.value):f}"))
        return errs
