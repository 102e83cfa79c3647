"""The replication controller (upstream pkg/controller/replication): ReplicationControllers kept at
spec.replicas pods by the ReplicaSet controller's own logic, as upstream's ReplicationManager wraps
the ReplicaSetController with conversion adapters. What differs is only what it manages (v1
ReplicationController), how it reads the selector (a plain label map: every pair must match), the
status type it writes, and its name: events and writes as kube-system/replication-controller."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controllers.replicaset import ReplicaSetController, calculate_status
from machinery.api.core_v1 import Pod, ReplicationController, ReplicationControllerStatus
from machinery.selectors import LabelSelector, selector_from_label_selector

CONTROLLER_NAME = "replication-controller"


def rc_selector(rc: Any) -> LabelSelector:
    """An RC's spec.selector (a map) as a matcher; an empty or broken one matches nothing."""
    labels = (rc.spec.selector if rc.spec is not None else None) or {}
    if not labels:
        return LabelSelector.nothing()
    try:
        return selector_from_label_selector({"matchLabels": dict(labels)})
    except ValueError:
        return LabelSelector.nothing()


class ReplicationManager(ReplicaSetController):
    name = "replicationcontroller"  # its --controllers name
    model = ReplicationController
    api_version = "v1"
    kind = "ReplicationController"
    controller_name = CONTROLLER_NAME

    def selector_of(self, rs: Any) -> LabelSelector:
        return rc_selector(rs)

    def calculate_status(self, rs: Any, pods: Sequence[Pod], manage_error: Exception | None) -> Any:
        status = calculate_status(rs, pods, manage_error)
        return ReplicationControllerStatus.model_validate(status.model_dump(mode="json", by_alias=True,
                                                                            exclude_none=True))
