"""A hollow node for the benchmarks, as kubemark's hollow-node: the real kubelet on a fake CRI runtime
that starts no containers but reports them started.

    python -m bench.hollow_node --node-name NAME --master URL [any other kubelet flag]

Everything above the CRI is the kubelet's own code, unchanged (`kubelet.kubelet.Kubelet`): node
registration, the Lease heartbeat and node status, the pod informer, the pod workers and their
syncer, the runtime manager (kuberuntime), the PLEG relisting and following container events, the
status manager and the events it records, and the CRI clients over grpc. Below the CRI, as upstream's
kubemark serves `fakeremote.NewFakeRemoteRuntime` on a unix socket, the runtime is
`machinery/cri/testing/fake_runtime.FakeRuntime` served in the same process: sandboxes get the next
address of the node's podCIDR, containers are "running" at once, every image can be pulled, nothing
runs and nothing touches the host's network.

So a hollow pod costs the control plane and the kubelet what a real one costs, and nothing on the host:
a thousand fit on a 2-core machine.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from pathlib import Path

import grpc

from kubelet.__main__ import main as kubelet_main
from kubelet.cri.remote_image import RemoteImageService
from kubelet.cri.remote_runtime import RemoteRuntimeService
from kubelet.kubelet import Kubelet, KubeletConfig
from machinery.cri.testing.fake_runtime import FakeRuntime, serve

log = logging.getLogger(__name__)


class HollowKubelet(Kubelet):
    """`Kubelet` whose --container-runtime-endpoint is a fake runtime it serves itself."""

    def __init__(self, config: KubeletConfig) -> None:
        self.fake = FakeRuntime()
        config.cgroups_per_qos = False  # its pods are no processes: no cgroups on this host for them
        # a unix socket path must stay short (108 bytes): not under the (long) state dir
        self.socket_dir = Path(tempfile.mkdtemp(prefix="hollow-cri-"))
        config.container_runtime_endpoint = config.image_service_endpoint = f"unix://{self.socket_dir}/cri.sock"
        self.fake_server: grpc.aio.Server | None = None
        super().__init__(config)

    def connect_runtime(self) -> tuple[RemoteRuntimeService, RemoteImageService]:
        return super().connect_runtime()  # the channel connects lazily, once the fake serves (start)

    async def start(self) -> None:
        self.fake_server = await serve(self.fake, self.config.container_runtime_endpoint)
        await super().start()

    async def shutdown(self) -> None:
        try:
            await super().shutdown()
        finally:
            if self.fake_server is not None:
                with contextlib.suppress(Exception):
                    await self.fake_server.stop(None)
            shutil.rmtree(self.socket_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    kubelet_main(argv, HollowKubelet)  # the kubelet's own flags and signal handling


if __name__ == "__main__":
    main()
