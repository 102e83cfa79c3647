"""`python -m dockershim --node-name N --container-runtime-endpoint unix:///run/minik8s/N/dockershim.sock`:
the node's CRI runtime over Docker, beside its kubelet (as cri-dockerd runs; its flag names)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import aiodocker
import grpc

from cni import host
from cni.config import DEFAULT_CLUSTER_CIDR, DEFAULT_CNI_BIN_DIRS
from dockershim.cleanup import cleanup_host_rules_if_unused
from dockershim.network import PodNetwork
from dockershim.service import DockerService
from dockershim.streaming import StreamingServer
from machinery import logs, tracing
from machinery.cri import api_pb2_grpc as cri_grpc

log = logging.getLogger("dockershim")

DEFAULT_PAUSE_IMAGE = "minik8s/pause:3.9"


def default_endpoint(node: str) -> str:
    return f"unix:///run/minik8s/{node}/dockershim.sock"


def default_root_dir(node: str) -> Path:
    """The node's state: CNI results and leases under <root>/cni, the shim's own under <root>/dockershim.
    The kubelet's root dir, where that state has always lived."""
    return Path("/var/lib/minik8s/kubelet") / node


def registration_name(node: str) -> str:
    """The shim's entry among the host's live node agents (cni.host), beside its kubelet's."""
    return f"{node}.dockershim"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="dockershim", description="minik8s dockershim: a CRI v1 runtime over Docker")
    p.add_argument("--node-name", default=socket.gethostname().lower(), help="the node this shim serves")
    p.add_argument("--container-runtime-endpoint", default=None,
                   help="the CRI socket to serve, unix:///path (default unix:///run/minik8s/<node>/dockershim.sock)")
    p.add_argument("--root-dir", default=None,
                   help="state directory (default /var/lib/minik8s/kubelet/<node-name>)")
    p.add_argument("--docker-endpoint", default="unix:///var/run/docker.sock", help="Docker's socket")
    p.add_argument("--pod-infra-container-image", default=DEFAULT_PAUSE_IMAGE, help="the sandbox image")
    p.add_argument("--cni-bin-dir", default=":".join(DEFAULT_CNI_BIN_DIRS),
                   help="where CNI plugins are looked for, colon-separated (default %(default)s)")
    p.add_argument("--cluster-cidr", default=DEFAULT_CLUSTER_CIDR,
                   help="the cluster's pod network, forwarded and masqueraded on this host (default %(default)s)")
    p.add_argument("--streaming-address", default="127.0.0.1",
                   help="address of the exec streaming server (default %(default)s)")
    p.add_argument("--streaming-port", type=int, default=0, help="its port (default: any free one)")
    tracing.add_flag(p)
    logs.add_flags(p)
    args = p.parse_args(argv)
    endpoint = args.container_runtime_endpoint or default_endpoint(args.node_name)
    if not endpoint.startswith("unix://"):
        p.error(f"--container-runtime-endpoint {endpoint!r}: only unix:// endpoints are served")
    args.socket_path = endpoint.removeprefix("unix://")
    if not args.socket_path.startswith("/"):
        p.error(f"--container-runtime-endpoint {endpoint!r}: the socket path must be absolute")
    if len(args.socket_path.encode()) > 107:
        p.error(f"--container-runtime-endpoint: {args.socket_path!r} is longer than a unix socket path may be")
    args.root = Path(args.root_dir) if args.root_dir else default_root_dir(args.node_name)
    return args


def use_pidfd_child_watcher() -> bool:
    """Wait for CNI plugins through a pidfd on the event loop, not a thread per plugin run.

    Python 3.11's default child watcher (ThreadedChildWatcher) starts a thread for every child to block in
    waitpid; a pod's start runs three plugins, and with 30 pods starting at once those threads cost the shim
    CPU the pods' start needs. Python 3.12 watches children through pidfds itself; on older kernels (before
    5.3, no pidfd_open) the default stays. True if the watcher was installed."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    asyncio.get_event_loop_policy().set_child_watcher(asyncio.PidfdChildWatcher())
    return True


async def serve(args: argparse.Namespace, stop: asyncio.Event | None = None) -> None:
    docker = aiodocker.Docker(url=args.docker_endpoint)
    server: grpc.aio.Server | None = None
    housekeeping: asyncio.Task[None] | None = None
    streaming = StreamingServer(docker, args.streaming_address, args.streaming_port)
    network = PodNetwork(args.node_name, args.root, [d for d in args.cni_bin_dir.split(":") if d], args.cluster_cidr)
    service = DockerService(docker, node=args.node_name, network=network,
                            pause_image=args.pod_infra_container_image, streaming=streaming)
    host.register_kubelet(registration_name(args.node_name))
    try:
        try:
            version = await docker.version()
            info = await docker.system.info()
            service.docker_root = str(info.get("DockerRootDir") or "")
            service.cgroup_driver = str(info.get("CgroupDriver") or "cgroupfs")
            if service.cgroup_driver != "cgroupfs":
                log.warning("Docker's cgroup driver is %s: pods keep Docker's default cgroup parent, not the "
                            "kubelet's pod cgroups (cgroupfs)", service.cgroup_driver)
        except (aiodocker.DockerError, OSError) as e:
            raise SystemExit(f"dockershim: cannot reach Docker at {args.docker_endpoint}: {e}") from e
        with contextlib.suppress(Exception):
            await service.gc_network()
        await streaming.start()
        service.start_events()
        housekeeping = asyncio.create_task(service.housekeeping(), name="housekeeping")
        server = grpc.aio.server()
        cri_grpc.add_RuntimeServiceServicer_to_server(service, server)  # type: ignore[no-untyped-call]
        cri_grpc.add_ImageServiceServicer_to_server(service, server)  # type: ignore[no-untyped-call]
        Path(args.socket_path).parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.socket_path)  # a previous shim's
        server.add_insecure_port(f"unix://{args.socket_path}")
        await server.start()
        log.info("dockershim for node %s serving CRI on unix://%s (Docker %s, streaming %s, root %s)",
                 args.node_name, args.socket_path, version.get("Version"), streaming.base_url, args.root)
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        if housekeeping is not None:
            housekeeping.cancel()
        if server is not None:
            await server.stop(2)
        await service.stop_events()
        await streaming.stop()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.socket_path)
        host.unregister_kubelet(registration_name(args.node_name))
        with contextlib.suppress(Exception):  # the last node agent here takes the shared rules away
            await cleanup_host_rules_if_unused(docker, running_only=True)
        await docker.close()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logs.setup(args.v)
    tracing.setup_or_exit(args.tracing_config_file, "dockershim", attributes={"k8s.node.name": args.node_name})
    use_pidfd_child_watcher()
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
