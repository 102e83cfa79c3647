"""Namespaces (upstream: pkg/apis/core/v1/defaults.go, pkg/apis/core/validation, pkg/registry/core/namespace).

A namespace is born Active with the `kubernetes` finalizer, which the namespace controller removes
(through /finalize) once it has emptied the namespace.
"""

from __future__ import annotations

import time

from apiserver.registry.meta import validate_kube_finalizer_name
from apiserver.registry.strategy import Strategy
from apiserver.validation import FieldError, invalid, semantic_equal, validate_qualified_name
from machinery.types import Obj

# Set on every namespace so selectors can pick namespaces by name (upstream v1.LabelMetadataName).
LABEL_METADATA_NAME = "kubernetes.io/metadata.name"
FINALIZER_KUBERNETES = "kubernetes"
# How long after a DELETE the namespace is read from storage, not the watch cache, before content is
# admitted into it (upstream NamespaceLifecycle's forceLiveLookupTTL)
FORCE_LIVE_LOOKUP_TTL = 30.0


def default_namespace(obj: Obj) -> None:
    """SetDefaults_Namespace: the metadata-name label always equals the name."""
    meta = obj.setdefault("metadata", {})
    if meta.get("name"):
        labels = meta.get("labels") or {}
        labels[LABEL_METADATA_NAME] = meta["name"]
        meta["labels"] = labels


def validate_spec_finalizers(obj: Obj) -> list[FieldError]:
    """spec.finalizers: qualified names, and a bare name only if Kubernetes defines it."""
    errs: list[FieldError] = []
    for finalizer in (obj.get("spec") or {}).get("finalizers") or []:
        errs += validate_qualified_name(finalizer, "spec.finalizers")
        errs += validate_kube_finalizer_name(finalizer, "spec.finalizers")
    return errs


class NamespaceStrategy(Strategy):
    """Namespaces: status.phase Active on create, the kubernetes finalizer added; an update of the
    namespace itself changes neither spec.finalizers (that is /finalize) nor status."""

    has_status_subresource = True

    def __init__(self) -> None:
        # name -> monotonic time of the DELETE that made it Terminating
        self._deleted_at: dict[str, float] = {}

    def recently_deleted(self, name: str, now: float | None = None) -> bool:
        """True for FORCE_LIVE_LOOKUP_TTL seconds after a DELETE of the namespace went through this
        apiserver: its watch cache may still show it Active, so a create must not trust the cache."""
        now = time.monotonic() if now is None else now
        at = self._deleted_at.get(name)
        if at is None:
            return False
        if now - at > FORCE_LIVE_LOOKUP_TTL:
            del self._deleted_at[name]
            return False
        return True

    def prepare_for_create(self, obj: Obj) -> None:
        default_namespace(obj)
        obj["status"] = {"phase": "Active"}
        spec = obj.setdefault("spec", {})
        finalizers = list(spec.get("finalizers") or [])
        if FINALIZER_KUBERNETES not in finalizers:
            finalizers.append(FINALIZER_KUBERNETES)
        spec["finalizers"] = finalizers

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_spec_finalizers(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        default_namespace(new)
        spec = new.setdefault("spec", {})
        old_finalizers = (old.get("spec") or {}).get("finalizers")
        if old_finalizers is None:
            spec.pop("finalizers", None)
        else:
            spec["finalizers"] = old_finalizers
        super().prepare_for_update(new, old)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """A /status write: Active while not being deleted, Terminating once it is."""
        status = new.get("status") or {}
        if semantic_equal(status, old.get("status")):
            return []
        phase = status.get("phase") or ""
        if not (new.get("metadata") or {}).get("deletionTimestamp"):
            if phase != "Active":
                return [invalid("status.Phase", phase, "may only be 'Active' if `deletionTimestamp` is empty")]
        elif phase != "Terminating":
            return [invalid("status.Phase", phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")]
        return []

    def holds_deletion(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("finalizers"))

    def prepare_for_delete(self, obj: Obj) -> None:
        obj.setdefault("status", {})["phase"] = "Terminating"
        now = time.monotonic()
        self._deleted_at = {n: t for n, t in self._deleted_at.items() if now - t <= FORCE_LIVE_LOOKUP_TTL}
        self._deleted_at[(obj.get("metadata") or {}).get("name") or ""] = now

    def prepare_for_subresource_update(self, subresource: str, new: Obj, old: Obj) -> None:
        if subresource == "finalize":
            self.prepare_for_finalize(new, old)
        else:
            super().prepare_for_subresource_update(subresource, new, old)

    def prepare_for_finalize(self, new: Obj, old: Obj) -> None:
        """A write through /finalize changes only spec.finalizers (upstream namespaceFinalizeStrategy)."""
        finalizers = (new.get("spec") or {}).get("finalizers")
        new.clear()
        new.update({k: v for k, v in old.items() if k != "spec"})
        spec = dict(old.get("spec") or {})
        if finalizers is None:
            spec.pop("finalizers", None)
        else:
            spec["finalizers"] = finalizers
        new["spec"] = spec

    def field_values(self, obj: Obj) -> dict[str, str]:
        name = (obj.get("metadata") or {}).get("name") or ""
        return {"metadata.name": name, "name": name, "status.phase": (obj.get("status") or {}).get("phase") or ""}
