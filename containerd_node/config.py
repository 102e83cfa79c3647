"""One node's containerd: where it keeps everything, and its config v2 (what upstream nodes keep in
/etc/containerd/config.toml; after kind's `containerd.toml` and k3s's `pkg/agent/templates`).

Everything lives under one directory, labelled by a marker file so that clean-up removes only what is ours:

    <dir>/minik8s-containerd-node.json   the label: node name, containerd's pid, socket
    <dir>/config.toml                    containerd's config
    <dir>/containerd.sock                CRI (and containerd's own API); <dir>/containerd.sock.ttrpc
    <dir>/root, <dir>/state              containerd's root (images, snapshots, metadata) and state (tasks)
    <dir>/runc                           runc's state (--root), so a kill -9 of containerd and its shims leaves
                                         containers that `runc --root` still finds
    <dir>/cni/net.d, cni/template.json   CNI: the template rendered with the podCIDR of UpdateRuntimeConfig
    <dir>/cni/ipam                       host-local's leases

Choices that differ from `containerd config default`, and why:
- `sandbox_image`: the locally built pause image (there is no registry);
- `restrict_oom_score_adj`: the kubelet asks for negative oom_score_adj values (-998 for sandboxes), which
  need CAP_SYS_RESOURCE that root does not have on every host (runc then fails with "failed to update
  /proc/self/oom_score_adj: Permission denied"); restricted, containerd keeps them at or above its own;
- `netns_mounts_under_state_dir`: pod network namespaces are mounted under the node's state dir rather than
  /var/run/netns, so they are the node's own and clean-up finds them;
- `stream_server_address` 127.0.0.1, port 0: the exec/attach/port-forward server on loopback, on a port the
  kernel picks (no race with other processes picking "free" ports); Exec answers carry the URL;
- the CNI plugins of Debian's `containernetworking-plugins` (/usr/lib/cni), the node's own conf_dir.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cni.config import DEFAULT_CLUSTER_CIDR, bridge_name, containerd_conf_template, network_name

PAUSE_IMAGE = "minik8s/pause:3.9"
CNI_BIN_DIR = "/usr/lib/cni"
K8S_NAMESPACE = "k8s.io"  # containerd's namespace for everything its CRI plugin makes
MARKER = "minik8s-containerd-node.json"
CNI_RESULTS_DIR = Path("/var/lib/cni/results")  # libcni's cache (go-cni in containerd 1.6 keeps the default)
LOOPBACK_NETWORK = "cni-loopback"  # go-cni's loopback network, attached to every pod
UNIX_PATH_MAX = 107  # sun_path is 108 bytes with its NUL
# snapshotters and tracing that would only slow the start-up down and log errors on this host
DISABLED_PLUGINS = (
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
)


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class NodeLayout:
    """The directory of one node's containerd and what is in it."""

    node_name: str
    base_dir: Path
    cluster_cidr: str = DEFAULT_CLUSTER_CIDR
    log_level: str = "info"

    def __post_init__(self) -> None:
        if not self.node_name:
            raise ConfigError("a containerd node needs a node name")
        if not self.base_dir.is_absolute():
            raise ConfigError(f"the containerd node directory must be absolute: {self.base_dir}")
        # ".ttrpc" is appended for the ttrpc socket
        if len(str(self.socket)) + len(".ttrpc") > UNIX_PATH_MAX:
            raise ConfigError(f"socket path {self.socket} is too long for a unix socket "
                              f"(at most {UNIX_PATH_MAX - len('.ttrpc')} characters): choose a shorter directory")

    @property
    def socket(self) -> Path:
        return self.base_dir / "containerd.sock"

    @property
    def endpoint(self) -> str:
        """The kubelet's --container-runtime-endpoint (and --image-service-endpoint)."""
        return f"unix://{self.socket}"

    @property
    def marker(self) -> Path:
        return self.base_dir / MARKER

    @property
    def config_path(self) -> Path:
        return self.base_dir / "config.toml"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "containerd.log"

    @property
    def root(self) -> Path:
        return self.base_dir / "root"

    @property
    def state(self) -> Path:
        return self.base_dir / "state"

    @property
    def runc_root(self) -> Path:
        """runc's --root as the runc v2 shim uses it: <Root option>/<namespace>."""
        return self.base_dir / "runc"

    @property
    def cni_conf_dir(self) -> Path:
        return self.base_dir / "cni" / "net.d"

    @property
    def cni_template(self) -> Path:
        return self.base_dir / "cni" / "template.json"

    @property
    def ipam_dir(self) -> Path:
        return self.base_dir / "cni" / "ipam"

    @property
    def lease_dir(self) -> Path:
        return self.ipam_dir / network_name(self.node_name)

    @property
    def bridge(self) -> str:
        return bridge_name(self.node_name)

    @property
    def network(self) -> str:
        return network_name(self.node_name)

    @property
    def netns_dir(self) -> Path:
        return self.state / "io.containerd.grpc.v1.cri" / "netns"

    @property
    def task_dir(self) -> Path:
        """The runc v2 shims' bundles (one per sandbox and container; rootfs mounted in each)."""
        return self.state / "io.containerd.runtime.v2.task" / K8S_NAMESPACE

    def config(self) -> dict[str, Any]:
        """containerd's config v2 as a nested mapping (rendered by `render_toml`)."""
        return {
            "version": 2,
            "root": str(self.root),
            "state": str(self.state),
            "disabled_plugins": list(DISABLED_PLUGINS),
            "grpc": {"address": str(self.socket)},
            "ttrpc": {"address": f"{self.socket}.ttrpc"},
            "debug": {"address": "", "level": self.log_level},
            "metrics": {"address": ""},
            "plugins": {
                "io.containerd.internal.v1.opt": {"path": str(self.base_dir / "opt")},
                "io.containerd.grpc.v1.cri": {
                    "sandbox_image": PAUSE_IMAGE,
                    "stream_server_address": "127.0.0.1",
                    "stream_server_port": "0",
                    "netns_mounts_under_state_dir": True,
                    "restrict_oom_score_adj": True,
                    "enable_selinux": False,
                    "containerd": {
                        "snapshotter": "overlayfs",
                        "default_runtime_name": "runc",
                        "runtimes": {"runc": {
                            "runtime_type": "io.containerd.runc.v2",
                            "options": {"Root": str(self.runc_root), "SystemdCgroup": False},
                        }},
                    },
                    "cni": {
                        "bin_dir": CNI_BIN_DIR,
                        "conf_dir": str(self.cni_conf_dir),
                        "conf_template": str(self.cni_template),
                        "max_conf_num": 1,
                    },
                },
            },
        }

    def config_toml(self) -> str:
        return render_toml(self.config())

    def conf_template(self) -> str:
        """The CNI network list containerd renders into conf_dir on UpdateRuntimeConfig."""
        return json.dumps(containerd_conf_template(self.node_name, self.ipam_dir), indent=2) + "\n"


def registry_name(node_name: str) -> str:
    """The node's entry among the host-rule users (cni.host's registry of live kubelets)."""
    return f"containerd-{node_name}"


def write_marker(layout: NodeLayout, pid: int) -> None:
    data = {"node": layout.node_name, "pid": pid, "socket": str(layout.socket), "kind": "minik8s-containerd-node"}
    tmp = layout.marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(data) + "\n")
    os.replace(tmp, layout.marker)


def read_marker(base_dir: Path) -> dict[str, object] | None:
    """The label of a containerd node directory, or None when `base_dir` is not one."""
    try:
        data = json.loads((base_dir / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("kind") != "minik8s-containerd-node" or not data.get("node"):
        return None
    return data


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise ConfigError(f"cannot render {value!r} as TOML")


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def render_toml(doc: dict[str, Any], prefix: tuple[str, ...] = ()) -> str:
    """A nested mapping as TOML: scalars first, then one [table] per nested mapping (dotted, quoted keys)."""
    lines: list[str] = []
    tables: list[tuple[str, dict[str, Any]]] = []
    for key, value in doc.items():
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    out = ""
    if prefix and (lines or not tables):
        out += "[" + ".".join(_toml_key(p) for p in prefix) + "]\n"
    out += "".join(line + "\n" for line in lines)
    for key, value in tables:
        out += ("\n" if out else "") + render_toml(value, (*prefix, key))
    return out
