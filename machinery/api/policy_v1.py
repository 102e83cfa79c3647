"""policy/v1: PodDisruptionBudget and Eviction, as in upstream's k8s.io/api/policy/v1/types.go."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.core_v1 import IntOrString
from machinery.api.meta import DeleteOptions, LabelSelector, ObjectMeta, Time

# the DisruptionAllowed condition and its reasons (policy/v1 types.go)
DISRUPTION_ALLOWED_CONDITION = "DisruptionAllowed"
SYNC_FAILED_REASON = "SyncFailed"
SUFFICIENT_PODS_REASON = "SufficientPods"
INSUFFICIENT_PODS_REASON = "InsufficientPods"
# the StatusCause type of an eviction refused by a budget
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
UNHEALTHY_POD_EVICTION_POLICIES = ["AlwaysAllow", "IfHealthyBudget"]


class Condition(ApiModel):
    """metav1.Condition."""

    type: str
    status: str  # True | False | Unknown
    observed_generation: int | None = None
    last_transition_time: Time
    reason: str
    message: str


class PodDisruptionBudgetSpec(ApiModel):
    min_available: IntOrString | None = None
    selector: LabelSelector | None = None
    max_unavailable: IntOrString | None = None
    unhealthy_pod_eviction_policy: str | None = None  # IfHealthyBudget (nil) | AlwaysAllow


class PodDisruptionBudgetStatus(ApiModel):
    observed_generation: int | None = None
    disrupted_pods: dict[str, Time] | None = None
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    conditions: list[Condition] | None = None


class PodDisruptionBudget(ApiModel):
    api_version: Literal["policy/v1"] = "policy/v1"
    kind: Literal["PodDisruptionBudget"] = "PodDisruptionBudget"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec | None = None
    status: PodDisruptionBudgetStatus | None = None


class Eviction(ApiModel):
    """POSTed to pods/{name}/eviction: evict that pod, if its budget allows."""

    api_version: Literal["policy/v1", "policy/v1beta1"] = "policy/v1"
    kind: Literal["Eviction"] = "Eviction"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    delete_options: DeleteOptions | None = None
