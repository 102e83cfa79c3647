"""StatefulSets (upstream: pkg/apis/apps/v1/defaults.go SetDefaults_StatefulSet, pkg/apis/apps/validation
ValidateStatefulSet / ValidateStatefulSetUpdate / ValidateStatefulSetStatus, pkg/registry/apps/statefulset
strategy.go)."""

from __future__ import annotations

import copy
from typing import Any

from apiserver.registry.replicaset import default_template
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    StringMap,
    forbidden,
    int_or_percent_value,
    invalid,
    not_supported,
    required,
    semantic_equal,
    validate_annotations,
    validate_dns1123_label,
    validate_label_selector,
    validate_labels,
    validate_nonnegative,
    validate_nonnegative_int_or_percent,
    validate_not_more_than_100_percent,
    validate_replicas,
)
from machinery.selectors import SelectorError, selector_from_label_selector
from machinery.types import Obj

POD_MANAGEMENT_POLICIES = ("OrderedReady", "Parallel")
UPDATE_STRATEGY_TYPES = ("RollingUpdate", "OnDelete")
RETENTION_POLICY_TYPES = ["Retain", "Delete"]
# ValidateStatefulSetUpdate: the only spec fields an update may change
SPEC_FORBIDDEN = ("updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                  "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")
MUTABLE_SPEC_FIELDS = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
                       "minReadySeconds")


def default_stateful_set(obj: Obj) -> None:
    """SetDefaults_StatefulSet: OrderedReady, RollingUpdate with partition 0, one replica, ten revisions,
    claims retained on delete and on scale-down; each claim template gets the claim defaults."""
    spec = obj.setdefault("spec", {})
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = spec.get("updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if rolling is None:
            rolling = strategy["rollingUpdate"] = {}
        if rolling.get("partition") is None:
            rolling["partition"] = 0
    policy = spec.get("persistentVolumeClaimRetentionPolicy")
    if policy is None:
        policy = spec["persistentVolumeClaimRetentionPolicy"] = {}
    if not policy.get("whenDeleted"):
        policy["whenDeleted"] = "Retain"
    if not policy.get("whenScaled"):
        policy["whenScaled"] = "Retain"
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    for claim in spec.get("volumeClaimTemplates") or []:
        if isinstance(claim, dict):
            claim_spec = claim.setdefault("spec", {})
            if not claim_spec.get("volumeMode"):
                claim_spec["volumeMode"] = "Filesystem"
    default_template(spec)


def _validate_template(template: Obj | None, selector: Obj | None, path: str) -> list[FieldError]:
    """ValidatePodTemplateSpecForStatefulSet: the selector matches the template's labels; labels and
    annotations valid. Upstream leaves the pod spec to the pod's own validation (its volumes are only
    complete with the claims)."""
    if template is None:
        return [required(path)]
    meta = template.get("metadata") or {}
    labels: dict[str, Any] = meta.get("labels") or {}
    errs: list[FieldError] = []
    try:
        parsed = selector_from_label_selector(selector)
    except (SelectorError, ValueError):
        return [invalid(path.rsplit(".", 1)[0] + ".selector", selector, "")]
    if not parsed.empty and not parsed.matches(labels):
        errs.append(invalid(f"{path}.metadata.labels", StringMap(labels),
                            "`selector` does not match template `labels`"))
    errs += validate_labels(meta.get("labels"), f"{path}.labels")
    errs += validate_annotations(meta.get("annotations"), f"{path}.annotations")
    return errs


def _validate_retention_policy(policy: Obj | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if policy is None:
        return errs
    for key in ("whenDeleted", "whenScaled"):
        value = policy.get(key) or ""
        if value not in RETENTION_POLICY_TYPES:
            errs.append(not_supported(f"{path}.{key}", value, RETENTION_POLICY_TYPES))
    return errs


def validate_stateful_set_spec(spec: Obj, path: str) -> list[FieldError]:
    """ValidateStatefulSetSpec, with upstream's messages."""
    errs: list[FieldError] = []
    policy = spec.get("podManagementPolicy") or ""
    if policy == "":
        errs.append(required(f"{path}.podManagementPolicy"))
    elif policy not in POD_MANAGEMENT_POLICIES:
        errs.append(invalid(f"{path}.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    strategy = spec.get("updateStrategy") or {}
    kind = strategy.get("type") or ""
    rolling = strategy.get("rollingUpdate")
    if kind == "":
        errs.append(required(f"{path}.updateStrategy"))
    elif kind == "OnDelete":
        if rolling is not None:
            errs.append(invalid(f"{path}.updateStrategy.rollingUpdate", rolling,
                                "only allowed for updateStrategy 'RollingUpdate'"))
    elif kind == "RollingUpdate":
        if rolling is not None:
            rpath = f"{path}.updateStrategy.rollingUpdate"
            errs += validate_nonnegative(rolling.get("partition"), f"{rpath}.partition")
            max_unavailable = rolling.get("maxUnavailable")
            if max_unavailable is not None:
                errs += validate_nonnegative_int_or_percent(max_unavailable, f"{rpath}.maxUnavailable")
                if int_or_percent_value(max_unavailable) == 0:
                    errs.append(invalid(f"{rpath}.maxUnavailable", max_unavailable, "cannot be 0"))
                errs += validate_not_more_than_100_percent(max_unavailable, f"{rpath}.maxUnavailable")
    else:
        errs.append(invalid(f"{path}.updateStrategy", strategy, "must be 'RollingUpdate' or 'OnDelete'"))
    errs += _validate_retention_policy(spec.get("persistentVolumeClaimRetentionPolicy"),
                                       f"{path}.persistentVolumeClaimRetentionPolicy")
    errs += validate_replicas(spec.get("replicas"), f"{path}.replicas")
    errs += validate_nonnegative(spec.get("minReadySeconds"), f"{path}.minReadySeconds")
    ordinals = spec.get("ordinals")
    if ordinals is not None:
        errs += validate_nonnegative(ordinals.get("start"), f"{path}.ordinals.start")
    service_name = spec.get("serviceName") or ""
    if service_name:
        errs += [invalid(f"{path}.serviceName", service_name, e.detail)
                 for e in validate_dns1123_label(service_name, f"{path}.serviceName")]
    selector = spec.get("selector")
    if selector is None:
        errs.append(required(f"{path}.selector"))
    else:
        errs += validate_label_selector(selector, f"{path}.selector")
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            errs.append(invalid(f"{path}.selector", selector, "empty selector is not valid for statefulset."))
    template = spec.get("template")
    errs += _validate_template(template, selector, f"{path}.template")
    template_spec = (template or {}).get("spec") or {}
    if template_spec.get("restartPolicy") != "Always":
        errs.append(not_supported(f"{path}.template.spec.restartPolicy", template_spec.get("restartPolicy") or "",
                                  ["Always"]))
    if template_spec.get("activeDeadlineSeconds") is not None:
        errs.append(invalid(f"{path}.template.spec.activeDeadlineSeconds", template_spec["activeDeadlineSeconds"],
                            "must not be specified"))
    for i, claim in enumerate(spec.get("volumeClaimTemplates") or []):
        if not ((claim or {}).get("metadata") or {}).get("name"):
            errs.append(required(f"{path}.volumeClaimTemplates[{i}].metadata.name", "name or generateName is required"))
    return errs


def validate_stateful_set_status(status: Obj, path: str) -> list[FieldError]:
    """ValidateStatefulSetStatus."""
    errs: list[FieldError] = []
    for key in ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas",
                "observedGeneration", "collisionCount"):
        errs += validate_nonnegative(status.get(key), f"{path}.{key}")
    replicas = status.get("replicas") or 0
    for key in ("readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"):
        if (status.get(key) or 0) > replicas:
            errs.append(invalid(f"{path}.{key}", status.get(key), "cannot be greater than status.replicas"))
    if (status.get("availableReplicas") or 0) > (status.get("readyReplicas") or 0):
        errs.append(invalid(f"{path}.availableReplicas", status.get("availableReplicas"),
                            "cannot be greater than status.readyReplicas"))
    return errs


class StatefulSetStrategy(Strategy):
    """StatefulSets: defaults as apps/v1; an update may change only replicas, ordinals, template,
    updateStrategy, the claim retention policy and minReadySeconds; /status counts checked."""

    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        default_stateful_set(obj)
        obj["status"] = {"replicas": 0, "availableReplicas": 0}

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_stateful_set_spec(obj.get("spec") or {}, "spec")

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        default_stateful_set(new)
        super().prepare_for_update(new, old)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        spec, old_spec = copy.deepcopy(new.get("spec") or {}), old.get("spec") or {}
        for key in MUTABLE_SPEC_FIELDS:
            spec.pop(key, None)
        rest = {k: v for k, v in old_spec.items() if k not in MUTABLE_SPEC_FIELDS}
        errs: list[FieldError] = []
        if not semantic_equal(spec, rest):
            errs.append(forbidden("spec", SPEC_FORBIDDEN))
        status, old_status = new.get("status") or {}, old.get("status") or {}
        if not semantic_equal(status, old_status):
            errs += validate_stateful_set_status(status, "status")
            if (status.get("collisionCount") or 0) < (old_status.get("collisionCount") or 0):
                errs.append(invalid("status.collisionCount", status.get("collisionCount") or 0,
                                    "cannot be decremented"))
        return errs
