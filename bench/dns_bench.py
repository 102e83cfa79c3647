"""Cluster DNS benchmark (issue 11): queries/s and latency for a Service name, Service create → resolvable,
and the DNS process's RSS holding 1,000 Services, on a real etcd + apiserver + `python -m dns`.

    python -m bench.dns_bench [--quick] [--services 1000] [--seconds 5] [--clients 2]

Baseline, same run: the same queries to a minimal static dnslib server (dnslib's threaded UDP server and a
resolver that answers one fixed A record), so the ratio shows what the cluster zone, the metrics and the
informer-fed process add on top of the library's server. Queries come from the host over UDP on loopback
(queries from a pod are the lead's e2e); each client is a process of its own sending one query at a time. The
two servers take turns (5 each per figure), so that other load on the machine weighs on both alike.

Figures (targets from issue 11): p99 latency of an A query for a Service name ≤ 5 ms (one client, and under
load of --clients clients), queries/s, Service create → answered p99 ≤ 1 s, RSS with 1,000 Services (each with
an EndpointSlice of 10 endpoints) ≤ 100 MB.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from dnslib import QTYPE, RR, A, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from tests.cluster import REPO, ApiServer, Etcd, make_workdir, wait_for
from tests.dns_process import DNSProcess, free_dns_port

OUTPUT = REPO / "_output" / "bench"
NS = "dns-bench"
JSONDict = dict[str, Any]
ROUNDS = 5  # turns of each server per comparison


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


# -- the baseline server -----------------------------------------------------------------------------------------


class StaticResolver(BaseResolver):  # type: ignore[misc]
    def resolve(self, request: DNSRecord, handler: object) -> DNSRecord:
        reply = request.reply()
        reply.add_answer(RR(request.q.qname, QTYPE.A, ttl=5, rdata=A("10.96.0.1")))
        return reply


def serve_static(port: int) -> None:
    server = DNSServer(StaticResolver(), address="127.0.0.1", port=port,
                       logger=DNSLogger("-request,-reply,-truncated,-error,-recv,-send,-data"))
    server.start()


# -- load ----------------------------------------------------------------------------------------------------


def _client(port: int, name: str, seconds: float, out: Any) -> None:
    query = DNSRecord.question(name)
    latencies: list[float] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        deadline = time.perf_counter() + seconds
        ident = 0
        while time.perf_counter() < deadline:
            ident = (ident + 1) & 0xFFFF
            query.header.id = ident
            packet = query.pack()
            started = time.perf_counter()
            s.sendto(packet, ("127.0.0.1", port))
            reply, _ = s.recvfrom(4096)
            latencies.append(time.perf_counter() - started)
            assert DNSRecord.parse(reply).rr, f"no answer for {name}"
    out.put(latencies)


def summary(latencies: list[float], seconds: float, clients: int) -> JSONDict:
    return {"clients": clients, "queries": len(latencies), "qps": round(len(latencies) / seconds, 1),
            "p50_ms": round(percentile(latencies, 50) * 1000, 3), "p99_ms": round(percentile(latencies, 99) * 1000, 3),
            "max_ms": round(max(latencies) * 1000, 3)}


def load(port: int, name: str, seconds: float, clients: int) -> JSONDict:
    return summary(load_latencies(port, name, seconds, clients), seconds, clients)


def compare(ports: dict[str, int], name: str, seconds: float, clients: int, rounds: int = ROUNDS) -> JSONDict:
    """The servers in turns of seconds/rounds each, so that what else runs on the machine weighs on all alike."""
    latencies: dict[str, list[float]] = {who: [] for who in ports}
    for _ in range(rounds):
        for who, port in ports.items():
            latencies[who] += load_latencies(port, name, seconds / rounds, clients)
    return {who: summary(values, seconds, clients) for who, values in latencies.items()}


def load_latencies(port: int, name: str, seconds: float, clients: int) -> list[float]:
    """`clients` processes, each one query at a time for `seconds`: every query's latency (s)."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_client, args=(port, name, seconds, queue)) for _ in range(clients)]
    for p in procs:
        p.start()
    latencies: list[float] = []
    for _ in procs:
        latencies += queue.get(timeout=seconds + 30)
    for p in procs:
        p.join(10)
    return latencies


# -- the cluster side ----------------------------------------------------------------------------------------


def service(name: str, ip: str) -> JSONDict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}


def endpoint_slice(name: str, index: int) -> JSONDict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-x", "namespace": NS, "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [f"10.250.{index % 250}.{j + 1}"], "conditions": {"ready": True}}
                          for j in range(10)],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}


def cluster_ip(index: int) -> str:
    return f"10.100.{index // 250}.{index % 250 + 1}"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def create_to_resolvable(api: httpx.Client, dns: DNSProcess, samples: int) -> JSONDict:
    """Service create (201 back) → the first query answering its A record, polled every ~1 ms."""
    times: list[float] = []
    for i in range(samples):
        name = f"fresh-{i}"
        started = time.perf_counter()
        r = api.post(f"/api/v1/namespaces/{NS}/services", json=service(name, f"10.101.{i // 250}.{i % 250 + 1}"))
        assert r.status_code == 201, r.text
        fqdn = f"{name}.{NS}.svc.cluster.local"
        wait_for(lambda fqdn=fqdn: dns.query(fqdn, timeout=1).rr, 10, 0.001,  # type: ignore[misc]
                 what=f"{fqdn} to resolve")
        times.append(time.perf_counter() - started)
    return {"samples": samples, "p50_ms": round(percentile(times, 50) * 1000, 1),
            "p99_ms": round(percentile(times, 99) * 1000, 1), "max_ms": round(max(times) * 1000, 1)}


def run(args: argparse.Namespace) -> JSONDict:
    workdir = make_workdir("minik8s-dns-bench-")
    etcd = Etcd(workdir)
    etcd.start()
    static_port = free_dns_port()
    static = multiprocessing.get_context("fork").Process(target=serve_static, args=(static_port,), daemon=True)
    results: JSONDict = {"sizes": {"services": args.services, "endpoints_per_service": 10},
                         "seconds": args.seconds}
    try:
        apiserver = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
        apiserver.start()
        dns = DNSProcess(workdir, apiserver.url, "--no-manage-service", "--forward", "127.0.0.1:9")
        try:
            with httpx.Client(base_url=apiserver.url, timeout=30) as api:
                r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": NS}})
                assert r.status_code == 201, r.text
                dns.start()
                assert dns.process.proc is not None
                pid = dns.process.proc.pid
                results["rss_empty_mb"] = round(rss_mb(pid), 1)
                api.post(f"/api/v1/namespaces/{NS}/services", json=service("web", "10.96.0.20"))
                wait_for(lambda: dns.query(f"web.{NS}.svc.cluster.local").rr, 10, what="web to resolve")

                static.start()
                wait_for(lambda: DNSRecord.parse(DNSRecord.question("x").send("127.0.0.1", static_port, timeout=1)),
                         10, what="the static server")
                name = f"web.{NS}.svc.cluster.local"
                ports = {"dns": dns.port, "static_dnslib": static_port}
                results["single_client"] = compare(ports, name, args.seconds, 1)
                results["loaded"] = compare(ports, name, args.seconds, args.clients)
                results["create_to_resolvable"] = create_to_resolvable(api, dns, args.samples)

                started = time.perf_counter()
                for i in range(args.services):
                    svc_name = f"svc-{i}"
                    assert api.post(f"/api/v1/namespaces/{NS}/services",
                                    json=service(svc_name, cluster_ip(i))).status_code == 201
                    assert api.post(f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices",
                                    json=endpoint_slice(svc_name, i)).status_code == 201
                last = f"svc-{args.services - 1}.{NS}.svc.cluster.local"
                wait_for(lambda: dns.query(last).rr, 60, what="the last Service to resolve")
                results["fill_seconds"] = round(time.perf_counter() - started, 1)
                results["rss_services_mb"] = round(rss_mb(pid), 1)
                results["with_services"] = {"dns": load(dns.port, f"svc-{args.services // 2}.{NS}.svc.cluster.local",
                                                        args.seconds, 1)}
        finally:
            dns.stop()
            apiserver.stop()
    finally:
        if static.pid is not None:
            static.terminate()
            static.join(5)
        etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.dns_bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: 100 Services, 2 s per load, 10 samples")
    p.add_argument("--services", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=5.0, help="seconds per load run (default %(default)s)")
    p.add_argument("--clients", type=int, default=2, help="client processes of the loaded run (default %(default)s)")
    p.add_argument("--samples", type=int, default=50, help="Service create → resolvable samples (default %(default)s)")
    p.add_argument("--output", type=Path, default=OUTPUT / "dns.json", help="JSON results (%(default)s)")
    args = p.parse_args(argv)
    if args.quick:
        args.services, args.seconds, args.samples = min(args.services, 100), 2.0, 10
    results = run(args)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
    sl, ld = results["single_client"], results["loaded"]
    print(f"\nA query for a Service name, 1 client: p99 {sl['dns']['p99_ms']} ms ({sl['dns']['qps']}/s) vs static "
          f"dnslib p99 {sl['static_dnslib']['p99_ms']} ms ({sl['static_dnslib']['qps']}/s); target p99 ≤ 5 ms")
    print(f"{args.clients} clients: p99 {ld['dns']['p99_ms']} ms, {ld['dns']['qps']}/s vs static "
          f"{ld['static_dnslib']['p99_ms']} ms, {ld['static_dnslib']['qps']}/s")
    print(f"Service create → resolvable p99 {results['create_to_resolvable']['p99_ms']} ms (target ≤ 1000 ms)")
    print(f"RSS {results['rss_empty_mb']} MB empty → {results['rss_services_mb']} MB with {args.services} Services "
          f"(target ≤ 100 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
