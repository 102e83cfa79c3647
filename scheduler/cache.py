"""The scheduler's cache (kube-scheduler's internal/cache): one NodeInfo per node, holding the pods
bound to it — and the pods the scheduler has *assumed* onto it.

Assuming is what lets the scheduler decide the next pod before the apiserver has answered the
last binding: the moment a node is chosen, the pod's requests, ports and owner count land on that
node here. The informer's later "pod now has spec.nodeName" confirms it (`add_pod` of an assumed
pod); a failed binding `forget_pod`s it. Either way no pod is counted twice or lost, so a burst of
pods cannot overcommit a node while the informer lags behind.

Pods on a node without a Node object (deleted, or not seen yet) are kept on a NodeInfo without a
node, which snapshots leave out; it disappears once empty.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from machinery.api.core_v1 import Node
from scheduler.framework import NodeInfo, PodInfo, Snapshot

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _PodState:
    info: PodInfo
    node: str
    assumed: bool
    binding_finished: bool = False


class Cache:
    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodState] = {}
        self._snapshot: Snapshot | None = None

    # -- nodes --------------------------------------------------------------------------------

    def add_node(self, node: Node) -> NodeInfo:
        name = node.metadata.name or ""
        info = self._nodes.get(name)
        if info is None:
            info = self._nodes[name] = NodeInfo(name)
        if info.node is None:
            self._snapshot = None
        info.set_node(node)
        return info

    update_node = add_node

    def remove_node(self, node: Node | str) -> None:
        name = node if isinstance(node, str) else node.metadata.name or ""
        info = self._nodes.get(name)
        if info is None:
            return
        self._snapshot = None
        if info.pods:
            info.node = None  # its pods stay accounted until they are deleted
        else:
            del self._nodes[name]

    def node_infos(self) -> list[NodeInfo]:
        return list(self._nodes.values())

    def get_node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def snapshot(self) -> Snapshot:
        """The nodes with a Node object. NodeInfos are shared with the cache: valid for one
        synchronous scheduling cycle (see scheduler.framework)."""
        if self._snapshot is None:
            self._snapshot = Snapshot([info for info in self._nodes.values() if info.node is not None])
        return self._snapshot

    # -- pods ---------------------------------------------------------------------------------

    def assume_pod(self, pod: PodInfo, node: str) -> None:
        """Count `pod` on `node` now, before the binding is confirmed."""
        if pod.key in self._pods:
            raise ValueError(f"pod {pod.namespace}/{pod.name} is already in the cache")
        self._place(pod, node)
        self._pods[pod.key] = _PodState(pod, node, assumed=True)

    def finish_binding(self, pod: PodInfo) -> None:
        state = self._pods.get(pod.key)
        if state is not None and state.assumed:
            state.binding_finished = True

    def forget_pod(self, pod: PodInfo) -> bool:
        """Undo `assume_pod` (the binding failed). A pod the informer has confirmed meanwhile stays."""
        state = self._pods.get(pod.key)
        if state is None or not state.assumed:
            return False
        self._unplace(state)
        del self._pods[pod.key]
        return True

    def is_assumed(self, key: str) -> bool:
        state = self._pods.get(key)
        return state is not None and state.assumed

    def add_pod(self, pod: PodInfo) -> None:
        """A pod the informer reports bound (spec.nodeName set): confirms an assumed pod."""
        node = pod.node_name or ""
        state = self._pods.get(pod.key)
        if state is not None:
            if state.assumed and state.node != node:
                log.warning("pod %s/%s was assumed on %s but is bound to %s", pod.namespace, pod.name,
                            state.node, node)
            self._unplace(state)
        self._place(pod, node)
        self._pods[pod.key] = _PodState(pod, node, assumed=False)

    def update_pod(self, pod: PodInfo) -> None:
        self.add_pod(pod)

    def remove_pod(self, key: str) -> PodInfo | None:
        state = self._pods.pop(key, None)
        if state is None:
            return None
        self._unplace(state)
        return state.info

    def get_pod(self, key: str) -> PodInfo | None:
        state = self._pods.get(key)
        return state.info if state is not None else None

    def pod_count(self) -> int:
        return len(self._pods)

    def assumed_count(self) -> int:
        return sum(1 for state in self._pods.values() if state.assumed)

    # -- internals ----------------------------------------------------------------------------

    def _place(self, pod: PodInfo, node: str) -> None:
        info = self._nodes.get(node)
        if info is None:
            info = self._nodes[node] = NodeInfo(node)  # no Node object (yet): not in snapshots
        info.add_pod(pod)

    def _unplace(self, state: _PodState) -> None:
        info = self._nodes.get(state.node)
        if info is None:
            return
        info.remove_pod(state.info)
        if info.node is None and not info.pods:
            del self._nodes[state.node]
