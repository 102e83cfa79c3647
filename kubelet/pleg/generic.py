"""The PLEG: what the runtime runs, kept in a cache, and who to tell when it changes (upstream
pkg/kubelet/pleg/generic.go and evented.go, pkg/kubelet/container/cache.go).

`GenericPLEG.relist` lists the runtime's sandboxes and containers (two CRI calls) every second, as
upstream's, asks for the status of each one that is new or changed state, and tells listeners the
uid of every pod with a change. When the runtime offers GetContainerEvents, its stream is followed
too (the evented PLEG): a container's event refreshes it at once, and the relist remains the
safety net that catches anything the stream dropped.

The cache is a `PodStatus` per pod uid, built from CRI statuses by `from_cri_container` /
`from_cri_sandbox` — the one place CRI messages become the kubelet's container types.

Three writers share the cache (the relist, the event stream, and the kubelet's own refresh after it
created or started something), and a status may arrive after a newer one was written. Upstream keeps
one writer and timestamps (cache.go's GetNewerThan); here every write says when its status was asked
for, and:
- a relist forgets only what was last written before its list was taken: a container the kubelet
  created and read while the list was under way is not "gone" because an older list lacks it;
- a status never moves a container or sandbox back in its life (created → running → exited; ready →
  not ready): a late answer about a container that has since started is stale, not news.
Without these, a pod's fresh container dropped out of the cache for a moment, and its next sync
created it again ("container name in use"), under load as a rule.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import grpc

from kubelet.container.runtime import ContainerState, ContainerStatus, PodStatus, SandboxStatus
from kubelet.cri.remote_runtime import RemoteRuntimeService
from kubelet.types import labels
from machinery.cri import api_pb2 as pb
from machinery.cri.errors import CriError

log = logging.getLogger(__name__)

RELIST_PERIOD = 1.0
# while the runtime's event stream flows, the relist is only the safety net: upstream's evented PLEG
# slows the generic relist down (to 300 s); every 10 s keeps a lost event from mattering for long
EVENTED_RELIST_PERIOD = 10.0
_STATES = {pb.CONTAINER_CREATED: ContainerState.CREATED, pb.CONTAINER_RUNNING: ContainerState.RUNNING,
           pb.CONTAINER_EXITED: ContainerState.EXITED, pb.CONTAINER_UNKNOWN: ContainerState.UNKNOWN}

# how far along its life a CRI state is: a status may only keep or advance it (UNKNOWN is not ordered)
_CONTAINER_PROGRESS: dict[int, int] = {pb.CONTAINER_CREATED: 0, pb.CONTAINER_RUNNING: 1, pb.CONTAINER_EXITED: 2}
_SANDBOX_PROGRESS: dict[int, int] = {pb.SANDBOX_READY: 0, pb.SANDBOX_NOTREADY: 1}

Listener = Callable[[str], None]


def _goes_back(progress: dict[int, int], old: int | None, new: int) -> bool:
    return old is not None and old in progress and new in progress and progress[new] < progress[old]


def _seconds(ns: int) -> float | None:
    return ns / 1e9 if ns > 0 else None


def from_cri_container(status: pb.ContainerStatus, runtime_name: str, sandbox_id: str = "") -> ContainerStatus:
    annotations = status.annotations
    term_path = annotations.get(labels.TERMINATION_MESSAGE_PATH, "")
    host_path = next((m.host_path for m in status.mounts if term_path and m.container_path == term_path), "")
    return ContainerStatus(
        id=status.id, name=status.metadata.name or status.labels.get(labels.CONTAINER_NAME, ""),
        state=_STATES.get(status.state, ContainerState.UNKNOWN),
        attempt=labels.restart_count(annotations, status.metadata.attempt), runtime=runtime_name,
        created_at=_seconds(status.created_at), started_at=_seconds(status.started_at),
        finished_at=_seconds(status.finished_at), exit_code=status.exit_code, reason=status.reason,
        message=status.message,
        image=annotations.get(labels.CONTAINER_IMAGE) or status.image.user_specified_image or status.image.image,
        image_ref=status.image_ref, hash=annotations.get(labels.CONTAINER_HASH, ""), sandbox_id=sandbox_id,
        log_path=status.log_path, termination_message_path=term_path, termination_message_host_path=host_path,
        tty=annotations.get(labels.CONTAINER_TTY) == "true")


def from_cri_sandbox(status: pb.PodSandboxStatus) -> SandboxStatus:
    return SandboxStatus(id=status.id, attempt=status.metadata.attempt, ready=status.state == pb.SANDBOX_READY,
                         created_at=status.created_at / 1e9, ip=status.network.ip,
                         host_network=status.linux.namespaces.options.network == pb.NODE)


class PodCache:
    """Sandboxes and containers by id, and each pod's PodStatus built from them."""

    def __init__(self) -> None:
        self.sandboxes: dict[str, tuple[str, SandboxStatus]] = {}  # id -> (pod uid, status)
        self.containers: dict[str, tuple[str, ContainerStatus]] = {}
        self.pod_meta: dict[str, tuple[str, str]] = {}  # uid -> (name, namespace)

    def get(self, uid: str) -> PodStatus:
        name, namespace = self.pod_meta.get(uid, ("", ""))
        sandboxes = sorted((s for u, s in self.sandboxes.values() if u == uid),
                           key=lambda s: (s.attempt, s.created_at), reverse=True)
        return PodStatus(uid, name, namespace, sandboxes, [c for u, c in self.containers.values() if u == uid])

    def uids(self) -> set[str]:
        return {u for u, _ in self.sandboxes.values()} | {u for u, _ in self.containers.values()}

    def container(self, container_id: str) -> ContainerStatus | None:
        entry = self.containers.get(container_id)
        return entry[1] if entry else None


class GenericPLEG:
    def __init__(self, runtime: RemoteRuntimeService, runtime_name: str, relist_period: float = RELIST_PERIOD,
                 evented: bool = True) -> None:
        self.runtime = runtime
        self.runtime_name = runtime_name
        self.relist_period = relist_period
        self.evented = evented
        self.cache = PodCache()
        self._listeners: list[Listener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._listed: dict[str, int] = {}  # container id -> CRI state last written
        self._sandbox_listed: dict[str, int] = {}
        self._asks = 0  # a counter: when a status or a list was asked for, in order
        self._written_at: dict[str, int] = {}  # container or sandbox id -> the ask its cached status answered
        self.relists = 0
        self.healthy = True
        self.events_flowing = False  # the runtime's GetContainerEvents stream is open

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        await self.relist()
        self._tasks.append(asyncio.create_task(self._relist_loop(), name="pleg-relist"))
        if self.evented:
            self._tasks.append(asyncio.create_task(self._events_loop(), name="pleg-events"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def _notify(self, uid: str) -> None:
        if not uid:
            return
        for listener in self._listeners:
            try:
                listener(uid)
            except Exception:
                log.exception("PLEG listener failed")

    # -- keeping the cache ----------------------------------------------------------------------

    def _ask(self) -> int:
        self._asks += 1
        return self._asks

    def _newer_written(self, ident: str, asked: int) -> bool:
        """Whether what the cache holds for ident answered a later ask than this one."""
        return self._written_at.get(ident, 0) > asked

    async def refresh_sandbox(self, sandbox_id: str) -> SandboxStatus | None:
        asked = self._ask()
        try:
            status = await self.runtime.pod_sandbox_status(sandbox_id)
        except CriError as e:
            if not e.is_not_found:
                raise
            self.forget_sandbox(sandbox_id)
            return None
        old = self.cache.sandboxes.get(sandbox_id)
        if old is not None and (self._newer_written(sandbox_id, asked) or _goes_back(
                _SANDBOX_PROGRESS, self._sandbox_listed.get(sandbox_id), status.state)):
            return old[1]  # a late answer: the cache already holds a newer status
        uid = status.metadata.uid or status.labels.get(labels.POD_UID, "")
        sandbox = from_cri_sandbox(status)
        self.cache.sandboxes[sandbox_id] = (uid, sandbox)
        self.cache.pod_meta[uid] = (status.metadata.name, status.metadata.namespace)
        self._sandbox_listed[sandbox_id] = status.state
        self._written_at[sandbox_id] = asked
        if old is None or old[1] != sandbox:
            self._notify(uid)
        return sandbox

    async def refresh_container(self, container_id: str, sandbox_id: str = "") -> ContainerStatus | None:
        """Ask the runtime for one container's status (after the kubelet's own action, or an event)."""
        asked = self._ask()
        try:
            status = await self.runtime.container_status(container_id)
        except CriError as e:
            if not e.is_not_found:
                raise
            self.forget_container(container_id)
            return None
        return self._put_container(status, sandbox_id, asked)

    def _put_container(self, status: pb.ContainerStatus, sandbox_id: str, asked: int) -> ContainerStatus | None:
        """Write one container's status into the cache unless what is there is newer; the cached status."""
        container_id = status.id
        old = self.cache.containers.get(container_id)
        uid = status.labels.get(labels.POD_UID, "")
        if not uid:
            return None  # not the kubelet's
        if old is not None and (self._newer_written(container_id, asked) or _goes_back(
                _CONTAINER_PROGRESS, self._listed.get(container_id), status.state)):
            return old[1]  # a late answer: the cache already holds a newer status
        sandbox_id = sandbox_id or (old[1].sandbox_id if old else "")
        container = from_cri_container(status, self.runtime_name, sandbox_id)
        self.cache.containers[container_id] = (uid, container)
        self._listed[container_id] = status.state
        self._written_at[container_id] = asked
        if old is None or old[1] != container:
            self._notify(uid)
        return container

    def forget_container(self, container_id: str) -> None:
        old = self.cache.containers.pop(container_id, None)
        self._listed.pop(container_id, None)
        self._written_at.pop(container_id, None)
        if old is not None:
            self._notify(old[0])

    def forget_sandbox(self, sandbox_id: str) -> None:
        old = self.cache.sandboxes.pop(sandbox_id, None)
        self._sandbox_listed.pop(sandbox_id, None)
        self._written_at.pop(sandbox_id, None)
        if old is not None:
            self._notify(old[0])

    async def relist(self) -> None:
        listed_at = self._ask()
        sandboxes, containers = await asyncio.gather(self.runtime.list_pod_sandbox(),
                                                     self.runtime.list_containers())
        stale_sandboxes = [s.id for s in sandboxes if self._sandbox_listed.get(s.id) != s.state
                           and (s.metadata.uid or s.labels.get(labels.POD_UID))]
        stale = [(c.id, c.pod_sandbox_id) for c in containers
                 if self._listed.get(c.id) != c.state and c.labels.get(labels.POD_UID)]
        # a running container's status changes without a state change only by our own actions
        await asyncio.gather(*(self._safe(self.refresh_sandbox(sid)) for sid in stale_sandboxes),
                             *(self._safe(self.refresh_container(cid, sid)) for cid, sid in stale))
        # gone: what the list lacks, unless its status was asked for after the list (made meanwhile)
        seen_sandboxes = {s.id for s in sandboxes}
        for sid in [s for s in self.cache.sandboxes if s not in seen_sandboxes
                    and not self._newer_written(s, listed_at)]:
            self.forget_sandbox(sid)
        seen = {c.id for c in containers}
        for cid in [c for c in self.cache.containers if c not in seen and not self._newer_written(c, listed_at)]:
            self.forget_container(cid)
        self.relists += 1

    @staticmethod
    async def _safe(coro: object) -> None:
        try:
            await coro  # type: ignore[misc]
        except CriError as e:  # the next relist tries again
            log.warning("PLEG: %s", e.message)

    async def _relist_loop(self) -> None:
        while True:
            await asyncio.sleep(max(self.relist_period, EVENTED_RELIST_PERIOD) if self.events_flowing
                                else self.relist_period)
            try:
                await self.relist()
                self.healthy = True
            except CriError as e:
                self.healthy = False
                log.warning("PLEG relist: %s", e.message)
            except Exception:
                self.healthy = False
                log.exception("PLEG relist")

    async def _flowing(self, events: AsyncIterator[pb.ContainerEventResponse]) -> AsyncIterator[
            pb.ContainerEventResponse]:
        """The stream, marked flowing once the runtime answered it (its first event or a quiet while)."""
        iterator = events.__aiter__()
        first = asyncio.ensure_future(anext(iterator))
        try:
            await asyncio.wait({first}, timeout=self.relist_period)
            if not (first.done() and not first.cancelled() and first.exception() is not None):
                self.events_flowing = True
            try:
                yield await first
                async for event in iterator:
                    yield event
            finally:
                self.events_flowing = False
        finally:
            if not first.done():
                first.cancel()

    async def _sandbox_event(self, event: pb.ContainerEventResponse) -> None:
        """An event about a sandbox itself. Its creation and start are the kubelet's own RunPodSandbox,
        whose status it reads once that returns (the start event's would predate the network); a sandbox
        that stops or goes away is read or forgotten at once, not at the next relist."""
        sandbox_id = event.container_id
        if event.container_event_type == pb.CONTAINER_DELETED_EVENT:
            self.forget_sandbox(sandbox_id)
        elif event.container_event_type == pb.CONTAINER_STOPPED_EVENT:
            await self._safe(self.refresh_sandbox(sandbox_id))

    async def _events_loop(self) -> None:
        delay = 0.5
        while True:
            try:
                async for event in self._flowing(self.runtime.container_events()):
                    delay = 0.5
                    sandbox_id = event.pod_sandbox_status.id
                    if sandbox_id and event.container_id == sandbox_id:
                        await self._sandbox_event(event)
                        if not event.containers_statuses:
                            continue  # a sandbox is no container: ContainerStatus of it is NOT_FOUND
                    if event.container_event_type == pb.CONTAINER_DELETED_EVENT:
                        self.forget_container(event.container_id)
                        continue
                    if event.containers_statuses:
                        # read by the runtime before it reached us: as old as an ask made now, at best
                        asked = self._ask()
                        for status in event.containers_statuses:
                            self._put_container(status, sandbox_id, asked)
                    else:
                        await self._safe(self.refresh_container(event.container_id, sandbox_id))
            except asyncio.CancelledError:
                raise
            except CriError as e:
                self.events_flowing = False
                if e.code == grpc.StatusCode.UNIMPLEMENTED:
                    log.info("the runtime offers no container events: relisting only")
                    return
                log.warning("container event stream broke (%s); relisting", e.message)
            except Exception as e:
                self.events_flowing = False
                log.warning("container event stream broke (%s); relisting", e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10)
            with contextlib.suppress(Exception):
                await self.relist()
