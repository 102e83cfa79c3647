"""One worker per pod (upstream pkg/kubelet/pod_workers.go + kuberuntime's SyncPod/KillPod).

A worker is a task that sleeps until something about its pod changes — the API object (informer),
one of its containers (Docker events), a probe verdict, a back-off timer — and then makes the
node match the pod, from scratch each time (level-triggered, so a restarted kubelet simply
carries on with the containers it finds):

1. volumes on the host;
2. the sandbox: the newest pause container of the pod if it runs and its CNI attachment is
   recorded, else a new one (the old one's network torn down, its app containers stopped);
3. each app container: keep it if it runs (unless a liveness/startup probe failed or its spec
   changed); restart it per restartPolicy, waiting out CrashLoopBackOff; pull its image per
   imagePullPolicy (ErrImagePull / ImagePullBackOff / ErrImageNeverPull); create and start it;
4. the status, written through pods/{name}/status when it changed.

A pod with a deletionTimestamp (or gone from the API) is killed instead (an image pull under way is
abandoned first, as upstream cancels the sync in progress): preStop hooks, SIGTERM,
SIGKILL after the grace period, CNI DEL, containers and sandbox removed, then the kubelet
confirms the deletion (DELETE with gracePeriodSeconds=0 and the pod's uid as precondition).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from cni.invoke import CniError
from kubelet.backoff import Backoff
from kubelet.container_config import ConfigError, PodContext, build_create_config, container_env, spec_hash
from kubelet.docker_client import DockerError
from kubelet.probes import ProbeTarget
from kubelet.runtime import (
    LABEL_CONTAINER_NAME,
    LABEL_CONTAINER_TYPE,
    LABEL_HASH,
    LABEL_IMAGE,
    LABEL_RESTART_COUNT,
    LABEL_SANDBOX_ID,
    LABEL_TERMINATION_MESSAGE,
    ContainerInfo,
    docker_name,
    pod_labels,
)
from kubelet.status import TERMINAL_PHASES, PodRuntimeState, compute_pod_status
from kubelet.volumes import HostVolume, VolumeError
from machinery.api.core_v1 import Container, LifecycleHandler, Pod
from machinery.client import ApiError, ApiUnavailable
from machinery.timeutil import format_go_duration, now_rfc3339

if TYPE_CHECKING:
    from kubelet.kubelet import Kubelet

log = logging.getLogger(__name__)

DEFAULT_GRACE = 30
MAX_SYNC_RETRY = 30.0
TERMINATION_MESSAGE_LIMIT = 4096


def default_pull_policy(image: str) -> str:
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    return "Always" if (not tag and not digest) or tag == "latest" else "IfNotPresent"


def fmt_duration(seconds: float) -> str:
    """Go's time.Duration.String() for whole seconds: 10s, 1m20s, 5m0s."""
    return format_go_duration(round(seconds))


def image_pull_waiting(backoff: Backoff, key: str, showing: str) -> tuple[str, float] | None:
    """What a container whose image pull `key` failed waits with while its back-off window is open,
    and in how many seconds that changes; None once the pull may be tried again.

    ErrImagePull stays for the first half of the window and ImagePullBackOff shows for the rest, by
    the clock, not by how many syncs run in between: a sync woken early (the new sandbox's Docker
    events during the first pull, another writer's status) would otherwise replace ErrImagePull within
    milliseconds, before anyone reading the pod could see it. A container not showing ErrImagePull
    (another one sharing the image, a restarted worker) goes straight to ImagePullBackOff."""
    if not backoff.in_backoff(key):
        return None
    remaining = backoff.remaining_since_update(key)
    half = backoff.get(key) / 2
    if showing == "ErrImagePull" and remaining > half:
        return "ErrImagePull", remaining - half
    return "ImagePullBackOff", remaining


@dataclass
class KillRequest:
    container_id: str
    reason: str


class PodWorker:
    def __init__(self, kubelet: Kubelet, pod: Pod) -> None:
        self.k = kubelet
        self.pod = pod
        self.uid = pod.metadata.uid or ""
        self.removed = False  # the API object is gone
        self.terminated = False  # containers and sandbox are gone after a deletion
        self.waiting: dict[str, tuple[str, str]] = {}
        self.kill_requests: dict[str, KillRequest] = {}
        self.messages: dict[str, str] = {}  # container id -> termination message
        self._reported: dict[str, object] = {}  # what a repeated event was last sent for (one per episode)
        self.pod_ip: str | None = None
        self.sandbox_ready = False
        self.last_status: dict[str, Any] | None = None
        self.last_status_rv = 0  # the pod's resourceVersion our last status write produced
        self.writing_status = False  # a status write is on its way (its response not yet in)
        self.unsettled_status_rv = 0  # the newest status-only copy seen meanwhile: ours, or another writer's
        self.failures = 0
        self.syncs = 0  # completed syncs (the kubelet's /debug/pods shows them)
        self._wake = asyncio.Event()
        self.stop_requested = asyncio.Event()  # the pod is being deleted: an image pull under way is abandoned
        self._timer: asyncio.TimerHandle | None = None
        self._next_at = 0.0
        self._hold_until = 0.0  # after a failed sync, only a deletion is worth an earlier retry
        self.task: asyncio.Task[None] | None = None
        self.synced = asyncio.Event()  # set after the first full sync (tests, benchmarks)

    @property
    def name(self) -> str:
        return f"{self.pod.metadata.namespace}/{self.pod.metadata.name}"

    # -- scheduling ---------------------------------------------------------------------------

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"pod-worker:{self.name}")
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    def status_write_done(self, rv: int) -> None:
        """Our status write came back with resourceVersion `rv` (0: it failed). A status-only copy that
        arrived while it was on its way was our own write, its watch event faster than the response,
        unless it is newer than the write: then another writer changed the status after us, and a sync
        writes ours over it."""
        self.writing_status = False
        if self.unsettled_status_rv > rv:
            self.wake()
        self.unsettled_status_rv = 0

    def wake_after(self, delay: float) -> None:
        """Wake in `delay` seconds (an earlier pending wake-up wins)."""
        loop = asyncio.get_running_loop()
        at = loop.time() + max(delay, 0.0)
        if self._timer is not None and not self._timer.cancelled() and self._next_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._next_at = at
        self._timer = loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self.wake()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            loop = asyncio.get_running_loop()
            deleting = self.removed or self.pod.metadata.deletion_timestamp is not None
            if not deleting and loop.time() < self._hold_until:
                self.wake_after(self._hold_until - loop.time())
                continue
            try:
                if self.removed or self.pod.metadata.deletion_timestamp:
                    if not self.terminated:
                        await self.terminate()
                    elif not self.removed:
                        # stopped, but the confirmation did not reach the apiserver (it was away): say it again
                        await self.confirm_deletion()
                    if self.removed:
                        return
                else:
                    await self.sync()
                self.failures = 0
                self.syncs += 1
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.failures += 1
                delay = min(0.2 * 2 ** self.failures, MAX_SYNC_RETRY)
                expected = isinstance(e, DockerError | CniError | ApiError | ApiUnavailable | OSError)
                log.warning("sync of pod %s failed (retry in %.1fs): %s", self.name, delay, e,
                            exc_info=not expected)
                self._hold_until = asyncio.get_running_loop().time() + delay
                self.wake_after(delay)
            finally:
                self.synced.set()

    # -- helpers --------------------------------------------------------------------------------

    def event(self, type_: str, reason: str, message: str) -> None:
        self.k.recorder.event(self.pod, type_, reason, message)

    def event_once(self, key: str, episode: object, type_: str, reason: str, message: str) -> None:
        """An event repeated by every sync of one situation (a back-off window) is sent once for it."""
        if self._reported.get(key) != episode:
            self._reported[key] = episode
            self.event(type_, reason, message)

    @property
    def restart_policy(self) -> str:
        return (self.pod.spec.restart_policy if self.pod.spec else None) or "Always"

    @property
    def grace(self) -> int:
        spec = self.pod.spec
        value = spec.termination_grace_period_seconds if spec else None
        return DEFAULT_GRACE if value is None else max(int(value), 0)

    def containers(self) -> list[Container]:
        return list(self.pod.spec.containers) if self.pod.spec else []

    @property
    def host_network(self) -> bool:
        return bool(self.pod.spec and self.pod.spec.host_network)

    def init_containers(self) -> list[Container]:
        return list(self.pod.spec.init_containers or []) if self.pod.spec else []

    def will_restart(self, inst: ContainerInfo) -> bool:
        if self.restart_policy == "Never":
            return False
        if self.restart_policy == "OnFailure":
            return inst.exit_code != 0 or inst.oom_killed or bool(inst.error)
        return True

    def probe_target(self, name: str) -> ProbeTarget | None:
        instances = self.k.cache.instances(self.uid, name)
        if not instances or not instances[0].running or not self.pod_ip:
            return None
        cur = instances[0]
        return ProbeTarget(cur.id, cur.started_at or time.time(), self.pod_ip)

    # -- sync -----------------------------------------------------------------------------------

    async def sync(self) -> None:
        pod = self.pod
        api_phase = pod.status.phase if pod.status else None
        if api_phase in TERMINAL_PHASES or (self.last_status or {}).get("phase") in TERMINAL_PHASES:
            await self._stop_sandboxes()
            await self.update_status()
            return
        if not self.k.network.ready and not self.host_network:
            for c in self.containers():
                self.waiting.setdefault(c.name, ("ContainerCreating", ""))
            self.event_once("network", True, "Warning", "NetworkNotReady",
                            "network is not ready: container runtime network not ready: the node has no podCIDR yet")
            await self.update_status()
            return
        try:
            volumes = await asyncio.to_thread(self.k.volumes.setup, pod)
        except (VolumeError, OSError) as e:
            self.event("Warning", "FailedMount", f"Unable to attach or mount volumes: {e}")
            for c in self.containers():
                self.waiting.setdefault(c.name, ("ContainerCreating", ""))
            await self.update_status()
            self.wake_after(min(2.0 * 2 ** self.failures, MAX_SYNC_RETRY))
            return

        sandbox = self.current_sandbox()
        if sandbox is None:
            if not self._anything_to_run():
                self.sandbox_ready = False
                await self.update_status()
                return
            sandbox = await self.recreate_sandbox()
        self.sandbox_ready = True
        self.pod_ip = self.k.config.node_ip if sandbox.host_network else self.k.network.pod_ip(sandbox.id)
        self.k.probes.add_pod(pod)

        if await self.sync_init_containers(sandbox, volumes):
            for container in self.containers():
                await self.sync_container(container, sandbox, volumes)
        else:
            for container in self.containers():
                if not self.k.cache.instances(self.uid, container.name):
                    self.waiting[container.name] = ("PodInitializing", "")
        await self._gc_instances()
        status = await self.update_status()
        if status.get("phase") in TERMINAL_PHASES:
            await self._stop_sandboxes()  # finished: give the address back now, not at the next sync
            await self.update_status()

    def current_sandbox(self) -> ContainerInfo | None:
        sandboxes = self.k.cache.sandboxes(self.uid)
        if sandboxes and sandboxes[0].running and sandboxes[0].host_network == self.host_network \
                and (sandboxes[0].host_network or self.k.network.attached(sandboxes[0].id)):
            return sandboxes[0]
        return None

    def _anything_to_run(self) -> bool:
        """Is there a container that runs, or will be (re)started? Else a dead sandbox stays dead."""
        for c in self.containers():
            instances = self.k.cache.instances(self.uid, c.name)
            if not instances or instances[0].running or self.will_restart(instances[0]):
                return True
        return False

    async def recreate_sandbox(self) -> ContainerInfo:
        pod = self.pod
        old = self.k.cache.sandboxes(self.uid)
        if old:
            self.event("Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
            for inst in self.k.cache.for_pod(self.uid):
                if not inst.is_sandbox and inst.running:
                    await self.k.runtime.stop(inst.id, self.grace)
            for sb in old:
                await self.k.network.teardown(sb.id, sb.pid if sb.running else 0)
                await self.k.runtime.remove(sb.id)
        attempt = old[0].attempt + 1 if old else 0
        spec = pod.spec
        hostname = (spec.hostname if spec and spec.hostname else pod.metadata.name) or "pod"
        try:
            sandbox = await self.k.runtime.create_sandbox(
                pod_uid=self.uid, pod_name=pod.metadata.name or "", namespace=pod.metadata.namespace or "",
                attempt=attempt, hostname=hostname, dns=self.k.config.cluster_dns or None,
                host_network=self.host_network, host_pid=bool(spec and spec.host_pid),
                host_ipc=bool(spec and spec.host_ipc))
        except DockerError as e:
            self.event("Warning", "FailedCreatePodSandBox", f"Failed to create pod sandbox: {e.message}")
            raise
        try:
            ip = self.k.config.node_ip if self.host_network else await self.k.network.setup(sandbox, pod)
        except (CniError, OSError) as e:
            self.event("Warning", "FailedCreatePodSandBox", f"Failed to create pod sandbox: {e}")
            with contextlib.suppress(Exception):
                await self.k.network.teardown(sandbox.id, sandbox.pid)
            await self.k.runtime.remove(sandbox.id)
            raise
        await asyncio.to_thread(self.k.volumes.write_hosts, pod, ip)
        self.pod_ip = ip
        return sandbox

    async def sync_container(self, c: Container, sandbox: ContainerInfo, volumes: dict[str, HostVolume]) -> None:
        instances = self.k.cache.instances(self.uid, c.name)
        cur = instances[0] if instances else None
        spec_changed = False
        if cur is not None and cur.running:
            kill = self.kill_requests.get(c.name)
            if cur.sandbox_id and cur.sandbox_id != sandbox.id:
                await self.kill_container(cur, c, self.grace, None)
            elif kill is not None and kill.container_id == cur.id:
                await self.kill_container(cur, c, self._probe_grace(c), kill.reason)
            elif cur.spec_hash and cur.spec_hash != spec_hash(c):
                await self.kill_container(cur, c, self.grace, f"Container {c.name} definition changed, "
                                                               "will be restarted")
                spec_changed = True
            else:
                self.waiting.pop(c.name, None)
                return
            self.kill_requests.pop(c.name, None)
            cur = await self.k.cache.refresh(cur.id) or cur
        if cur is not None and cur.state == "created" and not cur.error:
            await self.k.runtime.remove(cur.id)  # made but never started (a kubelet crash): make it again
            cur = instances[1] if len(instances) > 1 else None
        if cur is not None and not cur.running:
            await self._read_termination_message(cur, c)
            if not spec_changed and not self.will_restart(cur):
                self.waiting.pop(c.name, None)
                return
            key = f"{self.uid}/{c.name}"
            finished = cur.finished_at or cur.created_at or time.time()
            if not spec_changed and self.k.crash_backoff.in_backoff_since(key, finished):
                window = self.k.crash_backoff.get(key)
                pod_ref = f"{self.pod.metadata.name}_{self.pod.metadata.namespace}({self.uid})"
                self.waiting[c.name] = ("CrashLoopBackOff",
                                        f"back-off {fmt_duration(window)} restarting failed container={c.name} "
                                        f"pod={pod_ref}")
                self.event_once(f"backoff/{c.name}", cur.id, "Warning", "BackOff",
                                f"Back-off restarting failed container {c.name} in pod {pod_ref}")
                self.wake_after(self.k.crash_backoff.remaining(key, finished) + 0.05)
                return
        if not await self.ensure_image(c):
            return
        if cur is not None and not cur.running and not spec_changed:
            self.k.crash_backoff.next(f"{self.uid}/{c.name}", cur.finished_at)
        await self.start_container(c, sandbox, volumes, cur.attempt + 1 if cur else 0)

    async def sync_init_containers(self, sandbox: ContainerInfo, volumes: dict[str, HostVolume]) -> bool:
        """Run the init containers one after the other; True once all of them succeeded. A failed one is
        restarted (with back-off) unless restartPolicy is Never, which fails the pod."""
        for c in self.init_containers():
            instances = self.k.cache.instances(self.uid, c.name)
            cur = instances[0] if instances else None
            if cur is not None and cur.exited and cur.exit_code == 0 and not cur.error and not cur.oom_killed:
                self.waiting.pop(c.name, None)
                continue
            if cur is not None and cur.running:
                return False
            if cur is not None and cur.state == "created" and not cur.error:
                await self.k.runtime.remove(cur.id)
                cur = instances[1] if len(instances) > 1 else None
            if cur is not None and cur.exited:
                await self._read_termination_message(cur, c)
                if self.restart_policy == "Never":
                    self.waiting.pop(c.name, None)
                    return False
                key = f"{self.uid}/{c.name}"
                finished = cur.finished_at or cur.created_at or time.time()
                if self.k.crash_backoff.in_backoff_since(key, finished):
                    pod_ref = f"{self.pod.metadata.name}_{self.pod.metadata.namespace}({self.uid})"
                    self.waiting[c.name] = ("CrashLoopBackOff",
                                            f"back-off {fmt_duration(self.k.crash_backoff.get(key))} restarting "
                                            f"failed container={c.name} pod={pod_ref}")
                    self.event_once(f"backoff/{c.name}", cur.id, "Warning", "BackOff",
                                    f"Back-off restarting failed container {c.name} in pod {pod_ref}")
                    self.wake_after(self.k.crash_backoff.remaining(key, finished) + 0.05)
                    return False
            if not await self.ensure_image(c):
                return False
            if cur is not None and cur.exited:
                self.k.crash_backoff.next(f"{self.uid}/{c.name}", cur.finished_at)
            await self.start_container(c, sandbox, volumes, cur.attempt + 1 if cur else 0)
            return False
        return True

    def _probe_grace(self, c: Container) -> int:
        for probe in (c.liveness_probe, c.startup_probe):
            if probe is not None and probe.termination_grace_period_seconds is not None:
                return int(probe.termination_grace_period_seconds)
        return self.grace

    async def ensure_image(self, c: Container) -> bool:
        image = c.image or ""
        policy = c.image_pull_policy or default_pull_policy(image)
        present = await self.k.runtime.image_ref(image) is not None
        if policy == "Never":
            if present:
                return True
            message = f'Container image "{image}" is not present with pull policy of Never'
            self.waiting[c.name] = ("ErrImageNeverPull", message)
            self.event_once(f"neverpull/{c.name}", image, "Warning", "ErrImageNeverPull", message)
            return False
        if policy == "IfNotPresent" and present:
            self.event("Normal", "Pulled", f'Container image "{image}" already present on machine')
            return True
        key = f"{self.uid}/{image}"
        backoff = self.k.image_backoff
        shown = image_pull_waiting(backoff, key, self.waiting.get(c.name, ("", ""))[0])
        if shown is not None:
            reason, changes_in = shown
            if reason == "ImagePullBackOff":
                message = f'Back-off pulling image "{image}"'
                self.waiting[c.name] = ("ImagePullBackOff", message)
                self.event_once(f"pullbackoff/{c.name}", backoff.last_update(key), "Normal", "BackOff", message)
            # else the failed pull's ErrImagePull and its message stay
            self.wake_after(changes_in + 0.05)
            return False
        self.event("Normal", "Pulling", f'Pulling image "{image}"')
        started = time.monotonic()
        try:
            if not await self._pull_unless_stopped(image):
                return False  # the pod is being deleted: its termination comes next
        except DockerError as e:
            backoff.next(key)
            message = f'Failed to pull image "{image}": {e.message}'
            self.event("Warning", "Failed", message)
            self.event("Warning", "Failed", "Error: ErrImagePull")
            self.waiting[c.name] = ("ErrImagePull", message)
            self.wake_after(backoff.get(key) / 2)  # then ImagePullBackOff for the rest of the window
            return False
        backoff.reset(key)
        self.event("Normal", "Pulled", f'Successfully pulled image "{image}" in {time.monotonic() - started:.3f}s')
        return True

    async def _pull_unless_stopped(self, image: str) -> bool:
        """Pull `image`; False if the pod's deletion came first. A pull can hang for as long as the
        registry lets it (Docker gives up after tens of seconds), and a deleted pod must not wait for it:
        upstream's pod worker cancels the sync under way when the pod becomes terminating."""
        pull = asyncio.ensure_future(self.k.docker.pull_image(image))
        stop = asyncio.ensure_future(self.stop_requested.wait())
        try:
            await asyncio.wait({pull, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not pull.done():
                pull.add_done_callback(lambda t: t.cancelled() or t.exception())  # nobody waits for it now
                pull.cancel()
        if not pull.done():
            return False
        pull.result()  # DockerError from a failed pull
        return True

    async def start_container(self, c: Container, sandbox: ContainerInfo, volumes: dict[str, HostVolume],
                              attempt: int) -> None:
        pod = self.pod
        meta = pod.metadata
        ctx = PodContext(pod_ip=self.pod_ip or "", host_ip=self.k.config.node_ip, node_name=self.k.config.node_name,
                         node_allocatable_cpu_millis=self.k.node_status.cpu_millis,
                         node_allocatable_memory=self.k.node_status.memory_bytes)
        try:
            env = container_env(pod, c, ctx)
            binds = self.k.volumes.binds(c, volumes)
        except (ConfigError, VolumeError) as e:
            self.waiting[c.name] = ("CreateContainerConfigError", str(e))
            self.event("Warning", "Failed", f"Error: {e}")
            self.wake_after(min(5.0 * 2 ** self.failures, MAX_SYNC_RETRY))
            return
        labels = {**pod_labels(self.k.config.node_name, self.uid, meta.name or "", meta.namespace or ""),
                  LABEL_CONTAINER_NAME: c.name, LABEL_CONTAINER_TYPE: "container",
                  LABEL_RESTART_COUNT: str(attempt), LABEL_HASH: spec_hash(c), LABEL_IMAGE: c.image or "",
                  LABEL_SANDBOX_ID: sandbox.id}
        term_file = await asyncio.to_thread(self.k.volumes.termination_message_file, self.uid, c)
        if term_file is not None and c.termination_message_path:
            binds.append(f"{term_file}:{c.termination_message_path}:rw")
            labels[LABEL_TERMINATION_MESSAGE] = c.termination_message_path
        hosts = self.k.volumes.hosts_file(self.uid)
        if hosts is not None and not any(m.mount_path == "/etc/hosts" for m in c.volume_mounts or []):
            binds.append(f"{hosts}:/etc/hosts:rw")
        config = build_create_config(pod, c, image=c.image or "", sandbox_id=sandbox.id, env=env, binds=binds,
                                     labels=labels)
        name = docker_name(c.name, meta.name or "", meta.namespace or "", self.uid, attempt)
        try:
            cid = await self.k.runtime.create_container(name, config)
        except DockerError as e:
            self.waiting[c.name] = ("CreateContainerError", e.message)
            self.event("Warning", "Failed", f"Error: {e.message}")
            self.wake_after(min(2.0 * 2 ** self.failures, MAX_SYNC_RETRY))
            return
        self.event("Normal", "Created", f"Created container {c.name}")
        try:
            await self.k.runtime.start(cid)
        except DockerError as e:
            self.waiting.pop(c.name, None)
            self.event("Warning", "Failed", f'Error: failed to start container "{c.name}": {e.message}')
            self.wake()
            return
        self.waiting.pop(c.name, None)
        self.kill_requests.pop(c.name, None)
        self.event("Normal", "Started", f"Started container {c.name}")
        post_start = c.lifecycle.post_start if c.lifecycle else None
        if post_start is not None:
            ok, message = await self.run_hook(post_start, cid, c, float(self.grace))
            if not ok:
                self.event("Warning", "FailedPostStartHook", message)
                info = self.k.cache.containers.get(cid)
                if info is not None:
                    await self.kill_container(info, c, self.grace, f"FailedPostStartHook: {message}")

    async def run_hook(self, hook: LifecycleHandler, cid: str, c: Container, timeout: float) -> tuple[bool, str]:
        try:
            if hook.exec is not None:
                code, output = await self.k.docker.exec_run(cid, list(hook.exec.command or []), timeout)
                if code == 0:
                    return True, ""
                return False, f"Exec lifecycle hook ({hook.exec.command}) for Container \"{c.name}\" in Pod " \
                              f"\"{self.pod.metadata.name}\" failed - error: exit code {code}, message: " \
                              f"{output.decode(errors='replace').strip()!r}"
            if hook.http_get is not None:
                from kubelet.probes import resolve_port

                host = hook.http_get.host or self.pod_ip or ""
                url = f"{(hook.http_get.scheme or 'HTTP').lower()}://{host}:{resolve_port(hook.http_get.port, c)}" \
                      f"{hook.http_get.path or '/'}"
                async with httpx.AsyncClient(trust_env=False, verify=False) as http:
                    response = await http.get(url, timeout=timeout)
                if response.status_code < 400:
                    return True, ""
                return False, f"HTTP lifecycle hook ({url}) failed with status {response.status_code}"
            if hook.sleep is not None:
                await asyncio.sleep(min(float(hook.sleep.seconds), timeout))
                return True, ""
        except (DockerError, httpx.HTTPError, OSError, ValueError) as e:
            return False, str(e)
        return True, ""

    async def kill_container(self, inst: ContainerInfo, c: Container | None, grace: int, reason: str | None) -> None:
        """preStop hook, then SIGTERM and SIGKILL after what is left of the grace period."""
        self.event("Normal", "Killing", reason or f"Stopping container {inst.name}")
        started = time.monotonic()
        pre_stop = c.lifecycle.pre_stop if c is not None and c.lifecycle else None
        if pre_stop is not None and c is not None and grace > 0:
            try:
                ok, message = await asyncio.wait_for(self.run_hook(pre_stop, inst.id, c, float(grace)), timeout=grace)
            except TimeoutError:
                ok, message = False, f"PreStopHook did not finish within {grace}s"
            if not ok:
                self.event("Warning", "FailedPreStopHook", message)
        left = max(0, round(grace - (time.monotonic() - started)))
        await self.k.runtime.stop(inst.id, left)

    async def _read_termination_message(self, inst: ContainerInfo, c: Container) -> None:
        if inst.id in self.messages:
            return
        message = ""
        if inst.termination_message_host_path:
            with contextlib.suppress(OSError):
                message = (await asyncio.to_thread(self._read_file, inst.termination_message_host_path)).strip()
        if not message and c.termination_message_policy == "FallbackToLogsOnError" and inst.exit_code != 0:
            chunks = []
            with contextlib.suppress(DockerError, httpx.HTTPError):
                async for _, data in self.k.docker.logs(inst.id, tail=80, tty=inst.tty):
                    chunks.append(data)
            message = b"".join(chunks)[-TERMINATION_MESSAGE_LIMIT:].decode(errors="replace")
        self.messages[inst.id] = message

    @staticmethod
    def _read_file(path: str) -> str:
        with open(path, "rb") as f:
            return f.read(TERMINATION_MESSAGE_LIMIT).decode(errors="replace")

    async def _gc_instances(self) -> None:
        """Keep the newest two instances of each container (the current one and the previous, for
        `logs --previous` and lastState); remove older ones and containers no longer in the spec."""
        names = {c.name for c in self.containers() + self.init_containers()}
        for inst in self.k.cache.for_pod(self.uid):
            if inst.is_sandbox:
                continue
            if inst.name not in names:
                if inst.running:
                    await self.kill_container(inst, None, self.grace, None)
                await self.k.runtime.remove(inst.id)
                continue
        for name in names:
            for old in self.k.cache.instances(self.uid, name)[2:]:
                if not old.running:
                    await self.k.runtime.remove(old.id)
                    self.messages.pop(old.id, None)

    async def _stop_sandboxes(self) -> None:
        """A finished pod keeps its containers (for logs) but gives back its sandbox and address."""
        for inst in self.k.cache.for_pod(self.uid):
            if not inst.is_sandbox and inst.running:
                await self.kill_container(inst, None, self.grace, None)
        for sb in self.k.cache.sandboxes(self.uid):
            if self.k.network.attached(sb.id) or sb.running:
                await self.k.network.teardown(sb.id, sb.pid if sb.running else 0)
            if sb.running:
                await self.k.runtime.stop(sb.id, 0)
        self.sandbox_ready = False
        self.k.probes.remove_pod(self.uid)

    # -- status ---------------------------------------------------------------------------------

    def runtime_state(self, terminating: bool = False) -> PodRuntimeState:
        instances = {c.name: self.k.cache.instances(self.uid, c.name)
                     for c in self.containers() + self.init_containers()}
        ready = {c.name: self.k.probes.ready(self.uid, c.name) for c in self.containers() if c.readiness_probe}
        started = {c.name: self.k.probes.started(self.uid, c.name) for c in self.containers() if c.startup_probe}
        return PodRuntimeState(host_ip=self.k.config.node_ip, pod_ip=self.pod_ip, sandbox_ready=self.sandbox_ready,
                               instances=instances, waiting=dict(self.waiting), ready=ready, started=started,
                               messages=dict(self.messages), terminating=terminating)

    async def update_status(self, terminating: bool = False) -> dict[str, Any]:
        for c in self.containers() + self.init_containers():
            for inst in self.k.cache.instances(self.uid, c.name)[:2]:
                if inst.exited:
                    await self._read_termination_message(inst, c)
        status = compute_pod_status(self.pod, self.runtime_state(terminating), now_rfc3339())
        await self.k.status_manager.set_status(self, status)
        return status

    # -- termination ----------------------------------------------------------------------------

    def deletion_grace(self) -> int:
        meta = self.pod.metadata
        if meta.deletion_grace_period_seconds is not None:
            return max(int(meta.deletion_grace_period_seconds), 0)
        return self.grace

    async def terminate(self) -> None:
        """Kill the pod (graceful deletion) and confirm the deletion to the apiserver."""
        grace = self.deletion_grace()
        spec_by_name = {c.name: c for c in self.containers() + self.init_containers()}
        running = [i for i in self.k.cache.for_pod(self.uid) if not i.is_sandbox and i.running]
        if running:
            await asyncio.gather(*(self.kill_container(i, spec_by_name.get(i.name), grace, None) for i in running))
        self.k.probes.remove_pod(self.uid)
        for inst in self.k.cache.for_pod(self.uid):
            if not inst.is_sandbox and not inst.running:
                c = spec_by_name.get(inst.name)
                if c is not None:
                    await self._read_termination_message(inst, c)
        if not self.removed:
            with contextlib.suppress(ApiError, ApiUnavailable):
                await self.update_status(terminating=True)
        for sb in self.k.cache.sandboxes(self.uid):
            await self.k.network.teardown(sb.id, sb.pid if sb.running else 0)
        for inst in self.k.cache.for_pod(self.uid):
            await self.k.runtime.remove(inst.id)
        await asyncio.to_thread(self.k.volumes.teardown, self.uid)
        self.k.crash_backoff.forget_prefix(f"{self.uid}/")
        self.k.image_backoff.forget_prefix(f"{self.uid}/")
        self.sandbox_ready = False
        self.terminated = True
        if not self.removed:
            await self.confirm_deletion()

    async def confirm_deletion(self) -> None:
        meta = self.pod.metadata
        try:
            await self.k.client.delete(Pod, meta.name or "", meta.namespace, grace_period_seconds=0,
                                       preconditions={"uid": self.uid})
        except ApiError as e:
            if not (e.is_not_found or e.is_conflict):
                raise


def _only_status_changed(old: Pod, new: Pod) -> bool:
    ignore = {"resource_version", "managed_fields", "generation"}
    return old.spec == new.spec and old.metadata.model_dump(exclude=ignore) == new.metadata.model_dump(exclude=ignore)


def _rv(pod: Pod) -> int:
    rv = pod.metadata.resource_version or "0"
    return int(rv) if rv.isdigit() else 0


class PodWorkers:
    """The workers of every pod on the node, fed by the pod informer and the runtime."""

    def __init__(self, kubelet: Kubelet) -> None:
        self.k = kubelet
        self.workers: dict[str, PodWorker] = {}
        self.on_new_worker: Callable[[PodWorker], None] | None = None

    def update(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        if not uid or (pod.spec and pod.spec.node_name and pod.spec.node_name != self.k.config.node_name):
            return
        worker = self.workers.get(uid)
        if worker is None:
            worker = PodWorker(self.k, pod)
            self.workers[uid] = worker
            worker.start()
            if self.on_new_worker is not None:
                self.on_new_worker(worker)
            return
        old = worker.pod
        if pod.metadata.deletion_timestamp is not None:
            worker.stop_requested.set()
        if _rv(pod) >= _rv(old):
            worker.pod = pod
            if _only_status_changed(old, pod):
                if _rv(pod) <= worker.last_status_rv:
                    return  # as upstream's pod config: our own status write coming back is no reason to sync
                if worker.writing_status:
                    # the watch may deliver our write before its response is in: which one it is, is known
                    # only then (PodWorker.status_write_done)
                    worker.unsettled_status_rv = max(worker.unsettled_status_rv, _rv(pod))
                    return
            # a status another writer changed (the node lifecycle controller's Ready=False) is synced, so the
            # status manager writes what the kubelet sees over it, as upstream's reconciles with the apiserver
        worker.wake()

    def remove(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        worker = self.workers.get(uid)
        if worker is None:
            return
        worker.removed = True
        worker.pod = pod
        worker.stop_requested.set()
        worker.wake()
        if worker.task is not None:
            worker.task.add_done_callback(lambda _t, uid=uid: self._forget(uid))

    def _forget(self, uid: str) -> None:
        worker = self.workers.get(uid)
        if worker is not None and worker.removed and worker.task is not None and worker.task.done():
            del self.workers[uid]

    def wake(self, uid: str) -> None:
        worker = self.workers.get(uid)
        if worker is not None:
            worker.wake()

    def wake_all(self) -> None:
        for worker in self.workers.values():
            worker.wake()

    def request_kill(self, uid: str, name: str, container_id: str, reason: str) -> None:
        worker = self.workers.get(uid)
        if worker is not None:
            worker.kill_requests[name] = KillRequest(container_id, reason)
            worker.wake()

    async def stop(self) -> None:
        tasks = [w.task for w in self.workers.values() if w.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
