"""Work queues with client-go semantics, for asyncio.

A controller's handlers only `add(key)`; its workers loop `key = await queue.get()`, reconcile,
then `forget(key)` on success or `add_rate_limited(key)` on failure, and always `done(key)`.
The queue guarantees what makes that loop safe:

- a key is queued at most once (adds while it waits are folded into one), so a burst of events
  about one object costs one reconcile;
- a key is never handed to two workers at once: an add while it is being processed marks it
  dirty, and `done()` puts it back in the queue;
- failures back off per key (exponential) and overall (token bucket), like client-go's
  `DefaultControllerRateLimiter`, so a broken object cannot hot-loop against the apiserver.

Everything runs on one event loop and no method awaits while it changes state, so the queue needs
no locks; `get()` is the only coroutine.

Every named queue reports client-go's workqueue metrics (util/workqueue/metrics.go) to the process's
prometheus-client registry, which the components serve at /metrics: `workqueue_adds_total`, `workqueue_depth`,
`workqueue_queue_duration_seconds` (add → get), `workqueue_work_duration_seconds` (get → done) and
`workqueue_retries_total`, by `name`. The queue keeps the figures itself; a collector reads them at scrape time.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import weakref
from bisect import bisect_left
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from itertools import accumulate
from typing import Any, Generic, Protocol, TypeVar

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)

Clock = Callable[[], float]


class ShutDown(Exception):
    """Raised by `get()` once the queue is shut down and empty: the worker should return."""


# --------------------------------------------------------------------------------------------
# Rate limiters: how long an item should wait before its next try.
# --------------------------------------------------------------------------------------------


class RateLimiter(Protocol[T_contra]):
    def when(self, item: T_contra) -> float:
        """Seconds `item` should wait now; records one more failure for it."""
        ...

    def forget(self, item: T_contra) -> None:
        """Clear `item`'s failure history (it succeeded, or is gone)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """Failures recorded for `item` since the last `forget`."""
        ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """Per item: base, 2*base, 4*base ... capped at max_delay; `forget` starts over."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        # Guard the power against overflow: past ~1000 doublings any base exceeds any cap.
        if exp > 1000:
            return self.max_delay
        return min(self.base_delay * math.pow(2, exp), self.max_delay)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[T]):
    """Overall token bucket (qps refill, burst capacity), shared by all items.

    Like Go's `rate.Limiter.Reserve()`: a request always gets a slot and the bucket goes into
    debt, so the returned delay grows by 1/qps per request once the burst is spent.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def when(self, item: T) -> float:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, item: T) -> None:
        pass

    def num_requeues(self, item: T) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The worst (longest) answer of several limiters; every limiter records every failure."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: T) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: T) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(
    base_delay: float = 0.005,
    max_delay: float = 1000.0,
    qps: float = 10.0,
    burst: int = 100,
    clock: Clock = time.monotonic,
) -> MaxOfRateLimiter[Hashable]:
    """client-go's DefaultControllerRateLimiter: per-item exponential backoff and a 10 qps bucket."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base_delay, max_delay),
        BucketRateLimiter(qps, burst, clock),
    )


# --------------------------------------------------------------------------------------------
# The queue.
# --------------------------------------------------------------------------------------------


# client-go's: prometheus.ExponentialBuckets(10e-9, 10, 10), 10 ns to 10 s
DURATION_BUCKETS = tuple(10e-9 * 10 ** i for i in range(10))


class QueueStats:
    """One queue's figures, as client-go's defaultQueueMetrics keeps them."""

    __slots__ = ("adds", "queue_durations", "retries", "work_durations")

    def __init__(self) -> None:
        self.adds = 0
        self.retries = 0
        self.queue_durations = [0] * (len(DURATION_BUCKETS) + 1)
        self.work_durations = [0] * (len(DURATION_BUCKETS) + 1)


_QUEUES: weakref.WeakSet[RateLimitingQueue[Any]] = weakref.WeakSet()


class RateLimitingQueue(Generic[T]):
    """FIFO of keys with dedupe, processing exclusion, delayed adds and rate-limited re-adds."""

    def __init__(self, rate_limiter: RateLimiter[T] | None = None, name: str = "") -> None:
        self.name = name
        self.stats = QueueStats()
        self.queue_seconds = 0.0  # the sums of the two histograms
        self.work_seconds = 0.0
        self.last_wait = 0.0  # seconds the item get() handed out last waited in the queue
        self._added_at: dict[T, float] = {}  # queued items: since when
        self._started_at: dict[T, float] = {}  # items being processed: since when
        if name:
            _QUEUES.add(self)
        self.rate_limiter: RateLimiter[T] = rate_limiter or default_controller_rate_limiter()
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()  # wants processing: queued, or re-added while processing
        self._processing: set[T] = set()
        self._waiting: dict[T, tuple[float, asyncio.TimerHandle]] = {}  # add_after: ready time, timer
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False

    # -- plain queue ------------------------------------------------------------------------

    def add(self, item: T) -> None:
        """Queue `item` unless it is already queued; if it is being processed, after `done`."""
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        self.stats.adds += 1
        if item in self._processing:
            return
        self._queue.append(item)
        self._added_at.setdefault(item, time.perf_counter())
        self._wakeup_next()

    async def get(self) -> T:
        """The next item, waiting for one; raises `ShutDown` once shut down and drained."""
        loop = asyncio.get_running_loop()
        while not self._queue:
            if self._shutting_down:
                raise ShutDown(self.name)
            getter: asyncio.Future[None] = loop.create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                # We were woken for an item but got cancelled: pass the wake-up on, or it is lost.
                if self._queue and not getter.cancelled():
                    self._wakeup_next()
                raise
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        now = time.perf_counter()
        added = self._added_at.pop(item, None)
        self.last_wait = now - added if added is not None else 0.0  # read by the taker right after (tracing)
        if added is not None:
            self.queue_seconds += now - added
            self.stats.queue_durations[bisect_left(DURATION_BUCKETS, now - added)] += 1
        self._started_at[item] = now
        return item

    def done(self, item: T) -> None:
        """Processing of `item` finished; if it was re-added meanwhile, queue it again."""
        self._processing.discard(item)
        started = self._started_at.pop(item, None)
        if started is not None:
            took = time.perf_counter() - started
            self.work_seconds += took
            self.stats.work_durations[bisect_left(DURATION_BUCKETS, took)] += 1
        if item in self._dirty:
            self._queue.append(item)
            self._added_at.setdefault(item, time.perf_counter())
            self._wakeup_next()

    def shutdown(self) -> None:
        """Refuse new items and wake every waiting `get()`; queued items are still handed out."""
        self._shutting_down = True
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        return len(self._queue)

    def processing(self) -> int:
        """How many items workers hold right now (got, not yet done)."""
        return len(self._processing)

    def waiting(self) -> int:
        """How many items wait for an `add_after` timer."""
        return len(self._waiting)

    def __aiter__(self) -> AsyncIterator[T]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[T]:
        """`async for key in queue:` — ends at shutdown; the body must still call `done(key)`."""
        while True:
            try:
                yield await self.get()
            except ShutDown:
                return

    def _wakeup_next(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    # -- delaying ---------------------------------------------------------------------------

    def add_after(self, item: T, delay: float) -> None:
        """Add `item` after `delay` seconds; of several pending delays for one item the earliest wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        loop = asyncio.get_running_loop()
        ready = loop.time() + delay
        pending = self._waiting.get(item)
        if pending is not None:
            if pending[0] <= ready:
                return
            pending[1].cancel()
        handle = loop.call_at(ready, self._ready, item)
        self._waiting[item] = (ready, handle)

    def _ready(self, item: T) -> None:
        self._waiting.pop(item, None)
        self.add(item)

    # -- rate limiting ----------------------------------------------------------------------

    def add_rate_limited(self, item: T) -> None:
        """Add `item` once the rate limiter allows it (a failure: backoff grows)."""
        if self._shutting_down:
            return
        self.stats.retries += 1
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Stop tracking `item`'s failures (it succeeded); does not remove it from the queue."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)


class _WorkqueueCollector:
    """client-go's workqueue metrics of every named queue of the process, read at scrape time (queues of one name
    are summed)."""

    def collect(self) -> Iterator[Metric]:
        adds = CounterMetricFamily("workqueue_adds", "[ALPHA] Total number of adds handled by workqueue",
                                   labels=("name",))
        retries = CounterMetricFamily("workqueue_retries", "[ALPHA] Total number of retries handled by workqueue",
                                      labels=("name",))
        depth = GaugeMetricFamily("workqueue_depth", "[ALPHA] Current depth of workqueue", labels=("name",))
        queue_duration = HistogramMetricFamily(
            "workqueue_queue_duration_seconds",
            "[ALPHA] How long in seconds an item stays in workqueue before being requested.", labels=("name",))
        work_duration = HistogramMetricFamily(
            "workqueue_work_duration_seconds",
            "[ALPHA] How long in seconds processing an item from workqueue takes.", labels=("name",))
        by_name: dict[str, list[RateLimitingQueue[Any]]] = {}
        for queue in list(_QUEUES):
            by_name.setdefault(queue.name, []).append(queue)
        bounds = [*(repr(b) for b in DURATION_BUCKETS), "+Inf"]
        for name, queues in sorted(by_name.items()):
            adds.add_metric((name,), sum(q.stats.adds for q in queues))
            retries.add_metric((name,), sum(q.stats.retries for q in queues))
            depth.add_metric((name,), sum(len(q) for q in queues))
            for family, counts, total in (
                    (queue_duration, [sum(c) for c in zip(*(q.stats.queue_durations for q in queues), strict=True)],
                     sum(q.queue_seconds for q in queues)),
                    (work_duration, [sum(c) for c in zip(*(q.stats.work_durations for q in queues), strict=True)],
                     sum(q.work_seconds for q in queues))):
                family.add_metric((name,), list(zip(bounds, accumulate(counts), strict=True)), total)
        yield from (adds, depth, queue_duration, work_duration, retries)


REGISTRY.register(_WorkqueueCollector())  # a collector: collect() above
