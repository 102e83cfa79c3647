"""NodePorts: a pod's hostPorts must be free on the node (0.0.0.0 clashes with every address)."""

from __future__ import annotations

from scheduler.framework import SUCCESS, NodeInfo, PodInfo, Status

NAME = "NodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


def skip(pod: PodInfo) -> bool:
    """PreFilter: a pod without host ports cannot clash."""
    return not pod.host_ports


def node_ports(pod: PodInfo, node: NodeInfo) -> Status:
    for ip, protocol, port in pod.host_ports:
        if node.used_ports.conflicts(ip, protocol, port):
            return Status.unschedulable(ERR_REASON)
    return SUCCESS
