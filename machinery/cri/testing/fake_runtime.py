"""An in-memory CRI runtime (upstream cri-api/pkg/apis/testing/fake_runtime_service.go and
fake_image_service.go), for unit tests and the hollow node.

`FakeRuntime` implements every call of `runtime.v1.RuntimeService` and `ImageService` with the
servicer signature `(request, context)`, so the same object is

- used in-process: `RemoteRuntimeService(FakeRuntime())` calls it as it would a grpc stub (the
  stub's keyword `timeout=` is accepted and ignored), no socket, no thread;
- served over a unix socket with `serve(fake, "unix:///...")` (a `grpc.aio` server), so a real
  kubelet process can run against it (bench/hollow_node.py).

Containers do nothing: StartContainer makes them RUNNING until a test says they exited
(`exit_container`), or they stop. Sandboxes get addresses in order from the podCIDR of
UpdateRuntimeConfig (10.88.0.0/16 before). Errors are injected per call name (`inject_error`),
images may be made unpullable (`pull_errors`) or their pull hang (`pull_gates`), ExecSync answers
with `exec_handler`. Every call is recorded in `calls`, as upstream's `Called`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from machinery.cri import api_pb2 as pb
from machinery.cri import api_pb2_grpc as pb_grpc
from machinery.cri.errors import CriError

FAKE_RUNTIME_NAME = "fakeRuntime"
FAKE_VERSION = "0.1.0"

ExecHandler = Callable[[str, list[str]], tuple[bytes, bytes, int]]


class FakeRuntimeError(CriError):
    """A failure of the fake (injected or a missing object); over grpc it travels as its status code."""


def _now_ns() -> int:
    return time.time_ns()


def _matches(labels: Any, selector: Any) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class FakeRuntime(pb_grpc.RuntimeServiceServicer, pb_grpc.ImageServiceServicer):
    def __init__(self, images: list[str] | None = None) -> None:
        self.sandboxes: dict[str, pb.PodSandboxStatus] = {}
        self.sandbox_configs: dict[str, pb.PodSandboxConfig] = {}
        self.containers: dict[str, pb.ContainerStatus] = {}
        self.container_sandbox: dict[str, str] = {}
        self.images: dict[str, pb.Image] = {}
        self.pull_errors: dict[str, str] = {}  # image -> error message of its pull
        self.pull_gates: dict[str, asyncio.Event] = {}  # image -> its pull waits until this is set (a hung registry)
        self.errors: dict[str, list[FakeRuntimeError]] = {}
        self.calls: list[str] = []
        self.pod_cidr = ""
        self.runtime_ready = True
        self.network_ready_without_cidr = False
        self.exec_handler: ExecHandler = lambda _cid, _cmd: (b"", b"", 0)
        self._ids = itertools.count(1)
        self._ips = itertools.count(2)
        self._event_queues: list[asyncio.Queue[pb.ContainerEventResponse]] = []
        self.changed = asyncio.Event()  # set on every state change (tests wait on it)
        for image in images or []:
            self.add_image(image)

    # -- test controls --------------------------------------------------------------------------

    def add_image(self, image: str, size: int = 1024) -> None:
        self.images[image] = pb.Image(id=f"sha256:{abs(hash(image)):064x}"[:71], repo_tags=[image], size=size)

    def inject_error(self, call: str, error: FakeRuntimeError | str) -> None:
        """The next `call` fails with `error` (several queue up)."""
        self.errors.setdefault(call, []).append(error if isinstance(error, FakeRuntimeError)
                                                 else FakeRuntimeError(error))

    def exit_container(self, container_id: str, exit_code: int = 0, reason: str = "", message: str = "") -> None:
        """The container's process ended (a crash, an OOM kill: reason "OOMKilled")."""
        status = self.containers[container_id]
        status.state = pb.CONTAINER_EXITED
        status.finished_at = _now_ns()
        status.exit_code = exit_code
        status.reason = reason or ("Completed" if exit_code == 0 else "Error")
        status.message = message
        self._event(container_id, pb.CONTAINER_STOPPED_EVENT)

    def running_containers(self, name: str | None = None) -> list[pb.ContainerStatus]:
        return [c for c in self.containers.values()
                if c.state == pb.CONTAINER_RUNNING and (name is None or c.metadata.name == name)]

    def _next_ip(self) -> str:
        """The next address of the podCIDR UpdateRuntimeConfig gave (10.88.0.0/16 before one came)."""
        n = next(self._ips)
        network = ipaddress.ip_network(self.pod_cidr or "10.88.0.0/16", strict=False)
        return str(network.network_address + (n % (network.num_addresses - 2) or 1))

    def _record(self, call: str) -> None:
        self.calls.append(call)
        queued = self.errors.get(call)
        if queued:
            raise queued.pop(0)

    def _new_id(self) -> str:
        return f"{next(self._ids):064x}"

    def _event(self, container_id: str, kind: pb.ContainerEventType, *, sandbox: bool = False) -> None:
        """An event about a container, or (sandbox=True) about a sandbox itself, as the Docker shim and
        containerd send them: the sandbox's status (its id alone once it is gone) and the container's."""
        self.changed.set()
        status = None if sandbox else self.containers.get(container_id)
        sandbox_id = container_id if sandbox else self.container_sandbox.get(container_id, container_id)
        event = pb.ContainerEventResponse(container_id=container_id, container_event_type=kind,
                                          created_at=_now_ns())
        if sandbox_id in self.sandboxes:
            event.pod_sandbox_status.CopyFrom(self.sandboxes[sandbox_id])
        elif sandbox:
            event.pod_sandbox_status.id = sandbox_id
        if status is not None:
            event.containers_statuses.append(status)
        for queue in self._event_queues:
            queue.put_nowait(event)

    # -- RuntimeService -------------------------------------------------------------------------

    async def Version(self, request: pb.VersionRequest, context: Any = None, **_: Any) -> pb.VersionResponse:
        self._record("Version")
        return pb.VersionResponse(version="0.1.0", runtime_name=FAKE_RUNTIME_NAME, runtime_version=FAKE_VERSION,
                                  runtime_api_version="v1")

    async def Status(self, request: pb.StatusRequest, context: Any = None, **_: Any) -> pb.StatusResponse:
        self._record("Status")
        network_ready = bool(self.pod_cidr) or self.network_ready_without_cidr
        conditions = [
            pb.RuntimeCondition(type="RuntimeReady", status=self.runtime_ready,
                                reason="" if self.runtime_ready else "FakeRuntimeNotReady"),
            pb.RuntimeCondition(type="NetworkReady", status=network_ready,
                                reason="" if network_ready else "NetworkPluginNotReady",
                                message="" if network_ready else "Network plugin returns error: no pod CIDR yet"),
        ]
        return pb.StatusResponse(status=pb.RuntimeStatus(conditions=conditions))

    async def UpdateRuntimeConfig(self, request: pb.UpdateRuntimeConfigRequest, context: Any = None,
                                  **_: Any) -> pb.UpdateRuntimeConfigResponse:
        self._record("UpdateRuntimeConfig")
        self.pod_cidr = request.runtime_config.network_config.pod_cidr
        return pb.UpdateRuntimeConfigResponse()

    async def RunPodSandbox(self, request: pb.RunPodSandboxRequest, context: Any = None,
                            **_: Any) -> pb.RunPodSandboxResponse:
        self._record("RunPodSandbox")
        config = request.config
        sandbox_id = self._new_id()
        host_network = config.linux.security_context.namespace_options.network == pb.NODE
        status = pb.PodSandboxStatus(id=sandbox_id, metadata=config.metadata, state=pb.SANDBOX_READY,
                                     created_at=_now_ns(), labels=config.labels, annotations=config.annotations)
        if not host_network:
            status.network.ip = self._next_ip()
        status.linux.namespaces.options.CopyFrom(config.linux.security_context.namespace_options)
        self.sandboxes[sandbox_id] = status
        self.sandbox_configs[sandbox_id] = config
        self._event(sandbox_id, pb.CONTAINER_CREATED_EVENT, sandbox=True)
        self._event(sandbox_id, pb.CONTAINER_STARTED_EVENT, sandbox=True)
        return pb.RunPodSandboxResponse(pod_sandbox_id=sandbox_id)

    async def StopPodSandbox(self, request: pb.StopPodSandboxRequest, context: Any = None,
                             **_: Any) -> pb.StopPodSandboxResponse:
        self._record("StopPodSandbox")
        sandbox = self.sandboxes.get(request.pod_sandbox_id)
        if sandbox is not None:  # stopping a missing sandbox succeeds, as the CRI wants
            sandbox.state = pb.SANDBOX_NOTREADY
            for cid, sid in self.container_sandbox.items():
                if sid == request.pod_sandbox_id and self.containers[cid].state == pb.CONTAINER_RUNNING:
                    self.exit_container(cid, 137, "Error")
            self._event(request.pod_sandbox_id, pb.CONTAINER_STOPPED_EVENT, sandbox=True)
        return pb.StopPodSandboxResponse()

    async def RemovePodSandbox(self, request: pb.RemovePodSandboxRequest, context: Any = None,
                               **_: Any) -> pb.RemovePodSandboxResponse:
        self._record("RemovePodSandbox")
        known = self.sandboxes.pop(request.pod_sandbox_id, None)
        self.sandbox_configs.pop(request.pod_sandbox_id, None)
        for cid in [c for c, s in self.container_sandbox.items() if s == request.pod_sandbox_id]:
            self.containers.pop(cid, None)
            self.container_sandbox.pop(cid, None)
            self._event(cid, pb.CONTAINER_DELETED_EVENT)
        if known is not None:
            self._event(request.pod_sandbox_id, pb.CONTAINER_DELETED_EVENT, sandbox=True)
        self.changed.set()
        return pb.RemovePodSandboxResponse()

    async def PodSandboxStatus(self, request: pb.PodSandboxStatusRequest, context: Any = None,
                               **_: Any) -> pb.PodSandboxStatusResponse:
        self._record("PodSandboxStatus")
        sandbox = self.sandboxes.get(request.pod_sandbox_id)
        if sandbox is None:
            raise FakeRuntimeError(f"pod sandbox {request.pod_sandbox_id} not found", grpc.StatusCode.NOT_FOUND)
        return pb.PodSandboxStatusResponse(status=sandbox, timestamp=_now_ns())

    async def ListPodSandbox(self, request: pb.ListPodSandboxRequest, context: Any = None,
                             **_: Any) -> pb.ListPodSandboxResponse:
        self._record("ListPodSandbox")
        f = request.filter
        items = []
        for s in self.sandboxes.values():
            if (f.id and s.id != f.id) or (f.HasField("state") and s.state != f.state.state) \
                    or not _matches(s.labels, f.label_selector):
                continue
            items.append(pb.PodSandbox(id=s.id, metadata=s.metadata, state=s.state, created_at=s.created_at,
                                       labels=s.labels, annotations=s.annotations))
        return pb.ListPodSandboxResponse(items=items)

    async def CreateContainer(self, request: pb.CreateContainerRequest, context: Any = None,
                              **_: Any) -> pb.CreateContainerResponse:
        self._record("CreateContainer")
        if request.pod_sandbox_id not in self.sandboxes:
            raise FakeRuntimeError(f"pod sandbox {request.pod_sandbox_id} not found", grpc.StatusCode.NOT_FOUND)
        config = request.config
        image = config.image.image
        if image not in self.images:
            raise FakeRuntimeError(f"image {image!r} not present", grpc.StatusCode.NOT_FOUND)
        cid = self._new_id()
        log_dir = request.sandbox_config.log_directory
        self.containers[cid] = pb.ContainerStatus(
            id=cid, metadata=config.metadata, state=pb.CONTAINER_CREATED, created_at=_now_ns(),
            image=config.image, image_ref=self.images[image].id, labels=config.labels,
            annotations=config.annotations, mounts=config.mounts,
            log_path=f"{log_dir}/{config.log_path}" if log_dir and config.log_path else "")
        self.container_sandbox[cid] = request.pod_sandbox_id
        self._event(cid, pb.CONTAINER_CREATED_EVENT)
        return pb.CreateContainerResponse(container_id=cid)

    def _container(self, container_id: str) -> pb.ContainerStatus:
        status = self.containers.get(container_id)
        if status is None:
            raise FakeRuntimeError(f"container {container_id} not found", grpc.StatusCode.NOT_FOUND)
        return status

    async def StartContainer(self, request: pb.StartContainerRequest, context: Any = None,
                             **_: Any) -> pb.StartContainerResponse:
        self._record("StartContainer")
        status = self._container(request.container_id)
        status.state = pb.CONTAINER_RUNNING
        status.started_at = _now_ns()
        self._event(request.container_id, pb.CONTAINER_STARTED_EVENT)
        return pb.StartContainerResponse()

    async def StopContainer(self, request: pb.StopContainerRequest, context: Any = None,
                            **_: Any) -> pb.StopContainerResponse:
        self._record("StopContainer")
        status = self.containers.get(request.container_id)
        if status is not None and status.state == pb.CONTAINER_RUNNING:
            self.exit_container(request.container_id, 137 if request.timeout == 0 else 143, "Error")
        return pb.StopContainerResponse()

    async def RemoveContainer(self, request: pb.RemoveContainerRequest, context: Any = None,
                              **_: Any) -> pb.RemoveContainerResponse:
        self._record("RemoveContainer")
        if self.containers.pop(request.container_id, None) is not None:
            self.container_sandbox.pop(request.container_id, None)
            self._event(request.container_id, pb.CONTAINER_DELETED_EVENT)
        return pb.RemoveContainerResponse()

    async def ListContainers(self, request: pb.ListContainersRequest, context: Any = None,
                             **_: Any) -> pb.ListContainersResponse:
        self._record("ListContainers")
        f = request.filter
        out = []
        for c in self.containers.values():
            sandbox_id = self.container_sandbox.get(c.id, "")
            if (f.id and c.id != f.id) or (f.pod_sandbox_id and sandbox_id != f.pod_sandbox_id) \
                    or (f.HasField("state") and c.state != f.state.state) or not _matches(c.labels, f.label_selector):
                continue
            out.append(pb.Container(id=c.id, pod_sandbox_id=sandbox_id, metadata=c.metadata, image=c.image,
                                    image_ref=c.image_ref, state=c.state, created_at=c.created_at, labels=c.labels,
                                    annotations=c.annotations))
        return pb.ListContainersResponse(containers=out)

    async def ContainerStatus(self, request: pb.ContainerStatusRequest, context: Any = None,
                              **_: Any) -> pb.ContainerStatusResponse:
        self._record("ContainerStatus")
        return pb.ContainerStatusResponse(status=self._container(request.container_id))

    async def ReopenContainerLog(self, request: pb.ReopenContainerLogRequest, context: Any = None,
                                 **_: Any) -> pb.ReopenContainerLogResponse:
        self._record("ReopenContainerLog")
        return pb.ReopenContainerLogResponse()

    async def ExecSync(self, request: pb.ExecSyncRequest, context: Any = None, **_: Any) -> pb.ExecSyncResponse:
        self._record("ExecSync")
        status = self._container(request.container_id)
        if status.state != pb.CONTAINER_RUNNING:
            raise FakeRuntimeError(f"container {request.container_id} is not running",
                                   grpc.StatusCode.FAILED_PRECONDITION)
        stdout, stderr, code = self.exec_handler(request.container_id, list(request.cmd))
        return pb.ExecSyncResponse(stdout=stdout, stderr=stderr, exit_code=code)

    async def Exec(self, request: pb.ExecRequest, context: Any = None, **_: Any) -> pb.ExecResponse:
        self._record("Exec")
        self._container(request.container_id)
        return pb.ExecResponse(url=f"http://127.0.0.1:0/exec/{request.container_id[:12]}")

    async def Attach(self, request: pb.AttachRequest, context: Any = None, **_: Any) -> pb.AttachResponse:
        self._record("Attach")
        return pb.AttachResponse(url=f"http://127.0.0.1:0/attach/{request.container_id[:12]}")

    async def PortForward(self, request: pb.PortForwardRequest, context: Any = None,
                          **_: Any) -> pb.PortForwardResponse:
        self._record("PortForward")
        return pb.PortForwardResponse(url=f"http://127.0.0.1:0/portforward/{request.pod_sandbox_id[:12]}")

    async def GetContainerEvents(self, request: pb.GetEventsRequest, context: Any = None,
                                 **_: Any) -> AsyncIterator[pb.ContainerEventResponse]:
        self._record("GetContainerEvents")
        queue: asyncio.Queue[pb.ContainerEventResponse] = asyncio.Queue()
        self._event_queues.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._event_queues.remove(queue)

    # -- ImageService ---------------------------------------------------------------------------

    async def ListImages(self, request: pb.ListImagesRequest, context: Any = None,
                         **_: Any) -> pb.ListImagesResponse:
        self._record("ListImages")
        wanted = request.filter.image.image
        return pb.ListImagesResponse(images=[i for name, i in self.images.items() if not wanted or name == wanted])

    async def ImageStatus(self, request: pb.ImageStatusRequest, context: Any = None,
                          **_: Any) -> pb.ImageStatusResponse:
        self._record("ImageStatus")
        image = self.images.get(request.image.image)
        return pb.ImageStatusResponse(image=image) if image is not None else pb.ImageStatusResponse()

    async def PullImage(self, request: pb.PullImageRequest, context: Any = None, **_: Any) -> pb.PullImageResponse:
        self._record("PullImage")
        name = request.image.image
        if name in self.pull_gates:
            await self.pull_gates[name].wait()
        if name in self.pull_errors:
            raise FakeRuntimeError(self.pull_errors[name], grpc.StatusCode.NOT_FOUND)
        if name not in self.images:
            self.add_image(name)
        return pb.PullImageResponse(image_ref=self.images[name].id)

    async def RemoveImage(self, request: pb.RemoveImageRequest, context: Any = None,
                          **_: Any) -> pb.RemoveImageResponse:
        self._record("RemoveImage")
        self.images.pop(request.image.image, None)
        return pb.RemoveImageResponse()


class _Servicer:
    """Adapts the fake's calls to a grpc.aio server: an injected error becomes the call's status."""

    def __init__(self, fake: FakeRuntime) -> None:
        self.fake = fake

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.fake, name)
        if name == "GetContainerEvents":
            async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
                try:
                    async for item in method(request, context):
                        yield item
                except FakeRuntimeError as e:
                    await context.abort(e.code, str(e))
            return stream

        async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            try:
                return await method(request, context)
            except FakeRuntimeError as e:
                await context.abort(e.code, str(e))
        return unary


async def serve(fake: FakeRuntime, endpoint: str) -> grpc.aio.Server:
    """Serve `fake` as RuntimeService and ImageService at `endpoint` (unix:///path); started."""
    server = grpc.aio.server()
    servicer = _Servicer(fake)
    pb_grpc.add_RuntimeServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    pb_grpc.add_ImageServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    if server.add_insecure_port(endpoint) == 0:
        raise OSError(f"cannot listen on {endpoint}")
    await server.start()
    return server
