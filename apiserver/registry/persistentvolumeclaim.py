"""PersistentVolumeClaims (upstream: SetDefaults_PersistentVolumeClaim, ValidatePersistentVolumeClaim,
ValidatePersistentVolumeClaimUpdate and ...StatusUpdate in pkg/apis/core/validation,
pkg/registry/core/persistentvolumeclaim/strategy.go).

A claim's spec is fixed at creation, except resources.requests (growing only; whether the class
allows it is the PersistentVolumeClaimResize admission's question), volumeName while unset (the
binder fills it) and storageClassName while nil (the binder gives it the default class later,
RetroactiveDefaultStorageClass).
"""

from __future__ import annotations

import copy

from apiserver.registry.persistentvolume import validate_access_modes, validate_class_name, validate_volume_mode
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    forbidden,
    invalid,
    required,
    semantic_equal,
    validate_label_selector,
    validate_quantity,
)
from machinery.types import Obj
from machinery.volumeutil import BETA_STORAGE_CLASS_ANNOTATION

SPEC_IMMUTABLE = "spec is immutable after creation except resources.requests and volumeAttributesClassName for " \
                 "bound claims"


def _storage_request(obj: Obj) -> object:
    return (((obj.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")


class PersistentVolumeClaimStrategy(Strategy):
    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = validate_access_modes(spec.get("accessModes"), "spec.accessModes", "at least 1 access mode is required")
        errs += validate_label_selector(spec.get("selector"), "spec.selector")
        storage = _storage_request(obj)
        if storage is None:
            errs.append(required("spec.resources[storage]", ""))
        else:
            quantity, qerrs = validate_quantity(storage, "spec.resources[storage]")
            errs += qerrs
            if quantity is not None and quantity.milli_value() <= 0:
                errs.append(invalid("spec.resources[storage]", storage, "must be greater than zero"))
        errs += validate_class_name(spec.get("storageClassName"), "spec.storageClassName")
        errs += validate_volume_mode(spec.get("volumeMode"), "spec.volumeMode")
        return errs

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_update(new, old)
        new.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        spec, old_spec = copy.deepcopy(new.get("spec") or {}), copy.deepcopy(old.get("spec") or {})
        if not old_spec.get("volumeName"):
            old_spec["volumeName"] = spec.get("volumeName")  # set once, by the binder or the user
        if old_spec.get("storageClassName") is None and spec.get("storageClassName") \
                and BETA_STORAGE_CLASS_ANNOTATION not in ((old.get("metadata") or {}).get("annotations") or {}):
            old_spec["storageClassName"] = spec["storageClassName"]  # a class given once (retroactive default)
        for s in (spec, old_spec):
            (s.get("resources") or {}).pop("requests", None)
        errs = []
        if not semantic_equal(spec, old_spec):
            errs.append(forbidden("spec", SPEC_IMMUTABLE))
        old_size, new_size = _storage_request(old), _storage_request(new)
        if old_size is not None and new_size is not None:
            old_q, _ = validate_quantity(old_size, "")
            new_q, _ = validate_quantity(new_size, "")
            if old_q is not None and new_q is not None and new_q < old_q:
                errs.append(forbidden("spec.resources.requests.storage", "field can not be less than previous value"))
        return errs

    def field_values(self, obj: Obj) -> dict[str, str]:
        return {**super().field_values(obj), "status.phase": (obj.get("status") or {}).get("phase") or ""}
