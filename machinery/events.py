"""Recording core/v1 Events (client-go's record.EventRecorder): `recorder.event(obj, "Normal",
"ScalingReplicaSet", "Scaled up ...")`.

Every event first goes through client-go's EventCorrelator (tools/record/events_cache.go), with its defaults:
- aggregation: the 10th event of one source about one object with the same type and reason but a different
  message within 10 minutes, and every later one, becomes one Event "(combined from similar events): <message>";
- counting: a repeat of the same event (or of the combined one) bumps `count` and `lastTimestamp` on the existing
  Event instead of creating a new one;
- spam filter: a source may write 25 events about one object at once, then one every 5 minutes (a token bucket
  per source and object), so a ReplicaSet scaled to 100 writes 25 events about itself, not 100.

Recording never blocks or fails the caller: a few background workers write from a bounded queue (as upstream's
broadcaster does), so a burst of a thousand events is a few concurrent writes, not a thousand; past
`max_pending` queued events (upstream's 1,000) new ones are dropped with a log line, and a failure is only
logged."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from machinery.api.core_v1 import Event, EventSource, ObjectReference
from machinery.api.meta import ObjectMeta
from machinery.api.resources import resource_for_model
from machinery.client import ApiClient, ApiError
from machinery.timeutil import now_rfc3339

log = logging.getLogger(__name__)

_CACHE_SIZE = 4096  # client-go's maxLruCacheEntries, for each of the correlator's caches
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL_S = 600.0
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
COMBINED_PREFIX = "(combined from similar events): "


class _Lru(OrderedDict[Any, Any]):
    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > _CACHE_SIZE:
            self.popitem(last=False)


class EventCorrelator:
    """client-go's EventCorrelator: decides, when an event is recorded, whether it is written at all (spam
    filter), as what message (aggregation), and as a new Event or a count on an earlier one (the event log).
    Pure and synchronous, so events are correlated in the order they were recorded; `clock` for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._aggregates: _Lru = _Lru()  # aggregate key -> (messages seen, last time)
        self._buckets: _Lru = _Lru()  # spam key -> (tokens, last refill)
        self._log: _Lru = _Lru()  # event key -> (Event name, count)

    def correlate(self, ref: ObjectReference, source: tuple[str, str | None], type_: str, reason: str,
                  message: str) -> tuple[str, str, int] | None:
        """(the Event's name, its message, its count: 1 is a new Event, more a count on `name`), or None when
        the spam filter drops it."""
        now = self.clock()
        obj = (ref.kind, ref.namespace, ref.name, ref.uid, ref.api_version)
        aggregate_key = (*source, *obj, type_, reason)
        messages, last = self._aggregates.get(aggregate_key, (None, 0.0))
        if messages is None or now - last > AGGREGATE_INTERVAL_S:
            messages = set()
        messages.add(message)
        self._aggregates.put(aggregate_key, (messages, now))
        key: tuple[Any, ...] = (*aggregate_key, ref.field_path, message)
        if len(messages) >= AGGREGATE_MAX_EVENTS:
            messages.pop()  # the set never grows past the threshold
            message = COMBINED_PREFIX + message
            key = aggregate_key
        name, count = self._log.get(key, (None, 0))
        if name is None:
            name = f"{ref.name}.{time.time_ns():x}"
        self._log.put(key, (name, count + 1))
        if self._spam((*source, *obj), now):
            return None
        return name, message, count + 1

    def _spam(self, key: tuple[Any, ...], now: float) -> bool:
        """The token bucket of one source and object: SPAM_BURST at once, refilled at SPAM_QPS."""
        tokens, last = self._buckets.get(key, (float(SPAM_BURST), now))
        tokens = min(float(SPAM_BURST), tokens + (now - last) * SPAM_QPS)
        allowed = tokens >= 1.0
        self._buckets.put(key, (tokens - 1.0 if allowed else tokens, now))
        return not allowed


def object_reference(obj: BaseModel) -> ObjectReference:
    info = resource_for_model(type(obj))
    meta: ObjectMeta = obj.metadata  # type: ignore[attr-defined]
    return ObjectReference(api_version=info.api_version, kind=info.kind, namespace=meta.namespace,
                           name=meta.name, uid=meta.uid, resource_version=meta.resource_version)


class _EventWrites:
    """The writes of one Event under way or waiting, one at a time."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class EventRecorder:
    def __init__(self, client: ApiClient, component: str, host: str | None = None, *,
                 workers: int = 4, max_pending: int = 1000, correlator: EventCorrelator | None = None):
        self.client = client
        self.component = component
        self.host = host
        self.correlator = correlator or EventCorrelator()
        # (reference, type, reason, message, the Event's name, count)
        self._pending: asyncio.Queue[tuple[ObjectReference, str, str, str, str, int]] = asyncio.Queue()
        self._worker_count = workers
        self._max_pending = max_pending
        self._workers: list[asyncio.Task[None]] = []
        # one Event's writes in the order they were recorded: its count and message are the last one's, as
        # upstream's broadcaster writes them one after the other; different Events are written in parallel
        self._writing: dict[str, _EventWrites] = {}
        self.dropped = 0

    def event(self, obj: BaseModel, type_: str, reason: str, message: str) -> None:
        """Correlate an event and queue it for the background writers; see the module docstring."""
        if self._pending.qsize() >= self._max_pending:
            self.dropped += 1
            log.warning("event queue full, dropping %s %s: %s", type_, reason, message)
            return
        ref = object_reference(obj)
        correlated = self.correlator.correlate(ref, (self.component, self.host), type_, reason, message)
        if correlated is None:
            log.debug("too many events about %s/%s, dropping %s %s: %s", ref.namespace, ref.name, type_, reason,
                      message)
            return
        name, message, count = correlated
        self._pending.put_nowait((ref, type_, reason, message, name, count))
        if not self._workers:
            loop = asyncio.get_running_loop()
            self._workers = [loop.create_task(self._work(), name=f"events-{self.component}-{i}")
                             for i in range(self._worker_count)]

    async def _work(self) -> None:
        while True:
            item = await self._pending.get()
            name = item[4]
            writing = self._writing.get(name)
            if writing is None:
                writing = self._writing[name] = _EventWrites()
            writing.users += 1
            try:
                async with writing.lock:  # at once unless an earlier write of this Event is under way (FIFO)
                    await self._record(*item)
            finally:
                writing.users -= 1
                if not writing.users:
                    del self._writing[name]
                self._pending.task_done()

    async def flush(self) -> None:
        """Wait until every queued event is written (tests, shutdown)."""
        await self._pending.join()

    def close(self) -> None:
        """Stop the writers (after flush(), at shutdown); events queued later start them again."""
        for worker in self._workers:
            worker.cancel()
        self._workers = []

    async def _record(self, ref: ObjectReference, type_: str, reason: str, message: str, name: str,
                      count: int) -> None:
        namespace = ref.namespace or "default"
        now = now_rfc3339()
        bump = {"count": count, "lastTimestamp": now, "message": message}
        try:
            if count > 1:
                try:
                    await self.client.patch(Event, name, bump, "merge", namespace)
                    return
                except ApiError as e:
                    if not e.is_not_found:  # gone (or never written): written anew, as upstream's recordEvent
                        raise
            event = Event(
                metadata=ObjectMeta(name=name, namespace=namespace),
                involved_object=ref, reason=reason, message=message, type=type_, count=count,
                first_timestamp=now, last_timestamp=now,
                source=EventSource(component=self.component, host=self.host),
                reporting_component=self.component, reporting_instance=self.host or self.component,
            )
            try:
                await self.client.create(event)
            except ApiError as e:
                # a count that overtook its Event's create on another writer: the Event exists now
                if not (e.is_already_exists and count > 1):
                    raise
                await self.client.patch(Event, name, bump, "merge", namespace)
        except Exception as e:  # an event is never worth failing the caller for
            log.warning("could not record event %s %s on %s/%s: %s", type_, reason, namespace, ref.name, e)


def events_for(items: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    """Events about one object, oldest first (tests and mkubectl describe)."""
    out = [e for e in items if e.get("involvedObject", {}).get("kind") == kind
           and e.get("involvedObject", {}).get("name") == name]
    return sorted(out, key=lambda e: e.get("lastTimestamp") or "")
