"""scheduling.k8s.io/v1 PriorityClass (upstream k8s.io/api/scheduling/v1/types.go): a name for a pod
priority. The Priority admission plugin resolves a pod's priorityClassName into spec.priority and
spec.preemptionPolicy; the scheduler orders its queue by that priority and preempts lower ones."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.meta import ObjectMeta

# upstream pkg/apis/scheduling/types.go
SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"
SYSTEM_CRITICAL_PRIORITY = 2 * 1000000000  # SystemCriticalPriority
HIGHEST_USER_DEFINABLE_PRIORITY = 1000000000
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
# the classes every cluster has (SystemPriorityClasses), created by the apiserver at start
SYSTEM_PRIORITY_CLASSES: dict[str, tuple[int, str]] = {
    SYSTEM_NODE_CRITICAL: (SYSTEM_CRITICAL_PRIORITY + 1000, "Used for system critical pods that must not be moved "
                                                            "from their current node."),
    SYSTEM_CLUSTER_CRITICAL: (SYSTEM_CRITICAL_PRIORITY, "Used for system critical pods that must run in the cluster, "
                                                        "but can be moved to another node if necessary."),
}
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"


class PriorityClass(ApiModel):
    api_version: Literal["scheduling.k8s.io/v1"] = "scheduling.k8s.io/v1"
    kind: Literal["PriorityClass"] = "PriorityClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    value: int
    global_default: bool | None = None
    description: str | None = None
    preemption_policy: str | None = None  # PreemptLowerPriority (default) | Never
