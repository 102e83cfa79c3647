"""The scheduling queue (kube-scheduler's PriorityQueue) for asyncio.

Three places a pending pod can be:

- activeQ: ready to be tried, popped highest `spec.priority` first, then oldest first (the time it
  entered the queue), so one cycle of retries does not starve newer pods of equal priority;
- backoffQ: failed recently; waits out its backoff (initial 1s, doubled per attempt, capped at 10s
  by default) before going back to activeQ;
- unschedulable: failed because no node fits. It stays there until something in the cluster
  changes that could make it fit — `move_all_to_active_or_backoff` (node added or changed, a bound
  pod deleted or shrunk) — or until it has waited `max_in_unschedulable` (5 min) without one.
  A move sends each pod to backoffQ if its backoff has not run out yet, else to activeQ.

If such a move happens while a pod is being tried (between `pop` and the verdict, e.g. while it
is being bound), the pod goes to backoffQ rather than unschedulable, so the event cannot be lost
(upstream's moveRequestCycle). Pods with `spec.schedulingGates` are held (gated) in unschedulable
and only enter activeQ once an update removes the last gate.

Every method except `pop` is synchronous, so the queue needs no locks on one event loop. Time
comes from `clock` (monotonic seconds): tests pass a fake one and call the `flush_*` methods.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from machinery.api.core_v1 import Pod
from scheduler.framework import PodInfo, pod_key

log = logging.getLogger(__name__)

DEFAULT_POD_INITIAL_BACKOFF = 1.0
DEFAULT_POD_MAX_BACKOFF = 10.0
DEFAULT_POD_MAX_IN_UNSCHEDULABLE = 300.0
UNSCHEDULABLE_FLUSH_INTERVAL = 30.0

# Cluster events that move unschedulable pods (upstream's framework.ClusterEvent names).
NODE_ADD = "NodeAdd"
NODE_UPDATE = "NodeUpdate"
ASSIGNED_POD_DELETE = "AssignedPodDelete"
ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"


@dataclass(eq=False)
class QueuedPodInfo:
    """A pod in (or popped from) the queue, with its scheduling history."""

    pod_info: PodInfo
    timestamp: float  # when it last entered the queue: FIFO order and the base of its backoff
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    gated: bool = False
    seq: int = 0  # which heap entry is current (entries are invalidated lazily)

    @property
    def pod(self) -> Pod:
        return self.pod_info.pod

    @property
    def key(self) -> str:
        return self.pod_info.key


def is_pod_updated(old: Pod, new: Pod) -> bool:
    """Did anything but status and bookkeeping change? (A status-only update cannot make a pod fit.)"""

    def strip(pod: Pod) -> tuple[object, object]:
        meta = pod.metadata.model_copy(
            update={"resource_version": None, "generation": None, "managed_fields": None, "finalizers": None}
        )
        return meta, pod.spec

    return strip(old) != strip(new)


def is_gated(pod: Pod) -> bool:
    return bool(pod.spec is not None and pod.spec.scheduling_gates)


class SchedulingQueue:
    def __init__(
        self,
        initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
        max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
        *,
        max_in_unschedulable: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if initial_backoff < 0 or max_backoff < initial_backoff:
            raise ValueError("need 0 <= initial backoff <= max backoff")
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self.clock = clock
        self._seq = itertools.count(1)
        self._active: dict[str, QueuedPodInfo] = {}
        self._active_heap: list[tuple[int, float, int, str]] = []  # (-priority, timestamp, seq, key)
        self._backoff: dict[str, QueuedPodInfo] = {}
        self._backoff_heap: list[tuple[float, int, str]] = []  # (backoff expiry, seq, key)
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self.scheduling_cycle = 0
        self.move_request_cycle = -1
        self._wakeup = asyncio.Event()
        self._closed = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")

    # -- what is where ----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._unschedulable)

    def sizes(self) -> dict[str, int]:
        """The pods in each sub-queue (scheduler_pending_pods)."""
        return {"active": len(self._active), "backoff": len(self._backoff), "unschedulable": len(self._unschedulable)}

    def __contains__(self, key: object) -> bool:
        return key in self._active or key in self._backoff or key in self._unschedulable

    def active_keys(self) -> list[str]:
        return list(self._active)

    def backoff_keys(self) -> list[str]:
        return list(self._backoff)

    def unschedulable_keys(self) -> list[str]:
        return list(self._unschedulable)

    def where(self, pod: Pod | PodInfo | str) -> str | None:
        """"active", "backoff", "unschedulable" or None (tests and logs)."""
        key = _key(pod)
        for name, place in (("active", self._active), ("backoff", self._backoff),
                            ("unschedulable", self._unschedulable)):
            if key in place:
                return name
        return None

    def pending_pods(self) -> Iterator[QueuedPodInfo]:
        yield from self._active.values()
        yield from self._backoff.values()
        yield from self._unschedulable.values()

    # -- informer events ---------------------------------------------------------------------

    def add(self, pod: Pod | PodInfo) -> None:
        """A new pending pod: into activeQ (held as unschedulable while it has scheduling gates)."""
        info = pod if isinstance(pod, PodInfo) else PodInfo(pod)
        key = info.key
        self._backoff.pop(key, None)
        self._unschedulable.pop(key, None)
        existing = self._active.get(key)
        if existing is not None:
            existing.pod_info = info
            self._push_active(existing)
            return
        qpi = QueuedPodInfo(info, self.clock())
        if is_gated(info.pod):
            qpi.gated = True
            self._unschedulable[key] = qpi
            return
        self._push_active(qpi)

    def update(self, old: Pod | None, new: Pod | PodInfo) -> None:
        """A pending pod changed (upstream's PriorityQueue.Update)."""
        info = new if isinstance(new, PodInfo) else PodInfo(new)
        key = info.key
        qpi = self._active.get(key)
        if qpi is not None:
            qpi.pod_info = info
            self._push_active(qpi)  # its priority may have changed
            return
        qpi = self._backoff.get(key)
        if qpi is not None:
            qpi.pod_info = info
            return
        qpi = self._unschedulable.get(key)
        if qpi is not None:
            old_pod = old if old is not None else qpi.pod
            qpi.pod_info = info
            if qpi.gated:
                if not is_gated(info.pod):
                    del self._unschedulable[key]
                    qpi.gated = False
                    qpi.timestamp = self.clock()
                    self._push_active(qpi)
                return
            if is_pod_updated(old_pod, info.pod):
                del self._unschedulable[key]
                if self.is_backing_off(qpi):
                    self._push_backoff(qpi)
                else:
                    self._push_active(qpi)
            return
        self.add(info)  # in no queue (e.g. being scheduled): try it (again) with what we now know

    def delete(self, pod: Pod | PodInfo | str) -> None:
        key = _key(pod)
        self._active.pop(key, None)
        self._backoff.pop(key, None)
        self._unschedulable.pop(key, None)

    # -- the scheduling loop ----------------------------------------------------------------

    async def pop(self) -> QueuedPodInfo:
        """The next pod to try, waiting for one; raises QueueClosed once the queue is closed."""
        while True:
            if self._closed:
                raise QueueClosed()
            qpi = self._pop_active()
            if qpi is not None:
                self.scheduling_cycle += 1
                qpi.attempts += 1
                if qpi.initial_attempt_timestamp is None:
                    qpi.initial_attempt_timestamp = qpi.timestamp
                return qpi
            self._wakeup.clear()
            await self._wakeup.wait()

    def pop_nowait(self) -> QueuedPodInfo | None:
        """Like pop, without waiting: None when activeQ is empty."""
        qpi = self._pop_active()
        if qpi is not None:
            self.scheduling_cycle += 1
            qpi.attempts += 1
            if qpi.initial_attempt_timestamp is None:
                qpi.initial_attempt_timestamp = qpi.timestamp
        return qpi

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo, pod_scheduling_cycle: int,
                                         error: bool = False) -> bool:
        """Requeue a pod that failed: to backoffQ after an error or if a cluster event came during its
        try, else to unschedulable. False (and nothing done) if it is queued already."""
        key = qpi.key
        if key in self:
            return False
        qpi.timestamp = self.clock()
        if error or self.move_request_cycle >= pod_scheduling_cycle:
            self._push_backoff(qpi)
        else:
            self._unschedulable[key] = qpi
        return True

    def move_all_to_active_or_backoff(self, event: str) -> int:
        """A cluster event that may make unschedulable pods fit: move them (gated ones stay). Returns
        how many moved."""
        moved = 0
        for key, qpi in list(self._unschedulable.items()):
            if qpi.gated:
                continue
            del self._unschedulable[key]
            if self.is_backing_off(qpi):
                self._push_backoff(qpi)
            else:
                self._push_active(qpi)
            moved += 1
        self.move_request_cycle = self.scheduling_cycle
        if moved:
            log.debug("%s moved %d unschedulable pod(s)", event, moved)
        return moved

    # -- backoff ----------------------------------------------------------------------------

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        """initial * 2^(attempts-1), capped at max."""
        duration = self.initial_backoff
        for _ in range(1, qpi.attempts):
            if duration > self.max_backoff - duration:
                return self.max_backoff
            duration += duration
        return min(duration, self.max_backoff)

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        return qpi.timestamp + self.backoff_duration(qpi)

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        return self.backoff_expiry(qpi) > self.clock()

    def flush_backoff_completed(self) -> int:
        """Move pods whose backoff has run out to activeQ; returns how many."""
        now = self.clock()
        moved = 0
        heap = self._backoff_heap
        while heap:
            expiry, seq, key = heap[0]
            qpi = self._backoff.get(key)
            if qpi is None or qpi.seq != seq:
                heapq.heappop(heap)
                continue
            if expiry > now:
                break
            heapq.heappop(heap)
            del self._backoff[key]
            self._push_active(qpi)
            moved += 1
        self._arm_timer()
        return moved

    def flush_unschedulable_leftover(self) -> int:
        """Pods unschedulable for longer than max_in_unschedulable go back to be tried again."""
        now = self.clock()
        moved = 0
        for key, qpi in list(self._unschedulable.items()):
            if qpi.gated or now - qpi.timestamp <= self.max_in_unschedulable:
                continue
            del self._unschedulable[key]
            if self.is_backing_off(qpi):
                self._push_backoff(qpi)
            else:
                self._push_active(qpi)
            moved += 1
        return moved

    async def run(self) -> None:
        """Background upkeep: flush leftover unschedulable pods every 30s (backoff has its own timer)."""
        while not self._closed:
            await asyncio.sleep(min(UNSCHEDULABLE_FLUSH_INTERVAL, self.max_in_unschedulable))
            self.flush_backoff_completed()
            self.flush_unschedulable_leftover()

    def close(self) -> None:
        """Wake `pop` with QueueClosed; stop timers."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wakeup.set()

    # -- internals --------------------------------------------------------------------------

    def _push_active(self, qpi: QueuedPodInfo) -> None:
        qpi.seq = next(self._seq)
        self._active[qpi.key] = qpi
        heapq.heappush(self._active_heap, (-qpi.pod_info.priority, qpi.timestamp, qpi.seq, qpi.key))
        self._wakeup.set()

    def _pop_active(self) -> QueuedPodInfo | None:
        heap = self._active_heap
        while heap:
            _, _, seq, key = heapq.heappop(heap)
            qpi = self._active.get(key)
            if qpi is not None and qpi.seq == seq:
                del self._active[key]
                return qpi
        return None

    def _push_backoff(self, qpi: QueuedPodInfo) -> None:
        qpi.seq = next(self._seq)
        self._backoff[qpi.key] = qpi
        heapq.heappush(self._backoff_heap, (self.backoff_expiry(qpi), qpi.seq, qpi.key))
        self._arm_timer()

    def _arm_timer(self) -> None:
        """Keep one timer, at the earliest backoff expiry, that flushes backoffQ."""
        heap = self._backoff_heap
        while heap and (heap[0][2] not in self._backoff or self._backoff[heap[0][2]].seq != heap[0][1]):
            heapq.heappop(heap)
        if not heap or self._closed:
            return
        at = heap[0][0]
        if self._timer is not None and self._timer_at <= at:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (synchronous tests): flush_backoff_completed is called by hand
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_later(max(at - self.clock(), 0.0) + 0.001, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = float("inf")
        self.flush_backoff_completed()


class QueueClosed(Exception):
    """The queue was closed: the scheduling loop should end."""


def _key(pod: Pod | PodInfo | str) -> str:
    if isinstance(pod, str):
        return pod
    if isinstance(pod, PodInfo):
        return pod.key
    return pod_key(pod)
