"""Services and their endpoints into one iptables-restore batch: upstream's pkg/proxy/iptables/proxier.go.

Chains, all named from one prefix (`--iptables-chain-prefix`, upstream's fixed `KUBE`), so that
several clusters on one host (every kubelet of a host shares its network namespace) keep to their
own chains and `--cleanup` removes only its own:

    nat     PREROUTING, OUTPUT -> P-SERVICES     -d clusterIP --dport port -> P-SVC-<hash>
                                                 -d lbIP/externalIP --dport port -> P-EXT-<hash>
                                                 -m addrtype --dst-type LOCAL -> P-NODEPORTS
            P-NODEPORTS         --dport nodePort -> P-EXT-<hash>
            P-SVC-<hash>        masquerade off-cluster sources; affinity (-m recent) then
                                -m statistic --probability 1/n per endpoint -> P-SEP-<hash>
            P-SVL-<hash>        the same over the local endpoints (a traffic policy of Local)
            P-EXT-<hash>        mark for masquerade (Cluster policy) -> P-SVC, or Local's rules -> P-SVL
            P-SEP-<hash>        hairpin mark; DNAT to ip:port
            P-MARK-MASQ         set the masquerade bit; POSTROUTING -> P-POSTROUTING masquerades it
    filter  INPUT/FORWARD/OUTPUT -> P-SERVICES, P-EXTERNAL-SERVICES: REJECT a Service port without
                                endpoints (a fast refusal, not a hang), DROP one without local ones
            FORWARD -> P-FORWARD: drop INVALID, accept marked and established traffic

Chain names use upstream's hashes: base32(sha256("ns/name[:port]" + protocol [+ "ip:port"]))[:16].

Partial syncs: every sync rewrites the top chains (P-SERVICES, P-NODEPORTS, ...) in full, and of
the per-Service chains only those whose rules changed since the last successful sync; chains no
longer wanted are flushed and deleted (-X) in the same batch. Only the Service ports whose info or
endpoints changed have their rules built again (a cache between syncs). A full sync (the first one,
after a failure, and once an hour: upstream's FullSyncPeriod) rewrites every chain; on start the
chains already in the kernel are read from iptables-save so a restarted proxy deletes what it no
longer wants.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from proxy.serviceport import EndpointInfo, ServicePortInfo, ServicePortName, categorize, usable

DEFAULT_CHAIN_PREFIX = "KUBE"
CHAIN_PREFIX_PATTERN = re.compile(r"^[A-Z][A-Z0-9]{0,6}$")  # + "-SVC-" + 16 chars stays within 28
DEFAULT_MASQUERADE_BIT = 14  # --iptables-masquerade-bit: mark 0x4000

# the per-Service chains' middle parts, upstream's servicePortChainNamePrefix and friends
PER_SERVICE_KINDS = ("SVC", "SVL", "EXT", "FW", "SEP")


def _hash(text: str) -> str:
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:16]


def port_proto_hash(name: ServicePortName) -> str:
    """upstream portProtoHash(servicePortName, protocol)."""
    return _hash(str(name) + name.protocol.lower())


def endpoint_hash(name: ServicePortName, endpoint: str) -> str:
    """upstream servicePortEndpointChainName's hash of ("ns/name:port", protocol, "ip:port")."""
    return _hash(str(name) + name.protocol.lower() + endpoint)


@dataclass(frozen=True)
class Chains:
    """The names of one proxy's chains."""

    prefix: str = DEFAULT_CHAIN_PREFIX

    def __post_init__(self) -> None:
        if not CHAIN_PREFIX_PATTERN.match(self.prefix):
            raise ValueError(f"chain prefix {self.prefix!r} must match {CHAIN_PREFIX_PATTERN.pattern}")

    @property
    def services(self) -> str:
        return f"{self.prefix}-SERVICES"

    @property
    def external_services(self) -> str:
        return f"{self.prefix}-EXTERNAL-SERVICES"

    @property
    def nodeports(self) -> str:
        return f"{self.prefix}-NODEPORTS"

    @property
    def postrouting(self) -> str:
        return f"{self.prefix}-POSTROUTING"

    @property
    def mark_masq(self) -> str:
        return f"{self.prefix}-MARK-MASQ"

    @property
    def forward(self) -> str:
        return f"{self.prefix}-FORWARD"

    def svc(self, name: ServicePortName) -> str:
        return f"{self.prefix}-SVC-{port_proto_hash(name)}"

    def svl(self, name: ServicePortName) -> str:
        return f"{self.prefix}-SVL-{port_proto_hash(name)}"

    def ext(self, name: ServicePortName) -> str:
        return f"{self.prefix}-EXT-{port_proto_hash(name)}"

    def sep(self, name: ServicePortName, endpoint: EndpointInfo) -> str:
        return f"{self.prefix}-SEP-{endpoint_hash(name, str(endpoint))}"

    def nat_top(self) -> tuple[str, ...]:
        return (self.services, self.nodeports, self.postrouting, self.mark_masq)

    def filter_top(self) -> tuple[str, ...]:
        return (self.services, self.external_services, self.forward)

    def is_own(self, chain: str) -> bool:
        """Whether a chain in the kernel is one of ours (top or per-Service)."""
        if chain in self.nat_top() or chain in self.filter_top():
            return True
        kind, _, rest = chain.removeprefix(f"{self.prefix}-").partition("-")
        return chain.startswith(f"{self.prefix}-") and kind in PER_SERVICE_KINDS and len(rest) == 16

    def jump_rules(self) -> list[tuple[str, str, list[str]]]:
        """(table, built-in chain, rule) for the jumps into our chains, upstream's iptablesJumpChains."""
        return [
            ("filter", "INPUT", ["-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                                 "kubernetes externally-visible service portals", "-j", self.external_services]),
            ("filter", "FORWARD", ["-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                                   "kubernetes externally-visible service portals", "-j", self.external_services]),
            ("filter", "FORWARD", ["-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                                   "kubernetes service portals", "-j", self.services]),
            ("filter", "OUTPUT", ["-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                                  "kubernetes service portals", "-j", self.services]),
            ("filter", "FORWARD", ["-m", "comment", "--comment", "kubernetes forwarding rules",
                                   "-j", self.forward]),
            ("nat", "OUTPUT", ["-m", "comment", "--comment", "kubernetes service portals", "-j", self.services]),
            ("nat", "PREROUTING", ["-m", "comment", "--comment", "kubernetes service portals",
                                   "-j", self.services]),
            ("nat", "POSTROUTING", ["-m", "comment", "--comment", "kubernetes postrouting rules",
                                    "-j", self.postrouting]),
        ]


def _comment(text: str) -> str:
    return f'-m comment --comment "{text}"'


@dataclass
class ProxierConfig:
    chains: Chains = field(default_factory=Chains)
    cluster_cidr: str = "10.244.0.0/16"
    masquerade_all: bool = False
    masquerade_bit: int = DEFAULT_MASQUERADE_BIT
    local_nodes: Collection[str] = ()  # the nodes of this host (a traffic policy of Local keeps their endpoints)

    @property
    def masquerade_mark(self) -> str:
        return f"{1 << self.masquerade_bit:#x}"


@dataclass
class RuleSet:
    """Desired rules: the top chains in full, and every per-Service chain with its rules."""

    filter_top: dict[str, list[str]]
    nat_top: dict[str, list[str]]
    nat_chains: dict[str, list[str]]  # per-Service chains


def _balance(c: Chains, svc: ServicePortInfo, chain: str, targets: list[EndpointInfo]) -> list[str]:
    """Spread new connections over `targets`: affinity first (-m recent), then 1/n, 1/(n-1) ... 1."""
    text = str(svc.name)
    rules = []
    if svc.affinity_timeout:
        for ep in targets:
            sep = c.sep(svc.name, ep)
            rules.append(f"-A {chain} {_comment(f'{text} -> {ep}')} -m recent --name {sep} "
                         f"--rcheck --seconds {svc.affinity_timeout} --reap -j {sep}")
    for i, ep in enumerate(targets):
        left = len(targets) - i
        stat = f"-m statistic --mode random --probability {1 / left:.10f} " if left > 1 else ""
        rules.append(f"-A {chain} {_comment(f'{text} -> {ep}')} {stat}-j {c.sep(svc.name, ep)}")
    return rules


@dataclass
class ServiceRules:
    """One Service port's share of the rules (kept between syncs: rebuilt only when it changed)."""

    filter_services: list[str]
    filter_external: list[str]
    nat_services: list[str]
    nat_nodeports: list[str]
    chains: dict[str, list[str]]


RuleCache = dict[ServicePortName, tuple[tuple[ServicePortInfo, tuple[EndpointInfo, ...]], ServiceRules]]


def service_rules(config: ProxierConfig, svc: ServicePortInfo, eps: list[EndpointInfo]) -> ServiceRules:
    """The rules of one Service port: its lines in the top chains, and its own chains."""
    c = config.chains
    name = svc.name
    f_services: list[str] = []
    f_external: list[str] = []
    n_services: list[str] = []
    n_nodeports: list[str] = []
    chains: dict[str, list[str]] = {}
    proto = name.protocol.lower()
    text = str(name)
    cluster_eps, external_eps, any_eps = categorize(svc, eps, config.local_nodes)
    svc_chain, svl_chain, ext_chain = c.svc(name), c.svl(name), c.ext(name)
    dport = f"-p {proto} -m {proto} --dport"

    # endpoint chains of every endpoint used by either policy
    used = {str(e): e for e in [*usable(eps), *cluster_eps, *external_eps]}
    for ep in used.values():
        sep = c.sep(name, ep)
        rules = [f"-A {sep} {_comment(text)} -s {ep.ip}/32 -j {c.mark_masq}"]  # hairpin
        recent = f"-m recent --name {sep} --set " if svc.affinity_timeout else ""
        rules.append(f"-A {sep} {_comment(text)} -p {proto} {recent}-m {proto} -j DNAT --to-destination {ep}")
        chains[sep] = rules

    # cluster IP
    if cluster_eps:
        internal_chain = svl_chain if svc.internal_local else svc_chain
        n_services.append(f"-A {c.services} -d {svc.cluster_ip}/32 {_comment(f'{text} cluster IP')} "
                          f"{dport} {svc.port} -j {internal_chain}")
    else:
        target, why = ("REJECT", "has no endpoints") if not any_eps else ("DROP", "has no local endpoints")
        f_services.append(f"-A {c.services} -d {svc.cluster_ip}/32 {_comment(f'{text} {why}')} "
                          f"{dport} {svc.port} -j {target}")
    # the Cluster-policy chain over every usable endpoint (the cluster IP's, and external Cluster's)
    if any_eps:
        masq = "" if config.masquerade_all else f"! -s {config.cluster_cidr} "
        chains[svc_chain] = [f"-A {svc_chain} {_comment(f'{text} cluster IP')} {masq}-d {svc.cluster_ip}/32 "
                             f"{dport} {svc.port} -j {c.mark_masq}", *_balance(c, svc, svc_chain, usable(eps))]
    # the Local-policy chain over the endpoints on this host's nodes
    local_eps = cluster_eps if svc.internal_local else external_eps if svc.external_local else []
    if local_eps:
        chains[svl_chain] = _balance(c, svc, svl_chain, local_eps)

    # external destinations: nodePort, load-balancer ingress IPs, external IPs
    if svc.externally_accessible:
        if external_eps:
            if svc.external_local:
                chains[ext_chain] = [
                    # pods and the node itself go to the whole Service (upstream: no short-circuit to local)
                    f'-A {ext_chain} {_comment("pod traffic for " + text + " external destinations")} '
                    f"-s {config.cluster_cidr} -j {svc_chain}",
                    f'-A {ext_chain} {_comment("masquerade LOCAL traffic for " + text + " external destinations")} '
                    f"-m addrtype --src-type LOCAL -j {c.mark_masq}",
                    f'-A {ext_chain} {_comment("route LOCAL traffic for " + text + " external destinations")} '
                    f"-m addrtype --src-type LOCAL -j {svc_chain}",
                    f"-A {ext_chain} -j {svl_chain}",
                ]
            else:
                chains[ext_chain] = [
                    f'-A {ext_chain} {_comment("masquerade traffic for " + text + " external destinations")} '
                    f"-j {c.mark_masq}",
                    f"-A {ext_chain} -j {svc_chain}",
                ]
            for ip in (*svc.load_balancer_ips, *svc.external_ips):
                n_services.append(f"-A {c.services} -d {ip}/32 {_comment(f'{text} external IP')} "
                                  f"{dport} {svc.port} -j {ext_chain}")
            if svc.node_port:
                n_nodeports.append(f"-A {c.nodeports} {_comment(text)} {dport} {svc.node_port} -j {ext_chain}")
        else:
            target, why = ("REJECT", "has no endpoints") if not any_eps else ("DROP", "has no local endpoints")
            for ip in (*svc.load_balancer_ips, *svc.external_ips):
                f_external.append(f"-A {c.external_services} -d {ip}/32 {_comment(f'{text} {why}')} "
                                  f"{dport} {svc.port} -j {target}")
            if svc.node_port:
                f_external.append(f"-A {c.external_services} {_comment(f'{text} {why}')} "
                                  f"-m addrtype --dst-type LOCAL {dport} {svc.node_port} -j {target}")

    return ServiceRules(f_services, f_external, n_services, n_nodeports, chains)


def build_rules(config: ProxierConfig, services: Mapping[ServicePortName, ServicePortInfo],
                endpoints: Mapping[ServicePortName, list[EndpointInfo]], cache: RuleCache | None = None) -> RuleSet:
    """Every rule this proxy wants, as upstream's syncProxyRules writes them (pure but for `cache`:
    the Service ports whose info and endpoints are unchanged since the call that filled it are not
    built again, which is most of a sync's time with 1,000 Services)."""
    c = config.chains
    mark = config.masquerade_mark
    f_services: list[str] = []
    f_external: list[str] = []
    f_forward = [
        f"-A {c.forward} -m conntrack --ctstate INVALID -j DROP",
        f'-A {c.forward} {_comment("kubernetes forwarding rules")} -m mark --mark {mark}/{mark} -j ACCEPT',
        f'-A {c.forward} {_comment("kubernetes forwarding conntrack rule")} '
        f"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
    ]
    n_services: list[str] = []
    n_nodeports: list[str] = []
    n_postrouting = [
        f"-A {c.postrouting} -m mark ! --mark {mark}/{mark} -j RETURN",
        f"-A {c.postrouting} -j MARK --xor-mark {mark}",
        f'-A {c.postrouting} {_comment("kubernetes service traffic requiring SNAT")} -j MASQUERADE --random-fully',
    ]
    n_mark = [f"-A {c.mark_masq} -j MARK --or-mark {mark}"]
    chains: dict[str, list[str]] = {}

    for name in sorted(services, key=str):
        svc = services[name]
        eps = endpoints.get(name, [])
        key = (svc, tuple(eps))
        cached = cache.get(name) if cache is not None else None
        if cached is not None and cached[0] == key:
            part = cached[1]
        else:
            part = service_rules(config, svc, eps)
            if cache is not None:
                cache[name] = (key, part)
        f_services += part.filter_services
        f_external += part.filter_external
        n_services += part.nat_services
        n_nodeports += part.nat_nodeports
        chains.update(part.chains)
    if cache is not None:
        for gone in set(cache) - set(services):
            del cache[gone]

    # last: local destinations go on to the node ports (upstream's "kubernetes service nodeports")
    last = _comment("kubernetes service nodeports; NOTE: this must be the last rule in this chain")
    # not on 127.0.0.0/8: that would need route_localnet, a host-wide sysctl (upstream's
    # --iptables-localhost-nodeports=false)
    n_services.append(f"-A {c.services} {last} ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j {c.nodeports}")
    return RuleSet(
        filter_top={c.services: f_services, c.external_services: f_external, c.forward: f_forward},
        nat_top={c.services: n_services, c.nodeports: n_nodeports, c.postrouting: n_postrouting,
                 c.mark_masq: n_mark},
        nat_chains=chains,
    )


@dataclass
class RestoreBatch:
    """One iptables-restore --noflush input and what it leaves in the kernel once applied."""

    text: str
    written: list[str]  # per-Service chains (re)written
    deleted: list[str]  # per-Service chains deleted


def restore_batch(rules: RuleSet, existing: Mapping[str, list[str]] | None,
                  present: Collection[str]) -> RestoreBatch:
    """The batch taking the kernel from `existing` (per-Service chain -> rules as last written; None
    for a full sync) and `present` (per-Service chains in the kernel) to `rules`."""
    # nat first: the kernel takes each table's COMMIT on its own, and nat (thousands of chains) takes
    # long to commit, filter (a few REJECTs) not. A Service gaining endpoints is DNATed before its REJECT
    # goes, one losing them is REJECTed right after its DNAT went: the gap where neither holds (its
    # packets routed to the cluster IP itself) is filter's short commit, not nat's long one
    lines = ["*nat"]
    lines += [f":{chain} - [0:0]" for chain in rules.nat_top]
    written = [chain for chain, chain_rules in rules.nat_chains.items()
               if existing is None or chain not in present or not _same(existing.get(chain), chain_rules)]
    deleted = sorted(set(present) - set(rules.nat_chains))
    lines += [f":{chain} - [0:0]" for chain in [*written, *deleted]]
    for chain_rules in rules.nat_top.values():
        lines += chain_rules
    for chain in written:
        lines += rules.nat_chains[chain]
    lines += [f"-X {chain}" for chain in deleted]
    lines += ["COMMIT", "*filter"]
    lines += [f":{chain} - [0:0]" for chain in rules.filter_top]
    for chain_rules in rules.filter_top.values():
        lines += chain_rules
    lines += ["COMMIT", ""]
    return RestoreBatch("\n".join(lines), written, deleted)


def _same(old: list[str] | None, new: list[str]) -> bool:
    return old is new or old == new  # the rule cache hands back the very list of an unchanged chain


def cleanup_batch(save_output: str, chains: Chains) -> str:
    """An iptables-restore --noflush batch removing our jump rules and chains from every table in
    `save_output` (iptables-save of filter and nat); others' chains and rules stay."""
    out: list[str] = []
    table: str | None = None
    jumps: list[str] = []
    own: list[str] = []

    def flush_table() -> None:
        if table is not None and (jumps or own):
            out.append(f"*{table}")
            out.extend(jumps)
            out.extend(f":{chain} - [0:0]" for chain in own)  # flushes them, so -X finds no references
            out.extend(f"-X {chain}" for chain in own)
            out.append("COMMIT")

    for line in save_output.splitlines():
        if line.startswith("*"):
            flush_table()
            table, jumps, own = line[1:].strip(), [], []
        elif line.startswith(":"):
            name = line[1:].split(" ", 1)[0]
            if chains.is_own(name):
                own.append(name)
        elif line.startswith("-A "):
            parts = line.split()
            chain = parts[1]
            target = parts[parts.index("-j") + 1] if "-j" in parts else ""
            if not chains.is_own(chain) and chains.is_own(target):
                jumps.append("-D " + line[3:])
    flush_table()
    return "\n".join(out) + "\n" if out else ""
