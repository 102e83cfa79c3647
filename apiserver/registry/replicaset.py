"""ReplicaSets (upstream: pkg/apis/apps/v1/defaults.go, pkg/apis/apps/validation, pkg/registry/apps/replicaset),
and the selector-plus-template rules Deployments share with them.
"""

from __future__ import annotations

from typing import Any

from apiserver.registry.pod import default_pod_spec, validate_pod_template_spec
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    StringMap,
    forbidden,
    invalid,
    not_supported,
    required,
    semantic_equal,
    validate_immutable,
    validate_label_selector,
    validate_nonnegative,
    validate_replicas,
)
from machinery.selectors import SelectorError, selector_from_label_selector
from machinery.types import Obj


def default_template(spec: Obj) -> None:
    """A workload's pod template gets the pod-spec defaults (not the Pod-only ones such as
    enableServiceLinks)."""
    template = spec.get("template")
    if isinstance(template, dict):
        default_pod_spec(template.setdefault("spec", {}))


def validate_selector_and_template(spec: Obj, path: str) -> list[FieldError]:
    """Selector present, valid and non-empty; template labels matched by it; template a valid pod
    template that always restarts and has no deadline (ValidateReplicaSetSpec / ValidateDeploymentSpec;
    both say "deployment" and "ReplicaSet" in their messages, as upstream's shared code does)."""
    errs: list[FieldError] = []
    selector = spec.get("selector")
    if selector is None:
        errs.append(required(f"{path}.selector"))
    else:
        errs += validate_label_selector(selector, f"{path}.selector")
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            errs.append(invalid(f"{path}.selector", selector, "empty selector is invalid for deployment"))
    template = spec.get("template")
    tpath = f"{path}.template"
    try:
        parsed = selector_from_label_selector(selector)
    except (SelectorError, ValueError):
        return [*errs, invalid(f"{path}.selector", selector, "invalid label selector")]
    if template is None:
        return [*errs, required(tpath)]
    labels: dict[str, Any] = (template.get("metadata") or {}).get("labels") or {}
    if not parsed.empty and not parsed.matches(labels):
        errs.append(invalid(f"{tpath}.metadata.labels", StringMap(labels),
                            "`selector` does not match template `labels`"))
    errs += validate_pod_template_spec(template, tpath)
    template_spec = template.get("spec") or {}
    if template_spec.get("restartPolicy") != "Always":
        errs.append(not_supported(f"{tpath}.spec.restartPolicy", template_spec.get("restartPolicy") or "", ["Always"]))
    if template_spec.get("activeDeadlineSeconds") is not None:
        errs.append(forbidden(f"{tpath}.spec.activeDeadlineSeconds",
                              "activeDeadlineSeconds in ReplicaSet is not Supported"))
    return errs


def validate_replica_status(status: Obj, path: str, counts: tuple[str, ...]) -> list[FieldError]:
    """Counts non-negative and none above status.replicas; available never above ready."""
    errs: list[FieldError] = []
    for key in ("replicas", *counts, "observedGeneration", "collisionCount"):
        errs += validate_nonnegative(status.get(key), f"{path}.{key}")
    replicas = status.get("replicas") or 0
    for key in counts:
        if key != "unavailableReplicas" and (status.get(key) or 0) > replicas:
            errs.append(invalid(f"{path}.{key}", status.get(key), "cannot be greater than status.replicas"))
    if (status.get("availableReplicas") or 0) > (status.get("readyReplicas") or 0):
        errs.append(invalid(f"{path}.availableReplicas", status.get("availableReplicas"),
                            "cannot be greater than readyReplicas"))
    return errs


class ReplicaSetStrategy(Strategy):
    """ReplicaSets: replicas default to 1; the selector must match the template and never changes."""

    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        """Defaults, and a fresh status (replicas is not omitempty upstream, so it reads 0)."""
        self._default(obj)
        obj["status"] = {"replicas": 0}

    def _default(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        if spec.get("replicas") is None:
            spec["replicas"] = 1
        default_template(spec)

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = validate_replicas(spec.get("replicas"), "spec.replicas")
        errs += validate_nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds")
        errs += validate_selector_and_template(spec, "spec")
        return errs

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        self._default(new)
        super().prepare_for_update(new, old)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """apps/v1 forbids moving a ReplicaSet to other pods; a /status write is checked for sane counts."""
        errs = validate_immutable((new.get("spec") or {}).get("selector"), (old.get("spec") or {}).get("selector"),
                                  "spec.selector")
        if not semantic_equal(new.get("status"), old.get("status")):
            errs += validate_replica_status(new.get("status") or {}, "status",
                                            ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"))
        return errs

    def field_values(self, obj: Obj) -> dict[str, str]:
        values = super().field_values(obj)
        values["status.replicas"] = str((obj.get("status") or {}).get("replicas") or 0)
        return values
