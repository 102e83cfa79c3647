"""Recording core/v1 Events (client-go's record.EventRecorder): `recorder.event(obj, "Normal",
"ScalingReplicaSet", "Scaled up ...")`. Repeats of the same event on the same object bump
`count` and `lastTimestamp` on the existing Event instead of creating a new one. Recording never
blocks or fails the caller: a few background workers write from a bounded queue (as upstream's
broadcaster does), so a burst of a thousand events is a few concurrent writes, not a thousand;
past `max_pending` queued events new ones are dropped with a log line, and a failure is only logged."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel

from machinery.api.core_v1 import Event, EventSource, ObjectReference
from machinery.api.meta import ObjectMeta
from machinery.api.resources import resource_for_model
from machinery.client import ApiClient, ApiError
from machinery.timeutil import now_rfc3339

log = logging.getLogger(__name__)

_CACHE_SIZE = 4096


def object_reference(obj: BaseModel) -> ObjectReference:
    info = resource_for_model(type(obj))
    meta: ObjectMeta = obj.metadata  # type: ignore[attr-defined]
    return ObjectReference(api_version=info.api_version, kind=info.kind, namespace=meta.namespace,
                           name=meta.name, uid=meta.uid, resource_version=meta.resource_version)


class EventRecorder:
    def __init__(self, client: ApiClient, component: str, host: str | None = None, *,
                 workers: int = 4, max_pending: int = 10_000):
        self.client = client
        self.component = component
        self.host = host
        # (uid, type, reason, message) → (event name, namespace, count)
        self._seen: OrderedDict[tuple[str, str, str, str], tuple[str, str, int]] = OrderedDict()
        self._pending: asyncio.Queue[tuple[ObjectReference, str, str, str]] = asyncio.Queue()
        self._worker_count = workers
        self._max_pending = max_pending
        self._workers: list[asyncio.Task[None]] = []
        self.dropped = 0

    def event(self, obj: BaseModel, type_: str, reason: str, message: str) -> None:
        """Queue an event for the background writers; see the module docstring."""
        if self._pending.qsize() >= self._max_pending:
            self.dropped += 1
            log.warning("event queue full, dropping %s %s: %s", type_, reason, message)
            return
        self._pending.put_nowait((object_reference(obj), type_, reason, message))
        if not self._workers:
            loop = asyncio.get_running_loop()
            self._workers = [loop.create_task(self._work(), name=f"events-{self.component}-{i}")
                             for i in range(self._worker_count)]

    async def _work(self) -> None:
        while True:
            ref, type_, reason, message = await self._pending.get()
            try:
                await self._record(ref, type_, reason, message)
            finally:
                self._pending.task_done()

    async def flush(self) -> None:
        """Wait until every queued event is written (tests, shutdown)."""
        await self._pending.join()

    def close(self) -> None:
        """Stop the writers (after flush(), at shutdown); events queued later start them again."""
        for worker in self._workers:
            worker.cancel()
        self._workers = []

    async def _record(self, ref: ObjectReference, type_: str, reason: str, message: str) -> None:
        namespace = ref.namespace or "default"
        key = (ref.uid or "", type_, reason, message)
        now = now_rfc3339()
        try:
            seen = self._seen.get(key)
            if seen is not None:
                name, ns, count = seen
                try:
                    await self.client.patch(Event, name, {"count": count + 1, "lastTimestamp": now}, "merge", ns)
                    self._remember(key, (name, ns, count + 1))
                    return
                except ApiError as e:
                    if not e.is_not_found:
                        raise
            event = Event(
                metadata=ObjectMeta(name=f"{ref.name}.{time.time_ns():x}", namespace=namespace),
                involved_object=ref, reason=reason, message=message, type=type_, count=1,
                first_timestamp=now, last_timestamp=now,
                source=EventSource(component=self.component, host=self.host),
                reporting_component=self.component, reporting_instance=self.host or self.component,
            )
            created = await self.client.create(event)
            self._remember(key, (created.metadata.name or "", namespace, 1))
        except Exception as e:  # an event is never worth failing the caller for
            log.warning("could not record event %s %s on %s/%s: %s", type_, reason, namespace, ref.name, e)

    def _remember(self, key: tuple[str, str, str, str], value: tuple[str, str, int]) -> None:
        self._seen[key] = value
        self._seen.move_to_end(key)
        while len(self._seen) > _CACHE_SIZE:
            self._seen.popitem(last=False)


def events_for(items: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    """Events about one object, oldest first (tests and mkubectl describe)."""
    out = [e for e in items if e.get("involvedObject", {}).get("kind") == kind
           and e.get("involvedObject", {}).get("name") == name]
    return sorted(out, key=lambda e: e.get("lastTimestamp") or "")
