"""The Docker shim's pod address: kept from the sandbox's ADD result (every status of it says it), read from
CNI's cached result when the shim started after the ADD, and forgotten at its teardown."""

from __future__ import annotations

from pathlib import Path

from cni.invoke import RuntimeConf
from dockershim.network import PodNetwork

SANDBOX = "b" * 64
RESULT = {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/proc/1/ns/net"}],
          "ips": [{"address": "10.244.7.9/24", "gateway": "10.244.7.1", "interface": 0}]}


def network(tmp_path: Path) -> PodNetwork:
    net = PodNetwork("n1", tmp_path, [])
    net.configure("10.244.7.0/24")
    return net


async def test_the_address_is_read_once_from_the_cached_result_and_forgotten_at_teardown(tmp_path: Path) -> None:
    before = network(tmp_path)  # the shim that made the attachment
    assert before.net is not None
    before.cni._write_cache(before.net.config_list(), RuntimeConf(SANDBOX, "", "eth0"), RESULT)
    net = network(tmp_path)  # a restarted shim
    assert net.pod_ip(SANDBOX) == "10.244.7.9"
    path = net.cni.cache_path(net.network_name(), SANDBOX, "eth0")
    path.unlink()
    assert net.pod_ip(SANDBOX) == "10.244.7.9"  # kept: not read again for every status
    await net.teardown(SANDBOX)  # nothing cached any more: no plugin runs
    assert net.pod_ip(SANDBOX) == ""


def test_no_address_before_the_network_is_set_up(tmp_path: Path) -> None:
    net = network(tmp_path)
    assert net.pod_ip(SANDBOX) == ""
    assert SANDBOX not in net._ips  # asked again once the ADD is done
