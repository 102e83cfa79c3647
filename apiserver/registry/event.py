"""Events (upstream: pkg/apis/core/validation/events.go legacyValidateEvent, pkg/registry/core/event).

core/v1 Events are validated leniently for old clients: the involved object's namespace must agree
with the event's; the stricter rules apply only to events that carry an eventTime (new-style events).
"""

from __future__ import annotations

from apiserver.registry.strategy import Strategy
from apiserver.validation import FieldError, invalid, required, validate_qualified_name
from machinery.types import Obj

REPORTING_INSTANCE_LENGTH_LIMIT = 128
ACTION_LENGTH_LIMIT = 128
REASON_LENGTH_LIMIT = 128
NOTE_LENGTH_LIMIT = 1024


class EventStrategy(Strategy):
    """Events: no status subresource, no defaults; selectable by the object they are about."""

    def validate(self, obj: Obj) -> list[FieldError]:
        involved = obj.get("involvedObject")
        if involved is None:
            return [required("involvedObject")]
        errs: list[FieldError] = []
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        involved_ns = involved.get("namespace") or ""
        mismatch = invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
        if not obj.get("eventTime"):
            if (not involved_ns and namespace not in ("", "default")) or (involved_ns and namespace != involved_ns):
                errs.append(mismatch)
            return errs
        if not involved_ns and namespace not in ("default", "kube-system"):
            errs.append(mismatch)
        controller = obj.get("reportingComponent") or ""
        if not controller:
            errs.append(required("reportingComponent"))
        errs += validate_qualified_name(controller, "reportingComponent")
        for key, limit in (("reportingInstance", REPORTING_INSTANCE_LENGTH_LIMIT), ("action", ACTION_LENGTH_LIMIT),
                           ("reason", REASON_LENGTH_LIMIT)):
            value = obj.get(key) or ""
            if not value:
                errs.append(required(key))
            if len(value) > limit:
                errs.append(invalid(key, "", f"can have at most {limit} characters"))
        if len(obj.get("message") or "") > NOTE_LENGTH_LIMIT:
            errs.append(invalid("message", "", f"can have at most {NOTE_LENGTH_LIMIT} characters"))
        return errs

    def field_values(self, obj: Obj) -> dict[str, str]:
        involved = obj.get("involvedObject") or {}
        source = (obj.get("source") or {}).get("component") or obj.get("reportingComponent") or ""
        values = super().field_values(obj)
        values.update({f"involvedObject.{key}": involved.get(key) or ""
                       for key in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")})
        values.update({
            "reason": obj.get("reason") or "",
            "reportingComponent": obj.get("reportingComponent") or "",
            "source": source,
            "type": obj.get("type") or "",
        })
        return values
