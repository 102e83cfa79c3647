"""A watch stream read on a background thread, so a test can wait for events with a deadline."""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

import httpx


class WatchStream:
    def __init__(self, base_url: str, path: str, **params: str):
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.status_code: int | None = None
        self._client = httpx.Client(base_url=base_url, timeout=httpx.Timeout(10, read=None))
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(path, {"watch": "true", **params}), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError("watch did not answer within 10s")

    def _run(self, path: str, params: dict[str, str]) -> None:
        try:
            with self._client.stream("GET", path, params=params) as r:
                self.status_code = r.status_code
                self._ready.set()
                for line in r.iter_lines():
                    if line.strip():
                        self.events.put(json.loads(line))
        except httpx.HTTPError:
            pass
        finally:
            self._ready.set()
            self.events.put(None)

    def next(self, timeout: float = 10.0, skip_bookmarks: bool = True) -> dict[str, Any] | None:
        """The next event (None when the stream ended); TimeoutError after timeout seconds."""
        while True:
            try:
                event = self.events.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"no watch event within {timeout}s") from None
            if event is None or not (skip_bookmarks and event["type"] == "BOOKMARK"):
                return event

    def take(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            event = self.next(timeout)
            assert event is not None, f"stream ended after {out}"
            out.append(event)
        return out

    def close(self) -> None:
        self._client.close()
        self._thread.join(5)
