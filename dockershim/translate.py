"""CRI ↔ Docker translation, pure (no I/O): cri-dockerd's core/helpers.go, naming.go,
convert.go and docker_container.go / docker_sandbox.go's config builders.

- Names: `k8s_<container>_<pod>_<namespace>_<uid>_<attempt>` (`POD` for the sandbox), as
  dockershim named them; the metadata is read back from the name.
- Labels: the CRI labels as Docker labels; annotations as `annotation.<key>` labels; the shim's
  own: `io.kubernetes.docker.type` (podsandbox | container), `io.kubernetes.sandbox.id`,
  `io.kubernetes.container.logpath`, and `io.minik8s.managed=true` / `io.minik8s.node=<node>`
  so a node's cleanup finds everything.
- State: Docker's `State` → CRI ContainerState and reason (Completed, Error, OOMKilled,
  ContainerCannotRun) as cri-dockerd's ContainerStatus.
"""

from __future__ import annotations

from typing import Any

from machinery.cri import api_pb2 as cri
from machinery.timeutil import parse_rfc3339_nano

LABEL_MANAGED = "io.minik8s.managed"
LABEL_NODE = "io.minik8s.node"
LABEL_TYPE = "io.kubernetes.docker.type"
TYPE_SANDBOX = "podsandbox"
TYPE_CONTAINER = "container"
LABEL_SANDBOX_ID = "io.kubernetes.sandbox.id"
LABEL_LOG_PATH = "io.kubernetes.container.logpath"
LABEL_HOST_NETWORK = "io.minik8s.hostNetwork"
LABEL_CONTAINER_NAME = "io.kubernetes.container.name"
ANNOTATION_PREFIX = "annotation."
# the shim's own labels: not handed back as CRI labels
INTERNAL_LABELS = frozenset({LABEL_MANAGED, LABEL_NODE, LABEL_TYPE, LABEL_SANDBOX_ID, LABEL_LOG_PATH,
                             LABEL_HOST_NETWORK})

NAME_PREFIX = "k8s"
SANDBOX_CONTAINER_NAME = "POD"
LOG_MAX_SIZE = "10m"  # json-file rotation, as the kubelet configured Docker before CRI
LOG_MAX_FILES = "2"
SANDBOX_CPU_SHARES = 2  # upstream's minimum shares: the pause container needs none

NANOS = 1_000_000_000


class InvalidArgument(ValueError):
    """A CRI request that cannot be carried out as given (→ gRPC INVALID_ARGUMENT)."""


# -- names ---------------------------------------------------------------------------------------


def sandbox_name(meta: cri.PodSandboxMetadata) -> str:
    return "_".join((NAME_PREFIX, SANDBOX_CONTAINER_NAME, meta.name, meta.namespace, meta.uid, str(meta.attempt)))


def container_name(meta: cri.ContainerMetadata, sandbox: cri.PodSandboxMetadata) -> str:
    return "_".join((NAME_PREFIX, meta.name, sandbox.name, sandbox.namespace, sandbox.uid, str(meta.attempt)))


def parse_name(name: str) -> tuple[str, str, str, str, int] | None:
    """(container, pod, namespace, uid, attempt) from a Docker name; None if it is not ours."""
    parts = name.lstrip("/").split("_")
    if len(parts) != 6 or parts[0] != NAME_PREFIX:
        return None
    try:
        attempt = int(parts[5])
    except ValueError:
        return None
    return parts[1], parts[2], parts[3], parts[4], attempt


def sandbox_metadata(name: str) -> cri.PodSandboxMetadata:
    parsed = parse_name(name)
    if parsed is None:
        return cri.PodSandboxMetadata()
    _, pod, namespace, uid, attempt = parsed
    return cri.PodSandboxMetadata(name=pod, namespace=namespace, uid=uid, attempt=attempt)


def container_metadata(name: str) -> cri.ContainerMetadata:
    parsed = parse_name(name)
    if parsed is None:
        return cri.ContainerMetadata()
    return cri.ContainerMetadata(name=parsed[0], attempt=parsed[4])


def validate_sandbox_metadata(meta: cri.PodSandboxMetadata | None) -> None:
    if meta is None or not meta.name or not meta.namespace or not meta.uid:
        raise InvalidArgument("sandbox config must include metadata with name, namespace and uid")
    for value in (meta.name, meta.namespace, meta.uid):
        if "_" in value:
            raise InvalidArgument(f"sandbox metadata {value!r}: '_' is not allowed (it separates Docker name parts)")


def validate_container_metadata(meta: cri.ContainerMetadata | None) -> None:
    if meta is None or not meta.name:
        raise InvalidArgument("container config must include metadata with a name")
    if "_" in meta.name:
        raise InvalidArgument(f"container name {meta.name!r}: '_' is not allowed")


# -- labels --------------------------------------------------------------------------------------


def make_labels(labels: Any, annotations: Any, node: str, kind: str) -> dict[str, str]:
    out = {str(k): str(v) for k, v in labels.items()}
    for k, v in annotations.items():
        out[ANNOTATION_PREFIX + str(k)] = str(v)
    out.update({LABEL_MANAGED: "true", LABEL_NODE: node, LABEL_TYPE: kind})
    if kind == TYPE_SANDBOX:  # cri-dockerd names the infra container so (summary stats, docker ps)
        out[LABEL_CONTAINER_NAME] = SANDBOX_CONTAINER_NAME
    return out


def split_labels(docker_labels: dict[str, str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """(CRI labels, CRI annotations) from a container's Docker labels."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    for k, v in (docker_labels or {}).items():
        if k.startswith(ANNOTATION_PREFIX):
            annotations[k[len(ANNOTATION_PREFIX):]] = v
        elif k not in INTERNAL_LABELS:
            labels[k] = v
    return labels, annotations


def node_filters(node: str, kind: str | None = None) -> dict[str, list[str]]:
    """Docker list/event filters for what the shim of `node` made."""
    label = [f"{LABEL_MANAGED}=true", f"{LABEL_NODE}={node}"]
    if kind:
        label.append(f"{LABEL_TYPE}={kind}")
    return {"label": label}


def labels_match(selector: Any, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def passes_filter(item: Any, f: Any) -> bool:
    """A PodSandbox or Container against its List filter's state and label selector (the id and sandbox
    are narrowed in Docker's own list query)."""
    if f.HasField("state") and item.state != f.state.state:
        return False
    return labels_match(f.label_selector, dict(item.labels))


# -- time ----------------------------------------------------------------------------------------


def parse_docker_time(value: str | None) -> int:
    """Docker's RFC 3339 nano timestamps as CRI's Unix nanoseconds; 0 for Go's zero time (or none)."""
    return parse_rfc3339_nano(value) or 0


# -- sandboxes -----------------------------------------------------------------------------------


def namespace_options(config: cri.PodSandboxConfig) -> cri.NamespaceOption:
    sc = config.linux.security_context
    return sc.namespace_options


def is_host_network(config: cri.PodSandboxConfig) -> bool:
    return namespace_options(config).network == cri.NODE


def resolv_conf_content(dns: cri.DNSConfig) -> str | None:
    """The sandbox's /etc/resolv.conf from the pod's DNS config (dockershim's rewriteResolvFile); None: keep
    Docker's. The app containers share the file: Docker gives a container in network mode container:<pause>
    the pause container's resolv.conf."""
    lines = [f"nameserver {server}" for server in dns.servers]
    if dns.searches:
        lines.append("search " + " ".join(dns.searches))
    if dns.options:
        lines.append("options " + " ".join(dns.options))
    return "\n".join(lines) + "\n" if lines else None


def cgroup_parent(config: cri.PodSandboxConfig, cgroup_driver: str) -> str | None:
    """HostConfig.CgroupParent of the pod's sandbox and containers: the kubelet's pod cgroup
    (LinuxPodSandboxConfig.cgroup_parent, a cgroupfs path), as cri-dockerd passes it. A Docker on the systemd
    driver takes only slice names: there the pod keeps Docker's default parent."""
    parent = config.linux.cgroup_parent
    if not parent or cgroup_driver != "cgroupfs":
        return None
    return parent


def sandbox_create_body(config: cri.PodSandboxConfig, *, node: str, image: str,
                        cgroup_driver: str = "cgroupfs") -> dict[str, Any]:
    """POST /containers/create for the pause container (cri-dockerd's makeSandboxDockerConfig)."""
    validate_sandbox_metadata(config.metadata)
    ns = namespace_options(config)
    host_network = ns.network == cri.NODE
    labels = make_labels(config.labels, config.annotations, node, TYPE_SANDBOX)
    if host_network:
        labels[LABEL_HOST_NETWORK] = "true"
    host_config: dict[str, Any] = {
        # no network: CNI gives it one (or the node's own)
        "NetworkMode": "host" if host_network else "none",
        "IpcMode": "host" if ns.ipc == cri.NODE else "shareable",
        "RestartPolicy": {"Name": "no"},
        "CpuShares": SANDBOX_CPU_SHARES,
    }
    if ns.pid == cri.NODE:
        host_config["PidMode"] = "host"
    parent = cgroup_parent(config, cgroup_driver)
    if parent:
        host_config["CgroupParent"] = parent
    # DNS is not handed to Docker (which refuses it with the host network): the shim rewrites the
    # sandbox's resolv.conf after start (resolv_conf_content), as upstream's dockershim did
    if config.linux.sysctls:
        host_config["Sysctls"] = dict(config.linux.sysctls)
    sc = config.linux.security_context
    if sc.privileged:
        host_config["Privileged"] = True
    if sc.readonly_rootfs:
        host_config["ReadonlyRootfs"] = True
    body: dict[str, Any] = {"Image": image, "Labels": labels, "HostConfig": host_config}
    if config.hostname and not host_network:  # a host-network pod has the node's hostname
        body["Hostname"] = config.hostname[:63]
    if sc.HasField("run_as_user"):
        body["User"] = str(sc.run_as_user.value)
    return body


def sandbox_state(inspect: dict[str, Any]) -> cri.PodSandboxState:
    return cri.SANDBOX_READY if (inspect.get("State") or {}).get("Running") else cri.SANDBOX_NOTREADY


def sandbox_namespace_options(inspect: dict[str, Any]) -> cri.NamespaceOption:
    hc = inspect.get("HostConfig") or {}
    return cri.NamespaceOption(
        network=cri.NODE if hc.get("NetworkMode") == "host" else cri.POD,
        pid=cri.NODE if hc.get("PidMode") == "host" else cri.CONTAINER,
        ipc=cri.NODE if hc.get("IpcMode") == "host" else cri.POD)


def sandbox_status(inspect: dict[str, Any], ip: str = "") -> cri.PodSandboxStatus:
    labels, annotations = split_labels((inspect.get("Config") or {}).get("Labels"))
    return cri.PodSandboxStatus(
        id=inspect["Id"], metadata=sandbox_metadata(inspect.get("Name") or ""), state=sandbox_state(inspect),
        created_at=parse_docker_time(inspect.get("Created")),
        network=cri.PodSandboxNetworkStatus(ip=ip),
        linux=cri.LinuxPodSandboxStatus(namespaces=cri.Namespace(options=sandbox_namespace_options(inspect))),
        labels=labels, annotations=annotations)


def sandbox_from_list(item: dict[str, Any]) -> cri.PodSandbox:
    """A ListPodSandbox item from one entry of GET /containers/json (no inspect needed)."""
    labels, annotations = split_labels(item.get("Labels"))
    names = item.get("Names") or [""]
    return cri.PodSandbox(
        id=item["Id"], metadata=sandbox_metadata(names[0]),
        state=cri.SANDBOX_READY if item.get("State") == "running" else cri.SANDBOX_NOTREADY,
        created_at=int(item.get("Created") or 0) * NANOS, labels=labels, annotations=annotations)


# -- containers ----------------------------------------------------------------------------------

_PROPAGATION = {cri.PROPAGATION_PRIVATE: "", cri.PROPAGATION_HOST_TO_CONTAINER: "rslave",
                cri.PROPAGATION_BIDIRECTIONAL: "rshared"}


def bind(mount: cri.Mount) -> str:
    """A Mount as a Docker bind, "host:container[:ro,rslave]" (cri-dockerd's generateMountBindings)."""
    if not mount.host_path or not mount.container_path:
        raise InvalidArgument(f"mount {mount.container_path or mount.host_path!r}: "
                              "host_path and container_path are both required")
    opts = []
    if mount.readonly:
        opts.append("ro")
    if mount.selinux_relabel:
        opts.append("Z")
    propagation = _PROPAGATION.get(mount.propagation, "")
    if propagation:
        opts.append(propagation)
    text = f"{mount.host_path}:{mount.container_path}"
    return f"{text}:{','.join(opts)}" if opts else text


def resources_host_config(res: cri.LinuxContainerResources) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if res.memory_limit_in_bytes:
        out["Memory"] = res.memory_limit_in_bytes
        # no swap beyond the limit unless asked (upstream: swap = limit)
        out["MemorySwap"] = res.memory_swap_limit_in_bytes or res.memory_limit_in_bytes
    if res.cpu_shares:
        out["CpuShares"] = res.cpu_shares
    if res.cpu_period:
        out["CpuPeriod"] = res.cpu_period
    if res.cpu_quota:
        out["CpuQuota"] = res.cpu_quota
    if res.oom_score_adj:
        out["OomScoreAdj"] = res.oom_score_adj
    if res.cpuset_cpus:
        out["CpusetCpus"] = res.cpuset_cpus
    if res.cpuset_mems:
        out["CpusetMems"] = res.cpuset_mems
    return out


def user_of(sc: cri.LinuxContainerSecurityContext) -> str | None:
    """"uid", "uid:gid", "name" or None (cri-dockerd's getUserFromImageUser / modifyContainerConfig)."""
    if sc.HasField("run_as_user"):
        user = str(sc.run_as_user.value)
    elif sc.run_as_username:
        user = sc.run_as_username
    elif sc.HasField("run_as_group"):
        user = "0"
    else:
        return None
    if sc.HasField("run_as_group"):
        user += f":{sc.run_as_group.value}"
    return user


def _mode(mode: int, sandbox_id: str, own: str | None) -> str | None:
    if mode == cri.NODE:
        return "host"
    if mode == cri.POD:
        return f"container:{sandbox_id}"
    return own


def container_create_body(config: cri.ContainerConfig, sandbox_config: cri.PodSandboxConfig, *, sandbox_id: str,
                          node: str, log_path: str = "", cgroup_driver: str = "cgroupfs") -> dict[str, Any]:
    """POST /containers/create for one app container of a sandbox (cri-dockerd's CreateContainer)."""
    validate_container_metadata(config.metadata)
    if not config.image.image:
        raise InvalidArgument("container config must name an image")
    labels = make_labels(config.labels, config.annotations, node, TYPE_CONTAINER)
    labels[LABEL_SANDBOX_ID] = sandbox_id
    if log_path:
        labels[LABEL_LOG_PATH] = log_path
    body: dict[str, Any] = {
        "Image": config.image.image,
        "Env": [f"{kv.key}={kv.value.decode(errors='surrogateescape')}" for kv in config.envs],  # bytes in CRI
        "Labels": labels,
        "Tty": config.tty,
        "OpenStdin": config.stdin,
        "StdinOnce": config.stdin_once,
        "AttachStdin": False, "AttachStdout": False, "AttachStderr": False,
    }
    # CRI's command replaces the image's ENTRYPOINT, its args the CMD (Kubernetes' semantics)
    if config.command:
        body["Entrypoint"] = list(config.command)
    if config.args or config.command:
        body["Cmd"] = list(config.args)
    if config.working_dir:
        body["WorkingDir"] = config.working_dir
    sc = config.linux.security_context
    user = user_of(sc)
    if user is not None:
        body["User"] = user
    if config.stop_signal:
        body["StopSignal"] = cri.Signal.Name(config.stop_signal).removeprefix("SIGNAL_")
    ns = sc.namespace_options
    host_config: dict[str, Any] = {
        # app containers always live in the sandbox's network namespace (or the host's with it)
        "NetworkMode": f"container:{sandbox_id}",
        "IpcMode": _mode(ns.ipc, sandbox_id, None) or f"container:{sandbox_id}",
        "Binds": [bind(m) for m in config.mounts],
        "RestartPolicy": {"Name": "no"},
        "LogConfig": {"Type": "json-file", "Config": {"max-size": LOG_MAX_SIZE, "max-file": LOG_MAX_FILES}},
    }
    # TARGET: an ephemeral container joins its target's PID namespace (cri-dockerd modifyHostOptionsForContainer)
    pid_mode = f"container:{ns.target_id}" if ns.pid == cri.TARGET and ns.target_id else _mode(ns.pid, sandbox_id, None)
    if pid_mode:
        host_config["PidMode"] = pid_mode
    host_config.update(resources_host_config(config.linux.resources))
    parent = cgroup_parent(sandbox_config, cgroup_driver)
    if parent:
        host_config["CgroupParent"] = parent
    if sc.privileged:
        host_config["Privileged"] = True
    if sc.readonly_rootfs:
        host_config["ReadonlyRootfs"] = True
    if sc.capabilities.add_capabilities:
        host_config["CapAdd"] = list(sc.capabilities.add_capabilities)
    if sc.capabilities.drop_capabilities:
        host_config["CapDrop"] = list(sc.capabilities.drop_capabilities)
    if sc.no_new_privs:
        host_config["SecurityOpt"] = ["no-new-privileges"]
    if sc.supplemental_groups:
        host_config["GroupAdd"] = [str(g) for g in sc.supplemental_groups]
    if sc.masked_paths:
        host_config["MaskedPaths"] = list(sc.masked_paths)
    if sc.readonly_paths:
        host_config["ReadonlyPaths"] = list(sc.readonly_paths)
    body["HostConfig"] = host_config
    return body


def container_state(state: dict[str, Any]) -> tuple[cri.ContainerState, str, str]:
    """(CRI state, reason, message) from Docker's State (cri-dockerd's ContainerStatus)."""
    if state.get("Running") or state.get("Restarting") or state.get("Paused"):
        return cri.CONTAINER_RUNNING, "", ""
    if parse_docker_time(state.get("FinishedAt")):
        if state.get("OOMKilled"):
            reason = "OOMKilled"
        elif int(state.get("ExitCode") or 0) == 0:
            reason = "Completed"
        else:
            reason = "Error"
        return cri.CONTAINER_EXITED, reason, str(state.get("Error") or "")
    if int(state.get("ExitCode") or 0) != 0 or state.get("Error"):  # it never started
        return cri.CONTAINER_EXITED, "ContainerCannotRun", str(state.get("Error") or "")
    if state.get("Status") in ("exited", "dead"):
        return cri.CONTAINER_EXITED, "", ""
    return cri.CONTAINER_CREATED, "", ""


def _list_state(status: str) -> cri.ContainerState:
    return {"created": cri.CONTAINER_CREATED, "running": cri.CONTAINER_RUNNING, "restarting": cri.CONTAINER_RUNNING,
            "paused": cri.CONTAINER_RUNNING, "exited": cri.CONTAINER_EXITED,
            "dead": cri.CONTAINER_EXITED}.get(status, cri.CONTAINER_UNKNOWN)


def container_from_list(item: dict[str, Any]) -> cri.Container:
    labels, annotations = split_labels(item.get("Labels"))
    names = item.get("Names") or [""]
    image_id = str(item.get("ImageID") or "")
    return cri.Container(
        id=item["Id"], pod_sandbox_id=(item.get("Labels") or {}).get(LABEL_SANDBOX_ID, ""),
        metadata=container_metadata(names[0]), image=cri.ImageSpec(image=str(item.get("Image") or "")),
        image_ref=image_id, image_id=image_id, state=_list_state(str(item.get("State") or "")),
        created_at=int(item.get("Created") or 0) * NANOS, labels=labels, annotations=annotations)


def container_status(inspect: dict[str, Any]) -> cri.ContainerStatus:
    config = inspect.get("Config") or {}
    docker_labels = config.get("Labels") or {}
    labels, annotations = split_labels(docker_labels)
    state = inspect.get("State") or {}
    cri_state, reason, message = container_state(state)
    mounts = [cri.Mount(container_path=m.get("Destination", ""), host_path=m.get("Source", ""),
                        readonly=not m.get("RW", True))
              for m in inspect.get("Mounts") or [] if m.get("Type") == "bind"]
    image_id = str(inspect.get("Image") or "")
    started_at = parse_docker_time(state.get("StartedAt"))
    finished_at = parse_docker_time(state.get("FinishedAt")) if cri_state == cri.CONTAINER_EXITED else 0
    if finished_at and started_at > finished_at:
        # Docker stamps StartedAt after runc returned, FinishedAt from the exit event: a process that ends
        # within a millisecond or two "finishes before it started"; it finished when it started
        finished_at = started_at
    return cri.ContainerStatus(
        id=inspect["Id"], metadata=container_metadata(inspect.get("Name") or ""), state=cri_state,
        created_at=parse_docker_time(inspect.get("Created")), started_at=started_at, finished_at=finished_at,
        exit_code=int(state.get("ExitCode") or 0), image=cri.ImageSpec(image=str(config.get("Image") or "")),
        image_ref=image_id, image_id=image_id, reason=reason, message=message, labels=labels,
        annotations=annotations, mounts=mounts, log_path=docker_labels.get(LABEL_LOG_PATH, ""))


# -- images --------------------------------------------------------------------------------------


def image_from_inspect(data: dict[str, Any]) -> cri.Image:
    """An Image from GET /images/{name}/json or one entry of GET /images/json."""
    user = str((data.get("Config") or {}).get("User") or "")
    image = cri.Image(id=str(data.get("Id") or ""), repo_tags=list(data.get("RepoTags") or []),
                      repo_digests=list(data.get("RepoDigests") or []), size=int(data.get("Size") or 0))
    name = user.split(":", 1)[0]
    if name.isdigit():
        image.uid.value = int(name)
    elif name:
        image.username = name
    return image
