"""Node IPAM: every Node gets its own pod CIDR (upstream pkg/controller/nodeipam, the RangeAllocator).

The cluster CIDR (10.244.0.0/16 by default) is cut into subnets of the node mask size (/24); each
Node is given a free one, once, in `spec.podCIDR` and `spec.podCIDRs` (the apiserver refuses to
change them afterwards), and its subnet is freed when the Node is deleted. On start the allocator
is rebuilt from the CIDRs the existing Nodes already carry before any new allocation is made, so
a restart never hands out a subnet twice. Several cluster CIDRs (at most one per IP family) give
a dual-stack node one subnet of each.

`CIDRSet` and `RangeAllocator` are pure (no I/O) and unit-tested on their own.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from machinery.api.core_v1 import Node
from machinery.client import KUBE_VERSION, ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import SharedInformerFactory

log = logging.getLogger(__name__)

IDENTITY = "system:serviceaccount:kube-system:node-controller"
USER_AGENT = f"kube-controller-manager/{KUBE_VERSION} (linux/amd64) minik8s/{IDENTITY}"

DEFAULT_CLUSTER_CIDR = "10.244.0.0/16"
DEFAULT_NODE_MASK_IPV4 = 24
DEFAULT_NODE_MASK_IPV6 = 64
MAX_SUBNET_BITS = 16
_RANGE_FULL_RETRY = 30.0  # upstream: at most 2^16 node subnets per cluster CIDR

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class CIDRRangeFull(Exception):
    """No free subnet is left in the cluster CIDR (upstream cidrset.ErrCIDRRangeNoCIDRsRemaining)."""


class CIDROutOfRange(ValueError):
    """A CIDR handed to occupy/release does not lie inside the cluster CIDR."""


# -- the pure allocator -----------------------------------------------------------------------


class CIDRSet:
    """Subnets of one cluster CIDR as a bitmap (upstream pkg/controller/nodeipam/ipam/cidrset).

    `allocate` scans round-robin from the subnet after the last one handed out, so a subnet just
    freed is not given straight back to the next node (a late packet for the old node's pods must
    not reach a new node's pods); `occupy` marks subnets already in use (a CIDR of any size inside
    the cluster CIDR marks every subnet it overlaps).
    """

    def __init__(self, cluster_cidr: str | Network, node_mask_size: int) -> None:
        self.cluster = ipaddress.ip_network(cluster_cidr, strict=True) if isinstance(cluster_cidr, str) \
            else cluster_cidr
        self.node_mask_size = node_mask_size
        if node_mask_size < self.cluster.prefixlen:
            raise ValueError(f"node mask size /{node_mask_size} is larger than the cluster CIDR {self.cluster}")
        if node_mask_size > self.cluster.max_prefixlen:
            raise ValueError(f"node mask size /{node_mask_size} is too long for {self.cluster}")
        if node_mask_size - self.cluster.prefixlen > MAX_SUBNET_BITS:
            raise ValueError(f"cluster CIDR {self.cluster} with node mask /{node_mask_size} makes more than "
                             f"2^{MAX_SUBNET_BITS} subnets; use a longer cluster CIDR or a shorter node mask")
        self.max_cidrs = 1 << (node_mask_size - self.cluster.prefixlen)
        self._shift = self.cluster.max_prefixlen - node_mask_size  # host bits of one subnet
        self._used = bytearray(self.max_cidrs)
        self._allocated = 0
        self._next = 0

    @property
    def allocated(self) -> int:
        return self._allocated

    @property
    def free(self) -> int:
        return self.max_cidrs - self._allocated

    def _subnet(self, index: int) -> Network:
        base = int(self.cluster.network_address) + (index << self._shift)
        return ipaddress.ip_network((base, self.node_mask_size))

    def _indices(self, cidr: str | Network) -> range:
        """The subnet indices a CIDR overlaps; CIDROutOfRange if it is not inside the cluster CIDR."""
        net = ipaddress.ip_network(cidr, strict=False) if isinstance(cidr, str) else cidr
        if net.version != self.cluster.version or not net.subnet_of(self.cluster):  # type: ignore[arg-type]
            raise CIDROutOfRange(f"cidr {net} is out of the range of cluster cidr {self.cluster}")
        offset = int(net.network_address) - int(self.cluster.network_address)
        first = offset >> self._shift
        last = (offset + net.num_addresses - 1) >> self._shift
        return range(first, last + 1)

    def allocate(self) -> Network:
        for i in range(self.max_cidrs):
            index = (self._next + i) % self.max_cidrs
            if not self._used[index]:
                self._used[index] = 1
                self._allocated += 1
                self._next = (index + 1) % self.max_cidrs
                return self._subnet(index)
        raise CIDRRangeFull(f"no remaining CIDRs in {self.cluster} (/{self.node_mask_size} each)")

    def occupy(self, cidr: str | Network) -> None:
        for index in self._indices(cidr):
            if not self._used[index]:
                self._used[index] = 1
                self._allocated += 1

    def release(self, cidr: str | Network) -> None:
        for index in self._indices(cidr):
            if self._used[index]:
                self._used[index] = 0
                self._allocated -= 1

    def is_allocated(self, cidr: str | Network) -> bool:
        return all(self._used[i] for i in self._indices(cidr))


def parse_cluster_cidrs(value: str | Sequence[str]) -> list[Network]:
    """`--cluster-cidr`: one CIDR, or a comma-separated pair of different IP families (dual stack)."""
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else [v.strip() for v in value]
    nets = [ipaddress.ip_network(v, strict=True) for v in items if v]
    if not nets:
        raise ValueError("--cluster-cidr is empty")
    if len(nets) > 2 or len({n.version for n in nets}) != len(nets):
        raise ValueError("--cluster-cidr takes at most one CIDR per IP family")
    return nets


class RangeAllocator:
    """One CIDRSet per cluster CIDR; a node gets one subnet of each (upstream rangeAllocator)."""

    def __init__(self, cluster_cidrs: str | Sequence[str], node_mask_size: int | None = None) -> None:
        nets = parse_cluster_cidrs(cluster_cidrs)
        if node_mask_size is not None and len(nets) > 1:
            raise ValueError("--node-cidr-mask-size is for single-stack clusters; dual stack uses the defaults")
        self.sets = [
            CIDRSet(net, node_mask_size if node_mask_size is not None
                    else DEFAULT_NODE_MASK_IPV4 if net.version == 4 else DEFAULT_NODE_MASK_IPV6)
            for net in nets
        ]

    def _set_for(self, cidr: str) -> CIDRSet:
        net = ipaddress.ip_network(cidr, strict=False)
        for s in self.sets:
            if s.cluster.version == net.version:
                return s
        raise CIDROutOfRange(f"no IPv{net.version} cluster CIDR for {cidr}")

    def allocate(self) -> list[str]:
        """One subnet per cluster CIDR, all or nothing."""
        out: list[Network] = []
        try:
            for s in self.sets:
                out.append(s.allocate())
        except CIDRRangeFull:
            for s, net in zip(self.sets, out, strict=False):
                s.release(net)
            raise
        return [str(n) for n in out]

    def occupy(self, cidrs: Sequence[str]) -> None:
        """Mark a node's existing CIDRs used; all checked before any is marked."""
        pairs = [(self._set_for(c), c) for c in cidrs]
        for s, c in pairs:
            s._indices(ipaddress.ip_network(c, strict=False))  # raises CIDROutOfRange before any change
        for s, c in pairs:
            s.occupy(ipaddress.ip_network(c, strict=False))

    def release(self, cidrs: Sequence[str]) -> None:
        for c in cidrs:
            try:
                self._set_for(c).release(ipaddress.ip_network(c, strict=False))
            except (CIDROutOfRange, ValueError) as e:
                log.warning("not releasing %s: %s", c, e)


# -- the controller ---------------------------------------------------------------------------


@dataclass
class _Allocation:
    uid: str
    cidrs: list[str] = field(default_factory=list)
    foreign: bool = False  # CIDRs outside the cluster CIDR, set by someone else: noted, not managed


def node_cidrs(node: Node) -> list[str]:
    spec = node.spec
    if spec is None:
        return []
    if spec.pod_cidrs:
        return list(spec.pod_cidrs)
    return [spec.pod_cidr] if spec.pod_cidr else []


class NodeIpamController(Controller):
    """Gives every Node a pod CIDR and takes it back when the Node goes."""

    name = "nodeipam"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, *,
                 cluster_cidr: str | Sequence[str] = DEFAULT_CLUSTER_CIDR, node_cidr_mask_size: int | None = None,
                 workers: int = 4) -> None:
        super().__init__(workers=workers)
        self.client = client
        self.allocator = RangeAllocator(cluster_cidr, node_cidr_mask_size)
        self.recorder = EventRecorder(client, "node-controller")
        self.nodes = informers.informer_for(Node)
        self.watch(self.nodes)
        self._by_node: dict[str, _Allocation] = {}  # node name -> what this allocator holds for it

    async def run(self) -> None:
        """Rebuild the allocations from the Nodes that exist before allocating anything new."""
        await self.nodes.wait_for_sync()
        for node in self.nodes.store.list():
            cidrs = node_cidrs(node)
            if cidrs:
                self._occupy(node, cidrs)
        log.info("nodeipam: %d node(s) hold CIDRs; %s", len(self._by_node),
                 ", ".join(f"{s.cluster}: {s.allocated}/{s.max_cidrs} used" for s in self.allocator.sets))
        await super().run()

    def _occupy(self, node: Node, cidrs: list[str]) -> None:
        name = node.metadata.name or ""
        try:
            self.allocator.occupy(cidrs)
        except ValueError as e:  # CIDROutOfRange, or not a CIDR at all
            log.warning("nodeipam: node %s has pod CIDRs %s this allocator does not manage: %s", name, cidrs, e)
            self._by_node[name] = _Allocation(node.metadata.uid or "", list(cidrs), foreign=True)
            return
        self._by_node[name] = _Allocation(node.metadata.uid or "", list(cidrs))

    def _release(self, name: str) -> None:
        held = self._by_node.pop(name, None)
        if held is not None and not held.foreign:
            self.allocator.release(held.cidrs)
            log.info("nodeipam: released %s of node %s", ",".join(held.cidrs), name)
            for node in self.nodes.store.list():  # nodes waiting for a free subnet need not wait for back-off
                if node.metadata.name and node.metadata.name not in self._by_node and not node_cidrs(node):
                    self.queue.add(node.metadata.name)

    async def reconcile(self, key: str) -> float | None:
        node = self.nodes.store.get(key)
        held = self._by_node.get(key)
        if node is None:
            self._release(key)
            return None
        uid = node.metadata.uid or ""
        if held is not None and held.uid != uid:  # deleted and created again under the same name
            self._release(key)
            held = None
        cidrs = node_cidrs(node)
        if cidrs:
            if held is None or held.cidrs != cidrs:
                self._release(key)
                self._occupy(node, cidrs)
            return None
        if held is None:  # a new node: hand out a subnet (the patch below may be retried with the same one)
            try:
                allocated = self.allocator.allocate()
            except CIDRRangeFull as e:
                self.recorder.event(node, "Normal", "CIDRNotAvailable", f"Node {key} status is now: CIDRNotAvailable")
                log.warning("nodeipam: cannot allocate a pod CIDR for node %s: %s", key, e)
                return _RANGE_FULL_RETRY  # sooner when a node is deleted: _release queues the waiting nodes
            held = self._by_node[key] = _Allocation(uid, allocated)
        patch = [  # the uid test keeps a node deleted and created again meanwhile from getting this subnet
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "add", "path": "/spec/podCIDR", "value": held.cidrs[0]},
            {"op": "add", "path": "/spec/podCIDRs", "value": held.cidrs},
        ]
        try:
            await self.client.patch(Node, key, patch, "json")
        except ApiError as e:
            if e.is_not_found:
                self._release(key)
                return None
            if e.is_invalid or e.is_conflict:
                # someone else set the CIDRs first (they are set-once); give ours back, the update event tells us theirs
                self._release(key)
            raise
        log.info("nodeipam: node %s gets pod CIDR %s", key, ",".join(held.cidrs))
        return None
