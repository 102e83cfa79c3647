"""The node IPAM allocator on its own: subnets of the cluster CIDR handed out, occupied, released."""

from __future__ import annotations

import ipaddress

import pytest

from controllers.node_ipam import CIDROutOfRange, CIDRRangeFull, CIDRSet, RangeAllocator, parse_cluster_cidrs


def test_default_cluster_hands_out_slash_24s_in_order() -> None:
    s = CIDRSet("10.244.0.0/16", 24)
    assert s.max_cidrs == 256
    got = [str(s.allocate()) for _ in range(3)]
    assert got == ["10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"]
    assert s.allocated == 3 and s.free == 253


def test_every_subnet_once_then_full() -> None:
    s = CIDRSet("10.244.0.0/16", 24)
    seen = {s.allocate() for _ in range(256)}
    assert len(seen) == 256
    assert all(n.prefixlen == 24 and n.subnet_of(ipaddress.ip_network("10.244.0.0/16")) for n in seen)
    with pytest.raises(CIDRRangeFull):
        s.allocate()


def test_released_subnet_is_reused_only_after_the_others() -> None:
    """Round-robin from the last allocation, as upstream's cidrset: a freed subnet is not handed
    straight to the next node."""
    s = CIDRSet("10.0.0.0/22", 24)  # 4 subnets
    a, b, c = s.allocate(), s.allocate(), s.allocate()
    s.release(a)
    assert s.allocate() == ipaddress.ip_network("10.0.3.0/24")
    assert s.allocate() == a  # the only one left
    with pytest.raises(CIDRRangeFull):
        s.allocate()
    s.release(b)
    assert s.allocate() == b
    assert c in {ipaddress.ip_network(f"10.0.{i}.0/24") for i in range(4)}


def test_occupy_marks_existing_allocations_so_a_restart_never_hands_them_out() -> None:
    existing = ["10.244.0.0/24", "10.244.1.0/24", "10.244.3.0/24"]
    s = CIDRSet("10.244.0.0/16", 24)
    for cidr in existing:
        s.occupy(cidr)
    assert s.allocated == 3
    fresh = [str(s.allocate()) for _ in range(253)]
    assert not set(fresh) & set(existing)
    assert "10.244.2.0/24" in fresh


def test_occupy_is_idempotent_and_release_of_a_free_subnet_is_harmless() -> None:
    s = CIDRSet("10.244.0.0/16", 24)
    s.occupy("10.244.7.0/24")
    s.occupy("10.244.7.0/24")
    assert s.allocated == 1
    s.release("10.244.7.0/24")
    s.release("10.244.7.0/24")
    assert s.allocated == 0


def test_occupy_of_a_wider_cidr_marks_every_subnet_it_covers() -> None:
    s = CIDRSet("10.244.0.0/16", 24)
    s.occupy("10.244.4.0/22")
    assert s.allocated == 4
    assert all(s.is_allocated(f"10.244.{i}.0/24") for i in range(4, 8))
    s.release("10.244.5.0/24")
    assert s.allocated == 3


def test_cidrs_outside_the_cluster_cidr_are_refused() -> None:
    s = CIDRSet("10.244.0.0/16", 24)
    with pytest.raises(CIDROutOfRange):
        s.occupy("10.245.0.0/24")
    with pytest.raises(CIDROutOfRange):
        s.occupy("10.0.0.0/8")  # wider than the cluster
    with pytest.raises(CIDROutOfRange):
        s.occupy("fd00::/64")
    assert s.allocated == 0


@pytest.mark.parametrize(("cluster", "mask"), [("10.244.0.0/16", 15), ("10.244.0.0/16", 33), ("10.0.0.0/8", 25)])
def test_bad_mask_sizes(cluster: str, mask: int) -> None:
    with pytest.raises(ValueError):
        CIDRSet(cluster, mask)


def test_other_mask_sizes() -> None:
    s = CIDRSet("10.244.0.0/16", 26)
    assert s.max_cidrs == 1024
    assert [str(s.allocate()) for _ in range(2)] == ["10.244.0.0/26", "10.244.0.64/26"]
    whole = CIDRSet("192.168.0.0/24", 24)
    assert str(whole.allocate()) == "192.168.0.0/24"
    with pytest.raises(CIDRRangeFull):
        whole.allocate()


def test_ipv6() -> None:
    s = CIDRSet("fd00:10:244::/56", 64)
    assert s.max_cidrs == 256
    assert str(s.allocate()) == "fd00:10:244::/64"
    assert str(s.allocate()) == "fd00:10:244:1::/64"


def test_parse_cluster_cidrs() -> None:
    assert [str(n) for n in parse_cluster_cidrs("10.244.0.0/16")] == ["10.244.0.0/16"]
    assert len(parse_cluster_cidrs("10.244.0.0/16, fd00::/48")) == 2
    for bad in ("", "10.244.0.0/16,10.245.0.0/16", "10.244.0.1/16", "a,b,c"):
        with pytest.raises(ValueError):
            parse_cluster_cidrs(bad)


def test_range_allocator_single_stack() -> None:
    a = RangeAllocator("10.244.0.0/16", 24)
    a.occupy(["10.244.0.0/24"])
    assert a.allocate() == ["10.244.1.0/24"]
    a.release(["10.244.1.0/24"])
    assert a.sets[0].allocated == 1


def test_range_allocator_dual_stack_gives_one_of_each_all_or_nothing() -> None:
    a = RangeAllocator("10.0.0.0/24,fd00::/63")  # defaults: /24 for IPv4 (1 subnet), /64 for IPv6 (2)
    assert a.allocate() == ["10.0.0.0/24", "fd00::/64"]
    with pytest.raises(CIDRRangeFull):
        a.allocate()
    assert a.sets[1].allocated == 1  # the IPv6 subnet taken before IPv4 ran out was given back
    with pytest.raises(ValueError):
        RangeAllocator("10.0.0.0/16,fd00::/48", 24)


def test_range_allocator_occupy_checks_everything_first() -> None:
    a = RangeAllocator("10.244.0.0/16", 24)
    with pytest.raises(CIDROutOfRange):
        a.occupy(["10.244.5.0/24", "10.99.0.0/24"])
    assert a.sets[0].allocated == 0
