"""What the pod workers call (upstream pkg/kubelet/kubelet.go SyncPod, SyncTerminatingPod,
SyncTerminatedPod, and kubelet_pods.go GenerateRunContainerOptions).

`KubeletPodSyncer` holds exactly what a sync needs — the runtime, the status manager, volumes,
probes, the API client and the event recorder — and no Kubelet:

- `sync_pod`: a pod in a terminal phase gives its sandbox back; a pod waits while the runtime's
  network is not ready (unless hostNetwork); volumes are set up (FailedMount); the runtime's
  SyncPod runs the sandbox and containers; the status is computed and written;
- `sync_terminating_pod`: the runtime kills the pod with the grace period (preStop, SIGTERM,
  SIGKILL), the status says so;
- `sync_terminated_pod`: containers and sandboxes removed, volumes torn down, and the deletion
  confirmed (DELETE with gracePeriodSeconds=0 and the pod's uid as precondition).

`KubeletRuntimeHelper` gives each container its environment and mounts: volumes, the
termination-message file, the pod's /etc/hosts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from kubelet import volume_pvc
from kubelet.cm.container_manager import ContainerManager
from kubelet.configmap_secret_manager import ConfigMapSecretManager, PodObjects
from kubelet.container.runtime import ConfigError, Runtime
from kubelet.kubelet_pods import PodContext, container_env
from kubelet.kuberuntime.container_config import MountSpec, RunContainerOptions
from kubelet.probes import ProbeManager
from kubelet.status import TERMINAL_PHASES, PodRuntimeState, compute_pod_status
from kubelet.status_manager import StatusManager
from kubelet.token_manager import TokenError, TokenKey, TokenManager
from kubelet.volume_projected import token_keys
from kubelet.volumes import HostVolume, VolumeError, VolumeManager, VolumeSetUpError
from machinery import tracing
from machinery.api.core_v1 import Container, Pod
from machinery.client import ApiClient, ApiError, ApiUnavailable
from machinery.timeutil import now_rfc3339

log = logging.getLogger(__name__)

EventSink = Callable[[Pod, str, str, str], None]
TOKEN_RETRY_SECONDS = 10.0


class KubeletRuntimeHelper:
    """upstream kubecontainer.RuntimeHelper: what the kubelet adds to a container's config."""

    def __init__(self, volumes: VolumeManager, node_name: str, node_ip: str,
                 allocatable: Callable[[], tuple[int, int]]) -> None:
        self.volumes = volumes
        self.node_name = node_name
        self.node_ip = node_ip
        self.allocatable = allocatable  # (cpu millis, memory bytes)
        self.container_manager: ContainerManager | None = None  # --cgroups-per-qos, once set up
        self.pod_volumes: dict[str, dict[str, HostVolume]] = {}  # uid -> the volumes set up last
        self.pod_objects: dict[str, PodObjects] = {}  # uid -> the ConfigMaps and Secrets its last sync read
        # (namespace, enableServiceLinks) -> the Services as env vars (kubelet/service_env.py)
        self.service_env: Callable[[str, bool], dict[str, str]] = lambda _ns, _links: {}

    def pod_cgroup_parent(self, pod: Pod) -> str:
        """upstream GetPodCgroupParent: the pod's cgroup, the sandbox's cgroup parent ("" without QoS cgroups)."""
        return self.container_manager.pod_cgroup(pod) if self.container_manager is not None else ""

    def pod_ip_for_host_network(self) -> str:
        return self.node_ip

    def write_hosts(self, pod: Pod, pod_ip: str) -> None:
        self.volumes.write_hosts(pod, pod_ip)

    def generate_run_container_options(self, pod: Pod, container: Container, pod_ip: str) -> RunContainerOptions:
        uid = pod.metadata.uid or ""
        cpu, memory = self.allocatable()
        links = pod.spec is None or pod.spec.enable_service_links is not False
        ctx = PodContext(pod_ip=pod_ip, host_ip=self.node_ip, node_name=self.node_name,
                         node_allocatable_cpu_millis=cpu, node_allocatable_memory=memory,
                         service_env=self.service_env(pod.metadata.namespace or "", links))
        warnings: list[tuple[str, str]] = []
        try:
            envs = container_env(pod, container, ctx, self.pod_objects.get(uid), warnings)
            binds = self.volumes.binds(container, self.pod_volumes.get(uid, {}), dict(envs))
        except VolumeError as e:
            raise ConfigError(str(e)) from e
        mounts = []
        for bind in binds:
            src, dst, mode = bind.rsplit(":", 2)
            mounts.append(MountSpec(dst, src, mode == "ro"))
        term_file = self.volumes.termination_message_file(uid, container)
        if term_file is not None and container.termination_message_path:
            mounts.append(MountSpec(container.termination_message_path, str(term_file)))
        hosts = self.volumes.hosts_file(uid)
        if hosts is not None and not any(m.mount_path == "/etc/hosts" for m in container.volume_mounts or []):
            mounts.append(MountSpec("/etc/hosts", str(hosts)))
        return RunContainerOptions(envs=envs, mounts=mounts, warnings=warnings)


class KubeletPodSyncer:
    def __init__(self, runtime: Runtime, status_manager: StatusManager, volumes: VolumeManager,
                 helper: KubeletRuntimeHelper, probes: ProbeManager, client: ApiClient, recorder: EventSink,
                 node_ip: str, network_ready: Callable[[], bool]) -> None:
        self.runtime = runtime
        self.status_manager = status_manager
        self.volumes = volumes
        self.helper = helper
        self.probes = probes
        self.client = client
        self.recorder = recorder
        self.node_ip = node_ip
        self.network_ready = network_ready
        self._network_reported: set[str] = set()
        self._mount_failures: dict[str, int] = {}
        self.objects = ConfigMapSecretManager(client)
        self.tokens = TokenManager(client)

    # -- status ---------------------------------------------------------------------------------

    def runtime_state(self, pod: Pod, terminating: bool = False) -> PodRuntimeState:
        uid = pod.metadata.uid or ""
        status = self.runtime.get_pod_status(uid)
        spec = pod.spec
        containers = list(spec.containers) if spec else []
        all_containers = containers + (list(spec.init_containers or []) + list(spec.ephemeral_containers or [])
                                       if spec else [])
        sandbox_ready = bool(status.sandboxes) and status.sandboxes[0].ready
        if spec is not None and spec.host_network:
            pod_ip = self.node_ip if status.sandboxes else None
        else:
            pod_ip = status.ip or None
        return PodRuntimeState(
            host_ip=self.node_ip, pod_ip=pod_ip, sandbox_ready=sandbox_ready,
            instances={c.name: status.instances(c.name) for c in all_containers},
            waiting=self.runtime.waiting(uid),
            ready={c.name: self.probes.ready(uid, c.name) for c in containers if c.readiness_probe},
            started={c.name: self.probes.started(uid, c.name) for c in containers if c.startup_probe},
            messages=self.runtime.messages(uid), terminating=terminating)

    async def update_status(self, pod: Pod, terminating: bool = False) -> dict[str, Any]:
        status = compute_pod_status(pod, self.runtime_state(pod, terminating), now_rfc3339())
        if not tracing.active():
            await self.status_manager.set_status(pod, status)
            return status
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
        with tracing.span("kubelet.status", attributes={"k8s.pod.phase": status.get("phase"), "k8s.pod.ready": ready}):
            await self.status_manager.set_status(pod, status)  # the PATCH, if any, is this span's child
        return status

    # -- PodSyncer ------------------------------------------------------------------------------

    async def sync_pod(self, pod: Pod) -> float | None:
        pod = self.status_manager.latest(pod)
        uid = pod.metadata.uid or ""
        api_phase = pod.status.phase if pod.status else None
        last_phase = (self.status_manager.last_status(uid) or {}).get("phase")
        if api_phase in TERMINAL_PHASES or last_phase in TERMINAL_PHASES:
            await self._give_back_sandbox(pod)
            await self.update_status(pod)
            return None
        host_network = bool(pod.spec and pod.spec.host_network)
        if not self.network_ready() and not host_network:
            if uid not in self._network_reported:
                self._network_reported.add(uid)
                self.recorder(pod, "Warning", "NetworkNotReady",
                              "network is not ready: container runtime network not ready: the node has no podCIDR yet")
            await self.update_status(pod)
            return None
        # the pod's cgroup (upstream makes it before the volumes) is made in a thread while the volumes are set up
        cgroup = asyncio.ensure_future(self._ensure_pod_cgroup(pod))
        try:
            objects = self.helper.pod_objects[uid] = await self.objects.fetch(pod)
            objects.tokens = await self._tokens(pod)
            self.helper.pod_volumes[uid] = await asyncio.to_thread(self.volumes.setup, pod, objects)
        except (VolumeError, OSError, volume_pvc.ClaimsNotReady) as e:
            failures = self._mount_failures[uid] = self._mount_failures.get(uid, 0) + 1
            claims = isinstance(e, volume_pvc.ClaimsNotReady)  # polled as upstream's WaitForAttachAndMount
            message = str(e) if isinstance(e, VolumeSetUpError) else f"Unable to attach or mount volumes: {e}"
            if not claims or volume_pvc.report_now(failures):
                self.recorder(pod, "Warning", "FailedMount", message)
            if uid not in self.helper.pod_volumes:
                with contextlib.suppress(OSError):  # its event is out; the retry makes it again
                    await cgroup
                await self.update_status(pod)
                return volume_pvc.retry_after(failures) if claims else min(2.0 * 2 ** (failures - 1), 30.0)
            # mounted before: the volumes keep what they hold (a ConfigMap deleted under a running pod, a token
            # that cannot be refreshed yet) and the pod's containers are still looked after, as upstream's
            # volume manager leaves a mounted volume mounted when a remount fails
        except BaseException:
            cgroup.add_done_callback(_looked_at)
            raise
        else:
            self._mount_failures.pop(uid, None)
        await cgroup
        self.probes.add_pod(pod)
        result = await self.runtime.sync_pod(pod)
        status = await self.update_status(self.status_manager.latest(pod))
        if status.get("phase") in TERMINAL_PHASES:
            await self._give_back_sandbox(pod)  # finished: give the address back now, not at the next sync
            await self.update_status(self.status_manager.latest(pod))
        refresh = self.tokens.next_refresh(uid)  # a projected token is rewritten when it is due
        if refresh is not None:
            refresh = max(refresh + 1.0, TOKEN_RETRY_SECONDS)  # a refresh that failed is not retried in a loop
            if result.requeue_after is None or refresh < result.requeue_after:
                return refresh
        return result.requeue_after

    async def _ensure_pod_cgroup(self, pod: Pod) -> None:
        """The pod's cgroup before its sandbox (upstream syncPod: UpdateQOSCgroups, then EnsureExists)."""
        manager = self.helper.container_manager
        if manager is None:
            return
        try:
            await asyncio.to_thread(manager.ensure_pod, pod)
        except OSError as e:
            self.recorder(pod, "Warning", "FailedCreatePodContainer", f"unable to ensure pod container exists: {e}")
            raise

    async def _tokens(self, pod: Pod) -> dict[TokenKey, str | Exception]:
        """The tokens of the pod's projected volumes (cached, refreshed when due), or why there is none."""
        out: dict[TokenKey, str | Exception] = {}
        for key in token_keys(pod):
            try:
                out[key] = await self.tokens.get(key)
            except TokenError as e:
                out[key] = e
        return out

    async def _give_back_sandbox(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        status = self.runtime.get_pod_status(uid)
        if any(sb.ready for sb in status.sandboxes) or status.running_containers:
            await self.runtime.stop_sandboxes(pod)
        self.probes.remove_pod(uid)

    async def sync_terminating_pod(self, pod: Pod, grace: int) -> None:
        uid = pod.metadata.uid or ""
        self.runtime.request_stop(uid)
        await self.runtime.kill_pod(pod, uid, grace)
        self.probes.remove_pod(uid)
        with contextlib.suppress(ApiError, ApiUnavailable):
            await self.update_status(self.status_manager.latest(pod), terminating=True)

    async def _remove_pod_cgroup(self, uid: str) -> None:
        """The pod's containers are gone: so goes its cgroup (housekeeping retries one still busy)."""
        manager = self.helper.container_manager
        if manager is None:
            return
        try:
            if await asyncio.to_thread(manager.destroy_pod, uid):
                await asyncio.to_thread(manager.update_qos_cgroups)
        except OSError as e:
            log.info("cgroup of pod %s not removed yet: %s", uid, e)

    async def sync_terminated_pod(self, pod: Pod, removed: bool) -> None:
        uid = pod.metadata.uid or ""
        await self.runtime.remove_pod(uid)
        await asyncio.to_thread(self.volumes.teardown, uid)
        await self._remove_pod_cgroup(uid)
        self.runtime.forget_pod(uid)
        self.helper.pod_volumes.pop(uid, None)
        self.helper.pod_objects.pop(uid, None)
        self.tokens.delete_pod(uid)
        if self.objects.watcher is not None:
            self.objects.watcher.unregister_pod(uid)
        self._network_reported.discard(uid)
        if removed:
            self.status_manager.forget(uid)
            return
        meta = pod.metadata
        try:
            await self.client.delete(Pod, meta.name or "", meta.namespace, grace_period_seconds=0,
                                     preconditions={"uid": uid})
        except ApiError as e:
            if not (e.is_not_found or e.is_conflict):
                raise


def _looked_at(task: asyncio.Future[None]) -> None:
    """A task nobody awaits any more: its failure is not logged as never retrieved."""
    if not task.cancelled():
        task.exception()
