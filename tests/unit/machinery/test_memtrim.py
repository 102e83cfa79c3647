"""machinery/memtrim.py: malloc_trim now and then, where the C library has it."""

from __future__ import annotations

import asyncio
import ctypes

import pytest

from machinery import memtrim


def test_trim_gives_back_freed_heap_pages_on_glibc() -> None:
    if memtrim._malloc_trim is None:
        pytest.skip("no glibc here")
    assert memtrim.trim() is True


def test_without_malloc_trim_trim_says_so_and_the_task_ends_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memtrim, "_malloc_trim", None)
    assert memtrim.trim() is False
    assert asyncio.run(asyncio.wait_for(memtrim.run(interval=3600), 5)) is None


def test_a_c_library_without_malloc_trim_means_none(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoTrim:  # a C library (musl's, say) that has no such symbol
        def __init__(self, name: str) -> None:
            pass

        def __getattr__(self, name: str) -> object:
            raise AttributeError(name)

    monkeypatch.setattr(ctypes, "CDLL", NoTrim)
    assert memtrim._load_malloc_trim() is None


def test_the_task_trims_every_interval_until_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    async def main() -> None:
        third = asyncio.Event()

        def fake_trim(pad: int) -> int:
            calls.append(pad)
            if len(calls) == 3:
                third.set()
            return 1

        monkeypatch.setattr(memtrim, "_malloc_trim", fake_trim)
        task = asyncio.create_task(memtrim.run(interval=0))
        await asyncio.wait_for(third.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert calls[:3] == [0, 0, 0]  # pad 0: every free page, not only the heap's top
