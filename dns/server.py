"""The DNS server: dnslib's threaded UDP and TCP servers in front of the cluster zone and the
forwarder, as CoreDNS's server block `.:53 { errors; health; ready; kubernetes cluster.local
in-addr.arpa ip6.arpa; prometheus :9153; forward . /etc/resolv.conf }`.

- Questions in the cluster zone (and PTRs of cluster addresses) are answered from the zone,
  authoritatively (AA set), with the zone's SOA in negative answers; everything else goes to the
  forwarder, and so does the target of an ExternalName's CNAME outside the zone.
- UDP answers larger than the client's buffer (512 bytes, or its EDNS0 size) go back empty with TC
  set and the question kept, so the client asks again over TCP (RFC 1035 4.2.1, RFC 6891).
- Metrics carry CoreDNS's names (coredns_dns_requests_total, coredns_dns_responses_total,
  coredns_dns_request_duration_seconds, coredns_forward_requests_total).
"""

from __future__ import annotations

import logging
import socket
import socketserver
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dnslib import EDNS0, QTYPE, RCODE, DNSError, DNSHeader, DNSRecord
from dnslib.server import BaseResolver, DNSHandler, DNSLogger, DNSServer
from prometheus_client import CollectorRegistry, Counter, Histogram

from dns.forward import Forwarder
from dns.kubernetes import Answer, ClusterZone

log = logging.getLogger(__name__)

FORWARD_WORKERS = 16  # queries in flight to upstreams at once (CoreDNS's forward has max_concurrent 1000)
MIN_UDP_SIZE = 512
MAX_UDP_SIZE = 4096  # what we offer back in our own OPT record


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("coredns_dns_requests_total", "Counter of DNS requests made per zone, protocol and "
                                "family.", ["server", "zone", "proto", "family", "type"], registry=self.registry)
        self.responses = Counter("coredns_dns_responses_total", "Counter of response status codes.",
                                 ["server", "zone", "rcode"], registry=self.registry)
        self.duration = Histogram("coredns_dns_request_duration_seconds", "Histogram of the time (in seconds) "
                                  "each request took.", ["server", "zone", "type"], registry=self.registry,
                                  buckets=(0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064,
                                           0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192))
        self.forwards = Counter("coredns_forward_requests_total", "Counter of requests made per upstream.",
                                ["to"], registry=self.registry)


class ClusterResolver(BaseResolver):  # type: ignore[misc]  # dnslib is untyped
    def __init__(self, zone: ClusterZone, forwarder: Forwarder, metrics: Metrics | None = None,
                 server_name: str = "dns://:53") -> None:
        self.zone = zone
        self.forwarder = forwarder
        self.metrics = metrics or Metrics()
        self.server_name = server_name

    def lookup(self, request: DNSRecord) -> Answer | None:
        """The zone's answer; None: the question is for the forwarder."""
        return self.zone.lookup(request.q.qname, request.q.qtype) if request.header.opcode == 0 else None

    def resolve(self, request: DNSRecord, handler: Any, answer: Answer | None = None) -> DNSRecord:
        """The whole reply (forwarding and chasing included: this may block on an upstream)."""
        started = time.perf_counter()
        if answer is None:
            answer = self.lookup(request)
        if answer is None:
            reply = self._forward(request)
        else:
            reply = self.reply_from(request, answer)
            if answer.chase is not None:
                self._chase(request, answer.chase, reply)
        self.observe(request, reply, answer is not None, getattr(handler, "protocol", "udp"), started)
        return reply

    @staticmethod
    def reply_from(request: DNSRecord, answer: Answer) -> DNSRecord:
        reply = request.reply(ra=1, aa=1)
        reply.header.rcode = answer.rcode
        for rr in answer.answers:
            reply.add_answer(rr)
        for rr in answer.authority:
            reply.add_auth(rr)
        for rr in answer.additional:
            reply.add_ar(rr)
        return reply

    def observe(self, request: DNSRecord, reply: DNSRecord, in_zone: bool, proto: str, started: float) -> None:
        metrics = self.metrics
        zone = f"{self.zone.domain}." if in_zone else "."
        qtype_name = QTYPE.get(request.q.qtype, str(request.q.qtype))
        metrics.requests.labels(self.server_name, zone, proto, "1", qtype_name).inc()
        metrics.responses.labels(self.server_name, zone, RCODE.get(reply.header.rcode, "")).inc()
        metrics.duration.labels(self.server_name, zone, qtype_name).observe(time.perf_counter() - started)

    def _forward(self, request: DNSRecord) -> DNSRecord:
        for upstream in self.forwarder.upstreams[:1]:
            self.metrics.forwards.labels(str(upstream)).inc()
        return self.forwarder.forward(request)

    def _chase(self, request: DNSRecord, target: str, reply: DNSRecord) -> None:
        """Resolve an ExternalName's target upstream and append what comes back (CoreDNS does the same)."""
        question = DNSRecord.question(target, QTYPE.get(request.q.qtype))
        upstream = self._forward(question)
        for rr in upstream.rr:
            reply.add_answer(rr)
        if upstream.header.rcode != RCODE.NOERROR:
            reply.header.rcode = upstream.header.rcode


def _edns_size(request: DNSRecord) -> int | None:
    for rr in request.ar:
        if rr.rtype == QTYPE.OPT:
            return max(MIN_UDP_SIZE, int(rr.rclass))
    return None


class ClusterDNSHandler(DNSHandler):  # type: ignore[misc]  # dnslib is untyped
    """dnslib's handler with the client's UDP size honoured and a truncated answer keeping its question.

    Over UDP, an answer from the zone is made on the serving thread itself (no thread handoff: Python's
    GIL makes each one cost up to a switch interval); what needs an upstream goes to the server's pool.
    """

    def handle(self) -> None:
        if self.server.socket_type == socket.SOCK_STREAM:
            super().handle()
            return
        self.protocol = "udp"
        data, sock = self.request
        started = time.perf_counter()
        try:
            request = DNSRecord.parse(data)
        except DNSError as e:
            self.server.logger.log_error(self, e)
            return
        resolver: ClusterResolver = self.server.resolver
        answer = resolver.lookup(request)
        if answer is None or answer.chase is not None:
            self.server.pool.submit(self._reply_slowly, request, answer, sock)
            return
        reply = resolver.reply_from(request, answer)
        resolver.observe(request, reply, True, "udp", started)
        sock.sendto(self.pack(request, reply), self.client_address)

    def _reply_slowly(self, request: DNSRecord, answer: Answer | None, sock: socket.socket) -> None:
        try:
            reply = self.server.resolver.resolve(request, self, answer)
            sock.sendto(self.pack(request, reply), self.client_address)
        except Exception as e:  # a pool thread: log it rather than lose it
            log.warning("dns: answering %s failed: %s", request.q.qname, e)

    def get_reply(self, data: bytes) -> bytes:
        request = DNSRecord.parse(data)
        reply: DNSRecord = self.server.resolver.resolve(request, self)
        return self.pack(request, reply)

    def pack(self, request: DNSRecord, reply: DNSRecord) -> bytes:
        size = _edns_size(request)
        if size is not None and not any(rr.rtype == QTYPE.OPT for rr in reply.ar):
            reply.add_ar(EDNS0(udp_len=MAX_UDP_SIZE))
        rdata: bytes = reply.pack()
        if self.protocol == "udp" and len(rdata) > (size or MIN_UDP_SIZE):
            header = DNSHeader(id=reply.header.id, qr=1, aa=reply.header.aa, ra=reply.header.ra, tc=1,
                               rcode=reply.header.rcode, rd=reply.header.rd)
            rdata = DNSRecord(header, q=request.q).pack()
        return rdata


class QuietLogger(DNSLogger):  # type: ignore[misc]  # dnslib is untyped
    """dnslib logs every packet to stdout by default; errors go to our log instead."""

    def __init__(self) -> None:
        super().__init__(log="-request,-reply,-truncated,-error,-recv,-send,-data")

    def log_error(self, handler: Any, e: Exception) -> None:
        log.warning("dns: invalid request from %s: %s", handler.client_address[0], e)


IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)  # Linux's value; the socket module names it on 3.11+ builds
_IN_PKTINFO = struct.Struct("=I4s4s")  # struct in_pktinfo: ipi_ifindex, ipi_spec_dst, ipi_addr


class _ReplyFromQueriedAddress:
    """The server socket as one request's handler sees it: its reply leaves from the address the query was
    sent to. Bound to 0.0.0.0, the kernel would pick the source by route instead: a pod's query DNATed by
    kube-proxy from the kube-dns ClusterIP to the node address would be answered from the pod bridge's
    address, which conntrack cannot map back to the ClusterIP, so the pod's resolver would drop it."""

    def __init__(self, sock: socket.socket, local: bytes | None) -> None:
        self._sock, self._local = sock, local

    def sendto(self, data: bytes, address: tuple[str, int]) -> int:
        if self._local is None:
            return self._sock.sendto(data, address)
        pktinfo = _IN_PKTINFO.pack(0, self._local, bytes(4))
        return self._sock.sendmsg([data], [(socket.IPPROTO_IP, IP_PKTINFO, pktinfo)], 0, address)


class _UDPServer(socketserver.UDPServer):
    """One serving thread (answers from the zone) and a fixed pool for forwarding (ClusterDNSHandler)."""

    allow_reuse_address = True

    def __init__(self, server_address: tuple[str, int], handler: type[socketserver.BaseRequestHandler]) -> None:
        if ":" in server_address[0]:
            self.address_family = socket.AF_INET6
        self.wildcard = server_address[0] in ("0.0.0.0", "")
        super().__init__(server_address, handler)
        self.pool = ThreadPoolExecutor(FORWARD_WORKERS, thread_name_prefix="dns-forward")

    def server_bind(self) -> None:
        if self.wildcard:
            self.socket.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
        super().server_bind()

    def get_request(self) -> tuple[tuple[bytes, Any], Any]:  # type: ignore[override]  # typeshed: TCP's
        if not self.wildcard:
            return super().get_request()  # type: ignore[no-any-return]
        data, ancillary, _flags, client = self.socket.recvmsg(self.max_packet_size,
                                                             socket.CMSG_SPACE(_IN_PKTINFO.size))
        local = next((info[8:12] for level, kind, info in ancillary
                      if level == socket.IPPROTO_IP and kind == IP_PKTINFO and len(info) >= _IN_PKTINFO.size),
                     None)  # ipi_addr: the destination the query carried
        return (data, _ReplyFromQueriedAddress(self.socket, local)), client

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


class _TCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, server_address: tuple[str, int], handler: type[socketserver.BaseRequestHandler]) -> None:
        if ":" in server_address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(server_address, handler)


class ClusterDNSServer:
    """UDP and TCP on one address and port (port 0: the kernel picks one, the same for both)."""

    def __init__(self, resolver: ClusterResolver, address: str, port: int) -> None:
        logger = QuietLogger()
        self.udp = DNSServer(resolver, address=address, port=port, handler=ClusterDNSHandler, logger=logger,
                             server=_UDPServer)
        self.port: int = self.udp.server.server_address[1]
        self.tcp = DNSServer(resolver, address=address, port=self.port, tcp=True, handler=ClusterDNSHandler,
                             logger=logger, server=_TCPServer)
        self.address = address
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for server in (self.udp, self.tcp):
            thread = threading.Thread(target=server.server.serve_forever, name=f"dns-{server.server.socket_type}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        for server in (self.udp, self.tcp):
            server.server.shutdown()
            server.server.server_close()
