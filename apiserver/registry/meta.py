"""Validation of the ObjectMeta every kind carries (upstream: apimachinery/pkg/api/validation/objectmeta.go
plus pkg/apis/core/validation's finalizer-name rule), shared by all strategies through the generic store.
"""

from __future__ import annotations

from typing import Any

from apiserver.validation import (
    FieldError,
    forbidden,
    invalid,
    required,
    validate_annotations,
    validate_immutable,
    validate_labels,
    validate_nonnegative,
    validate_qualified_name,
)
from machinery.validation import NameValidator, name_is_dns1035_label, name_is_dns_label, name_is_dns_subdomain

Meta = dict[str, Any]

# Kinds whose names are a single DNS label rather than a subdomain (upstream ValidateXName).
_LABEL_NAMED_KINDS = frozenset({"Namespace"})

# Kinds whose names are only path segments (upstream ValidateRBACName = path.IsValidPathSegmentName):
# RBAC objects are named like their subjects, "system:kube-scheduler".
_PATH_SEGMENT_NAMED_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})


def name_is_path_segment(name: str, prefix: bool) -> list[str]:
    """apimachinery path.IsValidPathSegmentName (with the prefix variant for generateName)."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in name]


# Finalizers that need no domain prefix (upstream helper.IsStandardFinalizerName).
# (and the CRD cleanup finalizer: upstream validates CRDs with apimachinery's ObjectMeta rules, which do
# not ask for a fully qualified name)
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion",
                                 "customresourcecleanup.apiextensions.k8s.io"})


# Kinds whose names are a DNS-1035 label (upstream ValidateServiceName: a Service's name is a DNS label
# that may not start with a digit)
_DNS1035_NAMED_KINDS = frozenset({"Service"})


def name_validator_for(kind: str) -> NameValidator:
    """The name rule of a kind: Namespace names are DNS labels, Service names DNS-1035 labels,
    everything else DNS subdomains."""
    if kind in _PATH_SEGMENT_NAMED_KINDS:
        return name_is_path_segment
    if kind in _DNS1035_NAMED_KINDS:
        return name_is_dns1035_label
    return name_is_dns_label if kind in _LABEL_NAMED_KINDS else name_is_dns_subdomain


def validate_object_meta(meta: Meta, namespaced: bool, name_validator: NameValidator | str,
                         path: str = "metadata") -> list[FieldError]:
    """ValidateObjectMeta: name (or generateName), namespace, labels, annotations, owners, finalizers.

    `name_validator` is a NameValidator or a kind ("Pod", "Namespace") whose rule is looked up.
    """
    validate_name = name_validator_for(name_validator) if isinstance(name_validator, str) else name_validator
    errs: list[FieldError] = []
    generate_name = meta.get("generateName") or ""
    if generate_name:
        errs += [invalid(f"{path}.generateName", generate_name, m) for m in validate_name(generate_name, True)]
    name = meta.get("name") or ""
    if not name:
        errs.append(required(f"{path}.name", "name or generateName is required"))
    else:
        errs += [invalid(f"{path}.name", name, m) for m in validate_name(name, False)]
    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            errs.append(required(f"{path}.namespace"))
        else:
            errs += [invalid(f"{path}.namespace", namespace, m) for m in name_is_dns_label(namespace, False)]
    elif namespace:
        errs.append(forbidden(f"{path}.namespace", "not allowed on this type"))
    errs += validate_nonnegative(meta.get("generation"), f"{path}.generation")
    errs += validate_labels(meta.get("labels"), f"{path}.labels")
    errs += validate_annotations(meta.get("annotations"), f"{path}.annotations")
    errs += validate_owner_references(meta.get("ownerReferences"), f"{path}.ownerReferences")
    errs += validate_finalizers(meta.get("finalizers"), f"{path}.finalizers")
    return errs


def validate_object_meta_update(new: Meta, old: Meta, path: str = "metadata") -> list[FieldError]:
    """ValidateObjectMetaUpdate: identity and timestamps are immutable; no new finalizers once deleting.

    A field the new object leaves out is "unchanged" for the system fields the store copies from the
    stored object (upstream rest.BeforeUpdate does the same before validating); name and namespace
    must match exactly.
    """
    errs: list[FieldError] = []
    if old.get("deletionTimestamp"):
        added = sorted(set(new.get("finalizers") or []) - set(old.get("finalizers") or []))
        if added:
            shown = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
            errs.append(forbidden(f"{path}.finalizers", "no new finalizers can be added if the object is being "
                                                        f"deleted, found new finalizers {shown}"))
    if new.get("generation") is not None and new["generation"] < (old.get("generation") or 0):
        errs.append(invalid(f"{path}.generation", new["generation"], "must not be decremented"))
    errs += validate_immutable(new.get("name") or "", old.get("name") or "", f"{path}.name")
    errs += validate_immutable(new.get("namespace") or "", old.get("namespace") or "", f"{path}.namespace")
    for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
        if new.get(key) is not None and old.get(key) is not None:
            errs += validate_immutable(new[key], old[key], f"{path}.{key}")
    errs += validate_labels(new.get("labels"), f"{path}.labels")
    errs += validate_annotations(new.get("annotations"), f"{path}.annotations")
    errs += validate_owner_references(new.get("ownerReferences"), f"{path}.ownerReferences")
    errs += validate_finalizers(new.get("finalizers"), f"{path}.finalizers")
    return errs


def validate_finalizers(finalizers: list[str] | None, path: str) -> list[FieldError]:
    """Each a qualified name, and a bare name only if standard; orphan and foregroundDeletion exclude
    each other."""
    errs: list[FieldError] = []
    finalizers = finalizers or []
    for i, finalizer in enumerate(finalizers):
        errs += validate_qualified_name(finalizer, path)
        errs += validate_kube_finalizer_name(finalizer, f"{path}[{i}]")
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(invalid(path, finalizers, "finalizer orphan and foregroundDeletion cannot be both set"))
    return errs


def validate_kube_finalizer_name(finalizer: str, path: str) -> list[FieldError]:
    """A finalizer without a '/' must be one Kubernetes itself defines."""
    if "/" not in finalizer and finalizer not in STANDARD_FINALIZERS:
        return [invalid(path, finalizer, "name is neither a standard finalizer name nor is it fully qualified")]
    return []


def validate_owner_references(refs: list[dict[str, Any]] | None, path: str) -> list[FieldError]:
    """apiVersion (with a version), kind, name and uid set; at most one controller reference."""
    errs: list[FieldError] = []
    first_controller = ""
    for ref in refs or []:
        api_version = ref.get("apiVersion") or ""
        version = _version_of(api_version)
        if not version:
            errs.append(invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        if not ref.get("kind"):
            errs.append(invalid(f"{path}.kind", ref.get("kind") or "", "must not be empty"))
        if not ref.get("name"):
            errs.append(invalid(f"{path}.name", ref.get("name") or "", "must not be empty"))
        if not ref.get("uid"):
            errs.append(invalid(f"{path}.uid", ref.get("uid") or "", "must not be empty"))
        if ref.get("controller"):
            current = f"{ref.get('kind') or ''}/{ref.get('name') or ''}"
            if first_controller:
                errs.append(invalid(path, refs, "Only one reference can have Controller set to true. Found "
                                                f'"true" in references for {first_controller} and {current}'))
            else:
                first_controller = current
    return errs


def _version_of(api_version: str) -> str:
    """schema.ParseGroupVersion's version part; "" when malformed (more than one '/')."""
    parts = api_version.split("/")
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        return parts[1]
    return ""
