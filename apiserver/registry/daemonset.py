"""DaemonSets and ControllerRevisions (upstream: pkg/apis/apps/v1/defaults.go SetDefaults_DaemonSet,
pkg/apis/apps/validation ValidateDaemonSet / ValidateControllerRevision, pkg/registry/apps/daemonset and
pkg/registry/apps/controllerrevision)."""

from __future__ import annotations

from typing import Any

from apiserver.registry.pod import validate_pod_template_spec
from apiserver.registry.replicaset import default_template
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    StringMap,
    int_or_percent_value,
    invalid,
    not_supported,
    required,
    semantic_equal,
    validate_immutable,
    validate_label_selector,
    validate_nonnegative,
    validate_nonnegative_int_or_percent,
    validate_not_more_than_100_percent,
)
from machinery.selectors import SelectorError, selector_from_label_selector
from machinery.types import Obj

UPDATE_STRATEGY_TYPES = ["RollingUpdate", "OnDelete"]
# apps/v1 keeps the internal spec.templateGeneration in this annotation (pkg/apis/apps/v1/conversion.go);
# the controller labels pods with it as pod-template-generation
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"


def default_daemon_set(obj: Obj) -> None:
    """SetDefaults_DaemonSet: RollingUpdate with maxUnavailable 1 and maxSurge 0, 10 revisions kept."""
    spec = obj.setdefault("spec", {})
    strategy = spec.get("updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if rolling is None:
            rolling = strategy["rollingUpdate"] = {}
        if rolling.get("maxUnavailable") is None:
            rolling["maxUnavailable"] = 1
        if rolling.get("maxSurge") is None:
            rolling["maxSurge"] = 0
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    default_template(spec)


def validate_rolling_update(rolling: Obj, path: str) -> list[FieldError]:
    """ValidateRollingUpdateDaemonSet: counts or percents up to 100%, exactly one of them non-zero."""
    max_unavailable, max_surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errs = validate_nonnegative_int_or_percent(max_unavailable, f"{path}.maxUnavailable")
    errs += validate_not_more_than_100_percent(max_unavailable, f"{path}.maxUnavailable")
    errs += validate_nonnegative_int_or_percent(max_surge, f"{path}.maxSurge")
    errs += validate_not_more_than_100_percent(max_surge, f"{path}.maxSurge")
    has_unavailable = int_or_percent_value(max_unavailable) != 0
    has_surge = int_or_percent_value(max_surge) != 0
    if has_unavailable and has_surge:
        errs.append(invalid(f"{path}.maxSurge", max_surge, "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        errs.append(required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return errs


def validate_update_strategy(strategy: Obj, path: str) -> list[FieldError]:
    kind = strategy.get("type") or ""
    if kind == "OnDelete":
        return []
    if kind != "RollingUpdate":
        return [not_supported(path, kind, UPDATE_STRATEGY_TYPES)]
    rolling = strategy.get("rollingUpdate")
    if rolling is None:
        return [required(f"{path}.rollingUpdate")]
    return validate_rolling_update(rolling, f"{path}.rollingUpdate")


def validate_daemon_set_spec(spec: Obj, path: str) -> list[FieldError]:
    """ValidateDaemonSetSpec: a non-empty selector matching the template's labels, a pod template that
    always restarts and has no deadline, sane history and update strategy."""
    errs: list[FieldError] = []
    selector = spec.get("selector")
    tpath = f"{path}.template"
    if selector is None:
        errs.append(required(f"{path}.selector"))
    else:
        errs += validate_label_selector(selector, f"{path}.selector")
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            errs.append(invalid(f"{path}.selector", selector, "empty selector is invalid for daemonset"))
    template = spec.get("template")
    if template is None:
        return [*errs, required(tpath)]
    labels: dict[str, Any] = (template.get("metadata") or {}).get("labels") or {}
    try:
        parsed = selector_from_label_selector(selector)
    except (SelectorError, ValueError):
        parsed = None
    if parsed is not None and not parsed.matches(labels):
        errs.append(invalid(f"{tpath}.metadata.labels", StringMap(labels),
                            "`selector` does not match template `labels`"))
    errs += validate_pod_template_spec(template, tpath)
    template_spec = template.get("spec") or {}
    if template_spec.get("restartPolicy") != "Always":
        errs.append(not_supported(f"{tpath}.spec.restartPolicy", template_spec.get("restartPolicy") or "", ["Always"]))
    if template_spec.get("activeDeadlineSeconds") is not None:
        errs.append(invalid(f"{tpath}.spec.activeDeadlineSeconds", template_spec["activeDeadlineSeconds"],
                            "activeDeadlineSeconds in DaemonSet is not Supported"))
    errs += validate_nonnegative(spec.get("minReadySeconds"), f"{path}.minReadySeconds")
    errs += validate_nonnegative(spec.get("revisionHistoryLimit"), f"{path}.revisionHistoryLimit")
    errs += validate_update_strategy(spec.get("updateStrategy") or {}, f"{path}.updateStrategy")
    return errs


_STATUS_COUNTS = ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady",
                  "observedGeneration", "updatedNumberScheduled", "numberAvailable", "numberUnavailable",
                  "collisionCount")


class DaemonSetStrategy(Strategy):
    """DaemonSets: defaulted update strategy; the selector never changes; a template change bumps the
    template generation (the annotation the controller labels pods with)."""

    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        default_daemon_set(obj)
        obj["status"] = {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                         "numberReady": 0}
        annotations = obj.setdefault("metadata", {}).get("annotations") or {}
        annotations[TEMPLATE_GENERATION_ANNOTATION] = "1"
        obj["metadata"]["annotations"] = annotations

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_daemon_set_spec(obj.get("spec") or {}, "spec")

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        default_daemon_set(new)
        super().prepare_for_update(new, old)
        old_generation = ((old.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_GENERATION_ANNOTATION)
        try:
            generation = int(old_generation or "1")
        except ValueError:
            generation = 1
        if not semantic_equal((new.get("spec") or {}).get("template"), (old.get("spec") or {}).get("template")):
            generation += 1
        annotations = new.setdefault("metadata", {}).get("annotations") or {}
        annotations[TEMPLATE_GENERATION_ANNOTATION] = str(generation)
        new["metadata"]["annotations"] = annotations

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """apps/v1 forbids moving a DaemonSet to other pods; a /status write is checked for sane counts."""
        errs = validate_immutable((new.get("spec") or {}).get("selector"), (old.get("spec") or {}).get("selector"),
                                  "spec.selector")
        status, old_status = new.get("status") or {}, old.get("status") or {}
        if not semantic_equal(status, old_status):
            for key in _STATUS_COUNTS:
                errs += validate_nonnegative(status.get(key), f"status.{key}")
        return errs


class ControllerRevisionStrategy(Strategy):
    """ControllerRevisions: a revision number >= 0 and data that never changes once written."""

    def validate(self, obj: Obj) -> list[FieldError]:
        revision = obj.get("revision")
        if not isinstance(revision, int):
            return [required("revision")]
        return validate_nonnegative(revision, "revision")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_immutable(new.get("data"), old.get("data"), "data")
