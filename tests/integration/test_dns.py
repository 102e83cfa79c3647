"""The cluster DNS (`python -m dns`) against a real etcd and apiserver, queried over UDP and TCP with
dnslib's client: A/AAAA, headless, SRV, PTR, CNAME, NXDOMAIN vs NODATA, truncation, forwarding to a
loopback "host resolver" named in a resolv.conf of the test's own, answers following changes within
a deadline, a kill -9 and restart, and the kube-dns Service it keeps."""

from __future__ import annotations

import fcntl
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dnslib import QTYPE, RCODE, RR, A, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from machinery.netutil import default_node_ip
from tests.auth_cluster import SecureApiServer
from tests.cluster import ApiServer, Etcd, wait_for
from tests.dns_process import DNSProcess, answers

NS = f"dns-it-{uuid.uuid4().hex[:6]}"
ZONE = "cluster.local"
FIXED_PORTS_LOCK = "/tmp/minik8s-fixed-ports.lock"
UPSTREAM_IP = f"127.53.{random.randint(1, 254)}.{random.randint(1, 254)}"


def fqdn(name: str, namespace: str = NS) -> str:
    return f"{name}.{namespace}.svc.{ZONE}"


def service(name: str, cluster_ip: str, ports: list[dict[str, object]] | None = None, **spec: object) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"clusterIP": cluster_ip, "ports": ports or [{"name": "http", "port": 80, "protocol": "TCP"}],
                     **spec}}


def endpoint_slice(name: str, service_name: str, endpoints: list[dict[str, object]],
                   ports: list[dict[str, object]] | None = None) -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": NS, "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4", "endpoints": endpoints,
            "ports": ports or [{"name": "http", "port": 8080, "protocol": "TCP"}]}


def create(api: httpx.Client, obj: dict) -> None:
    path = (f"/api/v1/namespaces/{NS}/services" if obj["kind"] == "Service"
            else f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices")
    r = api.post(path, json=obj)
    assert r.status_code == 201, r.text


@pytest.fixture(scope="module")
def resolv_conf(workdir: Path) -> Path:
    """The component's "host resolv.conf": one loopback nameserver the forwarding test serves."""
    path = workdir / f"dns-resolv-{uuid.uuid4().hex[:6]}.conf"
    path.write_text(f"search example.internal\nnameserver {UPSTREAM_IP}\noptions ndots:1\n")
    return path


@pytest.fixture(scope="module")
def dns(apiserver: ApiServer, workdir: Path, resolv_conf: Path) -> Iterator[DNSProcess]:
    with httpx.Client(base_url=apiserver.url, timeout=10) as api:
        r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        assert r.status_code == 201, r.text
        # the kube-dns endpoints name the node's address (loopback is refused in Endpoints, as upstream)
        server = DNSProcess(workdir, apiserver.url, "--forward", str(resolv_conf))
        try:
            server.start()
            yield server
        finally:
            server.stop()
            api.delete(f"/api/v1/namespaces/{NS}")
            api.delete("/api/v1/namespaces/kube-system/services/kube-dns")
            api.delete("/api/v1/namespaces/kube-system/endpoints/kube-dns")
            api.delete("/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/kube-dns-host")


def test_cluster_ip_service_answers_a_over_udp_and_tcp(dns: DNSProcess, api: httpx.Client) -> None:
    create(api, service("web", "10.96.40.1"))
    reply = wait_for(lambda: (r := dns.query(fqdn("web"))).rr and r, 5, what="web's A record")
    assert isinstance(reply, DNSRecord)
    assert answers(reply, "A") == ["10.96.40.1"]
    assert reply.header.aa == 1 and reply.rr[0].ttl == 5
    tcp = dns.query(fqdn("web"), tcp=True)
    assert answers(tcp, "A") == ["10.96.40.1"]
    # IPv4-only: AAAA is NODATA (NOERROR, no answer, the zone's SOA)
    v6 = dns.query(fqdn("web"), "AAAA")
    assert v6.header.rcode == RCODE.NOERROR and not v6.rr
    assert [QTYPE[rr.rtype] for rr in v6.auth] == ["SOA"] and str(v6.auth[0].rname) == f"{ZONE}."
    # SRV for the named port, the Service's name as target with its A in the additional section
    srv = dns.query(f"_http._tcp.{fqdn('web')}", "SRV")
    assert answers(srv, "SRV") == [f"0 100 80 {fqdn('web')}."]
    assert [str(rr.rdata) for rr in srv.ar if rr.rtype == QTYPE.A] == ["10.96.40.1"]
    # PTR of the ClusterIP
    ptr = dns.query("1.40.96.10.in-addr.arpa", "PTR")
    assert answers(ptr, "PTR") == [f"{fqdn('web')}."]


def test_nxdomain_nodata_and_version(dns: DNSProcess, api: httpx.Client) -> None:
    create(api, service("exists", "10.96.40.2"))
    wait_for(lambda: dns.query(fqdn("exists")).rr, 5, what="exists's A record")
    missing = dns.query(fqdn("missing"))
    assert missing.header.rcode == RCODE.NXDOMAIN and QTYPE[missing.auth[0].rtype] == "SOA"
    assert dns.query(f"{NS}.svc.{ZONE}").header.rcode == RCODE.NOERROR  # the namespace has Services: NODATA
    assert dns.query(f"no-such-ns.svc.{ZONE}").header.rcode == RCODE.NXDOMAIN
    assert dns.query(f"_nope._tcp.{fqdn('exists')}", "SRV").header.rcode == RCODE.NXDOMAIN
    assert answers(dns.query(f"dns-version.{ZONE}", "TXT")) == ['"1.1.0"']
    assert answers(dns.query(f"10-244-3-7.{NS}.pod.{ZONE}")) == ["10.244.3.7"]


def test_headless_service_answers_ready_endpoints(dns: DNSProcess, api: httpx.Client) -> None:
    create(api, service("db", "None", [{"name": "pg", "port": 5432, "protocol": "TCP"}]))
    create(api, endpoint_slice("db-abc", "db", [
        {"addresses": ["10.244.1.5"], "hostname": "db-0", "conditions": {"ready": True}},
        {"addresses": ["10.244.2.6"], "conditions": {"ready": True}},
        {"addresses": ["10.244.2.9"], "conditions": {"ready": False}},  # not ready: not in DNS
    ], [{"name": "pg", "port": 5432, "protocol": "TCP"}]))
    wait_for(lambda: len(dns.query(fqdn("db")).rr) == 2, 5, what="db's two ready endpoints")
    assert answers(dns.query(fqdn("db")), "A") == ["10.244.1.5", "10.244.2.6"]
    assert answers(dns.query(f"db-0.{fqdn('db')}")) == ["10.244.1.5"]
    assert answers(dns.query(f"10-244-2-6.{fqdn('db')}")) == ["10.244.2.6"]
    assert dns.query(f"db-9.{fqdn('db')}").header.rcode == RCODE.NXDOMAIN
    srv = dns.query(f"_pg._tcp.{fqdn('db')}", "SRV")
    assert answers(srv, "SRV") == [f"0 50 5432 10-244-2-6.{fqdn('db')}.", f"0 50 5432 db-0.{fqdn('db')}."]
    assert answers(dns.query("5.1.244.10.in-addr.arpa", "PTR")) == [f"db-0.{fqdn('db')}."]


def test_big_udp_answer_is_truncated_and_complete_over_tcp(dns: DNSProcess, api: httpx.Client) -> None:
    create(api, service("many", "None"))
    create(api, endpoint_slice("many-1", "many", [{"addresses": [f"10.245.0.{i}"]} for i in range(1, 61)]))
    wait_for(lambda: len(dns.query(fqdn("many"), tcp=True).rr) == 60, 5, what="60 endpoints over TCP")
    udp = dns.query(fqdn("many"))
    assert udp.header.tc == 1 and not udp.rr and str(udp.q.qname) == f"{fqdn('many')}."
    # a client offering a bigger EDNS0 buffer gets it all over UDP
    big = dns.query(fqdn("many"), edns=4096)
    assert big.header.tc == 0 and len(big.rr) == 60


def test_answers_follow_changes_within_a_deadline(dns: DNSProcess, api: httpx.Client) -> None:
    create(api, service("moving", "None"))
    create(api, endpoint_slice("moving-1", "moving", [{"addresses": ["10.246.0.1"]}]))
    wait_for(lambda: answers(dns.query(fqdn("moving"))) == ["10.246.0.1"], 5, what="the first endpoint")
    slice_path = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices/moving-1"
    current = api.get(slice_path).json()
    current["endpoints"] = [{"addresses": ["10.246.0.2"]}, {"addresses": ["10.246.0.3"]}]
    started = time.monotonic()
    assert api.put(slice_path, json=current).status_code == 200
    wait_for(lambda: answers(dns.query(fqdn("moving"))) == ["10.246.0.2", "10.246.0.3"], 1.0,
             what="the new endpoints within 1 s")
    assert time.monotonic() - started < 1.0
    assert api.delete(f"/api/v1/namespaces/{NS}/services/moving").status_code == 200
    wait_for(lambda: dns.query(fqdn("moving")).header.rcode == RCODE.NXDOMAIN, 1.0,
             what="NXDOMAIN within 1 s of the delete")


class _StaticResolver(BaseResolver):  # type: ignore[misc]
    """The "host resolver": answers every A question with 192.0.2.77 (TEST-NET-1)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def resolve(self, request: DNSRecord, handler: object) -> DNSRecord:
        self.seen.append(str(request.q.qname))
        reply = request.reply(aa=0)  # a recursive resolver's answer: not authoritative
        if request.q.qtype == QTYPE.A:
            reply.add_answer(RR(request.q.qname, QTYPE.A, ttl=30, rdata=A("192.0.2.77")))
        return reply


@pytest.fixture
def host_resolver() -> Iterator[_StaticResolver]:
    """A dnslib server on UPSTREAM_IP:53 (the resolv.conf's nameserver), under the fixed-ports lock."""
    resolver = _StaticResolver()
    with open(FIXED_PORTS_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        server = DNSServer(resolver, address=UPSTREAM_IP, port=53, logger=DNSLogger("-request,-reply,-truncated,"
                                                                                      "-error,-recv,-send,-data"))
        thread = threading.Thread(target=server.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield resolver
        finally:
            server.server.shutdown()
            server.server.server_close()


def test_names_outside_the_zone_go_to_the_resolv_conf_nameserver(dns: DNSProcess, api: httpx.Client,
                                                                 host_resolver: _StaticResolver) -> None:
    reply = dns.query("www.example.test")
    assert answers(reply, "A") == ["192.0.2.77"] and reply.header.aa == 0
    assert answers(dns.query("www.example.test", tcp=True), "A") == ["192.0.2.77"]
    assert "www.example.test." in host_resolver.seen
    # an unknown reverse name falls through to the host resolver too
    dns.query("9.9.9.10.in-addr.arpa", "PTR")
    assert "9.9.9.10.in-addr.arpa." in host_resolver.seen
    # ExternalName: a CNAME, and its target resolved upstream
    create(api, service("ext", "", [], type="ExternalName", externalName="db.example.test"))
    reply = wait_for(lambda: (r := dns.query(fqdn("ext"))).rr and r, 5, what="ext's CNAME")
    assert isinstance(reply, DNSRecord)
    assert [(QTYPE[rr.rtype], str(rr.rdata)) for rr in reply.rr] == [("CNAME", "db.example.test."),
                                                                     ("A", "192.0.2.77")]


def test_external_name_to_a_cluster_name_is_followed_in_the_zone(dns: DNSProcess, api: httpx.Client) -> None:
    create(api, service("target", "10.96.40.9"))
    create(api, service("alias", "", [], type="ExternalName", externalName=fqdn("target")))
    reply = wait_for(lambda: len((r := dns.query(fqdn("alias"))).rr) == 2 and r, 5, what="alias's CNAME chain")
    assert isinstance(reply, DNSRecord)
    assert [(QTYPE[rr.rtype], str(rr.rdata)) for rr in reply.rr] == [("CNAME", f"{fqdn('target')}."),
                                                                     ("A", "10.96.40.9")]


def test_keeps_the_kube_dns_service_pointing_at_itself(dns: DNSProcess, api: httpx.Client) -> None:
    def slice_target() -> tuple[list[str], list[int]] | None:
        r = api.get("/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/kube-dns-host")
        if r.status_code != 200:
            return None
        body = r.json()
        return body["endpoints"][0]["addresses"], sorted({p["port"] for p in body["ports"]})

    wait_for(slice_target, 10, what="the kube-dns EndpointSlice")
    svc = api.get("/api/v1/namespaces/kube-system/services/kube-dns").json()
    assert svc["spec"]["clusterIP"] == "10.96.0.10"
    assert sorted((p["name"], p["protocol"], p["port"]) for p in svc["spec"]["ports"]) == [
        ("dns", "UDP", 53), ("dns-tcp", "TCP", 53), ("metrics", "TCP", 9153)]
    assert slice_target() == ([default_node_ip()], sorted({dns.port, dns.health_port}))
    endpoints = api.get("/api/v1/namespaces/kube-system/endpoints/kube-dns").json()
    assert endpoints["subsets"][0]["addresses"] == [{"ip": default_node_ip()}]
    wait_for(lambda: answers(dns.query("kube-dns.kube-system.svc.cluster.local")) == ["10.96.0.10"], 5,
             what="kube-dns's own A record")
    # a slice someone deleted comes back
    assert api.delete("/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/kube-dns-host"
                      ).status_code == 200
    wait_for(slice_target, 15, what="the kube-dns EndpointSlice to be put back")


def test_kill_9_and_restart_answers_again(dns: DNSProcess, api: httpx.Client) -> None:
    create(api, service("survivor", "10.96.40.7"))
    wait_for(lambda: dns.query(fqdn("survivor")).rr, 5, what="survivor's A record")
    dns.kill()
    with pytest.raises(OSError):  # refused (ICMP port unreachable) or timed out
        dns.query(fqdn("survivor"), timeout=0.3)
    create(api, service("born-while-down", "10.96.40.8"))
    dns.start()
    assert answers(dns.query(fqdn("survivor"))) == ["10.96.40.7"]
    assert answers(dns.query(fqdn("born-while-down"))) == ["10.96.40.8"]


def test_bad_flags_exit_with_a_message(apiserver: ApiServer, workdir: Path) -> None:
    loopback = DNSProcess(workdir, apiserver.url, "--advertise-address", "127.0.0.1")
    loopback.process.start()
    assert loopback.process.proc is not None
    assert loopback.process.proc.wait(20) == 2
    assert "may not be in the loopback range" in loopback.process.log_path.read_text()
    bad = DNSProcess(workdir, apiserver.url, "--ttl", "-1")
    bad.process.start()
    assert bad.process.proc is not None
    assert bad.process.proc.wait(20) == 2
    assert "--ttl must be within 0-3600" in bad.process.log_path.read_text()
    missing = DNSProcess(workdir, apiserver.url, "--forward", str(workdir / "no-such-resolv.conf"))
    missing.process.start()
    assert missing.process.proc is not None
    assert missing.process.proc.wait(20) == 1
    assert "no-such-resolv.conf" in missing.process.log_path.read_text()


def test_runs_as_system_kube_dns_through_the_gate(workdir: Path, own_etcd: Etcd) -> None:
    """local-up's way: an admin creates the add-on's objects once (python -m dns.kube_dns_service), the DNS runs
    as system:kube-dns (kube-dns.conf) on an apiserver with authn, RBAC and audit: it reads Services and slices,
    puts its drifted endpoints back, and may create or change nothing else (RBAC's 403)."""
    secure = SecureApiServer(workdir, own_etcd).start()
    server = DNSProcess(workdir, secure.secure_url, "--kubeconfig", str(secure.kubeconfig("kube-dns")))
    slice_path = "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/kube-dns-host"
    try:
        once = subprocess.run([sys.executable, "-m", "dns.kube_dns_service", "--kubeconfig",
                               str(secure.kubeconfig("admin")), "--port", str(server.port), "--health-port",
                               str(server.health_port)], capture_output=True, text=True, timeout=60)
        assert once.returncode == 0, once.stderr
        with secure.plain_client() as admin:
            assert admin.get("/api/v1/namespaces/kube-system/services/kube-dns").json()["spec"]["clusterIP"] == \
                "10.96.0.10"
            r = admin.post("/api/v1/namespaces/default/services", json={**service("gated", "10.96.41.1"),
                                                                     "metadata": {"name": "gated"}})
            assert r.status_code == 201, r.text
            server.start()
            assert answers(server.query("gated.default.svc.cluster.local")) == ["10.96.41.1"]
            # someone points the slice elsewhere: the DNS puts it back (its update, audited as system:kube-dns)
            drifted = admin.get(slice_path).json()
            drifted["endpoints"][0]["addresses"] = ["192.0.2.10"]
            assert admin.put(slice_path, json=drifted).status_code == 200
            wait_for(lambda: admin.get(slice_path).json()["endpoints"][0]["addresses"] == [default_node_ip()], 15,
                     what="the kube-dns slice put back")
        secure.wait_audit(lambda e: e.get("verb") == "update"
                          and (e.get("objectRef") or {}).get("resource") == "endpointslices"
                          and e["user"]["username"] == "system:kube-dns"
                          and (e.get("responseStatus") or {}).get("code") == 200, what="system:kube-dns's update")
        with secure.client("kube-dns") as dns_user:
            r = dns_user.post("/api/v1/namespaces/default/services",
                              json={**service("not-mine", "10.96.41.2"), "metadata": {"name": "not-mine"}})
            assert r.status_code == 403 and r.json()["reason"] == "Forbidden"
            r = dns_user.post("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
                              json={**endpoint_slice("hijack", "gated", [{"addresses": ["192.0.2.66"]}]),
                                    "metadata": {"name": "hijack"}})
            assert r.status_code == 403
            r = dns_user.put("/api/v1/namespaces/default/services/gated",
                             json={**service("gated", "10.96.41.1"), "metadata": {"name": "gated"}})
            assert r.status_code == 403
    finally:
        server.stop()
        secure.stop()
