"""authorization.k8s.io/v1: access reviews — "may this user do that?", asked of the apiserver
(`kubectl auth can-i` sends a SelfSubjectAccessReview; `kubectl auth can-i --list` a
SelfSubjectRulesReview, "what may I do in this namespace?"). Created, answered, never stored."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.meta import LabelSelectorRequirement, ObjectMeta


class FieldSelectorRequirement(ApiModel):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: list[str] | None = None


class FieldSelectorAttributes(ApiModel):
    raw_selector: str | None = None
    requirements: list[FieldSelectorRequirement] | None = None


class LabelSelectorAttributes(ApiModel):
    raw_selector: str | None = None
    requirements: list[LabelSelectorRequirement] | None = None


class ResourceAttributes(ApiModel):
    namespace: str | None = None
    verb: str | None = None
    group: str | None = None
    version: str | None = None
    resource: str | None = None
    subresource: str | None = None
    name: str | None = None
    field_selector: FieldSelectorAttributes | None = None
    label_selector: LabelSelectorAttributes | None = None


class NonResourceAttributes(ApiModel):
    path: str | None = None
    verb: str | None = None


class SelfSubjectAccessReviewSpec(ApiModel):
    resource_attributes: ResourceAttributes | None = None
    non_resource_attributes: NonResourceAttributes | None = None


class SubjectAccessReviewSpec(ApiModel):
    resource_attributes: ResourceAttributes | None = None
    non_resource_attributes: NonResourceAttributes | None = None
    user: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None
    uid: str | None = None


class SubjectAccessReviewStatus(ApiModel):
    allowed: bool = False
    denied: bool | None = None
    reason: str | None = None
    evaluation_error: str | None = None


class SelfSubjectAccessReview(ApiModel):
    api_version: Literal["authorization.k8s.io/v1"] = "authorization.k8s.io/v1"
    kind: Literal["SelfSubjectAccessReview"] = "SelfSubjectAccessReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SelfSubjectAccessReviewSpec
    status: SubjectAccessReviewStatus | None = None


class SubjectAccessReview(ApiModel):
    api_version: Literal["authorization.k8s.io/v1"] = "authorization.k8s.io/v1"
    kind: Literal["SubjectAccessReview"] = "SubjectAccessReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SubjectAccessReviewSpec
    status: SubjectAccessReviewStatus | None = None


class SelfSubjectRulesReviewSpec(ApiModel):
    namespace: str | None = None


class ResourceRule(ApiModel):
    verbs: list[str]
    api_groups: list[str] | None = None
    resources: list[str] | None = None
    resource_names: list[str] | None = None


class NonResourceRule(ApiModel):
    verbs: list[str]
    non_resource_urls: list[str] | None = Field(default=None, alias="nonResourceURLs")


class SubjectRulesReviewStatus(ApiModel):
    resource_rules: list[ResourceRule] = Field(default_factory=list)
    non_resource_rules: list[NonResourceRule] = Field(default_factory=list)
    incomplete: bool = False
    evaluation_error: str | None = None


class SelfSubjectRulesReview(ApiModel):
    api_version: Literal["authorization.k8s.io/v1"] = "authorization.k8s.io/v1"
    kind: Literal["SelfSubjectRulesReview"] = "SelfSubjectRulesReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SelfSubjectRulesReviewSpec = Field(default_factory=SelfSubjectRulesReviewSpec)
    status: SubjectRulesReviewStatus | None = None
