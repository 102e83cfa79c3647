"""audit.k8s.io/v1: the audit Policy the apiserver reads (--audit-policy-file) and the Event
each audited request becomes, one JSON line in the audit log."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.meta import ObjectMeta

Level = Literal["None", "Metadata", "Request", "RequestResponse"]
Stage = Literal["RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"]


class GroupResources(ApiModel):
    group: str | None = None
    resources: list[str] | None = None
    resource_names: list[str] | None = None


class PolicyRule(ApiModel):
    level: Level
    users: list[str] | None = None
    user_groups: list[str] | None = None
    verbs: list[str] | None = None
    resources: list[GroupResources] | None = None
    namespaces: list[str] | None = None
    non_resource_urls: list[str] | None = Field(None, alias="nonResourceURLs")
    omit_stages: list[Stage] | None = None
    omit_managed_fields: bool | None = None


class Policy(ApiModel):
    api_version: Literal["audit.k8s.io/v1"] = "audit.k8s.io/v1"
    kind: Literal["Policy"] = "Policy"
    metadata: ObjectMeta | None = None
    rules: list[PolicyRule] = Field(default_factory=list)
    omit_stages: list[Stage] | None = None
    omit_managed_fields: bool | None = None


class UserInfo(ApiModel):
    username: str | None = None
    uid: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None


class ObjectReference(ApiModel):
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    api_group: str | None = None
    api_version: str | None = None
    resource_version: str | None = None
    subresource: str | None = None


class ResponseStatus(ApiModel):
    code: int | None = None
    status: str | None = None
    message: str | None = None
    reason: str | None = None
    metadata: dict[str, object] | None = None


class Event(ApiModel):
    """One audit log line. requestObject/responseObject are kept as they were logged."""

    api_version: Literal["audit.k8s.io/v1"] = "audit.k8s.io/v1"
    kind: Literal["Event"] = "Event"
    level: Level
    audit_id: str = Field(alias="auditID")
    stage: Stage
    request_uri: str = Field(alias="requestURI")
    verb: str
    user: UserInfo
    impersonated_user: UserInfo | None = None
    source_ips: list[str] | None = Field(None, alias="sourceIPs")
    user_agent: str | None = None
    object_ref: ObjectReference | None = None
    response_status: ResponseStatus | None = None
    request_object: dict[str, object] | None = None
    response_object: dict[str, object] | None = None
    request_received_timestamp: str | None = None
    stage_timestamp: str | None = None
    annotations: dict[str, str] | None = None
