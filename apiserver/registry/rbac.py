"""RBAC objects (upstream: pkg/apis/rbac/validation): rules need verbs; a rule names resources or
non-resource URLs, not both, and non-resource URLs only in cluster roles; a binding's roleRef is
immutable and points at a Role or ClusterRole of rbac.authorization.k8s.io; subjects are users,
groups or service accounts."""

from __future__ import annotations

from apiserver.registry.strategy import Strategy
from apiserver.validation import FieldError, invalid, not_supported, required
from machinery.types import Obj

RBAC_GROUP = "rbac.authorization.k8s.io"
_SUBJECT_KINDS = ["ServiceAccount", "User", "Group"]


def validate_rules(obj: Obj, cluster: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, rule in enumerate(obj.get("rules") or []):
        path = f"rules[{i}]"
        if not rule.get("verbs"):
            errs.append(required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if not cluster:
                errs.append(invalid(f"{path}.nonResourceURLs", urls,
                                    "namespaced rules cannot apply to non-resource URLs"))
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                errs.append(invalid(f"{path}.nonResourceURLs", urls,
                                    "rules cannot apply to both regular resources and non-resource URLs"))
            continue
        if not rule.get("resources"):
            errs.append(required(f"{path}.resources", "resource rules must supply at least one resource"))
        if rule.get("apiGroups") is None:
            errs.append(required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
    return errs


def validate_binding(obj: Obj, namespaced: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    ref = obj.get("roleRef") or {}
    if ref.get("apiGroup") != RBAC_GROUP:
        errs.append(not_supported("roleRef.apiGroup", ref.get("apiGroup"), [RBAC_GROUP]))
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if ref.get("kind") not in kinds:
        errs.append(not_supported("roleRef.kind", ref.get("kind"), kinds))
    if not ref.get("name"):
        errs.append(required("roleRef.name"))
    for i, subject in enumerate(obj.get("subjects") or []):
        path = f"subjects[{i}]"
        kind = subject.get("kind")
        if not subject.get("name"):
            errs.append(required(f"{path}.name"))
        if kind == "ServiceAccount":
            if subject.get("apiGroup"):
                errs.append(not_supported(f"{path}.apiGroup", subject.get("apiGroup"), [""]))
            if not namespaced and not subject.get("namespace"):
                errs.append(required(f"{path}.namespace"))
        elif kind in ("User", "Group"):
            if subject.get("apiGroup") != RBAC_GROUP:
                errs.append(not_supported(f"{path}.apiGroup", subject.get("apiGroup"), [RBAC_GROUP]))
        else:
            errs.append(not_supported(f"{path}.kind", kind, _SUBJECT_KINDS))
    return errs


def _role_ref_immutable(new: Obj, old: Obj) -> list[FieldError]:
    if new.get("roleRef") != old.get("roleRef"):
        return [invalid("roleRef", new.get("roleRef"), "cannot change roleRef")]
    return []


class RoleStrategy(Strategy):
    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_rules(obj, cluster=False)


class ClusterRoleStrategy(Strategy):
    def validate(self, obj: Obj) -> list[FieldError]:
        errs = validate_rules(obj, cluster=True)
        aggregation = obj.get("aggregationRule")
        if aggregation is not None and not (aggregation or {}).get("clusterRoleSelectors"):
            errs.append(required("aggregationRule.clusterRoleSelectors",
                                 "at least one clusterRoleSelector required if aggregationRule is non-nil"))
        return errs


class RoleBindingStrategy(Strategy):
    def prepare_for_create(self, obj: Obj) -> None:
        _default_subject_groups(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        _default_subject_groups(new)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_binding(obj, namespaced=True)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return _role_ref_immutable(new, old)


class ClusterRoleBindingStrategy(RoleBindingStrategy):
    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_binding(obj, namespaced=False)


def _default_subject_groups(obj: Obj) -> None:
    """SetDefaults_Subject: User and Group subjects belong to rbac.authorization.k8s.io."""
    for subject in obj.get("subjects") or []:
        if subject.get("kind") in ("User", "Group") and not subject.get("apiGroup"):
            subject["apiGroup"] = RBAC_GROUP
