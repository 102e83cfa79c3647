"""Watches over chunked HTTP, served by the watch cache, resumed across apiserver restarts."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from apiserver.registry.generic import DeleteOptions, Store, WriteOptions
from apiserver.registry.node import NodeStrategy
from apiserver.storage.etcd import EtcdStorage
from apiserver.storage.predicate import Predicate
from machinery.api.resources import resource_for
from tests.cluster import ApiServer, Etcd
from tests.manifests import pod
from tests.watching import WatchStream


def _names(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def test_watch_delivers_added_modified_deleted_in_order(apiserver: ApiServer, api: httpx.Client,
                                                        namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    start = api.get(base).json()["metadata"]["resourceVersion"]
    watch = WatchStream(apiserver.url, base, resourceVersion=start)
    try:
        created = api.post(base, json=pod("w1")).json()
        api.patch(f"{base}/w1", content=b'{"metadata":{"labels":{"step":"2"}}}',
                  headers={"content-type": "application/merge-patch+json"})
        api.delete(f"{base}/w1")
        events = watch.take(3)
        assert _names(events) == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
        assert events[0]["object"]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert rvs == sorted(rvs) and len(set(rvs)) == 3
        assert events[1]["object"]["metadata"]["labels"]["step"] == "2"
    finally:
        watch.close()


def test_watch_from_zero_replays_existing_objects_first(apiserver: ApiServer, api: httpx.Client,
                                                        namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    api.post(base, json=pod("old1"))
    api.post(base, json=pod("old2"))
    watch = WatchStream(apiserver.url, base, resourceVersion="0")
    try:
        assert sorted(_names(watch.take(2))) == [("ADDED", "old1"), ("ADDED", "old2")]
        api.post(base, json=pod("new"))
        assert _names(watch.take(1)) == [("ADDED", "new")]
    finally:
        watch.close()


def _event(name: str, reason: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name}, "reason": reason, "type": "Normal",
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace, "apiVersion": "v1"},
            "message": f"{reason} p"}


def test_events_uncached_as_upstream_are_listed_and_watched_from_etcd(apiserver: ApiServer, api: httpx.Client,
                                                                      namespace: str) -> None:
    """Events have no watch cache (upstream's default): a list at resourceVersion 0, a watch from 0 (the
    current state, then what follows), from a resourceVersion, and with a field selector are served from etcd."""
    base = f"/api/v1/namespaces/{namespace}/events"
    for name, reason in (("e1", "Scheduled"), ("e2", "Pulled")):
        created = api.post(base, json=_event(name, reason, namespace))
        assert created.status_code == 201, created.text
    listed = api.get(base, params={"resourceVersion": "0"}).json()
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["e1", "e2"]
    start = listed["metadata"]["resourceVersion"]
    from_zero = WatchStream(apiserver.url, base, resourceVersion="0", fieldSelector="reason=Scheduled")
    from_rv = WatchStream(apiserver.url, base, resourceVersion=start)
    try:
        assert _names(from_zero.take(1)) == [("ADDED", "e1")]
        assert api.post(base, json=_event("e3", "Scheduled", namespace)).status_code == 201
        api.patch(f"{base}/e2", content=b'{"count":2}', headers={"content-type": "application/merge-patch+json"})
        assert _names(from_zero.take(1)) == [("ADDED", "e3")]
        events = from_rv.take(2)
        assert _names(events) == [("ADDED", "e3"), ("MODIFIED", "e2")]
        assert events[1]["object"]["count"] == 2
    finally:
        from_zero.close()
        from_rv.close()


def test_watch_by_name_and_label_selector_transitions(apiserver: ApiServer, api: httpx.Client,
                                                      namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    api.post(base, json=pod("sel", labels={"app": "a"}))
    by_label = WatchStream(apiserver.url, base, labelSelector="app=b", resourceVersion="0")
    by_name = WatchStream(apiserver.url, base, fieldSelector="metadata.name=sel", resourceVersion="0")
    try:
        assert _names(by_name.take(1)) == [("ADDED", "sel")]
        api.post(base, json=pod("other", labels={"app": "b"}))
        assert _names(by_label.take(1)) == [("ADDED", "other")]
        # "sel" starts matching app=b: ADDED for that watcher; then stops matching: DELETED
        api.patch(f"{base}/sel", content=b'{"metadata":{"labels":{"app":"b"}}}',
                  headers={"content-type": "application/merge-patch+json"})
        api.patch(f"{base}/sel", content=b'{"metadata":{"labels":{"app":"c"}}}',
                  headers={"content-type": "application/merge-patch+json"})
        assert _names(by_label.take(2)) == [("ADDED", "sel"), ("DELETED", "sel")]
        assert _names(by_name.take(2)) == [("MODIFIED", "sel"), ("MODIFIED", "sel")]
    finally:
        by_label.close()
        by_name.close()


def test_bookmarks_when_allowed(apiserver: ApiServer, api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    rv = api.get(base).json()["metadata"]["resourceVersion"]
    watch = WatchStream(apiserver.url, base, resourceVersion=rv, allowWatchBookmarks="true")
    try:
        event = watch.next(timeout=10, skip_bookmarks=False)
        assert event is not None and event["type"] == "BOOKMARK"
        assert event["object"]["kind"] == "Pod" and int(event["object"]["metadata"]["resourceVersion"]) >= int(rv)
    finally:
        watch.close()


def test_watch_timeout_seconds_ends_the_stream(apiserver: ApiServer, api: httpx.Client, namespace: str) -> None:
    watch = WatchStream(apiserver.url, f"/api/v1/namespaces/{namespace}/pods", timeoutSeconds="1",
                        resourceVersion=api.get("/api/v1/namespaces").json()["metadata"]["resourceVersion"])
    try:
        assert watch.next(timeout=10) is None
    finally:
        watch.close()


@pytest.fixture
def own_apiserver(workdir, etcd: Etcd) -> Iterator[ApiServer]:
    """An apiserver of this test's own, free to be killed."""
    server = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0", "--watch-cache-window", "16")
    server.start()
    yield server
    server.stop()


def test_watch_resumes_after_apiserver_kill_without_missed_or_duplicated_events(own_apiserver: ApiServer) -> None:
    """Events written while the apiserver was dead come exactly once after the client resumes."""
    api = httpx.Client(base_url=own_apiserver.url, timeout=10)
    ns = "resume-test"
    api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    base = f"/api/v1/namespaces/{ns}/pods"
    rv = api.get(base).json()["metadata"]["resourceVersion"]
    watch = WatchStream(own_apiserver.url, base, resourceVersion=rv)
    for i in range(3):
        api.post(base, json=pod(f"before-{i}"))
    before = watch.take(3)
    last_rv = before[-1]["object"]["metadata"]["resourceVersion"]

    own_apiserver.process.kill()
    assert watch.next(timeout=10) is None  # the stream broke
    watch.close()
    # writes while the apiserver is down go straight to etcd, as another apiserver would do them
    written = asyncio.run(_write_behind_the_apiserver(own_apiserver, ns, 40))
    own_apiserver.start()

    api = httpx.Client(base_url=own_apiserver.url, timeout=10)
    resumed = WatchStream(own_apiserver.url, base, resourceVersion=last_rv)
    try:
        events = resumed.take(40, timeout=15)
        assert [e["object"]["metadata"]["name"] for e in events] == written
        assert all(e["type"] == "ADDED" for e in events)
        api.post(base, json=pod("after"))
        assert _names(resumed.take(1)) == [("ADDED", "after")]
        with pytest.raises(TimeoutError):
            resumed.next(timeout=0.5)  # nothing duplicated after it
    finally:
        resumed.close()
        api.close()


async def _write_behind_the_apiserver(server: ApiServer, ns: str, n: int) -> list[str]:
    """Write pods directly to etcd (more than the watch window holds), as a second apiserver would."""
    from apiserver.storage import codec

    endpoint = server.process.argv[server.process.argv.index("--etcd-servers") + 1]
    storage = EtcdStorage([endpoint])
    names = []
    try:
        for i in range(n):
            name = f"during-{i:02d}"
            obj = pod(name, namespace=ns)
            obj["metadata"].update(uid=f"uid-{i}", creationTimestamp="2026-11-21T00:00:00Z")
            await storage.create(f"/registry/pods/{ns}/{name}", codec.encode(obj))
            names.append(name)
    finally:
        await storage.close()
    return names


def test_compacted_resource_version_is_gone(own_apiserver: ApiServer, etcd: Etcd) -> None:
    """Older than the 16-event cache window and compacted in etcd: watch gets ERROR 410 Expired,
    and a continue token from before the compaction gets 410 too."""
    api = httpx.Client(base_url=own_apiserver.url, timeout=10)
    ns = "compact-test"
    api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    base = f"/api/v1/namespaces/{ns}/pods"
    old_rv = api.post(base, json=pod("c00")).json()["metadata"]["resourceVersion"]
    for i in range(1, 24):
        api.post(base, json=pod(f"c{i:02d}"))
    token = api.get(base, params={"limit": "2"}).json()["metadata"]["continue"]
    api.post(base, json=pod("after-the-first-page"))  # so the compaction passes the token's revision

    async def compact() -> None:
        storage = EtcdStorage([etcd.endpoint])
        try:
            await storage.compact(await storage.current_revision())
        finally:
            await storage.close()

    asyncio.run(compact())
    watch = WatchStream(own_apiserver.url, base, resourceVersion=old_rv)
    try:
        event = watch.next()
        assert event is not None and event["type"] == "ERROR", event
        assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
        assert watch.next() is None
    finally:
        watch.close()
    r = api.get(base, params={"limit": "2", "continue": token})
    assert r.status_code == 410 and r.json()["reason"] == "Expired"
    fresh = api.get(base, params={"limit": "2"})
    assert fresh.status_code == 200 and len(fresh.json()["items"]) == 2
    api.close()


async def test_a_list_of_one_name_answers_the_revision_it_read_the_object_at(etcd: Etcd) -> None:
    """A list pinned to one name (`metadata.name=`, a kubelet's informer on its own Node) answers the object and
    the resourceVersion of one read. It used to read the revision after the object: a write landing between the
    two (node IPAM giving the Node its podCIDR) was then in neither the list nor the watch from its revision,
    and the kubelet waited for a podCIDR its Node already had (a failure test's cluster never became ready)."""
    storage = EtcdStorage([etcd.endpoint])
    info = resource_for("", "nodes")
    assert info is not None
    store = Store(info, NodeStrategy(), storage)
    name = f"one-name-list-{uuid.uuid4().hex[:6]}"
    key = store.key(None, name)
    await store.create(None, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}},
                       WriteOptions())
    podcidr = json.dumps([{"op": "add", "path": "/spec/podCIDR", "value": "10.250.3.0/24"}]).encode()
    read_range = storage._range
    raced = False
    written_rv = ""

    async def write_after_reading_the_node(request: Any, *args: Any) -> Any:
        nonlocal raced, written_rv
        response = await read_range(request, *args)
        if request.key == key.encode() and not request.range_end and not raced:
            raced = True  # the write another client makes while the list is being answered
            written, _ = await store.patch(None, name, "application/json-patch+json", podcidr, WriteOptions())
            written_rv = written["metadata"]["resourceVersion"]
        return response

    storage._range = write_after_reading_the_node  # type: ignore[method-assign]
    try:
        listed = await store.list(None, Predicate.parse(None, None, f"metadata.name={name}"))
    finally:
        storage._range = read_range  # type: ignore[method-assign]
        try:
            await store.delete(None, name, DeleteOptions())
        finally:
            await storage.close()
    assert raced
    (node,) = listed.items
    assert "podCIDR" not in node["spec"]  # read before the write...
    # ...so the list's resourceVersion is from before the write too: a watch from it shows the write
    assert int(node["metadata"]["resourceVersion"]) <= int(listed.resource_version) < int(written_rv)
