"""Forwarding what is not the cluster's to the host's resolvers, as CoreDNS's `forward .
/etc/resolv.conf` (plugin/forward): the nameservers of a resolv.conf, tried in order, UDP first and
TCP when the answer came back truncated; the request's own ID is kept. A nameserver that is this
server itself is skipped (CoreDNS's loop plugin would stop there instead).

Runs in the DNS server's handler threads (blocking sockets through dnslib's DNSRecord.send).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dnslib import RCODE, DNSError, DNSRecord

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 2.0


@dataclass(frozen=True)
class Upstream:
    host: str
    port: int = 53

    @property
    def ipv6(self) -> bool:
        return ":" in self.host

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_upstream(value: str) -> Upstream:
    """`IP`, `IP:PORT` or `[IPv6]:PORT`."""
    if value.startswith("["):
        host, _, port = value[1:].partition("]")
        return Upstream(host, int(port.lstrip(":") or 53))
    if value.count(":") == 1:
        host, port = value.split(":")
        return Upstream(host, int(port))
    return Upstream(value)


def resolv_conf_nameservers(path: str | Path) -> list[Upstream]:
    """The `nameserver` lines of a resolv.conf (port 53), in order."""
    out = []
    for line in Path(path).read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "nameserver":
            out.append(Upstream(fields[1].split("%")[0]))
    return out


def load_upstreams(targets: Sequence[str], own: Sequence[Upstream] = ()) -> list[Upstream]:
    """Each target is a resolv.conf path or an address (CoreDNS's `forward . TO...`); minus ourselves."""
    upstreams: list[Upstream] = []
    for target in targets:
        if "/" in target:
            upstreams += resolv_conf_nameservers(target)
        else:
            upstreams.append(parse_upstream(target))
    kept = [u for u in upstreams if u not in own]
    if len(kept) != len(upstreams):
        log.warning("forward: skipping nameserver(s) that are this server itself: %s",
                    ", ".join(str(u) for u in upstreams if u in own))
    return kept


class Forwarder:
    def __init__(self, upstreams: list[Upstream], timeout: float = DEFAULT_TIMEOUT) -> None:
        self.upstreams = upstreams
        self.timeout = timeout

    def forward(self, request: DNSRecord) -> DNSRecord:
        """The first upstream's answer; SERVFAIL when none answers (CoreDNS: "no healthy upstream")."""
        for upstream in self.upstreams:
            try:
                raw = request.send(upstream.host, upstream.port, tcp=False, timeout=self.timeout, ipv6=upstream.ipv6)
                reply = DNSRecord.parse(raw)
                if reply.header.tc:
                    reply = DNSRecord.parse(request.send(upstream.host, upstream.port, tcp=True, ipv6=upstream.ipv6,
                                                         timeout=self.timeout))
                return reply
            except (OSError, DNSError) as e:
                log.debug("forward to %s failed: %s", upstream, e)
        reply = request.reply()
        reply.header.rcode = RCODE.SERVFAIL
        return reply
