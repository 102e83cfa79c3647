"""NodeUnschedulable: a cordoned node (spec.unschedulable) takes no new pods, unless the pod
tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint (as DaemonSet pods do)."""

from __future__ import annotations

from machinery.api.core_v1 import Taint
from machinery.taints import TAINT_NODE_UNSCHEDULABLE, tolerates_taint
from scheduler.framework import SUCCESS, NodeInfo, PodInfo, Status

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

_UNSCHEDULABLE_TAINT = Taint(key=TAINT_NODE_UNSCHEDULABLE, effect="NoSchedule")


def node_unschedulable(pod: PodInfo, node: NodeInfo) -> Status:
    if not node.unschedulable or tolerates_taint(pod.tolerations, _UNSCHEDULABLE_TAINT):
        return SUCCESS
    return Status.unschedulable(ERR_REASON_UNSCHEDULABLE, unresolvable=True)
