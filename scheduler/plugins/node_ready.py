"""NodeReady (minik8s): a node whose Ready condition is not True takes no new pods.

Upstream leaves this to taints: the kubelet registers its node with
`node.kubernetes.io/not-ready:NoSchedule`, and the node lifecycle controller keeps
`node.kubernetes.io/not-ready` / `node.kubernetes.io/unreachable` on nodes whose Ready condition is
False / Unknown, which TaintToleration then filters on. Here the scheduler does not wait for those
taints: it treats the condition itself as the taint it implies, so a pod that tolerates that taint
still fits, and the failure reads exactly as the taint's would.
"""

from __future__ import annotations

from collections.abc import Sequence

from machinery.api.core_v1 import Taint
from machinery.taints import TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE, tolerates_taint
from scheduler.framework import SUCCESS, NodeInfo, PodInfo, Status

NAME = "NodeReady"

_NOT_READY = Taint(key=TAINT_NODE_NOT_READY, effect="NoSchedule")
_UNREACHABLE = Taint(key=TAINT_NODE_UNREACHABLE, effect="NoSchedule")


def implied_taint(node: NodeInfo) -> Taint | None:
    """The taint the node's Ready condition implies: none if Ready=True, unreachable if Unknown,
    not-ready if False or missing (a node that never reported is not ready yet)."""
    if node.ready == "True":
        return None
    return _UNREACHABLE if node.ready == "Unknown" else _NOT_READY


def node_ready(pod: PodInfo, node: NodeInfo) -> Status:
    taint = implied_taint(node)
    if taint is None or tolerates_taint(pod.tolerations, taint):
        return SUCCESS
    return Status.unschedulable(f"node(s) had untolerated taint {{{taint.key}: }}", unresolvable=True)


def node_ready_nodes(pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[tuple[int, Status]]:
    """node_ready's failures among nodes (only nodes not Ready can fail)."""
    out = []
    for i, node in enumerate(nodes):
        if node.ready != "True":
            status = node_ready(pod, node)
            if status is not SUCCESS:
                out.append((i, status))
    return out
