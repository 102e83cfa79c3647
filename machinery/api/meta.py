"""meta/v1: ObjectMeta, ListMeta, Status, LabelSelector, DeleteOptions — shared by every kind."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from machinery.api.base import ApiModel, merge_key, patch_strategy

# RFC 3339 timestamps travel as strings ("2026-11-21T23:47:31Z"), as on the wire.
Time = str


class OwnerReference(ApiModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ManagedFieldsEntry(ApiModel):
    manager: str | None = None
    operation: str | None = None
    api_version: str | None = None
    time: Time | None = None
    fields_type: str | None = None
    fields_v1: dict[str, Any] | None = Field(None, alias="fieldsV1")
    subresource: str | None = None


class ObjectMeta(ApiModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = Field(None, json_schema_extra=merge_key("uid"))
    finalizers: list[str] | None = Field(None, json_schema_extra=patch_strategy("merge"))
    managed_fields: list[ManagedFieldsEntry] | None = None
    self_link: str | None = None


class ListMeta(ApiModel):
    resource_version: str | None = None
    continue_: str | None = Field(None, alias="continue")
    remaining_item_count: int | None = None
    self_link: str | None = None


class LabelSelectorRequirement(ApiModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(ApiModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class StatusCause(ApiModel):
    reason: str | None = None
    message: str | None = None
    field: str | None = None


class StatusDetails(ApiModel):
    name: str | None = None
    group: str | None = None
    kind: str | None = None
    uid: str | None = None
    causes: list[StatusCause] | None = None
    retry_after_seconds: int | None = None


class Status(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Status"] = "Status"
    metadata: ListMeta = Field(default_factory=ListMeta)
    status: str | None = None
    message: str | None = None
    reason: str | None = None
    details: StatusDetails | None = None
    code: int | None = None


class Preconditions(ApiModel):
    uid: str | None = None
    resource_version: str | None = None


class DeleteOptions(ApiModel):
    api_version: str | None = None
    kind: str | None = None
    grace_period_seconds: int | None = None
    preconditions: Preconditions | None = None
    orphan_dependents: bool | None = None
    propagation_policy: Literal["Orphan", "Background", "Foreground"] | None = None
    dry_run: list[str] | None = None
