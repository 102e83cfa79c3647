"""PersistentVolumes (upstream: pkg/apis/core/v1/defaults.go SetDefaults_PersistentVolume,
pkg/apis/core/validation ValidatePersistentVolume(Spec|Update|StatusUpdate),
pkg/registry/core/persistentvolume/strategy.go).

minik8s serves the hostPath and local sources; a volume is Pending until the binder makes it
Available, and the status strategy stamps lastPhaseTransitionTime whenever the phase changes.
"""

from __future__ import annotations

import posixpath
from typing import Any

from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
    semantic_equal,
    validate_dns1123_subdomain,
    validate_immutable,
    validate_quantity,
)
from machinery.timeutil import now_rfc3339
from machinery.types import Obj
from machinery.volumeutil import ACCESS_MODES, VOLUME_MODES

# Recycle (scrub and reuse) is deprecated upstream and not served here
RECLAIM_POLICIES = ("Delete", "Retain")
VOLUME_SOURCES = ("hostPath", "local")
NODE_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")


def validate_access_modes(modes: list[str] | None, field: str, required_detail: str) -> list[FieldError]:
    if not modes:
        return [required(field, required_detail)]
    errs = [not_supported(field, mode, list(ACCESS_MODES)) for mode in modes if mode not in ACCESS_MODES]
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        errs.append(forbidden(field, "may not use ReadWriteOncePod with other access modes"))
    return errs


def validate_class_name(name: str | None, field: str) -> list[FieldError]:
    """ValidateClassName: a StorageClass name is a DNS subdomain; "" means no class."""
    return validate_dns1123_subdomain(name, field) if name else []


def validate_volume_mode(mode: str | None, field: str) -> list[FieldError]:
    return [not_supported(field, mode, list(VOLUME_MODES))] if mode is not None and mode not in VOLUME_MODES else []


def _validate_path(path: Any, field: str, absolute: bool) -> list[FieldError]:
    if not path:
        return [required(field, "")]
    if absolute and not posixpath.isabs(path):
        return [invalid(field, path, "must be an absolute path")]
    if ".." in path.split("/"):
        return [invalid(field, path, "must not contain '..'")]
    return []


def validate_node_selector(selector: Obj | None, field: str) -> list[FieldError]:
    """ValidateNodeSelector as a volume's nodeAffinity.required uses it."""
    if selector is None:
        return [required(field, "must specify required node constraints")]
    terms = selector.get("nodeSelectorTerms") or []
    if not terms:
        return [required(f"{field}.nodeSelectorTerms", "must have at least one node selector term")]
    errs = []
    for i, term in enumerate(terms):
        for j, expr in enumerate(term.get("matchExpressions") or []):
            path = f"{field}.nodeSelectorTerms[{i}].matchExpressions[{j}]"
            op, values = expr.get("operator"), expr.get("values") or []
            if op not in NODE_SELECTOR_OPERATORS:
                errs.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
            elif op in ("In", "NotIn") and not values:
                errs.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
            elif op in ("Exists", "DoesNotExist") and values:
                errs.append(forbidden(f"{path}.values",
                                      "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    return errs


def validate_persistent_volume_spec(spec: Obj) -> list[FieldError]:
    errs = validate_access_modes(spec.get("accessModes"), "spec.accessModes", "")
    capacity = spec.get("capacity") or {}
    if not capacity:
        errs.append(required("spec.capacity", ""))
    elif "storage" not in capacity or len(capacity) > 1:
        errs.append(not_supported("spec.capacity", capacity, ["storage"]))
    for key, value in capacity.items():
        quantity, qerrs = validate_quantity(value, f"spec.capacity[{key}]")
        errs += qerrs
        if quantity is not None and quantity.milli_value() < 0:
            errs.append(invalid(f"spec.capacity[{key}]", value, "must be greater than or equal to 0"))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy and policy not in RECLAIM_POLICIES:
        errs.append(not_supported("spec.persistentVolumeReclaimPolicy", policy, list(RECLAIM_POLICIES)))
    errs += validate_class_name(spec.get("storageClassName"), "spec.storageClassName")
    errs += validate_volume_mode(spec.get("volumeMode"), "spec.volumeMode")
    sources = [s for s in VOLUME_SOURCES if spec.get(s) is not None]
    if not sources:
        errs.append(required("spec", "must specify a volume type"))
    for extra in sources[1:]:
        errs.append(forbidden(f"spec.{extra}", "may not specify more than 1 volume type"))
    if spec.get("hostPath") is not None:
        errs += _validate_path(spec["hostPath"].get("path"), "spec.hostPath.path", absolute=False)
    if spec.get("local") is not None:
        errs += _validate_path(spec["local"].get("path"), "spec.local.path", absolute=True)
        if not (spec.get("nodeAffinity") or {}).get("required"):
            errs.append(required("spec.nodeAffinity", "Local volume requires node affinity"))
    if spec.get("nodeAffinity") is not None:
        errs += validate_node_selector(spec["nodeAffinity"].get("required"), "spec.nodeAffinity.required")
    return errs


def _source(spec: Obj) -> Obj:
    return {s: spec.get(s) for s in VOLUME_SOURCES if spec.get(s) is not None}


def stamp_phase_transition(new: Obj, old: Obj | None) -> None:
    """A phase change (or a first phase) records when it happened (PersistentVolumeLastPhaseTransitionTime)."""
    status = new.get("status")
    if not isinstance(status, dict):
        return
    old_phase = ((old or {}).get("status") or {}).get("phase")
    if status.get("phase") != old_phase:
        status["lastPhaseTransitionTime"] = now_rfc3339()


class PersistentVolumeStrategy(Strategy):
    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}
        stamp_phase_transition(obj, None)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_persistent_volume_spec(obj.get("spec") or {})

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_update(new, old)
        spec = new.setdefault("spec", {})
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        errs = []
        if not semantic_equal(_source(spec), _source(old_spec)):
            errs.append(forbidden("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after "
                                                                 "creation"))
        errs += validate_immutable(spec.get("volumeMode"), old_spec.get("volumeMode"), "volumeMode")
        if old_spec.get("nodeAffinity"):
            errs += validate_immutable(spec.get("nodeAffinity"), old_spec.get("nodeAffinity"), "nodeAffinity")
        return errs

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_status_update(new, old)
        stamp_phase_transition(new, old)

    def field_values(self, obj: Obj) -> dict[str, str]:
        return {**super().field_values(obj), "status.phase": (obj.get("status") or {}).get("phase") or ""}
