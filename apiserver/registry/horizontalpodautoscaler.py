"""HorizontalPodAutoscalers (upstream: pkg/apis/autoscaling/v2/defaults.go, pkg/apis/autoscaling/validation,
pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go).

Defaults: minReplicas 1; no metrics → CPU at 80% utilization; a given `behavior` has its missing rules
and fields filled with upstream's (scale up: no stabilization, Max of 4 pods or 100% per 15 s; scale
down: 300 s stabilization, 100% per 15 s). The status is written through /status only.
"""

from __future__ import annotations

import copy
from typing import Any

from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
    validate_nonnegative,
    validate_quantity,
)
from machinery.api.autoscaling_v2 import (
    AVERAGE_VALUE,
    CONTAINER_RESOURCE,
    DEFAULT_CPU_UTILIZATION,
    EXTERNAL,
    METRIC_SOURCE_TYPES,
    OBJECT,
    PODS,
    RESOURCE,
    UTILIZATION,
    VALUE,
)
from machinery.types import Obj

MAX_STABILIZATION_WINDOW_SECONDS = 3600
MAX_PERIOD_SECONDS = 1800
SELECT_POLICIES = ["Disabled", "Max", "Min"]
POLICY_TYPES = ["Percent", "Pods"]
SCALE_UP_DEFAULT: Obj = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                         "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                      {"type": "Percent", "value": 100, "periodSeconds": 15}]}
SCALE_DOWN_DEFAULT: Obj = {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
                           "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
_SOURCE_FIELDS = {OBJECT: "object", PODS: "pods", RESOURCE: "resource", CONTAINER_RESOURCE: "containerResource",
                  EXTERNAL: "external"}


def _rules(given: Obj | None, default: Obj) -> Obj:
    """GenerateHPAScaleUpRules / GenerateHPAScaleDownRules: the defaults under what was given."""
    if given is None:
        return copy.deepcopy(default)
    out = dict(given)
    for key in ("stabilizationWindowSeconds", "selectPolicy", "policies"):
        if out.get(key) is None:
            out[key] = copy.deepcopy(default[key])
    return out


def default_hpa_spec(spec: Obj) -> None:
    """SetDefaults_HorizontalPodAutoscaler (v2)."""
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": RESOURCE, "resource": {"name": "cpu", "target": {
            "type": UTILIZATION, "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]
    behavior = spec.get("behavior")
    if behavior is not None:
        behavior["scaleUp"] = _rules(behavior.get("scaleUp"), SCALE_UP_DEFAULT)
        behavior["scaleDown"] = _rules(behavior.get("scaleDown"), SCALE_DOWN_DEFAULT)


def _positive_quantity(value: Any, path: str) -> list[FieldError]:
    parsed, errs = validate_quantity(value, path)
    if parsed is not None and parsed.value <= 0:
        errs.append(invalid(path, value, "must be positive"))
    return errs


def _validate_target(target: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = target.get("type") or ""
    if not kind:
        errs.append(required(f"{path}.type", "must specify a metric target type"))
    if kind not in (UTILIZATION, VALUE, AVERAGE_VALUE):
        errs.append(invalid(f"{path}.type", kind, "must be either Utilization, Value, or AverageValue"))
    if target.get("value") is not None:
        errs += _positive_quantity(target["value"], f"{path}.value")
    if target.get("averageValue") is not None:
        errs += _positive_quantity(target["averageValue"], f"{path}.averageValue")
    utilization = target.get("averageUtilization")
    if utilization is not None and utilization < 1:
        errs.append(invalid(f"{path}.averageUtilization", utilization, "must be greater than 0"))
    return errs


def _validate_resource_source(src: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not src.get("name"):
        errs.append(required(f"{path}.name", "must specify a resource name"))
    target = src.get("target") or {}
    errs += _validate_target(target, f"{path}.target")
    if target.get("averageUtilization") is None and target.get("averageValue") is None:
        errs.append(required(f"{path}.target.averageUtilization",
                             "must set either a target raw value or a target utilization"))
    if target.get("averageUtilization") is not None and target.get("averageValue") is not None:
        errs.append(forbidden(f"{path}.target.averageValue",
                              "may not set both a target raw value and a target utilization"))
    return errs


def _validate_metric_source(kind: str, src: Obj, path: str) -> list[FieldError]:
    if kind in (RESOURCE, CONTAINER_RESOURCE):
        errs = _validate_resource_source(src, path)
        if kind == CONTAINER_RESOURCE and not src.get("container"):
            errs.append(required(f"{path}.container", "must specify a container"))
        return errs
    errs = []
    metric = src.get("metric") or {}
    if not metric.get("name"):
        errs.append(required(f"{path}.metric.name", "must specify a metric name"))
    errs += _validate_target(src.get("target") or {}, f"{path}.target")
    return errs


def validate_metric_spec(spec: Obj, path: str) -> list[FieldError]:
    """validateMetricSpec: a known type, its source given, and no other."""
    errs: list[FieldError] = []
    kind = spec.get("type") or ""
    if not kind:
        errs.append(required(f"{path}.type", "must specify a metric source type"))
    if kind not in METRIC_SOURCE_TYPES:
        errs.append(not_supported(f"{path}.type", kind, list(METRIC_SOURCE_TYPES)))
    present = [(k, f) for k, f in _SOURCE_FIELDS.items() if spec.get(f) is not None]
    if len(present) == 1:
        errs += _validate_metric_source(present[0][0], spec[present[0][1]], f"{path}.{present[0][1]}")
    expected = _SOURCE_FIELDS.get(kind, kind.lower())
    if kind and spec.get(expected) is None:
        errs.append(required(f"{path}.{expected}", "must populate information for the given metric source"))
    if len(present) > 1:
        for _, f in sorted(present, key=lambda p: p[1]):
            if f != expected:
                errs.append(forbidden(f"{path}.{f}", "must populate the given metric source only"))
    return errs


def _validate_rules(rules: Obj | None, path: str) -> list[FieldError]:
    if rules is None:
        return []
    errs: list[FieldError] = []
    window = rules.get("stabilizationWindowSeconds")
    if window is not None and window < 0:
        errs.append(invalid(f"{path}.stabilizationWindowSeconds", window, "must be greater than or equal to zero"))
    if window is not None and window > MAX_STABILIZATION_WINDOW_SECONDS:
        errs.append(invalid(f"{path}.stabilizationWindowSeconds", window,
                            f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"))
    select = rules.get("selectPolicy")
    if select is not None and select not in SELECT_POLICIES:
        errs.append(not_supported(f"{path}.selectPolicy", select, SELECT_POLICIES))
    policies = rules.get("policies") or []
    if not policies:
        errs.append(required(f"{path}.policies", "must specify at least one Policy"))
    for i, policy in enumerate(policies):
        ppath = f"{path}.policies[{i}]"
        if policy.get("type") not in POLICY_TYPES:
            errs.append(not_supported(f"{ppath}.type", policy.get("type") or "", POLICY_TYPES))
        if policy.get("value", 0) <= 0:
            errs.append(invalid(f"{ppath}.value", policy.get("value", 0), "must be greater than zero"))
        period = policy.get("periodSeconds", 0)
        if period <= 0:
            errs.append(invalid(f"{ppath}.periodSeconds", period, "must be greater than zero"))
        elif period > MAX_PERIOD_SECONDS:
            errs.append(invalid(f"{ppath}.periodSeconds", period,
                                f"must be less than or equal to {MAX_PERIOD_SECONDS}"))
    return errs


def validate_hpa_spec(spec: Obj, path: str = "spec") -> list[FieldError]:
    """validateHorizontalPodAutoscalerSpec (minReplicas at least 1: HPAScaleToZero is off)."""
    errs: list[FieldError] = []
    min_replicas, max_replicas = spec.get("minReplicas"), spec.get("maxReplicas", 0)
    if min_replicas is not None and min_replicas < 1:
        errs.append(invalid(f"{path}.minReplicas", min_replicas, "must be greater than or equal to 1"))
    if max_replicas < 1:
        errs.append(invalid(f"{path}.maxReplicas", max_replicas, "must be greater than 0"))
    if min_replicas is not None and max_replicas < min_replicas:
        errs.append(invalid(f"{path}.maxReplicas", max_replicas, "must be greater than or equal to `minReplicas`"))
    ref = spec.get("scaleTargetRef") or {}
    if not ref.get("kind"):
        errs.append(required(f"{path}.scaleTargetRef.kind"))
    elif "/" in ref["kind"] or ref["kind"] in (".", ".."):
        errs.append(invalid(f"{path}.scaleTargetRef.kind", ref["kind"], "may not contain '/'"))
    if not ref.get("name"):
        errs.append(required(f"{path}.scaleTargetRef.name"))
    elif "/" in ref["name"] or ref["name"] in (".", ".."):
        errs.append(invalid(f"{path}.scaleTargetRef.name", ref["name"], "may not contain '/'"))
    for i, metric in enumerate(spec.get("metrics") or []):
        errs += validate_metric_spec(metric, f"{path}.metrics[{i}]")
    behavior = spec.get("behavior")
    if behavior is not None:
        errs += _validate_rules(behavior.get("scaleUp"), f"{path}.behavior.scaleUp")
        errs += _validate_rules(behavior.get("scaleDown"), f"{path}.behavior.scaleDown")
    return errs


class HorizontalPodAutoscalerStrategy(Strategy):
    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        default_hpa_spec(obj.setdefault("spec", {}))
        obj.pop("status", None)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_hpa_spec(obj.get("spec") or {})

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        default_hpa_spec(new.setdefault("spec", {}))
        super().prepare_for_update(new, old)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        status = new.get("status") or {}
        return (validate_nonnegative(status.get("currentReplicas"), "status.currentReplicas")
                + validate_nonnegative(status.get("desiredReplicas"), "status.desiredReplicas"))
