"""The kubelet's client of `runtime.v1.ImageService` (upstream pkg/kubelet/cri/remote/remote_image.go).

PullImage has no deadline but the caller's (a pull takes as long as it takes; upstream cancels it
with the sync); the other calls carry --runtime-request-timeout.
"""

from __future__ import annotations

from typing import Any

import grpc

from kubelet.cri.remote_runtime import DEFAULT_TIMEOUT, call, dial
from machinery.cri import api_pb2 as pb
from machinery.cri import api_pb2_grpc as pb_grpc


class RemoteImageService:
    def __init__(self, stub: Any, timeout: float = DEFAULT_TIMEOUT, channel: grpc.aio.Channel | None = None) -> None:
        self.stub = stub
        self.timeout = timeout
        self.channel = channel

    @classmethod
    def connect(cls, endpoint: str, timeout: float = DEFAULT_TIMEOUT) -> RemoteImageService:
        channel = dial(endpoint)
        return cls(pb_grpc.ImageServiceStub(channel), timeout, channel)

    async def close(self) -> None:
        if self.channel is not None:
            await self.channel.close()

    async def image_status(self, image: str) -> pb.Image | None:
        """The image if the runtime has it, else None (an empty answer, as the CRI says)."""
        response = await call(self.stub.ImageStatus, pb.ImageStatusRequest(image=pb.ImageSpec(image=image)),
                              self.timeout)
        return response.image if response.HasField("image") and response.image.id else None

    async def pull_image(self, image: str, sandbox_config: pb.PodSandboxConfig | None = None) -> str:
        request = pb.PullImageRequest(image=pb.ImageSpec(image=image))
        if sandbox_config is not None:
            request.sandbox_config.CopyFrom(sandbox_config)
        return str((await call(self.stub.PullImage, request, None)).image_ref)

    async def list_images(self) -> list[pb.Image]:
        return list((await call(self.stub.ListImages, pb.ListImagesRequest(), self.timeout)).images)

    async def remove_image(self, image: str) -> None:
        await call(self.stub.RemoveImage, pb.RemoveImageRequest(image=pb.ImageSpec(image=image)), self.timeout)
