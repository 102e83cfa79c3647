"""The CRI v1 RuntimeService and ImageService over Docker (cri-dockerd's core/: sandbox_helpers.go,
docker_sandbox.go, docker_container.go, docker_image.go, docker_service.go, exec.go, events).

Every Docker object the shim makes carries `io.minik8s.managed=true` and `io.minik8s.node=<node>`;
ids handed to it are looked up among those only, so one node's shim never touches another's
containers. Errors are gRPC statuses: an unknown id is NOT_FOUND (removal of an unknown id is a
success: CRI wants removals idempotent), bad input INVALID_ARGUMENT, and anything refused before it
started leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiodocker
import aiohttp
import grpc
from aiodocker.events import DockerEvents

from cni.invoke import CniError
from dockershim import stats as st
from dockershim import translate as tr
from dockershim.network import PodNetwork, port_mappings
from dockershim.streaming import StreamingServer, exec_exit_code
from machinery import tracing
from machinery.cri import api_pb2 as cri
from machinery.cri import api_pb2_grpc as cri_grpc

log = logging.getLogger(__name__)

SHIM_VERSION = "0.1.0"
CRI_API_VERSION = "v1"
RUNTIME_NAME = "docker"
SANDBOX_STOP_GRACE = 2  # seconds: the pause container ends on SIGTERM at once
EXEC_SYNC_MAX_OUTPUT = 16 * 1024 * 1024  # upstream's maxExecSyncSize
SANDBOX_CACHE_SIZE = 1000  # sandbox inspects kept for container events
CREATED_CACHE_SIZE = 1000  # containers created and not yet started
IMAGE_CACHE_SIZE = 256  # image names looked up (ImageStatus, PullImage) while Docker's image events are followed
GC_PERIOD = 60.0  # seconds between garbage collections of attachments and leases of vanished sandboxes
NETWORK_NOT_READY = "docker: network plugin is not ready: cni config uninitialized"


class CriError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)


def not_found(kind: str, ident: str) -> CriError:
    return CriError(grpc.StatusCode.NOT_FOUND, f"{kind} {ident!r} not found")


DOCKER_UNREACHABLE = 900  # aiodocker's status for a connection to Docker that failed


def docker_error(e: aiodocker.DockerError, what: str) -> CriError:
    code = {404: grpc.StatusCode.NOT_FOUND, 409: grpc.StatusCode.FAILED_PRECONDITION,
            DOCKER_UNREACHABLE: grpc.StatusCode.UNAVAILABLE}.get(e.status, grpc.StatusCode.UNKNOWN)
    return CriError(code, f"{what}: {e.message}")


Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])


def rpc(method: Handler) -> Handler:
    """Turn the shim's errors into gRPC statuses with their message (never a bare UNKNOWN)."""
    @functools.wraps(method)
    async def wrapper(self: DockerService, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            if tracing.TRACER is None:
                return await method(self, request, context)
            # --tracing-config-file: a cri.<Method> span, child of the kubelet's when it sent its trace context
            caller = tracing.extract({k: v for k, v in context.invocation_metadata() or ()
                                      if k in ("traceparent", "tracestate") and isinstance(v, str)})
            with tracing.span(f"cri.{method.__name__}", tracing.SERVER, context=caller):
                return await method(self, request, context)
        except CriError as e:
            await context.abort(e.code, e.message)
        except tr.InvalidArgument as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except aiodocker.DockerError as e:
            err = docker_error(e, method.__name__)
            await context.abort(err.code, err.message)
        except CniError as e:
            await context.abort(grpc.StatusCode.UNKNOWN, f"{method.__name__}: {e}")
        except (OSError, aiohttp.ClientError) as e:  # Docker is down or went away mid-call
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"{method.__name__}: {e}")
    return wrapper  # type: ignore[return-value]


class DockerService(cri_grpc.RuntimeServiceServicer, cri_grpc.ImageServiceServicer):
    def __init__(self, docker: aiodocker.Docker, *, node: str, network: PodNetwork, pause_image: str,
                 streaming: StreamingServer, docker_root: str = "") -> None:
        self.docker = docker
        self.docker_root = docker_root  # Docker's DockerRootDir: where json-file logs live
        self.cgroup_driver = "cgroupfs"  # Docker's CgroupDriver: how the pods' cgroup parents are named
        self.node = node
        self.network = network
        self.pause_image = pause_image
        self.streaming = streaming
        self._subscribers: set[asyncio.Queue[cri.ContainerEventResponse | None]] = set()
        self._events_task: asyncio.Task[None] | None = None
        self._sandbox_cache: dict[str, dict[str, Any]] = {}  # sandbox id → inspect, until its next event
        self._sandbox_epochs: dict[str, int] = {}  # sandbox id → the number of its last event
        self._sandbox_changes: dict[str, int] = {}  # sandbox id → the number of its last event after its start
        self._epoch = itertools.count(1)
        self._created: dict[str, dict[str, Any]] = {}  # container id → its labels, from its create to its start
        self._after_start: dict[str, _AfterStart] = {}  # container id → its inspect once StartContainer started it
        self._started: dict[str, dict[str, Any]] = {}  # sandbox id → its inspect once run, until its first status
        # the event stream's answers in Docker's order, with the sandbox events RunPodSandbox sends itself
        self._ordered: asyncio.Queue[asyncio.Future[cri.ContainerEventResponse | None]] | None = None
        # image name → the image it names, while Docker's image event stream is followed (containerd's CRI
        # serves ImageStatus from its image store in memory too): every pod start asked Docker for its image.
        # Any image event (pull, load, tag, untag, delete, import) empties it; a lookup that raced an event is
        # not kept (`_image_epoch`)
        self._images: dict[str, cri.Image] = {}
        self._images_followed = False
        self._image_epoch = 0
        self._image_events_task: asyncio.Task[None] | None = None

    # -- lookups ----------------------------------------------------------------------------------

    async def _inspect(self, ident: str, kind: str) -> dict[str, Any]:
        """The inspect data of one of this node's sandboxes or containers, or NOT_FOUND."""
        what = "sandbox" if kind == tr.TYPE_SANDBOX else "container"
        if not ident:
            raise CriError(grpc.StatusCode.INVALID_ARGUMENT, f"{what} id must not be empty")
        try:
            data = await self.docker.containers.container(ident).show()
        except aiodocker.DockerError as e:
            if e.status == 404:
                raise not_found(what, ident) from None
            raise docker_error(e, f"inspecting {what} {ident}") from None
        labels = (data.get("Config") or {}).get("Labels") or {}
        if (labels.get(tr.LABEL_MANAGED) != "true" or labels.get(tr.LABEL_NODE) != self.node
                or labels.get(tr.LABEL_TYPE) != kind):
            raise not_found(what, ident)
        return data

    async def _list(self, kind: str, extra: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
        filters = tr.node_filters(self.node, kind)
        for key, values in (extra or {}).items():
            filters.setdefault(key, []).extend(values)
        # the list alone has names, labels and state: no inspect per container
        listed = await self.docker.containers.list(all="1", filters=json.dumps(filters))
        return [{key: c[key] for key in _LIST_KEYS if key in c} for c in listed]

    async def _create(self, name: str, body: dict[str, Any]) -> str:
        try:
            container = await self.docker.containers.create(body, name=name)
        except aiodocker.DockerError as e:
            if e.status != 409:
                raise
            # a leftover with the same name (a crash between create and the caller learning its id) is
            # removed unless it runs, as cri-dockerd's recoverFromCreationConflictIfNeeded does
            log.info("container name %s in use; removing the old one unless it runs", name)
            try:
                await self.docker.containers.container(name).delete(v=True)
            except aiodocker.DockerError as removal:
                raise CriError(grpc.StatusCode.ALREADY_EXISTS,
                               f"container name {name!r} is in use and the container cannot be removed: "
                               f"{removal.message}") from None
            container = await self.docker.containers.create(body, name=name)
        return container.id

    async def _remove(self, ident: str) -> None:
        try:
            await self.docker.containers.container(ident).delete(force=True, v=True)
        except aiodocker.DockerError as e:
            if e.status != 404:
                raise

    # -- runtime ----------------------------------------------------------------------------------

    @rpc
    async def Version(self, request: cri.VersionRequest, context: Any) -> cri.VersionResponse:
        version = await self.docker.version()
        return cri.VersionResponse(version=SHIM_VERSION, runtime_name=RUNTIME_NAME,
                                   runtime_version=str(version.get("Version", "")),
                                   runtime_api_version=CRI_API_VERSION)

    @rpc
    async def Status(self, request: cri.StatusRequest, context: Any) -> cri.StatusResponse:
        runtime = cri.RuntimeCondition(type="RuntimeReady", status=True)
        try:
            await asyncio.wait_for(self.docker.version(), 10)
        except (aiodocker.DockerError, OSError, TimeoutError) as e:
            runtime = cri.RuntimeCondition(type="RuntimeReady", status=False, reason="DockerDaemonNotReady",
                                           message=f"docker: failed to get docker version: {e}")
        network = cri.RuntimeCondition(type="NetworkReady", status=True)
        if not self.network.ready:
            network = cri.RuntimeCondition(type="NetworkReady", status=False, reason="NetworkPluginNotReady",
                                           message=NETWORK_NOT_READY)
        return cri.StatusResponse(status=cri.RuntimeStatus(conditions=[runtime, network]))

    @rpc
    async def UpdateRuntimeConfig(self, request: cri.UpdateRuntimeConfigRequest,
                                  context: Any) -> cri.UpdateRuntimeConfigResponse:
        cidr = request.runtime_config.network_config.pod_cidr
        if cidr:
            try:
                self.network.configure(cidr)
            except ValueError as e:
                raise CriError(grpc.StatusCode.INVALID_ARGUMENT, f"pod CIDR {cidr!r}: {e}") from None
        return cri.UpdateRuntimeConfigResponse()

    # -- sandboxes --------------------------------------------------------------------------------

    @rpc
    async def RunPodSandbox(self, request: cri.RunPodSandboxRequest, context: Any) -> cri.RunPodSandboxResponse:
        config = request.config
        body = tr.sandbox_create_body(config, node=self.node, image=self.pause_image, cgroup_driver=self.cgroup_driver)
        host_network = tr.is_host_network(config)
        if not host_network and not self.network.ready:  # refused before anything is made
            raise CriError(grpc.StatusCode.FAILED_PRECONDITION, NETWORK_NOT_READY)
        try:
            sandbox_id = await self._create(tr.sandbox_name(config.metadata), body)
        except aiodocker.DockerError as e:
            if e.status == 404:
                raise CriError(grpc.StatusCode.FAILED_PRECONDITION,
                               f"the sandbox image {self.pause_image!r} is not present on this node: {e.message}") \
                    from None
            raise docker_error(e, "creating the sandbox") from None
        try:
            await self.docker.containers.container(sandbox_id).start()
            changes = self._sandbox_changes.get(sandbox_id)
            data = await self.docker.containers.container(sandbox_id).show()
            # the resolv.conf is rewritten (in a thread) while the CNI plugins run: neither uses the other, and the
            # pod's start waits for the longer of the two, not for both in turn; both are done (or failed) before
            # an error of either is raised, so the teardown below finds whatever was made
            resolv = asyncio.ensure_future(self._write_resolv_conf(data, config))
            try:
                if not host_network:
                    await self._set_up_network(sandbox_id, data, config)
            finally:
                await asyncio.wait([resolv])
                if not resolv.cancelled():
                    resolv.exception()  # looked at: the network's error, if any, is the one raised
            await resolv
            self._ran(data, changes)
        except BaseException:
            # nothing half-done: no network, no container
            with contextlib.suppress(Exception):
                await self.network.teardown(sandbox_id)
            with contextlib.suppress(Exception):
                await self._remove(sandbox_id)
            raise
        return cri.RunPodSandboxResponse(pod_sandbox_id=sandbox_id)

    async def _set_up_network(self, sandbox_id: str, data: dict[str, Any], config: cri.PodSandboxConfig) -> None:
        pid = int((data.get("State") or {}).get("Pid") or 0)
        try:
            with tracing.span("cni.add", attributes={"k8s.sandbox.id": sandbox_id}) as span:
                ip = await self.network.setup(sandbox_id, pid, config.metadata, port_mappings(config.port_mappings))
                tracing.set_attributes(span, {"k8s.pod.ip": ip})
        except CniError as e:
            raise CriError(grpc.StatusCode.UNKNOWN,
                           f"failed to set up the network of sandbox {config.metadata.name}: {e}") from None

    def _ran(self, data: dict[str, Any], changes: int | None) -> None:
        """A sandbox RunPodSandbox set up, as its inspect taken after its start says (`changes`: the number of
        its last event after its start when the inspect was taken).

        The kubelet asks for the new sandbox's status at once, and its containers are made next: this inspect
        answers both (its address is the network's) until the sandbox's next event. Its CREATED and STARTED
        events go out now, once its network is set up, as containerd sends them at the end of RunPodSandbox
        (Docker's own come before the network, and would each cost an inspect). A sandbox that died or went
        away since the inspect (its event in) is read from Docker instead, and its events are Docker's."""
        sandbox_id = data["Id"]
        if self._sandbox_changes.get(sandbox_id) != changes:
            return
        _put_bounded(self._started, sandbox_id, data, CREATED_CACHE_SIZE)
        _put_bounded(self._sandbox_cache, sandbox_id, data, SANDBOX_CACHE_SIZE)
        if self._ordered is None or not self._subscribers:
            return
        status = self._sandbox_status(data)
        started_at = tr.parse_docker_time((data.get("State") or {}).get("StartedAt"))
        for kind, at in ((cri.CONTAINER_CREATED_EVENT, status.created_at), (cri.CONTAINER_STARTED_EVENT, started_at)):
            sent: asyncio.Future[cri.ContainerEventResponse | None] = asyncio.get_running_loop().create_future()
            sent.set_result(cri.ContainerEventResponse(container_id=sandbox_id, container_event_type=kind,
                                                       created_at=at, pod_sandbox_status=status))
            self._ordered.put_nowait(sent)

    @staticmethod
    async def _write_resolv_conf(data: dict[str, Any], config: cri.PodSandboxConfig) -> None:
        """Rewrite the resolv.conf Docker made for the sandbox (upstream dockershim's rewriteResolvFile)."""
        content = tr.resolv_conf_content(config.dns_config)
        path = data.get("ResolvConfPath") or ""
        if content is None or not path:
            return
        try:
            await asyncio.to_thread(Path(path).write_text, content)
        except OSError as e:
            raise CriError(grpc.StatusCode.UNKNOWN, f"rewrite resolv.conf failed for pod "
                                                    f"{config.metadata.name!r}: {e}") from None

    @rpc
    async def StopPodSandbox(self, request: cri.StopPodSandboxRequest, context: Any) -> cri.StopPodSandboxResponse:
        data = await self._inspect_or_release(request.pod_sandbox_id)
        sandbox_id = data["Id"]
        for item in await self._list(tr.TYPE_CONTAINER, {"label": [f"{tr.LABEL_SANDBOX_ID}={sandbox_id}"]}):
            if item.get("State") in ("running", "restarting", "paused"):  # the kubelet gave them their grace
                await self._stop(item["Id"], 0)
        pid = int((data.get("State") or {}).get("Pid") or 0)
        await self.network.teardown(sandbox_id, pid)
        await self._stop(sandbox_id, SANDBOX_STOP_GRACE)
        return cri.StopPodSandboxResponse()

    @rpc
    async def RemovePodSandbox(self, request: cri.RemovePodSandboxRequest,
                               context: Any) -> cri.RemovePodSandboxResponse:
        try:
            data = await self._inspect_or_release(request.pod_sandbox_id)
        except CriError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return cri.RemovePodSandboxResponse()  # already gone: removal is idempotent
            raise
        sandbox_id = data["Id"]
        for item in await self._list(tr.TYPE_CONTAINER, {"label": [f"{tr.LABEL_SANDBOX_ID}={sandbox_id}"]}):
            await self._remove_container(item["Id"], (item.get("Labels") or {}).get(tr.LABEL_LOG_PATH, ""))
        pid = int((data.get("State") or {}).get("Pid") or 0)
        await self.network.teardown(sandbox_id, pid)
        await self._remove(sandbox_id)
        return cri.RemovePodSandboxResponse()

    async def _inspect_or_release(self, sandbox_id: str) -> dict[str, Any]:
        """The sandbox; when its container is gone (removed behind the shim's back), its network is
        released before NOT_FOUND is answered, so the pod's address does not leak. It is stopped or removed
        next: its status is read from Docker from now on."""
        self._started.pop(sandbox_id, None)
        try:
            return await self._inspect(sandbox_id, tr.TYPE_SANDBOX)
        except CriError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                await self.network.teardown(sandbox_id)
            raise

    @rpc
    async def PodSandboxStatus(self, request: cri.PodSandboxStatusRequest,
                               context: Any) -> cri.PodSandboxStatusResponse:
        data = self._started.pop(request.pod_sandbox_id, None) or await self._inspect(request.pod_sandbox_id,
                                                                                     tr.TYPE_SANDBOX)
        return cri.PodSandboxStatusResponse(status=self._sandbox_status(data))

    def _sandbox_status(self, data: dict[str, Any]) -> cri.PodSandboxStatus:
        labels = (data.get("Config") or {}).get("Labels") or {}
        ip = "" if labels.get(tr.LABEL_HOST_NETWORK) == "true" else self.network.pod_ip(data["Id"])
        return tr.sandbox_status(data, ip)

    @rpc
    async def ListPodSandbox(self, request: cri.ListPodSandboxRequest, context: Any) -> cri.ListPodSandboxResponse:
        f = request.filter
        extra = {"id": [f.id]} if f.id else None
        sandboxes = (tr.sandbox_from_list(entry) for entry in await self._list(tr.TYPE_SANDBOX, extra))
        return cri.ListPodSandboxResponse(items=[s for s in sandboxes if tr.passes_filter(s, f)])

    # -- containers -------------------------------------------------------------------------------

    @rpc
    async def CreateContainer(self, request: cri.CreateContainerRequest,
                              context: Any) -> cri.CreateContainerResponse:
        # the sandbox's inspect as its last event left it: a pod's containers are made just after its
        # sandbox started, whose start event's inspect is kept (a sandbox gone meanwhile fails the create)
        sandbox = await self._sandbox_of(request.pod_sandbox_id)
        sandbox_id = sandbox["Id"]
        config = request.config
        tr.validate_container_metadata(config.metadata)
        log_path = ""
        if request.sandbox_config.log_directory and config.log_path:
            log_path = os.path.join(request.sandbox_config.log_directory, config.log_path)
        body = tr.container_create_body(config, request.sandbox_config, sandbox_id=sandbox_id, node=self.node,
                                        log_path=log_path, cgroup_driver=self.cgroup_driver)
        meta = request.sandbox_config.metadata if request.sandbox_config.HasField("metadata") else \
            tr.sandbox_metadata(sandbox.get("Name") or "")
        name = tr.container_name(config.metadata, meta)
        try:
            container_id = await self._create(name, body)
        except aiodocker.DockerError as e:
            if e.status == 404:
                await self._inspect(sandbox_id, tr.TYPE_SANDBOX)  # a sandbox gone since it was cached: NOT_FOUND
                raise CriError(grpc.StatusCode.NOT_FOUND,
                               f"image {config.image.image!r} is not present on this node: {e.message}") from None
            raise docker_error(e, f"creating container {config.metadata.name}") from None
        # what StartContainer needs of it, known without an inspect (the kubelet starts it next)
        created = {"Id": container_id, "Config": {"Labels": dict(body.get("Labels") or {})}}
        _put_bounded(self._created, container_id, created, CREATED_CACHE_SIZE)
        return cri.CreateContainerResponse(container_id=container_id)

    @rpc
    async def StartContainer(self, request: cri.StartContainerRequest, context: Any) -> cri.StartContainerResponse:
        data = self._created.pop(request.container_id, None) or await self._inspect(request.container_id,
                                                                                   tr.TYPE_CONTAINER)
        container_id = data["Id"]
        # registered before the start: its start event, which may come in before Docker's answer, waits for it
        after = _AfterStart(asyncio.get_running_loop().create_future())
        _put_bounded(self._after_start, container_id, after, CREATED_CACHE_SIZE)
        try:
            try:
                await self.docker.containers.container(container_id).start()
            except aiodocker.DockerError as e:
                self._after_start.pop(container_id, None)
                if e.status == 404:  # removed since it was created
                    raise not_found("container", request.container_id) from None
                raise CriError(grpc.StatusCode.UNKNOWN, f"failed to start container {request.container_id}: "
                                                        f"{e.message}") from None
            log_path = ((data.get("Config") or {}).get("Labels") or {}).get(tr.LABEL_LOG_PATH, "")
            # json-file's log is <root>/containers/<id>/<id>-json.log (Docker names it when the container first
            # starts): when the root is known, the link is made while the container is inspected
            derived = f"{self.docker_root}/containers/{container_id}/{container_id}-json.log" \
                if self.docker_root else ""
            link = asyncio.ensure_future(asyncio.to_thread(_symlink, derived, log_path)) if log_path and derived \
                else None
            # the kubelet asks for its status at once, and its start event wants the same: one inspect for both
            try:
                with contextlib.suppress(aiodocker.DockerError):  # removed meanwhile: each asks Docker itself
                    after.shown.set_result(await self.docker.containers.container(container_id).show())
            finally:
                if link is not None:
                    await asyncio.shield(link)
        finally:
            if not after.shown.done():
                after.shown.set_result(None)
                if self._after_start.get(container_id) is after:
                    del self._after_start[container_id]
        if log_path and link is None:
            await asyncio.to_thread(_symlink, (after.shown.result() or {}).get("LogPath") or "", log_path)
        return cri.StartContainerResponse()

    async def _stop(self, ident: str, timeout: int) -> None:
        try:
            await self.docker.containers.container(ident).stop(t=max(int(timeout), 0))
        except aiodocker.DockerError as e:
            if e.status not in (304, 404):
                raise

    @rpc
    async def StopContainer(self, request: cri.StopContainerRequest, context: Any) -> cri.StopContainerResponse:
        data = await self._inspect(request.container_id, tr.TYPE_CONTAINER)
        self._after_start.pop(data["Id"], None)
        await self._stop(data["Id"], request.timeout)
        return cri.StopContainerResponse()

    async def _remove_container(self, ident: str, log_path: str) -> None:
        self._after_start.pop(ident, None)
        await self._remove(ident)
        if log_path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(log_path)

    @rpc
    async def RemoveContainer(self, request: cri.RemoveContainerRequest,
                              context: Any) -> cri.RemoveContainerResponse:
        try:
            data = await self._inspect(request.container_id, tr.TYPE_CONTAINER)
        except CriError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return cri.RemoveContainerResponse()
            raise
        await self._remove_container(data["Id"], ((data.get("Config") or {}).get("Labels") or {}).get(
            tr.LABEL_LOG_PATH, ""))
        return cri.RemoveContainerResponse()

    @rpc
    async def ListContainers(self, request: cri.ListContainersRequest, context: Any) -> cri.ListContainersResponse:
        f = request.filter
        extra: dict[str, list[str]] = {}
        if f.id:
            extra["id"] = [f.id]
        if f.pod_sandbox_id:
            extra["label"] = [f"{tr.LABEL_SANDBOX_ID}={f.pod_sandbox_id}"]
        containers = (tr.container_from_list(entry) for entry in await self._list(tr.TYPE_CONTAINER, extra))
        return cri.ListContainersResponse(containers=[c for c in containers if tr.passes_filter(c, f)])

    @rpc
    async def ContainerStatus(self, request: cri.ContainerStatusRequest,
                              context: Any) -> cri.ContainerStatusResponse:
        data = await self._shown_after_start(request.container_id, status=True) or await self._inspect(
            request.container_id, tr.TYPE_CONTAINER)
        return cri.ContainerStatusResponse(status=tr.container_status(data))

    async def _shown_after_start(self, container_id: str, *, status: bool) -> dict[str, Any] | None:
        """The inspect StartContainer took right after it started the container, once for the first
        ContainerStatus (`status`) and once for the start event; None when it is not there (any later event of
        the container, or the shim's own stop or removal of it, drops it)."""
        after = self._after_start.get(container_id)
        if after is None or not (after.status if status else after.event):
            return None
        if status:
            after.status = False
        else:
            after.event = False
        if not (after.status or after.event):
            del self._after_start[container_id]
        return await asyncio.shield(after.shown)

    # -- stats ----------------------------------------------------------------------------------

    async def _one_shot_stats(self, item: dict[str, Any]) -> cri.ContainerStats | None:
        """A running container's stats (Docker's one-shot answer); None when it stopped meanwhile."""
        try:
            data = await self.docker._query_json(f"containers/{item['Id']}/stats",
                                                 params={"stream": "0", "one-shot": "1"})
        except aiodocker.DockerError as e:
            if e.status == 404:
                return None
            raise
        if not (data.get("cpu_stats") or {}).get("cpu_usage"):
            return None
        return st.container_stats(item, data)

    async def _running_stats(self, extra: dict[str, list[str]] | None = None) -> list[tuple[str, cri.ContainerStats]]:
        """(sandbox id, stats) of each running container."""
        running = [c for c in await self._list(tr.TYPE_CONTAINER, extra) if c.get("State") == "running"]
        found = await asyncio.gather(*(self._one_shot_stats(c) for c in running))
        return [((c.get("Labels") or {}).get(tr.LABEL_SANDBOX_ID, ""), s) for c, s in zip(running, found, strict=True)
                if s is not None]

    @rpc
    async def ListContainerStats(self, request: cri.ListContainerStatsRequest,
                                 context: Any) -> cri.ListContainerStatsResponse:
        """Stats of the running containers that pass the filter (cri-dockerd ListContainerStats)."""
        f = request.filter
        extra: dict[str, list[str]] = {}
        if f.id:
            extra["id"] = [f.id]
        if f.pod_sandbox_id:
            extra["label"] = [f"{tr.LABEL_SANDBOX_ID}={f.pod_sandbox_id}"]
        stats = [s for _, s in await self._running_stats(extra)]
        return cri.ListContainerStatsResponse(
            stats=[s for s in stats if tr.labels_match(f.label_selector, dict(s.attributes.labels))])

    @rpc
    async def ListPodSandboxStats(self, request: cri.ListPodSandboxStatsRequest,
                                  context: Any) -> cri.ListPodSandboxStatsResponse:
        """Stats of the ready sandboxes that pass the filter, with their running containers'."""
        f = request.filter
        extra = {"id": [f.id]} if f.id else None
        sandboxes = [s for s in await self._list(tr.TYPE_SANDBOX, extra) if s.get("State") == "running"]
        sandboxes = [s for s in sandboxes if tr.labels_match(f.label_selector, tr.split_labels(s.get("Labels"))[0])]
        by_sandbox: dict[str, list[cri.ContainerStats]] = {s["Id"]: [] for s in sandboxes}
        for sandbox_id, stats in await self._running_stats():
            if sandbox_id in by_sandbox:
                by_sandbox[sandbox_id].append(stats)
        return cri.ListPodSandboxStatsResponse(stats=[st.sandbox_stats(s, by_sandbox[s["Id"]]) for s in sandboxes])

    @rpc
    async def ReopenContainerLog(self, request: cri.ReopenContainerLogRequest, context: Any) -> Any:
        raise CriError(grpc.StatusCode.UNIMPLEMENTED, "docker's json-file logs cannot be reopened (as cri-dockerd)")

    # -- exec -------------------------------------------------------------------------------------

    async def _running(self, ident: str) -> dict[str, Any]:
        data = await self._inspect(ident, tr.TYPE_CONTAINER)
        if not (data.get("State") or {}).get("Running"):
            raise CriError(grpc.StatusCode.FAILED_PRECONDITION, f"container {ident} is not running")
        return data

    @rpc
    async def ExecSync(self, request: cri.ExecSyncRequest, context: Any) -> cri.ExecSyncResponse:
        if not request.cmd:
            raise CriError(grpc.StatusCode.INVALID_ARGUMENT, "cmd must not be empty")
        data = await self._running(request.container_id)
        execution = await self.docker.containers.container(data["Id"]).exec(list(request.cmd), stdin=False)
        out = {1: bytearray(), 2: bytearray()}
        stream = execution.start(detach=False)
        try:
            async with asyncio.timeout(request.timeout or None):
                async with stream:
                    while (message := await stream.read_out()) is not None:
                        buf = out[2 if message.stream == 2 else 1]
                        room = EXEC_SYNC_MAX_OUTPUT - len(buf)
                        if room > 0:
                            buf += message.data[:room]
        except TimeoutError:
            raise CriError(grpc.StatusCode.DEADLINE_EXCEEDED,
                           f"command {list(request.cmd)} timed out after {request.timeout}s") from None
        exit_code = await exec_exit_code(execution)
        return cri.ExecSyncResponse(stdout=bytes(out[1]), stderr=bytes(out[2]), exit_code=exit_code)

    @rpc
    async def Exec(self, request: cri.ExecRequest, context: Any) -> cri.ExecResponse:
        if not request.cmd:
            raise CriError(grpc.StatusCode.INVALID_ARGUMENT, "cmd must not be empty")
        if not (request.stdin or request.stdout or request.stderr):
            raise CriError(grpc.StatusCode.INVALID_ARGUMENT, "one of stdin, stdout, or stderr must be set")
        if request.tty and request.stderr:
            raise CriError(grpc.StatusCode.INVALID_ARGUMENT, "tty and stderr cannot both be true")
        data = await self._running(request.container_id)
        return cri.ExecResponse(url=self.streaming.register(data["Id"], request))

    @rpc
    async def Attach(self, request: cri.AttachRequest, context: Any) -> cri.AttachResponse:
        """The URL of an attach to the container's own streams (cri-dockerd's Attach)."""
        if not (request.stdin or request.stdout or request.stderr):
            raise CriError(grpc.StatusCode.INVALID_ARGUMENT, "one of stdin, stdout, or stderr must be set")
        if request.tty and request.stderr:
            raise CriError(grpc.StatusCode.INVALID_ARGUMENT, "tty and stderr cannot both be true")
        data = await self._inspect(request.container_id, tr.TYPE_CONTAINER)
        if not (data.get("State") or {}).get("Running"):
            raise CriError(grpc.StatusCode.FAILED_PRECONDITION, f"container not running ({request.container_id})")
        return cri.AttachResponse(url=self.streaming.register(data["Id"], request))

    @rpc
    async def PortForward(self, request: cri.PortForwardRequest, context: Any) -> cri.PortForwardResponse:
        """The URL of a port-forward into the sandbox's network namespace (cri-dockerd's PortForward)."""
        data = await self._inspect(request.pod_sandbox_id, tr.TYPE_SANDBOX)
        if not (data.get("State") or {}).get("Running"):
            raise CriError(grpc.StatusCode.FAILED_PRECONDITION, f"sandbox {request.pod_sandbox_id} is not running")
        for port in request.port:
            if not 0 < port < 65536:
                raise CriError(grpc.StatusCode.INVALID_ARGUMENT, f"invalid port {port}")
        return cri.PortForwardResponse(url=self.streaming.register(data["Id"], request))

    # -- events -----------------------------------------------------------------------------------

    async def GetContainerEvents(
            self, request: cri.GetEventsRequest,
            context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[cri.ContainerEventResponse]:
        queue: asyncio.Queue[cri.ContainerEventResponse | None] = asyncio.Queue(maxsize=1000)
        self._subscribers.add(queue)
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            self._subscribers.discard(queue)

    def start_events(self) -> None:
        self._events_task = asyncio.create_task(self._events_loop(), name="docker-events")
        self._image_events_task = asyncio.create_task(self._image_events_loop(), name="docker-image-events")

    async def stop_events(self) -> None:
        for task in (self._events_task, self._image_events_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        for queue in list(self._subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(None)

    async def _events_loop(self) -> None:
        """Docker's event stream for this node's containers, reconnected when it breaks.

        Each event's statuses are read at once, concurrently with the next events' (one at a time, a
        burst of pods starting would queue seconds of inspects behind each other); a sender hands the
        answers out in Docker's order."""
        delay = 0.5
        filters = json.dumps({**tr.node_filters(self.node), "type": ["container"],
                              "event": list(_EVENT_TYPES)})
        ordered: asyncio.Queue[asyncio.Future[cri.ContainerEventResponse | None]] = asyncio.Queue()
        self._ordered = ordered
        sender = asyncio.create_task(self._send_events(ordered), name="container-events-sender")
        try:
            while True:
                events = DockerEvents(self.docker)  # type: ignore[no-untyped-call]
                subscriber = events.subscribe(create_task=False)  # type: ignore[no-untyped-call]
                runner = asyncio.create_task(events.run(filters=filters))
                try:
                    while (event := await subscriber.get()) is not None:
                        delay = 0.5
                        if self._track_sandbox(event):
                            continue  # a sandbox's creation or start: RunPodSandbox sends those
                        self._track_container(event)
                        if self._subscribers:
                            ordered.put_nowait(asyncio.create_task(self._event_response(event)))
                finally:
                    runner.cancel()
                    await asyncio.gather(runner, return_exceptions=True)
                log.warning("docker event stream ended; reconnecting in %.1fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10)
        finally:
            self._ordered = None
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)

    async def _image_events_loop(self) -> None:
        """Docker's image events, reconnected when the stream breaks: each empties the image cache, which is
        used only while the stream is followed. A (re)connection asks for the events since just before it, so
        none between that moment and Docker's answer is missed."""
        delay = 0.5
        while True:
            since = int(time.time()) - 1  # Docker's `since` has whole seconds: a few events come twice
            events = DockerEvents(self.docker)  # type: ignore[no-untyped-call]
            subscriber = events.subscribe(create_task=False)  # type: ignore[no-untyped-call]
            runner = asyncio.create_task(events.run(filters=json.dumps({"type": ["image"]}), since=str(since)))
            self._forget_images()
            self._images_followed = True
            try:
                while (await subscriber.get()) is not None:
                    delay = 0.5
                    self._forget_images()
            finally:
                self._images_followed = False
                self._forget_images()
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
            log.warning("docker image event stream ended; reconnecting in %.1fs", delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10)

    def _forget_images(self) -> None:
        self._images.clear()
        self._image_epoch += 1

    async def _send_events(self, ordered: asyncio.Queue[asyncio.Future[cri.ContainerEventResponse | None]]) -> None:
        while True:
            task = await ordered.get()
            try:
                response = await task
            except Exception as e:  # an event that could not be described: the kubelet's relist catches up
                log.warning("container event: %s", e)
                continue
            if response is None:
                continue
            for queue in list(self._subscribers):
                try:
                    queue.put_nowait(response)
                except asyncio.QueueFull:  # a reader that stopped reading: it relists anyway (generic PLEG)
                    log.warning("container event subscriber is not reading; dropping an event")

    def _track_sandbox(self, event: dict[str, Any]) -> bool:
        """Forget a sandbox's cached inspect when it changes: its state changes only by its own events.
        True for a sandbox's creation and start, whose CRI events RunPodSandbox sends (`_ran`)."""
        actor = event.get("Actor") or {}
        if (actor.get("Attributes") or {}).get(tr.LABEL_TYPE) != tr.TYPE_SANDBOX:
            return False
        sandbox_id = str(actor.get("ID") or "")
        epoch = next(self._epoch)
        run = event.get("Action") in ("create", "start")
        if not run:
            self._started.pop(sandbox_id, None)
            self._sandbox_cache.pop(sandbox_id, None)
            _put_bounded(self._sandbox_changes, sandbox_id, epoch, SANDBOX_CACHE_SIZE)
        elif not ((self._sandbox_cache.get(sandbox_id) or {}).get("State") or {}).get("Running"):
            # an inspect that shows it running came after its start (RunPodSandbox's): these events are older
            self._sandbox_cache.pop(sandbox_id, None)
        _put_bounded(self._sandbox_epochs, sandbox_id, epoch, SANDBOX_CACHE_SIZE)
        return run

    def _track_container(self, event: dict[str, Any]) -> None:
        """Drop the inspect StartContainer took once the container died or went away: it is older."""
        if event.get("Action") not in ("create", "start"):
            self._after_start.pop(str((event.get("Actor") or {}).get("ID") or ""), None)

    async def _sandbox_of(self, sandbox_id: str) -> dict[str, Any]:
        """One of this node's sandboxes, from the inspect its last event left when there is one."""
        data = self._sandbox_cache.get(sandbox_id)
        if data is None:
            return await self._inspect(sandbox_id, tr.TYPE_SANDBOX)
        labels = (data.get("Config") or {}).get("Labels") or {}
        if labels.get(tr.LABEL_MANAGED) != "true" or labels.get(tr.LABEL_NODE) != self.node \
                or labels.get(tr.LABEL_TYPE) != tr.TYPE_SANDBOX:
            raise not_found("sandbox", sandbox_id)
        return data

    async def _sandbox_inspect(self, sandbox_id: str) -> dict[str, Any]:
        data = self._sandbox_cache.get(sandbox_id)
        if data is None:
            epoch = self._sandbox_epochs.get(sandbox_id)
            data = await self.docker.containers.container(sandbox_id).show()
            # kept only if no event of the sandbox came in meanwhile (the inspect may predate it)
            if epoch is not None and self._sandbox_epochs.get(sandbox_id) == epoch:
                _put_bounded(self._sandbox_cache, sandbox_id, data, SANDBOX_CACHE_SIZE)
        return data

    async def _event_response(self, event: dict[str, Any]) -> cri.ContainerEventResponse | None:
        kind = _EVENT_TYPES.get(str(event.get("Action") or ""))
        actor = event.get("Actor") or {}
        cid = str(actor.get("ID") or "")
        if kind is None or not cid:
            return None
        attrs = actor.get("Attributes") or {}
        sandbox_id = cid if attrs.get(tr.LABEL_TYPE) == tr.TYPE_SANDBOX else str(attrs.get(tr.LABEL_SANDBOX_ID, ""))
        response = cri.ContainerEventResponse(container_id=cid, container_event_type=kind,
                                              created_at=int(event.get("timeNano") or 0))
        # the sandbox's status (its inspect kept until its own next event) and the status of the container
        # the event is about: containerd sends every container of the sandbox, but the others did not
        # change, and each inspect costs Docker while pods start
        shown: list[Any] = await asyncio.gather(
            self._sandbox_inspect(sandbox_id) if sandbox_id and kind != cri.CONTAINER_DELETED_EVENT
            else _none(),
            self._container_inspect(cid, kind) if sandbox_id != cid and kind != cri.CONTAINER_DELETED_EVENT
            else _none(),
            return_exceptions=True)
        sandbox, container = shown
        if isinstance(sandbox, dict):
            response.pod_sandbox_status.CopyFrom(self._sandbox_status(sandbox))
        elif sandbox_id:
            response.pod_sandbox_status.id = sandbox_id
        if isinstance(container, dict):
            response.containers_statuses.append(tr.container_status(container))
        return response

    async def _container_inspect(self, container_id: str, kind: int) -> dict[str, Any]:
        if kind == cri.CONTAINER_STARTED_EVENT:
            data = await self._shown_after_start(container_id, status=False)
            if data is not None:
                return data
        return await self.docker.containers.container(container_id).show()

    # -- images -----------------------------------------------------------------------------------

    @rpc
    async def ListImages(self, request: cri.ListImagesRequest, context: Any) -> cri.ListImagesResponse:
        wanted = request.filter.image.image
        if wanted:
            found = await self._image(wanted)
            return cri.ListImagesResponse(images=[found] if found else [])
        listed = await self.docker.images.list()
        return cri.ListImagesResponse(images=[tr.image_from_inspect(i) for i in listed])

    async def _image(self, name: str) -> cri.Image | None:
        if not name:
            raise CriError(grpc.StatusCode.INVALID_ARGUMENT, "image name must not be empty")
        cached = self._images.get(name)
        if cached is not None:
            found = cri.Image()
            found.CopyFrom(cached)  # the caller's to change
            return found
        epoch = self._image_epoch
        try:
            found = tr.image_from_inspect(await self.docker.images.inspect(name))
        except aiodocker.DockerError as e:
            if e.status == 404:
                return None
            raise
        if self._images_followed and epoch == self._image_epoch:  # no image event since the lookup began
            kept = cri.Image()
            kept.CopyFrom(found)
            _put_bounded(self._images, name, kept, IMAGE_CACHE_SIZE)
        return found

    @rpc
    async def ImageStatus(self, request: cri.ImageStatusRequest, context: Any) -> cri.ImageStatusResponse:
        found = await self._image(request.image.image)
        return cri.ImageStatusResponse(image=found) if found else cri.ImageStatusResponse()

    @rpc
    async def PullImage(self, request: cri.PullImageRequest, context: Any) -> cri.PullImageResponse:
        """Present locally, or a clear error: minik8s has no registry to pull from."""
        name = request.image.image
        found = await self._image(name)
        if found is None:
            raise CriError(grpc.StatusCode.NOT_FOUND,
                           f'image "{name}" is not present on this node and there is no registry to pull it '
                           "from: build it or load it into this node's Docker (docker load)")
        return cri.PullImageResponse(image_ref=found.id)

    @rpc
    async def RemoveImage(self, request: cri.RemoveImageRequest, context: Any) -> cri.RemoveImageResponse:
        name = request.image.image
        if not name:
            raise CriError(grpc.StatusCode.INVALID_ARGUMENT, "image name must not be empty")
        try:
            await self.docker.images.delete(name)
        except aiodocker.DockerError as e:
            if e.status != 404:
                raise docker_error(e, f"removing image {name}") from None
        finally:
            self._forget_images()  # at once: its events follow
        return cri.RemoveImageResponse()

    # -- housekeeping -----------------------------------------------------------------------------

    async def gc_network(self) -> None:
        """Release attachments of sandboxes that are gone (a shim or node crash between create and DEL).

        The cache is read before the sandboxes are listed: an attachment made in between belongs to
        a sandbox the list then shows."""
        await self.network.gc(self._live_sandbox_ids)

    async def _live_sandbox_ids(self) -> set[str]:
        return {item["Id"] for item in await self._list(tr.TYPE_SANDBOX)}

    async def housekeeping(self, period: float = GC_PERIOD) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                await self.gc_network()
            except Exception as e:  # the next round retries
                log.warning("network garbage collection: %s", e)


async def _none() -> None:
    return None


Value = TypeVar("Value")


@dataclass
class _AfterStart:
    """A container's inspect taken right after StartContainer started it (None if that failed), for the first
    ContainerStatus and for its start event, each of which took one inspect of its own before."""

    shown: asyncio.Future[dict[str, Any] | None]
    status: bool = True  # the first ContainerStatus may still take it
    event: bool = True  # the start event may


def _put_bounded(cache: dict[str, Value], key: str, value: Value, size: int) -> None:
    """Set key last in insertion order, dropping the oldest entries beyond `size`."""
    cache.pop(key, None)
    cache[key] = value
    while len(cache) > size:
        del cache[next(iter(cache))]


_LIST_KEYS = ("Id", "Names", "Image", "ImageID", "Labels", "State", "Created")
_EVENT_TYPES = {"create": cri.CONTAINER_CREATED_EVENT, "start": cri.CONTAINER_STARTED_EVENT,
                "die": cri.CONTAINER_STOPPED_EVENT, "destroy": cri.CONTAINER_DELETED_EVENT}


def _symlink(target: str, link: str) -> None:
    """The CRI log path as a link to Docker's json-file log (cri-dockerd's createContainerLogSymlink)."""
    path = Path(link)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    if target:
        path.symlink_to(target)
