"""The apiserver's only door to etcd (upstream: staging/.../apiserver/pkg/storage/etcd3/store.go).

Keys are `/registry/{resource}/{namespace}/{name}`; values are the object's JSON, passed through the
resource's value transformer (encryption at rest, storage/value/) on the way in and out, as upstream's
store does with its transformer: every read path (get, list, the watch cache's list and watch) gets
plaintext. Every write is a compare-and-swap on the key's mod revision in one etcd transaction, so a
stale writer loses.
We speak gRPC through the stubs that ship with aetcd: its high-level calls lack ranges at a
revision, limits and prev_kv on watches, all of which the apiserver needs.

Members and failures (upstream: etcd's clientv3 balancer and retry interceptor): one gRPC channel per
member of --etcd-servers, plain or TLS (https://, with --etcd-cafile/--etcd-certfile/--etcd-keyfile
against etcd's --client-cert-auth). A call that fails the way calls fail around a leader loss
(unavailable, no leader, leader changed, timed out, connection gone) is retried on the next member
until the request's budget is spent; a call that hangs is given up once its member says it has lost
or changed its leader (its proposal went to a dead leader, and etcd would hold it for 5 s + two
election timeouts). A transaction retried after an attempt whose answer was lost is judged by the
key's history, so it is never applied twice: a create by the key's first value, a compare-and-swap
by the key's first change after the revision it was made against.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import logging
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import grpc
from aetcd import rpc

from apiserver.storage.value import IDENTITY, Transformer, TransformError
from machinery import tracing

log = logging.getLogger(__name__)

_REQUEST_TIMEOUT = 10.0  # one request's budget, over all its attempts and members
# the etcd calls a request span gets an apiserver.etcd step for (the contract's k8s.etcd.op)
_TRACED_OPS = {"Range": "range", "Txn": "txn", "Put": "put", "DeleteRange": "delete"}
_READY_TIMEOUT = 2.0  # /readyz answers within this
_STALL_PROBE = 0.1  # a call slower than this asks its member whether its leader is still there
_BACKOFF_MAX = 0.1  # between rounds over all members: short, as an election takes about a second
_PROBE_TIMEOUT = 1.0
# etcd's rpctypes.MetadataRequireLeaderKey: a member without a leader refuses at once ("no leader")
# instead of queueing the request; on a watch, it cancels the stream when it has had no leader for a while
_REQUIRE_LEADER = (("hasleader", "true"),)


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


class TransformFailed(StorageError):
    """A stored value its resource's transformer cannot read (a key removed from the encryption config,
    corrupt data): upstream answers 500 InternalError."""

    def __init__(self, key: str, error: Exception):
        super().__init__(f"unable to transform key {key!r}: {error}")
        self.key = key


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


class EtcdTLS:
    """The client side of etcd's TLS (upstream: --etcd-cafile, --etcd-certfile, --etcd-keyfile): the CA
    that signed the members' serving certificates and the client certificate etcd's
    `--client-cert-auth` asks for. Read once, when the first channel opens."""

    def __init__(self, ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None):
        if bool(cert_file) != bool(key_file):
            raise ValueError("--etcd-certfile and --etcd-keyfile go together")
        self.ca_file, self.cert_file, self.key_file = ca_file, cert_file, key_file

    def check(self) -> None:
        """Fail now, not at the first request, when a file is unreadable or not PEM."""
        for path in (self.ca_file, self.cert_file, self.key_file):
            if path and b"-----BEGIN" not in Path(path).read_bytes():
                raise ValueError(f"{path}: not a PEM file")

    def credentials(self) -> grpc.ChannelCredentials:
        def read(path: str | None) -> bytes | None:
            return Path(path).read_bytes() if path else None

        return grpc.ssl_channel_credentials(read(self.ca_file), read(self.key_file), read(self.cert_file))


class _Member:
    """One etcd member's channel (opened on first use: grpc.aio binds it to the running event loop).
    A channel per member, not one over all: the client chooses where a retry goes, and each member's
    serving certificate is checked against the name it is reached by."""

    def __init__(self, endpoint: str, tls: EtcdTLS | None):
        url = urlparse(endpoint if "://" in endpoint else f"http://{endpoint}")
        if url.scheme not in ("http", "https"):
            raise ValueError(f"etcd endpoint {endpoint}: the scheme must be http or https")
        self.endpoint = endpoint
        self.target = f"{url.hostname}:{url.port or 2379}"
        self.secure = url.scheme == "https"
        self.tls = tls or EtcdTLS()
        self.channel: grpc.aio.Channel | None = None
        # calls in flight: when each started, and the (leader, term) its member had at the last check
        self.inflight: dict[grpc.aio.Call, list[Any]] = {}
        self.stalled: set[grpc.aio.Call] = set()
        self._watchdog: asyncio.Task[None] | None = None

    def open(self) -> grpc.aio.Channel:
        if self.channel is None:
            options = [("grpc.max_receive_message_length", 256 * 1024 * 1024),
                       ("grpc.keepalive_time_ms", 10_000), ("grpc.keepalive_timeout_ms", 5_000),
                       ("grpc.initial_reconnect_backoff_ms", 200), ("grpc.max_reconnect_backoff_ms", 2_000)]
            if self.secure:
                self.channel = grpc.aio.secure_channel(self.target, self.tls.credentials(), options=options)
            else:
                self.channel = grpc.aio.insecure_channel(self.target, options=options)
            self.kv = rpc.KVStub(self.channel)
            self.watch = rpc.WatchStub(self.channel)
            self.maintenance = rpc.MaintenanceStub(self.channel)
            self.lease = rpc.LeaseStub(self.channel)
        return self.channel

    def track(self, call: grpc.aio.Call, now: float) -> None:
        """`now`: the loop's time."""
        self.inflight[call] = [now, None]
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.ensure_future(self._watch_inflight())

    def untrack(self, call: grpc.aio.Call) -> bool:
        """Forget the call; True if the watchdog gave it up as stalled."""
        self.inflight.pop(call, None)
        if call in self.stalled:
            self.stalled.discard(call)
            return True
        return False

    async def _watch_inflight(self) -> None:
        """While calls are in flight: every probe interval, the ones older than it are checked against this
        member's leader (one Status call for all of them); a call whose member has no leader now, or another
        one than at the last check, waits on what a dead leader dropped: it is cancelled as stalled. One
        task per member, not a timer per call, keeps the healthy path cheap."""
        loop = asyncio.get_running_loop()
        while self.inflight:
            await asyncio.sleep(_STALL_PROBE)
            now = loop.time()
            slow = [(call, state) for call, state in self.inflight.items() if now - state[0] >= _STALL_PROBE]
            if not slow:
                continue
            leader = await self._status()
            for call, state in slow:
                if call not in self.inflight:
                    continue
                if leader is None or (state[1] is not None and state[1] != leader):
                    self.stalled.add(call)
                    call.cancel()
                else:
                    state[1] = leader

    async def _status(self) -> tuple[int, int] | None:
        try:
            resp = await self.maintenance.Status(rpc.StatusRequest(), timeout=_PROBE_TIMEOUT)
        except grpc.aio.AioRpcError:
            return None
        return (resp.leader, resp.raftTerm) if resp.leader else None

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self.channel is not None:
            await self.channel.close()
            self.channel = None


class _Stalled(Exception):
    """A call whose member lost (or changed) its leader while the call waited: its proposal went to a
    leader that is gone, and would wait out etcd's request timeout (5 s + 2 election timeouts)."""


def _retryable(e: grpc.aio.AioRpcError) -> bool:
    return e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                        grpc.StatusCode.CANCELLED)


def _never_sent(e: grpc.aio.AioRpcError) -> bool:
    """Errors after which the request surely did not reach raft: the member refused it up front (no
    leader) or there was no connection to send it on. Every other retryable error may hide a write
    that was applied."""
    details = e.details() or ""
    return "no leader" in details or "failed to connect" in details.lower()


class EtcdStorage:
    def __init__(self, endpoints: list[str], tls: EtcdTLS | None = None, *, retry: bool = True):
        """`retry=False` is the old client (one attempt, on one member, up to the request timeout): kept for
        the failover benchmark's baseline."""
        self.endpoints = endpoints
        self._members = [_Member(e, tls) for e in endpoints]
        if len({m.secure for m in self._members}) > 1:
            raise ValueError("--etcd-servers: mixes http:// and https:// endpoints")
        self._active = 0
        self._retry = retry
        self.transformer: Transformer = IDENTITY

    def with_transformer(self, transformer: Transformer) -> EtcdStorage:
        """The same members and connections, with values passed through `transformer` (one resource's
        view of the storage, as upstream gives each resource its own transformer)."""
        view = copy.copy(self)
        view.transformer = transformer
        return view

    def _to_storage(self, key: str, value: bytes) -> bytes:
        return self.transformer.transform_to_storage(value, key.encode())

    def _from_storage(self, kv: KV) -> KV:
        if self.transformer is IDENTITY:
            return kv
        try:
            plaintext, _ = self.transformer.transform_from_storage(kv.value, kv.key.encode())
        except (TransformError, ValueError) as e:
            raise TransformFailed(kv.key, e) from e
        return KV(kv.key, plaintext, kv.mod_revision, kv.create_revision)

    def _member(self) -> _Member:
        member = self._members[self._active]
        member.open()
        return member

    def _failed(self, member: _Member) -> None:
        """Move on from a member that failed a call (a later call goes to the next one), as etcd's client
        balancer does; other calls failing on the same member at once move only once."""
        if self._members[self._active] is member:
            self._active = (self._active + 1) % len(self._members)
            if len(self._members) > 1:
                log.info("etcd: %s failed; moving to %s", member.endpoint, self._members[self._active].endpoint)

    async def close(self) -> None:
        for member in self._members:
            await member.close()

    async def _call(self, service: str, method: str, request: Any, *,
                    budget: float = _REQUEST_TIMEOUT) -> tuple[Any, bool]:
        if tracing.TRACER is not None and method in _TRACED_OPS:  # --tracing-config-file
            parent = tracing.step_span()
            if parent is not None:  # within a sampled request: an apiserver.etcd step of it
                return await self._traced_call(parent, service, method, request, budget)
        return await self._call_etcd(service, method, request, budget=budget)

    async def _traced_call(self, parent: Any, service: str, method: str, request: Any,
                           budget: float) -> tuple[Any, bool]:
        op = _TRACED_OPS[method]
        if op == "range" and not request.range_end:
            op = "get"
        start = time.time_ns()
        try:
            resp, ambiguous = await self._call_etcd(service, method, request, budget=budget)
        except Exception as e:
            tracing.record_step("apiserver.etcd", start, time.time_ns(),
                                {"k8s.etcd.op": op, "error.type": type(e).__name__}, on=parent)
            raise
        revision = int(resp.header.revision)
        tracing.record_step("apiserver.etcd", start, time.time_ns(), {"k8s.etcd.op": op, "k8s.etcd.revision": revision},
                            on=parent)
        if op in ("put", "delete") or (op == "txn" and resp.succeeded and any(
                o.HasField("request_put") or o.HasField("request_delete_range") for o in request.success)):
            parent.set_attribute("k8s.etcd.revision", revision)  # the request's write
        return resp, ambiguous

    async def _call_etcd(self, service: str, method: str, request: Any, *,
                         budget: float = _REQUEST_TIMEOUT) -> tuple[Any, bool]:
        """One request, retried on another member while etcd answers what it answers around a leader loss
        (unavailable, no leader, leader changed, request timed out, a dead connection) or while it hangs on
        a leader that is gone, within `budget` seconds. Returns (response, ambiguous): ambiguous when an
        earlier attempt may have been applied although its answer was lost (the caller of a transaction
        then finds out whether it was)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        ambiguous = False
        rounds = 0
        tried = 0
        while True:
            member = self._member()
            try:
                return await self._attempt(member, service, method, request, deadline, loop), ambiguous
            except _Stalled as e:
                error: Exception = e
                ambiguous = True
            except grpc.aio.AioRpcError as e:
                if e.code() == grpc.StatusCode.OUT_OF_RANGE or "compacted" in (e.details() or ""):
                    raise Compacted(0) from e
                if not _retryable(e):
                    raise StorageError(f"etcd: {e.code().name}: {e.details()}") from e
                error = e
                ambiguous = ambiguous or not _never_sent(e)
            self._failed(member)
            if not self._retry or loop.time() >= deadline:
                if isinstance(error, grpc.aio.AioRpcError):
                    raise Unavailable(f"etcd unavailable: {error.details()}") from error
                raise Unavailable(f"etcd unavailable: {error}") from error
            log.debug("etcd %s.%s on %s: %s; retrying", service, method, member.endpoint, error)
            tried += 1
            if tried % len(self._members) == 0:  # every member tried once: wait a little, then again
                rounds += 1
                pause = min(0.0125 * 2**rounds, _BACKOFF_MAX) * random.uniform(0.5, 1.0)
                await asyncio.sleep(min(pause, max(deadline - loop.time(), 0)))

    async def _attempt(self, member: _Member, service: str, method: str, request: Any, deadline: float,
                       loop: asyncio.AbstractEventLoop) -> Any:
        """One call on one member. A call that takes long is checked by the member's watchdog, which gives it
        up when the member no longer follows the same leader (it waits on a proposal or a read index that a
        dead leader dropped); it is then retried elsewhere. `loop`: the running loop (each asking for it is a
        getpid(2) on Python 3.11)."""
        stub = getattr(member, service)
        now = loop.time()
        timeout = max(deadline - now, 0.001)
        if not self._retry:  # the old client: one call that waits as long as etcd makes it
            return await getattr(stub, method)(request, timeout=timeout)
        # a serializable read is the member's own view: it needs no leader
        metadata = () if getattr(request, "serializable", False) else _REQUIRE_LEADER
        call = getattr(stub, method)(request, timeout=timeout, metadata=metadata)
        member.track(call, now)
        try:
            return await call
        except asyncio.CancelledError:
            if member.untrack(call):  # the watchdog's doing, not our caller's
                raise _Stalled(f"{member.endpoint} lost its leader while a {method} waited") from None
            raise
        finally:
            member.untrack(call)

    async def _range(self, request: rpc.RangeRequest, budget: float = _REQUEST_TIMEOUT) -> rpc.RangeResponse:
        resp, _ = await self._call("kv", "Range", request, budget=budget)
        return resp

    async def ready(self) -> bool:
        try:
            await self._range(rpc.RangeRequest(key=b"\0", count_only=True, limit=1), _READY_TIMEOUT)
        except StorageError:
            return False
        return True

    async def current_revision(self) -> int:
        resp = await self._range(rpc.RangeRequest(key=b"\0", count_only=True, limit=1))
        return resp.header.revision

    async def get(self, key: str, *, revision: int = 0) -> KV | None:
        kv = await self._get_stored(key, revision=revision)
        return self._from_storage(kv) if kv is not None else None

    async def _get_stored(self, key: str, *, revision: int = 0) -> KV | None:
        """The key's value as etcd holds it (not transformed)."""
        resp = await self._range(rpc.RangeRequest(key=key.encode(), revision=revision))
        return _kv(resp.kvs[0]) if resp.kvs else None

    async def get_with_revision(self, key: str) -> tuple[KV | None, int]:
        """The key now and the revision this read saw (etcd's header), from one request: what a list
        of one name answers, so that a watch from that revision misses no later write."""
        resp = await self._range(rpc.RangeRequest(key=key.encode()))
        return (self._from_storage(_kv(resp.kvs[0])) if resp.kvs else None), resp.header.revision

    async def list(self, prefix: str, *, revision: int = 0, limit: int = 0, start_key: str | None = None,
                   serializable: bool = False, skip_untransformable: bool = False) -> tuple[list[KV], int, bool]:
        """Keys under prefix at `revision` (0 = now), from start_key on; returns (kvs, revision, more).
        `serializable` answers from the member's own state instead of the leader's (tests: did it catch up).
        `skip_untransformable` leaves out (and logs) values the transformer cannot read, instead of failing
        the whole list: the watch cache of a resource stays up when one object's key is gone."""
        pfx = prefix.encode()
        resp = await self._range(rpc.RangeRequest(key=start_key.encode() if start_key else pfx,
                                                  range_end=prefix_end(pfx), revision=revision, limit=limit,
                                                  serializable=serializable))
        if not skip_untransformable:
            return [self._from_storage(_kv(kv)) for kv in resp.kvs], resp.header.revision, resp.more
        readable = [kv for kv in (self._readable(_kv(kv)) for kv in resp.kvs) if kv is not None]
        return readable, resp.header.revision, resp.more

    def _readable(self, kv: KV) -> KV | None:
        try:
            return self._from_storage(kv)
        except TransformFailed as e:
            log.error("%s", e)
            return None

    async def count(self, prefix: str) -> int:
        pfx = prefix.encode()
        resp = await self._range(rpc.RangeRequest(key=pfx, range_end=prefix_end(pfx), count_only=True))
        return resp.count

    async def create(self, key: str, value: bytes) -> int:
        """Write a new key; KeyExists if it is there. Returns the write's revision."""
        k = key.encode()
        value = self._to_storage(key, value)
        txn = rpc.TxnRequest(
            compare=[rpc.Compare(key=k, target=rpc.Compare.VERSION, result=rpc.Compare.EQUAL, version=0)],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=value))],
        )
        resp, ambiguous = await self._call("kv", "Txn", txn)
        if resp.succeeded:
            return resp.header.revision
        if ambiguous and (revision := await self._created_by(key, value)):
            return revision
        raise KeyExists(key)

    async def _created_by(self, key: str, value: bytes) -> int:
        """After a create whose first attempt's answer was lost: did that attempt create the key? Yes if the
        key's first version is this very value (a new object's uid and timestamp make it unique); returns
        its revision, else 0."""
        current = await self._get_stored(key)
        if current is None:
            return 0
        try:
            first = await self._get_stored(key, revision=current.create_revision)
        except Compacted:
            first = current if current.mod_revision == current.create_revision else None
        return first.create_revision if first is not None and first.value == value else 0

    async def put_with_ttl(self, key: str, value: bytes, ttl: int) -> int:
        """Write a key that etcd removes by itself unless written again within ttl seconds (a fresh lease
        each time, as upstream's masterleases). Returns the write's revision."""
        grant, _ = await self._call("lease", "LeaseGrant", rpc.LeaseGrantRequest(TTL=ttl))
        resp, _ = await self._call("kv", "Put", rpc.PutRequest(key=key.encode(), value=value, lease=grant.ID))
        return int(resp.header.revision)

    async def update(self, key: str, value: bytes, mod_revision: int) -> int:
        """Replace a key only if its mod revision is still `mod_revision` (compare-and-swap)."""
        value = self._to_storage(key, value)
        op = rpc.RequestOp(request_put=rpc.PutRequest(key=key.encode(), value=value))
        return await self._if_unchanged(key, mod_revision, op, value)

    async def delete(self, key: str, mod_revision: int) -> int:
        """Delete a key only if its mod revision is still `mod_revision`. Returns the deletion revision."""
        op = rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key.encode()))
        return await self._if_unchanged(key, mod_revision, op, None)

    async def _if_unchanged(self, key: str, mod_revision: int, op: rpc.RequestOp, value: bytes | None) -> int:
        """Run op in one transaction with the check that nobody wrote the key since mod_revision;
        on a lost race, KeyNotFound or RevisionConflict with what is there now."""
        k = key.encode()
        txn = rpc.TxnRequest(
            compare=[rpc.Compare(key=k, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=mod_revision)],
            success=[op],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=k))],
        )
        resp, ambiguous = await self._call("kv", "Txn", txn)
        if resp.succeeded:
            return resp.header.revision
        if ambiguous and (revision := await self._written_by(key, mod_revision, value)):
            return revision
        kvs = resp.responses[0].response_range.kvs
        if not kvs:
            raise KeyNotFound(key)
        raise RevisionConflict(self._from_storage(_kv(kvs[0])))

    async def _written_by(self, key: str, mod_revision: int, value: bytes | None) -> int:
        """After a compare-and-swap whose first attempt's answer was lost and whose retry found the key
        changed: was that change the first attempt? Only a write made while the key was still at
        mod_revision can be it, so it is the key's first change after mod_revision: the same put (value)
        or a delete (None). Returns its revision, else 0 (someone else wrote first: a real conflict)."""
        try:
            change = await asyncio.wait_for(self._first_change(key, mod_revision + 1), _REQUEST_TIMEOUT)
        except Compacted:  # history gone (not within seconds of the write, in practice): judge by now
            current = await self._get_stored(key)
            if value is None:
                return 0
            return current.mod_revision if current is not None and current.value == value else 0
        except (TimeoutError, StorageError):
            return 0
        if change.type == "DELETE":
            return change.kv.mod_revision if value is None else 0
        return change.kv.mod_revision if value is not None and change.kv.value == value else 0

    def _readable_event(self, ev: EtcdEvent) -> EtcdEvent:
        prev = self._readable(ev.prev) if ev.prev is not None else None
        if ev.type != "PUT":
            return EtcdEvent(ev.type, ev.kv, prev)
        kv = self._readable(ev.kv)
        if kv is None:
            return EtcdEvent("DELETE", KV(ev.kv.key, b"", ev.kv.mod_revision, 0), prev)
        return EtcdEvent("PUT", kv, prev)

    async def _first_change(self, key: str, start_revision: int) -> EtcdEvent:
        async for batch, _ in self._watch(key.encode(), b"", start_revision):
            if batch:
                return batch[0]
        raise Unavailable("etcd closed the watch stream")

    async def compact(self, revision: int) -> None:
        await self._call("kv", "Compact", rpc.CompactionRequest(revision=revision, physical=True))

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[tuple[builtins.list[EtcdEvent], int]]:
        """Events under prefix from start_revision on (inclusive), batch by batch, prev_kv included,
        each batch with the revision etcd has reached (an empty batch is a progress notification).
        A value the transformer cannot read is logged and comes as a DELETE (its prev, too, unreadable: None):
        for a watcher the object is gone, as it is for the watch cache's list.

        Raises Compacted when start_revision is gone, Unavailable when the stream breaks (the next watch
        goes to another member); the caller resumes from the last revision it has.
        """
        pfx = prefix.encode()
        async for batch, revision in self._watch(pfx, prefix_end(pfx), start_revision):
            if self.transformer is not IDENTITY:
                batch = [self._readable_event(ev) for ev in batch]
            yield batch, revision

    async def _watch(self, key: bytes, range_end: bytes,
                     start_revision: int) -> AsyncIterator[tuple[builtins.list[EtcdEvent], int]]:
        create = rpc.WatchCreateRequest(key=key, range_end=range_end, start_revision=start_revision,
                                        prev_kv=True, progress_notify=True)
        stop = asyncio.Event()

        async def requests() -> AsyncIterator[rpc.WatchRequest]:
            yield rpc.WatchRequest(create_request=create)
            await stop.wait()

        member = self._member()
        # as upstream's apiserver (clientv3.WithRequireLeader): a member cut off from its cluster ends the
        # watch instead of keeping it open with nothing to say
        call = member.watch.Watch(requests(), metadata=_REQUIRE_LEADER)
        try:
            async for resp in call:
                if resp.compact_revision:
                    raise Compacted(resp.compact_revision)
                if resp.canceled:
                    self._failed(member)
                    raise Unavailable(f"etcd cancelled the watch: {resp.cancel_reason}")
                if resp.created:  # its revision is etcd's now, not how far the events below have come
                    continue
                batch = []
                for ev in resp.events:
                    prev = _kv(ev.prev_kv) if ev.HasField("prev_kv") else None
                    if ev.type == rpc.Event.DELETE:
                        batch.append(EtcdEvent("DELETE", KV(ev.kv.key.decode(), b"", ev.kv.mod_revision, 0), prev))
                    else:
                        batch.append(EtcdEvent("PUT", _kv(ev.kv), prev))
                yield batch, resp.header.revision
            self._failed(member)
            raise Unavailable("etcd closed the watch stream")
        except grpc.aio.AioRpcError as e:
            self._failed(member)
            raise Unavailable(f"etcd watch failed: {e.code().name}: {e.details()}") from e
        finally:
            stop.set()
            call.cancel()
            with contextlib.suppress(Exception):
                await asyncio.sleep(0)
