"""The watch cache's fan-out (apiserver/storage/cacher.py), fed etcd events by hand: an event is encoded
once and the same bytes go to every watcher that sees it the same way; selectors turn a change into
ADDED or DELETED for a watcher; a watcher that falls too far behind is closed, its backlog dropped."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from apiserver.storage import codec
from apiserver.storage.cacher import Cacher, Watcher, WatchItem
from apiserver.storage.etcd import KV, EtcdEvent
from apiserver.storage.predicate import Attrs, Predicate
from machinery.selectors import parse_label_selector

PREFIX = "/registry/pods/"


def attrs_of(obj: dict[str, Any]) -> Attrs:
    meta = obj["metadata"]
    return Attrs(meta.get("labels") or {}, {"metadata.namespace": meta["namespace"], "metadata.name": meta["name"]})


def pod_kv(name: str, rev: int, app: str) -> KV:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": {"app": app}}}
    return KV(f"{PREFIX}ns/{name}", codec.encode(obj), rev, rev)


def cacher() -> Cacher:
    c = Cacher(None, PREFIX, attrs_of, watcher_capacity=8)  # type: ignore[arg-type]  # fed by hand, no etcd
    c.ready.set()
    return c


def watch(c: Cacher, label: str | None = None, encoded: bool = True) -> Watcher:
    predicate = Predicate("ns", parse_label_selector(label) if label else None, None)
    return asyncio.run(c.watch(predicate, 1, False, encoded))


def kinds(items: list[WatchItem]) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, bytes):
            out.append(orjson.loads(item)["type"])
        elif isinstance(item, tuple):
            out.append(item[0])
    return out


def test_an_event_is_encoded_once_for_all_its_watchers() -> None:
    c = cacher()
    a, b, table = watch(c), watch(c), watch(c, encoded=False)
    c._apply(EtcdEvent("PUT", pod_kv("p", 2, "web"), None))
    assert len(a.queue) == len(b.queue) == 1
    assert a.queue[0] is b.queue[0]  # the same bytes object, not a copy per watcher
    line = orjson.loads(a.queue[0])  # type: ignore[arg-type]
    assert line["type"] == "ADDED" and line["object"]["metadata"]["resourceVersion"] == "2"
    assert kinds(table.queue) == ["ADDED"] and isinstance(table.queue[0], tuple)  # a table renders its own rows


def test_selectors_turn_changes_into_added_and_deleted() -> None:
    c = cacher()
    web = watch(c, "app=web")
    c._apply(EtcdEvent("PUT", pod_kv("p", 2, "db"), None))  # not for web
    c._apply(EtcdEvent("PUT", pod_kv("p", 3, "web"), pod_kv("p", 2, "db")))  # starts matching
    c._apply(EtcdEvent("PUT", pod_kv("p", 4, "web"), pod_kv("p", 3, "web")))
    c._apply(EtcdEvent("PUT", pod_kv("p", 5, "db"), pod_kv("p", 4, "web")))  # stops matching
    assert kinds(web.queue) == ["ADDED", "MODIFIED", "DELETED"]


def test_a_watcher_too_far_behind_is_closed_and_its_backlog_dropped() -> None:
    c = cacher()
    slow, other = watch(c), watch(c, "app=db")
    for rev in range(2, 12):  # 10 events for a capacity of 8
        c._apply(EtcdEvent("PUT", pod_kv(f"p{rev}", rev, "web"), None))
    assert slow.closed and slow.queue == [None]  # it resumes from its last resourceVersion
    assert slow not in c.watchers and other in c.watchers and not other.closed


def test_a_waiting_consumer_gets_the_batch_then_the_end() -> None:
    async def run() -> list[list[WatchItem]]:
        c = cacher()
        w = await c.watch(Predicate("ns"), 1, True)
        waiting = asyncio.create_task(w.next_batch())
        await asyncio.sleep(0)  # the consumer waits on its future
        c._apply(EtcdEvent("PUT", pod_kv("p", 2, "web"), None))
        c.send_bookmarks()
        first = await waiting
        w.stop()
        return [first, await w.next_batch()]

    first, last = asyncio.run(run())
    assert kinds(first) == ["ADDED"] and first[1] == 2  # the event, then a bookmark at revision 2
    assert last == [None]


def test_the_store_holds_each_object_in_a_block_of_its_own_size() -> None:
    import tracemalloc

    c = cacher()
    kvs = [pod_kv(f"p{i}", 2 + i, "web") for i in range(200)]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for kv in kvs:
            c._apply(EtcdEvent("PUT", kv, None))
        grown = tracemalloc.take_snapshot().compare_to(before, "filename")
    finally:
        tracemalloc.stop()
    held = sum(len(o.raw) for o in c.store.values())
    cacher_bytes = sum(d.size_diff for d in grown if d.traceback[0].filename.endswith("cacher.py"))
    # orjson answers its bytes in a buffer of at least 4 KiB: kept as it is, 200 small pods would take 800 KB
    assert cacher_bytes < 4 * held + 200 * 1024, (cacher_bytes, held)
    assert all(o.obj()["metadata"]["resourceVersion"] == str(o.rv) for o in c.store.values())


def test_a_modification_shares_the_stored_version_as_its_prev() -> None:
    c = cacher()
    c._apply(EtcdEvent("PUT", pod_kv("p", 2, "web"), None))
    stored = c.store[f"{PREFIX}ns/p"]
    c._apply(EtcdEvent("PUT", pod_kv("p", 3, "db"), pod_kv("p", 2, "web")))
    assert c.window[-1].prev is stored  # one copy for the store's old version, the window's and this prev
    # a prev the store does not hold at that version (history before a relist, say) is decoded from etcd's value
    c._apply(EtcdEvent("PUT", pod_kv("p", 5, "web"), pod_kv("p", 4, "db")))
    prev = c.window[-1].prev
    assert prev is not None and prev.rv == 4 and prev is not c.window[-2].obj
    assert orjson.loads(prev.raw)["metadata"]["resourceVersion"] == "4"
