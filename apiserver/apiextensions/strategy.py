"""CustomResourceDefinitions (upstream staging/src/k8s.io/apiextensions-apiserver/pkg/registry/
customresourcedefinition/strategy.go and pkg/apis/apiextensions/validation/validation.go): defaults,
the CRD's own validation with upstream's messages (names, group, versions, the structural schema,
subresources, printer columns), storedVersions, and the cleanup finalizer a DELETE adds."""

from __future__ import annotations

from typing import Any

from apiserver.apiextensions.schema import validate_structural
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
    validate_immutable,
)
from machinery.timeutil import now_rfc3339
from machinery.types import Obj
from machinery.validation import is_dns1035_label, is_dns1123_subdomain

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
_COLUMN_TYPES = ["boolean", "date", "integer", "number", "string"]


def condition(obj: Obj, kind: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return None


def is_condition_true(obj: Obj, kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


def set_condition(obj: Obj, kind: str, status: str, reason: str, message: str) -> None:
    """Upstream apihelpers.SetCRDCondition: lastTransitionTime moves only when the status does."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    for c in conditions:
        if c.get("type") == kind:
            if c.get("status") != status:
                c["lastTransitionTime"] = now_rfc3339()
            c.update(status=status, reason=reason, message=message)
            return
    conditions.append({"type": kind, "status": status, "lastTransitionTime": now_rfc3339(), "reason": reason,
                       "message": message})


def storage_version(obj: Obj) -> str | None:
    for v in (obj.get("spec") or {}).get("versions") or []:
        if v.get("storage"):
            return v.get("name")  # type: ignore[no-any-return]
    return None


def _label(value: Any, path: str, mixed_case: bool = False) -> list[FieldError]:
    if not isinstance(value, str) or not value:
        return []
    errs = is_dns1035_label(value.lower() if mixed_case else value)
    if not errs:
        return []
    detail = ",".join(errs)
    if mixed_case:
        detail = f"may have mixed case, but should otherwise match: {detail}"
    return [invalid(path, value, detail)]


def validate_names(names: Obj, path: str) -> list[FieldError]:
    errs = _label(names.get("plural"), f"{path}.plural") + _label(names.get("singular"), f"{path}.singular")
    errs += _label(names.get("kind"), f"{path}.kind", True) + _label(names.get("listKind"), f"{path}.listKind", True)
    for i, short in enumerate(names.get("shortNames") or []):
        if is_dns1035_label(short):
            errs.append(invalid(f"{path}.shortNames[{i}]", short, ",".join(is_dns1035_label(short))))
    for i, category in enumerate(names.get("categories") or []):
        if is_dns1035_label(category):
            errs.append(invalid(f"{path}.categories[{i}]", category, ",".join(is_dns1035_label(category))))
    return errs


def _json_path_under(path_value: Any, field: str, under: str) -> list[FieldError]:
    if not path_value:
        return [required(field, "")]
    if not isinstance(path_value, str) or not path_value.startswith(f".{under}."):
        return [invalid(field, path_value, f"should be a json path under .{under}")]
    if "[" in path_value or path_value.endswith("."):
        return [invalid(field, path_value, "should be a json path under ." + under)]
    return []


def _validate_version(version: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    subresources = version.get("subresources") or {}
    schema = ((version.get("schema") or {}).get("openAPIV3Schema"))
    if schema is None:
        errs.append(required(f"{path}.schema.openAPIV3Schema", "schemas are required"))
    else:
        errs += validate_structural(schema, f"{path}.schema.openAPIV3Schema")
    scale = subresources.get("scale")
    if scale is not None:
        sp = f"{path}.subresources.scale"
        errs += _json_path_under(scale.get("specReplicasPath"), f"{sp}.specReplicasPath", "spec")
        errs += _json_path_under(scale.get("statusReplicasPath"), f"{sp}.statusReplicasPath", "status")
        selector = scale.get("labelSelectorPath")
        if selector and not (selector.startswith(".spec.") or selector.startswith(".status.")):
            errs.append(invalid(f"{sp}.labelSelectorPath", selector, "should be a json path under either .spec or "
                                ".status"))
    fields = version.get("selectableFields") or []
    if len(fields) > 8:
        errs.append(FieldError("FieldValueTooMany", f"{path}.selectableFields", "must have at most 8 items",
                               len(fields), True))
    for i, selectable in enumerate(fields):
        sp = f"{path}.selectableFields[{i}].jsonPath"
        json_path = selectable.get("jsonPath") or ""
        if not json_path:
            errs.append(required(sp, ""))
            continue
        node = schema
        for part in json_path.lstrip(".").split(".") if json_path.startswith(".") else []:
            node = ((node or {}).get("properties") or {}).get(part) if isinstance(node, dict) else None
        if not json_path.startswith(".") or "[" in json_path:
            errs.append(invalid(sp, json_path, "must be a simple JSON path"))
        elif not isinstance(node, dict):
            errs.append(invalid(sp, json_path, "is an invalid path: does not refer to a field in the schema"))
        elif node.get("type") not in ("string", "integer", "boolean") and not node.get("x-kubernetes-int-or-string"):
            errs.append(invalid(sp, json_path, "must point to a field of type string, boolean or integer. Enum "
                                "string fields and strings with formats are allowed."))
    for i, column in enumerate(version.get("additionalPrinterColumns") or []):
        cp = f"{path}.additionalPrinterColumns[{i}]"
        if not column.get("name"):
            errs.append(required(f"{cp}.name", ""))
        if not column.get("type"):
            errs.append(required(f"{cp}.type", ""))
        elif column["type"] not in _COLUMN_TYPES:
            errs.append(not_supported(f"{cp}.type", column["type"], _COLUMN_TYPES))
        if column.get("format") and column["format"] not in ("int32", "int64", "float", "double", "byte", "date",
                                                            "date-time", "password"):
            errs.append(not_supported(f"{cp}.format", column["format"],
                                      ["int32", "int64", "float", "double", "byte", "date", "date-time", "password"]))
        if column.get("priority") is not None and column["priority"] < 0:
            errs.append(invalid(f"{cp}.priority", column["priority"], "must be greater than or equal to 0"))
        if not column.get("jsonPath"):
            errs.append(required(f"{cp}.JSONPath", ""))
    return errs


def validate_spec(obj: Obj) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errs: list[FieldError] = []
    group = spec.get("group") or ""
    if not group:
        errs.append(required("spec.group", ""))
    elif is_dns1123_subdomain(group):
        errs.append(invalid("spec.group", group, ",".join(is_dns1123_subdomain(group))))
    elif len(group.split(".")) < 2:
        errs.append(invalid("spec.group", group, "should be a domain with at least one dot"))
    scope = spec.get("scope") or ""
    if not scope:
        errs.append(required("spec.scope", ""))
    elif scope not in ("Cluster", "Namespaced"):
        errs.append(not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))
    versions = spec.get("versions") or []
    storage_count, seen, unique = 0, set(), True
    for i, version in enumerate(versions):
        storage_count += bool(version.get("storage"))
        name = version.get("name") or ""
        unique = unique and name not in seen
        seen.add(name)
        if is_dns1035_label(name):
            errs.append(invalid(f"spec.versions[{i}].name", name, ",".join(is_dns1035_label(name))))
        errs += _validate_version(version, f"spec.versions[{i}]")
    if not unique:
        errs.append(invalid("spec.versions", versions, "must contain unique version names"))
    if storage_count != 1:
        errs.append(invalid("spec.versions", versions, "must have exactly one version marked as storage version"))
    if versions and not any(v.get("served") for v in versions):
        errs.append(invalid("spec.versions", versions, "must have at least one version marked as served"))
    names = spec.get("names") or {}
    for key in ("plural", "singular", "kind", "listKind"):
        if not names.get(key):
            errs.append(required(f"spec.names.{key}", ""))
    errs += validate_names(names, "spec.names")
    conversion = spec.get("conversion") or {}
    strategy = conversion.get("strategy")
    if conversion and strategy not in ("None", "Webhook"):
        errs.append(not_supported("spec.conversion.strategy", strategy or "", ["None", "Webhook"]) if strategy
                    else required("spec.conversion.strategy", ""))
    if strategy == "Webhook":
        errs.append(forbidden("spec.conversion.strategy", "conversion webhooks are not supported by this server"))
    if spec.get("preserveUnknownFields"):
        errs.append(invalid("spec.preserveUnknownFields", True, "cannot set to true, set "
                            "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"))
    meta = obj.get("metadata") or {}
    errs += _validate_approval(group, meta)
    plural = names.get("plural") or ""
    if meta.get("name") != f"{plural}.{group}":
        errs.append(invalid("metadata.name", meta.get("name", ""), 'must be spec.names.plural+"."+spec.group'))
    return errs


def _validate_approval(group: str, meta: Obj) -> list[FieldError]:
    """Groups under k8s.io and kubernetes.io are the Kubernetes project's: a CRD there carries the
    approval annotation (upstream validateAPIApproval, KEP 1111)."""
    protected = group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))
    if not protected:
        return []
    path = f"metadata.annotations[{APPROVAL_ANNOTATION}]"
    value = ((meta.get("annotations") or {}).get(APPROVAL_ANNOTATION))
    if value is None:
        return [required(path, f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}", see '
                               "https://github.com/kubernetes/enhancements/pull/1111")]
    if value.startswith("unapproved"):
        return []
    if not value.startswith(("http://", "https://")):
        return [invalid(path, value, "protected groups must have approval annotation "
                        f'"{APPROVAL_ANNOTATION}" with either a URL or a reason starting with "unapproved", see '
                        "https://github.com/kubernetes/enhancements/pull/1111")]
    return []


def validate_stored_versions(obj: Obj) -> list[FieldError]:
    stored = (obj.get("status") or {}).get("storedVersions") or []
    versions = (obj.get("spec") or {}).get("versions") or []
    if not stored:
        return [invalid("status.storedVersions", stored, "must have at least one stored version")]
    errs = []
    names = {v.get("name") for v in versions}
    for v in versions:
        if v.get("storage") and v.get("name") not in stored:
            errs.append(invalid("status.storedVersions", v, f"must have the storage version {v.get('name')}"))
    for i, name in enumerate(stored):
        if name not in names:
            errs.append(invalid(f"status.storedVersions[{i}]", name, "must appear in spec.versions"))
    return errs


class CustomResourceDefinitionStrategy(Strategy):
    has_status_subresource = True

    def _defaults(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        names = spec.setdefault("names", {})
        if names.get("kind") and not names.get("singular"):
            names["singular"] = names["kind"].lower()
        if names.get("kind") and not names.get("listKind"):
            names["listKind"] = names["kind"] + "List"
        spec.setdefault("conversion", {"strategy": "None"})

    def prepare_for_create(self, obj: Obj) -> None:
        self._defaults(obj)
        storage = storage_version(obj)
        obj["status"] = {"conditions": [], "acceptedNames": {"plural": "", "kind": ""},
                         "storedVersions": [storage] if storage else []}

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_update(new, old)
        self._defaults(new)
        storage = storage_version(new)
        stored = new.setdefault("status", {}).setdefault("storedVersions", [])
        if storage and storage not in stored:  # upstream: a new storage version is recorded as stored
            stored.append(storage)

    def validate(self, obj: Obj) -> list[FieldError]:
        errs = validate_spec(obj)
        if not errs and (obj.get("status") or {}).get("storedVersions") is not None:
            errs += validate_stored_versions(obj) if (obj["status"].get("storedVersions")) else []
        errs += validate_names((obj.get("status") or {}).get("acceptedNames") or {}, "status.acceptedNames")
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        errs: list[FieldError] = []
        if is_condition_true(old, "Established"):
            errs += validate_immutable(spec.get("scope"), old_spec.get("scope"), "spec.scope")
            errs += validate_immutable((spec.get("names") or {}).get("kind"),
                                       (old_spec.get("names") or {}).get("kind"), "spec.names.kind")
        errs += validate_immutable(spec.get("group"), old_spec.get("group"), "spec.group")
        errs += validate_immutable((spec.get("names") or {}).get("plural"), (old_spec.get("names") or {}).get("plural"),
                                   "spec.names.plural")
        return errs

    def holds_deletion(self, obj: Obj) -> bool:
        """A first DELETE keeps the CRD to remove its objects (the cleanup finalizer, upstream registry
        customresourcedefinition/etcd.go Delete)."""
        return not (obj.get("metadata") or {}).get("deletionTimestamp")

    def prepare_for_delete(self, obj: Obj) -> None:
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)
        set_condition(obj, "Terminating", "True", "InstanceDeletionPending",
                      "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon")
