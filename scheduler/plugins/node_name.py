"""NodeName: a pod that names its node (spec.nodeName) fits that node only."""

from __future__ import annotations

from scheduler.framework import SUCCESS, NodeInfo, PodInfo, Status

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


def skip(pod: PodInfo) -> bool:
    """PreFilter: a pod that names no node fits every node's name."""
    return not pod.node_name


def node_name(pod: PodInfo, node: NodeInfo) -> Status:
    wanted = pod.node_name
    if not wanted or wanted == node.name:
        return SUCCESS
    return Status.unschedulable(ERR_REASON, unresolvable=True)
