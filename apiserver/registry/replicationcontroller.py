"""ReplicationControllers (upstream pkg/apis/core/v1/defaults.go SetDefaults_ReplicationController,
pkg/apis/core/validation ValidateReplicationController, pkg/registry/core/replicationcontroller):
the selector (a label map) and the pod's labels default from the template, replicas to 1; the
selector must match the template and status is written through /status."""

from __future__ import annotations

from apiserver.registry.replicaset import default_template, validate_replica_status, validate_selector_and_template
from apiserver.registry.strategy import Strategy
from apiserver.validation import FieldError, required, semantic_equal, validate_nonnegative, validate_replicas
from machinery.types import Obj


class ReplicationControllerStrategy(Strategy):
    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        self._default(obj)
        obj["status"] = {"replicas": 0}

    def _default(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
        if labels:
            if not spec.get("selector"):
                spec["selector"] = dict(labels)
            meta = obj.setdefault("metadata", {})
            if not meta.get("labels"):
                meta["labels"] = dict(labels)
        if spec.get("replicas") is None:
            spec["replicas"] = 1
        default_template(spec)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        self._default(new)
        super().prepare_for_update(new, old)

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = validate_replicas(spec.get("replicas"), "spec.replicas")
        errs += validate_nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds")
        selector = spec.get("selector") or {}
        if not selector:
            return [*errs, required("spec.selector")]
        errs += validate_selector_and_template({**spec, "selector": {"matchLabels": selector}}, "spec")
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        if not semantic_equal(new.get("status"), old.get("status")):
            return validate_replica_status(new.get("status") or {}, "status",
                                           ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"))
        return []

    def field_values(self, obj: Obj) -> dict[str, str]:
        values = super().field_values(obj)
        values["status.replicas"] = str((obj.get("status") or {}).get("replicas") or 0)
        return values
