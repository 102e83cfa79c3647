"""Node lifecycle: notices nodes that stop heartbeating, taints them, and evicts their pods
(upstream pkg/controller/nodelifecycle, with the taint-eviction controller folded in).

- Health: a node's heartbeat is its Lease in kube-node-lease (spec.renewTime) or its Ready
  condition's lastHeartbeatTime. As upstream, the controller times a heartbeat by when *it*
  observes the value change (its own monotonic clock, so clock skew between kubelet and
  controller does not matter). A node seen without a change for longer than
  `--node-monitor-grace-period` (`--node-startup-grace-period` while it never posted a Ready
  condition) gets Ready, MemoryPressure, DiskPressure and PIDPressure set to Unknown through the
  status subresource: reason NodeStatusUnknown, "Kubelet stopped posting node status." (or
  NodeStatusNeverUpdated, "Kubelet never posted node status."). Ready leaving True records a
  NodeNotReady event on the node and marks the node's pods not Ready.
- Taints: Ready=Unknown gives `node.kubernetes.io/unreachable`, Ready=False gives
  `node.kubernetes.io/not-ready`, each as NoExecute (with timeAdded) and NoSchedule; the
  pressure conditions and spec.unschedulable give their NoSchedule taints. Taints go when their
  condition does (a recovered node loses them).
- Eviction: a pod on a node with NoExecute taints is deleted (event TaintManagerEviction) once a
  taint it does not tolerate has been there for `--pod-eviction-timeout` (for the two taints above;
  upstream gets the same 5 minutes from the tolerations its DefaultTolerationSeconds admission
  adds) or at once (any other NoExecute taint); a toleration with tolerationSeconds bounds the
  stay instead; one without tolerates forever. Times count from the taint's timeAdded, so a
  restart does not reset them. The ReplicaSet controller replaces evicted pods elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import math
from dataclasses import dataclass

from machinery import timeutil
from machinery.api.coordination_v1 import Lease
from machinery.api.core_v1 import Node, NodeCondition, NodeStatus, Pod, Taint
from machinery.client import KUBE_VERSION, ApiClient, ApiError, retry_on_conflict
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import NODE_NAME_INDEX, SharedInformerFactory, node_name_index
from machinery.taints import (
    TAINT_NODE_DISK_PRESSURE,
    TAINT_NODE_MEMORY_PRESSURE,
    TAINT_NODE_NETWORK_UNAVAILABLE,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_PID_PRESSURE,
    TAINT_NODE_UNREACHABLE,
    TAINT_NODE_UNSCHEDULABLE,
    tolerates,
)

log = logging.getLogger(__name__)

IDENTITY = "system:serviceaccount:kube-system:node-controller"
USER_AGENT = f"kube-controller-manager/{KUBE_VERSION} (linux/amd64) minik8s/{IDENTITY}"

NODE_LEASE_NAMESPACE = "kube-node-lease"
CACHE_CATCH_UP_SECONDS = 30.0  # how long our own read or write of a node outranks the informer's copy

# upstream nodeConditionToTaintKeyStatusMap: condition type -> {status: taint key} (NoSchedule)
CONDITION_TAINTS: dict[str, dict[str, str]] = {
    "Ready": {"False": TAINT_NODE_NOT_READY, "Unknown": TAINT_NODE_UNREACHABLE},
    "MemoryPressure": {"True": TAINT_NODE_MEMORY_PRESSURE},
    "DiskPressure": {"True": TAINT_NODE_DISK_PRESSURE},
    "NetworkUnavailable": {"True": TAINT_NODE_NETWORK_UNAVAILABLE},
    "PIDPressure": {"True": TAINT_NODE_PID_PRESSURE},
}
NO_SCHEDULE_KEYS = frozenset({k for m in CONDITION_TAINTS.values() for k in m.values()} | {TAINT_NODE_UNSCHEDULABLE})
NO_EXECUTE_KEYS = frozenset({TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE})
# conditions the controller turns Unknown when the kubelet goes quiet (NetworkUnavailable is not the kubelet's)
KUBELET_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")

DEFAULT_GRACE_PERIOD = 40.0
DEFAULT_STARTUP_GRACE_PERIOD = 60.0
DEFAULT_POD_EVICTION_TIMEOUT = 300.0
DEFAULT_MONITOR_PERIOD = 5.0


def condition(node: Node, type_: str) -> NodeCondition | None:
    for c in (node.status.conditions if node.status else None) or []:
        if c.type == type_:
            return c
    return None


def ready_status(node: Node) -> str | None:
    c = condition(node, "Ready")
    return c.status if c is not None else None


# -- pure rules (unit-testable) ---------------------------------------------------------------


def mark_unknown(node: Node, now: str) -> bool:
    """Set the kubelet's conditions to Unknown in place; True if anything changed."""
    if node.status is None:
        node.status = NodeStatus()
    conditions = node.status.conditions = list(node.status.conditions or [])
    changed = False
    for type_ in KUBELET_CONDITIONS:
        c = next((c for c in conditions if c.type == type_), None)
        if c is None:
            conditions.append(NodeCondition(
                type=type_, status="Unknown", reason="NodeStatusNeverUpdated",
                message="Kubelet never posted node status.",
                last_heartbeat_time=node.metadata.creation_timestamp, last_transition_time=now))
            changed = True
        elif c.status != "Unknown":
            c.status, c.reason, c.message = "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
            c.last_transition_time = now
            changed = True
    return changed


def desired_taints(node: Node) -> set[tuple[str, str]]:
    """The (key, effect) pairs this controller wants on the node, from its conditions and spec."""
    out: set[tuple[str, str]] = set()
    for c in (node.status.conditions if node.status else None) or []:
        key = CONDITION_TAINTS.get(c.type, {}).get(c.status)
        if key is not None:
            out.add((key, "NoSchedule"))
    if node.spec is not None and node.spec.unschedulable:
        out.add((TAINT_NODE_UNSCHEDULABLE, "NoSchedule"))
    ready = ready_status(node)
    if ready == "False":
        out.add((TAINT_NODE_NOT_READY, "NoExecute"))
    elif ready == "Unknown":
        out.add((TAINT_NODE_UNREACHABLE, "NoExecute"))
    return out


def _managed(taint: Taint) -> bool:
    return (taint.effect == "NoSchedule" and taint.key in NO_SCHEDULE_KEYS) or (
        taint.effect == "NoExecute" and taint.key in NO_EXECUTE_KEYS)


def reconcile_taints(taints: list[Taint], wanted: set[tuple[str, str]], now: str) -> list[Taint] | None:
    """The node's new taint list (others' taints kept, order kept, new ones appended; NoExecute
    taints get timeAdded), or None when nothing changes."""
    kept = [t for t in taints if not _managed(t) or (t.key, t.effect) in wanted]
    have = {(t.key, t.effect) for t in kept}
    added = [Taint(key=k, effect=e, time_added=now if e == "NoExecute" else None)
             for k, e in sorted(wanted - have)]
    if not added and len(kept) == len(taints):
        return None
    return kept + added


def eviction_delay(pod: Pod, taint: Taint, default_seconds: float) -> float:
    """Seconds the pod may stay on a node with this NoExecute taint (math.inf: for good)."""
    matching = [t for t in (pod.spec.tolerations if pod.spec else None) or [] if tolerates(t, taint)]
    if not matching:
        return default_seconds if taint.key in NO_EXECUTE_KEYS else 0.0
    if any(t.toleration_seconds is None for t in matching):
        bounded = [t.toleration_seconds for t in matching if t.toleration_seconds is not None]
        return float(max(0, min(bounded))) if bounded else math.inf
    return float(max(0, min(t.toleration_seconds or 0 for t in matching)))


# -- the controller ---------------------------------------------------------------------------


@dataclass
class _Health:
    uid: str
    probe: float  # controller clock (loop.time()) when a heartbeat was last observed
    heartbeat: tuple[str | None, str | None]  # (Ready lastHeartbeatTime, Lease renewTime) seen last
    ready: str | None  # Ready status seen last
    node: Node  # the newest version of the node this controller has seen or written
    # the resourceVersion of a version we read or wrote that the informer has not shown yet, and
    # when (loop.time()). A watch shows a node's versions in order, so until it shows this one it
    # shows older ones. resourceVersions are opaque to clients (API conventions): equality only.
    awaiting: str | None = None
    awaiting_since: float = 0.0

    def hold(self, from_api: Node, cached: Node | None, now: float) -> None:
        """`from_api` (just read or written) is the newest version; the informer's copy (`cached`,
        taken with no await in between) is behind until it shows it."""
        self.node = from_api
        rv = from_api.metadata.resource_version or None
        shown = cached is not None and cached.metadata.resource_version == rv
        self.awaiting, self.awaiting_since = (None if shown else rv), now

    def newest(self, cached: Node, now: float) -> Node:
        """The informer's node, or ours while the informer has not caught up with it yet. A relist
        may skip a version: after CACHE_CATCH_UP_SECONDS the cache is believed again."""
        if self.awaiting is not None and cached.metadata.resource_version != self.awaiting \
                and now - self.awaiting_since < CACHE_CATCH_UP_SECONDS:
            return self.node
        self.awaiting = None
        return cached


class NodeLifecycleController(Controller):
    """Ready=Unknown and unreachable taints for silent nodes; evicts pods from NoExecute-tainted nodes."""

    name = "nodelifecycle"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, *,
                 node_monitor_grace_period: float = DEFAULT_GRACE_PERIOD,
                 node_startup_grace_period: float = DEFAULT_STARTUP_GRACE_PERIOD,
                 pod_eviction_timeout: float = DEFAULT_POD_EVICTION_TIMEOUT,
                 node_monitor_period: float = DEFAULT_MONITOR_PERIOD, workers: int = 4) -> None:
        super().__init__(workers=workers)
        self.client = client
        self.grace_period = node_monitor_grace_period
        self.startup_grace_period = node_startup_grace_period
        self.pod_eviction_timeout = pod_eviction_timeout
        self.monitor_period = node_monitor_period
        self.recorder = EventRecorder(client, "node-controller")
        self.nodes = informers.informer_for(Node)
        # every namespace's Leases, as upstream's (the shared informer the garbage collector watches too: one cache
        # of a thousand nodes' Leases, not two); only kube-node-lease's name a node
        self.leases = informers.informer_for(Lease)
        self.pods = informers.informer_for(Pod)
        with contextlib.suppress(ValueError):  # another controller of this process registered it already
            self.pods.store.add_indexers({NODE_NAME_INDEX: node_name_index})
        self.watch(self.nodes)
        self.watch(self.leases, lambda lease: [lease.metadata.name] if lease.metadata.name
                   and lease.metadata.namespace == NODE_LEASE_NAMESPACE else [])
        self.watch(self.pods, self._node_of_pod)
        self._health: dict[str, _Health] = {}
        self._taint_seen: dict[tuple[str, str, str], dt.datetime] = {}  # taints without timeAdded: first seen

    def _node_of_pod(self, pod: Pod) -> list[str]:
        """A pod event matters only on a node with NoExecute taints (its pods may be due for eviction);
        elsewhere it would cost a reconcile per pod change. The taint's own arrival is a node event,
        which looks at every pod of the node anyway."""
        name = pod.spec.node_name if pod.spec else None
        node = self.nodes.store.get(name) if name else None
        if node is None or node.spec is None or not any(t.effect == "NoExecute" for t in node.spec.taints or ()):
            return []
        return [name]  # type: ignore[list-item]

    def _heartbeat(self, node: Node) -> tuple[str | None, str | None]:
        ready = condition(node, "Ready")
        lease = self.leases.store.get(f"{NODE_LEASE_NAMESPACE}/{node.metadata.name}")
        renew = lease.spec.renew_time if lease is not None and lease.spec is not None else None
        return (ready.last_heartbeat_time if ready is not None else None, renew)

    async def reconcile(self, key: str) -> float | None:
        loop = asyncio.get_running_loop()
        node = self.nodes.store.get(key)
        health = self._health.get(key)
        if node is None:
            if health is not None:
                del self._health[key]
                for k in [k for k in self._taint_seen if k[0] == health.uid]:
                    del self._taint_seen[k]
                self.recorder.event(health.node, "Normal", "RemovingNode",
                                    f"Node {key} event: Removing Node {key} from Controller")
            return None
        now = loop.time()
        if health is None or health.uid != node.metadata.uid:
            health = self._health[key] = _Health(node.metadata.uid or "", now, self._heartbeat(node),
                                                 ready_status(node), node)
            self.recorder.event(node, "Normal", "RegisteredNode",
                                f"Node {key} event: Registered Node {key} in Controller")
        else:
            node = health.node = health.newest(node, now)
            heartbeat = self._heartbeat(node)
            if heartbeat != health.heartbeat:
                health.heartbeat, health.probe = heartbeat, now

        grace = self.grace_period if condition(node, "Ready") is not None else self.startup_grace_period
        if now - health.probe > grace:
            node = await self._mark_unknown(key, health)
        ready = ready_status(node)
        if health.ready == "True" and ready != "True":
            self.recorder.event(node, "Normal", "NodeNotReady", f"Node {key} status is now: NodeNotReady")
            await self._mark_pods_not_ready(key)
        health.ready = ready
        node = await self._update_taints(key, node, health)
        next_look = self.monitor_period
        remaining = health.probe + grace - loop.time()
        if remaining > 0:
            next_look = min(next_look, remaining + 0.05)
        evict_after = await self._evict(node)
        if evict_after is not None:
            next_look = min(next_look, evict_after + 0.05)
        return next_look

    # -- status -----------------------------------------------------------------------------

    async def _mark_unknown(self, name: str, health: _Health) -> Node:
        loop = asyncio.get_running_loop()

        async def attempt() -> Node:
            fresh = await self.client.get(Node, name)
            if fresh.metadata.uid != health.uid:
                return health.node
            heartbeat = self._heartbeat(fresh)
            if heartbeat != health.heartbeat:  # the kubelet spoke after all
                health.heartbeat, health.probe = heartbeat, loop.time()
                health.hold(fresh, self.nodes.store.get(name), loop.time())
                return fresh
            if not mark_unknown(fresh, timeutil.now_rfc3339()):
                health.hold(fresh, self.nodes.store.get(name), loop.time())
                return fresh
            updated = await self.client.update_status(fresh)
            log.info("nodelifecycle: node %s stopped posting status; conditions now Unknown", name)
            # our own write may add a heartbeat time (NodeStatusNeverUpdated): not a kubelet heartbeat
            health.heartbeat = self._heartbeat(updated)
            health.hold(updated, self.nodes.store.get(name), loop.time())
            return updated

        try:
            return await retry_on_conflict(attempt, attempts=10)
        except ApiError as e:
            if e.is_not_found:
                return health.node
            raise

    async def _mark_pods_not_ready(self, node_name: str) -> None:
        """upstream MarkPodsNotReady: the node's pods are Ready=False (endpoints stop sending traffic)."""
        for pod in self.pods.store.by_index(NODE_NAME_INDEX, node_name):
            conditions = (pod.status.conditions if pod.status else None) or []
            if not any(c.type == "Ready" and c.status == "True" for c in conditions):
                continue
            name, namespace = pod.metadata.name or "", pod.metadata.namespace or ""

            async def attempt(name: str = name, namespace: str = namespace) -> bool:
                fresh = await self.client.get(Pod, name, namespace)
                if fresh.spec is None or fresh.spec.node_name != node_name or fresh.status is None:
                    return False
                changed = False
                for c in fresh.status.conditions or []:
                    if c.type == "Ready" and c.status != "False":
                        c.status, c.last_transition_time = "False", timeutil.now_rfc3339()
                        changed = True
                if changed:
                    await self.client.update_status(fresh)
                return changed

            try:
                if await retry_on_conflict(attempt, attempts=5):
                    self.recorder.event(pod, "Warning", "NodeNotReady", "Node is not ready")
            except ApiError as e:
                if not e.is_not_found:
                    raise

    # -- taints -----------------------------------------------------------------------------

    async def _update_taints(self, name: str, node: Node, health: _Health) -> Node:
        if reconcile_taints(list(node.spec.taints or []) if node.spec else [], desired_taints(node),
                            "") is None:
            return node

        async def attempt() -> Node:
            fresh = await self.client.get(Node, name)
            if fresh.metadata.uid != health.uid or fresh.spec is None:
                return node
            taints = reconcile_taints(list(fresh.spec.taints or []), desired_taints(fresh), timeutil.now_rfc3339())
            if taints is None:
                return fresh
            before = {(t.key, t.effect) for t in fresh.spec.taints or []}
            fresh.spec.taints = taints or None
            updated = await self.client.update(fresh)
            after = {(t.key, t.effect) for t in taints}
            log.info("nodelifecycle: node %s taints: +%s -%s", name,
                     sorted(f"{k}:{e}" for k, e in after - before), sorted(f"{k}:{e}" for k, e in before - after))
            health.hold(updated, self.nodes.store.get(name), asyncio.get_running_loop().time())
            return updated

        try:
            return await retry_on_conflict(attempt, attempts=10)
        except ApiError as e:
            if e.is_not_found:
                return node
            raise

    # -- eviction ---------------------------------------------------------------------------

    def _taint_start(self, node: Node, taint: Taint) -> dt.datetime:
        started = timeutil.parse_rfc3339(taint.time_added)
        if started is not None:
            return started
        return self._taint_seen.setdefault((node.metadata.uid or "", taint.key, taint.effect), timeutil.now())

    async def _evict(self, node: Node) -> float | None:
        """Delete pods whose stay on this NoExecute-tainted node is over; seconds until the next is due."""
        taints = [t for t in (node.spec.taints if node.spec else None) or [] if t.effect == "NoExecute"]
        uid = node.metadata.uid or ""
        for k in [k for k in self._taint_seen if k[0] == uid and not any((t.key, t.effect) == k[1:] for t in taints)]:
            del self._taint_seen[k]
        if not taints:
            return None
        now = timeutil.now()
        starts = [(t, self._taint_start(node, t)) for t in taints]
        next_due: float | None = None
        for pod in self.pods.store.by_index(NODE_NAME_INDEX, node.metadata.name or ""):
            if pod.metadata.deletion_timestamp is not None:
                continue
            due = min(start + dt.timedelta(seconds=min(eviction_delay(pod, t, self.pod_eviction_timeout), 1e9))
                      for t, start in starts)
            wait = (due - now).total_seconds()
            if wait > 1e8:
                continue  # tolerated for good
            if wait > 0:
                next_due = wait if next_due is None else min(next_due, wait)
                continue
            await self._delete_pod(pod)
        return next_due

    async def _delete_pod(self, pod: Pod) -> None:
        name, namespace = pod.metadata.name or "", pod.metadata.namespace or ""
        log.info("nodelifecycle: evicting pod %s/%s from node %s", namespace, name,
                 pod.spec.node_name if pod.spec else "")
        self.recorder.event(pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {namespace}/{name}")
        try:
            await self.client.delete(Pod, name, namespace, preconditions={"uid": pod.metadata.uid or ""})
        except ApiError as e:
            if not (e.is_not_found or e.is_conflict):
                raise

