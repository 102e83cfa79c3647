"""Service ClusterIP and NodePort allocation, kept in etcd as upstream's RangeAllocation bitmaps
(upstream: pkg/registry/core/service/allocator/bitmap.go, allocator/storage/storage.go,
ipallocator/bitmap.go, portallocator/allocator.go).

Why the bitmap and not IPAddress objects: one etcd key per range (/registry/ranges/serviceips,
/registry/ranges/servicenodeports) holds the whole truth, every change is one compare-and-swap on
it, so two apiservers on one etcd can never hand out one IP or port twice, and the same mechanism
serves both ranges (upstream's IPAddress objects cover IPs only; NodePorts are bitmaps there too).

The value is upstream's RangeAllocation: `{"range": "10.96.0.0/12", "data": <base64 of the bitmap
as a big-endian integer, bit i = the i-th item>}`. Dynamic picks start at a random place in the
upper band of the range (past `offset`), so the lower band stays free for static picks such as
10.96.0.10 for cluster DNS (upstream's randomScanStrategyWithOffset).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson

from apiserver.storage.etcd import EtcdStorage, KeyExists, KeyNotFound, RevisionConflict

SERVICE_IPS_KEY = "/registry/ranges/serviceips"
SERVICE_NODE_PORTS_KEY = "/registry/ranges/servicenodeports"
_CAS_ATTEMPTS = 200

T = TypeVar("T")


class AllocationError(Exception):
    """An item could not be had; the message is upstream's."""


class AlreadyAllocated(AllocationError):
    pass


class NotInRange(AllocationError):
    pass


class RangeFull(AllocationError):
    def __init__(self) -> None:
        super().__init__("range is full")


def range_offset(size: int, step: int, max_offset: int) -> int:
    """calculateRangeOffset: the size of the lower band kept for static picks: size/step, at least 16
    and at most max_offset (256 for IPs, 128 for ports); nothing for ranges under 16."""
    if size < 16:
        return 0
    return min(max(16, size // step), max_offset)


class Bitmap:
    """AllocationBitmap: `size` items, a set bit is an allocated item."""

    def __init__(self, size: int, offset: int = 0, bits: int = 0) -> None:
        self.size, self.offset, self.bits = size, offset, bits

    def has(self, item: int) -> bool:
        return bool(self.bits >> item & 1)

    def allocate(self, item: int) -> bool:
        if self.has(item):
            return False
        self.bits |= 1 << item
        return True

    def release(self, item: int) -> None:
        self.bits &= ~(1 << item)

    def free(self) -> int:
        return self.size - self.bits.bit_count()

    def allocate_next(self, rng: random.Random) -> int | None:
        """A free item: from a random start in the upper band, then (if that is full) the lower band."""
        for low, high in ((self.offset, self.size), (0, self.offset)):
            if high <= low:
                continue
            start = rng.randrange(low, high)
            for item in itertools.chain(range(start, high), range(low, start)):
                if not self.has(item):
                    self.bits |= 1 << item
                    return item
        return None

    def items(self) -> list[int]:
        # through the binary string: shifting a 2^20-bit integer once per item would be quadratic
        return [i for i, bit in enumerate(reversed(bin(self.bits)[2:])) if bit == "1"]

    def snapshot(self) -> bytes:
        """big.Int.Bytes(): big-endian, no leading zeros."""
        return self.bits.to_bytes((self.bits.bit_length() + 7) // 8, "big")


class EtcdRange:
    """A bitmap in one etcd key, changed only by compare-and-swap (allocator/storage Etcd). One lock per
    process keeps this apiserver's own writers from racing each other; CAS guards against the others."""

    def __init__(self, storage: EtcdStorage, key: str, spec: str, size: int, offset: int) -> None:
        self.storage, self.key, self.spec, self.size, self.offset = storage, key, spec, size, offset
        self._lock = asyncio.Lock()
        self._pending: list[_Pending[Any]] = []
        self._rng = random.Random()

    def _encode(self, bitmap: Bitmap) -> bytes:
        return orjson.dumps({"apiVersion": "v1", "kind": "RangeAllocation", "metadata": {},
                             "range": self.spec, "data": base64.b64encode(bitmap.snapshot()).decode()})

    def _decode(self, value: bytes) -> Bitmap:
        stored = orjson.loads(value)
        if stored.get("range") != self.spec:
            # upstream refuses to run on a range it was not configured for (the repair loop moves it)
            raise AllocationError(f"the stored range {stored.get('range')} is not the configured range {self.spec}")
        bits = int.from_bytes(base64.b64decode(stored.get("data") or ""), "big")
        return Bitmap(self.size, self.offset, bits & ((1 << self.size) - 1))

    async def snapshot(self) -> Bitmap:
        kv = await self.storage.get(self.key)
        return Bitmap(self.size, self.offset) if kv is None else self._decode(kv.value)

    async def take(self, item: int, taken: str, dry_run: bool = False) -> None:
        """Allocate `item`; AlreadyAllocated(taken) if it is. A dry run checks and keeps nothing."""
        def take(bitmap: Bitmap) -> None:
            if not bitmap.allocate(item):
                raise AlreadyAllocated(taken)
            if dry_run:
                bitmap.release(item)

        await self.update(take)

    async def take_next(self, dry_run: bool = False) -> int:
        """Allocate a free item at random past the offset (then below it); RangeFull when none is left."""
        def pick(bitmap: Bitmap) -> int:
            item = bitmap.allocate_next(self._rng)
            if item is None:
                raise RangeFull()
            if dry_run:
                bitmap.release(item)
            return item

        return await self.update(pick)

    async def update(self, change: Callable[[Bitmap], T]) -> T:
        """Apply change (which may raise AllocationError) to the stored bitmap. Changes that arrive while
        another is being written wait, and the next writer applies all of them in one read and one
        compare-and-swap (a group commit: 16 concurrent creates cost one etcd write, not 16)."""
        waiter: _Pending[T] = _Pending(change, asyncio.get_running_loop().create_future())
        self._pending.append(waiter)
        try:
            await self._lock.acquire()
        except BaseException:
            if waiter in self._pending:  # cancelled before anyone applied it: it must not be applied later
                self._pending.remove(waiter)
            raise
        try:
            if not waiter.future.done():
                batch, self._pending = self._pending, []
                try:
                    await self._apply(batch)
                except BaseException:
                    # not applied (cancelled, storage down): the others go to whoever holds the lock next
                    self._pending[:0] = [p for p in batch if p is not waiter and not p.future.done()]
                    raise
        finally:
            self._lock.release()
        return waiter.future.result()

    async def _apply(self, batch: list[_Pending[Any]]) -> None:
        for _ in range(_CAS_ATTEMPTS):
            kv = await self.storage.get(self.key)
            bitmap = Bitmap(self.size, self.offset) if kv is None else self._decode(kv.value)
            start = bitmap.bits
            outcomes: list[tuple[bool, Any]] = []
            for pending in batch:
                before = bitmap.bits
                try:
                    outcomes.append((True, pending.change(bitmap)))
                except AllocationError as e:
                    bitmap.bits = before  # this one's refusal leaves the others' changes
                    outcomes.append((False, e))
            if bitmap.bits != start:
                try:
                    if kv is None:
                        await self.storage.create(self.key, self._encode(bitmap))
                    else:
                        await self.storage.update(self.key, self._encode(bitmap), kv.mod_revision)
                except (RevisionConflict, KeyExists, KeyNotFound):
                    await asyncio.sleep(self._rng.uniform(0, 0.005))  # another apiserver wrote: read again
                    continue
            for pending, (ok, outcome) in zip(batch, outcomes, strict=True):
                if ok:
                    pending.future.set_result(outcome)
                else:
                    pending.future.set_exception(outcome)
            return
        raise AllocationError(f"too many concurrent writers of {self.key}")


@dataclass
class _Pending(Generic[T]):
    """A change waiting for its group commit, and where its result goes."""

    change: Callable[[Bitmap], T]
    future: asyncio.Future[T]


class ServiceIPAllocator:
    """ipallocator.Range over --service-cluster-ip-range: neither the network address nor (IPv4) the
    broadcast address is handed out; item 0 is the network address + 1 (10.96.0.1, the `kubernetes`
    Service's)."""

    def __init__(self, storage: EtcdStorage, cidr: str) -> None:
        self.network = ipaddress.ip_network(cidr, strict=False)
        self.family = "IPv4" if self.network.version == 4 else "IPv6"
        if self.network.version == 4:
            size = max(0, self.network.num_addresses - 2)
        else:  # upstream's bitmap covers at most 2^16 addresses of a large IPv6 range
            size = min(self.network.num_addresses - 1, 1 << 16)
        self.base = int(self.network.network_address) + 1
        self.range = EtcdRange(storage, SERVICE_IPS_KEY, str(self.network), size,
                               range_offset(size, 16, 256))

    def ip_at(self, offset: int) -> str:
        return str(ipaddress.ip_address(self.base + offset))

    def offset_of(self, ip: str) -> int:
        address = ipaddress.ip_address(ip)
        offset = int(address) - self.base
        if address.version != self.network.version or not 0 <= offset < self.range.size:
            raise NotInRange(f"provided IP is not in the valid range. The range of valid IPs is {self.network}")
        return offset

    def nth(self, n: int) -> str:
        """The n-th usable address (1: 10.96.0.1)."""
        return self.ip_at(n - 1)

    async def allocate(self, ip: str, dry_run: bool = False) -> None:
        await self.range.take(self.offset_of(ip), "provided IP is already allocated", dry_run)

    async def allocate_next(self, dry_run: bool = False) -> str:
        return self.ip_at(await self.range.take_next(dry_run))

    async def release(self, ip: str) -> None:
        try:
            offset = self.offset_of(ip)
        except (NotInRange, ValueError):
            return  # not ours (the range changed): nothing to free
        await self.range.update(lambda bitmap: bitmap.release(offset))

    async def allocated(self) -> list[str]:
        return [self.ip_at(i) for i in (await self.range.snapshot()).items()]


class NodePortAllocator:
    """portallocator over --service-node-port-range (default 30000-32767)."""

    def __init__(self, storage: EtcdStorage, port_range: str) -> None:
        self.base, self.last = parse_port_range(port_range)
        self.spec = f"{self.base}-{self.last}"
        size = self.last - self.base + 1
        self.range = EtcdRange(storage, SERVICE_NODE_PORTS_KEY, self.spec, size, range_offset(size, 32, 128))

    def _offset_of(self, port: int) -> int:
        if not self.base <= port <= self.last:
            raise NotInRange(f"provided port is not in the valid range. The range of valid ports is {self.spec}")
        return port - self.base

    async def allocate(self, port: int, dry_run: bool = False) -> None:
        await self.range.take(self._offset_of(port), "provided port is already allocated", dry_run)

    async def allocate_next(self, dry_run: bool = False) -> int:
        return self.base + await self.range.take_next(dry_run)

    async def release(self, port: int) -> None:
        if self.base <= port <= self.last:
            await self.range.update(lambda bitmap: bitmap.release(port - self.base))

    async def allocated(self) -> list[int]:
        return [self.base + i for i in (await self.range.snapshot()).items()]


def parse_port_range(value: str) -> tuple[int, int]:
    """utilnet.ParsePortRange: "30000-32767", or "30000+2767", or one port."""
    try:
        if "-" in value:
            low, high = (int(p) for p in value.split("-", 1))
        elif "+" in value:
            low, extra = (int(p) for p in value.split("+", 1))
            high = low + extra
        else:
            low = high = int(value)
    except ValueError:
        raise ValueError(f"unable to parse port range: {value}") from None
    if not 0 <= low <= high <= 65535:
        raise ValueError(f"invalid port range: {value}")
    return low, high
