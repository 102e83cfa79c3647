"""From the pod spec to CRI configs (upstream pkg/kubelet/kuberuntime/kuberuntime_container.go
generateContainerConfig, kuberuntime_container_linux.go, kuberuntime_sandbox.go
generatePodSandboxConfig, security_context.go). Pure: no I/O.

What the kubelet itself provides for a container (its environment, the host paths of its volumes,
/etc/hosts, the termination-message file) arrives as `RunContainerOptions`, as upstream's
RuntimeHelper.GenerateRunContainerOptions hands it over.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubelet.container.helpers import expand, hash_container
from kubelet.kuberuntime import labels
from machinery.api.core_v1 import Container, Pod
from machinery.cri import api_pb2 as pb
from machinery.quantity import parse_quantity

CPU_PERIOD_US = 100_000  # the CFS period limits are expressed in (upstream quotaPeriod)
MIN_CPU_SHARES = 2  # upstream minShares (helpers_linux.go milliCPUToShares)

_PROTOCOLS = {"TCP": pb.TCP, "UDP": pb.UDP, "SCTP": pb.SCTP}


@dataclass
class MountSpec:
    container_path: str
    host_path: str
    readonly: bool = False


@dataclass
class RunContainerOptions:
    envs: list[tuple[str, str]] = field(default_factory=list)
    mounts: list[MountSpec] = field(default_factory=list)
    # (reason, message) of Warning events about the container's config (InvalidEnvironmentVariableNames)
    warnings: list[tuple[str, str]] = field(default_factory=list)


def pod_log_directory(logs_root: str, pod: Pod) -> str:
    """upstream BuildPodLogsDirectory: <root>/<namespace>_<name>_<uid>."""
    meta = pod.metadata
    return f"{logs_root}/{meta.namespace}_{meta.name}_{meta.uid}"


def container_log_path(container_name: str, attempt: int) -> str:
    """Relative to the sandbox's log directory (upstream BuildContainerLogsPath)."""
    return f"{container_name}/{attempt}.log"


def namespace_options(pod: Pod) -> pb.NamespaceOption:
    spec = pod.spec
    return pb.NamespaceOption(
        network=pb.NODE if spec is not None and spec.host_network else pb.POD,
        pid=pb.NODE if spec is not None and spec.host_pid else
        pb.POD if spec is not None and spec.share_process_namespace else pb.CONTAINER,
        ipc=pb.NODE if spec is not None and spec.host_ipc else pb.POD)


def port_mappings(pod: Pod) -> list[pb.PortMapping]:
    """The hostPorts of every container: the runtime's network plugin (CNI portmap) maps them."""
    out = []
    for c in pod.spec.containers if pod.spec else []:
        for p in c.ports or []:
            if not p.host_port:
                continue
            out.append(pb.PortMapping(protocol=_PROTOCOLS.get(p.protocol or "TCP", pb.TCP),
                                      container_port=p.container_port, host_port=p.host_port,
                                      host_ip=p.host_ip or ""))
    return out


def generate_pod_sandbox_config(pod: Pod, attempt: int, log_directory: str,
                                dns_config: pb.DNSConfig | None = None) -> pb.PodSandboxConfig:
    """The sandbox's config; `dns_config` is the pod's resolv.conf (kubelet/network/dns.py), given when the
    sandbox is to be created (upstream: generatePodSandboxConfig asks the DNS configurer)."""
    meta = pod.metadata
    spec = pod.spec
    config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=meta.name or "", uid=meta.uid or "", namespace=meta.namespace or "",
                                       attempt=attempt),
        log_directory=log_directory, labels=labels.sandbox_labels(pod),
        annotations=labels.sandbox_annotations(pod), port_mappings=port_mappings(pod))
    host_network = spec is not None and bool(spec.host_network)
    if not host_network:  # a host-network pod has the node's hostname
        config.hostname = ((spec.hostname if spec and spec.hostname else meta.name) or "pod")[:63]
    if dns_config is not None:
        config.dns_config.CopyFrom(dns_config)
    security = config.linux.security_context
    security.namespace_options.CopyFrom(namespace_options(pod))
    psc = spec.security_context if spec else None
    if psc is not None:
        if psc.run_as_user is not None:
            security.run_as_user.value = psc.run_as_user
        if psc.run_as_group is not None:
            security.run_as_group.value = psc.run_as_group
        security.supplemental_groups.extend(psc.supplemental_groups or [])
    return config


def linux_resources(container: Container) -> pb.LinuxContainerResources:
    """cgroup limits: memory (no extra swap), CPU quota per period from the limit, shares from the request
    (upstream calculateLinuxResources)."""
    res = container.resources
    limits = (res.limits if res else None) or {}
    requests = (res.requests if res else None) or {}
    out = pb.LinuxContainerResources()
    if "memory" in limits:
        mem = parse_quantity(limits["memory"]).int_value()
        out.memory_limit_in_bytes = mem
        out.memory_swap_limit_in_bytes = mem
    cpu_request = requests.get("cpu", limits.get("cpu"))
    out.cpu_shares = MIN_CPU_SHARES if cpu_request is None else \
        max(MIN_CPU_SHARES, parse_quantity(cpu_request).milli_value() * 1024 // 1000)
    if "cpu" in limits:
        millis = parse_quantity(limits["cpu"]).milli_value()
        if millis > 0:
            out.cpu_period = CPU_PERIOD_US
            out.cpu_quota = max(1000, millis * CPU_PERIOD_US // 1000)
    return out


def security_context(pod: Pod, container: Container) -> pb.LinuxContainerSecurityContext:
    """The container's securityContext over the pod's (upstream determineEffectiveSecurityContext)."""
    spec = pod.spec
    psc = spec.security_context if spec else None
    csc = container.security_context
    out = pb.LinuxContainerSecurityContext(namespace_options=namespace_options(pod))
    uid = csc.run_as_user if csc and csc.run_as_user is not None else psc.run_as_user if psc else None
    gid = csc.run_as_group if csc and csc.run_as_group is not None else psc.run_as_group if psc else None
    if uid is not None:
        out.run_as_user.value = uid
    if gid is not None:
        out.run_as_group.value = gid
    if psc is not None and psc.supplemental_groups:
        out.supplemental_groups.extend(psc.supplemental_groups)
    if csc is not None:
        out.privileged = bool(csc.privileged)
        out.readonly_rootfs = bool(csc.read_only_root_filesystem)
        if csc.capabilities is not None:
            out.capabilities.add_capabilities.extend(csc.capabilities.add or [])
            out.capabilities.drop_capabilities.extend(csc.capabilities.drop or [])
        out.no_new_privs = csc.allow_privilege_escalation is False
    return out


def generate_container_config(pod: Pod, container: Container, attempt: int,
                              options: RunContainerOptions, target_id: str = "") -> pb.ContainerConfig:
    """upstream generateContainerConfig: command and args with $(VAR) expanded, env, mounts, log path,
    labels and annotations (restart count, spec hash), resources and security context. `target_id`: an
    ephemeral container's target, whose PID namespace it joins (NamespaceMode TARGET) where it would
    otherwise have its own (generateLinuxContainerConfig)."""
    env_map = dict(options.envs)
    config = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=container.name, attempt=attempt),
        image=pb.ImageSpec(image=container.image or "", user_specified_image=container.image or ""),
        command=[expand(a, env_map) for a in container.command or []],
        args=[expand(a, env_map) for a in container.args or []],
        working_dir=container.working_dir or "",
        envs=[pb.KeyValue(key=k, value=v.encode()) for k, v in options.envs],
        mounts=[pb.Mount(container_path=m.container_path, host_path=m.host_path, readonly=m.readonly)
                for m in options.mounts],
        labels=labels.container_labels(pod, container),
        annotations=labels.container_annotations(pod, container, attempt, hash_container(container)),
        log_path=container_log_path(container.name, attempt),
        stdin=bool(container.stdin), stdin_once=bool(container.stdin_once), tty=bool(container.tty))
    config.linux.resources.CopyFrom(linux_resources(container))
    config.linux.security_context.CopyFrom(security_context(pod, container))
    namespaces = config.linux.security_context.namespace_options
    if target_id and namespaces.pid == pb.CONTAINER:
        namespaces.pid = pb.TARGET
        namespaces.target_id = target_id
    return config
