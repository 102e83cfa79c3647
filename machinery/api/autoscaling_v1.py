"""autoscaling/v1 Scale: what the deployments/scale and replicasets/scale subresources speak."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.meta import ObjectMeta


class ScaleSpec(ApiModel):
    replicas: int | None = None


class ScaleStatus(ApiModel):
    replicas: int
    selector: str | None = None  # the label selector in its string form: "app=nginx,tier in (web)"


class Scale(ApiModel):
    api_version: Literal["autoscaling/v1"] = "autoscaling/v1"
    kind: Literal["Scale"] = "Scale"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ScaleSpec | None = None
    status: ScaleStatus | None = None
