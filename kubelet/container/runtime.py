"""The container runtime as the kubelet sees it (upstream pkg/kubelet/container/runtime.go).

Above the CRI: the pod workers, status, probes and the server deal in these types and this
interface only; `kubelet/kuberuntime` implements it on a CRI RuntimeService + ImageService, so any
CRI runtime (the Docker shim, containerd, the fake) runs the node's pods.

A pod's `PodStatus` is what the runtime has for its uid: its sandboxes and every instance of its
containers, newest first (the current one and the ones before it, for restart counts and
`logs --previous`). Status times are epoch seconds; None is "not yet".
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import StrEnum

from machinery.api.core_v1 import Pod


class ConfigError(Exception):
    """The container cannot be configured: its waiting reason is CreateContainerConfigError (upstream
    ErrCreateContainerConfig, pkg/kubelet/container/sync_result.go)."""


class ContainerState(StrEnum):
    CREATED = "created"
    RUNNING = "running"
    EXITED = "exited"
    UNKNOWN = "unknown"


@dataclass
class ContainerStatus:
    """One instance of one container of a pod (upstream kubecontainer.Status)."""

    id: str
    name: str
    state: ContainerState
    attempt: int = 0  # the restart count this instance was created with
    runtime: str = "cri"  # the containerID scheme: docker://, containerd://
    created_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int = 0
    reason: str = ""  # the runtime's: OOMKilled, Error, Completed, StartError
    message: str = ""
    image: str = ""  # as the pod spec names it
    image_ref: str = ""
    hash: str = ""
    sandbox_id: str = ""
    log_path: str = ""
    termination_message_path: str = ""
    termination_message_host_path: str = ""  # the host file mounted there
    tty: bool = False

    @property
    def running(self) -> bool:
        return self.state == ContainerState.RUNNING

    @property
    def exited(self) -> bool:
        return self.state == ContainerState.EXITED

    @property
    def oom_killed(self) -> bool:
        return self.reason == "OOMKilled"

    @property
    def start_failed(self) -> bool:
        """Exited without ever running (the runtime could not start it)."""
        return self.exited and self.started_at is None

    @property
    def container_id(self) -> str:
        return f"{self.runtime}://{self.id}"


@dataclass
class SandboxStatus:
    """One sandbox of a pod (upstream's PodSandboxStatus, in the kubelet's terms)."""

    id: str
    attempt: int
    ready: bool
    created_at: float = 0.0
    ip: str = ""
    host_network: bool = False


@dataclass
class PodStatus:
    """What the runtime has of one pod (upstream kubecontainer.PodStatus)."""

    uid: str
    name: str = ""
    namespace: str = ""
    sandboxes: list[SandboxStatus] = field(default_factory=list)  # newest first
    containers: list[ContainerStatus] = field(default_factory=list)

    @property
    def ip(self) -> str:
        """The address of the newest ready sandbox (upstream reads it from PodSandboxStatus.network)."""
        for sb in self.sandboxes:
            if sb.ready:
                return sb.ip
        return ""

    def instances(self, name: str) -> list[ContainerStatus]:
        """The instances of one container, newest first."""
        out = [c for c in self.containers if c.name == name]
        return sorted(out, key=lambda c: (c.attempt, c.created_at or 0), reverse=True)

    def find(self, container_id: str) -> ContainerStatus | None:
        return next((c for c in self.containers if c.id == container_id), None)

    @property
    def running_containers(self) -> list[ContainerStatus]:
        return [c for c in self.containers if c.running]


@dataclass
class RuntimeCondition:
    type: str
    status: bool
    reason: str = ""
    message: str = ""


@dataclass
class RuntimeStatus:
    """The runtime's own health (upstream kubecontainer.RuntimeStatus): RuntimeReady, NetworkReady."""

    conditions: list[RuntimeCondition] = field(default_factory=list)

    def get(self, kind: str) -> RuntimeCondition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def not_ready_message(self) -> str:
        """Empty when ready; else upstream's words for the node's Ready condition."""
        runtime = self.get("RuntimeReady")
        if runtime is None or not runtime.status:
            reason = f"{runtime.reason}: {runtime.message}" if runtime else "missing RuntimeReady condition"
            return f"container runtime is down: {reason}"
        network = self.get("NetworkReady")
        if network is None or not network.status:
            reason = f"{network.reason}: {network.message}" if network else "missing NetworkReady condition"
            return f"container runtime network not ready: NetworkReady=false reason:{reason}"
        return ""

    @property
    def network_ready(self) -> bool:
        network = self.get("NetworkReady")
        return network is not None and network.status


@dataclass
class LogOptions:
    """What `kubectl logs` asks for (upstream v1.PodLogOptions as the runtime reads it)."""

    follow: bool = False
    tail_lines: int | None = None
    since: float | None = None  # epoch seconds
    timestamps: bool = False
    limit_bytes: int | None = None


@dataclass
class SyncResult:
    """What one SyncPod did not manage: container name → (waiting reason, message), and when to look again."""

    waiting: dict[str, tuple[str, str]] = field(default_factory=dict)
    requeue_after: float | None = None



class Runtime(abc.ABC):
    """The interface the kubelet drives (upstream kubecontainer.Runtime + ImageService + StreamingRuntime)."""

    @abc.abstractmethod
    def type(self) -> str: ...

    @abc.abstractmethod
    async def version(self) -> str: ...

    @abc.abstractmethod
    async def status(self) -> RuntimeStatus: ...

    @abc.abstractmethod
    async def update_pod_cidr(self, cidr: str) -> None: ...

    @abc.abstractmethod
    def get_pod_status(self, uid: str) -> PodStatus:
        """The runtime cache's latest view of the pod (kept fresh by the PLEG)."""

    @abc.abstractmethod
    def pod_uids(self) -> set[str]: ...

    @abc.abstractmethod
    async def sync_pod(self, pod: Pod) -> SyncResult: ...

    @abc.abstractmethod
    def waiting(self, uid: str) -> dict[str, tuple[str, str]]:
        """Why the pod's containers that do not run wait (upstream's reasonCache): name → (reason, message)."""

    @abc.abstractmethod
    def messages(self, uid: str) -> dict[str, str]:
        """Termination messages of the pod's exited containers, by container id."""

    @abc.abstractmethod
    def request_kill(self, uid: str, name: str, container_id: str, reason: str) -> None:
        """A liveness or startup probe failed: the next SyncPod kills (and restarts) that container."""

    @abc.abstractmethod
    def request_stop(self, uid: str) -> None:
        """The pod is being deleted: work under way for it (an image pull) is abandoned."""

    @abc.abstractmethod
    def forget_pod(self, uid: str) -> None:
        """The pod is gone: drop what was kept for it (reasons, back-off)."""

    @abc.abstractmethod
    async def stop_sandboxes(self, pod: Pod) -> None:
        """A finished pod gives its sandbox and address back; its containers stay for their logs."""

    @abc.abstractmethod
    async def kill_pod(self, pod: Pod | None, uid: str, grace: int) -> None:
        """Stop every container (preStop, SIGTERM, SIGKILL after `grace`) and the sandbox."""

    @abc.abstractmethod
    async def remove_pod(self, uid: str) -> None:
        """Remove the pod's stopped containers and sandboxes."""

    @abc.abstractmethod
    async def get_image_ref(self, image: str) -> str | None: ...

    @abc.abstractmethod
    async def pull_image(self, image: str) -> str: ...

    @abc.abstractmethod
    def get_container_logs(self, container: ContainerStatus, options: LogOptions) -> AsyncIterator[bytes]: ...

    @abc.abstractmethod
    async def run_in_container(self, container_id: str, cmd: list[str], timeout: float) -> tuple[int | None, bytes]: ...

    @abc.abstractmethod
    async def get_exec(self, container_id: str, cmd: list[str], *, tty: bool, stdin: bool, stdout: bool,
                       stderr: bool) -> str:
        """The URL of the runtime's streaming server that runs this exec."""

    @abc.abstractmethod
    async def get_attach(self, container_id: str, *, tty: bool, stdin: bool, stdout: bool, stderr: bool) -> str:
        """The URL of the runtime's streaming server attached to the container's streams (CRI Attach)."""

    @abc.abstractmethod
    async def get_port_forward(self, sandbox_id: str, ports: list[int]) -> str:
        """The URL of the runtime's streaming server forwarding into the sandbox's network namespace
        (CRI PortForward)."""
