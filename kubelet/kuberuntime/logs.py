"""Reading container log files (upstream pkg/kubelet/kuberuntime/logs/logs.go).

The runtime writes each container's log to the path its ContainerStatus names, one line per
entry, in one of two formats, told apart per line as upstream's parser does:

- CRI: `2016-10-06T00:17:09.669794202Z stdout F log content` (`P` marks a partial line whose
  rest follows in the next entry);
- Docker's json-file: `{"log":"content\\n","stream":"stdout","time":"2016-10-...Z"}` (the Docker
  shim's log path is a symlink to Docker's own file, as cri-dockerd's is).

`read_logs` yields the content as kubectl gets it: `tail_lines` of the end, entries from `since`,
each prefixed with its RFC 3339 time when `timestamps`, at most `limit_bytes`, and with `follow`
it keeps reading while `still_running()` says the container runs.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from kubelet.container.runtime import LogOptions
from machinery.timeutil import parse_rfc3339_nano

FOLLOW_POLL_SECONDS = 0.1


@dataclass
class LogEntry:
    timestamp: str  # RFC 3339 with nanoseconds, as the runtime wrote it
    stream: str
    content: bytes
    partial: bool = False

    @property
    def time_ns(self) -> int:
        """Unix nanoseconds, exact (parse_line only makes entries whose timestamp parses)."""
        return parse_rfc3339_nano(self.timestamp) or 0


def parse_line(line: bytes) -> LogEntry | None:
    """One line of either format (None: not a log line, its timestamp not RFC3339Nano included, as
    upstream's parsers refuse it). The content keeps its newline, as kubectl shows it."""
    if line.startswith(b"{"):
        try:
            data = json.loads(line)
            entry = LogEntry(str(data["time"]), str(data.get("stream", "stdout")), str(data["log"]).encode())
        except (ValueError, KeyError, TypeError):
            return None
        return entry if parse_rfc3339_nano(entry.timestamp) is not None else None
    parts = line.split(b" ", 3)
    if len(parts) < 3:
        return None
    timestamp, stream = parts[0].decode(errors="replace"), parts[1].decode(errors="replace")
    if parse_rfc3339_nano(timestamp) is None:
        return None
    if len(parts) == 4 and parts[2] in (b"P", b"F"):
        tag, content = parts[2], parts[3]
    else:  # an old CRI line without the tag
        tag, content = b"F", b" ".join(parts[2:])
    content = content.rstrip(b"\n")
    partial = tag == b"P"
    return LogEntry(timestamp, stream, content if partial else content + b"\n", partial)


def format_entry(entry: LogEntry, timestamps: bool) -> bytes:
    if not timestamps:
        return entry.content
    return entry.timestamp.encode() + b" " + entry.content


def _read_lines(path: str, offset: int) -> tuple[list[bytes], int]:
    """Whole lines from `offset` on, and where the next read starts (a half-written last line waits)."""
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    return data[:end + 1].splitlines(), offset + end + 1


async def read_logs(path: str, options: LogOptions,
                    still_running: Callable[[], Awaitable[bool]] | None = None) -> AsyncIterator[bytes]:
    if not path:
        raise FileNotFoundError("the container has no log path")
    lines, offset = await asyncio.to_thread(_read_lines, path, 0)
    entries = [e for e in map(parse_line, lines) if e is not None]
    if options.since is not None:
        since_ns = round(options.since * 1e9)  # compared in nanoseconds: a float of seconds rounds them away
        entries = [e for e in entries if e.time_ns >= since_ns]
    if options.tail_lines is not None:
        complete: deque[LogEntry] = deque()
        count = 0
        for e in reversed(entries):  # a partial entry belongs to the line that ends after it
            if not e.partial:
                count += 1
            if count > options.tail_lines:
                break
            complete.appendleft(e)
        entries = list(complete)
    sent = 0
    limit = options.limit_bytes

    def clip(data: bytes) -> bytes:
        nonlocal sent
        if limit is not None:
            data = data[:max(limit - sent, 0)]
        sent += len(data)
        return data

    for e in entries:
        data = clip(format_entry(e, options.timestamps))
        if data:
            yield data
        if limit is not None and sent >= limit:
            return
    if not options.follow or still_running is None:
        return
    inode = os.stat(path).st_ino
    while True:
        new, offset = await asyncio.to_thread(_read_lines, path, offset)
        for line in new:
            entry = parse_line(line)
            if entry is None:
                continue
            data = clip(format_entry(entry, options.timestamps))
            if data:
                yield data
            if limit is not None and sent >= limit:
                return
        if not new:
            if not await still_running():
                # what was written between the last read and the exit
                new, offset = await asyncio.to_thread(_read_lines, path, offset)
                for line in new:
                    entry = parse_line(line)
                    if entry is not None and (data := clip(format_entry(entry, options.timestamps))):
                        yield data
                return
            try:
                if os.stat(path).st_ino != inode:  # rotated: start at the new file's beginning
                    inode, offset = os.stat(path).st_ino, 0
            except FileNotFoundError:
                return
            await asyncio.sleep(FOLLOW_POLL_SECONDS)
