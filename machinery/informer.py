"""Informers: list, then watch, into a local indexed cache, and tell handlers what changed.

This is client-go's reflector + indexer + shared informer in one asyncio class. Controllers read
the cache (`Store`) instead of asking the apiserver, and their handlers only enqueue keys:

- list once, then watch from the list's resourceVersion; when a stream ends or breaks, watch
  again from the last resourceVersion seen (BOOKMARK events advance it too), backing off
  (capped, jittered) while the apiserver is unreachable, and from the minimum again once a watch
  has worked;
- when that resourceVersion is too old (410 Gone / ERROR event reason Expired), relist and hand
  the handlers the differences: adds, updates, and deletes for objects that vanished meanwhile
  (client-go delivers those as DeletedFinalStateUnknown; here on_delete gets the last known
  object, which may be stale);
- every handler has its own queue and task, so one slow handler neither delays others nor
  stalls reading the watch stream.

Objects in the store are shared, not copied: treat them as read-only (`model_copy(deep=True)`
before changing one to send it back). All store operations are synchronous, so they are atomic
with respect to other coroutines on the loop.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from machinery.client import ApiClient, ApiError, ApiUnavailable, ClientError, Selector, format_selector
from machinery.selectors import SelectorError, parse_field_selector, parse_label_selector

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

IndexFunc = Callable[[Any], list[str]]
KeyFunc = Callable[[Any], str]
Handler = Callable[..., Awaitable[None] | None]

NAMESPACE_INDEX = "namespace"
NODE_NAME_INDEX = "spec.nodeName"
CONTROLLER_UID_INDEX = "controllerUID"


# -- keys and index functions -----------------------------------------------------------------


def _metadata(obj: Any) -> tuple[str | None, str | None, Any]:
    """(namespace, name, metadata) of a model or a wire-form dict."""
    if isinstance(obj, Mapping):
        meta = obj.get("metadata") or {}
        return meta.get("namespace"), meta.get("name"), meta
    meta = getattr(obj, "metadata", None)
    if meta is None:
        raise ValueError(f"{type(obj).__name__} has no metadata")
    return meta.namespace, meta.name, meta


def meta_namespace_key(obj: Any) -> str:
    """The cache key: "namespace/name", or "name" for cluster-scoped objects (client-go's format)."""
    namespace, name, _ = _metadata(obj)
    if not name:
        raise ValueError("object has no metadata.name")
    return f"{namespace}/{name}" if namespace else name


def split_meta_namespace_key(key: str) -> tuple[str | None, str]:
    """Inverse of `meta_namespace_key`: (namespace or None, name)."""
    parts = key.split("/")
    if len(parts) == 1 and parts[0]:
        return None, parts[0]
    if len(parts) == 2 and parts[1]:
        return parts[0] or None, parts[1]
    raise ValueError(f"unexpected key format: {key!r}")


def namespace_index(obj: Any) -> list[str]:
    namespace, _, _ = _metadata(obj)
    return [namespace] if namespace else []


def node_name_index(obj: Any) -> list[str]:
    """Pods by spec.nodeName (the scheduler's and kubelet's question: what runs on node X)."""
    if isinstance(obj, Mapping):
        node = (obj.get("spec") or {}).get("nodeName")
    else:
        node = getattr(getattr(obj, "spec", None), "node_name", None)
    return [node] if node else []


def controller_uid_index(obj: Any) -> list[str]:
    """Objects by their controlling owner's uid (ReplicaSet -> its Pods, Deployment -> its ReplicaSets)."""
    _, _, meta = _metadata(obj)
    if isinstance(meta, Mapping):
        refs = meta.get("ownerReferences")
    else:
        refs = getattr(meta, "owner_references", None)
    for ref in refs or []:
        controller = ref.get("controller") if isinstance(ref, Mapping) else ref.controller
        if controller:
            return [ref["uid"] if isinstance(ref, Mapping) else ref.uid]
    return []


# -- the store --------------------------------------------------------------------------------


class Store(Generic[M]):
    """Objects by key, plus secondary indexes (index name -> value -> keys) kept in step on every write."""

    def __init__(
        self, key_func: KeyFunc = meta_namespace_key, indexers: Mapping[str, IndexFunc] | None = None
    ) -> None:
        self._key_func = key_func
        self._items: dict[str, M] = {}
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        if indexers:
            self.add_indexers(indexers)

    def key(self, obj: M) -> str:
        return self._key_func(obj)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Register indexes; objects already stored are indexed at once."""
        for name, fn in indexers.items():
            if name in self._indexers:
                raise ValueError(f"indexer {name!r} already registered")
            self._indexers[name] = fn
            self._indices[name] = {}
            for key, obj in self._items.items():
                self._index_one(name, key, obj)

    def upsert(self, obj: M) -> M | None:
        """Add or replace `obj`; returns the object it replaced, if any."""
        key = self._key_func(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        for name in self._indexers:
            self._index_one(name, key, obj)
        return old

    add = upsert
    update = upsert

    def delete(self, key: str) -> M | None:
        """Remove the object under `key`; returns it, or None if there was none."""
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def get(self, key: str) -> M | None:
        return self._items.get(key)

    def get_by_name(self, name: str, namespace: str | None = None) -> M | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def list(self) -> builtins.list[M]:
        return builtins.list(self._items.values())

    def keys(self) -> builtins.list[str]:
        return builtins.list(self._items)

    def by_index(self, index_name: str, value: str) -> builtins.list[M]:
        return [self._items[key] for key in self.index_keys(index_name, value)]

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        if index_name not in self._indices:
            raise KeyError(f"no indexer named {index_name!r}")
        return sorted(self._indices[index_name].get(value, ()))

    def index_values(self, index_name: str) -> builtins.list[str]:
        if index_name not in self._indices:
            raise KeyError(f"no indexer named {index_name!r}")
        return sorted(self._indices[index_name])

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def _index_one(self, name: str, key: str, obj: M) -> None:
        index = self._indices[name]
        for value in self._indexers[name](obj):
            index.setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: M) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            for value in fn(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]


# -- handlers ---------------------------------------------------------------------------------


class _Listener:
    """One registered handler set, fed by its own queue and task (client-go's processorListener)."""

    def __init__(
        self, on_add: Handler | None, on_update: Handler | None, on_delete: Handler | None, name: str
    ) -> None:
        self.handlers = {"add": on_add, "update": on_update, "delete": on_delete}
        self.name = name
        self.queue: asyncio.Queue[tuple[str, tuple[Any, ...]]] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def notify(self, kind: str, *args: Any) -> None:
        if self.handlers[kind] is not None:
            self.queue.put_nowait((kind, args))

    def start(self) -> None:
        if self.task is None or self.task.done():
            loop = asyncio.get_running_loop()
            self.task = loop.create_task(self._run(), name=f"informer-handler:{self.name}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None

    async def _run(self) -> None:
        while True:
            kind, args = await self.queue.get()
            try:
                handler = self.handlers[kind]
                assert handler is not None
                result = handler(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("%s: %s handler failed", self.name, kind)
            finally:
                self.queue.task_done()


# -- the informer -----------------------------------------------------------------------------


class Informer(Generic[M]):
    """List+watch of one resource (optionally one namespace / selector) into a Store, with handlers."""

    def __init__(
        self,
        client: ApiClient,
        model: type[M],
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: Selector = None,
        resync_period: float | None = None,
        *,
        indexers: Mapping[str, IndexFunc] | None = None,
        min_backoff: float = 0.8,
        max_backoff: float = 30.0,
        watch_timeout: int = 300,
    ) -> None:
        self.client = client
        self.model = model
        self.namespace = namespace
        self.label_selector = format_selector(label_selector)
        self.field_selector = format_selector(field_selector)
        self.resync_period = resync_period
        self.store: Store[M] = Store(indexers=indexers)
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.watch_timeout = watch_timeout  # each watch asks the server to end after 1-2x this many seconds
        self._listeners: list[_Listener] = []
        self._resource_version = ""
        self._stream_served = False  # the current watch stream has applied at least one event
        self._synced = asyncio.Event()
        self._stop = asyncio.Event()
        self._running = False
        self._task: asyncio.Task[None] | None = None
        self.name = f"{model.__name__}" + (f"/{namespace}" if namespace else "")

    # -- public surface ---------------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        """The initial list is in the store (handlers may still be working through it)."""
        return self._synced.is_set()

    @property
    def last_sync_resource_version(self) -> str:
        return self._resource_version

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until `has_synced`; False if `timeout` passed first."""
        try:
            await asyncio.wait_for(self._synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def add_event_handler(
        self,
        on_add: Handler | None = None,
        on_update: Handler | None = None,
        on_delete: Handler | None = None,
    ) -> None:
        """Register on_add(obj), on_update(old, new), on_delete(obj); sync or async callables.

        A handler added to a running informer first gets an add for every object already cached.
        """
        listener = _Listener(on_add, on_update, on_delete, self.name)
        for obj in self.store.list():
            listener.notify("add", obj)
        self._listeners.append(listener)
        if self._running:
            listener.start()

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        self.store.add_indexers(indexers)

    def get(self, name: str, namespace: str | None = None) -> M | None:
        """The cached object, or None (the lister's Get)."""
        return self.store.get_by_name(name, namespace)

    def list(self) -> builtins.list[M]:
        return self.store.list()

    def start(self) -> asyncio.Task[None]:
        """Run in a background task (idempotent while running)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer:{self.name}")
        return self._task

    def stop(self) -> None:
        """Ask `run()` to end: it closes the watch and stops the handler tasks. Final, like closing
        client-go's stop channel: a stopped informer does not run again."""
        self._stop.set()

    async def wait_for_handlers(self) -> None:
        """Wait until every handler has processed every notification sent so far (tests, shutdown)."""
        for listener in builtins.list(self._listeners):
            await listener.queue.join()

    async def run(self) -> None:
        """List, watch, and keep watching until `stop()`."""
        if self._running:
            raise RuntimeError(f"informer {self.name} is already running")
        self._running = True
        for listener in self._listeners:
            listener.start()
        loop = asyncio.get_running_loop()
        worker = loop.create_task(self._list_and_watch(), name=f"reflector:{self.name}")
        resync = None
        if self.resync_period:
            resync = loop.create_task(self._resync_loop(), name=f"resync:{self.name}")
        stopper = loop.create_task(self._stop.wait())
        try:
            await asyncio.wait({worker, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if worker.done():
                worker.result()  # surface an unexpected crash of the loop
        finally:
            tasks = [t for t in (worker, resync, stopper) if t is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for listener in self._listeners:
                await listener.stop()
            self._running = False

    # -- reflector --------------------------------------------------------------------------

    async def _list_and_watch(self) -> None:
        delay = self.min_backoff
        need_list = True
        while True:
            self._stream_served = False
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                    delay = self.min_backoff
                if await self._watch_once():
                    delay = self.min_backoff
                    continue  # a healthy stream ended (server timeout): resume at once
            except ApiError as e:
                if e.is_gone and not need_list:
                    log.info("%s: resourceVersion %s is too old (%s), relisting",
                             self.name, self._resource_version, e.reason or e.code)
                    need_list = True
                    continue
                log.warning("%s: %s failed: %s", self.name, "list" if need_list else "watch", e)
            except ApiUnavailable as e:
                log.warning("%s: %s failed: %s", self.name, "list" if need_list else "watch", e)
                if self._stream_served:
                    # The watch worked until just now: a new outage backs off from the start, not from
                    # where the previous outage left the delay (up to max_backoff of needless blindness).
                    delay = self.min_backoff
            except ClientError as e:  # WatchDecodeError: the same stream would break the same way
                log.warning("%s: %s failed: %s", self.name, "list" if need_list else "watch", e)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: unexpected error in list/watch", self.name)
            await asyncio.sleep(delay * (1.0 + 0.2 * random.random()))
            delay = min(delay * 2, self.max_backoff)

    async def _relist(self) -> None:
        """List and make the store equal to the answer, notifying the differences."""
        items, resource_version, _ = await self.client.list(
            self.model, self.namespace, label_selector=self.label_selector, field_selector=self.field_selector
        )
        self.replace(items, resource_version)

    def replace(self, items: Iterable[M], resource_version: str) -> None:
        """Make the store hold exactly `items` (a fresh list); notify adds, changes, vanished objects."""
        fresh: dict[str, M] = {}
        for obj in items:
            fresh[self.store.key(obj)] = obj
        for key in set(self.store.keys()) - fresh.keys():
            old = self.store.delete(key)
            if old is not None:
                self._notify("delete", old)
        for obj in fresh.values():
            old = self.store.upsert(obj)
            if old is None:
                self._notify("add", obj)
            elif _rv(old) != _rv(obj):
                self._notify("update", old, obj)
        self._resource_version = resource_version
        self._synced.set()

    async def _watch_once(self) -> bool:
        """One watch stream until it ends; True if it was healthy (delivered events or lived a while)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        delivered = False
        timeout = random.randint(self.watch_timeout, 2 * self.watch_timeout)
        events = self.client.watch(
            self.model,
            self.namespace,
            resource_version=self._resource_version or None,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            allow_bookmarks=True,
            timeout_seconds=timeout,
        )
        async with contextlib.aclosing(events):
            async for event in events:
                delivered = True
                self.handle_event(event.type, event.object, event.resource_version)
                self._stream_served = True
        return delivered or loop.time() - started > 1.0

    def handle_event(self, event_type: str, obj: Any, resource_version: str | None) -> None:
        """Apply one watch event to the store and the handlers; ERROR raises ApiError (410 -> relist)."""
        if event_type == "ERROR":
            code = getattr(obj, "code", None) or 500
            raise ApiError(obj, code, "WATCH", self.name)
        if event_type in ("ADDED", "MODIFIED"):
            old = self.store.upsert(obj)
            if old is None:
                self._notify("add", obj)
            else:
                self._notify("update", old, obj)
        elif event_type == "DELETED":
            self.store.delete(self.store.key(obj))
            self._notify("delete", obj)
        if resource_version:
            self._resource_version = resource_version

    # -- handlers ---------------------------------------------------------------------------

    def _notify(self, kind: str, *args: Any) -> None:
        for listener in self._listeners:
            listener.notify(kind, *args)

    async def _resync_loop(self) -> None:
        """Periodically replay every cached object as an update, so level-triggered handlers re-check."""
        assert self.resync_period
        while True:
            await asyncio.sleep(self.resync_period)
            if self.has_synced:
                for obj in self.store.list():
                    self._notify("update", obj, obj)


def _rv(obj: Any) -> str | None:
    if isinstance(obj, Mapping):
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return rv if isinstance(rv, str) else None
    model_rv: str | None = obj.metadata.resource_version  # an API model's ObjectMeta
    return model_rv


# -- sharing ----------------------------------------------------------------------------------


def _canonical_selector(selector: Selector, parse: Callable[[str], object]) -> str | None:
    """One spelling per selector ("b=2,a=1", "a=1,b=2" and {"a": "1", "b": "2"} are one view), so the
    factory does not open a second list+watch for the same objects. A selector that does not parse
    is kept as written: the apiserver's 400 will say what is wrong with it."""
    text = format_selector(selector)
    if not text:
        return None
    try:
        return str(parse(text)) or None
    except SelectorError:
        return text


class SharedInformerFactory:
    """One informer per (model, namespace, selectors) per process, so controllers share caches and watches."""

    def __init__(self, client: ApiClient, resync_period: float | None = None) -> None:
        self.client = client
        self.resync_period = resync_period
        self._informers: dict[tuple[type[BaseModel], str | None, str | None, str | None], Informer[Any]] = {}
        self._started = False

    def informer_for(
        self,
        model: type[M],
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: Selector = None,
        resync_period: float | None = None,
    ) -> Informer[M]:
        """The shared informer for this view; created on first ask (and started if the factory runs).

        The first caller's resync_period wins for a shared informer.
        """
        key = (model, namespace, _canonical_selector(label_selector, parse_label_selector),
               _canonical_selector(field_selector, parse_field_selector))
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self.client, model, namespace, key[2], key[3],
                resync_period if resync_period is not None else self.resync_period,
            )
            self._informers[key] = informer
            if self._started:
                informer.start()
        return informer

    def informers(self) -> builtins.list[Informer[Any]]:
        return builtins.list(self._informers.values())

    def start(self) -> None:
        """Start every informer created so far; later ones start as they are created."""
        self._started = True
        for informer in self._informers.values():
            informer.start()

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """True once every informer has synced; False if `timeout` passed first."""
        try:
            await asyncio.wait_for(
                asyncio.gather(*(i.wait_for_sync() for i in self._informers.values())), timeout
            )
        except TimeoutError:
            return False
        return all(i.has_synced for i in self._informers.values())

    async def shutdown(self) -> None:
        """Stop every informer and wait for them to finish."""
        self._started = False
        tasks = []
        for informer in self._informers.values():
            informer.stop()
            if informer._task is not None:
                tasks.append(informer._task)
        await asyncio.gather(*tasks, return_exceptions=True)
