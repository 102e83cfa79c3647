"""The cluster zone: Services and EndpointSlices -> DNS answers, as CoreDNS's kubernetes plugin
(plugin/kubernetes: kubernetes.go, parse.go, reverse.go, ns.go) answers them per the Kubernetes
DNS specification (kubernetes/dns docs/specification.md, schema 1.1.0).

Pure and synchronous: the informers call `set_service`/`delete_service`/`set_slice`/`delete_slice`
on the asyncio loop, the DNS server's threads call `lookup`; one lock keeps the two apart. Records
are built from dnslib's RR types (no packet code here).

Names answered (the Corefile `kubernetes cluster.local in-addr.arpa ip6.arpa { pods insecure;
fallthrough in-addr.arpa ip6.arpa }`):
- `<svc>.<ns>.svc.<zone>`: A/AAAA of the ClusterIP(s); of each ready endpoint for a headless
  Service; a CNAME to spec.externalName for ExternalName;
- `<hostname>.<svc>.<ns>.svc.<zone>`: a headless Service's endpoint (its hostname, or its address
  with dashes, as CoreDNS names endpoints without one);
- `_<port>._<proto>.<svc>.<ns>.svc.<zone>`: SRV per named port (headless: per endpoint);
- `<a-b-c-d>.<ns>.pod.<zone>`: A of the address in the name (`pods insecure`);
- `dns-version.<zone>`: TXT "1.1.0";
- PTR for ClusterIPs and headless endpoint addresses; other reverse names fall through (forwarded).
A name below the zone that does not exist is NXDOMAIN; one that exists (or has names below it)
without the asked type is NODATA; both carry the zone's SOA in the authority section.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass, field

from dnslib import AAAA, CNAME, NS, PTR, QTYPE, RCODE, RR, SOA, SRV, TXT, A, DNSLabel

from machinery.api.core_v1 import Service
from machinery.api.discovery_v1 import EndpointSlice

DEFAULT_TTL = 5  # CoreDNS kubernetes plugin's default ttl
DNS_SCHEMA_VERSION = "1.1.0"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
REVERSE_ZONES = ("in-addr.arpa", "ip6.arpa")
MAX_CNAME_CHAIN = 8


@dataclass(frozen=True)
class PortEntry:
    name: str
    protocol: str  # lower case: tcp | udp | sctp
    port: int


@dataclass(frozen=True)
class EndpointEntry:
    address: str
    hostname: str  # the endpoint's hostname, or its address with dashes

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.address


@dataclass
class ServiceEntry:
    name: str
    namespace: str
    headless: bool
    cluster_ips: list[str]
    ports: list[PortEntry]
    external_name: str | None = None


@dataclass
class SliceEntry:
    endpoints: list[EndpointEntry]
    ports: list[PortEntry]


@dataclass
class Answer:
    """What the zone says about one question; `None` from lookup means "not ours, forward it"."""
    rcode: int = RCODE.NOERROR
    answers: list[RR] = field(default_factory=list)
    authority: list[RR] = field(default_factory=list)
    additional: list[RR] = field(default_factory=list)
    # an ExternalName's target outside the zone, for the server to resolve upstream (A/AAAA only)
    chase: str | None = None


def endpoint_hostname(address: str, hostname: str | None) -> str:
    """CoreDNS's endpointHostname: the endpoint's hostname, else its address with dashes."""
    if hostname:
        return hostname.lower()
    return address.replace(".", "-").replace(":", "-")


def service_entry(svc: Service) -> ServiceEntry:
    spec = svc.spec
    name, namespace = svc.metadata.name or "", svc.metadata.namespace or "default"
    ports = [PortEntry((p.name or "").lower(), (p.protocol or "TCP").lower(), p.port)
             for p in (spec.ports if spec and spec.ports else [])]
    if spec is not None and spec.type == "ExternalName":
        return ServiceEntry(name, namespace, False, [], ports, (spec.external_name or "").rstrip(".").lower())
    ips = list(spec.cluster_ips or []) if spec else []
    if spec is not None and spec.cluster_ip and spec.cluster_ip not in ips:
        ips.insert(0, spec.cluster_ip)
    headless = not ips or ips[0] == "None"
    return ServiceEntry(name, namespace, headless, [] if headless else [ip for ip in ips if ip != "None"], ports)


def slice_entry(eps: EndpointSlice) -> SliceEntry | None:
    """The ready endpoints of a slice (ready unset counts as ready, as CoreDNS reads it); None for FQDN slices."""
    if eps.address_type not in ("IPv4", "IPv6"):
        return None
    endpoints = []
    for ep in eps.endpoints or []:
        if ep.conditions is not None and ep.conditions.ready is False:
            continue
        endpoints += [EndpointEntry(address, endpoint_hostname(address, ep.hostname)) for address in ep.addresses]
    ports = [PortEntry((p.name or "").lower(), (p.protocol or "TCP").lower(), p.port)
             for p in eps.ports or [] if p.port is not None]
    return SliceEntry(endpoints, ports)


def reverse_name(address: str) -> str:
    return ipaddress.ip_address(address).reverse_pointer


def address_from_reverse(name: str) -> str | None:
    """The address a full in-addr.arpa / ip6.arpa name stands for; None for a partial or bad name."""
    if name.endswith(".in-addr.arpa"):
        parts = name[: -len(".in-addr.arpa")].split(".")
        if len(parts) != 4:
            return None
        candidate = ".".join(reversed(parts))
    elif name.endswith(".ip6.arpa"):
        nibbles = name[: -len(".ip6.arpa")].split(".")
        if len(nibbles) != 32:
            return None
        digits = "".join(reversed(nibbles))
        candidate = ":".join(digits[i:i + 4] for i in range(0, 32, 4))
    else:
        return None
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return None


class ClusterZone:
    """The records of one cluster domain, kept from Services and EndpointSlices."""

    def __init__(self, domain: str = "cluster.local", ttl: int = DEFAULT_TTL) -> None:
        self.domain = domain.strip(".").lower()
        self.ttl = ttl
        self._lock = threading.Lock()
        self._services: dict[tuple[str, str], ServiceEntry] = {}
        # (namespace, service name) -> slice name -> its ready endpoints and ports
        self._slices: dict[tuple[str, str], dict[str, SliceEntry]] = {}
        self._slice_owner: dict[tuple[str, str], str] = {}  # (namespace, slice name) -> service name
        self._namespaces: dict[str, int] = {}  # namespace -> how many Services it has
        self._reverse: dict[str, set[str]] = {}  # address -> names (PTR targets)
        self._reverse_of: dict[tuple[str, str], set[tuple[str, str]]] = {}  # service -> its (address, name)s
        self.serial = int(time.time())

    # -- updates (informer handlers) -------------------------------------------------------------

    def set_service(self, svc: Service) -> None:
        entry = service_entry(svc)
        key = (entry.namespace, entry.name)
        with self._lock:
            if key not in self._services:
                self._namespaces[entry.namespace] = self._namespaces.get(entry.namespace, 0) + 1
            self._services[key] = entry
            self._reindex(key)

    def delete_service(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        with self._lock:
            if self._services.pop(key, None) is None:
                return
            left = self._namespaces.get(namespace, 1) - 1
            if left:
                self._namespaces[namespace] = left
            else:
                self._namespaces.pop(namespace, None)
            self._reindex(key)

    def set_slice(self, eps: EndpointSlice) -> None:
        namespace, name = eps.metadata.namespace or "default", eps.metadata.name or ""
        service = (eps.metadata.labels or {}).get(SERVICE_NAME_LABEL)
        entry = slice_entry(eps)
        with self._lock:
            self._drop_slice(namespace, name)
            if service and entry is not None:
                self._slices.setdefault((namespace, service), {})[name] = entry
                self._slice_owner[(namespace, name)] = service
                self._reindex((namespace, service))

    def delete_slice(self, namespace: str, name: str) -> None:
        with self._lock:
            self._drop_slice(namespace, name)

    def _drop_slice(self, namespace: str, name: str) -> None:
        service = self._slice_owner.pop((namespace, name), None)
        if service is None:
            return
        slices = self._slices.get((namespace, service), {})
        slices.pop(name, None)
        if not slices:
            self._slices.pop((namespace, service), None)
        self._reindex((namespace, service))

    def _reindex(self, key: tuple[str, str]) -> None:
        """Bring the PTR index up to date for one Service (called with the lock held)."""
        self.serial = int(time.time())
        for address, name in self._reverse_of.pop(key, set()):
            names = self._reverse.get(address)
            if names is not None:
                names.discard(name)
                if not names:
                    del self._reverse[address]
        entry = self._services.get(key)
        if entry is None or entry.external_name is not None:
            return
        fqdn = self._service_fqdn(entry)
        if entry.headless:
            pairs = {(ep.address, f"{ep.hostname}.{fqdn}") for ep in self._endpoints(key)}
        else:
            pairs = {(ip, fqdn) for ip in entry.cluster_ips}
        for address, name in pairs:
            self._reverse.setdefault(address, set()).add(name)
        self._reverse_of[key] = pairs

    # -- reading ---------------------------------------------------------------------------------

    def _service_fqdn(self, entry: ServiceEntry) -> str:
        return f"{entry.name}.{entry.namespace}.svc.{self.domain}"

    def _endpoints(self, key: tuple[str, str]) -> list[EndpointEntry]:
        """Ready endpoints of all slices of a Service, each address once, in a stable order."""
        seen: dict[str, EndpointEntry] = {}
        for name in sorted(self._slices.get(key, {})):
            for ep in self._slices[key][name].endpoints:
                seen.setdefault(ep.address, ep)
        return list(seen.values())

    def _endpoint_ports(self, key: tuple[str, str]) -> list[PortEntry]:
        out: dict[PortEntry, None] = {}
        for entry in self._slices.get(key, {}).values():
            out.update(dict.fromkeys(entry.ports))
        return list(out)

    def is_authoritative_for(self, qname: str) -> bool:
        name = qname.rstrip(".").lower()
        return name == self.domain or name.endswith("." + self.domain)

    def soa(self, zone: str | None = None) -> RR:
        zone = zone or self.domain
        return RR(f"{zone}.", QTYPE.SOA, ttl=self.ttl,
                  rdata=SOA(f"ns.dns.{self.domain}.", f"hostmaster.{self.domain}.",
                            (self.serial, 7200, 1800, 86400, self.ttl)))

    def _address_rr(self, name: str, address: str) -> RR:
        if ":" in address:
            return RR(f"{name}.", QTYPE.AAAA, ttl=self.ttl, rdata=AAAA(address))
        return RR(f"{name}.", QTYPE.A, ttl=self.ttl, rdata=A(address))

    def _negative(self, rcode: int, zone: str | None = None) -> Answer:
        """NXDOMAIN or NODATA; the SOA goes in when the answer is final (lookup), not for every candidate."""
        return Answer(rcode=rcode, authority=[self.soa(zone)] if zone else [])

    def lookup(self, qname: str | DNSLabel, qtype: int) -> Answer | None:
        """The answer for one question, or None when the name is not this zone's to answer."""
        name = str(qname).rstrip(".").lower()
        with self._lock:
            for zone in REVERSE_ZONES:
                if name == zone or name.endswith("." + zone):
                    return self._lookup_reverse(name, qtype, zone)
            if not (name == self.domain or name.endswith("." + self.domain)):
                return None
            labels = name[: -len(self.domain)].rstrip(".").split(".") if name != self.domain else []
            answer = self._lookup_in_zone(name, labels, qtype)
            if not answer.answers and not answer.authority:  # negative: the zone's SOA says for how long
                answer.authority = [self.soa()]
            return answer

    def _lookup_reverse(self, name: str, qtype: int, zone: str) -> Answer | None:
        address = address_from_reverse(name)
        names = self._reverse.get(address) if address else None
        if not names:
            return None  # fallthrough in-addr.arpa ip6.arpa: the host's resolvers answer
        if qtype not in (QTYPE.PTR, QTYPE.ANY):
            return self._negative(RCODE.NOERROR, zone)
        return Answer(answers=[RR(f"{name}.", QTYPE.PTR, ttl=self.ttl, rdata=PTR(f"{target}."))
                               for target in sorted(names)])

    def _lookup_in_zone(self, name: str, labels: list[str], qtype: int) -> Answer:
        nodata = self._negative(RCODE.NOERROR)
        nxdomain = self._negative(RCODE.NXDOMAIN)
        if not labels:  # the apex
            if qtype in (QTYPE.SOA, QTYPE.ANY):
                return Answer(answers=[self.soa()])
            if qtype == QTYPE.NS:
                return Answer(answers=[RR(f"{self.domain}.", QTYPE.NS, ttl=self.ttl,
                                          rdata=NS(f"ns.dns.{self.domain}."))])
            return nodata
        if labels == ["dns-version"]:
            if qtype in (QTYPE.TXT, QTYPE.ANY):
                return Answer(answers=[RR(f"{name}.", QTYPE.TXT, ttl=self.ttl, rdata=TXT(DNS_SCHEMA_VERSION))])
            return nodata
        kind = labels[-1]
        rest = labels[:-1]
        if kind == "svc":
            return self._lookup_service_names(name, rest, qtype, nodata, nxdomain)
        if kind == "pod":
            return self._lookup_pod(name, rest, qtype, nodata, nxdomain)
        return nxdomain

    def _lookup_pod(self, name: str, rest: list[str], qtype: int, nodata: Answer, nxdomain: Answer) -> Answer:
        if not rest:
            return nodata
        if len(rest) == 1:  # <ns>.pod.<zone>: CoreDNS answers NODATA for any namespace in `pods insecure`
            return nodata
        if len(rest) != 2:
            return nxdomain
        dashed = rest[0]
        candidate = dashed.replace("-", ".") if dashed.count("-") == 3 else dashed.replace("-", ":")
        try:
            address = str(ipaddress.ip_address(candidate))
        except ValueError:
            return nxdomain
        wanted = QTYPE.AAAA if ":" in address else QTYPE.A
        if qtype not in (wanted, QTYPE.ANY):
            return nodata
        return Answer(answers=[self._address_rr(name, address)])

    def _lookup_service_names(self, name: str, rest: list[str], qtype: int, nodata: Answer,
                              nxdomain: Answer) -> Answer:
        if not rest:  # svc.<zone>
            return nodata
        namespace = rest[-1]
        if len(rest) == 1:  # <ns>.svc.<zone> exists while the namespace has Services
            return nodata if namespace in self._namespaces else nxdomain
        entry = self._services.get((namespace, rest[-2]))
        if entry is None:
            return nxdomain
        key = (namespace, entry.name)
        below = rest[:-2]
        if not below:
            return self._service_answer(name, entry, key, qtype, nodata)
        if len(below) == 1:
            if below[0].startswith("_"):  # _<proto>.<svc>...: an empty non-terminal of the SRV names
                protocols = {f"_{p.protocol}" for p in self._ports(entry, key) if p.name}
                return nodata if below[0] in protocols else nxdomain
            return self._endpoint_answer(name, entry, key, below[0], qtype, nodata, nxdomain)
        if len(below) == 2 and below[0].startswith("_") and below[1].startswith("_"):
            return self._srv_answer(entry, key, below[0][1:], below[1][1:], qtype, nodata, nxdomain)
        return nxdomain

    def _ports(self, entry: ServiceEntry, key: tuple[str, str]) -> list[PortEntry]:
        # a headless Service's SRV ports are its endpoints' (targetPort), as CoreDNS reads them
        return self._endpoint_ports(key) if entry.headless else entry.ports

    def _service_answer(self, name: str, entry: ServiceEntry, key: tuple[str, str], qtype: int,
                        nodata: Answer) -> Answer:
        if entry.external_name is not None:
            answer = Answer(answers=[RR(f"{name}.", QTYPE.CNAME, ttl=self.ttl,
                                        rdata=CNAME(f"{entry.external_name}."))])
            if qtype in (QTYPE.A, QTYPE.AAAA):
                self._chase(entry.external_name, qtype, answer)
            return answer
        if qtype == QTYPE.SRV:
            return self._srv_records(entry, key, self._ports(entry, key), nodata)
        if entry.headless:
            addresses = [ep.address for ep in self._endpoints(key)]
        else:
            addresses = entry.cluster_ips
        return self._addresses(name, addresses, qtype, nodata)

    def _chase(self, target: str, qtype: int, answer: Answer) -> None:
        """Follow an ExternalName's CNAME inside the zone; hand a target outside it to the server."""
        for _ in range(MAX_CNAME_CHAIN):
            if not (target == self.domain or target.endswith("." + self.domain)):
                answer.chase = target
                return
            labels = target[: -len(self.domain)].rstrip(".").split(".")
            further = self._lookup_in_zone(target, labels, qtype)
            answer.answers += further.answers
            if further.rcode != RCODE.NOERROR or not further.answers:
                answer.rcode = further.rcode
                answer.authority = [self.soa()]
                return
            last = further.answers[-1]
            if last.rtype != QTYPE.CNAME:
                return
            target = str(last.rdata.label).rstrip(".").lower()

    def _addresses(self, name: str, addresses: list[str], qtype: int, nodata: Answer) -> Answer:
        if qtype == QTYPE.ANY:
            records = [self._address_rr(name, a) for a in addresses]
        elif qtype == QTYPE.A:
            records = [self._address_rr(name, a) for a in addresses if ":" not in a]
        elif qtype == QTYPE.AAAA:
            records = [self._address_rr(name, a) for a in addresses if ":" in a]
        else:
            records = []
        return Answer(answers=records) if records else nodata

    def _endpoint_answer(self, name: str, entry: ServiceEntry, key: tuple[str, str], label: str, qtype: int,
                         nodata: Answer, nxdomain: Answer) -> Answer:
        if not entry.headless:
            return nxdomain
        addresses = [ep.address for ep in self._endpoints(key) if ep.hostname == label]
        if not addresses:
            return nxdomain
        return self._addresses(name, addresses, qtype, nodata)

    def _srv_answer(self, entry: ServiceEntry, key: tuple[str, str], port_name: str, protocol: str, qtype: int,
                    nodata: Answer, nxdomain: Answer) -> Answer:
        ports = [p for p in self._ports(entry, key) if p.name and p.name == port_name and p.protocol == protocol]
        if not ports or entry.external_name is not None:
            return nxdomain
        if qtype not in (QTYPE.SRV, QTYPE.ANY):
            return nodata
        return self._srv_records(entry, key, ports, nodata, owner=f"_{port_name}._{protocol}.")

    def _srv_records(self, entry: ServiceEntry, key: tuple[str, str], ports: list[PortEntry], nodata: Answer,
                     owner: str = "") -> Answer:
        fqdn = self._service_fqdn(entry)
        targets: list[tuple[str, str | None]]  # (target name, address for the additional section)
        if entry.headless:
            targets = [(f"{ep.hostname}.{fqdn}", ep.address) for ep in self._endpoints(key)]
        else:
            targets = [(fqdn, None)]
        pairs = [(port, target) for port in ports for target in targets]
        if not pairs:
            return nodata
        weight = max(1, 100 // len(pairs))  # CoreDNS spreads a weight of 100 over the records
        answer = Answer()
        for port, (target, _) in pairs:
            answer.answers.append(RR(f"{owner}{fqdn}.", QTYPE.SRV, ttl=self.ttl,
                                     rdata=SRV(priority=0, weight=weight, port=port.port, target=f"{target}.")))
        if entry.headless:
            answer.additional = [self._address_rr(target, address) for target, address in targets if address]
        else:
            answer.additional = [self._address_rr(fqdn, ip) for ip in entry.cluster_ips]
        return answer

    # -- for the server's metrics and tests ----------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        """(Services, EndpointSlices) held."""
        with self._lock:
            return len(self._services), len(self._slice_owner)
