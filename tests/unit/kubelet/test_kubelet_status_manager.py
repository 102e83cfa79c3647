"""The status manager's own writes against what the informer shows (kubelet.status_manager with
kubelet.pod_workers): resourceVersions are opaque (API conventions), so the versions here are
strings no integer order fits; the order is the watch's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubelet import status_manager
from kubelet.pod_workers import PodWorker, PodWorkers
from kubelet.status_manager import StatusManager
from machinery.api.core_v1 import Pod
from tests.unit.kubelet_fakes import eventually


def _pod(rv: str, ready: str = "True", deleting: bool = False) -> Pod:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": rv}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return Pod.model_validate({"metadata": meta,
                               "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
                               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]}})


def _ready(pod: Pod) -> str:
    conditions = pod.status.conditions if pod.status else None
    return next(c.status for c in conditions or [] if c.type == "Ready")


class _Client:
    """PATCH pods/p/status answering with the version the test names next."""

    def __init__(self) -> None:
        self.next_rv = ""
        self.patches = 0

    async def patch_raw(self, kind: Any, name: str, body: dict[str, Any], patch_type: str, namespace: str | None,
                        subresource: str | None = None) -> dict[str, Any]:
        self.patches += 1
        return _pod(self.next_rv, ready=body["status"]["conditions"][0]["status"]).to_dict()


class _NoSync:
    async def sync_pod(self, pod: Pod) -> float | None:
        return None

    async def sync_terminating_pod(self, pod: Pod, grace: int) -> None:
        return None

    async def sync_terminated_pod(self, pod: Pod, removed: bool) -> None:
        return None


def _setup(first: Pod) -> tuple[PodWorkers, PodWorker, StatusManager, _Client]:
    client = _Client()
    workers: PodWorkers
    status = StatusManager(client, resync=lambda uid: workers.wake(uid))  # type: ignore[arg-type]
    workers = PodWorkers(_NoSync(), status.is_own_status_write)
    worker = workers.workers["u1"] = PodWorker(_NoSync(), first)
    return workers, worker, status, client


async def _write_not_ready(status: StatusManager, client: _Client, pod: Pod, rv: str) -> None:
    client.next_rv = rv
    assert await status.set_status(pod, {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]})


async def test_our_write_is_held_until_the_informer_shows_it() -> None:
    workers, worker, status, client = _setup(_pod("k7"))
    await _write_not_ready(status, client, worker.pod, "b2")  # "b2" < "k7", as strings and as nothing else
    # the informer still shows the version before the write: the syncer gets our status over it
    assert _ready(status.latest(worker.pod)) == "False"
    assert status.latest(worker.pod).metadata.resource_version == "k7"  # spec and metadata stay the informer's
    # ... and the same status is not written again
    assert not await status.set_status(worker.pod, {"phase": "Running",
                                                    "conditions": [{"type": "Ready", "status": "False"}]})
    workers.update(_pod("b2", ready="False"))  # the watch shows our write: no reason to sync
    assert not worker._wake.is_set()
    workers.update(_pod("a9", ready="True"))  # then another writer's status, after ours
    assert worker._wake.is_set()
    assert _ready(status.latest(worker.pod)) == "True"  # the informer's copy is the newest again
    assert client.patches == 1


async def test_versions_older_than_our_write_do_not_wake_the_worker() -> None:
    workers, worker, status, client = _setup(_pod("5"))
    await _write_not_ready(status, client, worker.pod, "40")
    workers.update(_pod("300", ready="True"))  # the watch catching up: older than our write, whatever the digits say
    assert not worker._wake.is_set()
    assert _ready(status.latest(worker.pod)) == "False"
    workers.update(_pod("40", ready="False"))
    workers.update(_pod("6", ready="True"))  # after ours: another writer
    assert worker._wake.is_set()


async def test_a_deletion_arriving_while_our_write_is_held_keeps_its_metadata() -> None:
    workers, worker, status, client = _setup(_pod("x"))
    await _write_not_ready(status, client, worker.pod, "y")
    workers.update(_pod("w", deleting=True))  # older than our write, but the deletion is news
    assert worker._wake.is_set()
    latest = status.latest(worker.pod)
    assert latest.metadata.deletion_timestamp is not None and _ready(latest) == "False"


async def test_a_write_the_informer_never_shows_is_believed_no_longer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A relist may skip a version: after CACHE_CATCH_UP_SECONDS the informer's copy wins again."""
    clock = [1000.0]
    monkeypatch.setattr(status_manager.time, "monotonic", lambda: clock[0])
    workers, worker, status, client = _setup(_pod("m"))
    await _write_not_ready(status, client, worker.pod, "n")
    workers.update(_pod("p", ready="True"))  # after a relist that skipped "n"
    assert _ready(status.latest(worker.pod)) == "False"
    clock[0] += status_manager.CACHE_CATCH_UP_SECONDS
    assert _ready(status.latest(worker.pod)) == "True"


async def test_a_write_that_changed_nothing_is_not_waited_for() -> None:
    """The apiserver skips a no-op write and answers with the version it has, one the watch has
    shown already and never shows again: waiting for it would take another writer's status that
    follows for older than ours (and not sync over it) until the catch-up time ran out."""
    workers, worker, status, client = _setup(_pod("q1"))
    await _write_not_ready(status, client, worker.pod, "q1")  # answered with the version shown
    workers.update(_pod("q2", ready="True"))  # another writer
    assert worker._wake.is_set()
    assert _ready(status.latest(worker.pod)) == "True"


async def test_our_write_shown_before_its_answer_while_an_earlier_write_is_awaited() -> None:
    workers, worker, status, client = _setup(_pod("s1"))
    await _write_not_ready(status, client, worker.pod, "s1")  # a no-op: nothing awaited
    record = status._record("u1")
    record.awaiting = "s0"  # an earlier write the watch will not show (a relist skipped it)
    record.writing = True  # the next write is on its way; the watch shows it first, then another writer
    workers.update(_pod("s2", ready="False"))
    workers.update(_pod("s3", ready="True"))
    assert not worker._wake.is_set()
    record.written_rv, record.awaiting = "s2", "s2"
    status._write_done("u1", record, "s2")  # the answer: "s2" was ours, so "s3" came after it
    assert worker._wake.is_set() and record.awaiting is None


class _RecordingSyncer(_NoSync):
    """Records the version of each pod it is asked to sync; the first sync waits to be released."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.release = asyncio.Event()

    async def sync_pod(self, pod: Pod) -> float | None:
        self.seen.append(pod.metadata.resource_version or "")
        if len(self.seen) == 1:
            await self.release.wait()
        return None


async def test_a_sync_reads_the_pod_when_it_starts_not_when_it_is_scheduled() -> None:
    # A restarted kubelet wrote Ready=False and a probe asked for another sync; the watch showed that write
    # between the moment the next sync was scheduled and the moment it ran. Had the sync taken the pod
    # from before, the status manager (which now believes the informer) would compare the new status
    # against the old kubelet's Ready=True, find nothing to write and leave the pod not Ready for good.
    syncer = _RecordingSyncer()
    workers = PodWorkers(syncer)
    workers.update(_pod("r0"))
    worker = workers.workers["u1"]
    await eventually(lambda: syncer.seen == ["r0"], what="the first sync")
    worker.wake()  # the probe's verdict: one more sync after this one
    loop = asyncio.get_running_loop()
    syncer.release.set()  # turn 1: the first sync ends; turn 2: the worker schedules the next one
    # turn 2, just after that: the watch shows a newer pod; turn 3: the next sync runs
    loop.call_soon(loop.call_soon, workers.update, _pod("r1", ready="False"))
    await eventually(lambda: len(syncer.seen) >= 2, what="the second sync")
    assert syncer.seen[1] == "r1"
    await workers.stop()
