"""`python -m kubelet --node-name NAME --kubeconfig FILE ...`: the node agent, with upstream's flag names."""

from __future__ import annotations

import argparse
import asyncio
import socket
from pathlib import Path

from kubelet.kubelet import Kubelet, KubeletConfig, default_runtime_endpoint, run_kubelet
from machinery import logs, tracing
from machinery.nodelabels import KUBELET_LABEL_NAMESPACES, KUBELET_LABELS, unknown_kubernetes_labels
from machinery.timeutil import duration_flag


def _labels(text: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"--node-labels: {item!r} is not key=value")
        out[key] = value
    return out


def _bool_flag(text: str) -> bool:
    """A Go boolean flag's value (strconv.ParseBool)."""
    value = text.strip().lower()
    if value in ("1", "t", "true"):
        return True
    if value in ("0", "f", "false"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {text!r}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="kubelet",
                                description="minik8s kubelet: runs the node's pods on a CRI container runtime")
    p.add_argument("--node-name", default=socket.gethostname().lower(), help="the Node's name (default: hostname)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig with the apiserver's address")
    p.add_argument("--master", default=None, help="apiserver URL (overrides the kubeconfig's server)")
    p.add_argument("--pod-cidr", default=None,
                   help="this node's pod CIDR when the Node has no spec.podCIDR (normally set by node IPAM)")
    p.add_argument("--port", type=int, default=10250, help="port of the kubelet's server (default %(default)s)")
    p.add_argument("--address", default=None, help="address the server binds (default: the node IP)")
    p.add_argument("--root-dir", default=None,
                   help="state directory (default /var/lib/minik8s/kubelet/<node-name>)")
    p.add_argument("--node-ip", default="", help="the node's InternalIP (default: the default route's address)")
    p.add_argument("--node-labels", type=_labels, default={}, help="extra labels, k=v,k2=v2")
    p.add_argument("--crashloop-backoff-base-seconds", type=float, default=10.0,
                   help="first CrashLoopBackOff delay, doubled per restart (default %(default)s)")
    p.add_argument("--crashloop-backoff-max-seconds", type=float, default=300.0,
                   help="CrashLoopBackOff cap (default %(default)s)")
    p.add_argument("--image-pull-backoff-base-seconds", type=float, default=None,
                   help="first ImagePullBackOff delay (default: the crash loop base)")
    p.add_argument("--container-runtime-endpoint", default=None,
                   help="the CRI runtime's socket (default: the Docker shim's, "
                        f"{default_runtime_endpoint('<node-name>')})")
    p.add_argument("--image-service-endpoint", default=None,
                   help="the CRI image service's socket (default: the container runtime endpoint)")
    p.add_argument("--runtime-request-timeout", type=duration_flag, default=120.0,
                   help="deadline of every CRI request but pulls and long exec (Go duration, default 2m)")
    p.add_argument("--node-lease-duration-seconds", type=int, default=40,
                   help="Lease duration; renewed every quarter of it (default %(default)s)")
    p.add_argument("--node-status-update-frequency", type=float, default=10.0,
                   help="seconds between node status checks (default %(default)s)")
    p.add_argument("--node-status-report-frequency", type=float, default=300.0,
                   help="seconds after which an unchanged node status is written again (default %(default)s, "
                        "upstream's 5m: the Lease is the heartbeat)")
    p.add_argument("--cluster-dns", default="",
                   help="the cluster DNS's IP(s), comma-separated: the nameservers of ClusterFirst pods")
    p.add_argument("--cluster-domain", default="cluster.local",
                   help="the cluster's DNS domain, in the search path of ClusterFirst pods (default %(default)s)")
    p.add_argument("--resolv-conf", default="/etc/resolv.conf",
                   help="the resolver configuration of dnsPolicy Default pods, and the base of the others' "
                        "(default %(default)s; \"\" for none)")
    p.add_argument("--housekeeping-interval", type=float, default=10.0,
                   help="seconds between clean-ups of orphaned containers and leases (default %(default)s)")
    p.add_argument("--tls-cert-file", default=None,
                   help="serving certificate: the server speaks HTTPS (default: plain HTTP)")
    p.add_argument("--tls-private-key-file", default=None, help="the serving certificate's key")
    p.add_argument("--client-ca-file", default=None,
                   help="require client certificates from this CA; only system:masters (the apiserver's "
                        "kubelet-client identity) is authorized")
    p.add_argument("--cgroups-per-qos", type=_bool_flag, nargs="?", const=True, default=True, metavar="BOOL",
                   help="make the QoS cgroup hierarchy (kubepods, kubepods/burstable, kubepods/besteffort) and a "
                        "cgroup per pod under it (default %(default)s)")
    p.add_argument("--cgroup-root", default="/",
                   help="the cgroup the QoS hierarchy goes under (default %(default)s)")
    p.add_argument("--cgroup-driver", default="cgroupfs", choices=["cgroupfs"],
                   help="how the kubelet manages cgroups: cgroupfs, as the container runtime (default %(default)s)")
    tracing.add_flag(p)
    logs.add_flags(p)
    args = p.parse_args(argv)
    unknown = unknown_kubernetes_labels(args.node_labels)
    if unknown:  # NodeRestriction would refuse the registration: say so now, as upstream's kubelet does
        p.error(f"unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [{' '.join(unknown)}]\n"
                f"--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix "
                f"({', '.join(KUBELET_LABEL_NAMESPACES)}) or be in the specifically allowed set "
                f"({', '.join(sorted(KUBELET_LABELS))})")
    for flag in ("container_runtime_endpoint", "image_service_endpoint"):
        endpoint = getattr(args, flag)
        if endpoint is not None and not (endpoint.startswith("unix:///") or endpoint.startswith("/")):
            p.error(f"--{flag.replace('_', '-')}: {endpoint!r} is not a unix socket (unix:///path)")
    if not args.cgroup_root.startswith("/"):
        p.error(f"--cgroup-root: {args.cgroup_root!r} is not an absolute cgroupfs path")
    if args.runtime_request_timeout <= 0:
        p.error("--runtime-request-timeout must be positive")
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        p.error("--tls-cert-file and --tls-private-key-file go together")
    if args.client_ca_file and not args.tls_cert_file:
        p.error("--client-ca-file needs --tls-cert-file")
    return args


def config_from_args(args: argparse.Namespace) -> KubeletConfig:
    root = Path(args.root_dir) if args.root_dir else Path("/var/lib/minik8s/kubelet") / args.node_name
    image_base = args.image_pull_backoff_base_seconds or args.crashloop_backoff_base_seconds
    return KubeletConfig(
        node_name=args.node_name, kubeconfig=args.kubeconfig, master=args.master, pod_cidr=args.pod_cidr,
        port=args.port, address=args.address, root_dir=root, node_ip=args.node_ip,
        crashloop_backoff_base=args.crashloop_backoff_base_seconds,
        crashloop_backoff_max=max(args.crashloop_backoff_max_seconds, args.crashloop_backoff_base_seconds),
        image_backoff_base=image_base, image_backoff_max=max(300.0, image_base),
        container_runtime_endpoint=args.container_runtime_endpoint or "",
        image_service_endpoint=args.image_service_endpoint or "",
        runtime_request_timeout=args.runtime_request_timeout, node_labels=args.node_labels,
        lease_duration=args.node_lease_duration_seconds,
        node_status_update_frequency=args.node_status_update_frequency,
        node_status_report_frequency=args.node_status_report_frequency,
        cluster_dns=[s.strip() for s in args.cluster_dns.split(",") if s.strip()],
        cluster_domain=args.cluster_domain, resolv_conf=args.resolv_conf,
        housekeeping_interval=args.housekeeping_interval,
        tls_cert_file=args.tls_cert_file, tls_private_key_file=args.tls_private_key_file,
        client_ca_file=args.client_ca_file,
        cgroups_per_qos=args.cgroups_per_qos, cgroup_root=args.cgroup_root, cgroup_driver=args.cgroup_driver,
    )


def main(argv: list[str] | None = None, kubelet_class: type[Kubelet] = Kubelet) -> None:
    args = parse_args(argv)
    logs.setup(args.v)
    tracing.setup_or_exit(args.tracing_config_file, "kubelet", attributes={"k8s.node.name": args.node_name})
    asyncio.run(run_kubelet(config_from_args(args), kubelet_class))


if __name__ == "__main__":
    main()
