"""The CNI runtime with the real reference plugins on real network namespaces: ADD / CHECK / DEL with
addresses from the node's range, leases and cached results, plugin errors, hostPort mappings, and
pod-to-pod traffic between two node bridges of one host (forwarded, not masqueraded).

Each test's namespaces, bridges and leases are removed at its end, even when it fails."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cni import host
from cni.config import NodeNetwork, loopback_config_list
from cni.invoke import CniError, CniRuntime, RuntimeConf
from dockershim.cleanup import cleanup_host_rules_if_unused
from tests.cluster import Process, free_port, wait_for
from tests.integration.test_kubelet import free_pod_cidrs


def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def netns() -> Iterator[callable]:  # type: ignore[valid-type]
    made: list[str] = []

    def make() -> str:
        name = f"mk8s-t-{uuid.uuid4().hex[:8]}"
        ip("netns", "add", name)
        made.append(name)
        return name

    yield make
    for name in made:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)


@pytest.fixture
def networks(tmp_path: Path) -> Iterator[callable]:  # type: ignore[valid-type]
    made: list[NodeNetwork] = []

    def make(cidr: str | None = None) -> NodeNetwork:
        node = f"tc-{uuid.uuid4().hex[:6]}"
        net = NodeNetwork(node, cidr or free_pod_cidrs(1)[0], tmp_path / node)
        made.append(net)
        return net

    yield make
    for net in made:
        host.delete_bridge(net.bridge)
        assert not host.link_exists(net.bridge)
    asyncio.run(cleanup_host_rules_if_unused())
    host.remove_portmap_chains_if_unused()


def addresses_in(ns: str, ifname: str = "eth0") -> list[str]:
    data = json.loads(ip("-j", "-n", ns, "-4", "addr", "show", "dev", ifname))
    return [f"{a['local']}/{a['prefixlen']}" for entry in data for a in entry.get("addr_info", [])]


async def test_add_check_del_on_a_real_network_namespace(netns, networks, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    net = networks()
    ns = netns()
    cni = CniRuntime(net.cache_dir)
    rt = RuntimeConf("cid-one", f"/run/netns/{ns}", args=[("K8S_POD_NAME", "p"), ("K8S_POD_NAMESPACE", "default")])
    result = await cni.add(net.config_list(), rt)
    try:
        assert result.ip is not None and ipaddress.ip_address(result.ip) in net.subnet
        assert result.gateway == net.gateway
        assert addresses_in(ns) == [f"{result.ip}/{net.subnet.prefixlen}"]
        assert f"{net.gateway}/{net.subnet.prefixlen}" in addresses_in_host(net.bridge)
        routes = json.loads(ip("-j", "-n", ns, "route", "show", "default"))
        assert routes and routes[0]["gateway"] == net.gateway
        assert host.leases(net.lease_dir) == {result.ip: "cid-one"}
        cached = cni.read_cache(net.name, "cid-one")
        assert cached is not None and cached["result"]["ips"][0]["address"].startswith(result.ip)
        await cni.check(net.config_list(), rt)
        # the host reaches the address over the node bridge
        server = Process("ns-http", ["ip", "netns", "exec", ns, sys.executable, "-m", "http.server", "8080"],
                         tmp_path / "http.log")
        server.start()
        try:
            wait_for(lambda: httpx.get(f"http://{result.ip}:8080/", timeout=1).status_code == 200, 15,
                     what="the host reaching the namespace's address")
        finally:
            server.stop()
    finally:
        await cni.delete(net.config_list(), rt)
    assert host.leases(net.lease_dir) == {}
    assert cni.read_cache(net.name, "cid-one") is None
    assert "eth0" not in ip("-n", ns, "link", "show")
    await cni.delete(net.config_list(), rt)  # a second DEL is fine
    with pytest.raises(CniError) as failed:
        await cni.check(net.config_list(), rt)  # nothing cached anymore
    assert failed.value.code == 3


async def test_addresses_are_distinct_and_loopback_comes_up(netns, networks) -> None:  # type: ignore[no-untyped-def]
    net = networks()
    cni = CniRuntime(net.cache_dir)
    confs = [RuntimeConf(f"cid-{i}", f"/run/netns/{netns()}") for i in range(3)]
    try:
        ips = [(await cni.add(net.config_list(), rt)).ip for rt in confs]
        assert len(set(ips)) == 3 and all(ipaddress.ip_address(a or "") in net.subnet for a in ips)
        lo = RuntimeConf("cid-0", confs[0].netns, "lo")
        await cni.add(loopback_config_list(), lo)
        ns0 = confs[0].netns.rsplit("/", 1)[-1]
        assert "UP" in ip("-n", ns0, "link", "show", "lo")
        await cni.delete(loopback_config_list(), lo)
    finally:
        for rt in confs:
            await cni.delete(net.config_list(), rt)
    assert host.leases(net.lease_dir) == {}


async def test_plugin_errors_become_cni_errors(netns, networks) -> None:  # type: ignore[no-untyped-def]
    net = networks()
    ns = netns()
    cni = CniRuntime(net.cache_dir)
    rt = RuntimeConf("cid-dup", f"/run/netns/{ns}")
    await cni.add(net.config_list(), rt)
    try:
        with pytest.raises(CniError) as dup:
            await cni.add(net.config_list(), RuntimeConf("cid-dup", f"/run/netns/{netns()}"))
        assert dup.value.plugin == "bridge" and "duplicate allocation" in dup.value.msg
        assert isinstance(dup.value.code, int) and dup.value.command == "ADD"
    finally:
        await cni.delete(net.config_list(), rt)
    broken = net.config_list()
    broken["plugins"][0]["ipam"]["ranges"] = [[{"subnet": "not-a-subnet"}]]
    with pytest.raises(CniError) as bad:
        await cni.add(broken, RuntimeConf("cid-bad", f"/run/netns/{ns}"))
    assert bad.value.msg and bad.value.code != 0
    missing = net.config_list()
    missing["plugins"][0]["type"] = "no-such-plugin"
    with pytest.raises(CniError) as absent:
        await cni.add(missing, RuntimeConf("cid-x", f"/run/netns/{ns}"))
    assert "failed to find plugin" in absent.value.msg


async def test_host_port_mapping_reaches_the_pod(netns, networks, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    net = networks()
    ns = netns()
    cni = CniRuntime(net.cache_dir)
    host_port = free_port()
    rt = RuntimeConf("cid-port", f"/run/netns/{ns}", capability_args={
        "portMappings": [{"hostPort": host_port, "containerPort": 8080, "protocol": "tcp"}]})
    result = await cni.add(net.config_list(), rt)
    server = Process("ns-http", ["ip", "netns", "exec", ns, sys.executable, "-m", "http.server", "8080"],
                     tmp_path / "http.log")
    server.start()
    try:
        nat = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
        assert f"--to-destination {result.ip}:8080" in nat
        node_ip = next(a.split("/")[0] for a in addresses_in_host_all() if not a.startswith(("127.", "10.244.")))
        wait_for(lambda: httpx.get(f"http://{node_ip}:{host_port}/", timeout=1).status_code == 200, 15,
                 what="the pod's server through the host port")
    finally:
        server.stop()
        await cni.delete(net.config_list(), rt)
    nat = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
    assert f"{result.ip}:8080" not in nat


async def test_pods_on_two_node_bridges_talk_without_nat(netns, networks, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cidr_a, cidr_b = free_pod_cidrs(2)
    net_a, net_b = networks(cidr_a), networks(cidr_b)
    ns_a, ns_b = netns(), netns()
    cni_a, cni_b = CniRuntime(net_a.cache_dir), CniRuntime(net_b.cache_dir)
    rt_a, rt_b = RuntimeConf("cid-a", f"/run/netns/{ns_a}"), RuntimeConf("cid-b", f"/run/netns/{ns_b}")
    await asyncio.to_thread(host.ensure_cluster_rules, "10.244.0.0/16")
    ip_a = (await cni_a.add(net_a.config_list(), rt_a)).ip
    ip_b = (await cni_b.add(net_b.config_list(), rt_b)).ip
    log = tmp_path / "server.log"
    server = Process("ns-b-http", ["ip", "netns", "exec", ns_b, sys.executable, "-m", "http.server", "8080"], log)
    server.start()
    try:
        def fetched() -> bool:
            done = subprocess.run(["ip", "netns", "exec", ns_a, "curl", "-sf", "-m", "2", f"http://{ip_b}:8080/"],
                                  capture_output=True)
            return done.returncode == 0
        wait_for(fetched, 15, 0.2, what="pod A fetching from pod B across the two bridges")
        wait_for(lambda: f"{ip_a} - -" in log.read_text(), 5, what="the server logging pod A's own address")
        rules = subprocess.run(["iptables", "-S", host.FORWARD_CHAIN], capture_output=True, text=True).stdout
        assert "10.244.0.0/16" in rules and host.COMMENT in rules
    finally:
        server.stop()
        await cni_a.delete(net_a.config_list(), rt_a)
        await cni_b.delete(net_b.config_list(), rt_b)


async def test_the_host_network_namespace_is_never_touched(networks) -> None:  # type: ignore[no-untyped-def]
    net = networks()
    cni = CniRuntime(net.cache_dir)
    for path in ("/proc/self/ns/net", f"/proc/{os.getpid()}/ns/net"):
        with pytest.raises(CniError) as refused:
            await cni.add(loopback_config_list(), RuntimeConf("cid-host", path, "lo"))
        assert refused.value.code == 4 and "host's network namespace" in refused.value.msg
        with pytest.raises(CniError):
            await cni.delete(loopback_config_list(), RuntimeConf("cid-host", path, "lo"), force=True)
        await cni.delete(loopback_config_list(), RuntimeConf("cid-host", path, "lo"))  # nothing cached: no-op
    assert "UP" in ip("link", "show", "lo").split(">")[0]
    assert not host.link_exists(net.bridge)


def addresses_in_host(dev: str) -> list[str]:
    data = json.loads(ip("-j", "-4", "addr", "show", "dev", dev))
    return [f"{a['local']}/{a['prefixlen']}" for entry in data for a in entry.get("addr_info", [])]


def addresses_in_host_all() -> list[str]:
    data = json.loads(ip("-j", "-4", "addr", "show"))
    return [f"{a['local']}/{a['prefixlen']}" for entry in data for a in entry.get("addr_info", [])]
