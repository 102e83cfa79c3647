"""Pod volumes on the host (the kubelet's volume manager, for emptyDir, hostPath, configMap and secret).

Everything of a pod lives under `<root-dir>/pods/<uid>/`: emptyDir volumes in
`volumes/kubernetes.io~empty-dir/<name>` (a tmpfs mounted there for `medium: Memory`), configMap and
secret volumes in `volumes/kubernetes.io~configmap/<name>` and `kubernetes.io~secret/<name>` (a tmpfs:
a Secret never touches the node's disk), their files written by kubelet/atomic_writer.py and
rewritten when the object changes (upstream pkg/volume/configmap, pkg/volume/secret), one
termination-message file per container instance in `containers/<name>/`, and the pod's managed
`etc-hosts`. Containers get them as bind mounts. Removing the pod removes the directory (after
unmounting any tmpfs).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from kubelet import atomic_writer, volume_pvc
from kubelet.configmap_secret_manager import PodObjects
from machinery.api.core_v1 import Container, KeyToPath, Pod, Volume
from machinery.quantity import parse_quantity

EMPTY_DIR = "kubernetes.io~empty-dir"
CONFIG_MAP = "kubernetes.io~configmap"
SECRET = "kubernetes.io~secret"
DEFAULT_MODE = 0o644  # upstream's configMap and secret defaultMode (420)


class VolumeError(Exception):
    """A volume cannot be set up (reported as FailedMount)."""


class VolumeSetUpError(VolumeError):
    """One volume's SetUp failed: its message is upstream's event as it is
    (`MountVolume.SetUp failed for volume "config" : configmap "app" not found`)."""


def _payload(volume: str, kind: str, name: str, data: dict[str, bytes] | None, items: list[KeyToPath] | None,
             default_mode: int | None, optional: bool) -> dict[str, tuple[bytes, int]]:
    """upstream MakePayload: every key (or the items' keys at their paths) with its mode."""
    if data is None:
        if optional:
            return {}
        raise VolumeSetUpError(f'MountVolume.SetUp failed for volume "{volume}" : {kind} "{name}" not found')
    mode = DEFAULT_MODE if default_mode is None else default_mode
    if not items:
        return {key: (value, mode) for key, value in data.items()}
    out = {}
    for item in items:
        if item.key not in data:
            if optional:
                continue
            what = "configmap" if kind == "configmap" else "secret"
            raise VolumeSetUpError(f'MountVolume.SetUp failed for volume "{volume}" : {what} references '
                                   f"non-existent {'config' if kind == 'configmap' else 'secret'} key: {item.key}")
        path = posixpath.normpath(item.path)
        if path.startswith(("/", "..")):
            raise VolumeSetUpError(f'MountVolume.SetUp failed for volume "{volume}" : invalid path {item.path!r}')
        out[path] = (data[item.key], mode if item.mode is None else item.mode)
    return out


@dataclass(frozen=True)
class HostVolume:
    path: Path
    read_only: bool = False


def _mounted(path: Path) -> bool:
    try:
        text = Path("/proc/self/mounts").read_text()
    except OSError:
        return False
    target = str(path)
    return any(line.split()[1] == target for line in text.splitlines() if len(line.split()) > 1)


class VolumeManager:
    def __init__(self, root_dir: Path) -> None:
        self.root_dir = root_dir

    def pods_dir(self) -> Path:
        return self.root_dir / "pods"

    def pod_dir(self, uid: str) -> Path:
        return self.pods_dir() / uid

    def known_pod_uids(self) -> list[str]:
        d = self.pods_dir()
        return [p.name for p in d.iterdir() if p.is_dir()] if d.is_dir() else []

    def setup(self, pod: Pod, objects: PodObjects | None = None) -> dict[str, HostVolume]:
        """Make every volume of the pod exist on the host (configMap and secret volumes from `objects`, what
        this sync read); name → host path."""
        uid = pod.metadata.uid or ""
        objects = objects or PodObjects(pod.metadata.namespace or "")
        out: dict[str, HostVolume] = {}
        claimed = volume_pvc.resolve(pod, objects.claims)  # raises ClaimsNotReady: the pod waits
        for volume in (pod.spec.volumes if pod.spec else None) or []:
            if volume.persistent_volume_claim is not None:
                source = claimed[volume.name]
                path = self._host_path(volume.name, source.path, source.host_path_type) \
                    if source.host_path_type is not None else volume_pvc.local_path(volume.name, source.path)
                out[volume.name] = HostVolume(path, read_only=source.read_only)
                continue
            if volume.config_map is not None or volume.secret is not None:
                out[volume.name] = HostVolume(self._object_volume(uid, volume, objects), read_only=True)
                continue
            if volume.empty_dir is not None:
                path = self.pod_dir(uid) / "volumes" / EMPTY_DIR / volume.name
                path.mkdir(parents=True, exist_ok=True)
                os.chmod(path, 0o777)
                if volume.empty_dir.medium == "Memory" and not _mounted(path):
                    options = "mode=0777"
                    if volume.empty_dir.size_limit is not None:
                        options += f",size={parse_quantity(volume.empty_dir.size_limit).int_value()}"
                    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                                          capture_output=True, text=True, timeout=30)
                    if proc.returncode != 0:
                        raise VolumeError(f"mounting tmpfs for volume {volume.name!r}: {proc.stderr.strip()}")
                out[volume.name] = HostVolume(path)
            elif volume.host_path is not None:
                out[volume.name] = HostVolume(self._host_path(volume.name, volume.host_path.path,
                                                              volume.host_path.type or ""))
            else:
                kinds = [k for k, v in volume.model_dump(exclude_none=True).items() if k != "name" and v is not None]
                raise VolumeError(f"volume {volume.name!r}: unsupported volume type {', '.join(kinds) or 'none'} "
                                  "(minik8s supports emptyDir, hostPath, configMap and secret)")
        return out

    def _object_volume(self, uid: str, volume: Volume, objects: PodObjects) -> Path:
        if volume.config_map is not None:
            source = volume.config_map
            name = source.name or ""
            payload = _payload(volume.name, "configmap", name, objects.configmap_data(name), source.items,
                               source.default_mode, bool(source.optional))
            path = self.pod_dir(uid) / "volumes" / CONFIG_MAP / volume.name
            path.mkdir(parents=True, exist_ok=True)
        else:
            assert volume.secret is not None
            secret_source = volume.secret
            name = secret_source.secret_name or ""
            payload = _payload(volume.name, "secret", name, objects.secret_data(name), secret_source.items,
                               secret_source.default_mode, bool(secret_source.optional))
            path = self.pod_dir(uid) / "volumes" / SECRET / volume.name
            path.mkdir(parents=True, exist_ok=True)
            if not _mounted(path):  # upstream: a Secret lives in memory only
                proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(path)],
                                      capture_output=True, text=True, timeout=30)
                if proc.returncode != 0:
                    raise VolumeSetUpError(f'MountVolume.SetUp failed for volume "{volume.name}" : mounting tmpfs: '
                                           f"{proc.stderr.strip()}")
        atomic_writer.write(path, payload)
        return path

    @staticmethod
    def _host_path(name: str, path_text: str, kind: str) -> Path:
        path = Path(path_text)
        if not path.is_absolute():
            raise VolumeError(f"hostPath volume {name!r}: path {path_text!r} is not absolute")
        try:
            mode = path.stat().st_mode if path.exists() else None
        except OSError as e:
            raise VolumeError(f"hostPath volume {name!r}: {e}") from e
        if kind == "DirectoryOrCreate":
            if mode is None:
                path.mkdir(parents=True, mode=0o755, exist_ok=True)
            elif not stat.S_ISDIR(mode):
                raise VolumeError(f"hostPath type check failed: {path_text} is not a directory")
        elif kind == "FileOrCreate":
            if mode is None:
                path.touch(mode=0o644)
            elif not stat.S_ISREG(mode):
                raise VolumeError(f"hostPath type check failed: {path_text} is not a file")
        elif kind:
            checks = {"Directory": stat.S_ISDIR, "File": stat.S_ISREG, "Socket": stat.S_ISSOCK,
                      "CharDevice": stat.S_ISCHR, "BlockDevice": stat.S_ISBLK}
            check = checks.get(kind)
            if check is None:
                raise VolumeError(f"hostPath volume {name!r}: unknown type {kind!r}")
            if mode is None or not check(mode):
                article = "an" if kind[0] in "AEIOU" else "a"
                raise VolumeError(f"hostPath type check failed: {path_text} is not {article} {kind.lower()}")
        return path

    def binds(self, container: Container, volumes: dict[str, HostVolume]) -> list[str]:
        """Bind specs (`src:dst:ro|rw`) for the container's volumeMounts (CRI mounts, made by the runtime helper)."""
        out = []
        for mount in container.volume_mounts or []:
            volume = volumes.get(mount.name)
            if volume is None:
                raise VolumeError(f"volumeMount {mount.name!r} of container {container.name!r} names no volume")
            src = volume.path
            if mount.sub_path:
                sub = posixpath.normpath(mount.sub_path)
                if sub.startswith(("/", "..")):
                    raise VolumeError(f"subPath {mount.sub_path!r} must be a relative path inside the volume")
                src = src / sub
                if not src.exists():
                    src.mkdir(parents=True, exist_ok=True)
                    os.chmod(src, 0o777)
            mode = "ro" if mount.read_only or volume.read_only else "rw"
            out.append(f"{src}:{mount.mount_path}:{mode}")
        return out

    def termination_message_file(self, uid: str, container: Container) -> Path | None:
        """A fresh host file for the container instance to write its termination message to."""
        if not container.termination_message_path:
            return None
        d = self.pod_dir(uid) / "containers" / container.name
        d.mkdir(parents=True, exist_ok=True)
        path = d / uuid.uuid4().hex[:8]
        path.touch(mode=0o666)
        os.chmod(path, 0o666)
        return path

    def write_hosts(self, pod: Pod, pod_ip: str) -> Path:
        """The kubelet-managed /etc/hosts: localhost, the pod's own name on its IP, hostAliases."""
        uid = pod.metadata.uid or ""
        spec = pod.spec
        hostname = (spec.hostname if spec and spec.hostname else pod.metadata.name) or ""
        lines = ["# Kubernetes-managed hosts file.", "127.0.0.1\tlocalhost",
                 "::1\tlocalhost ip6-localhost ip6-loopback", "fe00::0\tip6-localnet", "fe00::0\tip6-mcastprefix",
                 "fe00::1\tip6-allnodes", "fe00::2\tip6-allrouters"]
        if pod_ip:
            lines.append(f"{pod_ip}\t{hostname}")
        aliases = (spec.host_aliases if spec else None) or []
        if aliases:
            lines.append("")
            lines.append("# Entries added by HostAliases.")
            lines.extend(f"{a.ip}\t" + "\t".join(a.hostnames or []) for a in aliases)
        path = self.pod_dir(uid) / "etc-hosts"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        return path

    def hosts_file(self, uid: str) -> Path | None:
        path = self.pod_dir(uid) / "etc-hosts"
        return path if path.exists() else None

    def teardown(self, uid: str) -> None:
        """Unmount the pod's tmpfs volumes and remove its directory."""
        d = self.pod_dir(uid)
        if not d.exists():
            return
        in_memory = [d / "volumes" / EMPTY_DIR, d / "volumes" / SECRET]
        for kind in in_memory:
            if kind.is_dir():
                for v in kind.iterdir():
                    if _mounted(v):
                        subprocess.run(["umount", str(v)], capture_output=True, timeout=30)
        if any(_mounted(p) for kind in in_memory if kind.is_dir() for p in kind.iterdir()):
            return  # never recurse into something still mounted
        with contextlib.suppress(OSError):
            shutil.rmtree(d)
