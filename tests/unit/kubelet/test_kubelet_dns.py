"""kubelet/network/dns.py: the pod's resolv.conf per dnsPolicy, dnsConfig merged, upstream's limits and events
(upstream pkg/kubelet/network/dns/dns_test.go's cases)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kubelet.network.dns import Configurer, parse_resolv_conf
from machinery.api.core_v1 import Pod

HOST_RESOLV = ("nameserver 192.0.2.1\nnameserver 192.0.2.2\nsearch corp.example lab.example.\n"
               "options timeout:2 ndots:1\n")


def make_pod(**spec: Any) -> Pod:
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": "web", "namespace": "prod", "uid": "u-1"},
                               "spec": {"containers": [{"name": "c", "image": "img"}], **spec}})


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, str]] = []

    def __call__(self, obj: BaseModel, type_: str, reason: str, message: str) -> None:
        self.seen.append((type(obj).__name__, type_, reason, message))


@pytest.fixture
def host_resolv(tmp_path: Path) -> Path:
    path = tmp_path / "resolv.conf"
    path.write_text(HOST_RESOLV)
    return path


def configurer(resolv: Path | str, events: Events, cluster_dns: list[str] | None = None) -> Configurer:
    return Configurer(events, "node-1", ["10.0.0.5"], cluster_dns=["10.96.0.10"] if cluster_dns is None
                      else cluster_dns, cluster_domain="cluster.local", resolver_config=str(resolv))


def as_tuple(config: Any) -> tuple[list[str], list[str], list[str]]:
    return list(config.servers), list(config.searches), list(config.options)


def test_parse_resolv_conf() -> None:
    assert parse_resolv_conf(HOST_RESOLV + "search last.example\n# comment\n") == (
        ["192.0.2.1", "192.0.2.2"], ["last.example"], ["timeout:2", "ndots:1"])


def test_cluster_first_is_the_default(host_resolv: Path) -> None:
    events = Events()
    got = configurer(host_resolv, events).get_pod_dns(make_pod())
    assert as_tuple(got) == (["10.96.0.10"],
                             ["prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example",
                              "lab.example"], ["ndots:5"])
    assert events.seen == []


def test_host_network_cluster_first_means_default_and_with_host_net_means_cluster(host_resolv: Path) -> None:
    c = configurer(host_resolv, Events())
    assert as_tuple(c.get_pod_dns(make_pod(hostNetwork=True))) == (
        ["192.0.2.1", "192.0.2.2"], ["corp.example", "lab.example"], ["timeout:2", "ndots:1"])
    assert c.get_pod_dns(make_pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")).servers == ["10.96.0.10"]


def test_default_is_the_hosts_and_none_only_dns_config(host_resolv: Path) -> None:
    c = configurer(host_resolv, Events())
    assert as_tuple(c.get_pod_dns(make_pod(dnsPolicy="Default")))[0] == ["192.0.2.1", "192.0.2.2"]
    got = c.get_pod_dns(make_pod(dnsPolicy="None", dnsConfig={
        "nameservers": ["1.2.3.4"], "searches": ["a.example"], "options": [{"name": "ndots", "value": "2"},
                                                                         {"name": "edns0"}]}))
    assert as_tuple(got) == (["1.2.3.4"], ["a.example"], ["ndots:2", "edns0"])


def test_dns_config_is_merged_the_pods_options_winning(host_resolv: Path) -> None:
    got = configurer(host_resolv, Events()).get_pod_dns(make_pod(dnsConfig={
        "nameservers": ["10.96.0.10", "1.1.1.1"], "searches": ["cluster.local", "extra.example"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "single-request"}]}))
    assert as_tuple(got) == (["10.96.0.10", "1.1.1.1"],
                             ["prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example",
                              "lab.example", "extra.example"], ["ndots:2", "single-request"])


def test_cluster_first_without_cluster_dns_falls_back_to_default_with_events(host_resolv: Path) -> None:
    events = Events()
    got = configurer(host_resolv, events, cluster_dns=[]).get_pod_dns(make_pod())
    assert as_tuple(got)[0] == ["192.0.2.1", "192.0.2.2"]
    assert [(kind, reason) for kind, _, reason, _ in events.seen] == [("Node", "MissingClusterDNS"),
                                                                       ("Pod", "MissingClusterDNS")]
    assert events.seen[0][3] == ('kubelet does not have ClusterDNS IP configured and cannot create Pod using '
                                 '"ClusterFirst" policy. Falling back to "Default" policy.')


def test_no_resolv_conf_means_localhost(tmp_path: Path) -> None:
    got = configurer("", Events()).get_pod_dns(make_pod(dnsPolicy="Default"))
    assert as_tuple(got) == (["127.0.0.1"], ["."], [])


def test_a_missing_resolv_conf_is_empty_not_an_error(tmp_path: Path) -> None:
    got = configurer(tmp_path / "missing", Events()).get_pod_dns(make_pod())
    assert list(got.searches) == ["prod.svc.cluster.local", "svc.cluster.local", "cluster.local"]


def test_the_hosts_resolv_conf_is_read_again_only_when_it_changed(host_resolv: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import kubelet.network.dns as dns

    parsed: list[str] = []
    monkeypatch.setattr(dns, "parse_resolv_conf", lambda text: parsed.append(text) or parse_resolv_conf(text))
    c = configurer(host_resolv, Events())
    first = c.host_dns_config()
    first[0].append("changed by the caller")  # the caller's copy: the cached one stays as read
    assert c.host_dns_config() == (["192.0.2.1", "192.0.2.2"], ["corp.example", "lab.example"],
                                   ["timeout:2", "ndots:1"])
    assert len(parsed) == 1
    host_resolv.write_text("nameserver 192.0.2.9\n")  # edited in place (another size)
    assert c.host_dns_config()[0] == ["192.0.2.9"]
    replacement = host_resolv.with_name("resolv.conf.new")
    replacement.write_text("nameserver 192.0.2.8\n")  # the same size, another file renamed over it
    replacement.replace(host_resolv)
    assert c.host_dns_config()[0] == ["192.0.2.8"]
    assert len(parsed) == 3
    host_resolv.unlink()
    assert c.host_dns_config() == ([], [], [])


def test_limits_cut_nameservers_and_searches_with_dns_config_forming(host_resolv: Path) -> None:
    events = Events()
    c = configurer(host_resolv, events)
    got = c.get_pod_dns(make_pod(dnsConfig={"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3"]}))
    assert list(got.servers) == ["10.96.0.10", "1.1.1.1", "2.2.2.2"]
    assert events.seen[-1][2:] == ("DNSConfigForming", "Nameserver limits were exceeded, some nameservers have been "
                                   "omitted, the applied nameserver line is: 10.96.0.10 1.1.1.1 2.2.2.2")
    many = [f"d{i}.example" for i in range(40)]
    got = c.get_pod_dns(make_pod(dnsPolicy="None", dnsConfig={"searches": many}))
    assert list(got.searches) == many[:32] and events.seen[-1][2] == "DNSConfigForming"
    long = [("x" * 60 + f".s{i}") for i in range(32)]  # 32 names of 64 characters: a 2079-character line
    got = c.get_pod_dns(make_pod(dnsPolicy="None", dnsConfig={"searches": long}))
    assert len(" ".join(got.searches)) <= 2048 and list(got.searches) == long[:31]
    too_long = "a" * 254
    got = c.get_pod_dns(make_pod(dnsPolicy="None", dnsConfig={"searches": [too_long, "ok.example"]}))
    assert list(got.searches) == ["ok.example"]
    assert events.seen[-1][3].endswith("the applied search line is: ok.example")


def test_an_invalid_policy_is_treated_as_cluster_first(host_resolv: Path) -> None:
    # the apiserver refuses one; a pod that still carries it (an older store) gets ClusterFirst, as upstream
    got = configurer(host_resolv, Events()).get_pod_dns(make_pod(dnsPolicy="Bogus"))
    assert list(got.servers) == ["10.96.0.10"]
