"""The per-resource behaviour the generic store calls, as upstream's rest.RESTCreateStrategy /
RESTUpdateStrategy: defaulting, validation, what an update may change, fields for selectors.

Objects are plain wire-form dicts (camelCase), already checked against the resource's pydantic
model for types and unknown fields when a strategy sees them.
"""

from __future__ import annotations

from apiserver.validation import FieldError
from machinery.types import Obj


class Strategy:
    """Defaults for a resource with no rules of its own; subclasses override what they need."""

    # Does an update of the main resource keep .status from the stored object (status is then
    # written only through the status subresource)?
    has_status_subresource: bool = False

    def prepare_for_create(self, obj: Obj) -> None:
        """Fill defaults and clear what a client may not set on create (in place)."""

    def validate(self, obj: Obj) -> list[FieldError]:
        """Validate a new object (metadata is validated by the generic store)."""
        return []

    def validate_create(self, obj: Obj) -> list[FieldError]:
        """What only a create may not carry (validate(obj) is run as well)."""
        return []

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        """Fill defaults; keep what an update of the main resource may not change (in place)."""
        if self.has_status_subresource and "status" in old:
            new["status"] = old["status"]
        elif self.has_status_subresource:
            new.pop("status", None)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """Validate an update (immutable fields); validate(new) is run as well."""
        return []

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        """A write through /status changes only .status: everything else comes from old."""
        status = new.get("status")
        new.clear()
        new.update({k: v for k, v in old.items() if k != "status"})
        if status is not None:
            new["status"] = status

    def holds_deletion(self, obj: Obj) -> bool:
        """Besides metadata.finalizers, does something keep a deleted object (namespaces: their
        spec.finalizers, emptied by the namespace controller through /finalize)?"""
        return False

    def prepare_for_delete(self, obj: Obj) -> None:
        """Mark an object whose deletion is held (namespaces: status.phase Terminating)."""

    def prepare_for_subresource_update(self, subresource: str, new: Obj, old: Obj) -> None:
        """A write through a subresource changes only its part of the object."""
        if subresource != "status":
            raise ValueError(f"no update through subresource {subresource!r}")
        self.prepare_for_status_update(new, old)

    def validate_subresource_update(self, subresource: str, new: Obj, old: Obj) -> list[FieldError]:
        """Validate a write through a subresource (the pods/ephemeralcontainers strategy has its own)."""
        return self.validate_update(new, old)

    def deletion_grace_period(self, obj: Obj, requested: int | None) -> int:
        """Seconds a DELETE waits before the object goes (upstream RESTGracefulDeleteStrategy);
        0 removes it at once. Only pods are graceful."""
        return 0

    def field_values(self, obj: Obj) -> dict[str, str]:
        """Values the field selector may test (metadata.name and metadata.namespace always)."""
        meta = obj.get("metadata") or {}
        return {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}
