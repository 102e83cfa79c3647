"""Pod volumes on the host (the kubelet's volume manager: emptyDir, hostPath, configMap, secret, projected,
downwardAPI).

Everything of a pod lives under `<root-dir>/pods/<uid>/`: emptyDir volumes in
`volumes/kubernetes.io~empty-dir/<name>` (a tmpfs mounted there for `medium: Memory`), configMap and
secret volumes in `volumes/kubernetes.io~configmap/<name>` and `kubernetes.io~secret/<name>` (a tmpfs:
a Secret never touches the node's disk), their files written by kubelet/atomic_writer.py and
rewritten when the object changes (upstream pkg/volume/configmap, pkg/volume/secret), one
termination-message file per container instance in `containers/<name>/`, and the pod's managed
`etc-hosts`. Containers get them as bind mounts. Removing the pod removes the directory (after
unmounting any tmpfs).

projected and downwardAPI volumes are kubelet/volume_projected.py's (`kubernetes.io~projected` on a
tmpfs, `kubernetes.io~downward-api`); a memory-backed emptyDir's tmpfs is sized as upstream's
calculateEmptyDirMemorySize; hostPath types are checked with upstream's messages (host_path.go
checkType); subPath and subPathExpr ($(VAR) from the container's env) follow makeMounts: relative, no
`..`, created with the volume's mode when missing, and never resolving outside the volume.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubelet import atomic_writer, volume_projected, volume_pvc
from kubelet.configmap_secret_manager import PodObjects
from kubelet.container.helpers import VAR_REFERENCE as _VAR_REFERENCE
from kubelet.container.helpers import expand
from kubelet.kubelet_pods import PodContext
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
            what = "configmap references non-existent config" if kind == "configmap" else \
                "references non-existent secret"  # upstream's two MakePayloads word it so
            raise VolumeSetUpError(f'MountVolume.SetUp failed for volume "{volume}" : {what} key: {item.key}')
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
        # what downwardAPI resourceFieldRefs default limits to: the node's (cpu millis, memory bytes)
        self.allocatable: Callable[[], tuple[int, int]] = lambda: (0, 0)

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
            if volume.projected is not None or volume.downward_api is not None:  # volume_projected.py
                cpu, memory = self.allocatable()
                ctx = PodContext(node_allocatable_cpu_millis=cpu, node_allocatable_memory=memory)
                try:
                    path = volume_projected.setup(self.pod_dir(uid), volume, pod, objects, ctx, objects.tokens,
                                                  _mounted)
                except volume_projected.SetUpError as e:
                    raise VolumeSetUpError(str(e)) from e
                out[volume.name] = HostVolume(path, read_only=True)
                continue
            if volume.empty_dir is not None:
                path = self.pod_dir(uid) / "volumes" / EMPTY_DIR / volume.name
                path.mkdir(parents=True, exist_ok=True)
                os.chmod(path, 0o777)
                if volume.empty_dir.medium == "Memory" and not _mounted(path):
                    options = "mode=0777"
                    size = memory_backed_size(pod, volume.empty_dir.size_limit, self.allocatable()[1])
                    if size:
                        options += f",size={size}"
                    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                                          capture_output=True, text=True, timeout=30)
                    if proc.returncode != 0:
                        raise VolumeError(f"mounting tmpfs for volume {volume.name!r}: {proc.stderr.strip()}")
                out[volume.name] = HostVolume(path)
            elif volume.host_path is not None:
                try:
                    host_path = self._host_path(volume.name, volume.host_path.path, volume.host_path.type or "")
                except VolumeError as e:
                    raise VolumeSetUpError(f'MountVolume.SetUp failed for volume "{volume.name}" : {e}') from e
                out[volume.name] = HostVolume(host_path)
            else:
                kinds = [k for k, v in volume.model_dump(exclude_none=True).items() if k != "name" and v is not None]
                raise VolumeError(f"volume {volume.name!r}: unsupported volume type {', '.join(kinds) or 'none'} "
                                  "(minik8s supports emptyDir, hostPath, configMap, secret, projected, "
                                  "downwardAPI and persistentVolumeClaim)")
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
        """upstream hostPathMounter.SetUp and checkType (pkg/volume/hostpath/host_path.go), their messages."""
        path = Path(path_text)
        if ".." in path_text.split("/"):
            raise VolumeError(f"invalid HostPath `{path_text}`: must not contain '..'")
        if not path.is_absolute():
            raise VolumeError(f"invalid HostPath `{path_text}`: must be an absolute path")
        if not kind:
            return path
        if kind == "DirectoryOrCreate" and not path.exists():
            try:
                path.mkdir(parents=True, mode=0o755, exist_ok=True)
            except OSError as e:
                raise VolumeError(f"mkdir {path_text}: {_go_errno(e)}") from e
            return path
        if kind == "FileOrCreate" and not path.exists():
            try:
                with open(path, "a"):
                    pass
                path.chmod(0o644)
            except OSError as e:
                raise VolumeError(f"open {path_text}: {_go_errno(e)}") from e
            return path
        expected = {"DirectoryOrCreate": ("Directory", "directory"), "Directory": ("Directory", "directory"),
                    "FileOrCreate": ("File", "file"), "File": ("File", "file"), "Socket": ("Socket", "socket file"),
                    "CharDevice": ("CharDevice", "character device"),
                    "BlockDevice": ("BlockDevice", "block device")}.get(kind)
        if expected is None:
            raise VolumeError(f"{kind} is an invalid volume type")
        want, description = expected
        try:
            mode = path.stat().st_mode
        except OSError:
            raise VolumeError(f"hostPath {path_text} doesn't exist") from None
        found = _file_type(mode)
        if found is None:
            raise VolumeError(f"hostPath type check failed, {path_text} is not a {description}, unable to determine "
                              "its type: only recognise file, directory, socket, block device and character device")
        if found != want:
            raise VolumeError(f"hostPath type check failed: {path_text} is not a {description}, it's a {found}")
        return path

    def binds(self, container: Container, volumes: dict[str, HostVolume],
               env: dict[str, str] | None = None) -> list[str]:
        """Bind specs (`src:dst:ro|rw`) for the container's volumeMounts (CRI mounts, made by the runtime helper);
        subPath and subPathExpr (expanded against the container's environment) as upstream's makeMounts."""
        out = []
        for mount in container.volume_mounts or []:
            volume = volumes.get(mount.name)
            if volume is None:
                raise VolumeError(f"volumeMount {mount.name!r} of container {container.name!r} names no volume")
            src = volume.path
            sub_path = mount.sub_path or ""
            if mount.sub_path_expr:
                sub_path = expand_sub_path_expr(mount.sub_path_expr, env or {})
            if sub_path:
                src = _prepare_sub_path(volume.path, sub_path, mount.name, container.name)
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
        in_memory = [d / "volumes" / EMPTY_DIR, d / "volumes" / SECRET, d / "volumes" / volume_projected.PROJECTED]
        for kind in in_memory:
            if kind.is_dir():
                for v in kind.iterdir():
                    if _mounted(v):
                        subprocess.run(["umount", str(v)], capture_output=True, timeout=30)
        if any(_mounted(p) for kind in in_memory if kind.is_dir() for p in kind.iterdir()):
            return  # never recurse into something still mounted
        with contextlib.suppress(OSError):
            shutil.rmtree(d)


def _go_errno(e: OSError) -> str:
    """An OSError as Go's syscall.Errno prints it ("no such file or directory")."""
    return (e.strerror or str(e)).lower()


def _file_type(mode: int) -> str | None:
    """upstream hostutil GetFileType."""
    for check, name in ((stat.S_ISDIR, "Directory"), (stat.S_ISREG, "File"), (stat.S_ISSOCK, "Socket"),
                        (stat.S_ISCHR, "CharDevice"), (stat.S_ISBLK, "BlockDevice")):
        if check(mode):
            return name
    return None


def expand_sub_path_expr(expr: str, env: dict[str, str]) -> str:
    """upstream kubecontainer.ExpandContainerVolumeMounts: $(VAR) from the container's env; a reference to
    a variable that is unset or empty is an error."""
    names = {m.group(1) for m in _VAR_REFERENCE.finditer(expr) if m.group(1)}
    missing = sorted(name for name in names if not env.get(name))
    if missing:
        raise VolumeError(f"missing value for {', '.join(missing)}")
    return expand(expr, env)


def _prepare_sub_path(volume: Path, sub_path: str, mount: str, container: str) -> Path:
    """upstream makeMounts + PrepareSafeSubpath: a relative path without backsteps, created when missing
    with the volume's mode, that resolves (symlinks followed) inside the volume."""
    if posixpath.isabs(sub_path):
        raise VolumeError(f"error SubPath `{sub_path}` must not be an absolute path")
    if ".." in sub_path.split("/"):
        raise VolumeError(f"unable to provision SubPath `{sub_path}`: must not contain '..'")
    src = volume / sub_path
    root = os.path.realpath(volume)
    if not os.path.lexists(src):
        try:
            perm = stat.S_IMODE(os.stat(volume).st_mode)
            if not os.path.realpath(src.parent).startswith(root):
                raise OSError("outside the volume")
            src.mkdir(parents=True, exist_ok=True)
            os.chmod(src, perm)
        except OSError:
            raise VolumeError(f'failed to create subPath directory for volumeMount "{mount}" of container '
                              f'"{container}"') from None
    resolved = os.path.realpath(src)
    if resolved != root and not resolved.startswith(root + os.sep):
        raise VolumeError(f'failed to prepare subPath for volumeMount "{mount}" of container "{container}"')
    return Path(resolved)


def memory_backed_size(pod: Pod, size_limit: str | int | float | None, node_allocatable: int) -> int:
    """upstream calculateEmptyDirMemorySize (SizeMemoryBackedVolumes): the node's allocatable memory, or less:
    the pod's memory limit (when every container has one), or less: the volume's sizeLimit. 0: no size option
    (the host's default, half its memory)."""
    size = node_allocatable
    containers = list(pod.spec.containers) if pod.spec else []
    init_containers = list(pod.spec.init_containers or []) if pod.spec else []

    def memory_limit(c: Container) -> int:
        limits = (c.resources.limits if c.resources else None) or {}
        return parse_quantity(limits["memory"]).int_value() if "memory" in limits else 0

    limits = [memory_limit(c) for c in containers]
    if containers and all(limits):
        pod_limit = max([sum(limits), *(memory_limit(c) for c in init_containers)])
        if pod_limit > 0 and (not size or pod_limit <= size):
            size = pod_limit
    if size_limit is not None:
        volume_limit = parse_quantity(size_limit).int_value()
        if volume_limit > 0 and (not size or volume_limit <= size):
            size = volume_limit
    return size
