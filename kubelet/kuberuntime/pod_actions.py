"""What one SyncPod is to do, from the pod spec and what runs (upstream
pkg/kubelet/kuberuntime/kuberuntime_manager.go computePodActions, and ShouldContainerBeRestarted of
pkg/kubelet/container/helpers.go). Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubelet.container.helpers import hash_container
from kubelet.container.runtime import ContainerState, ContainerStatus, PodStatus
from machinery.api.core_v1 import Container, EphemeralContainer, Pod

DEFAULT_GRACE = 30


def restart_policy(pod: Pod) -> str:
    return (pod.spec.restart_policy if pod.spec else None) or "Always"


def pod_grace(pod: Pod) -> int:
    value = pod.spec.termination_grace_period_seconds if pod.spec else None
    return DEFAULT_GRACE if value is None else max(int(value), 0)


def should_restart(pod: Pod, c: ContainerStatus) -> bool:
    """upstream ShouldContainerBeRestarted, for an exited instance."""
    policy = restart_policy(pod)
    if policy == "Never":
        return False
    if policy == "OnFailure":
        return c.exit_code != 0 or c.oom_killed or c.start_failed
    return True


def init_succeeded(c: ContainerStatus) -> bool:
    return c.exited and c.exit_code == 0 and not c.oom_killed and not c.start_failed


@dataclass
class KillRequest:
    container_id: str
    reason: str


@dataclass
class PodActions:
    """upstream podActions: what one SyncPod is to do."""

    kill_pod: bool = False
    create_sandbox: bool = False
    sandbox_id: str = ""
    attempt: int = 0
    next_init_container: Container | None = None
    init_failed: bool = False  # an init container failed under restartPolicy Never
    init_pending: bool = False  # an init container runs, or must run first
    containers_to_start: list[Container] = field(default_factory=list)
    # ephemeral containers never started: started once, never restarted (upstream EphemeralContainersToStart)
    ephemeral_to_start: list[EphemeralContainer] = field(default_factory=list)
    # container id -> (the container's spec or None when it left the spec, reason or None, grace override)
    containers_to_kill: dict[str, tuple[Container | None, str | None, int | None]] = field(default_factory=dict)
    spec_changed: set[str] = field(default_factory=set)  # names restarted for a new spec: no back-off


def _probe_grace(c: Container) -> int | None:
    for probe in (c.liveness_probe, c.startup_probe):
        if probe is not None and probe.termination_grace_period_seconds is not None:
            return int(probe.termination_grace_period_seconds)
    return None


def compute_pod_actions(pod: Pod, status: PodStatus, kill_requests: dict[str, KillRequest]) -> PodActions:
    """Pure: compare the pod spec with what runs (upstream computePodActions)."""
    spec = pod.spec
    containers = list(spec.containers) if spec else []
    inits = list(spec.init_containers or []) if spec else []
    host_network = bool(spec and spec.host_network)
    newest = status.sandboxes[0] if status.sandboxes else None
    sandbox_ok = newest is not None and newest.ready and newest.host_network == host_network
    actions = PodActions(sandbox_id=newest.id if newest and sandbox_ok else "",
                         attempt=(newest.attempt + 1) if newest else 0)
    if not sandbox_ok:
        def needs_running(c: Container) -> bool:
            instances = status.instances(c.name)
            return not instances or instances[0].running or should_restart(pod, instances[0])
        if not any(needs_running(c) for c in containers) and status.sandboxes:
            # everything finished and stays so: a dead sandbox stays dead (restartPolicy Never/OnFailure)
            actions.kill_pod = any(c.running for c in status.containers)
            return actions
        actions.kill_pod = bool(status.sandboxes) or any(c.running for c in status.containers)
        actions.create_sandbox = True
        actions.attempt = (newest.attempt + 1) if newest else 0
    if not actions.create_sandbox:
        # ephemeral containers may start even while initialization is under way; never again once they ran
        actions.ephemeral_to_start = [c for c in (spec.ephemeral_containers or [] if spec else [])
                                      if not status.instances(c.name)]
    for c in inits:
        instances = status.instances(c.name)
        cur = instances[0] if instances else None
        if cur is not None and init_succeeded(cur) and not actions.create_sandbox:
            continue
        if cur is not None and cur.running and not actions.create_sandbox:
            actions.init_pending = True
            break
        if cur is not None and cur.exited and not init_succeeded(cur) and restart_policy(pod) == "Never":
            actions.init_failed = True
            actions.init_pending = True
            break
        actions.next_init_container = c
        actions.init_pending = True
        break
    if actions.init_pending:
        return actions
    for c in containers:
        instances = status.instances(c.name)
        cur = instances[0] if instances else None
        if cur is None:
            actions.containers_to_start.append(c)
            continue
        if not cur.running:
            if actions.create_sandbox or cur.state == ContainerState.CREATED or should_restart(pod, cur):
                actions.containers_to_start.append(c)
            continue
        if actions.create_sandbox:
            actions.containers_to_start.append(c)  # killed with the pod
            continue
        kill = kill_requests.get(c.name)
        if cur.sandbox_id and actions.sandbox_id and cur.sandbox_id != actions.sandbox_id:
            actions.containers_to_kill[cur.id] = (c, None, None)
        elif kill is not None and kill.container_id == cur.id:
            actions.containers_to_kill[cur.id] = (c, kill.reason, _probe_grace(c))
        elif cur.hash and cur.hash != hash_container(c):
            actions.containers_to_kill[cur.id] = (c, f"Container {c.name} definition changed, will be restarted",
                                                  None)
            actions.spec_changed.add(c.name)
        else:
            continue
        if restart_policy(pod) != "Never" or c.name in actions.spec_changed:
            actions.containers_to_start.append(c)
    return actions
