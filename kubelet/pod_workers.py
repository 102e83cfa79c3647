"""One worker per pod, over a narrow syncer (upstream pkg/kubelet/pod_workers.go).

A worker is a task that sleeps until something about its pod changes — the API object (informer),
its containers (the PLEG), a probe verdict, a back-off timer — and then calls the syncer, which
makes the node match the pod from scratch each time (level-triggered, so a restarted kubelet
simply carries on with what the runtime runs). The workers know nothing else: no runtime, no
API client, no Kubelet — only `PodSyncer`, as upstream's podWorkers know only its podSyncer:

- `sync_pod(pod)` while the pod should run; it returns when to look again (back-off windows);
- `sync_terminating_pod(pod, grace)` once, when the pod is deleted (deletionTimestamp) or gone;
- `sync_terminated_pod(pod, removed)` after that, until it succeeds: clean up, and confirm the
  deletion to the apiserver unless the API object is gone already.

A deletion cancels a `sync_pod` under way (an image pull may hang for as long as the registry
lets it; upstream cancels the sync's context the same way).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Protocol

from machinery import tracing
from machinery.api.core_v1 import Pod
from machinery.client import ApiError, ApiUnavailable
from machinery.cri.errors import CriError

log = logging.getLogger(__name__)

DEFAULT_GRACE = 30
MAX_SYNC_RETRY = 30.0


class PodSyncer(Protocol):
    async def sync_pod(self, pod: Pod) -> float | None: ...

    async def sync_terminating_pod(self, pod: Pod, grace: int) -> None: ...

    async def sync_terminated_pod(self, pod: Pod, removed: bool) -> None: ...


def deletion_grace(pod: Pod) -> int:
    """The grace period of a deletion: the API's deletionGracePeriodSeconds, else the spec's."""
    meta = pod.metadata
    if meta.deletion_grace_period_seconds is not None:
        return max(int(meta.deletion_grace_period_seconds), 0)
    value = pod.spec.termination_grace_period_seconds if pod.spec else None
    return DEFAULT_GRACE if value is None else max(int(value), 0)


class PodWorker:
    def __init__(self, syncer: PodSyncer, pod: Pod) -> None:
        self.syncer = syncer
        self.pod = pod
        self.uid = pod.metadata.uid or ""
        self.removed = False  # the API object is gone
        self.terminated = False  # the pod's containers are stopped after a deletion
        self.cleaned_up = False  # ... and removed, and the deletion confirmed
        self.failures = 0
        self.syncs = 0  # completed syncs (the kubelet's /debug/pods shows them)
        self._wake = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._next_at = 0.0
        self._hold_until = 0.0  # after a failed sync, only a deletion is worth an earlier retry
        self._sync: asyncio.Task[float | None] | None = None
        self.task: asyncio.Task[None] | None = None
        self.synced = asyncio.Event()  # set after the first sync (tests, benchmarks)

    @property
    def name(self) -> str:
        return f"{self.pod.metadata.namespace}/{self.pod.metadata.name}"

    @property
    def deleting(self) -> bool:
        return self.removed or self.pod.metadata.deletion_timestamp is not None

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"pod-worker:{self.name}")
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    def wake_after(self, delay: float) -> None:
        """Wake in `delay` seconds (an earlier pending wake-up wins)."""
        loop = asyncio.get_running_loop()
        at = loop.time() + max(delay, 0.0)
        if self._timer is not None and not self._timer.cancelled() and self._next_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._next_at = at
        self._timer = loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self.wake()

    def cancel_sync(self) -> None:
        """The pod is being deleted: what sync_pod is doing no longer matters."""
        if self._sync is not None and not self._sync.done():
            self._sync.cancel()
        self.wake()

    async def _sync_current_pod(self) -> float | None:
        # The pod is read when the sync starts, not when it is scheduled (a task starts a loop turn later):
        # a watch event handled in between (our own status write) moves the pod and the status manager's
        # view of it together, so a pod taken before it would pair an older status with a newer view and
        # the status manager would take that older status for the one in the API.
        if not tracing.active():
            return await self.syncer.sync_pod(self.pod)
        with tracing.span("kubelet.sync_pod", attributes=self._span_attributes("update" if self.syncs else "create")):
            return await self.syncer.sync_pod(self.pod)

    def _span_attributes(self, update_type: str) -> dict[str, object]:
        """The kubelet.sync_pod span's (--tracing-config-file)."""
        spec = self.pod.spec
        return {**tracing.object_attributes(self.pod, "v1", "Pod"), "k8s.sync.update_type": update_type,
                "k8s.node.name": spec.node_name if spec is not None else None}

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            loop = asyncio.get_running_loop()
            if not self.deleting and loop.time() < self._hold_until:
                self.wake_after(self._hold_until - loop.time())
                continue
            try:
                if self.deleting:
                    if not self.terminated:
                        with tracing.span("kubelet.sync_pod", attributes=self._span_attributes("kill")
                                          if tracing.active() else None):
                            await self.syncer.sync_terminating_pod(self.pod, deletion_grace(self.pod))
                        self.terminated = True
                    if not self.cleaned_up or self.removed:
                        await self.syncer.sync_terminated_pod(self.pod, self.removed)
                        self.cleaned_up = True
                    if self.removed:
                        return
                else:
                    self._sync = asyncio.ensure_future(self._sync_current_pod())
                    try:
                        delay = await self._sync
                    except asyncio.CancelledError:
                        if self.task is not None and self.task.cancelling():
                            raise
                        continue  # cancelled for a deletion: terminate next
                    finally:
                        self._sync = None
                    if delay is not None:
                        self.wake_after(delay)
                self.failures = 0
                self.syncs += 1
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.failures += 1
                delay = min(0.2 * 2 ** self.failures, MAX_SYNC_RETRY)
                expected = isinstance(e, CriError | ApiError | ApiUnavailable | OSError)
                log.warning("sync of pod %s failed (retry in %.1fs): %s", self.name, delay, e, exc_info=not expected)
                self._hold_until = asyncio.get_running_loop().time() + delay
                self.wake_after(delay)
            finally:
                self.synced.set()


class PodWorkers:
    """The workers of every pod on the node (upstream podWorkers.UpdatePod)."""

    def __init__(self, syncer: PodSyncer, is_own_status_write: Callable[[Pod, Pod], bool] | None = None) -> None:
        self.syncer = syncer
        # an update that only carries the kubelet's own status write is no reason to sync
        self.is_own_status_write = is_own_status_write or (lambda _old, _new: False)
        self.workers: dict[str, PodWorker] = {}
        self.on_new_worker: Callable[[PodWorker], None] | None = None

    def get(self, uid: str) -> PodWorker | None:
        return self.workers.get(uid)

    def update(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        if not uid:
            return
        worker = self.workers.get(uid)
        if worker is None:
            worker = PodWorker(self.syncer, pod)
            self.workers[uid] = worker
            worker.start()
            if self.on_new_worker is not None:
                self.on_new_worker(worker)
            return
        # the informer shows a pod's versions in order: each is newer than the last (resourceVersions
        # are opaque, never compared); the status manager sees every one (it waits for its own writes)
        old = worker.pod
        own_status_write = self.is_own_status_write(old, pod)
        worker.pod = pod
        if pod.metadata.deletion_timestamp is not None and old.metadata.deletion_timestamp is None:
            worker.cancel_sync()
            return
        if own_status_write:
            return
        worker.wake()

    def remove(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        worker = self.workers.get(uid)
        if worker is None:
            return
        worker.removed = True
        worker.pod = pod
        worker.cancel_sync()
        if worker.task is not None:
            worker.task.add_done_callback(functools.partial(self._forget_after, uid))

    def _forget_after(self, uid: str, _task: object) -> None:
        self._forget(uid)

    def _forget(self, uid: str) -> None:
        worker = self.workers.get(uid)
        if worker is not None and worker.removed and worker.task is not None and worker.task.done():
            del self.workers[uid]

    def wake(self, uid: str) -> None:
        worker = self.workers.get(uid)
        if worker is not None:
            worker.wake()

    def wake_all(self) -> None:
        for worker in self.workers.values():
            worker.wake()

    async def stop(self) -> None:
        tasks = [w.task for w in self.workers.values() if w.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
