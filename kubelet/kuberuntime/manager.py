"""The kubelet's runtime on the CRI (upstream pkg/kubelet/kuberuntime/kuberuntime_manager.go,
kuberuntime_container.go, kuberuntime_sandbox.go, kuberuntime_image.go, kuberuntime_gc.go).

`SyncPod` first decides, from the pod spec and what runs (`pod_actions.compute_pod_actions`, pure),
then acts:

1. kill the pod when its sandbox must change (none ready, or a hostNetwork change): containers
   stopped, old sandboxes stopped (`SandboxChanged`);
2. kill the containers to kill (liveness/startup failures with the probe's grace, spec changes,
   containers of an old sandbox);
3. create the sandbox (RunPodSandbox; the runtime sets up its network; the pod IP comes from
   PodSandboxStatus) and write the pod's /etc/hosts;
4. start the next init container, or every app container to start: CrashLoopBackOff waits out its
   window, images are pulled per imagePullPolicy with ErrImagePull / ImagePullBackOff back-off,
   then CreateContainer, StartContainer and the postStart hook.

What it could not do comes back in the `SyncResult` (waiting reasons per container) with the time
to look again; the reasons persist per pod until a container starts (upstream's reasonCache).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

import grpc
import httpx

from kubelet.container.runtime import (
    ConfigError,
    ContainerState,
    ContainerStatus,
    LogOptions,
    PodStatus,
    Runtime,
    RuntimeCondition,
    RuntimeStatus,
    SyncResult,
)
from kubelet.cri.remote_image import RemoteImageService
from kubelet.cri.remote_runtime import RemoteRuntimeService
from kubelet.kuberuntime.container_config import (
    RunContainerOptions,
    generate_container_config,
    generate_pod_sandbox_config,
    pod_log_directory,
)
from kubelet.kuberuntime.images import default_pull_policy, fmt_duration, image_pull_waiting
from kubelet.kuberuntime.logs import read_logs
from kubelet.kuberuntime.pod_actions import (
    KillRequest,
    compute_pod_actions,
    pod_grace,
    should_restart,
)
from kubelet.pleg.generic import GenericPLEG
from machinery import tracing
from machinery.api.core_v1 import Container, EphemeralContainer, LifecycleHandler, Pod
from machinery.cri import api_pb2 as pb
from machinery.cri.errors import CriError
from machinery.flowcontrol import Backoff

log = logging.getLogger(__name__)

MAX_RETRY = 30.0
TERMINATION_MESSAGE_LIMIT = 4096

EventSink = Callable[[Pod, str, str, str], None]


class RuntimeHelper(Protocol):
    """What the kubelet gives each container (upstream kubecontainer.RuntimeHelper)."""

    def generate_run_container_options(self, pod: Pod, container: Container, pod_ip: str) -> RunContainerOptions:
        """Environment and mounts; raises ConfigError (CreateContainerConfigError)."""

    def write_hosts(self, pod: Pod, pod_ip: str) -> None: ...

    def pod_ip_for_host_network(self) -> str: ...

    def pod_cgroup_parent(self, pod: Pod) -> str:
        """The pod's cgroup, its sandbox's cgroup parent ("" for the runtime's default)."""


@dataclass
class _PodState:
    """Per pod, across syncs: waiting reasons, events sent once per episode, termination messages."""

    waiting: dict[str, tuple[str, str]] = field(default_factory=dict)
    reported: dict[str, object] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)  # container id -> termination message
    kill_requests: dict[str, KillRequest] = field(default_factory=dict)
    requeue_after: float | None = None
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)
    # image -> its ImageStatus asked while the sandbox is made (one sync's; ensure_image takes each once)
    image_checks: dict[str, asyncio.Future[str | None]] = field(default_factory=dict)


class KubeGenericRuntimeManager(Runtime):
    def __init__(self, runtime_service: RemoteRuntimeService, image_service: RemoteImageService,
                 helper: RuntimeHelper, recorder: EventSink, pleg: GenericPLEG, *, logs_root: str,
                 runtime_name: str = "cri", crash_backoff: Backoff | None = None, image_backoff: Backoff | None = None,
                 dns_config: Callable[[Pod], pb.DNSConfig] | None = None) -> None:
        self.runtime_service = runtime_service
        self.image_service = image_service
        self.helper = helper
        self.recorder = recorder
        self.logs_root = logs_root
        self.runtime_name = runtime_name
        self.crash_backoff = crash_backoff or Backoff()
        self.image_backoff = image_backoff or Backoff()
        self.dns_config = dns_config  # the pod's resolv.conf for a new sandbox (kubelet/network/dns.py)
        # the PLEG is the kubelet's (it starts and stops it); the manager refreshes what it just changed
        self.pleg = pleg
        self.cache = self.pleg.cache
        self._pods: dict[str, _PodState] = {}
        self.http = httpx.AsyncClient(trust_env=False, verify=False)
        self.pulls = 0  # image pulls started (the kubelet.image span's k8s.image.pulled)

    # -- Runtime: the runtime itself --------------------------------------------------------------

    def type(self) -> str:
        return self.runtime_name

    async def version(self) -> str:
        v = await self.runtime_service.version()
        self.runtime_name = v.runtime_name or self.runtime_name
        self.pleg.runtime_name = self.runtime_name
        return f"{v.runtime_name}://{v.runtime_version}"

    async def status(self) -> RuntimeStatus:
        status = await self.runtime_service.status()
        return RuntimeStatus([RuntimeCondition(c.type, c.status, c.reason, c.message) for c in status.conditions])

    async def update_pod_cidr(self, cidr: str) -> None:
        await self.runtime_service.update_runtime_config(cidr)

    async def close(self) -> None:
        await self.http.aclose()

    # -- what runs --------------------------------------------------------------------------------

    def get_pod_status(self, uid: str) -> PodStatus:
        return self.cache.get(uid)

    def pod_uids(self) -> set[str]:
        return self.cache.uids()

    def waiting(self, uid: str) -> dict[str, tuple[str, str]]:
        state = self._pods.get(uid)
        return dict(state.waiting) if state else {}

    def messages(self, uid: str) -> dict[str, str]:
        state = self._pods.get(uid)
        return dict(state.messages) if state else {}

    def request_kill(self, uid: str, name: str, container_id: str, reason: str) -> None:
        """A liveness or startup probe failed: the next sync kills (and restarts) that container."""
        self._state(uid).kill_requests[name] = KillRequest(container_id, reason)

    def request_stop(self, uid: str) -> None:
        """The pod is being deleted: a pull under way is abandoned (upstream cancels the sync)."""
        self._state(uid).stop_requested.set()

    def forget_pod(self, uid: str) -> None:
        self._pods.pop(uid, None)
        self.crash_backoff.forget_prefix(f"{uid}/")
        self.image_backoff.forget_prefix(f"{uid}/")

    def _state(self, uid: str) -> _PodState:
        state = self._pods.get(uid)
        if state is None:
            state = self._pods[uid] = _PodState()
        return state

    def _event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        self.recorder(pod, type_, reason, message)

    def _event_once(self, pod: Pod, key: str, episode: object, type_: str, reason: str, message: str) -> None:
        state = self._state(pod.metadata.uid or "")
        if state.reported.get(key) != episode:
            state.reported[key] = episode
            self._event(pod, type_, reason, message)

    def _requeue(self, state: _PodState, delay: float) -> None:
        state.requeue_after = delay if state.requeue_after is None else min(state.requeue_after, delay)

    # -- SyncPod --------------------------------------------------------------------------------

    async def sync_pod(self, pod: Pod) -> SyncResult:
        uid = pod.metadata.uid or ""
        state = self._state(uid)
        state.requeue_after = None
        self._drop_image_checks(state)  # a sync that failed half-way left its lookups: they are stale now
        status = self.cache.get(uid)
        actions = compute_pod_actions(pod, status, state.kill_requests)
        grace = pod_grace(pod)
        specs = {c.name: c for c in (pod.spec.containers if pod.spec else [])}
        specs.update({c.name: c for c in (pod.spec.init_containers or [] if pod.spec else [])})
        if actions.kill_pod:
            if actions.create_sandbox and status.sandboxes:
                self._event(pod, "Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
            await self.kill_pod(pod, uid, grace)
        for cid, (spec, reason, grace_override) in actions.containers_to_kill.items():
            cur = self.cache.container(cid)
            if cur is not None:
                await self.kill_container(pod, cur, spec, grace if grace_override is None else grace_override,
                                          reason)
        for c in specs.values():
            kill = state.kill_requests.get(c.name)
            if kill is not None and kill.container_id in actions.containers_to_kill:
                state.kill_requests.pop(c.name, None)
        sandbox_id = actions.sandbox_id
        sandbox_config = generate_pod_sandbox_config(pod, actions.attempt if actions.create_sandbox else
                                                     (status.sandboxes[0].attempt if status.sandboxes else 0),
                                                     pod_log_directory(self.logs_root, pod),
                                                     self.dns_config(pod) if self.dns_config and actions.create_sandbox
                                                     else None)
        sandbox_config.linux.cgroup_parent = self.helper.pod_cgroup_parent(pod)
        if actions.create_sandbox:
            # the images of the containers to start are looked up while the sandbox is made: both wait on the
            # runtime, and a new pod's start-up is one round trip shorter for it
            first = ([actions.next_init_container] if actions.next_init_container is not None
                     else list(actions.containers_to_start))
            for c in first:
                if c.image and c.image not in state.image_checks:
                    state.image_checks[c.image] = asyncio.ensure_future(self.get_image_ref(c.image))
            if state.image_checks:
                await asyncio.sleep(0)  # the lookups go out first: they are answered while the sandbox is made
            try:
                sandbox_id = await self.create_sandbox(pod, sandbox_config)
            except BaseException:
                self._drop_image_checks(state)
                raise
            status = self.cache.get(uid)
        elif not sandbox_id:
            await self._read_termination_messages(pod, status)
            return SyncResult(dict(state.waiting), state.requeue_after)
        pod_ip = self._pod_ip(pod, status)
        for ec in actions.ephemeral_to_start:  # before init containers, as upstream's step 5
            if await self.ensure_image(pod, ec, sandbox_config):
                await self.start_container(pod, ec, sandbox_id, sandbox_config, pod_ip, 0)
        if actions.next_init_container is not None:
            await self._start_if_due(pod, actions.next_init_container, sandbox_id, sandbox_config, pod_ip,
                                     status, spec_changed=False)
        if actions.init_pending:
            for c in pod.spec.containers if pod.spec else []:
                if not status.instances(c.name):
                    state.waiting[c.name] = ("PodInitializing", "")
        for c in actions.containers_to_start:
            await self._start_if_due(pod, c, sandbox_id, sandbox_config, pod_ip, self.cache.get(uid),
                                     spec_changed=c.name in actions.spec_changed)
        running = {c.name for c in self.cache.get(uid).containers if c.running}
        for name in running:
            if name in state.waiting and name not in {c.name for c in actions.containers_to_start}:
                state.waiting.pop(name, None)
        for c in pod.spec.containers if pod.spec else []:
            instances = self.cache.get(uid).instances(c.name)
            if instances and instances[0].exited and not should_restart(pod, instances[0]):
                state.waiting.pop(c.name, None)
        self._drop_image_checks(state)  # those no container took (a back-off, a config error)
        await self._gc_instances(pod)
        await self._read_termination_messages(pod, self.cache.get(uid))
        return SyncResult(dict(state.waiting), state.requeue_after)

    @staticmethod
    def _drop_image_checks(state: _PodState) -> None:
        for check in state.image_checks.values():
            if not check.done():
                check.cancel()
            elif not check.cancelled():
                check.exception()  # looked at: a failed lookup no container took is not logged as unretrieved
        state.image_checks.clear()

    def _pod_ip(self, pod: Pod, status: PodStatus) -> str:
        if pod.spec and pod.spec.host_network:
            return self.helper.pod_ip_for_host_network()
        return status.ip

    async def create_sandbox(self, pod: Pod, config: pb.PodSandboxConfig) -> str:
        with tracing.span("kubelet.run_pod_sandbox") as span:  # --tracing-config-file
            sandbox_id = await self._create_sandbox(pod, config)
            if span is not None:
                status = self.cache.get(pod.metadata.uid or "")
                tracing.set_attributes(span, {"k8s.sandbox.id": sandbox_id, "k8s.pod.ip": status.ip or None})
            return sandbox_id

    async def _create_sandbox(self, pod: Pod, config: pb.PodSandboxConfig) -> str:
        """RunPodSandbox (upstream createPodSandbox); the IP is in its status; /etc/hosts follows it."""
        # the log directory is the containers' (the runtime links their logs there): it is made while the runtime
        # makes the sandbox, which does not use it, so the start waits for the thread once, not twice
        log_dir = asyncio.ensure_future(asyncio.to_thread(os.makedirs, config.log_directory, 0o755, True))
        try:
            try:
                sandbox_id = await self.runtime_service.run_pod_sandbox(config)
            except CriError as e:
                self._event(pod, "Warning", "FailedCreatePodSandBox", f"Failed to create pod sandbox: {e.message}")
                raise
            sandbox = await self.pleg.refresh_sandbox(sandbox_id)  # known before anything can fail: a retry uses it
            ip = self.helper.pod_ip_for_host_network() if pod.spec and pod.spec.host_network else \
                (sandbox.ip if sandbox else "")
            await asyncio.to_thread(self.helper.write_hosts, pod, ip)
            await log_dir  # (its failure fails the sync before any container)
        except BaseException:
            log_dir.add_done_callback(_looked_at)
            raise
        return sandbox_id

    async def _start_if_due(self, pod: Pod, c: Container, sandbox_id: str, sandbox_config: pb.PodSandboxConfig,
                            pod_ip: str, status: PodStatus, *, spec_changed: bool) -> None:
        uid = pod.metadata.uid or ""
        state = self._state(uid)
        instances = status.instances(c.name)
        cur = instances[0] if instances else None
        if cur is not None and cur.state == ContainerState.CREATED:
            # made but never started (a kubelet crash between the two): make it again
            with contextlib.suppress(CriError):
                await self.runtime_service.remove_container(cur.id)
            self.pleg.forget_container(cur.id)
            cur = instances[1] if len(instances) > 1 else None
        if cur is not None and cur.running:
            return
        key = f"{uid}/{c.name}"
        if cur is not None and cur.exited and not spec_changed:
            finished = cur.finished_at or cur.created_at or time.time()
            if self.crash_backoff.in_backoff_since(key, finished):
                window = self.crash_backoff.get(key)
                pod_ref = f"{pod.metadata.name}_{pod.metadata.namespace}({uid})"
                state.waiting[c.name] = ("CrashLoopBackOff", f"back-off {fmt_duration(window)} restarting failed "
                                                             f"container={c.name} pod={pod_ref}")
                self._event_once(pod, f"backoff/{c.name}", cur.id, "Warning", "BackOff",
                                 f"Back-off restarting failed container {c.name} in pod {pod_ref}")
                self._requeue(state, self.crash_backoff.remaining(key, finished) + 0.05)
                return
        if not await self.ensure_image(pod, c, sandbox_config):
            return
        if cur is not None and cur.exited and not spec_changed:
            self.crash_backoff.next(key, cur.finished_at)
        await self.start_container(pod, c, sandbox_id, sandbox_config, pod_ip, cur.attempt + 1 if cur else 0)

    async def ensure_image(self, pod: Pod, c: Container, sandbox_config: pb.PodSandboxConfig) -> bool:
        if not tracing.active():
            return await self._ensure_image(pod, c, sandbox_config)
        with tracing.span("kubelet.image", attributes={"k8s.container.name": c.name, "k8s.image": c.image}) as span:
            pulls = self.pulls
            ok = await self._ensure_image(pod, c, sandbox_config)
            tracing.set_attributes(span, {"k8s.image.pulled": self.pulls != pulls, "k8s.image.ready": ok})
            return ok

    async def _ensure_image(self, pod: Pod, c: Container, sandbox_config: pb.PodSandboxConfig) -> bool:
        """upstream imageManager.EnsureImageExists."""
        state = self._state(pod.metadata.uid or "")
        image = c.image or ""
        policy = c.image_pull_policy or default_pull_policy(image)
        check = state.image_checks.pop(image, None)
        present = (await check if check is not None else await self.get_image_ref(image)) is not None
        if policy == "Never":
            if present:
                return True
            message = f'Container image "{image}" is not present with pull policy of Never'
            state.waiting[c.name] = ("ErrImageNeverPull", message)
            self._event_once(pod, f"neverpull/{c.name}", image, "Warning", "ErrImageNeverPull", message)
            return False
        if policy == "IfNotPresent" and present:
            self._event(pod, "Normal", "Pulled", f'Container image "{image}" already present on machine')
            return True
        key = f"{pod.metadata.uid}/{image}"
        shown = image_pull_waiting(self.image_backoff, key, state.waiting.get(c.name, ("", ""))[0])
        if shown is not None:
            reason, changes_in = shown
            if reason == "ImagePullBackOff":
                message = f'Back-off pulling image "{image}"'
                state.waiting[c.name] = ("ImagePullBackOff", message)
                self._event_once(pod, f"pullbackoff/{c.name}", self.image_backoff.last_update(key), "Normal",
                                 "BackOff", message)
            self._requeue(state, changes_in + 0.05)
            return False
        self._event(pod, "Normal", "Pulling", f'Pulling image "{image}"')
        started = time.monotonic()
        try:
            if not await self._pull_unless_stopped(state, image, sandbox_config):
                return False
        except CriError as e:
            self.image_backoff.next(key)
            message = f'Failed to pull image "{image}": {e.message}'
            self._event(pod, "Warning", "Failed", message)
            self._event(pod, "Warning", "Failed", "Error: ErrImagePull")
            state.waiting[c.name] = ("ErrImagePull", message)
            self._requeue(state, self.image_backoff.get(key) / 2)
            return False
        self.image_backoff.reset(key)
        self._event(pod, "Normal", "Pulled",
                    f'Successfully pulled image "{image}" in {time.monotonic() - started:.3f}s')
        return True

    async def _pull_unless_stopped(self, state: _PodState, image: str, sandbox_config: pb.PodSandboxConfig) -> bool:
        self.pulls += 1
        pull = asyncio.ensure_future(self.image_service.pull_image(image, sandbox_config))
        stop = asyncio.ensure_future(state.stop_requested.wait())
        try:
            await asyncio.wait({pull, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not pull.done():
                pull.add_done_callback(lambda t: t.cancelled() or t.exception())
                pull.cancel()
        if not pull.done():
            return False
        pull.result()
        return True

    async def start_container(self, pod: Pod, c: Container, sandbox_id: str, sandbox_config: pb.PodSandboxConfig,
                              pod_ip: str, attempt: int) -> None:
        """upstream startContainer: config, CreateContainer, StartContainer, postStart hook."""
        uid = pod.metadata.uid or ""
        state = self._state(uid)
        log_dir = os.path.join(sandbox_config.log_directory, c.name)

        def options_and_log_dir() -> RunContainerOptions:  # one trip to a thread for both
            options = self.helper.generate_run_container_options(pod, c, pod_ip)
            os.makedirs(log_dir, 0o755, True)
            return options

        try:
            options = await asyncio.to_thread(options_and_log_dir)
        except ConfigError as e:
            state.waiting[c.name] = ("CreateContainerConfigError", str(e))
            self._event(pod, "Warning", "Failed", f"Error: {e}")
            self._requeue(state, 5.0)
            return
        for reason, message in options.warnings:
            self._event(pod, "Warning", reason, message)
        target_id = ""
        if isinstance(c, EphemeralContainer) and c.target_container_name:
            # upstream startSpec.getTargetID: the target's current instance shares its PID namespace
            target = self.cache.get(uid).instances(c.target_container_name)
            if not target:
                message = f"unable to find target container {c.target_container_name}"
                state.waiting[c.name] = ("CreateContainerConfigError", message)
                self._event(pod, "Warning", "Failed", f"Error: {message}")
                self._requeue(state, 2.0)
                return
            target_id = target[0].id
        config = generate_container_config(pod, c, attempt, options, target_id)
        try:
            with tracing.span("kubelet.create_container", attributes={"k8s.container.name": c.name}) as span:
                cid = await self.runtime_service.create_container(sandbox_id, config, sandbox_config)
                tracing.set_attributes(span, {"k8s.container.id": cid})
        except CriError as e:
            state.waiting[c.name] = ("CreateContainerError", e.message)
            self._event(pod, "Warning", "Failed", f"Error: {e.message}")
            self._requeue(state, 2.0)
            return
        self._event(pod, "Normal", "Created", f"Created container {c.name}")
        try:
            with tracing.span("kubelet.start_container", attributes={"k8s.container.name": c.name,
                                                                     "k8s.container.id": cid}):
                await self.runtime_service.start_container(cid)
        except CriError as e:
            state.waiting.pop(c.name, None)
            self._event(pod, "Warning", "Failed", f'Error: failed to start container "{c.name}": {e.message}')
            await self.pleg.refresh_container(cid, sandbox_id)
            self._requeue(state, 0.0)
            return
        await self.pleg.refresh_container(cid, sandbox_id)
        state.waiting.pop(c.name, None)
        state.kill_requests.pop(c.name, None)
        self._event(pod, "Normal", "Started", f"Started container {c.name}")
        post_start = c.lifecycle.post_start if c.lifecycle else None
        if post_start is not None:
            ok, message = await self.run_hook(pod, post_start, cid, c, float(pod_grace(pod)), pod_ip)
            if not ok:
                self._event(pod, "Warning", "FailedPostStartHook", message)
                cur = self.cache.container(cid)
                if cur is not None:
                    await self.kill_container(pod, cur, c, pod_grace(pod), f"FailedPostStartHook: {message}")

    async def run_hook(self, pod: Pod, hook: LifecycleHandler, cid: str, c: Container, timeout: float,
                       pod_ip: str) -> tuple[bool, str]:
        """upstream lifecycle.handlerRunner: exec through the runtime, HTTP from the kubelet, sleep."""
        try:
            if hook.exec is not None:
                code, output = await self.run_in_container(cid, list(hook.exec.command or []), timeout)
                if code == 0:
                    return True, ""
                return False, f"Exec lifecycle hook ({hook.exec.command}) for Container \"{c.name}\" in Pod " \
                              f"\"{pod.metadata.name}\" failed - error: exit code {code}, message: " \
                              f"{output.decode(errors='replace').strip()!r}"
            if hook.http_get is not None:
                from kubelet.probes import resolve_port

                host = hook.http_get.host or pod_ip
                url = f"{(hook.http_get.scheme or 'HTTP').lower()}://{host}:{resolve_port(hook.http_get.port, c)}" \
                      f"{hook.http_get.path or '/'}"
                response = await self.http.get(url, timeout=timeout)
                if response.status_code < 400:
                    return True, ""
                return False, f"HTTP lifecycle hook ({url}) failed with status {response.status_code}"
            if hook.sleep is not None:
                await asyncio.sleep(min(float(hook.sleep.seconds), timeout))
                return True, ""
        except (CriError, httpx.HTTPError, OSError, ValueError) as e:
            return False, str(getattr(e, "message", e))
        return True, ""

    # -- killing --------------------------------------------------------------------------------

    async def kill_container(self, pod: Pod | None, cur: ContainerStatus, c: Container | None, grace: int,
                             reason: str | None) -> None:
        """upstream killContainer: preStop hook, then StopContainer with what is left of the grace period."""
        if pod is not None:
            self._event(pod, "Normal", "Killing", reason or f"Stopping container {cur.name}")
        started = time.monotonic()
        pre_stop = c.lifecycle.pre_stop if c is not None and c.lifecycle else None
        if pod is not None and pre_stop is not None and c is not None and grace > 0:
            try:
                ok, message = await asyncio.wait_for(
                    self.run_hook(pod, pre_stop, cur.id, c, float(grace),
                                  self._pod_ip(pod, self.cache.get(pod.metadata.uid or ""))),
                    timeout=grace)
            except TimeoutError:
                ok, message = False, f"PreStopHook did not finish within {grace}s"
            if not ok:
                self._event(pod, "Warning", "FailedPreStopHook", message)
        left = max(0, round(grace - (time.monotonic() - started)))
        try:
            await self.runtime_service.stop_container(cur.id, left)
        except CriError as e:
            if not e.is_not_found:
                raise
        await self.pleg.refresh_container(cur.id)

    async def kill_pod(self, pod: Pod | None, uid: str, grace: int) -> None:
        """upstream killPodWithSyncResult: every running container (in parallel), then the sandboxes."""
        status = self.cache.get(uid)
        specs: dict[str, Container] = {}
        if pod is not None and pod.spec:
            specs = {c.name: c for c in _all_containers(pod)}
        running = status.running_containers
        if running:
            await asyncio.gather(*(self.kill_container(pod, c, specs.get(c.name), grace, None) for c in running))
        for sb in status.sandboxes:
            if sb.ready:
                await self.runtime_service.stop_pod_sandbox(sb.id)
                await self.pleg.refresh_sandbox(sb.id)
        if pod is not None:
            await self._read_termination_messages(pod, self.cache.get(uid))

    async def stop_sandboxes(self, pod: Pod) -> None:
        """A finished pod keeps its containers (for logs) but gives back its sandbox and address."""
        await self.kill_pod(pod, pod.metadata.uid or "", pod_grace(pod))

    async def remove_pod(self, uid: str) -> None:
        status = self.cache.get(uid)
        for c in status.containers:
            with contextlib.suppress(CriError):
                await self.runtime_service.remove_container(c.id)
            self.pleg.forget_container(c.id)
        for sb in status.sandboxes:
            if sb.ready:
                await self.runtime_service.stop_pod_sandbox(sb.id)
            await self.runtime_service.remove_pod_sandbox(sb.id)
            self.pleg.forget_sandbox(sb.id)

    async def _gc_instances(self, pod: Pod) -> None:
        """Keep the newest two instances of each container (the current one and the previous, for
        `logs --previous` and lastState); remove older ones, containers no longer in the spec, and
        sandboxes no container lives in any more (upstream's container GC, per pod)."""
        uid = pod.metadata.uid or ""
        names = {c.name for c in _all_containers(pod)}
        state = self._state(uid)
        status = self.cache.get(uid)
        for c in status.containers:
            if c.name not in names:
                if c.running:
                    await self.kill_container(pod, c, None, pod_grace(pod), None)
                await self._remove_container(c.id)
        for name in names:
            for old in status.instances(name)[2:]:
                if not old.running:
                    await self._remove_container(old.id)
                    state.messages.pop(old.id, None)
        status = self.cache.get(uid)
        used = {c.sandbox_id for c in status.containers}
        for sb in status.sandboxes[1:]:
            if not sb.ready and sb.id not in used:
                with contextlib.suppress(CriError):
                    await self.runtime_service.remove_pod_sandbox(sb.id)
                self.pleg.forget_sandbox(sb.id)

    async def _remove_container(self, container_id: str) -> None:
        with contextlib.suppress(CriError):
            await self.runtime_service.remove_container(container_id)
        self.pleg.forget_container(container_id)

    # -- termination messages ---------------------------------------------------------------------

    async def _read_termination_messages(self, pod: Pod, status: PodStatus) -> None:
        specs = {c.name: c for c in _all_containers(pod)}
        state = self._state(pod.metadata.uid or "")
        for name, c in specs.items():
            for inst in status.instances(name)[:2]:
                if inst.exited and inst.id not in state.messages:
                    state.messages[inst.id] = await self._termination_message(inst, c)

    async def _termination_message(self, inst: ContainerStatus, c: Container) -> str:
        """upstream's: the file the container wrote, else (FallbackToLogsOnError) its log's tail."""
        message = ""
        if inst.termination_message_host_path:
            with contextlib.suppress(OSError):
                message = (await asyncio.to_thread(_read_file, inst.termination_message_host_path)).strip()
        if not message and c.termination_message_policy == "FallbackToLogsOnError" and inst.exit_code != 0:
            chunks = []
            with contextlib.suppress(OSError, ValueError):
                async for data in read_logs(inst.log_path, LogOptions(tail_lines=80)):
                    chunks.append(data)
            message = b"".join(chunks)[-TERMINATION_MESSAGE_LIMIT:].decode(errors="replace")
        return message

    # -- images ---------------------------------------------------------------------------------

    async def get_image_ref(self, image: str) -> str | None:
        found = await self.image_service.image_status(image)
        return found.id if found is not None else None

    async def pull_image(self, image: str) -> str:
        return await self.image_service.pull_image(image)

    # -- logs and exec --------------------------------------------------------------------------

    def get_container_logs(self, container: ContainerStatus, options: LogOptions) -> AsyncIterator[bytes]:
        async def still_running() -> bool:
            current = await self.pleg.refresh_container(container.id)
            return current is not None and current.running

        return read_logs(container.log_path, options, still_running)

    async def run_in_container(self, container_id: str, cmd: list[str], timeout: float) -> tuple[int | None, bytes]:
        """ExecSync: (exit code, or None when the command outlived `timeout`; stdout + stderr)."""
        try:
            response = await self.runtime_service.exec_sync(container_id, cmd, timeout)
        except CriError as e:
            if e.code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return None, b""
            raise
        return response.exit_code, bytes(response.stdout) + bytes(response.stderr)

    async def get_exec(self, container_id: str, cmd: list[str], *, tty: bool, stdin: bool, stdout: bool,
                       stderr: bool) -> str:
        return await self.runtime_service.exec(pb.ExecRequest(container_id=container_id, cmd=cmd, tty=tty,
                                                              stdin=stdin, stdout=stdout, stderr=stderr))

    async def get_attach(self, container_id: str, *, tty: bool, stdin: bool, stdout: bool, stderr: bool) -> str:
        return await self.runtime_service.attach(pb.AttachRequest(container_id=container_id, tty=tty, stdin=stdin,
                                                                  stdout=stdout, stderr=stderr))

    async def get_port_forward(self, sandbox_id: str, ports: list[int]) -> str:
        return await self.runtime_service.port_forward(pb.PortForwardRequest(pod_sandbox_id=sandbox_id, port=ports))


def _all_containers(pod: Pod) -> list[Container]:
    """Regular, init and ephemeral containers (upstream's podutil.VisitContainers)."""
    spec = pod.spec
    if spec is None:
        return []
    return [*spec.containers, *(spec.init_containers or []), *(spec.ephemeral_containers or [])]


def _looked_at(task: asyncio.Future[None]) -> None:
    """A task nobody awaits any more: its failure is not logged as never retrieved."""
    if not task.cancelled():
        task.exception()


def _read_file(path: str) -> str:
    with open(path, "rb") as f:
        return f.read(TERMINATION_MESSAGE_LIMIT).decode(errors="replace")
