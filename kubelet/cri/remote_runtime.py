"""The kubelet's client of `runtime.v1.RuntimeService` (upstream pkg/kubelet/cri/remote/remote_runtime.go).

One grpc.aio channel to the runtime's unix socket; every call carries the deadline
--runtime-request-timeout (2 minutes, as upstream) unless the call has its own (ExecSync: the
command's timeout plus that). A failed call raises `CriError` with the grpc status code, whatever
answered: a real runtime over the socket, or `FakeRuntime` handed in directly as the stub (unit
tests: the fake's methods take the stub's `(request, timeout=...)` call).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from kubelet import metrics
from machinery import tracing
from machinery.cri import api_pb2 as pb
from machinery.cri import api_pb2_grpc as pb_grpc
from machinery.cri.errors import CriError

DEFAULT_TIMEOUT = 120.0
# the runtime's answer may be large (ListContainers of a busy node): upstream allows 16 MiB
MAX_MESSAGE_SIZE = 16 * 1024 * 1024


def dial(endpoint: str) -> grpc.aio.Channel:
    """A channel to `unix:///path` (or a plain path, as upstream accepts)."""
    if not endpoint:
        raise ValueError("the container runtime endpoint is empty")
    target = endpoint if "://" in endpoint else f"unix://{endpoint}"
    if not target.startswith("unix://"):
        raise ValueError(f"container runtime endpoint {endpoint!r}: only unix:// sockets are supported")
    return grpc.aio.insecure_channel(target, options=[("grpc.max_receive_message_length", MAX_MESSAGE_SIZE),
                                                      ("grpc.max_send_message_length", MAX_MESSAGE_SIZE)])


async def call(method: Any, request: Any, timeout: float | None) -> Any:
    """One CRI call, counted and timed by its operation type (upstream's instrumented services)."""
    operation = metrics.operation_type(request)
    metrics.RUNTIME_OPERATIONS.labels(operation).inc()
    started = time.perf_counter()
    try:
        if tracing.TRACER is not None:  # --tracing-config-file: the runtime's spans are children of ours
            metadata = tracing.inject_metadata()
            if metadata:
                return await method(request, timeout=timeout, metadata=metadata)
        return await method(request, timeout=timeout)
    except grpc.aio.AioRpcError as e:
        metrics.RUNTIME_OPERATIONS_ERRORS.labels(operation).inc()
        raise CriError(e.details() or str(e.code()), e.code()) from None
    finally:
        metrics.RUNTIME_OPERATIONS_DURATION.labels(operation).observe(time.perf_counter() - started)


class RemoteRuntimeService:
    def __init__(self, stub: Any, timeout: float = DEFAULT_TIMEOUT, channel: grpc.aio.Channel | None = None) -> None:
        self.stub = stub
        self.timeout = timeout
        self.channel = channel

    @classmethod
    def connect(cls, endpoint: str, timeout: float = DEFAULT_TIMEOUT) -> RemoteRuntimeService:
        channel = dial(endpoint)
        return cls(pb_grpc.RuntimeServiceStub(channel), timeout, channel)

    async def close(self) -> None:
        if self.channel is not None:
            await self.channel.close()

    async def version(self) -> pb.VersionResponse:
        return await call(self.stub.Version, pb.VersionRequest(version="v1"), self.timeout)

    async def status(self) -> pb.RuntimeStatus:
        return (await call(self.stub.Status, pb.StatusRequest(), self.timeout)).status

    async def update_runtime_config(self, pod_cidr: str) -> None:
        config = pb.RuntimeConfig(network_config=pb.NetworkConfig(pod_cidr=pod_cidr))
        await call(self.stub.UpdateRuntimeConfig, pb.UpdateRuntimeConfigRequest(runtime_config=config), self.timeout)

    # -- sandboxes ------------------------------------------------------------------------------

    async def run_pod_sandbox(self, config: pb.PodSandboxConfig, runtime_handler: str = "") -> str:
        response = await call(self.stub.RunPodSandbox,
                              pb.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler), self.timeout)
        if not response.pod_sandbox_id:
            raise CriError(f"RunPodSandbox of {config.metadata.name} returned an empty id")
        return str(response.pod_sandbox_id)

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        await call(self.stub.StopPodSandbox, pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), self.timeout)

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        await call(self.stub.RemovePodSandbox, pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), self.timeout)

    async def pod_sandbox_status(self, sandbox_id: str) -> pb.PodSandboxStatus:
        response = await call(self.stub.PodSandboxStatus, pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id),
                              self.timeout)
        return response.status

    async def list_pod_sandbox(self, labels: dict[str, str] | None = None) -> list[pb.PodSandbox]:
        request = pb.ListPodSandboxRequest(filter=pb.PodSandboxFilter(label_selector=labels or {}))
        return list((await call(self.stub.ListPodSandbox, request, self.timeout)).items)

    # -- containers -----------------------------------------------------------------------------

    async def create_container(self, sandbox_id: str, config: pb.ContainerConfig,
                               sandbox_config: pb.PodSandboxConfig) -> str:
        request = pb.CreateContainerRequest(pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox_config)
        response = await call(self.stub.CreateContainer, request, self.timeout)
        if not response.container_id:
            raise CriError(f"CreateContainer of {config.metadata.name} returned an empty id")
        return str(response.container_id)

    async def start_container(self, container_id: str) -> None:
        await call(self.stub.StartContainer, pb.StartContainerRequest(container_id=container_id), self.timeout)

    async def stop_container(self, container_id: str, timeout: int) -> None:
        # the runtime may take the whole grace period: the deadline is that plus the usual one
        await call(self.stub.StopContainer, pb.StopContainerRequest(container_id=container_id, timeout=timeout),
                   self.timeout + timeout)

    async def remove_container(self, container_id: str) -> None:
        await call(self.stub.RemoveContainer, pb.RemoveContainerRequest(container_id=container_id), self.timeout)

    async def list_containers(self, labels: dict[str, str] | None = None,
                              sandbox_id: str = "") -> list[pb.Container]:
        request = pb.ListContainersRequest(filter=pb.ContainerFilter(label_selector=labels or {},
                                                                      pod_sandbox_id=sandbox_id))
        return list((await call(self.stub.ListContainers, request, self.timeout)).containers)

    async def container_status(self, container_id: str) -> pb.ContainerStatus:
        response = await call(self.stub.ContainerStatus, pb.ContainerStatusRequest(container_id=container_id),
                              self.timeout)
        return response.status

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: float) -> pb.ExecSyncResponse:
        request = pb.ExecSyncRequest(container_id=container_id, cmd=cmd, timeout=int(timeout))
        return await call(self.stub.ExecSync, request, self.timeout + timeout if timeout else None)

    async def exec(self, request: pb.ExecRequest) -> str:
        return str((await call(self.stub.Exec, request, self.timeout)).url)

    async def attach(self, request: pb.AttachRequest) -> str:
        return str((await call(self.stub.Attach, request, self.timeout)).url)

    async def port_forward(self, request: pb.PortForwardRequest) -> str:
        return str((await call(self.stub.PortForward, request, self.timeout)).url)

    async def reopen_container_log(self, container_id: str) -> None:
        await call(self.stub.ReopenContainerLog, pb.ReopenContainerLogRequest(container_id=container_id),
                   self.timeout)

    # -- stats ----------------------------------------------------------------------------------

    async def list_container_stats(self, sandbox_id: str = "") -> list[pb.ContainerStats]:
        request = pb.ListContainerStatsRequest(filter=pb.ContainerStatsFilter(pod_sandbox_id=sandbox_id))
        return list((await call(self.stub.ListContainerStats, request, self.timeout)).stats)

    async def list_pod_sandbox_stats(self) -> list[pb.PodSandboxStats]:
        request = pb.ListPodSandboxStatsRequest(filter=pb.PodSandboxStatsFilter())
        return list((await call(self.stub.ListPodSandboxStats, request, self.timeout)).stats)

    async def container_events(self) -> AsyncIterator[pb.ContainerEventResponse]:
        """The runtime's stream of container events (no deadline: it lasts as long as the kubelet)."""
        try:
            async for event in self.stub.GetContainerEvents(pb.GetEventsRequest()):
                yield event
        except grpc.aio.AioRpcError as e:
            raise CriError(e.details() or str(e.code()), e.code()) from None
