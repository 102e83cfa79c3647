"""The etcd client's retries that must not apply a write twice (apiserver/storage/etcd.py), against a real etcd.

A transaction whose answer was lost (the member died, the call was given up as stalled) may have been applied.
Here the loss is made certain: `LostFirstAnswer` sends each transaction twice for real and drops the first
answer, so the retry always meets what its own first attempt did — and must take it for its own success,
never apply it again, nor report a conflict or a missing key that it caused itself. Where another writer got
in between, the first change after the revision decides.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apiserver.storage.etcd import EtcdStorage, KeyExists, KeyNotFound, RevisionConflict
from tests.cluster import Etcd


class LostFirstAnswer(EtcdStorage):
    """Every Txn runs twice; the caller sees the second answer, flagged as after a lost one."""

    def __init__(self, endpoint: str) -> None:
        super().__init__([endpoint])
        self.between: Any = None  # a coroutine function run between the two attempts (another writer)

    async def _call(self, service: str, method: str, request: Any, **kwargs: Any) -> tuple[Any, bool]:
        if method != "Txn":
            return await super()._call(service, method, request, **kwargs)
        await super()._call(service, method, request, **kwargs)  # applied; its answer is lost
        if self.between is not None:
            between, self.between = self.between, None
            await between()
        resp, _ = await super()._call(service, method, request, **kwargs)
        return resp, True


def run(etcd: Etcd, test: Any) -> Any:
    async def main() -> Any:
        storage, plain = LostFirstAnswer(etcd.endpoint), EtcdStorage([etcd.endpoint])
        try:
            return await test(storage, plain)
        finally:
            await storage.close()
            await plain.close()

    return asyncio.run(main())


def test_a_create_whose_answer_was_lost_is_its_own_success(etcd: Etcd) -> None:
    async def test(storage: LostFirstAnswer, plain: EtcdStorage) -> None:
        revision = await storage.create("/retry/create", b'{"uid":"a"}')
        kv = await plain.get("/retry/create")
        assert kv is not None and kv.value == b'{"uid":"a"}'
        assert kv.create_revision == kv.mod_revision == revision
        # someone else's create of the key is still KeyExists
        with pytest.raises(KeyExists):
            await storage.create("/retry/create", b'{"uid":"b"}')

    run(etcd, test)


def test_an_update_whose_answer_was_lost_is_applied_once(etcd: Etcd) -> None:
    async def test(storage: LostFirstAnswer, plain: EtcdStorage) -> None:
        first = await plain.create("/retry/update", b"v0")
        revision = await storage.update("/retry/update", b"v1", first)
        kv = await plain.get("/retry/update")
        assert kv is not None and (kv.mod_revision, kv.value) == (revision, b"v1")

        # another writer after the lost attempt: the retry still finds its own write first, no conflict
        async def other() -> None:
            await plain.update("/retry/update", b"v-other", revision + 1)

        storage.between = other
        mine = await storage.update("/retry/update", b"v2", revision)
        kv = await plain.get("/retry/update")
        assert kv is not None and kv.value == b"v-other" and mine == revision + 1

        # a writer who got in before: a real conflict, reported with what is there
        with pytest.raises(RevisionConflict) as e:
            await storage.update("/retry/update", b"v3", revision)
        assert e.value.current is not None and e.value.current.value == b"v-other"

    run(etcd, test)


def test_a_delete_whose_answer_was_lost_is_its_own_success(etcd: Etcd) -> None:
    async def test(storage: LostFirstAnswer, plain: EtcdStorage) -> None:
        first = await plain.create("/retry/delete", b"v0")
        revision = await storage.delete("/retry/delete", first)
        assert revision > first and await plain.get("/retry/delete") is None

        # changed, then deleted by someone else before: KeyNotFound, not a success
        again = await plain.create("/retry/delete", b"v1")
        changed = await plain.update("/retry/delete", b"v2", again)
        await plain.delete("/retry/delete", changed)
        with pytest.raises(KeyNotFound):
            await storage.delete("/retry/delete", again)

    run(etcd, test)
