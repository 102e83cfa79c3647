"""Reading container logs in the CRI format and Docker's json-file format (kubelet.kuberuntime.logs):
tail, since, timestamps, limitBytes, partial lines, follow until the container stops."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubelet.container.runtime import LogOptions
from kubelet.kuberuntime.logs import parse_line, read_logs
from machinery.timeutil import parse_rfc3339

CRI = (b"2026-11-22T10:00:00.000000001Z stdout F one\n"
       b"2026-11-22T10:00:01.5Z stderr P tw\n"
       b"2026-11-22T10:00:01.6Z stderr F o\n"
       b"2026-11-22T10:00:02Z stdout F three\n")
DOCKER = (b'{"log":"one\\n","stream":"stdout","time":"2026-11-22T10:00:00.000000001Z"}\n'
          b'{"log":"two\\n","stream":"stderr","time":"2026-11-22T10:00:01.5Z"}\n'
          b'{"log":"three\\n","stream":"stdout","time":"2026-11-22T10:00:02Z"}\n')


def unix(text: str) -> float:
    parsed = parse_rfc3339(text)
    assert parsed is not None
    return parsed.timestamp()


async def collect(path: Path, **options: object) -> bytes:
    return b"".join([chunk async for chunk in read_logs(str(path), LogOptions(**options))])  # type: ignore[arg-type]


@pytest.mark.parametrize("content", [CRI, DOCKER], ids=["cri", "docker-json"])
async def test_both_formats_read_alike(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(content)
    assert await collect(path) == b"one\ntwo\nthree\n"
    assert await collect(path, tail_lines=2) == b"two\nthree\n"
    assert await collect(path, tail_lines=0) == b""
    assert await collect(path, since=unix("2026-11-22T10:00:01Z")) == b"two\nthree\n"
    assert await collect(path, limit_bytes=5) == b"one\nt"
    stamped = await collect(path, timestamps=True, tail_lines=1)
    assert stamped == b"2026-11-22T10:00:02Z three\n"


def test_lines_that_are_not_log_entries_are_skipped() -> None:
    assert parse_line(b"garbage") is None
    assert parse_line(b'{"not": "a log"}') is None
    entry = parse_line(b"2026-11-22T10:00:00Z stdout P part")
    assert entry is not None and entry.partial and entry.content == b"part"
    # a timestamp Go's RFC3339Nano does not read: upstream's parsers refuse the line
    assert parse_line(b"2026-11-22 10:00:00 stdout F text") is None
    assert parse_line(b'{"log":"x\\n","stream":"stdout","time":"yesterday"}') is None


async def test_since_keeps_nanoseconds(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(b"2026-11-22T10:00:00.999999999Z stdout F late\n2026-11-22T10:00:01.000000001Z stdout F later\n")
    assert await collect(path, since=unix("2026-11-22T10:00:01Z")) == b"later\n"


async def test_a_missing_log_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await collect(tmp_path / "absent.log")
    with pytest.raises(FileNotFoundError, match="no log path"):
        async for _ in read_logs("", LogOptions()):
            pass


async def test_follow_reads_new_lines_until_the_container_stops(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(b"2026-11-22T10:00:00Z stdout F first\n")
    running = {"yes": True}

    async def still_running() -> bool:
        return running["yes"]

    chunks: list[bytes] = []

    async def follow() -> None:
        async for chunk in read_logs(str(path), LogOptions(follow=True), still_running):
            chunks.append(chunk)

    task = asyncio.create_task(follow())
    deadline = asyncio.get_running_loop().time() + 5
    while chunks != [b"first\n"]:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)
    with path.open("ab") as f:
        f.write(b"2026-11-22T10:00:01Z stdout F second\n")
    while len(chunks) < 2:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)
    running["yes"] = False
    await asyncio.wait_for(task, 5)
    assert chunks == [b"first\n", b"second\n"]
