"""machinery.informer against a real apiserver on a real etcd: list+watch into an indexed Store,
handlers in order, field-selected views, resuming across a kill -9 of the apiserver, relisting
after 410 Gone, and the SharedInformerFactory."""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from apiserver.storage.etcd import EtcdStorage
from machinery.api.apps_v1 import Deployment
from machinery.api.core_v1 import Namespace, Pod
from machinery.api.meta import ObjectMeta
from machinery.client import ApiClient, default_user_agent, retry_on_conflict
from machinery.informer import (
    CONTROLLER_UID_INDEX,
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    Informer,
    SharedInformerFactory,
    controller_uid_index,
    meta_namespace_key,
    namespace_index,
    node_name_index,
    split_meta_namespace_key,
    strip_managed_fields,
)
from machinery.kubeconfig import ClientConfig
from machinery.workqueue import RateLimitingQueue, default_controller_rate_limiter
from tests import manifests
from tests.cluster import ApiServer, Etcd

TIMEOUT = 15.0

Run = Callable[[Informer[Any]], Informer[Any]]  # the run_informer fixture: start one, stopped at teardown
Event = tuple[str, str, str]  # (add|update|delete, namespace/name, resourceVersion of the new/deleted object)


# -- helpers --------------------------------------------------------------------------------------


class Recorder:
    """Handlers that log (kind, key, resourceVersion) and let a test wait for a condition on the log."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.updates: list[tuple[Pod, Pod]] = []
        self.deleted: list[Pod] = []
        self._changed = asyncio.Event()

    def _log(self, kind: str, obj: Pod) -> None:
        self.events.append((kind, f"{obj.metadata.namespace}/{obj.metadata.name}", obj.metadata.resource_version or ""))
        self._changed.set()

    def on_add(self, obj: Pod) -> None:
        self._log("add", obj)

    async def on_update(self, old: Pod, new: Pod) -> None:  # async handlers are awaited
        self.updates.append((old, new))
        self._log("update", new)

    def on_delete(self, obj: Pod) -> None:
        self.deleted.append(obj)
        self._log("delete", obj)

    def register(self, informer: Informer[Any]) -> None:
        informer.add_event_handler(self.on_add, self.on_update, self.on_delete)

    def kinds(self, key: str | None = None) -> list[tuple[str, str]]:
        return [(kind, k) for kind, k, _ in self.events if key is None or k == key]

    async def wait_for(self, condition: Callable[[], bool], timeout: float = TIMEOUT, what: str = "") -> None:
        async def until() -> None:
            while not condition():
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(until(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what or 'handler events'}; saw {self.events}") from None

    async def wait_count(self, n: int, timeout: float = TIMEOUT) -> list[Event]:
        await self.wait_for(lambda: len(self.events) >= n, timeout, f"{n} events")
        return self.events[:n]


async def eventually(condition: Callable[[], object], timeout: float = TIMEOUT, what: str = "condition") -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


def new_pod(name: str, namespace: str, labels: dict[str, str] | None = None, **spec: Any) -> Pod:
    return Pod.model_validate(manifests.pod(name, namespace, labels, **spec))


def snapshot(informer: Informer[Any]) -> dict[str, str]:
    """key -> resourceVersion of everything the informer caches."""
    return {informer.store.key(o): o.metadata.resource_version for o in informer.list()}


async def fresh_list(client: ApiClient, namespace: str, **selectors: Any) -> dict[str, str]:
    items, _, _ = await client.list(Pod, namespace, **selectors)
    return {f"{p.metadata.namespace}/{p.metadata.name}": p.metadata.resource_version or "" for p in items}


def make_client(server: ApiServer, component: str) -> ApiClient:
    return ApiClient(ClientConfig(server=server.url), user_agent=default_user_agent(component))


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[ApiClient]:
    c = make_client(apiserver, "informer-integration-test")
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def run_informer() -> AsyncIterator[Run]:
    """Start informers for a test; every one is stopped (and awaited) afterwards."""
    tasks: list[tuple[Informer[Any], asyncio.Task[None]]] = []

    def start(informer: Informer[Any]) -> Informer[Any]:
        tasks.append((informer, informer.start()))
        return informer

    yield start
    for informer, _ in tasks:
        informer.stop()
    results = await asyncio.wait_for(asyncio.gather(*(t for _, t in tasks), return_exceptions=True), 10)
    assert not [r for r in results if isinstance(r, BaseException)], results


@pytest.fixture
def own_apiserver(workdir: Path, etcd: Etcd) -> Iterator[ApiServer]:
    """An apiserver of this test's own (free to be killed) on the session's etcd; its watch cache
    holds 16 events. Writes while it is down go through the session apiserver, as they would
    through a second apiserver of an HA control plane."""
    server = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0", "--watch-cache-window", "16",
                       "--watch-bookmark-interval", "1")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def informer_for(client: ApiClient, namespace: str | None, **kwargs: Any) -> Informer[Pod]:
    """A pod informer that retries quickly (tests restart apiservers)."""
    kwargs.setdefault("min_backoff", 0.05)
    kwargs.setdefault("max_backoff", 0.5)
    return Informer(client, Pod, namespace, **kwargs)


# -- sync and handlers ----------------------------------------------------------------------------


async def test_sync_lists_existing_objects(client: ApiClient, namespace: str,
                                           run_informer: Run) -> None:
    created = [await client.create(new_pod(f"p{i}", namespace)) for i in range(3)]
    informer = informer_for(client, namespace)
    recorder = Recorder()
    recorder.register(informer)
    assert not informer.has_synced
    run_informer(informer)
    assert await informer.wait_for_sync(TIMEOUT)
    assert informer.has_synced
    assert sorted(informer.store.keys()) == [f"{namespace}/p{i}" for i in range(3)]
    assert int(informer.last_sync_resource_version) >= max(int(p.metadata.resource_version or 0) for p in created)
    cached = informer.get("p1", namespace)
    assert isinstance(cached, Pod) and cached == created[1]
    await asyncio.wait_for(informer.wait_for_handlers(), TIMEOUT)
    assert sorted(recorder.kinds()) == [("add", f"{namespace}/p{i}") for i in range(3)]
    assert snapshot(informer) == await fresh_list(client, namespace)


class ListCalls:
    """Records the (limit, continue) of every list call a real client makes, then makes it; `before_page`
    runs before each continued page (the test's chance to compact etcd under the informer's feet)."""

    def __init__(self, client: ApiClient, before_page: Callable[[], Any] | None = None) -> None:
        self.calls: list[tuple[int | None, bool]] = []
        self._list = client.list
        self._before_page = before_page
        client.list = self  # type: ignore[method-assign]

    async def __call__(self, *args: Any, limit: int | None = None, continue_: str | None = None, **kw: Any) -> Any:
        self.calls.append((limit, bool(continue_)))
        if continue_ and self._before_page is not None:
            await self._before_page()
        return await self._list(*args, limit=limit, continue_=continue_, **kw)


async def test_the_list_is_read_a_page_at_a_time(client: ApiClient, namespace: str, run_informer: Run) -> None:
    """client-go's pager: what is decoded at once is a page, not the whole list (issue 19: a 10,000-pod list
    was a scheduler's memory peak)."""
    created = [await client.create(new_pod(f"p{i}", namespace)) for i in range(7)]
    calls = ListCalls(client)
    informer = informer_for(client, namespace)
    informer.list_page_size = 3
    recorder = Recorder()
    recorder.register(informer)
    run_informer(informer)
    assert await informer.wait_for_sync(TIMEOUT)
    assert calls.calls == [(3, False), (3, True), (3, True)]
    assert snapshot(informer) == await fresh_list(client, namespace)
    assert int(informer.last_sync_resource_version) >= max(int(p.metadata.resource_version or 0) for p in created)
    await recorder.wait_count(7)
    await client.create(new_pod("after", namespace))  # watched from the pages' resourceVersion
    await recorder.wait_for(lambda: ("add", f"{namespace}/after") in recorder.kinds(), what="a pod after the list")


async def test_a_list_whose_pages_were_compacted_away_is_read_whole(
        client: ApiClient, etcd: Etcd, namespace: str, run_informer: Run) -> None:
    for i in range(5):
        await client.create(new_pod(f"p{i}", namespace))

    async def compact_meanwhile() -> None:  # a write, then etcd compacted past the first page's revision
        await client.create(new_pod(f"late{len(calls.calls)}", namespace))
        storage = EtcdStorage([etcd.endpoint])
        try:
            await storage.compact(await storage.current_revision())
        finally:
            await storage.close()

    calls = ListCalls(client, before_page=compact_meanwhile)
    informer = informer_for(client, namespace)
    informer.list_page_size = 2
    run_informer(informer)
    assert await informer.wait_for_sync(TIMEOUT)
    assert calls.calls[:3] == [(2, False), (2, True), (None, False)]  # 410 on the second page: one whole list
    assert snapshot(informer) == await fresh_list(client, namespace)
    assert len(informer.store) == 6


async def test_sync_of_an_empty_view(client: ApiClient, namespace: str,
                                     run_informer: Run) -> None:
    informer = run_informer(informer_for(client, namespace))
    assert await informer.wait_for_sync(TIMEOUT)
    assert informer.list() == [] and len(informer.store) == 0


async def test_handlers_see_real_writes_in_order(client: ApiClient, namespace: str,
                                                 run_informer: Run) -> None:
    informer = informer_for(client, namespace)
    recorder = Recorder()
    recorder.register(informer)
    run_informer(informer)
    assert await informer.wait_for_sync(TIMEOUT)

    key = f"{namespace}/w"
    written = [await client.create(new_pod("w", namespace))]
    pod = written[-1].model_copy(deep=True)
    pod.metadata.labels = {"app": "test", "step": "update"}
    written.append(await client.update(pod))
    written.append(await client.patch(Pod, "w", {"metadata": {"annotations": {"step": "patch"}}}, "strategic",
                                      namespace))
    written.append(await client.patch(Pod, "w", {"status": {"phase": "Running"}}, "merge", namespace,
                                      subresource="status"))
    await client.create(new_pod("other", namespace))
    await client.delete(Pod, "w", namespace)

    events = await recorder.wait_count(6)
    assert [(kind, k) for kind, k, _ in events] == [
        ("add", key), ("update", key), ("update", key), ("update", key), ("add", f"{namespace}/other"),
        ("delete", key)]
    assert [rv for _, k, rv in events[:4]] == [p.metadata.resource_version for p in written]
    # every update hands over the previous state as `old`
    for (old, new), (before, after) in zip(recorder.updates, itertools.pairwise(written), strict=True):
        assert old.metadata.resource_version == before.metadata.resource_version
        assert new == after
    assert recorder.deleted[0].metadata.name == "w"
    assert recorder.deleted[0].status is not None and recorder.deleted[0].status.phase == "Running"
    assert informer.get("w", namespace) is None
    assert snapshot(informer) == await fresh_list(client, namespace)


async def test_a_slow_handler_does_not_hold_back_others(client: ApiClient, namespace: str,
                                                        run_informer: Run) -> None:
    informer = informer_for(client, namespace)
    release = asyncio.Event()
    slow: list[str] = []

    async def slow_add(obj: Pod) -> None:
        await release.wait()
        slow.append(obj.metadata.name or "")

    informer.add_event_handler(on_add=slow_add)
    fast = Recorder()
    fast.register(informer)
    run_informer(informer)
    assert await informer.wait_for_sync(TIMEOUT)
    for i in range(5):
        await client.create(new_pod(f"s{i}", namespace))
    await fast.wait_count(5)
    assert slow == [] and len(informer.store) == 5  # the store and the fast handler did not wait
    release.set()
    await asyncio.wait_for(informer.wait_for_handlers(), TIMEOUT)
    assert slow == [f"s{i}" for i in range(5)]


async def test_a_failing_handler_does_not_stop_delivery(client: ApiClient, namespace: str,
                                                        run_informer: Run) -> None:
    informer = informer_for(client, namespace)
    seen: list[str] = []

    def flaky(obj: Pod) -> None:
        seen.append(obj.metadata.name or "")
        if obj.metadata.name == "boom":
            raise RuntimeError("handler bug")

    informer.add_event_handler(on_add=flaky)
    run_informer(informer)
    assert await informer.wait_for_sync(TIMEOUT)
    await client.create(new_pod("boom", namespace))
    await client.create(new_pod("fine", namespace))
    await eventually(lambda: seen == ["boom", "fine"], what="both adds")


async def test_handler_added_late_gets_the_cached_objects(client: ApiClient, namespace: str,
                                                          run_informer: Run) -> None:
    await client.create(new_pod("early", namespace))
    informer = run_informer(informer_for(client, namespace))
    assert await informer.wait_for_sync(TIMEOUT)
    late = Recorder()
    late.register(informer)
    await late.wait_count(1)
    await client.create(new_pod("later", namespace))
    await late.wait_count(2)
    assert late.kinds() == [("add", f"{namespace}/early"), ("add", f"{namespace}/later")]


async def test_resync_replays_cached_objects_as_updates(client: ApiClient, namespace: str,
                                                        run_informer: Run) -> None:
    await client.create(new_pod("r", namespace))
    informer = informer_for(client, namespace, resync_period=0.1)
    recorder = Recorder()
    recorder.register(informer)
    run_informer(informer)
    await recorder.wait_for(lambda: recorder.kinds().count(("update", f"{namespace}/r")) >= 2, what="two resyncs")
    old, new = recorder.updates[0]
    assert old is new  # a resync is an update from the object to itself


async def test_stop_ends_the_informer(client: ApiClient, namespace: str) -> None:
    informer = informer_for(client, namespace)
    recorder = Recorder()
    recorder.register(informer)
    task = informer.start()
    assert informer.start() is task  # idempotent while running
    assert await informer.wait_for_sync(TIMEOUT)
    informer.stop()
    await asyncio.wait_for(task, TIMEOUT)
    assert task.done() and task.exception() is None
    await client.create(new_pod("after-stop", namespace))
    assert informer.get("after-stop", namespace) is None  # no longer watching
    assert recorder.events == []


async def test_server_ending_the_watch_is_resumed_without_relist(
        client: ApiClient, namespace: str, run_informer: Run,
        caplog: pytest.LogCaptureFixture) -> None:
    """watch_timeout=1: the apiserver ends every watch after 1-2 s; the informer watches again from its
    last resourceVersion, so writes across several streams arrive exactly once."""
    caplog.set_level(logging.INFO, logger="machinery.informer")
    informer = informer_for(client, namespace, watch_timeout=1)
    recorder = Recorder()
    recorder.register(informer)
    run_informer(informer)
    assert await informer.wait_for_sync(TIMEOUT)
    loop = asyncio.get_running_loop()
    started = loop.time()
    names = []
    while loop.time() - started < 4.5:  # spans at least two server-side stream ends
        name = f"t{len(names):02d}"
        names.append(name)
        await client.create(new_pod(name, namespace))
        await recorder.wait_count(len(names))
        await asyncio.sleep(0.25)  # pacing of the writes, not synchronisation
    assert recorder.kinds() == [("add", f"{namespace}/{n}") for n in names]
    assert snapshot(informer) == await fresh_list(client, namespace)
    assert not [r for r in caplog.records if "relisting" in r.getMessage() or r.levelno >= logging.WARNING]


# -- the store's indexes ----------------------------------------------------------------------------


async def test_store_indexes_by_namespace_and_node(client: ApiClient, namespace: str,
                                                   run_informer: Run) -> None:
    run = uuid.uuid4().hex[:8]
    other = f"t-{uuid.uuid4().hex[:10]}"
    await client.create(Namespace(metadata=ObjectMeta(name=other)))
    try:
        informer = informer_for(client, None, label_selector={"run": run},
                                indexers={NAMESPACE_INDEX: namespace_index, NODE_NAME_INDEX: node_name_index})
        run_informer(informer)
        assert await informer.wait_for_sync(TIMEOUT)
        labels = {"run": run}
        await client.create(new_pod("a", namespace, labels, nodeName="node-1"))
        await client.create(new_pod("b", namespace, labels))
        await client.create(new_pod("c", other, labels, nodeName="node-1"))
        await client.create(new_pod("d", other, labels, nodeName="node-2"))
        await client.create(new_pod("not-mine", namespace, {"run": "someone-else"}, nodeName="node-1"))
        await eventually(lambda: len(informer.store) == 4, what="4 pods cached")

        def names(index: str, value: str) -> list[str]:
            return sorted(p.metadata.name for p in informer.store.by_index(index, value))

        assert names(NAMESPACE_INDEX, namespace) == ["a", "b"]
        assert names(NAMESPACE_INDEX, other) == ["c", "d"]
        assert names(NODE_NAME_INDEX, "node-1") == ["a", "c"]
        assert informer.store.index_keys(NODE_NAME_INDEX, "node-2") == [f"{other}/d"]
        assert informer.store.index_values(NODE_NAME_INDEX) == ["node-1", "node-2"]
        assert names(NODE_NAME_INDEX, "node-3") == []

        await client.bind("b", namespace, "node-2")  # an update moves the pod between index values
        await eventually(lambda: names(NODE_NAME_INDEX, "node-2") == ["b", "d"], what="b indexed under node-2")
        await client.delete(Pod, "c", other, grace_period_seconds=0)
        await eventually(lambda: names(NODE_NAME_INDEX, "node-1") == ["a"], what="c gone from node-1")
        assert names(NAMESPACE_INDEX, other) == ["d"]

        # an index added to a running informer covers what is cached already
        informer.add_indexers({CONTROLLER_UID_INDEX: controller_uid_index})
        assert informer.store.index_values(CONTROLLER_UID_INDEX) == []
        with pytest.raises(ValueError):
            informer.add_indexers({NAMESPACE_INDEX: namespace_index})
        with pytest.raises(KeyError):
            informer.store.by_index("no-such-index", "x")
    finally:
        await client.delete(Namespace, other)


async def test_field_selected_informer_sees_pods_bound_to_its_node(
        client: ApiClient, namespace: str, run_informer: Run) -> None:
    """What a kubelet runs: pods with spec.nodeName=node-1, including one the scheduler binds later."""
    await client.create(new_pod("here", namespace, nodeName="node-1"))
    await client.create(new_pod("there", namespace, nodeName="node-2"))
    await client.create(new_pod("pending", namespace))
    await client.create(new_pod("elsewhere", namespace))
    informer = informer_for(client, namespace, field_selector={"spec.nodeName": "node-1"})
    recorder = Recorder()
    recorder.register(informer)
    run_informer(informer)
    assert await informer.wait_for_sync(TIMEOUT)
    assert informer.store.keys() == [f"{namespace}/here"]

    await client.bind("pending", namespace, "node-1")
    await client.bind("elsewhere", namespace, "node-2")
    await recorder.wait_count(2)
    assert recorder.kinds() == [("add", f"{namespace}/here"), ("add", f"{namespace}/pending")]
    bound = informer.get("pending", namespace)
    assert bound is not None and bound.spec is not None and bound.spec.node_name == "node-1"

    await client.patch(Pod, "pending", {"status": {"phase": "Running"}}, "merge", namespace, subresource="status")
    await client.delete(Pod, "here", namespace, grace_period_seconds=0)
    await recorder.wait_count(4)
    assert recorder.kinds()[2:] == [("update", f"{namespace}/pending"), ("delete", f"{namespace}/here")]
    assert sorted(informer.store.keys()) == [f"{namespace}/pending"]
    assert snapshot(informer) == await fresh_list(client, namespace, field_selector="spec.nodeName=node-1")


# -- surviving the apiserver ------------------------------------------------------------------------


async def test_resume_after_apiserver_kill_9_delivers_missed_writes_once(
        own_apiserver: ApiServer, client: ApiClient, namespace: str,
        run_informer: Run, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="machinery.informer")
    for i in range(3):
        await client.create(new_pod(f"a{i}", namespace))
    async with make_client(own_apiserver, "informer-resume-test") as own:
        informer = informer_for(own, namespace)
        recorder = Recorder()
        recorder.register(informer)
        run_informer(informer)
        assert await informer.wait_for_sync(TIMEOUT)
        await recorder.wait_count(3)
        await client.create(new_pod("before-kill", namespace))
        await recorder.wait_count(4)
        recorder.events.clear()

        await asyncio.to_thread(own_apiserver.process.kill)
        # written while the informer's apiserver is dead, through the other apiserver
        for i in range(20):  # more than the restarted apiserver's 16-event window
            await client.create(new_pod(f"b{i:02d}", namespace))
        await client.patch(Pod, "a0", {"metadata": {"labels": {"changed": "yes"}}}, "merge", namespace)
        await client.delete(Pod, "a1", namespace)
        await asyncio.to_thread(own_apiserver.start)

        await client.create(new_pod("after-restart", namespace))
        await recorder.wait_for(lambda: ("add", f"{namespace}/after-restart") in recorder.kinds(),
                                what="the write after the restart")
        expected = [("add", f"{namespace}/b{i:02d}") for i in range(20)]
        expected += [("update", f"{namespace}/a0"), ("delete", f"{namespace}/a1"),
                     ("add", f"{namespace}/after-restart")]
        assert recorder.kinds() == expected  # each write once, in order
        a0 = informer.get("a0", namespace)
        assert a0 is not None and a0.metadata.labels == {"app": "test", "changed": "yes"}
        assert snapshot(informer) == await fresh_list(client, namespace)
        # resumed from its resourceVersion: no 410, no relist
        assert not [r for r in caplog.records if "relisting" in r.getMessage()]


async def test_relist_after_410_delivers_the_differences(
        own_apiserver: ApiServer, etcd: Etcd, client: ApiClient, namespace: str,
        run_informer: Run, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="machinery.informer")
    for name in ("a", "b", "c", "d"):
        await client.create(new_pod(name, namespace))
    async with make_client(own_apiserver, "informer-relist-test") as own:
        informer = informer_for(own, namespace)
        recorder = Recorder()
        recorder.register(informer)
        run_informer(informer)
        assert await informer.wait_for_sync(TIMEOUT)
        await recorder.wait_count(4)
        before = {o.metadata.name: o for o in informer.list()}
        recorder.events.clear()

        await asyncio.to_thread(own_apiserver.process.kill)
        await client.delete(Pod, "a", namespace)
        await client.delete(Pod, "b", namespace)
        await client.patch(Pod, "c", {"metadata": {"labels": {"changed": "yes"}}}, "merge", namespace)
        await client.create(new_pod("e", namespace))
        for i in range(20):  # churn elsewhere, so the informer's resourceVersion is far behind
            await client.create(new_pod(f"x{i:02d}", namespace, {"app": "churn"}))
            await client.delete(Pod, f"x{i:02d}", namespace)
        storage = EtcdStorage([etcd.endpoint])
        try:
            await storage.compact(await storage.current_revision())
        finally:
            await storage.close()
        await asyncio.to_thread(own_apiserver.start)

        await eventually(lambda: any("too old" in r.getMessage() for r in caplog.records), what="a 410 and relist")
        fresh = await fresh_list(client, namespace)
        await eventually(lambda: snapshot(informer) == fresh, what="the informer to match a fresh list")
        await asyncio.wait_for(informer.wait_for_handlers(), TIMEOUT)
        assert sorted(recorder.kinds()) == sorted([
            ("delete", f"{namespace}/a"), ("delete", f"{namespace}/b"),
            ("update", f"{namespace}/c"), ("add", f"{namespace}/e")])
        # deletes discovered by a relist hand over the last state the informer knew
        assert {p.metadata.name: p for p in recorder.deleted} == {"a": before["a"], "b": before["b"]}
        (old, new), = recorder.updates
        assert old == before["c"] and new.metadata.labels == {"app": "test", "changed": "yes"}

        # and it keeps watching afterwards
        await client.create(new_pod("f", namespace))
        await recorder.wait_for(lambda: ("add", f"{namespace}/f") in recorder.kinds(), what="f after the relist")


async def test_informer_converges_under_churn_and_repeated_kills(
        own_apiserver: ApiServer, client: ApiClient, namespace: str, run_informer: Run) -> None:
    """Writers keep creating, updating and deleting while the informer's apiserver is killed and
    restarted three times: replaying the handler events gives exactly the apiserver's final state,
    with no add of a known object, no update or delete of an unknown one, and no resourceVersion
    going backwards."""
    replayed: dict[str, str] = {}
    violations: list[str] = []

    def key(obj: Pod) -> str:
        return f"{obj.metadata.namespace}/{obj.metadata.name}"

    def on_add(obj: Pod) -> None:
        if key(obj) in replayed:
            violations.append(f"duplicate add {key(obj)}")
        replayed[key(obj)] = obj.metadata.resource_version or ""

    def on_update(old: Pod, new: Pod) -> None:
        if replayed.get(key(new)) != old.metadata.resource_version:
            violations.append(f"update of {key(new)} from {old.metadata.resource_version}, "
                              f"had {replayed.get(key(new))}")
        if int(new.metadata.resource_version or 0) <= int(old.metadata.resource_version or 0):
            violations.append(f"update of {key(new)} goes back: {old.metadata.resource_version} -> "
                              f"{new.metadata.resource_version}")
        replayed[key(new)] = new.metadata.resource_version or ""

    def on_delete(obj: Pod) -> None:
        if replayed.pop(key(obj), None) is None:
            violations.append(f"delete of unknown {key(obj)}")

    stop_writing = asyncio.Event()
    writes = 0

    async def writer(worker: int) -> None:
        nonlocal writes
        i = 0
        while not stop_writing.is_set():
            name = f"w{worker}-{i % 6}"
            step = (i // 6) % 3
            try:
                if step == 0:
                    await client.create(new_pod(name, namespace))
                elif step == 1:
                    await client.patch(Pod, name, {"metadata": {"labels": {"i": str(i)}}}, "merge", namespace)
                else:
                    await client.delete(Pod, name, namespace)
            except Exception as e:  # a conflict with the other writer's pods cannot happen: names are per worker
                violations.append(f"writer {worker}: {e}")
                return
            writes += 1
            i += 1
            await asyncio.sleep(0.005)  # pacing, not synchronisation

    async with make_client(own_apiserver, "informer-churn-test") as own:
        informer = informer_for(own, namespace)
        informer.add_event_handler(on_add, on_update, on_delete)
        run_informer(informer)
        assert await informer.wait_for_sync(TIMEOUT)
        writers = [asyncio.create_task(writer(w)) for w in range(3)]
        try:
            for _ in range(3):
                target = writes + 30
                await eventually(lambda t=target: writes >= t, what="writes before the kill")
                await asyncio.to_thread(own_apiserver.process.kill)
                target = writes + 30
                await eventually(lambda t=target: writes >= t, what="writes while it is down")
                await asyncio.to_thread(own_apiserver.start)
            target = writes + 30
            await eventually(lambda t=target: writes >= t, what="writes after the last restart")
        finally:
            stop_writing.set()
            await asyncio.wait_for(asyncio.gather(*writers), TIMEOUT)
        fresh = await fresh_list(client, namespace)
        await eventually(lambda: snapshot(informer) == fresh, what="the informer to match a fresh list")
        await asyncio.wait_for(informer.wait_for_handlers(), TIMEOUT)
        assert violations == []
        assert replayed == fresh


async def test_backoff_starts_afresh_after_a_healthy_watch_breaks(
        own_apiserver: ApiServer, client: ApiClient, namespace: str, run_informer: Run,
        caplog: pytest.LogCaptureFixture) -> None:
    """A long outage grows the retry delay; once the watch has worked again, the next outage must
    be retried from min_backoff, not from the delay the last outage left behind (which would keep
    every informer of a process blind for up to max_backoff after each apiserver restart)."""
    caplog.set_level(logging.WARNING, logger="machinery.informer")

    def failures() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "watch failed" in r.getMessage()]

    async with make_client(own_apiserver, "informer-backoff-test") as own:
        informer = informer_for(own, namespace, min_backoff=0.02, max_backoff=30.0)
        recorder = Recorder()
        recorder.register(informer)
        run_informer(informer)
        assert await informer.wait_for_sync(TIMEOUT)

        await asyncio.to_thread(own_apiserver.process.kill)
        await eventually(lambda: len(failures()) >= 7, what="7 failed retries")  # the delay is 2.56 s now
        await asyncio.to_thread(own_apiserver.start)
        await client.create(new_pod("between", namespace))
        await recorder.wait_for(lambda: len(recorder.events) == 1, timeout=10, what="the watch to work again")

        caplog.clear()
        await asyncio.to_thread(own_apiserver.process.kill)
        await eventually(lambda: len(failures()) >= 2, what="the break and the first retry")
        broke, retried = failures()[:2]
        # min_backoff (20 ms) plus a refused connect; the delay the first outage left would be >= 2.56 s
        assert retried.created - broke.created < 1.0, [r.getMessage() for r in failures()]
        await asyncio.to_thread(own_apiserver.start)
        await client.create(new_pod("after", namespace))
        await recorder.wait_for(lambda: len(recorder.events) == 2, what="the watch to work once more")


async def test_informer_waits_out_an_apiserver_that_is_down_at_start(
        own_apiserver: ApiServer, client: ApiClient, namespace: str,
        run_informer: Run) -> None:
    await client.create(new_pod("x", namespace))
    await asyncio.to_thread(own_apiserver.process.kill)
    async with make_client(own_apiserver, "informer-late-test") as own:
        informer = run_informer(informer_for(own, namespace))
        assert not await informer.wait_for_sync(0.5)  # the list keeps failing while nothing listens
        await asyncio.to_thread(own_apiserver.start)
        assert await informer.wait_for_sync(TIMEOUT)
        assert informer.store.keys() == [f"{namespace}/x"]


# -- informer -> work queue -> worker: the shape of every controller --------------------------------


async def test_a_controller_built_from_informer_queue_and_client(
        client: ApiClient, namespace: str, run_informer: Run) -> None:
    """Handlers enqueue keys, two workers reconcile from the cache and write back with
    retry_on_conflict; a reconcile that fails is retried with backoff; every pod converges."""
    informer = informer_for(client, namespace)
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        default_controller_rate_limiter(base_delay=0.01, max_delay=0.2), name="copy-label")
    informer.add_event_handler(
        on_add=lambda obj: queue.add(meta_namespace_key(obj)),
        on_update=lambda old, new: queue.add(meta_namespace_key(new)),
        on_delete=lambda obj: queue.add(meta_namespace_key(obj)),
    )
    reconciles: dict[str, int] = {}
    in_flight: set[str] = set()
    overlaps: list[str] = []
    failed_once: set[str] = set()

    async def reconcile(key: str) -> None:
        ns, name = split_meta_namespace_key(key)
        pod = informer.get(name, ns)
        if pod is None:
            return  # deleted: nothing to do
        want = (pod.metadata.labels or {}).get("app", "")
        if (pod.metadata.annotations or {}).get("copied-app") == want:
            return
        if name.endswith("-flaky") and key not in failed_once:
            failed_once.add(key)
            raise RuntimeError("transient failure")

        async def write() -> None:
            fresh = await client.get(Pod, name, ns)
            fresh.metadata.annotations = {**(fresh.metadata.annotations or {}), "copied-app": want}
            await client.update(fresh)

        await retry_on_conflict(write)

    async def worker() -> None:
        async for key in queue:
            if key in in_flight:
                overlaps.append(key)
            in_flight.add(key)
            reconciles[key] = reconciles.get(key, 0) + 1
            try:
                await reconcile(key)
                queue.forget(key)
            except Exception:
                queue.add_rate_limited(key)
            finally:
                in_flight.discard(key)
                queue.done(key)

    run_informer(informer)
    workers = [asyncio.create_task(worker()) for _ in range(2)]
    try:
        assert await informer.wait_for_sync(TIMEOUT)
        names = [f"c{i:02d}" for i in range(12)] + ["x-flaky"]
        for name in names:
            await client.create(new_pod(name, namespace, {"app": f"app-{name}"}))
        # someone else keeps writing to one pod while the controller works on it
        for i in range(5):
            await client.patch(Pod, "c00", {"metadata": {"labels": {"other": str(i)}}}, "merge", namespace)
        await client.patch(Pod, "c01", {"metadata": {"labels": {"app": "changed"}}}, "merge", namespace)

        def converged() -> bool:
            pods = {p.metadata.name: p for p in informer.list()}
            return len(pods) == len(names) and all(
                (p.metadata.annotations or {}).get("copied-app") == (p.metadata.labels or {}).get("app")
                for p in pods.values())

        await eventually(converged, what="every pod's annotation to follow its label")
        assert f"{namespace}/x-flaky" in failed_once and reconciles[f"{namespace}/x-flaky"] >= 2
        assert overlaps == []  # a key is never worked on by two workers at once
        await client.delete(Pod, "c02", namespace)
        await eventually(lambda: informer.get("c02", namespace) is None, what="c02 gone from the cache")
        await eventually(lambda: len(queue) == 0 and queue.processing() == 0, what="the queue to drain")
    finally:
        queue.shutdown()
        await asyncio.wait_for(asyncio.gather(*workers), TIMEOUT)
    assert queue.shutting_down


# -- sharing --------------------------------------------------------------------------------------


async def test_a_cache_without_managed_fields_and_updates_sent_from_it(
        client: ApiClient, namespace: str, run_informer: Run) -> None:
    """strip_managed_fields (the controller-manager's and scheduler's transform): the cache holds the pods
    without managedFields, otherwise as the apiserver serves them, and a controller's update built from a
    cached pod keeps the stored managedFields, with the controller's own entry added."""
    await client.create(new_pod("stripped", namespace, {"app": "web"}), field_manager="creator")
    informer = run_informer(informer_for(client, namespace, transform=strip_managed_fields))
    assert await informer.wait_for_sync(TIMEOUT)
    cached = informer.get("stripped", namespace)
    assert cached is not None and cached.metadata.managed_fields is None
    served = await client.get(Pod, "stripped", namespace)
    assert [e.manager for e in served.metadata.managed_fields or []] == ["creator"]
    assert cached.to_dict() == strip_managed_fields(served.model_copy(deep=True)).to_dict()

    changed = cached.model_copy(deep=True)
    assert changed.metadata.labels is not None
    changed.metadata.labels["tier"] = "front"
    updated = await client.update(changed, field_manager="controller")
    assert sorted(e.manager for e in updated.metadata.managed_fields or []) == ["controller", "creator"]
    await eventually(lambda: (informer.get("stripped", namespace) or cached).metadata.resource_version
                     == updated.metadata.resource_version, what="the update in the cache")
    now = informer.get("stripped", namespace)
    assert now is not None and now.metadata.managed_fields is None
    assert now.metadata.labels == {"app": "web", "tier": "front"}
    assert cached.metadata.labels == {"app": "web"}  # the old cached object was not touched


async def test_shared_informer_factory_shares_one_informer_per_key(client: ApiClient, namespace: str) -> None:
    factory = SharedInformerFactory(client)
    try:
        pods = factory.informer_for(Pod, namespace)
        assert factory.informer_for(Pod, namespace) is pods
        labelled = factory.informer_for(Pod, namespace, label_selector={"app": "web", "tier": "front"})
        assert labelled is not pods
        assert factory.informer_for(Pod, namespace, label_selector="app=web,tier=front") is labelled
        assert factory.informer_for(Pod, namespace, label_selector="tier=front,app=web") is labelled
        assert factory.informer_for(Pod, namespace, label_selector={"tier": "front", "app": "web"}) is labelled
        deployments = factory.informer_for(Deployment, namespace)
        assert deployments is not pods
        assert factory.informer_for(Pod) is not pods  # all namespaces is another view
        assert len(factory.informers()) == 4

        first, second = Recorder(), Recorder()
        first.register(pods)
        second.register(pods)
        factory.start()
        assert await factory.wait_for_cache_sync(TIMEOUT)
        assert all(i.has_synced for i in factory.informers())

        late = factory.informer_for(Pod, namespace, field_selector={"spec.nodeName": "node-1"})
        assert await late.wait_for_sync(TIMEOUT)  # created after start: started at once

        await client.create(new_pod("shared", namespace, {"app": "web", "tier": "front"}, nodeName="node-1"))
        await first.wait_count(1)
        await second.wait_count(1)
        assert first.kinds() == second.kinds() == [("add", f"{namespace}/shared")]
        await eventually(lambda: labelled.get("shared", namespace) is not None and
                         late.get("shared", namespace) is not None, what="the other views")
        assert deployments.list() == []
    finally:
        await asyncio.wait_for(factory.shutdown(), TIMEOUT)
    tasks = [i._task for i in factory.informers()]
    assert all(t is not None and t.done() for t in tasks)
