"""Taints and tolerations (upstream k8s.io/api/core/v1 toleration.go, well_known_taints.go), shared by
the scheduler's TaintToleration and NodeReady/NodeUnschedulable plugins and the node lifecycle
controller's taints and evictions."""

from __future__ import annotations

from collections.abc import Iterable

from machinery.api.core_v1 import Taint, Toleration

# well_known_taints.go: the taints the node lifecycle controller (and the kubelet) put on nodes
TAINT_NODE_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NODE_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_NODE_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_NODE_NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"
TAINT_NODE_PID_PRESSURE = "node.kubernetes.io/pid-pressure"


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Toleration.ToleratesTaint: an empty effect or key matches any; Exists ignores the value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.value or "") == (taint.value or "")
    return False


def tolerates_taint(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)
