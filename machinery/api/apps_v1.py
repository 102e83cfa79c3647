"""apps/v1: Deployment, ReplicaSet, DaemonSet, StatefulSet and ControllerRevision, as in upstream's
k8s.io/api/apps/v1/types.go."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from machinery.api.base import ApiModel, merge_key
from machinery.api.core_v1 import IntOrString, PersistentVolumeClaim, PodTemplateSpec
from machinery.api.meta import LabelSelector, ObjectMeta, Time

# --- Deployment --------------------------------------------------------------------------------


class RollingUpdateDeployment(ApiModel):
    max_unavailable: IntOrString | None = None  # default 25%
    max_surge: IntOrString | None = None  # default 25%


class DeploymentStrategy(ApiModel):
    type: str | None = None  # Recreate | RollingUpdate
    rolling_update: RollingUpdateDeployment | None = None


class DeploymentSpec(ApiModel):
    replicas: int | None = None
    selector: LabelSelector
    template: PodTemplateSpec
    strategy: DeploymentStrategy | None = None
    min_ready_seconds: int | None = None
    revision_history_limit: int | None = None
    paused: bool | None = None
    progress_deadline_seconds: int | None = None


class DeploymentCondition(ApiModel):
    type: str  # Available | Progressing | ReplicaFailure
    status: str
    last_update_time: Time | None = None
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class DeploymentStatus(ApiModel):
    observed_generation: int | None = None
    replicas: int | None = None
    updated_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    unavailable_replicas: int | None = None
    terminating_replicas: int | None = None
    conditions: list[DeploymentCondition] | None = Field(None, json_schema_extra=merge_key("type"))
    collision_count: int | None = None


class Deployment(ApiModel):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["Deployment"] = "Deployment"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeploymentSpec | None = None
    status: DeploymentStatus | None = None


# --- ReplicaSet --------------------------------------------------------------------------------


class ReplicaSetSpec(ApiModel):
    replicas: int | None = None
    min_ready_seconds: int | None = None
    selector: LabelSelector
    template: PodTemplateSpec | None = None


class ReplicaSetCondition(ApiModel):
    type: str  # ReplicaFailure
    status: str
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class ReplicaSetStatus(ApiModel):
    replicas: int
    fully_labeled_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    terminating_replicas: int | None = None
    observed_generation: int | None = None
    conditions: list[ReplicaSetCondition] | None = Field(None, json_schema_extra=merge_key("type"))


class ReplicaSet(ApiModel):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["ReplicaSet"] = "ReplicaSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ReplicaSetSpec | None = None
    status: ReplicaSetStatus | None = None


# --- DaemonSet ---------------------------------------------------------------------------------


class RollingUpdateDaemonSet(ApiModel):
    max_unavailable: IntOrString | None = None  # default 1
    max_surge: IntOrString | None = None  # default 0


class DaemonSetUpdateStrategy(ApiModel):
    type: str | None = None  # RollingUpdate | OnDelete
    rolling_update: RollingUpdateDaemonSet | None = None


class DaemonSetSpec(ApiModel):
    selector: LabelSelector
    template: PodTemplateSpec
    update_strategy: DaemonSetUpdateStrategy | None = None
    min_ready_seconds: int | None = None
    revision_history_limit: int | None = None


class DaemonSetCondition(ApiModel):
    type: str
    status: str
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class DaemonSetStatus(ApiModel):
    current_number_scheduled: int = 0
    number_misscheduled: int = 0
    desired_number_scheduled: int = 0
    number_ready: int = 0
    observed_generation: int | None = None
    updated_number_scheduled: int | None = None
    number_available: int | None = None
    number_unavailable: int | None = None
    collision_count: int | None = None
    conditions: list[DaemonSetCondition] | None = Field(None, json_schema_extra=merge_key("type"))


class DaemonSet(ApiModel):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["DaemonSet"] = "DaemonSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DaemonSetSpec | None = None
    status: DaemonSetStatus | None = None


# --- StatefulSet -------------------------------------------------------------------------------


class RollingUpdateStatefulSetStrategy(ApiModel):
    partition: int | None = None  # default 0
    max_unavailable: IntOrString | None = None  # MaxUnavailableStatefulSet (alpha): default 1


class StatefulSetUpdateStrategy(ApiModel):
    type: str | None = None  # RollingUpdate | OnDelete
    rolling_update: RollingUpdateStatefulSetStrategy | None = None


class StatefulSetPersistentVolumeClaimRetentionPolicy(ApiModel):
    when_deleted: str | None = None  # Retain | Delete
    when_scaled: str | None = None  # Retain | Delete


class StatefulSetOrdinals(ApiModel):
    start: int | None = None


class StatefulSetSpec(ApiModel):
    replicas: int | None = None
    selector: LabelSelector
    template: PodTemplateSpec
    volume_claim_templates: list[PersistentVolumeClaim] | None = None
    service_name: str | None = None
    pod_management_policy: str | None = None  # OrderedReady | Parallel
    update_strategy: StatefulSetUpdateStrategy | None = None
    revision_history_limit: int | None = None
    min_ready_seconds: int | None = None
    persistent_volume_claim_retention_policy: StatefulSetPersistentVolumeClaimRetentionPolicy | None = None
    ordinals: StatefulSetOrdinals | None = None


class StatefulSetCondition(ApiModel):
    type: str
    status: str
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class StatefulSetStatus(ApiModel):
    observed_generation: int | None = None
    replicas: int = 0
    ready_replicas: int | None = None
    current_replicas: int | None = None
    updated_replicas: int | None = None
    current_revision: str | None = None
    update_revision: str | None = None
    collision_count: int | None = None
    conditions: list[StatefulSetCondition] | None = Field(None, json_schema_extra=merge_key("type"))
    available_replicas: int = 0


class StatefulSet(ApiModel):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["StatefulSet"] = "StatefulSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: StatefulSetSpec | None = None
    status: StatefulSetStatus | None = None


# --- ControllerRevision ------------------------------------------------------------------------


class ControllerRevision(ApiModel):
    """An immutable snapshot of state data (a DaemonSet's or StatefulSet's template patch) at a revision."""

    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["ControllerRevision"] = "ControllerRevision"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    data: dict[str, Any] | None = None
    revision: int
