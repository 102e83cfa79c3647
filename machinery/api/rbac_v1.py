"""rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding, ClusterRoleBinding — who may do what."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.meta import LabelSelector, ObjectMeta


class PolicyRule(ApiModel):
    verbs: list[str]
    api_groups: list[str] | None = None
    resources: list[str] | None = None
    resource_names: list[str] | None = None
    non_resource_urls: list[str] | None = Field(None, alias="nonResourceURLs")


class AggregationRule(ApiModel):
    cluster_role_selectors: list[LabelSelector] | None = None


class Subject(ApiModel):
    kind: str  # User, Group, ServiceAccount
    name: str
    api_group: str | None = None
    namespace: str | None = None


class RoleRef(ApiModel):
    api_group: str
    kind: str  # Role or ClusterRole
    name: str


class Role(ApiModel):
    api_version: Literal["rbac.authorization.k8s.io/v1"] = "rbac.authorization.k8s.io/v1"
    kind: Literal["Role"] = "Role"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    rules: list[PolicyRule] | None = None


class ClusterRole(ApiModel):
    api_version: Literal["rbac.authorization.k8s.io/v1"] = "rbac.authorization.k8s.io/v1"
    kind: Literal["ClusterRole"] = "ClusterRole"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    rules: list[PolicyRule] | None = None
    aggregation_rule: AggregationRule | None = None


class RoleBinding(ApiModel):
    api_version: Literal["rbac.authorization.k8s.io/v1"] = "rbac.authorization.k8s.io/v1"
    kind: Literal["RoleBinding"] = "RoleBinding"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    subjects: list[Subject] | None = None
    role_ref: RoleRef


class ClusterRoleBinding(ApiModel):
    api_version: Literal["rbac.authorization.k8s.io/v1"] = "rbac.authorization.k8s.io/v1"
    kind: Literal["ClusterRoleBinding"] = "ClusterRoleBinding"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    subjects: list[Subject] | None = None
    role_ref: RoleRef
