"""The apiserver's only door to etcd (upstream: staging/.../apiserver/pkg/storage/etcd3/store.go).

Keys are `/registry/{resource}/{namespace}/{name}`; values are the object's JSON. Every write is a
compare-and-swap on the key's mod revision in one etcd transaction, so a stale writer loses.
We speak gRPC through the stubs that ship with aetcd: its high-level calls lack ranges at a
revision, limits and prev_kv on watches, all of which the apiserver needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlparse

import grpc
from aetcd import rpc

log = logging.getLogger(__name__)

_RPC_TIMEOUT = 10.0


class StorageError(Exception):
    pass


class KeyExists(StorageError):
    pass


class KeyNotFound(StorageError):
    pass


class RevisionConflict(StorageError):
    """The key's mod revision is not the one the writer read: someone wrote in between."""

    def __init__(self, current: KV | None):
        super().__init__("revision conflict")
        self.current = current


class Compacted(StorageError):
    def __init__(self, compact_revision: int):
        super().__init__(f"required revision has been compacted (compacted up to {compact_revision})")
        self.compact_revision = compact_revision


class Unavailable(StorageError):
    pass


@dataclass(slots=True)
class KV:
    key: str
    value: bytes
    mod_revision: int
    create_revision: int


@dataclass(slots=True)
class EtcdEvent:
    type: str  # "PUT" or "DELETE"
    kv: KV  # for DELETE: key and deletion revision, value empty
    prev: KV | None


def prefix_end(prefix: bytes) -> bytes:
    """The range end that covers every key starting with prefix."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"


def _kv(kv: rpc.KeyValue) -> KV:
    return KV(kv.key.decode(), kv.value, kv.mod_revision, kv.create_revision)


def _grpc_target(endpoints: list[str]) -> str:
    """`http://a:2379,http://b:2379` → a gRPC target that fails over between them."""
    hosts = []
    for endpoint in endpoints:
        url = urlparse(endpoint if "://" in endpoint else f"http://{endpoint}")
        hosts.append(f"{url.hostname}:{url.port or 2379}")
    if len(hosts) == 1:
        return hosts[0]
    return "ipv4:" + ",".join(hosts)


class EtcdStorage:
    def __init__(self, endpoints: list[str]):
        self.endpoints = endpoints
        self._channel: grpc.aio.Channel | None = None

    def _open(self) -> None:
        """Open the channel on first use: grpc.aio binds it to the event loop it is created in."""
        self._channel = grpc.aio.insecure_channel(
            _grpc_target(self.endpoints),
            options=[
                ("grpc.max_receive_message_length", 256 * 1024 * 1024),
                ("grpc.keepalive_time_ms", 10_000),
                ("grpc.keepalive_timeout_ms", 5_000),
                ("grpc.initial_reconnect_backoff_ms", 200),
                ("grpc.max_reconnect_backoff_ms", 2_000),
            ],
        )
        self._kv = rpc.KVStub(self._channel)
        self._watch = rpc.WatchStub(self._channel)

    @property
    def kv(self) -> rpc.KVStub:
        if self._channel is None:
            self._open()
        return self._kv

    @property
    def watch_stub(self) -> rpc.WatchStub:
        if self._channel is None:
            self._open()
        return self._watch

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def _call(self, method, request):  # type: ignore[no-untyped-def]
        try:
            return await method(request, timeout=_RPC_TIMEOUT)
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.OUT_OF_RANGE or "compacted" in (e.details() or ""):
                raise Compacted(0) from e
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise Unavailable(f"etcd unavailable: {e.details()}") from e
            raise StorageError(f"etcd: {e.code().name}: {e.details()}") from e

    async def ready(self) -> bool:
        try:
            await self.current_revision()
        except StorageError:
            return False
        return True

    async def current_revision(self) -> int:
        resp = await self._call(self.kv.Range, rpc.RangeRequest(key=b"\0", count_only=True, limit=1))
        return resp.header.revision

    async def get(self, key: str) -> KV | None:
        resp = await self._call(self.kv.Range, rpc.RangeRequest(key=key.encode()))
        return _kv(resp.kvs[0]) if resp.kvs else None

    async def list(self, prefix: str, *, revision: int = 0, limit: int = 0, start_key: str | None = None,
                   serializable: bool = False) -> tuple[list[KV], int, bool]:
        """Keys under prefix at `revision` (0 = now), from start_key on; returns (kvs, revision, more).
        `serializable` answers from the member's own state instead of the leader's (tests: did it catch up)."""
        pfx = prefix.encode()
        request = rpc.RangeRequest(key=start_key.encode() if start_key else pfx, range_end=prefix_end(pfx),
                                   revision=revision, limit=limit, serializable=serializable)
        resp = await self._call(self.kv.Range, request)
        return [_kv(kv) for kv in resp.kvs], resp.header.revision, resp.more

    async def count(self, prefix: str) -> int:
        pfx = prefix.encode()
        resp = await self._call(self.kv.Range, rpc.RangeRequest(key=pfx, range_end=prefix_end(pfx), count_only=True))
        return resp.count

    async def create(self, key: str, value: bytes) -> int:
        """Write a new key; KeyExists if it is there. Returns the write's revision."""
        k = key.encode()
        txn = rpc.TxnRequest(
            compare=[rpc.Compare(key=k, target=rpc.Compare.VERSION, result=rpc.Compare.EQUAL, version=0)],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=value))],
        )
        resp = await self._call(self.kv.Txn, txn)
        if not resp.succeeded:
            raise KeyExists(key)
        return resp.header.revision

    async def update(self, key: str, value: bytes, mod_revision: int) -> int:
        """Replace a key only if its mod revision is still `mod_revision` (compare-and-swap)."""
        op = rpc.RequestOp(request_put=rpc.PutRequest(key=key.encode(), value=value))
        return await self._if_unchanged(key, mod_revision, op)

    async def delete(self, key: str, mod_revision: int) -> int:
        """Delete a key only if its mod revision is still `mod_revision`. Returns the deletion revision."""
        op = rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key.encode()))
        return await self._if_unchanged(key, mod_revision, op)

    async def _if_unchanged(self, key: str, mod_revision: int, op: rpc.RequestOp) -> int:
        """Run op in one transaction with the check that nobody wrote the key since mod_revision;
        on a lost race, KeyNotFound or RevisionConflict with what is there now."""
        k = key.encode()
        txn = rpc.TxnRequest(
            compare=[rpc.Compare(key=k, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=mod_revision)],
            success=[op],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=k))],
        )
        resp = await self._call(self.kv.Txn, txn)
        if not resp.succeeded:
            kvs = resp.responses[0].response_range.kvs
            if not kvs:
                raise KeyNotFound(key)
            raise RevisionConflict(_kv(kvs[0]))
        return resp.header.revision

    async def compact(self, revision: int) -> None:
        await self._call(self.kv.Compact, rpc.CompactionRequest(revision=revision, physical=True))

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[tuple[list[EtcdEvent], int]]:
        """Events under prefix from start_revision on (inclusive), batch by batch, prev_kv included,
        each batch with the revision etcd has reached (an empty batch is a progress notification).

        Raises Compacted when start_revision is gone, Unavailable when the stream breaks.
        """
        pfx = prefix.encode()
        create = rpc.WatchCreateRequest(key=pfx, range_end=prefix_end(pfx), start_revision=start_revision,
                                        prev_kv=True, progress_notify=True)
        stop = asyncio.Event()

        async def requests() -> AsyncIterator[rpc.WatchRequest]:
            yield rpc.WatchRequest(create_request=create)
            await stop.wait()

        call = self.watch_stub.Watch(requests())
        try:
            async for resp in call:
                if resp.compact_revision:
                    raise Compacted(resp.compact_revision)
                if resp.canceled:
                    raise Unavailable(f"etcd cancelled the watch: {resp.cancel_reason}")
                batch = []
                for ev in resp.events:
                    prev = _kv(ev.prev_kv) if ev.HasField("prev_kv") else None
                    if ev.type == rpc.Event.DELETE:
                        batch.append(EtcdEvent("DELETE", KV(ev.kv.key.decode(), b"", ev.kv.mod_revision, 0), prev))
                    else:
                        batch.append(EtcdEvent("PUT", _kv(ev.kv), prev))
                yield batch, resp.header.revision
            raise Unavailable("etcd closed the watch stream")
        except grpc.aio.AioRpcError as e:
            raise Unavailable(f"etcd watch failed: {e.code().name}: {e.details()}") from e
        finally:
            stop.set()
            call.cancel()
            with contextlib.suppress(Exception):
                await asyncio.sleep(0)
