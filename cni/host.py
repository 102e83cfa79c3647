"""The host side of pod networking that no CNI plugin owns: forwarding between node bridges,
masquerading out of the cluster CIDR, and cleaning up bridges and address leases.

Several kubelets on one host each have a bridge (`mk8s-<node>`) holding the gateway address of
their podCIDR. Both bridges live in the host's network namespace, so the kernel already has a
connected route for every node's /24 to its bridge: a packet from a pod on node A to a pod on
node B goes pod A → bridge A → host routing → bridge B → pod B, with no extra routes. Two things
stand in the way on a Docker host, and `ensure_cluster_rules` fixes both in chains of our own,
every rule tagged with the comment `minik8s`:

- Docker sets the filter FORWARD policy to DROP, and br_netfilter makes even traffic between two
  ports of one bridge traverse FORWARD: chain MINIK8S-FORWARD (jumped to first from FORWARD)
  accepts everything from and to the cluster CIDR (flannel's rules);
- traffic leaving the cluster CIDR for elsewhere is masqueraded (chain MINIK8S-POSTROUTING in
  nat), while pod-to-pod traffic keeps its source address, as the Kubernetes network model asks.

The rules are shared by every kubelet on the host; `remove_cluster_rules` takes them away when
the last one stops with no pod left (see kubelet shutdown), under an exclusive host lock that
sandbox set-up holds shared.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

COMMENT = "minik8s"
FORWARD_CHAIN = "MINIK8S-FORWARD"
NAT_CHAIN = "MINIK8S-POSTROUTING"
RUN_DIR = Path(os.environ.get("MINIK8S_RUN_DIR", "/run/minik8s"))
LOCK_FILE = RUN_DIR / "host-network.lock"


class HostNetworkError(Exception):
    pass


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise HostNetworkError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def iptables(*args: str, table: str = "filter", check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run(["iptables", "-w", "10", "-t", table, *args], check)


def _ensure_chain(table: str, chain: str) -> None:
    proc = iptables("-N", chain, table=table, check=False)
    if proc.returncode != 0 and "exists" not in proc.stderr:
        raise HostNetworkError(f"iptables -t {table} -N {chain}: {proc.stderr.strip()}")


def _ensure_rule(table: str, chain: str, rule: list[str], first: bool = False) -> bool:
    """Add `rule` to `chain` unless it is there; True if it was added."""
    if iptables("-C", chain, *rule, table=table, check=False).returncode == 0:
        return False
    if first:
        iptables("-I", chain, "1", *rule, table=table)
    else:
        iptables("-A", chain, *rule, table=table)
    return True


def forward_rules(cluster_cidr: str) -> list[list[str]]:
    return [
        ["-s", cluster_cidr, "-m", "comment", "--comment", f"{COMMENT}: from pods", "-j", "ACCEPT"],
        ["-d", cluster_cidr, "-m", "comment", "--comment", f"{COMMENT}: to pods", "-j", "ACCEPT"],
    ]


def nat_rules(cluster_cidr: str) -> list[list[str]]:
    return [["-s", cluster_cidr, "!", "-d", cluster_cidr, "-m", "comment", "--comment",
             f"{COMMENT}: pods leaving the cluster network", "-j", "MASQUERADE"]]


def ensure_cluster_rules(cluster_cidr: str) -> bool:
    """Idempotently install the forwarding and masquerading rules; True if anything was added."""
    changed = False
    with contextlib.suppress(OSError):
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
    _ensure_chain("filter", FORWARD_CHAIN)
    changed |= _ensure_rule("filter", "FORWARD", ["-m", "comment", "--comment", COMMENT, "-j", FORWARD_CHAIN],
                            first=True)
    for rule in forward_rules(cluster_cidr):
        changed |= _ensure_rule("filter", FORWARD_CHAIN, rule)
    _ensure_chain("nat", NAT_CHAIN)
    changed |= _ensure_rule("nat", "POSTROUTING", ["-m", "comment", "--comment", COMMENT, "-j", NAT_CHAIN],
                            first=True)
    for rule in nat_rules(cluster_cidr):
        changed |= _ensure_rule("nat", NAT_CHAIN, rule)
    if changed:
        log.info("host network: rules for cluster CIDR %s installed", cluster_cidr)
    return changed


def cluster_rules_present() -> bool:
    return iptables("-S", FORWARD_CHAIN, check=False).returncode == 0


def remove_cluster_rules() -> None:
    """Remove our chains and the jumps to them (every cluster CIDR at once)."""
    for table, parent, chain in (("filter", "FORWARD", FORWARD_CHAIN), ("nat", "POSTROUTING", NAT_CHAIN)):
        jump = ["-m", "comment", "--comment", COMMENT, "-j", chain]
        while iptables("-D", parent, *jump, table=table, check=False).returncode == 0:
            pass
        iptables("-F", chain, table=table, check=False)
        iptables("-X", chain, table=table, check=False)
    log.info("host network: minik8s rules removed")


# -- bridges and leases -----------------------------------------------------------------------


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def delete_bridge(name: str) -> bool:
    """Delete a node bridge (its veths go with their netns); True if there was one."""
    if not link_exists(name):
        return False
    _run(["ip", "link", "delete", name, "type", "bridge"], check=False)
    return not link_exists(name)


def leases(lease_dir: Path) -> dict[str, str]:
    """host-local's leases: address -> container ID (files named by address, ID on the first line)."""
    out: dict[str, str] = {}
    if not lease_dir.is_dir():
        return out
    for path in lease_dir.iterdir():
        name = path.name
        if name == "lock" or name.startswith("last_reserved_ip"):
            continue
        try:
            out[name] = path.read_text().splitlines()[0].strip()
        except (OSError, IndexError):
            continue
    return out


def release_leases(lease_dir: Path, keep: set[str]) -> list[str]:
    """Drop leases held by containers not in `keep` (their DEL can no longer run); the addresses freed."""
    freed = []
    for address, container_id in leases(lease_dir).items():
        if container_id not in keep:
            with contextlib.suppress(FileNotFoundError):
                (lease_dir / address).unlink()
            freed.append(address)
    return freed


def remove_portmap_chains_if_unused() -> bool:
    """portmap's shared nat chains (CNI-HOSTPORT-*) once no mapping is left in them; True if removed."""
    listing = iptables("-S", "CNI-HOSTPORT-DNAT", table="nat", check=False)
    if listing.returncode != 0:
        return False
    if any(line.startswith("-A ") for line in listing.stdout.splitlines()):
        return False
    for parent, rule in (("PREROUTING", ["-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT"]),
                         ("OUTPUT", ["-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT"]),
                         ("POSTROUTING", ["-m", "comment", "--comment", "CNI portfwd requiring masquerade",
                                          "-j", "CNI-HOSTPORT-MASQ"])):
        while iptables("-D", parent, *rule, table="nat", check=False).returncode == 0:
            pass
    for chain in ("CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-MASQ", "CNI-HOSTPORT-SETMARK"):
        iptables("-F", chain, table="nat", check=False)
        iptables("-X", chain, table="nat", check=False)
    return True


# -- the host lock ----------------------------------------------------------------------------


def acquire_host_lock(shared: bool, timeout: float = 60.0) -> int:
    """flock on RUN_DIR/host-network.lock (blocking): shared while a pod's network is set up, exclusive
    to tear the shared rules down. Returns the fd to pass to `release_host_lock`."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, mode)
            return fd
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                os.close(fd)
                raise
            time.sleep(0.02)


def try_host_lock(shared: bool) -> int | None:
    """The host lock at once (the fd to pass to `release_host_lock`), or None while it is held the other way:
    a pod's set-up takes it without a thread when nobody tears the shared rules down, as nearly always."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd


def release_host_lock(fd: int) -> None:
    os.close(fd)


@contextlib.contextmanager
def host_lock(shared: bool, timeout: float = 60.0) -> Iterator[None]:
    fd = acquire_host_lock(shared, timeout)
    try:
        yield
    finally:
        release_host_lock(fd)


# -- kubelets alive on this host --------------------------------------------------------------


def _kubelet_dir() -> Path:
    return RUN_DIR / "kubelets"


def register_kubelet(node_name: str, pid: int | None = None) -> None:
    """Record a user of the host rules: a kubelet (this process), or a node's containerd (its `pid`)."""
    d = _kubelet_dir()
    d.mkdir(parents=True, exist_ok=True)
    (d / node_name).write_text(f"{pid or os.getpid()}\n")


def unregister_kubelet(node_name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        (_kubelet_dir() / node_name).unlink()


def other_kubelets_alive(node_name: str) -> list[str]:
    """Nodes whose kubelet (or containerd, see containerd_node) on this host is still alive; stale entries
    are dropped."""
    alive: list[str] = []
    d = _kubelet_dir()
    if not d.is_dir():
        return alive
    for entry in d.iterdir():
        if entry.name == node_name:
            continue
        try:
            pid = int(entry.read_text().strip())
            os.kill(pid, 0)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                entry.unlink()
            continue
        # node agents: the kubelet and its CRI runtime (the Docker shim, or a node's containerd)
        if b"kubelet" in cmdline or b"dockershim" in cmdline or b"containerd" in cmdline:
            alive.append(entry.name)
    return alive
