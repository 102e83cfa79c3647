"""dns/kubernetes.py: Services and EndpointSlices -> answers, per the Kubernetes DNS specification and
CoreDNS's kubernetes plugin (pure: no server, no apiserver)."""

from __future__ import annotations

from typing import Any

import pytest
from dnslib import QTYPE, RCODE

from dns.kubernetes import Answer, ClusterZone, address_from_reverse
from machinery.api.core_v1 import Service
from machinery.api.discovery_v1 import EndpointSlice


def svc(name: str, cluster_ip: str | None, ns: str = "default", ports: list[dict[str, Any]] | None = None,
        **spec: Any) -> Service:
    body: dict[str, Any] = {"ports": ports if ports is not None else [{"name": "http", "port": 80}], **spec}
    if cluster_ip is not None:
        body["clusterIP"] = cluster_ip
    return Service.model_validate({"metadata": {"name": name, "namespace": ns}, "spec": body})


def eps(name: str, service: str | None, endpoints: list[dict[str, Any]], ns: str = "default",
        ports: list[dict[str, Any]] | None = None, address_type: str = "IPv4") -> EndpointSlice:
    labels = {"kubernetes.io/service-name": service} if service else {}
    return EndpointSlice.model_validate({
        "metadata": {"name": name, "namespace": ns, "labels": labels}, "addressType": address_type,
        "endpoints": endpoints, "ports": ports if ports is not None else [{"name": "http", "port": 8080,
                                                                          "protocol": "TCP"}]})


def rdata(answer: Answer | None, section: str = "answers") -> list[str]:
    assert answer is not None
    return sorted(str(rr.rdata) for rr in getattr(answer, section))


@pytest.fixture
def zone() -> ClusterZone:
    z = ClusterZone("cluster.local")
    z.set_service(svc("web", "10.96.0.20"))
    z.set_service(svc("db", "None", ports=[{"name": "pg", "port": 5432}]))
    z.set_slice(eps("db-1", "db", [
        {"addresses": ["10.244.1.5"], "hostname": "db-0"},
        {"addresses": ["10.244.1.6"], "conditions": {"ready": False}},
        {"addresses": ["10.244.2.7"], "conditions": {"ready": True}},
    ], ports=[{"name": "pg", "port": 5432, "protocol": "TCP"}]))
    return z


def test_cluster_ip_a_aaaa_and_other_types(zone: ClusterZone) -> None:
    a = zone.lookup("web.default.svc.cluster.local.", QTYPE.A)
    assert rdata(a) == ["10.96.0.20"] and a is not None and a.answers[0].ttl == 5
    for qtype in (QTYPE.AAAA, QTYPE.MX, QTYPE.TXT):
        nodata = zone.lookup("WEB.default.svc.cluster.local", qtype)  # names are case-insensitive
        assert nodata is not None and nodata.rcode == RCODE.NOERROR and not nodata.answers
        assert [QTYPE[rr.rtype] for rr in nodata.authority] == ["SOA"]


def test_headless_answers_ready_endpoints_once_each(zone: ClusterZone) -> None:
    zone.set_slice(eps("db-2", "db", [{"addresses": ["10.244.2.7"]}, {"addresses": ["10.244.3.8"]}]))
    assert rdata(zone.lookup("db.default.svc.cluster.local", QTYPE.A)) == ["10.244.1.5", "10.244.2.7", "10.244.3.8"]
    assert rdata(zone.lookup("db-0.db.default.svc.cluster.local", QTYPE.A)) == ["10.244.1.5"]
    assert rdata(zone.lookup("10-244-2-7.db.default.svc.cluster.local", QTYPE.A)) == ["10.244.2.7"]
    # a not-ready endpoint has no name, and a ClusterIP Service's endpoints have none either
    not_ready = zone.lookup("10-244-1-6.db.default.svc.cluster.local", QTYPE.A)
    assert not_ready is not None and not_ready.rcode == RCODE.NXDOMAIN
    zone.set_slice(eps("web-1", "web", [{"addresses": ["10.244.9.9"], "hostname": "w"}]))
    assert zone.lookup("w.web.default.svc.cluster.local", QTYPE.A).rcode == RCODE.NXDOMAIN  # type: ignore[union-attr]


def test_srv_for_named_ports(zone: ClusterZone) -> None:
    srv = zone.lookup("_http._tcp.web.default.svc.cluster.local", QTYPE.SRV)
    assert rdata(srv) == ["0 100 80 web.default.svc.cluster.local."]
    assert rdata(srv, "additional") == ["10.96.0.20"]
    headless = zone.lookup("_pg._tcp.db.default.svc.cluster.local", QTYPE.SRV)
    assert rdata(headless) == ["0 50 5432 10-244-2-7.db.default.svc.cluster.local.",
                               "0 50 5432 db-0.db.default.svc.cluster.local."]
    assert rdata(headless, "additional") == ["10.244.1.5", "10.244.2.7"]
    assert zone.lookup("_http._udp.web.default.svc.cluster.local", QTYPE.SRV).rcode == RCODE.NXDOMAIN  # type: ignore[union-attr]
    # _tcp.<svc> is an empty non-terminal of the SRV name: NODATA, not NXDOMAIN
    assert zone.lookup("_tcp.web.default.svc.cluster.local", QTYPE.A).rcode == RCODE.NOERROR  # type: ignore[union-attr]
    # an A question at the SRV name: NODATA
    a_at_srv = zone.lookup("_http._tcp.web.default.svc.cluster.local", QTYPE.A)
    assert a_at_srv is not None and a_at_srv.rcode == RCODE.NOERROR and not a_at_srv.answers


def test_ptr_for_cluster_ips_and_headless_endpoints(zone: ClusterZone) -> None:
    assert rdata(zone.lookup("20.0.96.10.in-addr.arpa", QTYPE.PTR)) == ["web.default.svc.cluster.local."]
    assert rdata(zone.lookup("5.1.244.10.in-addr.arpa", QTYPE.PTR)) == ["db-0.db.default.svc.cluster.local."]
    assert zone.lookup("99.99.99.10.in-addr.arpa", QTYPE.PTR) is None  # not ours: forwarded
    assert zone.lookup("10.in-addr.arpa", QTYPE.PTR) is None
    zone.delete_service("default", "web")
    assert zone.lookup("20.0.96.10.in-addr.arpa", QTYPE.PTR) is None
    assert address_from_reverse("b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa") == \
        "4321:0:1:2:3:4:567:89ab"


def test_external_name_is_a_cname(zone: ClusterZone) -> None:
    zone.set_service(svc("ext", None, ports=[], type="ExternalName", externalName="db.example.com."))
    answer = zone.lookup("ext.default.svc.cluster.local", QTYPE.A)
    assert answer is not None and rdata(answer) == ["db.example.com."] and answer.chase == "db.example.com"
    zone.set_service(svc("alias", None, ports=[], type="ExternalName", externalName="web.default.svc.cluster.local"))
    chained = zone.lookup("alias.default.svc.cluster.local", QTYPE.A)
    assert chained is not None and chained.chase is None
    assert [str(rr.rdata) for rr in chained.answers] == ["web.default.svc.cluster.local.", "10.96.0.20"]


def test_nxdomain_and_nodata(zone: ClusterZone) -> None:
    def rcode(name: str, qtype: int = QTYPE.A) -> int:
        answer = zone.lookup(name, qtype)
        assert answer is not None and [QTYPE[rr.rtype] for rr in answer.authority] in (["SOA"], [])
        return int(answer.rcode)

    assert rcode("missing.default.svc.cluster.local") == RCODE.NXDOMAIN
    assert rcode("default.svc.cluster.local") == RCODE.NOERROR  # has Services
    assert rcode("empty-ns.svc.cluster.local") == RCODE.NXDOMAIN
    assert rcode("svc.cluster.local") == RCODE.NOERROR
    assert rcode("cluster.local") == RCODE.NOERROR
    assert rcode("a.b.web.default.svc.cluster.local") == RCODE.NXDOMAIN
    assert rcode("something.cluster.local") == RCODE.NXDOMAIN
    assert zone.lookup("example.com", QTYPE.A) is None
    assert zone.lookup("notcluster.local", QTYPE.A) is None


def test_version_pods_and_soa(zone: ClusterZone) -> None:
    assert rdata(zone.lookup("dns-version.cluster.local", QTYPE.TXT)) == ['"1.1.0"']
    assert rdata(zone.lookup("10-244-1-9.default.pod.cluster.local", QTYPE.A)) == ["10.244.1.9"]
    assert zone.lookup("not-an-ip.default.pod.cluster.local", QTYPE.A).rcode == RCODE.NXDOMAIN  # type: ignore[union-attr]
    soa = zone.lookup("cluster.local", QTYPE.SOA)
    assert soa is not None and str(soa.answers[0].rdata).startswith("ns.dns.cluster.local. hostmaster.cluster.local.")


def test_slices_come_and_go(zone: ClusterZone) -> None:
    zone.delete_slice("default", "db-1")
    empty = zone.lookup("db.default.svc.cluster.local", QTYPE.A)
    assert empty is not None and empty.rcode == RCODE.NOERROR and not empty.answers
    # a slice arriving before its Service is kept and used once the Service comes
    zone.set_slice(eps("late-1", "late", [{"addresses": ["10.244.5.5"]}]))
    assert zone.lookup("late.default.svc.cluster.local", QTYPE.A).rcode == RCODE.NXDOMAIN  # type: ignore[union-attr]
    zone.set_service(svc("late", "None"))
    assert rdata(zone.lookup("late.default.svc.cluster.local", QTYPE.A)) == ["10.244.5.5"]
    # a slice relabelled to another Service leaves the first
    zone.set_slice(eps("late-1", "other", [{"addresses": ["10.244.5.5"]}]))
    assert not zone.lookup("late.default.svc.cluster.local", QTYPE.A).answers  # type: ignore[union-attr]
    assert zone.counts() == (3, 1)


def test_bad_input_is_ignored_not_fatal(zone: ClusterZone) -> None:
    # no service-name label, an FQDN slice: neither gives records
    zone.set_slice(eps("stray", None, [{"addresses": ["10.244.7.7"]}]))
    zone.set_slice(eps("fqdn", "db", [{"addresses": ["db.example.com"]}], address_type="FQDN"))
    assert rdata(zone.lookup("db.default.svc.cluster.local", QTYPE.A)) == ["10.244.1.5", "10.244.2.7"]
    zone.delete_service("default", "never-existed")
    zone.delete_slice("default", "never-existed")
    # a Service without a spec is a headless one with nothing to answer, not an error
    zone.set_service(Service.model_validate({"metadata": {"name": "bare", "namespace": "default"}}))
    assert not zone.lookup("bare.default.svc.cluster.local", QTYPE.A).answers  # type: ignore[union-attr]


def test_ipv6_service_answers_aaaa() -> None:
    zone = ClusterZone("cluster.local")
    zone.set_service(svc("v6", "fd00::10"))
    assert rdata(zone.lookup("v6.default.svc.cluster.local", QTYPE.AAAA)) == ["fd00::10"]
    assert not zone.lookup("v6.default.svc.cluster.local", QTYPE.A).answers  # type: ignore[union-attr]
