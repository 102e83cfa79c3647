"""autoscaling/v2: HorizontalPodAutoscaler, as in upstream's k8s.io/api/autoscaling/v2/types.go."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.core_v1 import Quantity
from machinery.api.meta import LabelSelector, ObjectMeta, Time

# metric source types (MetricSourceType) and metric target types (MetricTargetType)
OBJECT, PODS, RESOURCE, CONTAINER_RESOURCE, EXTERNAL = "Object", "Pods", "Resource", "ContainerResource", "External"
METRIC_SOURCE_TYPES = (CONTAINER_RESOURCE, EXTERNAL, OBJECT, PODS, RESOURCE)  # upstream's sorted list
UTILIZATION, VALUE, AVERAGE_VALUE = "Utilization", "Value", "AverageValue"
# conditions (HorizontalPodAutoscalerConditionType)
ABLE_TO_SCALE, SCALING_ACTIVE, SCALING_LIMITED = "AbleToScale", "ScalingActive", "ScalingLimited"
DEFAULT_CPU_UTILIZATION = 80


class CrossVersionObjectReference(ApiModel):
    kind: str
    name: str
    api_version: str | None = None


class MetricTarget(ApiModel):
    type: str
    value: Quantity | None = None
    average_value: Quantity | None = None
    average_utilization: int | None = None


class MetricValueStatus(ApiModel):
    value: Quantity | None = None
    average_value: Quantity | None = None
    average_utilization: int | None = None


class MetricIdentifier(ApiModel):
    name: str
    selector: LabelSelector | None = None


class ResourceMetricSource(ApiModel):
    name: str
    target: MetricTarget


class ContainerResourceMetricSource(ApiModel):
    name: str
    target: MetricTarget
    container: str


class PodsMetricSource(ApiModel):
    metric: MetricIdentifier
    target: MetricTarget


class ObjectMetricSource(ApiModel):
    described_object: CrossVersionObjectReference
    target: MetricTarget
    metric: MetricIdentifier


class ExternalMetricSource(ApiModel):
    metric: MetricIdentifier
    target: MetricTarget


class MetricSpec(ApiModel):
    type: str
    object: ObjectMetricSource | None = None
    pods: PodsMetricSource | None = None
    resource: ResourceMetricSource | None = None
    container_resource: ContainerResourceMetricSource | None = None
    external: ExternalMetricSource | None = None


class HPAScalingPolicy(ApiModel):
    type: str  # Pods | Percent
    value: int
    period_seconds: int


class HPAScalingRules(ApiModel):
    stabilization_window_seconds: int | None = None
    select_policy: str | None = None  # Max | Min | Disabled
    policies: list[HPAScalingPolicy] | None = None
    tolerance: Quantity | None = None


class HorizontalPodAutoscalerBehavior(ApiModel):
    scale_up: HPAScalingRules | None = None
    scale_down: HPAScalingRules | None = None


class HorizontalPodAutoscalerSpec(ApiModel):
    scale_target_ref: CrossVersionObjectReference
    min_replicas: int | None = None
    max_replicas: int
    metrics: list[MetricSpec] | None = None
    behavior: HorizontalPodAutoscalerBehavior | None = None


class ResourceMetricStatus(ApiModel):
    name: str
    current: MetricValueStatus


class ContainerResourceMetricStatus(ApiModel):
    name: str
    current: MetricValueStatus
    container: str


class PodsMetricStatus(ApiModel):
    metric: MetricIdentifier
    current: MetricValueStatus


class ObjectMetricStatus(ApiModel):
    metric: MetricIdentifier
    current: MetricValueStatus
    described_object: CrossVersionObjectReference


class ExternalMetricStatus(ApiModel):
    metric: MetricIdentifier
    current: MetricValueStatus


class MetricStatus(ApiModel):
    type: str
    object: ObjectMetricStatus | None = None
    pods: PodsMetricStatus | None = None
    resource: ResourceMetricStatus | None = None
    container_resource: ContainerResourceMetricStatus | None = None
    external: ExternalMetricStatus | None = None


class HorizontalPodAutoscalerCondition(ApiModel):
    type: str
    status: str
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class HorizontalPodAutoscalerStatus(ApiModel):
    observed_generation: int | None = None
    last_scale_time: Time | None = None
    current_replicas: int | None = None
    desired_replicas: int = 0
    current_metrics: list[MetricStatus] | None = None
    conditions: list[HorizontalPodAutoscalerCondition] | None = None


class HorizontalPodAutoscaler(ApiModel):
    api_version: Literal["autoscaling/v2"] = "autoscaling/v2"
    kind: Literal["HorizontalPodAutoscaler"] = "HorizontalPodAutoscaler"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: HorizontalPodAutoscalerSpec | None = None
    status: HorizontalPodAutoscalerStatus | None = None
