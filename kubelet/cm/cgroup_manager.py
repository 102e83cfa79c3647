"""Cgroups through the cgroupfs driver (upstream cm.cgroupManagerImpl over libcontainer's fs and fs2):
cgroup v1, one hierarchy a controller under /sys/fs/cgroup/<controller>, and the unified v2 hierarchy.

A cgroup is named by its cgroupfs path ("/kubepods/burstable/pod<UID>"), the same on every v1 hierarchy;
it is what the runtime gets as cgroup parent. Blocking file-system calls: run them in a thread."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from pathlib import Path

from kubelet.cm.helpers import ResourceConfig, cpu_shares_to_weight

log = logging.getLogger(__name__)

CGROUP_MOUNT = Path("/sys/fs/cgroup")
# the v1 controllers the kubelet writes (or the stats read): the runtime makes its containers' cgroups in the
# others itself (runc creates the missing parents, and copies cpuset's cpus and mems into them)
V1_CONTROLLERS = ("cpu", "cpuacct", "memory")
V2_CONTROLLERS = ("cpu", "memory", "pids")


class CgroupManager:
    def __init__(self, mount: Path = CGROUP_MOUNT) -> None:
        self.mount = mount
        self.unified = (mount / "cgroup.controllers").is_file()
        # the hierarchies, resolved once they are found: mounts do not move under a running kubelet, and every
        # pod's start and removal looked them up again (a resolve() and a stat per controller, per call)
        self._managed: list[Path] | None = None
        self._all: list[Path] | None = None

    @property
    def version(self) -> int:
        return 2 if self.unified else 1

    # -- where ----------------------------------------------------------------------------------

    def _managed_roots(self) -> list[Path]:
        """The hierarchies the kubelet makes its cgroups in (co-mounted controllers, cpu,cpuacct, once)."""
        if self._managed is not None:
            return self._managed
        if self.unified:
            return [self.mount]
        roots: list[Path] = []
        for controller in V1_CONTROLLERS:
            path = self.mount / controller
            if path.is_dir() and path.resolve() not in roots:
                roots.append(path.resolve())
        if roots:  # none (yet): looked for again next time
            self._managed = roots
        return roots

    def _all_roots(self) -> list[Path]:
        """Every hierarchy mounted here: the runtime makes a pod's parents in all of them."""
        if self._all is not None:
            return self._all
        if self.unified:
            return [self.mount]
        roots: list[Path] = []
        for entry in sorted(self.mount.iterdir()):
            resolved = entry.resolve()
            if (resolved / "cgroup.procs").is_file() and resolved not in roots:
                roots.append(resolved)
        if roots:
            self._all = roots
        return roots

    @staticmethod
    def _under(root: Path, name: str) -> Path:
        return root / name.strip("/") if name.strip("/") else root

    def path(self, name: str) -> Path:
        """The cgroup's directory in the first managed hierarchy (cpu's on v1)."""
        roots = self._managed_roots()
        if not roots:
            raise OSError(errno.ENOENT, f"no cgroup hierarchy for {', '.join(V1_CONTROLLERS)} under {self.mount}")
        return self._under(roots[0], name)

    def exists(self, name: str) -> bool:
        return all(self._under(root, name).is_dir() for root in self._managed_roots())

    def exists_anywhere(self, name: str) -> bool:
        """The cgroup is there in at least one hierarchy (one left in a single hierarchy, as a removal cut short
        leaves it, counts)."""
        return any(self._under(root, name).is_dir() for root in self._all_roots())

    def children(self, name: str) -> list[str]:
        """The names of the cgroup's child cgroups in any hierarchy (one left in a single hierarchy, as a
        removal cut short leaves it, is found too)."""
        found: set[str] = set()
        for root in self._all_roots():
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                found.update(e.name for e in self._under(root, name).iterdir() if e.is_dir())
        return sorted(found)

    # -- what -----------------------------------------------------------------------------------

    def create(self, name: str, config: ResourceConfig) -> None:
        """Make the cgroup (and its missing parents) in every managed hierarchy and give it `config`."""
        for root in self._managed_roots():
            if self.unified:
                self._enable_controllers(root, name)
            self._under(root, name).mkdir(parents=True, exist_ok=True)
        self.update(name, config)

    def update(self, name: str, config: ResourceConfig) -> None:
        if self.unified:
            self._update_v2(self._under(self.mount, name), config)
            return
        for root in self._managed_roots():
            path = self._under(root, name)
            if (path / "cpu.shares").exists():
                self._update_v1_cpu(path, config)
            if config.memory is not None and (path / "memory.limit_in_bytes").exists():
                _write(path / "memory.limit_in_bytes", str(config.memory if config.memory > 0 else -1))

    def destroy(self, name: str) -> None:
        """rmdir the cgroup and what is left under it in every hierarchy, deepest first. OSError (EBUSY)
        while a process still runs in it."""
        if not name.strip("/"):
            raise ValueError("the root cgroup is not the kubelet's to remove")
        for root in self._all_roots():
            top = self._under(root, name)
            if not top.is_dir():
                continue
            for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
                with contextlib.suppress(FileNotFoundError):  # gone already (the runtime's own removal)
                    os.rmdir(dirpath)

    def read(self, name: str, file: str) -> str:
        """One of the cgroup's files (in whichever managed hierarchy has it)."""
        for root in self._managed_roots():
            path = self._under(root, name) / file
            if path.exists():
                return path.read_text().strip()
        raise FileNotFoundError(f"{file} of cgroup {name}")

    # -- v1 -------------------------------------------------------------------------------------

    @staticmethod
    def _update_v1_cpu(path: Path, config: ResourceConfig) -> None:
        if config.cpu_shares is not None:
            _write(path / "cpu.shares", str(config.cpu_shares))
        if config.cpu_period is None and config.cpu_quota is None:
            return
        # libcontainer's order: the period first; the kernel refuses a period under the current quota, then
        # the quota goes first
        quota = str(config.cpu_quota if config.cpu_quota else -1) if config.cpu_quota is not None else None
        try:
            if config.cpu_period is not None:
                _write(path / "cpu.cfs_period_us", str(config.cpu_period))
            if quota is not None:
                _write(path / "cpu.cfs_quota_us", quota)
        except OSError as e:
            if e.errno != errno.EINVAL or quota is None:
                raise
            _write(path / "cpu.cfs_quota_us", quota)
            if config.cpu_period is not None:
                _write(path / "cpu.cfs_period_us", str(config.cpu_period))

    # -- v2 -------------------------------------------------------------------------------------

    def _enable_controllers(self, root: Path, name: str) -> None:
        """cgroup v2 hands a controller to children only when each ancestor's subtree_control lists it."""
        parts = [p for p in name.strip("/").split("/") if p]
        current = root
        for part in parts:
            available = set((current / "cgroup.controllers").read_text().split())
            wanted = [c for c in V2_CONTROLLERS if c in available]
            enabled = set((current / "cgroup.subtree_control").read_text().split())
            missing = [c for c in wanted if c not in enabled]
            if missing:
                _write(current / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))
            current = current / part
            current.mkdir(exist_ok=True)

    @staticmethod
    def _update_v2(path: Path, config: ResourceConfig) -> None:
        if config.cpu_shares is not None and (path / "cpu.weight").exists():
            _write(path / "cpu.weight", str(cpu_shares_to_weight(config.cpu_shares)))
        if (config.cpu_quota is not None or config.cpu_period is not None) and (path / "cpu.max").exists():
            quota = "max" if not config.cpu_quota or config.cpu_quota < 0 else str(config.cpu_quota)
            period = config.cpu_period or int((path / "cpu.max").read_text().split()[1])
            _write(path / "cpu.max", f"{quota} {period}")
        if config.memory is not None and (path / "memory.max").exists():
            _write(path / "memory.max", str(config.memory) if config.memory > 0 else "max")


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:  # one write(2): a cgroup file takes a value per write
        f.write(value)

