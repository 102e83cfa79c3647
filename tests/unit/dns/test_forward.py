"""dns/forward.py: where names outside the cluster go (CoreDNS's forward . /etc/resolv.conf)."""

from __future__ import annotations

from pathlib import Path

from dnslib import RCODE, DNSRecord

from dns.forward import Forwarder, Upstream, load_upstreams, parse_upstream


def test_resolv_conf_and_addresses(tmp_path: Path) -> None:
    conf = tmp_path / "resolv.conf"
    conf.write_text("search example\nnameserver 192.0.2.1\nnameserver fe80::1%eth0\n# nameserver 192.0.2.9\n")
    assert load_upstreams([str(conf), "192.0.2.3:5353", "[2001:db8::1]:53"]) == [
        Upstream("192.0.2.1"), Upstream("fe80::1"), Upstream("192.0.2.3", 5353), Upstream("2001:db8::1")]
    assert parse_upstream("2001:db8::2") == Upstream("2001:db8::2", 53)


def test_itself_is_not_an_upstream(tmp_path: Path) -> None:
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 127.0.0.1\nnameserver 192.0.2.1\n")
    assert load_upstreams([str(conf), "127.0.0.1:10053"], [Upstream("127.0.0.1", 10053)]) == [
        Upstream("127.0.0.1"), Upstream("192.0.2.1")]
    assert load_upstreams(["127.0.0.1"], [Upstream("127.0.0.1")]) == []


def test_no_upstream_answers_servfail() -> None:
    reply = Forwarder([]).forward(DNSRecord.question("example.com"))
    assert reply.header.rcode == RCODE.SERVFAIL
