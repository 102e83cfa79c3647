"""The scheduler loop: informers feed the cache and the queue; one pod at a time is popped,
filtered and scored against a snapshot of the nodes, assumed onto the chosen node, and bound
through the pods/binding subresource in the background.

- Pods come from one informer over every pod not yet finished
  (`status.phase!=Succeeded,status.phase!=Failed`, as upstream): those with spec.nodeName are
  the cache's (what each node already runs), those without, for this scheduler's name and not
  being deleted, are the queue's.
- Nodes come from Node objects. Until kubelets register them, tests and benchmarks create them
  through the API with status.allocatable/capacity and a Ready condition, acting as kubelets.
- A scheduling cycle never awaits: pop, snapshot, filter, score, select, assume. So the next cycle
  already sees this pod's requests on its node, however far behind the informer is, and a burst of
  pods cannot overcommit a node. Binding runs as a task; if it fails the pod is forgotten in the
  cache and requeued with backoff.
- A pod that fits nowhere gets a FailedScheduling event and PodScheduled=False condition with
  upstream's message, and waits in the queue until a node is added or changes, or a bound pod goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
import random
from typing import Any

import orjson

from machinery import tracing
from machinery.api.core_v1 import Node, PersistentVolume, PersistentVolumeClaim, Pod
from machinery.api.policy_v1 import PodDisruptionBudget
from machinery.api.storage_v1 import StorageClass
from machinery.client import KUBE_VERSION, ApiClient, ApiError, ClientError
from machinery.events import EventRecorder
from machinery.informer import Informer, SharedInformerFactory, strip_managed_fields
from machinery.timeutil import now_rfc3339
from machinery.volumeutil import ANN_SELECTED_NODE
from scheduler import metrics
from scheduler.cache import Cache
from scheduler.framework import Filter, FitError, Framework, PodInfo, pod_key
from scheduler.plugins import default_framework, default_preemption, volume_binding
from scheduler.queue import (
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    DEFAULT_POD_INITIAL_BACKOFF,
    DEFAULT_POD_MAX_BACKOFF,
    NODE_ADD,
    NODE_UPDATE,
    QueueClosed,
    QueuedPodInfo,
    SchedulingQueue,
)

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER_NAME = "default-scheduler"
SCHEDULER_USERNAME = "system:kube-scheduler"
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
# Bindings in flight. One costs the apiserver ~0.7 ms of CPU but takes ~16 ms (p50) with 16 in flight while the
# apiserver is only 0.66 cores busy: latency, not CPU, held 16 to ~900 bindings/s where 64 reach ~1,900/s (closed
# loop, 2 cores). Upstream binds every pod in its own goroutine, limited only by the client's QPS.
DEFAULT_BIND_CONCURRENCY = 64
EVENT_WORKERS = 1


def _arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine or "unknown")


def user_agent() -> str:
    """`kube-scheduler/v1.30.0 (linux/amd64) minik8s/system:kube-scheduler`: who calls, in the audit log."""
    system = platform.system().lower() or "linux"
    return f"kube-scheduler/{KUBE_VERSION} ({system}/{_arch()}) minik8s/{SCHEDULER_USERNAME}"


# upstream's PersistentVolumeClaimAdd / PersistentVolumeClaimUpdate cluster events, as one
PVC_CHANGE = "PersistentVolumeClaimChange"


class Scheduler:
    def __init__(
        self,
        client: ApiClient,
        *,
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        pod_initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
        pod_max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
        framework: Framework | None = None,
        bind_concurrency: int = DEFAULT_BIND_CONCURRENCY,
        seed: int | None = None,
    ) -> None:
        self.client = client
        self.name = scheduler_name
        self.framework = framework or default_framework()
        self.cache = Cache()
        self.queue = SchedulingQueue(pod_initial_backoff, pod_max_backoff)
        # One writer: events trail the bindings instead of competing with them for the apiserver (upstream
        # writes events through their own rate-limited client); they catch up once a burst is bound.
        self.recorder = EventRecorder(client, scheduler_name, workers=EVENT_WORKERS)
        self.factory = SharedInformerFactory(client, transform=strip_managed_fields)  # as upstream's scheduler
        self.node_informer: Informer[Node] = self.factory.informer_for(Node)
        self.pod_informer: Informer[Pod] = self.factory.informer_for(Pod, field_selector=POD_FIELD_SELECTOR)
        self.claim_informer: Informer[PersistentVolumeClaim] = self.factory.informer_for(PersistentVolumeClaim)
        self.class_informer: Informer[StorageClass] = self.factory.informer_for(StorageClass)
        self.volume_informer: Informer[PersistentVolume] = self.factory.informer_for(PersistentVolume)
        # preemption spares pods a budget protects where it can (upstream's PDB lister)
        self.pdb_informer: Informer[PodDisruptionBudget] = self.factory.informer_for(PodDisruptionBudget)
        # a claim created or bound may make a pod waiting for it schedulable
        self.claim_informer.add_event_handler(self._on_claim_change, lambda _old, new: self._on_claim_change(new),
                                              None)
        self.framework = Framework(
            [*self.framework.filters, Filter(volume_binding.NAME,
                                             volume_binding.volume_binding(self._claim, self._storage_class,
                                                                           self.volume_informer.get),
                                             volume_binding.skip)],
            self.framework.scores, self.framework.percentage_of_nodes_to_score)
        self.node_informer.add_event_handler(self._on_node_add, self._on_node_update, self._on_node_delete)
        self.pod_informer.add_event_handler(self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        self._rng = random.Random(seed)
        self._next_start = 0
        self._bind_slots = asyncio.Semaphore(bind_concurrency)
        self._tasks: set[asyncio.Task[Any]] = set()
        self.ready = asyncio.Event()
        # counters (logs, tests, benchmarks)
        self.scheduled = 0
        self.unschedulable = 0
        self.bind_errors = 0
        self.preemptions = 0
        # node → pods preemption nominated there (status.nominatedNodeName), not bound yet
        self.nominated: dict[str, dict[str, PodInfo]] = {}
        self._nominated_node: dict[str, str] = {}
        metrics.register(self)  # its counters in /metrics

    def _on_claim_change(self, claim: PersistentVolumeClaim) -> None:
        self.queue.move_all_to_active_or_backoff(PVC_CHANGE)

    def _claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.claim_informer.get(name, namespace)

    def _storage_class(self, name: str) -> StorageClass | None:
        return self.class_informer.get(name)

    # -- which pods are ours ----------------------------------------------------------------

    def responsible_for(self, pod: Pod) -> bool:
        """Unbound, for this scheduler, not being deleted."""
        spec = pod.spec
        if spec is None or spec.node_name or pod.metadata.deletion_timestamp is not None:
            return False
        return (spec.scheduler_name or DEFAULT_SCHEDULER_NAME) == self.name

    # -- informer handlers (synchronous: atomic on the loop) --------------------------------

    def _on_node_add(self, node: Node) -> None:
        self.cache.add_node(node)
        self.queue.move_all_to_active_or_backoff(NODE_ADD)

    def _on_node_update(self, old: Node, new: Node) -> None:
        self.cache.update_node(new)
        if _node_scheduling_properties(old) != _node_scheduling_properties(new):
            self.queue.move_all_to_active_or_backoff(NODE_UPDATE)

    def _on_node_delete(self, node: Node) -> None:
        self.cache.remove_node(node)

    def _nominate(self, pod: Pod) -> None:
        """Keep the nominated pods' index: a pending pod with status.nominatedNodeName holds its room."""
        key = pod_key(pod)
        before = self._nominated_node.pop(key, None)
        if before is not None:
            held = self.nominated.get(before) or {}
            held.pop(key, None)
            if not held:
                self.nominated.pop(before, None)
        node = pod.status.nominated_node_name if pod.status is not None else None
        if node and self.responsible_for(pod):
            self.nominated.setdefault(node, {})[key] = PodInfo(pod)
            self._nominated_node[key] = node

    def _on_pod_add(self, pod: Pod) -> None:
        if pod.spec is not None and pod.spec.node_name:
            self.cache.add_pod(PodInfo(pod))
        elif self.responsible_for(pod):
            self.queue.add(PodInfo(pod))
            self._nominate(pod)

    def _on_pod_update(self, old: Pod, new: Pod) -> None:
        self._nominate(new)
        if new.spec is not None and new.spec.node_name:
            info = PodInfo(new)
            if not (old.spec is not None and old.spec.node_name):
                self.queue.delete(info)  # bound (by us or by someone else)
            before = self.cache.get_pod(info.key)
            self.cache.add_pod(info)
            if before is not None and _shrunk(before, info):
                self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_UPDATE)
            return
        if self.responsible_for(new):
            if old.metadata.resource_version == new.metadata.resource_version:
                return  # a resync: nothing new
            info = PodInfo(new)
            if self.cache.is_assumed(info.key):
                return  # being bound right now
            self.queue.update(old, info)
        else:
            self.queue.delete(new)  # being deleted, or handed to another scheduler

    def _on_pod_delete(self, pod: Pod) -> None:
        key = pod_key(pod)
        if key in self._nominated_node:
            node = self._nominated_node.pop(key)
            held = self.nominated.get(node) or {}
            held.pop(key, None)
            if not held:
                self.nominated.pop(node, None)
        if pod.spec is not None and pod.spec.node_name:
            if self.cache.remove_pod(key) is not None:
                self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
        else:
            self.queue.delete(key)

    # -- running ----------------------------------------------------------------------------

    async def sync(self) -> None:
        """Start the informers and wait until the caches are filled. A standby (leader election) calls
        this before campaigning, as upstream's does, so it takes over with warm caches."""
        if self.ready.is_set():
            return
        self.factory.start()
        await self.factory.wait_for_cache_sync()
        # The handlers must have put every bound pod into the cache before the first decision.
        await self.node_informer.wait_for_handlers()
        await self.pod_informer.wait_for_handlers()
        log.info("%s: caches synced: %d node(s), %d bound pod(s), %d pending pod(s)", self.name,
                 len(self.cache.snapshot()), self.cache.pod_count(), len(self.queue))
        self.ready.set()

    async def run(self) -> None:
        """Sync the caches (unless done already), then schedule until cancelled."""
        self.factory.start()
        upkeep = asyncio.create_task(self.queue.run(), name="scheduling-queue-upkeep")
        try:
            await self.sync()
            while True:
                try:
                    qpi = await self.queue.pop()
                except QueueClosed:
                    return
                try:
                    self.schedule_one(qpi)
                except Exception as e:  # a bug, not a verdict: retry the pod later
                    log.exception("scheduling %s/%s failed", qpi.pod_info.namespace, qpi.pod_info.name)
                    self._handle_failure(qpi, self.queue.scheduling_cycle, f"internal error: {e}", error=True)
                await asyncio.sleep(0)  # let bindings, events and informer handlers run
        finally:
            upkeep.cancel()
            self.queue.close()
            await self._drain()
            self.recorder.close()
            await self.factory.shutdown()

    async def _drain(self, timeout: float = 5.0) -> None:
        """Give in-flight bindings and events a moment to finish (graceful shutdown)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self._tasks:
                    await asyncio.gather(*list(self._tasks), return_exceptions=True)
                await self.recorder.flush()

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- one pod ----------------------------------------------------------------------------

    def schedule_one(self, qpi: QueuedPodInfo) -> str | None:
        """One scheduling cycle (synchronous). Returns the node the pod was assumed on, or None."""
        info = qpi.pod_info
        if self._skip(info):
            return None
        if not tracing.active():
            return self._cycle(qpi, None)
        # --tracing-config-file: the cycle is a span, current while it and the binding run (the binding ends it)
        span = tracing.start_span("scheduler.schedule_pod", {**tracing.object_attributes(info.pod, "v1", "Pod"),
                                                             "k8s.scheduler.profile": self.name})
        with tracing.use_span(span):
            try:
                node = self._cycle(qpi, span)
            except BaseException:
                tracing.end_span(span, {"k8s.scheduler.result": "error"})
                raise
        if node is None:
            tracing.end_span(span)
        return node

    def _cycle(self, qpi: QueuedPodInfo, span: Any) -> str | None:
        info = qpi.pod_info
        cycle = self.queue.scheduling_cycle
        snapshot = self.cache.snapshot()
        try:
            result = self.framework.schedule(info, snapshot, self._next_start, self._rng, self.nominated or None)
        except FitError as e:
            self.unschedulable += 1
            if span is not None:
                tracing.set_attributes(span, {"k8s.scheduler.result": "unschedulable",
                                              "k8s.scheduler.feasible_nodes": 0,
                                              "k8s.scheduler.filter": _filter_json(e.node_to_status, ())})
            qpi.unschedulable_plugins = {s.plugin for s in e.node_to_status.values() if s.plugin}
            if e.num_all_nodes:  # PostFilter: DefaultPreemption
                verdict = default_preemption.post_filter(self.framework, info, snapshot, e,
                                                         self.pdb_informer.list())
                e.post_filter_msg = verdict.message
                if verdict.candidate is not None:
                    self.preemptions += 1
                    log.info("%s/%s preempts %s on %s", info.namespace, info.name,
                             ", ".join(f"{v.namespace}/{v.name}" for v in verdict.candidate.victims),
                             verdict.candidate.node)
                    self._spawn(self._preempt(info, verdict.candidate), f"preempt:{info.namespace}/{info.name}")
            log.info("%s/%s is unschedulable: %s", info.namespace, info.name, e.message())
            self._handle_failure(qpi, cycle, e.message())
            return None
        self._next_start = result.next_start_index
        self.cache.assume_pod(info, result.node)
        if span is not None:
            tracing.set_attributes(span, {
                "k8s.scheduler.result": "scheduled", "k8s.scheduler.feasible_nodes": result.feasible_nodes,
                "k8s.scheduler.filter": _filter_json(result.statuses, result.feasible),
                "k8s.scheduler.scores": orjson.dumps({n.name: t for n, t in zip(result.feasible, result.totals,
                                                                                strict=False)}).decode(),
                "k8s.scheduler.selected_node": result.node})
        self._spawn(self._bind(qpi, cycle, result.node, span), f"bind:{info.namespace}/{info.name}")
        return result.node

    def _skip(self, info: PodInfo) -> bool:
        """Upstream's skipPodSchedule: the pod is gone, being deleted, bound, or already assumed."""
        latest = self.pod_informer.get(info.name, info.namespace)
        if latest is None or (latest.metadata.uid or "") != (info.pod.metadata.uid or ""):
            return True
        if latest.metadata.deletion_timestamp is not None or (latest.spec and latest.spec.node_name):
            return True
        return self.cache.is_assumed(info.key)

    async def _bind(self, qpi: QueuedPodInfo, cycle: int, node: str, span: Any = None) -> None:
        try:
            await self._binding(qpi, cycle, node)
        except BaseException:
            tracing.end_span(span, {"k8s.scheduler.result": "error"})
            raise
        tracing.end_span(span)

    async def _binding(self, qpi: QueuedPodInfo, cycle: int, node: str) -> None:
        info = qpi.pod_info
        try:
            async with self._bind_slots:
                # VolumeBinding's PreBind: delayed claims learn the node the pod goes to
                for claim in volume_binding.claims_to_select_node(info, self._claim, self._storage_class):
                    await self.client.patch(PersistentVolumeClaim, claim.metadata.name or "",
                                            {"metadata": {"annotations": {ANN_SELECTED_NODE: node}}}, "merge",
                                            info.namespace)
                with tracing.span("scheduler.bind", attributes={"k8s.scheduler.selected_node": node}):
                    await self.client.bind(info.name, info.namespace, node, pod_uid=info.pod.metadata.uid)
        except ClientError as e:
            tracing.set_attributes(tracing.current_span(), {"k8s.scheduler.result": "error"})
            self.bind_errors += 1
            self.cache.forget_pod(info)
            message = e.message if isinstance(e, ApiError) else str(e)
            log.warning("binding %s/%s to %s failed: %s", info.namespace, info.name, node, message)
            self._handle_failure(qpi, cycle, f"Binding rejected: {message}", error=True)
            return
        self.cache.finish_binding(info)
        self.scheduled += 1
        log.debug("bound %s/%s to %s", info.namespace, info.name, node)
        self.recorder.event(info.pod, "Normal", "Scheduled",
                            f"Successfully assigned {info.namespace}/{info.name} to {node}")

    async def _preempt(self, info: PodInfo, candidate: default_preemption.Candidate) -> None:
        """prepareCandidate: each victim gets the DisruptionTarget condition and is deleted gracefully
        (its own grace period), with a Preempted event; then the preemptor's status.nominatedNodeName names
        the node, where it is bound once the victims are gone (their deletion requeues it)."""
        for victim in candidate.victims:
            condition = default_preemption.disruption_condition(self.name, now_rfc3339())
            try:
                await self.client.patch(Pod, victim.name, {"status": {"conditions": [condition]}}, "strategic",
                                        victim.namespace, subresource="status")
                await self.client.delete(Pod, victim.name, victim.namespace,
                                         preconditions={"uid": victim.pod.metadata.uid or ""})
            except ClientError as e:
                if isinstance(e, ApiError) and (e.is_not_found or e.is_conflict):
                    continue  # gone already
                log.warning("preempting %s/%s: %s", victim.namespace, victim.name, e)
                continue
            self.recorder.event(victim.pod, "Normal", "Preempted",
                                f"Preempted by pod {info.pod.metadata.uid} on node {candidate.node}")
        try:
            await self.client.patch(Pod, info.name, {"status": {"nominatedNodeName": candidate.node}}, "merge",
                                    info.namespace, subresource="status")
        except ClientError as e:
            log.info("could not nominate %s for %s/%s: %s", candidate.node, info.namespace, info.name, e)

    def _handle_failure(self, qpi: QueuedPodInfo, cycle: int, message: str, *, error: bool = False) -> None:
        """Event, requeue (unless the pod is gone or bound meanwhile), and the PodScheduled condition."""
        info = qpi.pod_info
        self.recorder.event(info.pod, "Warning", "FailedScheduling", message)
        latest = self.pod_informer.get(info.name, info.namespace)
        if latest is None or (latest.metadata.uid or "") != (info.pod.metadata.uid or ""):
            return
        if latest.spec is not None and latest.spec.node_name:
            return
        if latest.metadata.resource_version != info.pod.metadata.resource_version:
            qpi.pod_info = PodInfo(latest)
        self.queue.add_unschedulable_if_not_present(qpi, cycle, error=error)
        reason = "SchedulerError" if error else "Unschedulable"
        if _pod_scheduled_condition(latest) != ("False", reason, message):
            self._spawn(self._set_unschedulable(latest, reason, message), f"status:{info.namespace}/{info.name}")

    async def _set_unschedulable(self, pod: Pod, reason: str, message: str) -> None:
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        current = _find_condition(pod, "PodScheduled")
        condition["lastTransitionTime"] = (current.last_transition_time if current is not None
                                           and current.status == "False" and current.last_transition_time
                                           else now_rfc3339())
        try:
            await self.client.patch(Pod, pod.metadata.name or "", {"status": {"conditions": [condition]}},
                                    "strategic", pod.metadata.namespace, subresource="status")
        except ClientError as e:
            log.info("could not set PodScheduled=False on %s/%s: %s", pod.metadata.namespace, pod.metadata.name, e)


# -- helpers ------------------------------------------------------------------------------------


def _filter_json(statuses: dict[str, Any], feasible: Any) -> str:
    """The cycle's filter verdicts for the trace: {node: "ok" or why a plugin turned it down}."""
    found: dict[str, str] = {n.name: "ok" for n in feasible}
    for node, status in statuses.items():
        found[node] = ", ".join(status.reasons) or status.plugin or "unschedulable"
    return orjson.dumps(found).decode()


def _find_condition(pod: Pod, kind: str) -> Any:
    for condition in (pod.status.conditions if pod.status is not None else None) or ():
        if condition.type == kind:
            return condition
    return None


def _pod_scheduled_condition(pod: Pod) -> tuple[str, str | None, str | None] | None:
    condition = _find_condition(pod, "PodScheduled")
    return None if condition is None else (condition.status, condition.reason, condition.message)


def _node_scheduling_properties(node: Node) -> tuple[Any, ...]:
    """What a node update must change to possibly make a pod fit (heartbeats do not)."""
    spec, status = node.spec, node.status
    ready = None
    for condition in (status.conditions if status is not None else None) or ():
        if condition.type == "Ready":
            ready = condition.status
    return (
        node.metadata.labels,
        status.allocatable if status is not None else None,
        [t.model_dump() for t in (spec.taints or ())] if spec is not None else None,
        bool(spec.unschedulable) if spec is not None else False,
        ready,
    )


def _shrunk(before: PodInfo, after: PodInfo) -> bool:
    """A bound pod now asks for less (or goes away): others may fit where they did not."""
    b, a = before.requests, after.requests
    return (a.milli_cpu < b.milli_cpu or a.memory < b.memory or a.ephemeral_storage < b.ephemeral_storage
            or any(a.scalar.get(k, 0) < v for k, v in b.scalar.items())
            or len(after.host_ports) < len(before.host_ports))
