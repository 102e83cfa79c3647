"""The controller plumbing every reconciler stands on (client-go's sample-controller shape):
informers feed a rate-limited work queue of keys; workers take one key at a time and reconcile it
from the cached state; an error requeues the key with back-off, success forgets its failures.

A controller file then holds little more than its `reconcile(key)`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from machinery import tracing
from machinery.informer import Informer, meta_namespace_key
from machinery.workqueue import RateLimitingQueue, ShutDown

log = logging.getLogger(__name__)


class Controller:
    """Subclasses set `name`, wire informers with `watch(...)` in __init__, and define `reconcile`."""

    name = "controller"

    def __init__(self, workers: int = 1):
        self.workers = workers
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(name=self.name)
        self.informers: list[Informer[Any]] = []

    # -- wiring ------------------------------------------------------------------------------

    def watch(self, informer: Informer[Any], to_keys: Callable[[Any], list[str]] | None = None) -> None:
        """Enqueue keys for every add, update and delete the informer sees; by default the object's
        own key, or whatever `to_keys(obj)` maps it to (e.g. a pod → its owning ReplicaSet)."""
        keys = to_keys or (lambda obj: [meta_namespace_key(obj)])

        def enqueue(obj: Any) -> None:
            for key in keys(obj):
                self.queue.add(key)

        def enqueue_both(old: Any, new: Any) -> None:
            enqueue(old)
            enqueue(new)

        informer.add_event_handler(on_add=enqueue, on_update=enqueue_both, on_delete=enqueue)
        if informer not in self.informers:
            self.informers.append(informer)

    # -- the work ----------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        """Make the world match the desired state of `key`. Return seconds to look again later
        (None: only when something changes); raise to retry with back-off."""
        raise NotImplementedError

    async def run(self) -> None:
        """Wait for the informers' first lists, then run the workers until cancelled."""
        for informer in self.informers:
            await informer.wait_for_sync()
        log.info("%s: caches synced, starting %d worker(s)", self.name, self.workers)
        workers = [asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}") for i in range(self.workers)]
        try:
            await asyncio.gather(*workers)
        finally:
            self.queue.shutdown()
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            if not tracing.active():
                await self._process(key)
                continue
            # --tracing-config-file: the sync is a span, current while it runs (its API requests are children)
            attributes = {"k8s.controller": self.name, "k8s.queue.key": key,
                          "k8s.queue.wait_ms": self.queue.last_wait * 1000.0}
            if self.informers:
                attributes.update(tracing.object_attributes(self.informers[0].store.get(key)))
            with tracing.span("controller.sync", attributes=attributes) as span:
                result = await self._process(key)
                tracing.set_attributes(span, {"k8s.sync.result": result})

    async def _process(self, key: str) -> str:
        """Reconcile one key: "ok", "requeue" (asked to look again later) or "error" (retried with back-off)."""
        try:
            after = await self.reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # any failure is retried with back-off
            retries = self.queue.num_requeues(key)
            log.warning("%s: reconciling %s failed (retry %d): %s", self.name, key, retries, e,
                        exc_info=retries == 0 and not _expected(e))
            self.queue.add_rate_limited(key)
            return "error"
        else:
            self.queue.forget(key)
            if after is not None:
                self.queue.add_after(key, after)
                return "requeue"
            return "ok"
        finally:
            self.queue.done(key)


def _expected(e: Exception) -> bool:
    """API answers (conflicts, not found, the server being away) are worth a line, not a traceback."""
    from machinery.client import ApiError, ApiUnavailable

    return isinstance(e, ApiError | ApiUnavailable)
