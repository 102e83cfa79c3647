"""Running CNI plugins by the spec (CNI 1.0; libcni's role): ADD / DEL / CHECK over a list.

A plugin is an executable found by its `type` in CNI_PATH. The runtime passes the operation in
the environment (CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS, CNI_PATH) and the
plugin's configuration on stdin, completed with the list's `name` and `cniVersion`, the
`runtimeConfig` for the capabilities the plugin asks for, and `prevResult`:

- ADD runs the plugins in order, each one's result being the next one's prevResult; the final
  result is cached (with the config it was made with) for the later DEL and CHECK;
- DEL runs them in reverse order with the cached result as prevResult, and drops the cache;
  every plugin is asked even if one fails (a DEL must release what it can), the first error is
  raised afterwards;
- CHECK runs them in order with the cached result.

A failing plugin prints an error object `{"cniVersion", "code", "msg", "details"}` on stdout
and exits non-zero; that becomes a `CniError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cni.config import DEFAULT_CNI_BIN_DIRS

log = logging.getLogger(__name__)

PLUGIN_TIMEOUT = 60.0
# Well-known error codes of the spec (1-99 reserved for it; plugins use 100+ for their own).
ERROR_CODES = {
    1: "Incompatible CNI version",
    2: "Unsupported field in network configuration",
    3: "Container unknown or does not exist",
    4: "Invalid necessary environment variables",
    5: "I/O failure",
    6: "Failed to decode content",
    7: "Invalid network config",
    11: "Try again later",
}


class CniError(Exception):
    """A plugin (or the runtime before it) failed; `code`, `msg` and `details` as the spec has them."""

    def __init__(self, msg: str, code: int = 999, details: str = "", plugin: str = "", command: str = "") -> None:
        self.code = code
        self.msg = msg
        self.details = details
        self.plugin = plugin
        self.command = command
        where = f"plugin type={plugin!r} " if plugin else ""
        what = f"{command} " if command else ""
        text = f"{what}{where}failed (code {code}): {msg}"
        if details:
            text += f": {details}"
        super().__init__(text)


@dataclass(frozen=True)
class IPConfig:
    address: str  # CIDR form, 10.244.1.5/24
    gateway: str | None = None
    interface: int | None = None

    @property
    def ip(self) -> str:
        return self.address.split("/", 1)[0]


@dataclass(frozen=True)
class CniResult:
    """A CNI 1.0 result: interfaces, ips (with their interface index), routes, dns."""

    raw: dict[str, Any]

    @property
    def ips(self) -> list[IPConfig]:
        return [IPConfig(i.get("address", ""), i.get("gateway"), i.get("interface")) for i in self.raw.get("ips") or []]

    @property
    def interfaces(self) -> list[dict[str, Any]]:
        return list(self.raw.get("interfaces") or [])

    @property
    def routes(self) -> list[dict[str, Any]]:
        return list(self.raw.get("routes") or [])

    def ip_for(self, ifname: str = "eth0") -> IPConfig | None:
        """The first address on the container interface `ifname` (or the first at all)."""
        interfaces = self.interfaces
        for ipc in self.ips:
            idx = ipc.interface
            if idx is not None and 0 <= idx < len(interfaces) and interfaces[idx].get("name") == ifname \
                    and interfaces[idx].get("sandbox"):
                return ipc
        ips = self.ips
        return ips[0] if ips else None

    @property
    def ip(self) -> str | None:
        found = self.ip_for()
        return found.ip if found else None

    @property
    def gateway(self) -> str | None:
        found = self.ip_for()
        return found.gateway if found else None


@dataclass
class RuntimeConf:
    """What a runtime tells plugins about one attachment (libcni.RuntimeConf)."""

    container_id: str
    netns: str  # /proc/<pid>/ns/net; may be "" for DEL once the namespace is gone
    ifname: str = "eth0"
    args: list[tuple[str, str]] = field(default_factory=list)  # CNI_ARGS, e.g. K8S_POD_NAME
    capability_args: dict[str, Any] = field(default_factory=dict)  # e.g. {"portMappings": [...]}

    def cni_args(self) -> str:
        pairs = [("IgnoreUnknown", "1"), *self.args] if self.args else []
        return ";".join(f"{k}={v}" for k, v in pairs)


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", part)


class CniRuntime:
    """Invokes plugin lists; keeps ADD results under `cache_dir` for DEL/CHECK."""

    def __init__(self, cache_dir: Path, bin_dirs: Sequence[str] = DEFAULT_CNI_BIN_DIRS,
                 timeout: float = PLUGIN_TIMEOUT) -> None:
        self.cache_dir = Path(cache_dir)
        self.bin_dirs = [d for d in bin_dirs if d]
        self.timeout = timeout

    # -- the three operations -----------------------------------------------------------------

    async def add(self, conflist: dict[str, Any], rt: RuntimeConf) -> CniResult:
        """ADD through the list; the final result is cached and returned."""
        self._check_list(conflist)
        result: dict[str, Any] | None = None
        for plugin in conflist["plugins"]:
            result = await self._run("ADD", conflist, plugin, rt, result)
            if result is None:
                raise CniError("plugin returned no result for ADD", 6, plugin=plugin.get("type", ""), command="ADD")
        assert result is not None
        self._write_cache(conflist, rt, result)
        return CniResult(result)

    async def delete(self, conflist: dict[str, Any] | None, rt: RuntimeConf, *, force: bool = False) -> None:
        """DEL through the list in reverse, with the cached result (and config, if none is given).

        Without a cached ADD result nothing is done unless `force`: a DEL for an attachment this
        runtime never made could only hit something that is not ours."""
        cached = self.read_cache(conflist["name"] if conflist else None, rt.container_id, rt.ifname)
        if cached is None and not force:
            return  # nothing was ever added (or it was deleted already)
        if conflist is None:
            if cached is None:
                return
            conflist = cached["config"]
        if cached is not None and not rt.capability_args:
            rt.capability_args = cached.get("capabilityArgs") or {}
        assert conflist is not None
        self._check_list(conflist)
        prev = cached.get("result") if cached else None
        first: CniError | None = None
        for plugin in reversed(conflist["plugins"]):
            try:
                await self._run("DEL", conflist, plugin, rt, prev)
            except CniError as e:
                log.warning("CNI DEL %s on %s: %s", conflist["name"], rt.container_id[:12], e)
                first = first or e
        if first is not None:
            raise first
        self._drop_cache(conflist["name"], rt.container_id, rt.ifname)

    async def check(self, conflist: dict[str, Any], rt: RuntimeConf) -> None:
        """CHECK through the list against the cached ADD result; raises CniError if anything is off."""
        self._check_list(conflist)
        cached = self.read_cache(conflist["name"], rt.container_id, rt.ifname)
        if cached is None:
            raise CniError(f"no cached result for {rt.container_id} on network {conflist['name']}", 3,
                           command="CHECK")
        prev = cached.get("result") or {}
        for plugin in conflist["plugins"]:
            try:
                await self._run("CHECK", conflist, plugin, rt, prev)
            except CniError as e:
                if not _portmap_ipv6_check_bug(plugin, prev, e):
                    raise


    async def version(self, plugin_type: str) -> dict[str, Any]:
        out = await self._exec(self.find_plugin(plugin_type), {"CNI_COMMAND": "VERSION"},
                               json.dumps({"cniVersion": "1.0.0"}).encode(), plugin_type, "VERSION")
        return out or {}

    # -- the cache ------------------------------------------------------------------------------

    def cache_path(self, network: str, container_id: str, ifname: str) -> Path:
        return self.cache_dir / f"{_safe(network)}-{_safe(container_id)}-{_safe(ifname)}"

    def read_cache(self, network: str | None, container_id: str, ifname: str = "eth0") -> dict[str, Any] | None:
        """The cached attachment (config, result, args) of a container, or None; any network if None."""
        candidates: Iterable[Path] = ()
        if network is not None:
            candidates = [self.cache_path(network, container_id, ifname)]
        else:
            suffix = f"-{_safe(container_id)}-{_safe(ifname)}"
            # a listing, not a glob: a glob compiles a pattern for every container id (each sandbox's teardown)
            with contextlib.suppress(OSError):  # no results yet
                candidates = sorted(self.cache_dir / name for name in os.listdir(self.cache_dir)
                                    if name.endswith(suffix))
        for path in candidates:
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("containerId") == container_id:
                return data
        return None

    def cached_container_ids(self, network: str) -> list[str]:
        """Container IDs with a cached attachment to `network`."""
        out = []
        if self.cache_dir.is_dir():
            for path in self.cache_dir.glob(f"{_safe(network)}-*"):
                try:
                    data = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue
                if isinstance(data, dict) and data.get("networkName") == network and data.get("containerId"):
                    out.append(str(data["containerId"]))
        return out

    def _write_cache(self, conflist: dict[str, Any], rt: RuntimeConf, result: dict[str, Any]) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        path = self.cache_path(conflist["name"], rt.container_id, rt.ifname)
        data = {"kind": "cniCacheV1", "containerId": rt.container_id, "ifName": rt.ifname,
                "networkName": conflist["name"], "config": conflist, "cniArgs": [list(a) for a in rt.args],
                "capabilityArgs": rt.capability_args, "result": result}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)

    def _drop_cache(self, network: str, container_id: str, ifname: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.cache_path(network, container_id, ifname).unlink()

    # -- running one plugin ------------------------------------------------------------------

    def find_plugin(self, plugin_type: str) -> str:
        if not plugin_type or "/" in plugin_type:
            raise CniError(f"invalid plugin type {plugin_type!r}", 7)
        for d in self.bin_dirs:
            path = os.path.join(d, plugin_type)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
        raise CniError(f"failed to find plugin {plugin_type!r} in path {self.bin_dirs}", 7, plugin=plugin_type)

    @staticmethod
    def _check_list(conflist: dict[str, Any]) -> None:
        if not isinstance(conflist, dict) or not conflist.get("name") or not conflist.get("plugins"):
            raise CniError("a network configuration list needs a name and plugins", 7)

    @staticmethod
    def plugin_stdin(conflist: dict[str, Any], plugin: dict[str, Any], rt: RuntimeConf,
                     prev: dict[str, Any] | None) -> dict[str, Any]:
        """The plugin's config as it goes on stdin (libcni's buildOneConfig + injectRuntimeConfig)."""
        conf = dict(plugin)
        conf["name"] = conflist["name"]
        conf["cniVersion"] = conflist.get("cniVersion", "1.0.0")
        if prev is not None:
            conf["prevResult"] = prev
        wanted = {k for k, v in (plugin.get("capabilities") or {}).items() if v}
        runtime = {k: v for k, v in rt.capability_args.items() if k in wanted}
        if runtime:
            conf["runtimeConfig"] = runtime
        return conf

    async def _run(self, command: str, conflist: dict[str, Any], plugin: dict[str, Any], rt: RuntimeConf,
                   prev: dict[str, Any] | None) -> dict[str, Any] | None:
        plugin_type = plugin.get("type", "")
        if rt.netns and is_host_netns(rt.netns):
            raise CniError(f"refusing {command} on {rt.netns}: it is the host's network namespace", 4,
                           plugin=plugin_type, command=command)
        path = self.find_plugin(plugin_type)
        env = {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": rt.container_id,
            "CNI_NETNS": rt.netns,
            "CNI_IFNAME": rt.ifname,
            "CNI_ARGS": rt.cni_args(),
            "CNI_PATH": os.pathsep.join(self.bin_dirs),
        }
        stdin = json.dumps(self.plugin_stdin(conflist, plugin, rt, prev)).encode()
        return await self._exec(path, env, stdin, plugin_type, command)

    async def _exec(self, path: str, env: dict[str, str], stdin: bytes, plugin_type: str,
                    command: str) -> dict[str, Any] | None:
        full_env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), **env}
        # the config goes into a pipe before the plugin starts when the pipe holds it all (it always does: a few
        # KiB against 64 KiB): no write transport and no feeding task per plugin run, which a pod's start pays
        # three times; else it is fed as the plugin reads
        reader = filled_pipe(stdin)
        try:
            proc = await asyncio.create_subprocess_exec(
                path, stdin=asyncio.subprocess.PIPE if reader is None else reader, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=full_env)
        finally:
            if reader is not None:
                os.close(reader)
        try:
            async with asyncio.timeout(self.timeout):  # no task of its own, as wait_for makes
                stdout, stderr = await proc.communicate(stdin if reader is None else None)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise CniError(f"timed out after {self.timeout}s", 11, plugin=plugin_type, command=command) from None
        return parse_output(proc.returncode or 0, stdout, stderr, plugin_type, command)


def filled_pipe(data: bytes) -> int | None:
    """The read end of a pipe that already holds `data` and is closed for writing (the plugin reads it, then
    EOF), or None when the pipe cannot take it all without blocking."""
    reader, writer = os.pipe()
    try:
        os.set_blocking(writer, False)
        written = os.write(writer, data) if data else 0
    except OSError:  # BlockingIOError: the pipe is full (a smaller pipe than Linux's default)
        written = -1
    finally:
        os.close(writer)
    if written == len(data):
        return reader
    os.close(reader)
    return None


def is_host_netns(path: str) -> bool:
    """Is `path` the network namespace this process (the host's) lives in? Plugins run there would
    configure the host itself (a loopback DEL would take the host's `lo` down)."""
    try:
        target = os.stat(path)
    except OSError:
        return False
    for own in ("/proc/self/ns/net", "/proc/1/ns/net"):
        try:
            mine = os.stat(own)
        except OSError:
            continue
        if (mine.st_dev, mine.st_ino) == (target.st_dev, target.st_ino):
            return True
    return False


def parse_output(returncode: int, stdout: bytes, stderr: bytes, plugin_type: str = "",
                 command: str = "") -> dict[str, Any] | None:
    """A plugin's answer: its result (None when it printed nothing), or CniError from its error object."""
    text = stdout.decode("utf-8", "replace").strip()
    data: Any = None
    if text:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    if returncode != 0:
        if isinstance(data, dict) and ("code" in data or "msg" in data):
            given = data.get("code")
            code = given if isinstance(given, int) else 999  # 999: no code, or not a number
            raise CniError(str(data.get("msg") or ERROR_CODES.get(code, "plugin error")),
                           code, str(data.get("details") or ""),
                           plugin_type, command)
        message = stderr.decode("utf-8", "replace").strip() or text or f"exit status {returncode}"
        raise CniError(message[:2000], 999, plugin=plugin_type, command=command)
    if not text:
        return None
    if not isinstance(data, dict):
        raise CniError(f"cannot decode the plugin's output: {text[:200]!r}", 6, plugin=plugin_type, command=command)
    return data


def _portmap_ipv6_check_bug(plugin: dict[str, Any], prev: dict[str, Any], e: CniError) -> bool:
    """portmap up to v1.2 checks IPv6 DNAT rules on CHECK even for a pod with IPv4 addresses only, which
    it never made (containernetworking/plugins#819): that one error is not the pod's fault."""
    has_v6 = any(":" in str(ip.get("address", "")) for ip in prev.get("ips") or [])
    return plugin.get("type") == "portmap" and "ipv6" in e.msg and not has_v6
