"""coordination.k8s.io/v1 Lease: node heartbeats (kube-node-lease) and leader election."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.core_v1 import MicroTime
from machinery.api.meta import ObjectMeta


class LeaseSpec(ApiModel):
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: MicroTime | None = None
    renew_time: MicroTime | None = None
    lease_transitions: int | None = None
    strategy: str | None = None  # OldestEmulationVersion (coordinated leader election)
    preferred_holder: str | None = None


class Lease(ApiModel):
    api_version: Literal["coordination.k8s.io/v1"] = "coordination.k8s.io/v1"
    kind: Literal["Lease"] = "Lease"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LeaseSpec | None = None
