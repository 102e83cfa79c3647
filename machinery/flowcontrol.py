"""Per-key exponential back-off (client-go's util/flowcontrol.Backoff): the kubelet's crash loops and image pulls,
the daemon controller's failed pods.

The first failure of a key is retried at once; `next()` then opens a window of `base` seconds,
doubling with every further restart up to `cap` (10 s → 5 min upstream). A key whose last update
is older than twice the cap starts over, so a container that ran fine for a while is not punished
for an old crash loop. Time is passed in (or read from `clock`), so the logic is testable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Entry:
    backoff: float
    last_update: float


class Backoff:
    def __init__(self, base: float = 10.0, cap: float = 300.0, clock: Callable[[], float] = time.time) -> None:
        if base <= 0 or cap < base:
            raise ValueError("need 0 < base <= cap")
        self.base = base
        self.cap = cap
        self.clock = clock
        self._entries: dict[str, _Entry] = {}

    def _expired(self, entry: _Entry, event_time: float) -> bool:
        return event_time - entry.last_update > 2 * self.cap

    def get(self, key: str) -> float:
        """The current window of `key` (0 if it has none)."""
        entry = self._entries.get(key)
        return entry.backoff if entry else 0.0

    def next(self, key: str, event_time: float | None = None) -> float:
        """Record a restart of `key`: open (or double) its window; returns the new window."""
        now = self.clock()
        event_time = now if event_time is None else event_time
        entry = self._entries.get(key)
        if entry is None or self._expired(entry, event_time):
            entry = _Entry(self.base, now)
        else:
            entry = _Entry(min(entry.backoff * 2, self.cap), now)
        self._entries[key] = entry
        return entry.backoff

    def in_backoff_since(self, key: str, event_time: float) -> bool:
        """True while less than the window has passed since `event_time` (e.g. the crash)."""
        entry = self._entries.get(key)
        if entry is None or self._expired(entry, event_time):
            return False
        return self.clock() - event_time < entry.backoff

    def remaining(self, key: str, event_time: float) -> float:
        """Seconds until `key` may be retried after `event_time` (0 if it may be now)."""
        entry = self._entries.get(key)
        if entry is None or self._expired(entry, event_time):
            return 0.0
        return max(0.0, event_time + entry.backoff - self.clock())

    def in_backoff(self, key: str) -> bool:
        """True while the window opened by the last `next()` has not passed (image pulls)."""
        entry = self._entries.get(key)
        return entry is not None and self.clock() - entry.last_update < entry.backoff

    def remaining_since_update(self, key: str) -> float:
        entry = self._entries.get(key)
        if entry is None:
            return 0.0
        return max(0.0, entry.last_update + entry.backoff - self.clock())

    def last_update(self, key: str) -> float | None:
        entry = self._entries.get(key)
        return entry.last_update if entry else None

    def reset(self, key: str) -> None:
        self._entries.pop(key, None)

    def forget_prefix(self, prefix: str) -> None:
        for key in [k for k in self._entries if k.startswith(prefix)]:
            del self._entries[key]

    def gc(self) -> None:
        """Drop entries idle for more than twice the cap."""
        now = self.clock()
        for key in [k for k, e in self._entries.items() if now - e.last_update > 2 * self.cap]:
            del self._entries[key]
