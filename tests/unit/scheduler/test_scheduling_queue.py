"""The scheduling queue: priority order, backoff, unschedulable pods and the events that move them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from machinery.api.core_v1 import Pod
from scheduler.framework import PodInfo
from scheduler.queue import NODE_ADD, QueueClosed, SchedulingQueue, is_pod_updated


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


def pod(name: str, priority: int = 0, *, gates: list[str] | None = None, labels: dict[str, str] | None = None,
        rv: str = "1", **status: Any) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}], "priority": priority}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    data: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                                         "resourceVersion": rv, "labels": labels or {}},
                            "spec": spec}
    if status:
        data["status"] = status
    return Pod.from_dict(data)


def names(queue: SchedulingQueue) -> list[str]:
    out = []
    while (qpi := queue.pop_nowait()) is not None:
        out.append(qpi.pod_info.name)
    return out


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> SchedulingQueue:
    return SchedulingQueue(1.0, 10.0, clock=clock)


def test_active_queue_orders_by_priority_then_arrival(queue: SchedulingQueue, clock: FakeClock) -> None:
    for name, prio in (("low-1", 0), ("high", 100), ("low-2", 0), ("mid", 10)):
        queue.add(pod(name, prio))
        clock.step(0.01)
    assert names(queue) == ["high", "mid", "low-1", "low-2"]


def test_pop_counts_attempts_and_cycles(queue: SchedulingQueue) -> None:
    queue.add(pod("a"))
    qpi = queue.pop_nowait()
    assert qpi is not None and qpi.attempts == 1 and queue.scheduling_cycle == 1
    assert qpi.initial_attempt_timestamp == qpi.timestamp


def test_unschedulable_pod_waits_for_a_cluster_event(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(pod("a"))
    qpi = queue.pop_nowait()
    assert qpi is not None
    assert queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    assert queue.where("uid-a") == "unschedulable"
    clock.step(60)
    assert queue.flush_backoff_completed() == 0
    assert queue.pop_nowait() is None
    # an event after its backoff ran out: straight to activeQ
    assert queue.move_all_to_active_or_backoff(NODE_ADD) == 1
    assert queue.where("uid-a") == "active"


def test_moved_pod_still_backing_off_goes_to_backoff_queue(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(pod("a"))
    qpi = queue.pop_nowait()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    clock.step(0.5)  # first backoff is 1s
    queue.move_all_to_active_or_backoff(NODE_ADD)
    assert queue.where("uid-a") == "backoff"
    clock.step(0.4)
    assert queue.flush_backoff_completed() == 0
    clock.step(0.2)
    assert queue.flush_backoff_completed() == 1
    assert names(queue) == ["a"]


def test_backoff_doubles_per_attempt_up_to_the_cap(queue: SchedulingQueue) -> None:
    queue.add(pod("a"))
    qpi = queue.pop_nowait()
    assert qpi is not None
    durations = []
    for attempts in range(1, 8):
        qpi.attempts = attempts
        durations.append(queue.backoff_duration(qpi))
    assert durations == [1, 2, 4, 8, 10, 10, 10]


def test_event_during_the_attempt_sends_failure_to_backoff(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(pod("a"))
    qpi = queue.pop_nowait()
    assert qpi is not None
    cycle = queue.scheduling_cycle
    queue.move_all_to_active_or_backoff(NODE_ADD)  # e.g. a node appeared while the pod was being bound
    queue.add_unschedulable_if_not_present(qpi, cycle)
    assert queue.where("uid-a") == "backoff"
    # an error (not a verdict on nodes) also goes to backoff
    queue.add(pod("b"))
    qpi_b = queue.pop_nowait()
    assert qpi_b is not None
    queue.add_unschedulable_if_not_present(qpi_b, queue.scheduling_cycle, error=True)
    assert queue.where("uid-b") == "backoff"


def test_add_unschedulable_skips_pods_already_queued(queue: SchedulingQueue) -> None:
    queue.add(pod("a"))
    qpi = queue.pop_nowait()
    assert qpi is not None
    queue.update(None, pod("a", rv="2"))  # updated while in flight: queued again
    assert queue.where("uid-a") == "active"
    assert not queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    assert queue.where("uid-a") == "active"


def test_unschedulable_leftover_flush(clock: FakeClock) -> None:
    queue = SchedulingQueue(1.0, 10.0, max_in_unschedulable=300.0, clock=clock)
    queue.add(pod("a"))
    qpi = queue.pop_nowait()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    clock.step(299)
    assert queue.flush_unschedulable_leftover() == 0
    clock.step(2)
    assert queue.flush_unschedulable_leftover() == 1
    assert queue.where("uid-a") == "active"


def test_status_only_update_leaves_pod_unschedulable(queue: SchedulingQueue, clock: FakeClock) -> None:
    old = pod("a")
    queue.add(old)
    qpi = queue.pop_nowait()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    clock.step(5)
    status_only = pod("a", rv="2", conditions=[{"type": "PodScheduled", "status": "False"}])
    assert not is_pod_updated(old, status_only)
    queue.update(old, status_only)
    assert queue.where("uid-a") == "unschedulable"
    relabelled = pod("a", rv="3", labels={"x": "y"})
    assert is_pod_updated(status_only, relabelled)
    queue.update(status_only, relabelled)
    assert queue.where("uid-a") == "active"
    qpi = queue.pop_nowait()
    assert qpi is not None and qpi.pod_info.pod.metadata.labels == {"x": "y"}


def test_update_in_active_queue_reorders_by_new_priority(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(pod("a", 0))
    clock.step(1)
    queue.add(pod("b", 0))
    queue.update(pod("b", 0), pod("b", 50, rv="2"))
    assert names(queue) == ["b", "a"]


def test_delete_removes_from_every_queue(queue: SchedulingQueue) -> None:
    queue.add(pod("a"))
    queue.add(pod("b"))
    qpi = queue.pop_nowait()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    queue.delete(pod("a"))
    queue.delete("uid-b")
    assert len(queue) == 0 and queue.pop_nowait() is None


def test_gated_pods_wait_until_their_gates_are_removed(queue: SchedulingQueue) -> None:
    queue.add(pod("g", gates=["example.com/wait"]))
    assert queue.where("uid-g") == "unschedulable"
    queue.move_all_to_active_or_backoff(NODE_ADD)
    assert queue.where("uid-g") == "unschedulable"
    queue.update(None, pod("g", rv="2"))
    assert queue.where("uid-g") == "active"


def test_add_again_resets_a_pod_to_active(queue: SchedulingQueue) -> None:
    queue.add(pod("a"))
    qpi = queue.pop_nowait()
    assert qpi is not None
    queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    queue.add(pod("a", rv="2"))
    assert queue.where("uid-a") == "active"
    assert len(queue) == 1


def test_rejects_inverted_backoff() -> None:
    with pytest.raises(ValueError):
        SchedulingQueue(10.0, 1.0)


async def test_pop_waits_and_backoff_timer_wakes_it() -> None:
    queue = SchedulingQueue(0.05, 0.05)
    queue.add(pod("a"))
    qpi = await asyncio.wait_for(queue.pop(), 1)
    queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle, error=True)
    assert queue.where("uid-a") == "backoff"
    again = await asyncio.wait_for(queue.pop(), 2)  # the timer moves it back after 50ms
    assert again is qpi and again.attempts == 2
    waiter = asyncio.ensure_future(queue.pop())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    queue.close()
    with pytest.raises(QueueClosed):
        await asyncio.wait_for(waiter, 1)


def test_pod_info_priority_defaults_to_zero() -> None:
    info = PodInfo(Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "n"},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}))
    assert info.priority == 0 and info.key == "n/x"


# -- which informer events reach the queue (scheduler.Scheduler's handlers) ----------------------


def _node(ready: str, heartbeat: str, labels: dict[str, str] | None = None) -> Any:
    from machinery.api.core_v1 import Node

    return Node.from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": labels or {}},
                           "status": {"allocatable": {"cpu": "1"},
                                      "conditions": [{"type": "Ready", "status": ready,
                                                      "lastHeartbeatTime": heartbeat}]}})


def test_heartbeats_do_not_count_as_node_changes() -> None:
    from scheduler.scheduler import _node_scheduling_properties as props

    base = _node("True", "2026-01-01T00:00:00Z")
    assert props(base) == props(_node("True", "2026-01-01T00:00:10Z"))
    assert props(base) != props(_node("False", "2026-01-01T00:00:10Z"))
    assert props(base) != props(_node("True", "2026-01-01T00:00:00Z", {"disk": "ssd"}))


async def test_scheduler_takes_only_its_own_unbound_live_pods() -> None:
    from machinery.client import ApiClient
    from machinery.kubeconfig import ClientConfig
    from scheduler.scheduler import Scheduler

    client = ApiClient(ClientConfig(server="http://127.0.0.1:9"))
    try:
        ours = Scheduler(client)
        other = Scheduler(client, scheduler_name="custom")
        plain = pod("a")
        assert ours.responsible_for(plain) and not other.responsible_for(plain)
        named = plain.model_copy(update={"spec": plain.spec.model_copy(update={"scheduler_name": "custom"})})
        assert other.responsible_for(named) and not ours.responsible_for(named)
        bound = plain.model_copy(update={"spec": plain.spec.model_copy(update={"node_name": "n"})})
        assert not ours.responsible_for(bound)
        deleting = plain.model_copy(update={"metadata": plain.metadata.model_copy(
            update={"deletion_timestamp": "2026-01-01T00:00:00Z"})})
        assert not ours.responsible_for(deleting)
    finally:
        await client.close()
