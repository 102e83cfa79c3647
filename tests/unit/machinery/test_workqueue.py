"""The work queue keeps client-go's promises: dedupe, one worker per key, delays, backoff."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from machinery.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
    ShutDown,
    default_controller_rate_limiter,
)

DEADLINE = 2.0  # generous upper bound for anything that should happen "soon"


class FakeClock:
    """A clock the test moves by hand, so token-bucket arithmetic is exact."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def get_soon(q: RateLimitingQueue[str]) -> str:
    return await asyncio.wait_for(q.get(), DEADLINE)


async def assert_nothing_within(q: RateLimitingQueue[str], seconds: float) -> None:
    """`get()` stays blocked for `seconds` (a deadline, not a sleep used as synchronisation)."""
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.get(), seconds)


# -- plain queue ------------------------------------------------------------------------------


async def test_fifo_order() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    for key in ("a", "b", "c"):
        q.add(key)
    assert len(q) == 3
    assert [await get_soon(q) for _ in range(3)] == ["a", "b", "c"]
    assert len(q) == 0


async def test_add_while_queued_is_deduplicated() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    q.add("a")
    q.add("b")
    q.add("a")
    assert len(q) == 2
    assert await get_soon(q) == "a"
    assert await get_soon(q) == "b"
    await assert_nothing_within(q, 0.05)


async def test_add_while_processing_requeues_after_done() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    q.add("a")
    key = await get_soon(q)
    q.add("a")
    q.add("a")
    # Not handed to a second worker while the first still holds it.
    assert len(q) == 0
    assert q.processing() == 1
    await assert_nothing_within(q, 0.05)
    q.done(key)
    assert len(q) == 1
    assert await get_soon(q) == "a"
    q.done("a")
    assert len(q) == 0
    assert q.processing() == 0


async def test_done_without_readd_does_not_requeue() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    q.add("a")
    q.done(await get_soon(q))
    assert len(q) == 0
    await assert_nothing_within(q, 0.05)


async def test_get_waits_for_add() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    getter = asyncio.create_task(q.get())
    await assert_nothing_within(q, 0.05)
    assert not getter.done()
    q.add("x")
    assert await asyncio.wait_for(getter, DEADLINE) == "x"


async def test_each_waiting_worker_gets_a_distinct_key() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    for key in ("a", "b", "c"):
        q.add(key)
    got = await asyncio.wait_for(asyncio.gather(*getters), DEADLINE)
    assert sorted(got) == ["a", "b", "c"]


async def test_cancelled_waiter_passes_its_wakeup_on() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    # Let both register as waiters: wait until the queue has two parked getters.
    await asyncio.wait_for(_until(lambda: len(q._getters) == 2), DEADLINE)
    q.add("a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs: `second` must get "a".
    assert await asyncio.wait_for(second, DEADLINE) == "a"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_shutdown_wakes_waiters_with_shutdown() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    getters = [asyncio.create_task(q.get()) for _ in range(2)]
    await asyncio.wait_for(_until(lambda: len(q._getters) == 2), DEADLINE)
    q.shutdown()
    for getter in getters:
        with pytest.raises(ShutDown):
            await asyncio.wait_for(getter, DEADLINE)
    assert q.shutting_down


async def test_shutdown_drains_queued_items_then_refuses() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    q.add("a")
    q.add("b")
    q.shutdown()
    q.add("c")  # ignored after shutdown
    assert await get_soon(q) == "a"
    assert await get_soon(q) == "b"
    with pytest.raises(ShutDown):
        await get_soon(q)


async def test_async_iteration_ends_at_shutdown() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    seen: list[str] = []

    async def worker() -> None:
        async for key in q:
            seen.append(key)
            q.done(key)
            if key == "last":
                q.shutdown()

    q.add("a")
    q.add("last")
    await asyncio.wait_for(worker(), DEADLINE)
    assert seen == ["a", "last"]


# -- delaying ---------------------------------------------------------------------------------


async def test_add_after_delivers_after_the_delay() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_after("a", 0.1)
    assert len(q) == 0
    assert q.waiting() == 1
    assert await get_soon(q) == "a"
    assert loop.time() - start >= 0.1 - 0.005  # timer granularity
    assert q.waiting() == 0


async def test_add_after_zero_or_negative_adds_now() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert len(q) == 2
    assert q.waiting() == 0


async def test_add_after_keeps_the_earliest_time() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_after("a", 30)
    q.add_after("a", 0.05)  # earlier: replaces the 30 s timer
    q.add_after("a", 20)  # later: ignored
    assert q.waiting() == 1
    assert await get_soon(q) == "a"
    assert loop.time() - start < 20
    q.done("a")
    await assert_nothing_within(q, 0.1)  # and it came exactly once


async def test_add_after_of_a_queued_key_is_deduplicated_on_arrival() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    q.add("a")
    q.add_after("a", 0.02)
    await asyncio.wait_for(_until(lambda: q.waiting() == 0), DEADLINE)
    assert len(q) == 1


async def test_add_after_while_processing_requeues_after_done() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    q.add("a")
    key = await get_soon(q)
    q.add_after("a", 0.02)
    await asyncio.wait_for(_until(lambda: q.waiting() == 0), DEADLINE)
    assert len(q) == 0  # still held by the worker
    q.done(key)
    assert await get_soon(q) == "a"


async def test_shutdown_cancels_pending_delays() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    q.add_after("a", 0.05)
    q.shutdown()
    assert q.waiting() == 0
    q.add_after("b", 0.01)  # ignored
    assert q.waiting() == 0
    with pytest.raises(ShutDown):
        await get_soon(q)


# -- rate limiting ----------------------------------------------------------------------------


async def test_add_rate_limited_counts_requeues_and_forget_resets() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=0.01, max_delay=1.0)
    q: RateLimitingQueue[str] = RateLimitingQueue(limiter)
    for attempt in range(1, 4):
        q.add_rate_limited("a")
        assert q.num_requeues("a") == attempt
        assert await get_soon(q) == "a"
        q.done("a")
    assert q.num_requeues("b") == 0
    q.forget("a")
    assert q.num_requeues("a") == 0


async def test_add_rate_limited_waits_the_backoff() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=0.05, max_delay=1.0)
    q: RateLimitingQueue[str] = RateLimitingQueue(limiter)
    limiter.when("a")  # one earlier failure: the next try waits 2 * base = 0.1 s
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_rate_limited("a")
    assert len(q) == 0
    assert await get_soon(q) == "a"
    assert loop.time() - start >= 0.1 - 0.005


async def test_add_rate_limited_after_shutdown_is_ignored() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    q: RateLimitingQueue[str] = RateLimitingQueue(limiter)
    q.shutdown()
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 0
    assert q.waiting() == 0


def test_exponential_backoff_doubles_per_item_and_caps() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=0.005, max_delay=1000.0)
    assert [limiter.when("a") for _ in range(4)] == [0.005, 0.01, 0.02, 0.04]
    assert limiter.when("b") == 0.005  # per item
    assert limiter.num_requeues("a") == 4
    for _ in range(40):
        limiter.when("a")
    assert limiter.when("a") == 1000.0
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005


def test_exponential_backoff_survives_huge_failure_counts() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=0.005, max_delay=10.0)
    limiter._failures["a"] = 5000
    assert limiter.when("a") == 10.0


def test_token_bucket_burst_then_qps() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter[str](qps=10, burst=100, clock=clock)
    assert [bucket.when(str(i)) for i in range(100)] == [0.0] * 100
    # The burst is spent: each further request waits one more 1/qps slot.
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2)
    clock.now += 0.3  # three tokens refilled, two of them pay the debt
    assert bucket.when("z") == pytest.approx(0.0, abs=1e-9)
    assert bucket.num_requeues("x") == 0


def test_token_bucket_refills_only_up_to_burst() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter[str](qps=1, burst=2, clock=clock)
    clock.now += 3600
    assert [bucket.when("a") for _ in range(2)] == [0.0, 0.0]
    assert bucket.when("a") == pytest.approx(1.0)


def test_token_bucket_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter[str](qps=0)
    with pytest.raises(ValueError):
        BucketRateLimiter[str](burst=0)


def test_max_of_takes_the_longest_and_forgets_everywhere() -> None:
    clock = FakeClock()
    exp = ItemExponentialFailureRateLimiter[str](base_delay=0.5, max_delay=100)
    bucket = BucketRateLimiter[str](qps=1, burst=1, clock=clock)
    limiter = MaxOfRateLimiter(exp, bucket)
    assert limiter.when("a") == 0.5  # exponential wins (bucket had a token)
    assert limiter.when("b") == pytest.approx(1.0)  # bucket wins (in debt), exp says 0.5
    assert limiter.num_requeues("a") == 1
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    with pytest.raises(ValueError):
        MaxOfRateLimiter()


def test_default_controller_rate_limiter_matches_client_go() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock=clock)
    assert limiter.when("a") == 0.005
    assert limiter.when("a") == 0.01
    for i in range(98):
        limiter.when(f"k{i}")
    # 100 tokens spent: the bucket (10 qps) now dominates a fresh item's 5 ms.
    assert limiter.when("fresh") == pytest.approx(0.1)


async def test_queue_uses_default_limiter() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(name="demo")
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 1
    assert await get_soon(q) == "a"


async def _until(condition: Callable[[], bool]) -> None:
    """Yield to the loop until `condition()` holds; callers bound it with wait_for."""
    while not condition():
        await asyncio.sleep(0.001)
