"""BindingREST (pods/binding) starts from the watch cache's copy of the pod, as upstream's cacher hands
GuaranteedUpdate its cachedExistingObject: one etcd transaction per binding when the copy is current, and the
stored pod's verdict when it is not. The storage is a stand-in with etcd's compare-and-swap semantics."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from apiserver import errors
from apiserver.registry.generic import Store, WriteOptions
from apiserver.registry.pod import PodStrategy
from apiserver.registry.podstorage import BindingREST
from apiserver.storage.etcd import KV, KeyNotFound, RevisionConflict
from machinery.api.core_v1 import Binding
from machinery.api.resources import resource_for

KEY = "/registry/pods/ns/web"


class CasStorage:
    """One key's worth of etcd: reads and compare-and-swap writes, counted."""

    def __init__(self) -> None:
        self.kvs: dict[str, KV] = {}
        self.revision = 1
        self.reads = 0
        self.writes = 0

    def put(self, key: str, obj: dict[str, Any]) -> KV:
        self.revision += 1
        old = self.kvs.get(key)
        kv = KV(key, orjson.dumps(obj), self.revision, old.create_revision if old else self.revision)
        self.kvs[key] = kv
        return kv

    async def get(self, key: str, *, revision: int = 0) -> KV | None:
        self.reads += 1
        return self.kvs.get(key)

    async def update(self, key: str, value: bytes, mod_revision: int) -> int:
        current = self.kvs.get(key)
        if current is None:
            raise KeyNotFound(key)
        if current.mod_revision != mod_revision:
            raise RevisionConflict(current)  # etcd's failed Txn answers the stored value
        self.writes += 1
        return self.put(key, orjson.loads(value)).mod_revision


def pod(uid: str = "u1", **spec: Any) -> dict[str, Any]:
    """A pod as the pod store keeps it (defaulted at its create)."""
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "web", "namespace": "ns", "uid": uid, "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}
    PodStrategy().prepare_for_create(obj)
    return obj


def binding(node: str, uid: str | None = "u1") -> Binding:
    return Binding.model_validate({"metadata": {"name": "web", "namespace": "ns", "uid": uid},
                                   "target": {"kind": "Node", "name": node}})


def pod_store(storage: CasStorage) -> Store:
    info = resource_for("", "pods")
    assert info is not None
    return Store(info, PodStrategy(), storage)  # type: ignore[arg-type]


def setup(stored: dict[str, Any], cached: dict[str, Any] | None) -> tuple[CasStorage, BindingREST]:
    """etcd holds `stored`; the watch cache holds `cached`, an older revision of the pod, or else `stored`."""
    storage = CasStorage()
    store = pod_store(storage)
    store.cacher.store[KEY] = store.cacher.cached(storage.put(KEY, cached if cached is not None else stored))
    if cached is not None:
        storage.put(KEY, stored)  # etcd moved on; the cache has not seen it yet
    return storage, BindingREST(store)


def bound_node(storage: CasStorage) -> str | None:
    node: str | None = orjson.loads(storage.kvs[KEY].value)["spec"].get("nodeName")
    return node


def test_a_current_cached_pod_is_bound_in_one_write_without_reading_etcd() -> None:
    storage, rest = setup(pod(), None)
    asyncio.run(rest.create("ns", "web", binding("node-1"), WriteOptions()))
    assert (storage.reads, storage.writes) == (0, 1)
    stored = orjson.loads(storage.kvs[KEY].value)
    assert stored["spec"]["nodeName"] == "node-1"
    assert stored["status"]["conditions"][0]["type"] == "PodScheduled"
    assert stored["metadata"]["generation"] == 2


def test_a_stale_cached_pod_loses_the_swap_and_is_bound_on_the_stored_one() -> None:
    later = pod()
    later["metadata"]["labels"] = {"version": "2"}
    storage, rest = setup(later, pod())
    asyncio.run(rest.create("ns", "web", binding("node-1"), WriteOptions()))
    stored = orjson.loads(storage.kvs[KEY].value)
    assert stored["spec"]["nodeName"] == "node-1"
    assert stored["metadata"]["labels"] == {"version": "2"}  # the write did not undo the later one
    assert storage.writes == 1


def test_a_pod_bound_meanwhile_is_a_conflict_though_the_cache_says_unbound() -> None:
    storage, rest = setup(pod(nodeName="node-0"), pod())
    with pytest.raises(errors.ApiError) as e:
        asyncio.run(rest.create("ns", "web", binding("node-1"), WriteOptions()))
    assert e.value.code == 409 and 'already assigned to node "node-0"' in str(e.value.message)
    assert bound_node(storage) == "node-0"


def test_a_verdict_on_a_stale_copy_is_checked_on_the_stored_pod() -> None:
    """The cache still holds the pod's former incarnation (another uid): the stored one is the binding's."""
    storage, rest = setup(pod(uid="u2"), pod(uid="u1"))
    asyncio.run(rest.create("ns", "web", binding("node-1", uid="u2"), WriteOptions()))
    assert storage.reads == 1 and bound_node(storage) == "node-1"


def test_a_verdict_on_the_stored_pod_is_the_answer() -> None:
    storage, rest = setup(pod(uid="u2"), None)
    with pytest.raises(errors.ApiError) as e:
        asyncio.run(rest.create("ns", "web", binding("node-1", uid="u1"), WriteOptions()))
    assert e.value.code == 409 and "UID in precondition: u1" in str(e.value.message)
    assert storage.reads == 1 and storage.writes == 0 and bound_node(storage) is None


def test_without_a_cached_copy_the_pod_is_read_from_etcd() -> None:
    storage = CasStorage()
    storage.put(KEY, pod())
    store = pod_store(storage)
    asyncio.run(BindingREST(store).create("ns", "web", binding("node-1"), WriteOptions()))
    assert (storage.reads, storage.writes) == (1, 1) and bound_node(storage) == "node-1"
    storage.kvs.clear()
    with pytest.raises(errors.ApiError) as e:
        asyncio.run(BindingREST(store).create("ns", "web", binding("node-1"), WriteOptions()))
    assert e.value.code == 404
