"""admissionregistration.k8s.io/v1: the webhooks the apiserver calls before it stores an object."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.meta import LabelSelector, ObjectMeta


class ServiceReference(ApiModel):
    namespace: str
    name: str
    path: str | None = None
    port: int | None = None


class WebhookClientConfig(ApiModel):
    url: str | None = None
    service: ServiceReference | None = None
    ca_bundle: str | None = None  # base64 of PEM certificates


class RuleWithOperations(ApiModel):
    operations: list[str] | None = None  # CREATE, UPDATE, DELETE, CONNECT, *
    api_groups: list[str] | None = None
    api_versions: list[str] | None = None
    resources: list[str] | None = None
    scope: str | None = None  # Cluster, Namespaced, *


class MatchCondition(ApiModel):
    name: str
    expression: str


class MutatingWebhook(ApiModel):
    name: str
    client_config: WebhookClientConfig
    rules: list[RuleWithOperations] | None = None
    failure_policy: str | None = None  # Fail (default) or Ignore
    match_policy: str | None = None
    namespace_selector: LabelSelector | None = None
    object_selector: LabelSelector | None = None
    side_effects: str | None = None
    timeout_seconds: int | None = None
    admission_review_versions: list[str] | None = None
    reinvocation_policy: str | None = None
    match_conditions: list[MatchCondition] | None = None


class ValidatingWebhook(ApiModel):
    name: str
    client_config: WebhookClientConfig
    rules: list[RuleWithOperations] | None = None
    failure_policy: str | None = None
    match_policy: str | None = None
    namespace_selector: LabelSelector | None = None
    object_selector: LabelSelector | None = None
    side_effects: str | None = None
    timeout_seconds: int | None = None
    admission_review_versions: list[str] | None = None
    match_conditions: list[MatchCondition] | None = None


class MutatingWebhookConfiguration(ApiModel):
    api_version: Literal["admissionregistration.k8s.io/v1"] = "admissionregistration.k8s.io/v1"
    kind: Literal["MutatingWebhookConfiguration"] = "MutatingWebhookConfiguration"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    webhooks: list[MutatingWebhook] | None = Field(None, json_schema_extra={
        "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"})


class ValidatingWebhookConfiguration(ApiModel):
    api_version: Literal["admissionregistration.k8s.io/v1"] = "admissionregistration.k8s.io/v1"
    kind: Literal["ValidatingWebhookConfiguration"] = "ValidatingWebhookConfiguration"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    webhooks: list[ValidatingWebhook] | None = Field(None, json_schema_extra={
        "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"})
