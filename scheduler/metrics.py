"""The scheduler's Prometheus metrics with upstream's names (pkg/scheduler/metrics/metrics.go), read from the
schedulers of the process at scrape time and served on the secure port (machinery/delegated_auth.py):
`scheduler_schedule_attempts_total{result, profile}` (scheduled, unschedulable, error),
`scheduler_pending_pods{queue}` (active, backoff, unschedulable) and `scheduler_preemption_attempts_total`.
The workqueue-less scheduler keeps its counters itself (scheduler.py); this only reports them."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

_SCHEDULERS: weakref.WeakSet[Any] = weakref.WeakSet()


def register(scheduler: Any) -> None:
    _SCHEDULERS.add(scheduler)


class _SchedulerCollector:
    def collect(self) -> Iterator[Metric]:
        attempts = CounterMetricFamily(
            "scheduler_schedule_attempts",
            "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.", labels=("profile", "result"))
        pending = GaugeMetricFamily(
            "scheduler_pending_pods",
            "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
            "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
            "unschedulablePods that the scheduler attempted to schedule and failed.", labels=("queue",))
        preemptions = CounterMetricFamily("scheduler_preemption_attempts",
                                          "[STABLE] Total preemption attempts in the cluster till now")
        counts: dict[tuple[str, str], int] = {}
        queued = {"active": 0, "backoff": 0, "unschedulable": 0}
        preempted = 0
        for s in list(_SCHEDULERS):
            for result, value in (("scheduled", s.scheduled), ("unschedulable", s.unschedulable),
                                  ("error", s.bind_errors)):
                counts[(s.name, result)] = counts.get((s.name, result), 0) + value
            for queue, size in s.queue.sizes().items():
                queued[queue] += size
            preempted += s.preemptions
        for labels, value in sorted(counts.items()):
            attempts.add_metric(labels, value)
        for queue, size in queued.items():
            pending.add_metric((queue,), size)
        preemptions.add_metric((), preempted)
        yield from (attempts, pending, preemptions)


REGISTRY.register(_SchedulerCollector())  # a collector: collect() above
