"""`python -m proxy`: kube-proxy of minik8s, one per host, with upstream's flag names.

    python -m proxy --kubeconfig /etc/minik8s/kube-proxy.conf --hostname-override node-1,node-2
    python -m proxy --master http://127.0.0.1:8080 --iptables-chain-prefix KT01 --min-sync-period 0.1s
    python -m proxy --cleanup [--iptables-chain-prefix KT01]

Every kubelet of a host runs in the host's network namespace, so one proxy serves them all:
--hostname-override takes a comma-separated list of this host's node names, and a traffic policy
of Local keeps the endpoints on any of them (upstream: the one node the proxy runs on).

NodePorts answer on the host's addresses but 127.0.0.0/8 (upstream's --iptables-localhost-nodeports=
false): DNAT from localhost needs route_localnet, a sysctl of the whole host, left alone here.

Several clusters on one host (test clusters beside a developer's local-up) share the host's
packet filter: --iptables-chain-prefix (minik8s's own flag; default KUBE, upstream's names) gives
each proxy its own chains, and --cleanup removes only the chains and jump rules of its prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import platform
import signal
import socket
import sys
from pathlib import Path

from machinery import logs
from machinery.client import KUBE_VERSION, ApiClient
from machinery.kubeconfig import ClientConfig, build_config_from_flags
from machinery.timeutil import duration_flag
from proxy.iptables.proxier import (
    CHAIN_PREFIX_PATTERN,
    DEFAULT_CHAIN_PREFIX,
    DEFAULT_MASQUERADE_BIT,
    Chains,
    ProxierConfig,
)
from proxy.iptables.runner import Runner
from proxy.iptables.syncer import Proxier
from proxy.server import ProxyServer

log = logging.getLogger("proxy")
PROXY_USERNAME = "system:kube-proxy"


def user_agent() -> str:
    """`kube-proxy/v1.30.0 (linux/amd64) minik8s/system:kube-proxy`: who calls, in the audit log."""
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine().lower(), platform.machine().lower())
    return f"kube-proxy/{KUBE_VERSION} ({platform.system().lower() or 'linux'}/{machine}) minik8s/{PROXY_USERNAME}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="proxy", description="minik8s kube-proxy (iptables mode)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig with the apiserver and credentials")
    p.add_argument("--master", default=None, help="apiserver URL; overrides the kubeconfig's server")
    p.add_argument("--hostname-override", default=None,
                   help="this host's node name(s), comma-separated (default: the hostname)")
    p.add_argument("--proxy-mode", default="iptables", choices=["iptables"],
                   help="which proxy mode to use (only iptables)")
    p.add_argument("--sync-period", "--iptables-sync-period", dest="sync_period", type=duration_flag, default=30.0,
                   help="the maximum interval between full syncs (default 30s)")
    p.add_argument("--min-sync-period", "--iptables-min-sync-period", dest="min_sync_period", type=duration_flag,
                   default=1.0, help="the minimum interval between syncs (default 1s)")
    p.add_argument("--cluster-cidr", default="10.244.0.0/16",
                   help="the pods' range: traffic from outside it to Services is masqueraded (default %(default)s)")
    p.add_argument("--masquerade-all", action="store_true", help="SNAT all traffic sent via Service cluster IPs")
    p.add_argument("--iptables-masquerade-bit", type=int, default=DEFAULT_MASQUERADE_BIT,
                   help="the fwmark bit of packets to SNAT, 0-31 (default %(default)s)")
    p.add_argument("--iptables-chain-prefix", default=DEFAULT_CHAIN_PREFIX,
                   help="prefix of every chain (minik8s; default %(default)s, upstream's): one per cluster on a host")
    p.add_argument("--metrics-bind-address", default="127.0.0.1:10249",
                   help="host:port of /metrics; empty to disable (default %(default)s)")
    p.add_argument("--healthz-bind-address", default="0.0.0.0:10256",
                   help="host:port of /healthz; empty to disable (default %(default)s)")
    p.add_argument("--cleanup", action="store_true", help="remove this proxy's rules and chains, then exit")
    logs.add_flags(p)
    args = p.parse_args(argv)
    if not args.cleanup and not args.kubeconfig and not args.master:
        p.error("one of --kubeconfig or --master is required")
    if not CHAIN_PREFIX_PATTERN.match(args.iptables_chain_prefix):
        p.error(f"--iptables-chain-prefix must match {CHAIN_PREFIX_PATTERN.pattern} (chain names have 28 characters)")
    if not 0 <= args.iptables_masquerade_bit <= 31:
        p.error("--iptables-masquerade-bit must be within 0-31")
    if args.sync_period <= 0 or args.min_sync_period < 0 or args.min_sync_period > args.sync_period:
        p.error("need 0 <= --min-sync-period <= --sync-period and --sync-period > 0")
    return args


def client_config(args: argparse.Namespace) -> ClientConfig:
    return build_config_from_flags(args.master, args.kubeconfig, user_agent())


def proxier_config(args: argparse.Namespace) -> ProxierConfig:
    nodes = [n.strip() for n in (args.hostname_override or socket.gethostname()).split(",") if n.strip()]
    return ProxierConfig(chains=Chains(args.iptables_chain_prefix), cluster_cidr=args.cluster_cidr,
                         masquerade_all=args.masquerade_all, masquerade_bit=args.iptables_masquerade_bit,
                         local_nodes=frozenset(nodes))


BRIDGE_NF_CALL_IPTABLES = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


def check_bridge_netfilter() -> None:
    """Pods on one node bridge reach a Service (and a pod its own Service: hairpin) only when bridged
    traffic passes iptables; upstream's proxier warns the same way when it does not."""
    try:
        enabled = BRIDGE_NF_CALL_IPTABLES.read_text().strip() == "1"
    except OSError:
        enabled = False
    if not enabled:
        log.warning("missing br_netfilter module or unset sysctl net.bridge.bridge-nf-call-iptables: "
                    "pods on one bridge may not reach Services (modprobe br_netfilter; sysctl -w "
                    "net.bridge.bridge-nf-call-iptables=1)")


async def run(args: argparse.Namespace) -> int:
    proxier = Proxier(proxier_config(args), Runner())
    if args.cleanup:
        removed = await proxier.cleanup()
        prefix = args.iptables_chain_prefix
        log.info("cleanup: %s", f"removed the {prefix}-* chains" if removed else "nothing to remove")
        return 0
    check_bridge_netfilter()
    config = client_config(args)
    client = ApiClient(config, user_agent=user_agent())
    nodes = sorted(proxier.config.local_nodes)
    server = ProxyServer(client, proxier, node_name=",".join(nodes), sync_period=args.sync_period,
                         min_sync_period=args.min_sync_period)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runners = await server.serve(args.healthz_bind_address or None, args.metrics_bind_address or None)
    log.info("kube-proxy (iptables, chains %s-*) for nodes %s against %s", args.iptables_chain_prefix,
             ",".join(nodes), config.server)
    try:
        await server.run(stop)
    finally:
        # as upstream, a stopped proxy leaves its rules: Services keep working until it is back
        await server.factory.shutdown()
        for runner in runners:
            await runner.cleanup()
        await client.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.setup(args.v)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
