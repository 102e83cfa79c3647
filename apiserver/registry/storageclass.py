"""StorageClasses (upstream: pkg/apis/storage/v1/defaults.go SetDefaults_StorageClass,
pkg/apis/storage/validation ValidateStorageClass / ValidateStorageClassUpdate,
pkg/registry/storage/storageclass/strategy.go)."""

from __future__ import annotations

from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
    semantic_equal,
    validate_immutable,
)
from machinery.types import Obj
from machinery.validation import is_qualified_name
from machinery.volumeutil import BINDING_IMMEDIATE, BINDING_WAIT_FOR_FIRST_CONSUMER

RECLAIM_POLICIES = ("Delete", "Retain")
BINDING_MODES = (BINDING_IMMEDIATE, BINDING_WAIT_FOR_FIRST_CONSUMER)
MAX_PROVISIONER_PARAMETER_SIZE = 256 * 1024  # maxProvisionerParameterSize
MAX_PROVISIONER_PARAMETER_COUNT = 512  # maxProvisionerParameterLen


class StorageClassStrategy(Strategy):
    def prepare_for_create(self, obj: Obj) -> None:
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", BINDING_IMMEDIATE)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        self.prepare_for_create(new)

    def validate(self, obj: Obj) -> list[FieldError]:
        errs = []
        provisioner = obj.get("provisioner") or ""
        if not provisioner:
            errs.append(required("provisioner", provisioner))
        else:
            errs += [invalid("provisioner", provisioner, m) for m in is_qualified_name(provisioner.lower())]
        parameters = obj.get("parameters") or {}
        if len(parameters) > MAX_PROVISIONER_PARAMETER_COUNT:
            errs.append(FieldError("FieldValueTooLong", "parameters", "", parameters, True))
        size = 0
        for key, value in parameters.items():
            if not key:
                errs.append(invalid("parameters", parameters, "field can not be empty."))
            size += len(key) + len(value)
        if size > MAX_PROVISIONER_PARAMETER_SIZE:
            errs.append(FieldError("FieldValueTooLong", "parameters", "", "", True))
        policy = obj.get("reclaimPolicy")
        if policy not in RECLAIM_POLICIES:
            errs.append(not_supported("reclaimPolicy", policy, list(RECLAIM_POLICIES)))
        mode = obj.get("volumeBindingMode")
        if mode not in BINDING_MODES:
            errs.append(not_supported("volumeBindingMode", mode, list(BINDING_MODES)))
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = []
        if not semantic_equal(new.get("parameters"), old.get("parameters")):
            errs.append(forbidden("parameters", "updates to parameters are forbidden."))
        if new.get("provisioner") != old.get("provisioner"):
            errs.append(forbidden("provisioner", "updates to provisioner are forbidden."))
        if new.get("reclaimPolicy") != old.get("reclaimPolicy"):
            errs.append(forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
        errs += validate_immutable(new.get("volumeBindingMode"), old.get("volumeBindingMode"), "volumeBindingMode")
        return errs
