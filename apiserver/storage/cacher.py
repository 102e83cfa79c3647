"""The watch cache (upstream: staging/.../apiserver/pkg/storage/cacher): one etcd watch per
resource feeds a store of current objects and a window of recent events, and fans every event out
to all HTTP watchers of that resource. A watcher that falls too far behind is closed rather than
allowed to hold the others back; it resumes from its last resourceVersion like any client.

A watch from a resourceVersion older than the window (say, after an apiserver restart) is served
by its own etcd watch from that revision; if etcd has compacted it away the answer is 410 Expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from apiserver.storage import codec
from apiserver.storage.etcd import KV, Compacted, EtcdEvent, EtcdStorage, StorageError
from apiserver.storage.predicate import Attrs, Predicate

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CachedObject:
    key: str
    rv: int
    raw: bytes  # the wire JSON, resourceVersion included
    attrs: Attrs

    def obj(self) -> dict[str, Any]:
        return orjson.loads(self.raw)


@dataclass(slots=True)
class CacheEvent:
    type: str  # ADDED, MODIFIED, DELETED
    rv: int
    obj: CachedObject  # for DELETED: the last state, with the deletion's resourceVersion
    prev: CachedObject | None


# What a watcher's queue carries: an event line already encoded (shared by every watcher that gets the
# same event), (type, object) for an event its consumer encodes itself (tables, replays), a bookmark's
# resourceVersion, or None at the end.
WatchItem = bytes | tuple[str, CachedObject] | int | None


def compact(raw: bytes) -> bytes:
    """A copy of raw in a block of its own size. orjson.dumps answers bytes in the buffer it wrote them
    into, at least 4 KiB whatever the length: a 1.3 KB pod held that way costs 4 KB for as long as the
    cache holds it (10,000 pods: ~27 MB of the apiserver's RSS). The copy costs ~0.1 µs per KB."""
    return bytes(memoryview(raw))


def event_line(kind: str, raw: bytes) -> bytes:
    """One line of a JSON watch stream."""
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"


class TooOld(Exception):
    """The resourceVersion asked for is older than the window and than etcd's history."""


class Watcher:
    """One HTTP watch: a bounded queue the cache (or a private etcd watch) fills in order.

    A watch is held for minutes by each of thousands of clients, so it is kept small: a list and
    at most one waiting future, no task of its own; the cache encodes an event once for all
    watchers that see it the same way (`encoded`), rather than once per watcher."""

    __slots__ = ("_on_close", "_pump", "_waiter", "bookmarks", "capacity", "closed", "encoded", "predicate", "queue",
                 "start_rv")

    def __init__(self, predicate: Predicate, start_rv: int, bookmarks: bool, capacity: int,
                 encoded: bool = True):
        self.predicate = predicate
        self.start_rv = start_rv
        self.bookmarks = bookmarks
        self.capacity = capacity
        self.encoded = encoded  # its consumer writes JSON lines: give it the shared encoded line
        self.queue: list[WatchItem] = []  # a list: an empty deque is 760 bytes, an empty list 56
        self.closed = False
        self._waiter: asyncio.Future[None] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._on_close: Callable[[Watcher], None] | None = None

    def kind_for(self, event: CacheEvent) -> str | None:
        """What this watcher sees of a store event: an object that stops matching its selectors is
        DELETED for it, one that starts matching is ADDED; None if it sees nothing."""
        p = self.predicate
        if event.type == "DELETED":
            return "DELETED" if p.matches(event.obj.attrs) else None
        now = p.matches(event.obj.attrs)
        before = event.prev is not None and p.matches(event.prev.attrs)
        if now:
            return "MODIFIED" if before else "ADDED"
        return "DELETED" if before else None

    def deliver(self, event: CacheEvent, lines: dict[str, bytes] | None = None) -> None:
        """Queue what this watcher sees of event; `lines` caches the encoded lines of this event
        across the watchers it is fanned out to."""
        if self.closed or event.rv <= self.start_rv:
            return
        kind = self.kind_for(event)
        if kind is None:
            return
        if not self.encoded:
            self._put((kind, event.obj))
            return
        if lines is None:
            self._put(event_line(kind, event.obj.raw))
            return
        line = lines.get(kind)
        if line is None:
            line = lines[kind] = event_line(kind, event.obj.raw)
        self._put(line)

    def bookmark(self, rv: int) -> None:
        if self.bookmarks and not self.closed:
            self._put(max(rv, self.start_rv))

    def _put(self, item: WatchItem) -> None:
        if len(self.queue) >= self.capacity:
            log.info("closing a watcher that fell %d events behind", len(self.queue))
            self.queue = []  # too slow: drop its backlog, it resumes from its last resourceVersion
            self.stop()
            return
        self.queue.append(item)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def stop(self) -> None:
        """End the stream: the consumer sees None after what it has already been given."""
        if self.closed:
            return
        self.closed = True
        self.queue.append(None)
        self._wake()
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None
        if self._on_close is not None:
            self._on_close(self)
            self._on_close = None

    def wait(self) -> asyncio.Future[None]:
        """A future done once something is queued (a consumer awaits it in its own frame: WatchResponse)."""
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._waiter = asyncio.get_running_loop().create_future()
        return waiter

    def take(self) -> list[WatchItem]:
        """Everything queued so far; the last batch ends with None."""
        batch, self.queue = self.queue, []
        return batch

    async def next_batch(self) -> list[WatchItem]:
        """Everything queued so far (waiting for at least one item); the last batch ends with None."""
        while not self.queue:
            await self.wait()
        return self.take()

    async def items(self) -> AsyncIterator[list[WatchItem]]:
        """Batches of items (everything queued at once), ending after None."""
        try:
            while True:
                batch = await self.next_batch()
                yield batch
                if batch[-1] is None:
                    return
        finally:
            self.stop()


class Cacher:
    def __init__(self, storage: EtcdStorage, prefix: str, attrs_of: Callable[[dict[str, Any]], Attrs],
                 window: int = 4096, watcher_capacity: int = 2048, enabled: bool = True):
        self.storage = storage
        # disabled (upstream's watch cache size 0, events' default): no store, no window; every watch is a
        # private etcd watch and lists read etcd (the store's list does)
        self.enabled = enabled
        self.prefix = prefix
        self.attrs_of = attrs_of
        self.window: deque[CacheEvent] = deque(maxlen=window)
        self.watcher_capacity = watcher_capacity
        self.store: dict[str, CachedObject] = {}
        self.rv = 0  # every event up to rv is in the store
        self.window_start = 0  # every event after window_start is in the window
        self.watchers: set[Watcher] = set()
        # private etcd watches (a resourceVersion older than the window, or the cache disabled) and the revision
        # each has delivered up to: they get bookmarks too, as upstream's etcd3 watcher turns progress into them
        self.etcd_watchers: dict[Watcher, list[int]] = {}
        self.ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def cached(self, kv: KV, rv: int | None = None) -> CachedObject:
        obj = codec.decode(kv.value, rv or kv.mod_revision)
        return CachedObject(kv.key, rv or kv.mod_revision, compact(orjson.dumps(obj)), self.attrs_of(obj))

    def to_event(self, ev: EtcdEvent) -> CacheEvent | None:
        if ev.type == "DELETE":
            if ev.prev is None:  # an object whose last value its transformer could not read: gone as we had it
                held = self.store.get(ev.kv.key)
                return CacheEvent("DELETED", ev.kv.mod_revision, held, None) if held is not None else None
            return CacheEvent("DELETED", ev.kv.mod_revision, self.cached(ev.prev, ev.kv.mod_revision), None)
        prev = None
        if ev.prev is not None:
            # the version the store holds is that very etcd value: one copy for the store, the window's previous
            # event and this event's prev, and no decode and re-encode per event (issue 19)
            held = self.store.get(ev.prev.key)
            prev = held if held is not None and held.rv == ev.prev.mod_revision else self.cached(ev.prev)
        return CacheEvent("MODIFIED" if prev else "ADDED", ev.kv.mod_revision, self.cached(ev.kv), prev)

    # -- feeding the cache -------------------------------------------------------------------

    def start(self) -> None:
        if not self.enabled:
            self.ready.set()
            return
        self._task = asyncio.create_task(self._run(), name=f"cacher {self.prefix}")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for w in [*self.watchers, *self.etcd_watchers]:
            w.stop()

    async def _relist(self) -> None:
        kvs, revision, _ = await self.storage.list(self.prefix, skip_untransformable=True)
        self.store = {kv.key: self.cached(kv) for kv in kvs}
        self.window.clear()
        self.rv = self.window_start = revision
        for w in list(self.watchers):  # their history is gone from the window: let them resume
            w.stop()
        self.ready.set()

    async def _run(self) -> None:
        delay = 0.1
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                async for batch, progress in self.storage.watch(self.prefix, self.rv + 1):
                    delay = 0.1
                    for ev in batch:
                        self._apply(ev)
                    if not batch and progress > self.rv:
                        self.rv = progress
            except asyncio.CancelledError:
                raise
            except Compacted:
                log.warning("watch cache %s: history compacted, relisting", self.prefix)
                need_list = True
            except StorageError as e:
                log.warning("watch cache %s: %s; retrying in %.1fs", self.prefix, e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            except Exception:
                log.exception("watch cache %s failed; relisting", self.prefix)
                await asyncio.sleep(delay)
                need_list = True

    def _apply(self, ev: EtcdEvent) -> None:
        event = self.to_event(ev)
        self.rv = ev.kv.mod_revision
        if event is None:
            return
        if event.type == "DELETED":
            self.store.pop(event.obj.key, None)
        else:
            self.store[event.obj.key] = event.obj
        if len(self.window) == self.window.maxlen:
            self.window_start = self.window[0].rv
        self.window.append(event)
        lines: dict[str, bytes] = {}  # the event encoded once per kind, shared by the watchers
        for w in list(self.watchers):
            w.deliver(event, lines)

    def send_bookmarks(self) -> None:
        for w in list(self.watchers):
            w.bookmark(self.rv)
        for w, progress in list(self.etcd_watchers.items()):  # each at the revision its own etcd watch reached
            w.bookmark(progress[0])

    # -- serving -----------------------------------------------------------------------------

    def snapshot(self, predicate: Predicate) -> tuple[list[CachedObject], int]:
        """Current objects matching predicate, sorted by key, and the revision they are at."""
        name = predicate.name
        if name is not None and predicate.namespace is not None:
            key = f"{self.prefix}{predicate.namespace}/{name}"
            objs = [o for o in (self.store.get(key),) if o is not None]
        else:
            objs = list(self.store.values())
        matching = [o for o in objs if predicate.matches(o.attrs)]
        matching.sort(key=lambda o: o.key)
        return matching, self.rv

    async def watch(self, predicate: Predicate, rv: int | None, bookmarks: bool, encoded: bool = True) -> Watcher:
        """A watcher from rv on; None (or 0) first replays the current state as ADDED events.
        `encoded`: its consumer wants JSON lines (not objects, as a table does)."""
        await self.ready.wait()
        if not self.enabled:
            return await self._watch_etcd(predicate, rv or 0, bookmarks, encoded)
        if rv is None or rv == 0:
            objs, at = self.snapshot(predicate)
            w = Watcher(predicate, at, bookmarks, max(self.watcher_capacity, len(objs) + 64), encoded)
            w.queue.extend(("ADDED", obj) for obj in objs)
            self._register(w)
            return w
        if rv >= self.window_start:
            w = Watcher(predicate, rv, bookmarks, self.watcher_capacity, encoded)
            for event in self.window:
                if event.rv > rv:
                    w.deliver(event)
            self._register(w)
            return w
        return await self._watch_etcd(predicate, rv, bookmarks, encoded)

    def _register(self, w: Watcher) -> None:
        self.watchers.add(w)
        w._on_close = self.watchers.discard

    async def _watch_etcd(self, predicate: Predicate, rv: int, bookmarks: bool, encoded: bool) -> Watcher:
        """A private etcd watch for a resourceVersion older than the window (or any, the cache disabled);
        rv 0: the current state first, as ADDED events, then what follows (upstream's etcd3 watcher)."""
        if rv == 0:
            kvs, rv, _ = await self.storage.list(self.prefix, skip_untransformable=True)
            objs = [o for o in map(self.cached, kvs) if predicate.matches(o.attrs)]
            w = Watcher(predicate, rv, bookmarks, max(self.watcher_capacity, len(objs) + 64), encoded)
            w.queue.extend(("ADDED", obj) for obj in objs)
        else:
            w = Watcher(predicate, rv, bookmarks, self.watcher_capacity, encoded)
            try:  # does etcd still have that history? (a watch would only say so in a later message)
                await self.storage.list(self.prefix, revision=rv, limit=1)
            except Compacted as e:
                raise TooOld(str(e)) from e

        progress = self.etcd_watchers[w] = [rv]

        async def pump() -> None:
            try:
                async for batch, revision in self.storage.watch(self.prefix, rv + 1):
                    for ev in batch:
                        event = self.to_event(ev)
                        if event is not None:
                            w.deliver(event)
                    progress[0] = max(progress[0], revision)  # delivered up to here (or a progress notify)
            except StorageError:
                pass
            finally:
                self.etcd_watchers.pop(w, None)
                w.stop()

        w._pump = asyncio.create_task(pump())
        return w
