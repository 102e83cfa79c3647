"""machinery.client.CachingTokenSource: a token is fetched once, refreshed after 80% of its lifetime,
kept through a failed refresh while it is still valid, and asked for before every request."""

from __future__ import annotations

import asyncio

import pytest

from machinery import client as client_module
from machinery.client import ApiUnavailable, CachingTokenSource


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(client_module.time, "time", c.time)
    return c


async def test_refreshed_after_80_percent_of_the_lifetime(clock: Clock) -> None:
    fetched: list[int] = []

    async def fetch() -> tuple[str, float]:
        fetched.append(1)
        return f"token-{len(fetched)}", clock.now + 100

    source = CachingTokenSource(fetch)
    assert await source() == "token-1"
    clock.now += 79
    assert await source() == "token-1" and len(fetched) == 1
    clock.now += 2  # 81% of its lifetime
    assert await source() == "token-2" and len(fetched) == 2
    assert source.expires == clock.now + 100


async def test_a_failed_refresh_keeps_a_valid_token_and_retries(clock: Clock) -> None:
    answers: list[tuple[str, float] | Exception] = [("first", clock.now + 10), ApiUnavailable("down"),
                                                     ("second", clock.now + 20)]

    async def fetch() -> tuple[str, float]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    source = CachingTokenSource(fetch, retry=1.0)
    assert await source() == "first"
    clock.now += 9  # due for refresh, still valid: the refresh fails, the old token serves
    assert await source() == "first"
    assert await source() == "first"  # no new attempt until the retry delay has passed
    clock.now += 1.5
    assert await source() == "second"


async def test_no_token_and_a_failed_fetch_raises(clock: Clock) -> None:
    async def fetch() -> tuple[str, float]:
        raise ApiUnavailable("down")

    with pytest.raises(ApiUnavailable):
        await CachingTokenSource(fetch)()


async def test_one_fetch_for_concurrent_callers(clock: Clock) -> None:
    calls = 0
    release = asyncio.Event()

    async def fetch() -> tuple[str, float]:
        nonlocal calls
        calls += 1
        await release.wait()
        return "t", clock.now + 100

    source = CachingTokenSource(fetch)
    waiters = [asyncio.create_task(source()) for _ in range(5)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*waiters) == ["t"] * 5
    assert calls == 1
