"""The CNI network configuration of one node (what libcni reads from /etc/cni/net.d upstream).

Each node gets its own network, so several kubelets on one host never share a bridge or an IP pool:

- a network configuration *list* named `minik8s-<node>`: the `bridge` plugin on a node bridge
  (`mk8s-<node>`, at most 15 characters as Linux wants) that is the pods' gateway, with
  `host-local` IPAM handing out addresses of the node's podCIDR (pool files under the node's own
  state directory), then `portmap` for hostPort mappings (capability `portMappings`);
- a second list for the loopback interface (`loopback` plugin on `lo`), as upstream runtimes do.

Masquerading of traffic leaving the cluster CIDR is not left to the bridge plugin's per-pod
`ipMasq` chains (they can only be torn down while the pod's netns still exists, so a crashed
sandbox would leak them): one rule per cluster CIDR, kept by `cni.host`, does the same job.
Everything here is pure: no I/O.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CNI_VERSION = "1.0.0"
DEFAULT_CLUSTER_CIDR = "10.244.0.0/16"
DEFAULT_CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
BRIDGE_PREFIX = "mk8s-"
IFNAMSIZ = 15  # Linux interface names: at most 15 characters
LOOPBACK_NETWORK = "cni-loopback"


def bridge_name(node_name: str) -> str:
    """`mk8s-<node>`; names too long for Linux keep a prefix of the node name and a hash of all of it."""
    base = re.sub(r"[^a-z0-9-]", "-", node_name.lower()) or "node"
    name = BRIDGE_PREFIX + base
    if len(name) <= IFNAMSIZ:
        return name
    digest = hashlib.sha256(node_name.encode()).hexdigest()
    room = IFNAMSIZ - len(BRIDGE_PREFIX) - 6
    return f"{BRIDGE_PREFIX}{base[:room]}{digest[:6]}"


def network_name(node_name: str) -> str:
    return f"minik8s-{node_name}"


@dataclass(frozen=True)
class NodeNetwork:
    """Where one node's pods live on the network, and where its CNI state is kept."""

    node_name: str
    pod_cidr: str
    state_dir: Path  # the kubelet's root dir; CNI state goes under <state_dir>/cni
    cluster_cidr: str = DEFAULT_CLUSTER_CIDR
    mtu: int | None = None

    def __post_init__(self) -> None:
        subnet = ipaddress.ip_network(self.pod_cidr, strict=True)
        if subnet.version != 4:
            raise ValueError(f"pod CIDR {self.pod_cidr}: only IPv4 is supported")
        if subnet.num_addresses < 4:
            raise ValueError(f"pod CIDR {self.pod_cidr} is too small for a gateway and pods")

    @property
    def name(self) -> str:
        return network_name(self.node_name)

    @property
    def bridge(self) -> str:
        return bridge_name(self.node_name)

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.pod_cidr)

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def cni_dir(self) -> Path:
        return self.state_dir / "cni"

    @property
    def ipam_dir(self) -> Path:
        """host-local's dataDir; it keeps one file per leased address in <ipam_dir>/<network name>/."""
        return self.cni_dir / "ipam"

    @property
    def lease_dir(self) -> Path:
        return self.ipam_dir / self.name

    @property
    def cache_dir(self) -> Path:
        """Results of ADD, kept for DEL and CHECK (libcni's /var/lib/cni/results)."""
        return self.cni_dir / "results"

    def config_list(self) -> dict[str, Any]:
        """The pod network: bridge + host-local, then portmap."""
        return pod_network_config_list(self.node_name, {"subnet": self.pod_cidr, "gateway": self.gateway},
                                       self.ipam_dir, self.mtu)


def pod_network_config_list(node_name: str, ipam_range: dict[str, str], ipam_dir: Path,
                            mtu: int | None = None) -> dict[str, Any]:
    """The node's pod network list (bridge `mk8s-<node>` + host-local on `ipam_range`, then portmap)."""
    bridge: dict[str, Any] = {
        "type": "bridge",
        "bridge": bridge_name(node_name),
        "isGateway": True,
        "ipMasq": False,  # see the module docstring: cni.host masquerades per cluster CIDR
        "hairpinMode": True,
        "ipam": {
            "type": "host-local",
            "ranges": [[ipam_range]],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": str(ipam_dir),
        },
    }
    if mtu:
        bridge["mtu"] = mtu
    return {
        "cniVersion": CNI_VERSION,
        "name": network_name(node_name),
        "plugins": [
            bridge,
            {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True},
        ],
    }


# containerd's CRI plugin renders its `conf_template` (a Go text/template) with the podCIDR the kubelet hands
# over in UpdateRuntimeConfig (containerd pkg/cri/server/update_runtime_config.go, field .PodCIDR).
CONTAINERD_POD_CIDR = "{{.PodCIDR}}"


def containerd_conf_template(node_name: str, ipam_dir: Path, mtu: int | None = None) -> dict[str, Any]:
    """The same pod network as `NodeNetwork.config_list`, with containerd's placeholder for the podCIDR.

    host-local's gateway defaults to the range's first address, the one `NodeNetwork.gateway` names; the
    loopback network is containerd's own (go-cni's `cni-loopback`, as `loopback_config_list`)."""
    return pod_network_config_list(node_name, {"subnet": CONTAINERD_POD_CIDR}, ipam_dir, mtu)


def loopback_config_list() -> dict[str, Any]:
    """The loopback network, run on `lo` of every pod."""
    return {"cniVersion": CNI_VERSION, "name": LOOPBACK_NETWORK, "plugins": [{"type": "loopback"}]}


def port_mappings(containers: list[Any]) -> list[dict[str, Any]]:
    """portmap's runtimeConfig from the pod's containers: every port with a hostPort."""
    out: list[dict[str, Any]] = []
    for container in containers:
        for port in getattr(container, "ports", None) or []:
            if port.host_port:
                entry: dict[str, Any] = {"hostPort": port.host_port, "containerPort": port.container_port,
                                         "protocol": (port.protocol or "TCP").lower()}
                if port.host_ip:
                    entry["hostIP"] = port.host_ip
                out.append(entry)
    return out
