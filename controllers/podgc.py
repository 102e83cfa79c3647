"""The pod garbage collector (upstream pkg/controller/podgc/gc_controller.go), every 20 s (gcCheckPeriod):

- terminated pods (Succeeded, Failed) over `--terminated-pod-gc-threshold` (12500; 0 turns this off)
  are deleted, evicted ones first, then the oldest (byEvictionAndCreationTimestamp);
- pods terminating on a node that is not Ready and carries the `node.kubernetes.io/out-of-service`
  taint (gcTerminating);
- orphaned pods, bound to a node that no longer exists: the node is quarantined 40 s (quarantineTime)
  and looked up again through the API before its pods go, each first marked Failed with the
  DisruptionTarget condition (DeletionByPodGC, "PodGC: node no longer exists") (gcOrphaned);
- terminating pods never scheduled (gcUnscheduledTerminating).

Each deletion is upstream's markFailedAndDeletePodWithCondition: a pod not yet terminal is patched to
phase Failed (with the condition, if any) through pods/status, then force-deleted (grace 0).
The period and the quarantine are constants upstream; minik8s takes them as flags for tests.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from machinery import timeutil
from machinery.api.core_v1 import Node, Pod
from machinery.client import ApiClient, ApiError
from machinery.informer import Informer, SharedInformerFactory

log = logging.getLogger(__name__)

GC_CHECK_PERIOD = 20.0
QUARANTINE_TIME = 40.0
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
GC_KEY = "gc"


def is_terminated(pod: Pod) -> bool:
    return pod.status is not None and pod.status.phase in ("Succeeded", "Failed")


def is_terminating(pod: Pod) -> bool:
    return not is_terminated(pod) and pod.metadata.deletion_timestamp is not None


def is_evicted(pod: Pod) -> bool:
    return pod.status is not None and pod.status.phase == "Failed" and pod.status.reason == "Evicted"


def eviction_and_creation_order(pod: Pod) -> tuple[bool, dt.datetime, str]:
    """byEvictionAndCreationTimestamp: evicted first, then oldest, names break ties."""
    created = timeutil.parse_rfc3339(pod.metadata.creation_timestamp) if pod.metadata.creation_timestamp else None
    return (not is_evicted(pod), created or dt.datetime.min.replace(tzinfo=dt.UTC), pod.metadata.name or "")


def terminated_to_delete(pods: list[Pod], threshold: int) -> list[Pod]:
    """gcTerminated: the terminated pods over the threshold, in deletion order."""
    if threshold <= 0:
        return []
    terminated = [p for p in pods if is_terminated(p)]
    count = len(terminated) - threshold
    if count <= 0:
        return []
    return sorted(terminated, key=eviction_and_creation_order)[:count]


def is_node_ready(node: Node) -> bool:
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def out_of_service(node: Node) -> bool:
    return any(t.key == OUT_OF_SERVICE_TAINT for t in (node.spec.taints if node.spec else None) or [])


class PodGCController:
    name = "podgc"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, terminated_pod_gc_threshold: int = 12500,
                 period: float = GC_CHECK_PERIOD, quarantine: float = QUARANTINE_TIME,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.threshold = terminated_pod_gc_threshold
        self.period = period
        self.quarantine = quarantine
        self.clock = clock
        self.pods: Informer[Pod] = informers.informer_for(Pod)
        self.nodes: Informer[Node] = informers.informer_for(Node)
        self.informers: list[Informer[Any]] = [self.pods, self.nodes]
        self.node_queue: dict[str, float] = {}  # missing node -> when its quarantine ends

    async def run(self) -> None:
        for informer in self.informers:
            await informer.wait_for_sync()
        log.info("podgc: caches synced, collecting every %.0fs (threshold %d)", self.period, self.threshold)
        while True:
            try:
                await self.gc()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # one failed pass must not end the controller
                log.warning("podgc: garbage collection failed: %s", e)
            await asyncio.sleep(self.period)

    async def gc(self) -> int:
        """One pass; the number of pods deleted."""
        pods = self.pods.store.list()
        nodes = self.nodes.store.list()
        deleted = 0
        if self.threshold > 0:
            deleted += await self._delete_all(terminated_to_delete(pods, self.threshold), None)
        deleted += await self._gc_terminating(pods)
        deleted += await self._gc_orphaned(pods, nodes)
        unscheduled = [p for p in pods if is_terminating(p) and not (p.spec and p.spec.node_name)]
        deleted += await self._delete_all(unscheduled, None)
        return deleted

    async def _gc_terminating(self, pods: list[Pod]) -> int:
        chosen = []
        for pod in pods:
            if not is_terminating(pod) or not (pod.spec and pod.spec.node_name):
                continue
            node = self.nodes.store.get(pod.spec.node_name)
            if node is None:
                continue
            if not is_node_ready(node) and out_of_service(node):
                chosen.append(pod)
        if chosen:
            log.info("podgc: garbage collecting %d pods that are terminating on nodes tainted with %s", len(chosen),
                     OUT_OF_SERVICE_TAINT)
        return await self._delete_all(sorted(chosen, key=eviction_and_creation_order), None)

    async def _gc_orphaned(self, pods: list[Pod], nodes: list[Node]) -> int:
        existing = {n.metadata.name for n in nodes}
        now = self.clock()
        for pod in pods:
            node = pod.spec.node_name if pod.spec else None
            if node and node not in existing and node not in self.node_queue:
                self.node_queue[node] = now + self.quarantine
        deleted_nodes = set()
        for node, due in list(self.node_queue.items()):
            if node in existing:
                del self.node_queue[node]
                continue
            if due > now:
                continue
            del self.node_queue[node]
            if not await self._node_exists(node):  # the cache may be behind: ask the apiserver
                deleted_nodes.add(node)
        orphans = [p for p in pods if p.spec and p.spec.node_name in deleted_nodes]
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                     "message": "PodGC: node no longer exists"}
        count = 0
        for pod in orphans:
            log.info("podgc: found orphaned Pod %s/%s assigned to the Node %s, deleting", pod.metadata.namespace,
                     pod.metadata.name, pod.spec.node_name if pod.spec else "")
            count += await self._delete_all([pod], condition)
        return count

    async def _node_exists(self, name: str) -> bool:
        try:
            await self.client.get_raw(Node, name)
        except ApiError as e:
            if e.is_not_found:
                return False
            raise
        return True

    async def _delete_all(self, pods: list[Pod], condition: dict[str, str] | None) -> int:
        results = await asyncio.gather(*(self.mark_failed_and_delete(p, condition) for p in pods),
                                       return_exceptions=True)
        for pod, result in zip(pods, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("podgc: deleting pod %s/%s failed: %s", pod.metadata.namespace, pod.metadata.name, result)
        return sum(1 for r in results if r is True)

    async def mark_failed_and_delete(self, pod: Pod, condition: dict[str, str] | None) -> bool:
        """markFailedAndDeletePodWithCondition; True when the pod is gone (or was already)."""
        namespace, name = pod.metadata.namespace, pod.metadata.name or ""
        log.info("podgc: PodGC is force deleting Pod %s/%s", namespace, name)
        try:
            if not is_terminated(pod):
                status: dict[str, Any] = {"phase": "Failed"}
                if condition is not None:
                    status["conditions"] = [{**condition, "lastTransitionTime": timeutil.now_rfc3339()}]
                await self.client.patch_raw(Pod, name, {"metadata": {"uid": pod.metadata.uid}, "status": status},
                                            "strategic", namespace, subresource="status")
            await self.client.delete_raw(Pod, name, namespace, grace_period_seconds=0,
                                         preconditions={"uid": pod.metadata.uid or ""})
        except ApiError as e:
            if e.is_not_found:
                return True
            raise
        return True
