"""storage.k8s.io/v1 StorageClass (upstream k8s.io/api/storage/v1/types.go): how claims of a class
are provisioned (provisioner, parameters), what becomes of their volumes (reclaimPolicy) and when
they are bound (volumeBindingMode)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.meta import ObjectMeta


class TopologySelectorLabelRequirement(ApiModel):
    key: str
    values: list[str]


class TopologySelectorTerm(ApiModel):
    match_label_expressions: list[TopologySelectorLabelRequirement] | None = None


class StorageClass(ApiModel):
    api_version: Literal["storage.k8s.io/v1"] = "storage.k8s.io/v1"
    kind: Literal["StorageClass"] = "StorageClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    provisioner: str
    parameters: dict[str, str] | None = None
    reclaim_policy: str | None = None  # Delete (default) | Retain
    mount_options: list[str] | None = None
    allow_volume_expansion: bool | None = None
    volume_binding_mode: str | None = None  # Immediate (default) | WaitForFirstConsumer
    allowed_topologies: list[TopologySelectorTerm] | None = None
