"""CrashLoopBackOff / ImagePullBackOff arithmetic (kubelet.backoff), on a fake clock; which waiting reason an
image pull in back-off shows (kubelet.kuberuntime.images), and which pod updates wake a pod worker
(kubelet.pod_workers with the status manager's record of its own writes)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet.kuberuntime.images import default_pull_policy, fmt_duration, image_pull_waiting
from kubelet.pod_workers import PodWorker, PodWorkers
from kubelet.status_manager import StatusManager
from machinery.api.core_v1 import Pod
from machinery.flowcontrol import Backoff


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_first_failure_restarts_at_once_then_windows_double_to_the_cap() -> None:
    clock = Clock()
    b = Backoff(10, 300, clock)
    assert not b.in_backoff_since("c", clock.now)  # never failed: restart now
    windows = []
    for _ in range(7):
        windows.append(b.next("c", clock.now))
    assert windows == [10, 20, 40, 80, 160, 300, 300]


def test_in_backoff_since_the_crash() -> None:
    clock = Clock()
    b = Backoff(10, 300, clock)
    b.next("c")  # restarted once: the window is 10 s
    crashed = clock.now
    clock.now += 4
    assert b.in_backoff_since("c", crashed)
    assert b.remaining("c", crashed) == pytest.approx(6)
    clock.now += 6.5
    assert not b.in_backoff_since("c", crashed)
    assert b.remaining("c", crashed) == 0


def test_a_long_healthy_run_resets_the_window() -> None:
    clock = Clock()
    b = Backoff(10, 300, clock)
    for _ in range(5):
        b.next("c")
    assert b.get("c") == 160
    clock.now += 2 * 300 + 1  # ran fine for more than twice the cap
    assert not b.in_backoff_since("c", clock.now)
    assert b.next("c", clock.now) == 10


def test_image_pull_windows_count_from_the_failure() -> None:
    clock = Clock()
    b = Backoff(1, 300, clock)
    assert not b.in_backoff("img")
    b.next("img")
    assert b.in_backoff("img") and b.remaining_since_update("img") == pytest.approx(1)
    clock.now += 1.01
    assert not b.in_backoff("img")
    b.next("img")
    assert b.get("img") == 2 and b.last_update("img") == clock.now
    b.reset("img")
    assert b.get("img") == 0 and not b.in_backoff("img")


def test_keys_are_independent_and_forgotten_by_prefix_and_age() -> None:
    clock = Clock()
    b = Backoff(10, 300, clock)
    b.next("pod1/a")
    b.next("pod1/b")
    b.next("pod2/a")
    b.forget_prefix("pod1/")
    assert b.get("pod1/a") == 0 and b.get("pod2/a") == 10
    clock.now += 601
    b.gc()
    assert b.get("pod2/a") == 0


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        Backoff(0, 10)
    with pytest.raises(ValueError):
        Backoff(10, 5)


@pytest.mark.parametrize(("image", "policy"), [
    ("busybox", "Always"), ("busybox:latest", "Always"), ("minik8s/httpd:1", "IfNotPresent"),
    ("registry:5000/app", "Always"), ("registry:5000/app:2", "IfNotPresent"), ("app@sha256:abc", "IfNotPresent"),
])
def test_default_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    assert default_pull_policy(image) == policy


def test_durations_print_as_go_does() -> None:
    assert [fmt_duration(s) for s in (1, 10, 80, 300)] == ["1s", "10s", "1m20s", "5m0s"]


def test_err_image_pull_shows_for_half_the_window_however_often_the_worker_syncs() -> None:
    """The race behind a flaky e2e test: the new sandbox's Docker events (or any early wake-up) made the
    sync right after the failed pull replace ErrImagePull by ImagePullBackOff within milliseconds, so a
    pod could go through its whole first window without ErrImagePull ever being readable."""
    clock = Clock()
    b = Backoff(1, 300, clock)
    b.next("uid/img")  # the pull failed: the worker shows ErrImagePull
    for early in (0.0, 0.01, 0.3, 0.49):  # syncs woken by anything before half the window
        clock.now = 1000.0 + early
        reason, changes_in = image_pull_waiting(b, "uid/img", "ErrImagePull") or ("", 0.0)
        assert reason == "ErrImagePull" and changes_in == pytest.approx(0.5 - early)
    clock.now = 1000.5
    assert image_pull_waiting(b, "uid/img", "ErrImagePull") == ("ImagePullBackOff", pytest.approx(0.5))
    clock.now = 1000.7
    assert image_pull_waiting(b, "uid/img", "ImagePullBackOff") == ("ImagePullBackOff", pytest.approx(0.3))
    clock.now = 1001.0
    assert image_pull_waiting(b, "uid/img", "ImagePullBackOff") is None  # pull again
    b.next("uid/img")  # failed again: a 2 s window, ErrImagePull for its first second
    clock.now = 1001.9
    assert image_pull_waiting(b, "uid/img", "ErrImagePull") == ("ErrImagePull", pytest.approx(0.1))


def test_a_container_not_showing_the_failed_pull_goes_straight_to_image_pull_back_off() -> None:
    clock = Clock()
    b = Backoff(1, 300, clock)
    b.next("uid/img")  # another container of the pod, with the same image, failed to pull it
    assert image_pull_waiting(b, "uid/img", "ContainerCreating") == ("ImagePullBackOff", pytest.approx(1))
    assert image_pull_waiting(b, "uid/other", "") is None


def _pod(rv: str, ready: str = "True", deleting: bool = False) -> Pod:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": rv}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return Pod.model_validate({"metadata": meta,
                               "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
                               "status": {"conditions": [{"type": "Ready", "status": ready}]}})


class _NoSync:
    async def sync_pod(self, pod: Pod) -> float | None:
        return None

    async def sync_terminating_pod(self, pod: Pod, grace: int) -> None:
        return None

    async def sync_terminated_pod(self, pod: Pod, removed: bool) -> None:
        return None


def _workers(pod: Pod) -> tuple[PodWorkers, PodWorker, StatusManager]:
    workers: PodWorkers
    status = StatusManager(client=None, resync=lambda uid: workers.wake(uid))  # type: ignore[arg-type]
    workers = PodWorkers(_NoSync(), status.is_own_status_write)
    worker = PodWorker(_NoSync(), pod)
    workers.workers["u1"] = worker
    return workers, worker, status


def test_our_status_write_seen_by_the_watch_before_its_response_does_not_wake_the_worker() -> None:
    """The other half of the race: the watch event of the kubelet's own status write can arrive before
    the PATCH response; taken for another writer's change, it woke the worker at once (and its sync
    replaced a fresh ErrImagePull). Whose it is is decided when the response is in."""
    workers, worker, status = _workers(_pod("10"))
    record = status._record("u1")
    record.written_rv = "10"
    record.writing = True
    workers.update(_pod("11", ready="False"))  # our write, on the watch first
    assert not worker._wake.is_set()
    record.written_rv = "11"
    status._write_done("u1", record, "11")  # the response: it was ours
    assert not worker._wake.is_set()
    assert worker.pod.metadata.resource_version == "11"


def test_another_writers_status_after_ours_still_wakes_the_worker() -> None:
    workers, worker, status = _workers(_pod("10"))
    record = status._record("u1")
    record.written_rv = "10"
    record.writing = True
    workers.update(_pod("11"))
    workers.update(_pod("12", ready="False"))  # the node lifecycle controller, after our write
    assert not worker._wake.is_set()
    status._write_done("u1", record, "11")
    assert worker._wake.is_set()  # synced, so the kubelet writes what it sees over it


def test_a_failed_status_write_wakes_the_worker_for_what_came_meanwhile() -> None:
    workers, worker, status = _workers(_pod("10"))
    record = status._record("u1")
    record.writing = True
    workers.update(_pod("11", ready="False"))
    status._write_done("u1", record, None)
    assert worker._wake.is_set()


def test_spec_or_metadata_changes_wake_the_worker_even_while_a_status_write_is_on_its_way() -> None:
    workers, worker, status = _workers(_pod("10"))
    status._record("u1").writing = True
    workers.update(_pod("11", deleting=True))
    assert worker._wake.is_set()
