"""From a pod's container spec to a Docker create request (pure: no I/O).

Kubernetes semantics kept here: `command` replaces the image's ENTRYPOINT and `args` its CMD;
`$(VAR)` references in command, args and env values expand from the container's environment
(`$$` escapes); env values may come from the pod's own fields (fieldRef) and resources
(resourceFieldRef); memory and CPU limits become cgroup limits; runAsUser/runAsGroup the process
user; the container joins the pod sandbox's network and IPC namespaces.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from machinery.api.core_v1 import Container, Pod
from machinery.quantity import parse_quantity

_VAR_RE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")

CPU_PERIOD_US = 100_000  # the CFS period the limits are expressed in (upstream's default)
MIN_CPU_SHARES = 2


class ConfigError(Exception):
    """The container cannot be configured (CreateContainerConfigError)."""


def memory_bytes(value: str | int | float) -> int:
    """Quantity.Value(): "64Mi" → 67108864; ValueError when malformed."""
    return parse_quantity(value).int_value()


def cpu_millis(value: str | int | float) -> int:
    """Quantity.MilliValue(): "250m" → 250, "1" → 1000; ValueError when malformed."""
    return parse_quantity(value).milli_value()


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: known names expand, unknown ones stay as written, $$ is a $."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _VAR_RE.sub(sub, text)


@dataclass(frozen=True)
class PodContext:
    """What env fieldRefs and the runtime need to know about the pod beyond its spec."""

    pod_ip: str = ""
    host_ip: str = ""
    node_name: str = ""
    node_allocatable_cpu_millis: int = 0
    node_allocatable_memory: int = 0


def field_ref_value(pod: Pod, path: str, ctx: PodContext) -> str:
    meta = pod.metadata
    spec = pod.spec
    simple = {
        "metadata.name": meta.name or "",
        "metadata.namespace": meta.namespace or "",
        "metadata.uid": meta.uid or "",
        "spec.nodeName": (spec.node_name if spec else None) or ctx.node_name,
        "spec.serviceAccountName": (spec.service_account_name if spec else None) or "",
        "status.podIP": ctx.pod_ip,
        "status.podIPs": ctx.pod_ip,
        "status.hostIP": ctx.host_ip,
        "status.hostIPs": ctx.host_ip,
    }
    if path in simple:
        return simple[path]
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if m:
        source = (meta.labels if m.group(1) == "labels" else meta.annotations) or {}
        return source.get(m.group(2), "")
    if path in ("metadata.labels", "metadata.annotations"):
        source = (meta.labels if path == "metadata.labels" else meta.annotations) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(source.items()))
    raise ConfigError(f"unsupported fieldRef fieldPath {path!r}")


def resource_field_value(container: Container, resource: str, divisor: Any, ctx: PodContext) -> str:
    res = container.resources
    limits = (res.limits if res else None) or {}
    requests = (res.requests if res else None) or {}
    kind, _, name = resource.partition(".")
    source = limits if kind == "limits" else requests
    if name == "cpu":
        value = parse_quantity(source["cpu"]).value if "cpu" in source else (
            Fraction(ctx.node_allocatable_cpu_millis, 1000) if kind == "limits" else Fraction(0))
        div = parse_quantity(divisor).value if divisor not in (None, "", 0) else Fraction(1)
        return str(math.ceil(value / div))
    if name in ("memory", "ephemeral-storage"):
        value = parse_quantity(source[name]).value if name in source else (
            Fraction(ctx.node_allocatable_memory) if kind == "limits" and name == "memory" else Fraction(0))
        div = parse_quantity(divisor).value if divisor not in (None, "", 0) else Fraction(1)
        return str(math.ceil(value / div))
    raise ConfigError(f"unsupported resourceFieldRef resource {resource!r}")


def container_env(pod: Pod, container: Container, ctx: PodContext) -> list[tuple[str, str]]:
    """The container's environment, in order, with $(VAR) expanded against the earlier entries."""
    out: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    if container.env_from:
        raise ConfigError("envFrom is not supported (minik8s has no ConfigMaps or Secrets)")
    for var in container.env or []:
        if var.value_from is None:
            value = expand(var.value or "", seen)
        else:
            source = var.value_from
            if source.field_ref is not None:
                value = field_ref_value(pod, source.field_ref.field_path, ctx)
            elif source.resource_field_ref is not None:
                ref = source.resource_field_ref
                target = container
                if ref.container_name:
                    found = [c for c in (pod.spec.containers if pod.spec else []) if c.name == ref.container_name]
                    if not found:
                        raise ConfigError(f"resourceFieldRef: no container {ref.container_name!r}")
                    target = found[0]
                value = resource_field_value(target, ref.resource, ref.divisor, ctx)
            elif source.config_map_key_ref is not None:
                ref_cm = source.config_map_key_ref
                if ref_cm.optional:
                    continue
                raise ConfigError(f'configmap "{ref_cm.name}" not found')
            elif source.secret_key_ref is not None:
                ref_s = source.secret_key_ref
                if ref_s.optional:
                    continue
                raise ConfigError(f'secret "{ref_s.name}" not found')
            else:
                raise ConfigError(f"env {var.name}: valueFrom names no source")
        seen[var.name] = value
        out.append((var.name, value))
    return out


def spec_hash(container: Container) -> str:
    """A stable hash of the container spec: a change (e.g. a new image) means a new container."""
    data = container.model_dump(mode="json", by_alias=True, exclude_none=True)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def resources_host_config(container: Container) -> dict[str, Any]:
    """cgroup limits: memory (no extra swap), CPU quota per period from the limit, shares from the request."""
    res = container.resources
    limits = (res.limits if res else None) or {}
    requests = (res.requests if res else None) or {}
    out: dict[str, Any] = {}
    if "memory" in limits:
        mem = memory_bytes(limits["memory"])
        out["Memory"] = mem
        out["MemorySwap"] = mem
    cpu_request = requests.get("cpu", limits.get("cpu"))
    if cpu_request is not None:
        out["CpuShares"] = max(MIN_CPU_SHARES, cpu_millis(cpu_request) * 1024 // 1000)
    if "cpu" in limits:
        millis = cpu_millis(limits["cpu"])
        if millis > 0:
            out["CpuPeriod"] = CPU_PERIOD_US
            out["CpuQuota"] = max(1000, millis * CPU_PERIOD_US // 1000)
    return out


def user_of(pod: Pod, container: Container) -> str | None:
    """"uid", "uid:gid" or None, from the container's securityContext over the pod's."""
    psc = pod.spec.security_context if pod.spec else None
    csc = container.security_context
    uid = (csc.run_as_user if csc and csc.run_as_user is not None else None)
    if uid is None and psc is not None:
        uid = psc.run_as_user
    gid = (csc.run_as_group if csc and csc.run_as_group is not None else None)
    if gid is None and psc is not None:
        gid = psc.run_as_group
    if uid is None and gid is None:
        return None
    if uid is None:
        uid = 0
    return f"{uid}:{gid}" if gid is not None else str(uid)


def build_create_config(pod: Pod, container: Container, *, image: str, sandbox_id: str, env: list[tuple[str, str]],
                        binds: list[str], labels: dict[str, str]) -> dict[str, Any]:
    """The body of POST /containers/create for one app container of the pod."""
    env_map = dict(env)
    config: dict[str, Any] = {
        "Image": image,
        "Env": [f"{k}={v}" for k, v in env],
        "Labels": labels,
        "Tty": bool(container.tty),
        "OpenStdin": bool(container.stdin),
        "StdinOnce": bool(container.stdin_once),
        "AttachStdin": False,
        "AttachStdout": False,
        "AttachStderr": False,
    }
    if container.command:
        config["Entrypoint"] = [expand(a, env_map) for a in container.command]
        config["Cmd"] = [expand(a, env_map) for a in container.args or []]
    elif container.args:
        config["Cmd"] = [expand(a, env_map) for a in container.args]
    if container.working_dir:
        config["WorkingDir"] = container.working_dir
    user = user_of(pod, container)
    if user is not None:
        config["User"] = user
    # ports are not exposed through Docker: the container shares the sandbox's network namespace
    # (Docker refuses ExposedPorts with network mode container:), hostPorts are CNI portmap's job
    spec = pod.spec
    host_config: dict[str, Any] = {
        "NetworkMode": f"container:{sandbox_id}",
        "IpcMode": "host" if spec is not None and spec.host_ipc else f"container:{sandbox_id}",
        "Binds": binds,
        "RestartPolicy": {"Name": "no"},
        "LogConfig": {"Type": "json-file", "Config": {"max-size": "10m", "max-file": "2"}},
    }
    # hostPID: the node's process namespace, as dockershim gave it (PodSecurity baseline forbids it)
    if spec is not None and spec.host_pid:
        host_config["PidMode"] = "host"
    elif spec is not None and spec.share_process_namespace:
        host_config["PidMode"] = f"container:{sandbox_id}"
    host_config.update(resources_host_config(container))
    csc = container.security_context
    if csc is not None:
        if csc.privileged:
            host_config["Privileged"] = True
        if csc.read_only_root_filesystem:
            host_config["ReadonlyRootfs"] = True
        if csc.capabilities is not None:
            if csc.capabilities.add:
                host_config["CapAdd"] = list(csc.capabilities.add)
            if csc.capabilities.drop:
                host_config["CapDrop"] = list(csc.capabilities.drop)
        if csc.allow_privilege_escalation is False:
            host_config["SecurityOpt"] = ["no-new-privileges"]
    psc = spec.security_context if spec else None
    if psc is not None and psc.supplemental_groups:
        host_config["GroupAdd"] = [str(g) for g in psc.supplemental_groups]
    config["HostConfig"] = host_config
    return config
