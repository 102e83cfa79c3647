"""NodeUnschedulable: a cordoned node (spec.unschedulable) takes no new pods, unless the pod
tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint (as DaemonSet pods do)."""

from __future__ import annotations

from collections.abc import Sequence

from machinery.api.core_v1 import Taint
from machinery.taints import TAINT_NODE_UNSCHEDULABLE, tolerates_taint
from scheduler.framework import SUCCESS, NodeInfo, PodInfo, Status

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

_UNSCHEDULABLE_TAINT = Taint(key=TAINT_NODE_UNSCHEDULABLE, effect="NoSchedule")
_UNSCHEDULABLE = Status.unschedulable(ERR_REASON_UNSCHEDULABLE, unresolvable=True)


def node_unschedulable(pod: PodInfo, node: NodeInfo) -> Status:
    if not node.unschedulable or tolerates_taint(pod.tolerations, _UNSCHEDULABLE_TAINT):
        return SUCCESS
    return Status.unschedulable(ERR_REASON_UNSCHEDULABLE, unresolvable=True)


def node_unschedulable_nodes(pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[tuple[int, Status]]:
    """node_unschedulable's failures among nodes."""
    if tolerates_taint(pod.tolerations, _UNSCHEDULABLE_TAINT):
        return []
    return [(i, _UNSCHEDULABLE) for i, node in enumerate(nodes) if node.unschedulable]
