"""The DNS configuration of a pod's sandbox (upstream pkg/kubelet/network/dns/dns.go, Configurer).

From the pod's dnsPolicy, the kubelet's --cluster-dns / --cluster-domain / --resolv-conf and the
pod's dnsConfig, the runtime gets a CRI DNSConfig (nameservers, searches, options) and writes the
sandbox's /etc/resolv.conf from it:

- ClusterFirst (the default; on a host-network pod it means Default) and ClusterFirstWithHostNet:
  the cluster DNS as the only nameservers, search `<ns>.svc.<domain> svc.<domain> <domain>` then
  the host's searches, `options ndots:5`. Without --cluster-dns the pod falls back to Default,
  with upstream's MissingClusterDNS events on the node and the pod;
- Default: the host's resolv.conf (--resolv-conf; "" means none: nameserver 127.0.0.1, search .);
- None: nothing but the pod's dnsConfig.
dnsConfig is merged in (nameservers and searches appended without duplicates; options by name,
the pod's winning), then cut to libc's limits: 3 nameservers, 32 search domains (none over 253
characters) and 2048 characters of search line, with a DNSConfigForming warning event on the pod.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from machinery.api.core_v1 import Node, Pod, PodDNSConfigOption
from machinery.api.meta import ObjectMeta
from machinery.cri import api_pb2 as pb

log = logging.getLogger(__name__)

MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCH_PATHS = 32
MAX_DNS_SEARCH_LIST_CHARS = 2048
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
DEFAULT_DNS_OPTIONS = ["ndots:5"]

EventSink = Callable[[BaseModel, str, str, str], None]


def omit_duplicates(strs: list[str]) -> list[str]:
    return list(dict.fromkeys(strs))


def parse_resolv_conf(text: str) -> tuple[list[str], list[str], list[str]]:
    """(nameservers, searches, options) of a resolv.conf, as upstream's parseResolvConf reads it."""
    nameservers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0]
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "nameserver" and len(fields) >= 2:
            nameservers.append(fields[1])
        elif fields[0] == "search":  # the last search line wins; "x." and "x" count once
            searches = [s.removesuffix(".") for s in fields[1:] if s != "."]
        elif fields[0] == "options":
            options = merge_options(options, fields[1:])
    return nameservers, searches, options


def merge_options(existing: list[str], more: list[str]) -> list[str]:
    """Options by name, a later one replacing an earlier one of the same name (upstream appendOptions)."""
    by_name: dict[str, str] = {}
    for option in [*existing, *more]:
        by_name[option.split(":", 1)[0]] = option
    return list(by_name.values())


def merge_pod_options(existing: list[str], pod_options: list[PodDNSConfigOption]) -> list[str]:
    """upstream mergeDNSOptions: the pod's dnsConfig.options overwrite same-named ones."""
    return merge_options(existing, [f"{o.name}:{o.value}" if o.value else (o.name or "") for o in pod_options])


class Configurer:
    def __init__(self, recorder: EventSink, node_name: str, node_ips: list[str], *, cluster_dns: list[str],
                 cluster_domain: str, resolver_config: str) -> None:
        self.recorder = recorder
        self.node_ref = Node(metadata=ObjectMeta(name=node_name, uid=node_name))  # upstream's nodeRef
        self.node_ips = node_ips
        self.cluster_dns = cluster_dns
        self.cluster_domain = cluster_domain.strip(".")
        self.resolver_config = resolver_config
        self._host_dns: tuple[tuple[int, int, int, int], tuple[list[str], list[str], list[str]]] | None = None

    def host_dns_config(self) -> tuple[list[str], list[str], list[str]]:
        """The host's resolv.conf (--resolv-conf), parsed again only when the file changed.

        Every sandbox needs it, and the kubelet asks on its event loop: a stat, instead of an open, a read and a
        parse per pod. The key is the file's identity and its modification (inode, size, mtime in ns), so an
        edit in place and a replacement (a DHCP client's or resolvconf's rename over it) are both seen at the
        next sandbox, as upstream's reading of the file each time sees them."""
        if not self.resolver_config:
            return [], [], []
        try:
            st = os.stat(self.resolver_config)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if self._host_dns is None or self._host_dns[0] != key:
                self._host_dns = (key, parse_resolv_conf(Path(self.resolver_config).read_text()))
        except OSError as e:
            self._host_dns = None
            log.warning("could not read the resolv.conf %s: %s", self.resolver_config, e)
            return [], [], []
        servers, searches, options = self._host_dns[1]
        return list(servers), list(searches), list(options)  # the caller's to change

    def pod_dns_type(self, pod: Pod) -> str:
        """"cluster", "host" or "none" (upstream getPodDNSType)."""
        spec = pod.spec
        policy = (spec.dns_policy if spec else None) or "ClusterFirst"
        host_network = bool(spec and spec.host_network)
        if policy == "None":
            return "none"
        if policy == "ClusterFirstWithHostNet" or (policy == "ClusterFirst" and not host_network):
            return "cluster"
        if policy in ("ClusterFirst", "Default"):
            return "host"
        log.warning("pod %s/%s: invalid dnsPolicy %r, using ClusterFirst", pod.metadata.namespace,
                    pod.metadata.name, policy)
        return "cluster"

    def searches_for_cluster_first(self, host_searches: list[str], pod: Pod) -> list[str]:
        if not self.cluster_domain:
            return host_searches
        namespace = pod.metadata.namespace or "default"
        return omit_duplicates([f"{namespace}.svc.{self.cluster_domain}", f"svc.{self.cluster_domain}",
                                self.cluster_domain, *host_searches])

    def get_pod_dns(self, pod: Pod) -> pb.DNSConfig:
        servers, searches, options = self.host_dns_config()
        dns_type = self.pod_dns_type(pod)
        if dns_type == "none":
            servers, searches, options = [], [], []
        elif dns_type == "cluster" and self.cluster_dns:
            # the cluster DNS is the pod's only nameserver: it forwards what it does not know itself
            servers = list(self.cluster_dns)
            searches = self.searches_for_cluster_first(searches, pod)
            options = list(DEFAULT_DNS_OPTIONS)
        else:
            if dns_type == "cluster":
                message = ('kubelet does not have ClusterDNS IP configured and cannot create Pod using '
                           '"ClusterFirst" policy. Falling back to "Default" policy.')
                self.recorder(self.node_ref, "Warning", "MissingClusterDNS", message)
                self.recorder(pod, "Warning", "MissingClusterDNS",
                              f'pod: "{pod.metadata.name}_{pod.metadata.namespace}({pod.metadata.uid})". {message}')
            if not self.resolver_config:  # --resolv-conf="": no lookups beyond the local machine
                servers = ["::1" if ":" in ip else "127.0.0.1" for ip in self.node_ips] or ["127.0.0.1"]
                searches = ["."]
        pod_config = pod.spec.dns_config if pod.spec else None
        if pod_config is not None:
            servers = omit_duplicates([*servers, *(pod_config.nameservers or [])])
            searches = omit_duplicates([*searches, *(pod_config.searches or [])])
            options = merge_pod_options(options, pod_config.options or [])
        return pb.DNSConfig(servers=self.nameservers_fitting_limits(servers, pod),
                            searches=self.searches_fitting_limits(searches, pod), options=options)

    def nameservers_fitting_limits(self, nameservers: list[str], pod: Pod) -> list[str]:
        if len(nameservers) > MAX_DNS_NAMESERVERS:
            nameservers = nameservers[:MAX_DNS_NAMESERVERS]
            self.recorder(pod, "Warning", "DNSConfigForming",
                          "Nameserver limits were exceeded, some nameservers have been omitted, the applied "
                          f"nameserver line is: {' '.join(nameservers)}")
        return nameservers

    def searches_fitting_limits(self, searches: list[str], pod: Pod) -> list[str]:
        exceeded = False
        if len(searches) > MAX_DNS_SEARCH_PATHS:
            searches, exceeded = searches[:MAX_DNS_SEARCH_PATHS], True
        kept = [s for s in searches if len(s) <= DNS1123_SUBDOMAIN_MAX_LENGTH]  # glibc 2.28 aborts on longer
        exceeded = exceeded or len(kept) != len(searches)
        searches = kept
        line_length = len(" ".join(searches))
        if line_length > MAX_DNS_SEARCH_LIST_CHARS:
            cut = 0
            for domain in reversed(searches):
                line_length -= len(domain) + 1
                cut += 1
                if line_length <= MAX_DNS_SEARCH_LIST_CHARS:
                    break
            searches, exceeded = searches[: len(searches) - cut], True
        if exceeded:
            self.recorder(pod, "Warning", "DNSConfigForming",
                          "Search Line limits were exceeded, some search paths have been omitted, the applied "
                          f"search line is: {' '.join(searches)}")
        return searches
