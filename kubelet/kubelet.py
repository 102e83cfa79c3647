"""The kubelet: one per node, everything wired together (upstream pkg/kubelet/kubelet.go).

    apiserver ──pods (fieldSelector spec.nodeName=NODE)──▶ informer ──▶ PodWorkers (one task per pod)
    Docker ──events + relist──▶ RuntimeCache (PLEG) ──────────────────▶      │
    probes ──verdicts──────────────────────────────────────────────────▶     ▼
                                   Docker runtime, CNI, volumes ◀── sync / terminate ──▶ pods/{name}/status

Besides the workers: node registration with Lease and status heartbeats (`NodeStatusManager`),
the node's podCIDR from its Node object (or --pod-cidr), the HTTP server for logs and exec, and
housekeeping — containers of pods that no longer exist are killed and removed with their network
and volumes, leaked CNI attachments and address leases released.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from cni import host
from cni.config import DEFAULT_CLUSTER_CIDR, DEFAULT_CNI_BIN_DIRS
from kubelet.backoff import Backoff
from kubelet.docker_client import DockerClient, DockerError
from kubelet.network import PodNetwork
from kubelet.node_status import NodeFacts, NodeStatusManager
from kubelet.pod_workers import PodWorkers
from kubelet.probes import ProbeManager, ProbeTarget
from kubelet.runtime import DockerRuntime, RuntimeCache
from kubelet.server import KubeletServer
from kubelet.status_manager import StatusManager
from kubelet.volumes import VolumeManager
from machinery.api.core_v1 import Node, Pod
from machinery.client import KUBE_VERSION, ApiClient
from machinery.events import EventRecorder
from machinery.informer import Informer
from machinery.kubeconfig import ClientConfig, load_kubeconfig
from machinery.netutil import default_node_ip

log = logging.getLogger(__name__)

DEFAULT_PAUSE_IMAGE = "minik8s/pause:3.9"
RESYNC_SECONDS = 60.0


def user_agent(node_name: str) -> str:
    return f"kubelet/{KUBE_VERSION} (linux/amd64) minik8s/system:node:{node_name}"


@dataclass
class KubeletConfig:
    node_name: str
    kubeconfig: str | None = None
    master: str | None = None
    pod_cidr: str | None = None
    port: int = 10250
    address: str | None = None  # bind address; the node IP by default
    root_dir: Path = Path("/var/lib/minik8s/kubelet")
    node_ip: str = ""
    crashloop_backoff_base: float = 10.0
    crashloop_backoff_max: float = 300.0
    image_backoff_base: float = 10.0
    image_backoff_max: float = 300.0
    cni_bin_dirs: list[str] = field(default_factory=lambda: list(DEFAULT_CNI_BIN_DIRS))
    cluster_cidr: str = DEFAULT_CLUSTER_CIDR
    pause_image: str = DEFAULT_PAUSE_IMAGE
    docker_socket: str = "/var/run/docker.sock"
    node_labels: dict[str, str] = field(default_factory=dict)
    lease_duration: int = 40
    node_status_update_frequency: float = 10.0
    node_status_report_frequency: float = 60.0
    cluster_dns: list[str] = field(default_factory=list)
    housekeeping_interval: float = 10.0
    relist_period: float = 10.0
    tls_cert_file: str | None = None  # serve HTTPS (kubelet/server.py)
    tls_private_key_file: str | None = None
    client_ca_file: str | None = None  # ... and require client certificates from this CA

    def __post_init__(self) -> None:
        if not self.node_ip:
            self.node_ip = default_node_ip()


class Kubelet:
    def __init__(self, config: KubeletConfig) -> None:
        self.config = config
        config.root_dir.mkdir(parents=True, exist_ok=True)
        if config.master and not config.kubeconfig:
            client_config = ClientConfig(server=config.master, user_agent=user_agent(config.node_name))
        else:
            client_config = load_kubeconfig(config.kubeconfig, user_agent=user_agent(config.node_name))
            if config.master:  # upstream's --master overrides the kubeconfig's server, keeping its credentials
                client_config = dataclasses.replace(client_config, server=config.master)
        self.client = ApiClient(client_config, user_agent=user_agent(config.node_name))
        self.docker = DockerClient(config.docker_socket)
        self.cache = RuntimeCache(self.docker, config.node_name, config.relist_period)
        self.runtime = DockerRuntime(self.docker, self.cache, config.node_name, config.pause_image)
        self.network = PodNetwork(config.node_name, config.root_dir, config.cni_bin_dirs, config.cluster_cidr)
        self.volumes = VolumeManager(config.root_dir)
        self.recorder = EventRecorder(self.client, "kubelet", host=config.node_name)
        self.status_manager = StatusManager(self.client)
        self.crash_backoff = Backoff(config.crashloop_backoff_base, config.crashloop_backoff_max)
        self.image_backoff = Backoff(config.image_backoff_base, config.image_backoff_max)
        self.workers = PodWorkers(self)
        self.probes = ProbeManager(self.docker, self._probe_target, self.workers.wake, self.workers.request_kill,
                                   lambda pod, t, r, m: self.recorder.event(pod, t, r, m))
        self.node_status = NodeStatusManager(
            self.client, NodeFacts(config.node_name, config.node_ip, config.port, config.pod_cidr,
                                   labels=dict(config.node_labels)),
            lease_duration=config.lease_duration, update_frequency=config.node_status_update_frequency,
            report_frequency=config.node_status_report_frequency)
        self.server = KubeletServer(self)
        self.pod_informer: Informer[Pod] | None = None
        self.node_informer: Informer[Node] | None = None
        self._uvicorn: uvicorn.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.ready = asyncio.Event()

    def _probe_target(self, uid: str, name: str) -> ProbeTarget | None:
        worker = self.workers.workers.get(uid)
        return worker.probe_target(name) if worker is not None else None

    # -- life cycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self.start()
            await asyncio.gather(*self._tasks)
        finally:
            await self.shutdown()

    async def start(self) -> None:
        config = self.config
        host.register_kubelet(config.node_name)
        try:
            version = await self.docker.version()
            self.node_status.facts.runtime_version = f"docker://{version.get('Version', 'unknown')}"
        except (DockerError, OSError) as e:
            raise SystemExit(f"kubelet: cannot reach Docker at {config.docker_socket}: {e}") from e
        await self.cache.start()
        self.cache.add_listener(self.workers.wake)
        if config.pod_cidr:
            self._set_pod_cidr(config.pod_cidr)

        node = await self.node_status.register()
        if node.spec and node.spec.pod_cidr:
            self._set_pod_cidr(node.spec.pod_cidr)

        self.node_informer = Informer(self.client, Node, field_selector={"metadata.name": config.node_name})
        self.node_informer.add_event_handler(on_add=self._node_changed,
                                             on_update=lambda _old, new: self._node_changed(new))
        self.pod_informer = Informer(self.client, Pod, field_selector={"spec.nodeName": config.node_name})
        self.pod_informer.add_event_handler(on_add=self.workers.update,
                                            on_update=lambda _old, new: self.workers.update(new),
                                            on_delete=self.workers.remove)
        self.node_informer.start()
        self.pod_informer.start()

        await self._start_server()
        self._tasks.append(asyncio.create_task(self.node_status.run(), name="node-status"))
        await self.pod_informer.wait_for_sync()
        self._tasks.append(asyncio.create_task(self._housekeeping_loop(), name="housekeeping"))
        self.ready.set()
        log.info("kubelet %s ready (node IP %s, port %d, root %s)", config.node_name, config.node_ip, config.port,
                 config.root_dir)

    async def _start_server(self) -> None:
        config = uvicorn.Config(self.server.app, host=self.config.address or self.config.node_ip, port=self.config.port,
                                log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=1, **self.server.uvicorn_options())
        server = _EmbeddedServer(config)
        self._uvicorn = server
        task = asyncio.create_task(server.serve(), name="kubelet-server")
        while not server.started:
            if task.done():
                task.result()
                raise SystemExit(f"kubelet: the server on port {self.config.port} did not start")
            await asyncio.sleep(0.02)
        self._tasks.append(task)

    async def shutdown(self) -> None:
        """Stop watching and serving; pods keep running (as upstream: a kubelet restart is not a pod restart)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for informer in (self.pod_informer, self.node_informer):
            if informer is not None:
                informer.stop()
        await self.workers.stop()
        await self.probes.close()
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        await self.cache.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.recorder.flush(), 2)
        host.unregister_kubelet(self.config.node_name)
        with contextlib.suppress(Exception):
            await self._remove_host_rules_if_last()
        await self.docker.close()
        await self.client.close()

    async def _remove_host_rules_if_last(self) -> None:
        """Take the shared forwarding rules away when no other kubelet runs here and no pod is left."""
        fd = await asyncio.to_thread(host.acquire_host_lock, False, 10.0)
        try:
            if host.other_kubelets_alive(self.config.node_name):
                return
            left = await self.docker.list_containers({"label": ["io.minik8s.managed=true", "io.minik8s.node"]},
                                                     all=False)
            if left:
                return
            await asyncio.to_thread(host.remove_cluster_rules)
            await asyncio.to_thread(host.remove_portmap_chains_if_unused)
        finally:
            host.release_host_lock(fd)

    # -- the node ---------------------------------------------------------------------------------

    def _set_pod_cidr(self, cidr: str) -> None:
        if self.network.configure(cidr):
            self.node_status.facts.pod_cidr = cidr
            self.node_status.set_network_ready(True)
            self.workers.wake_all()

    def _node_changed(self, node: Node) -> None:
        if node.spec and node.spec.pod_cidr:
            current = self.network.pod_cidr
            if current and current != node.spec.pod_cidr:
                log.warning("node %s: spec.podCIDR %s differs from %s in use; new pods get %s", node.metadata.name,
                            node.spec.pod_cidr, current, node.spec.pod_cidr)
            self._set_pod_cidr(node.spec.pod_cidr)
        if node.metadata.uid:
            self.node_status.node_uid = node.metadata.uid

    # -- housekeeping -----------------------------------------------------------------------------

    async def _housekeeping_loop(self) -> None:
        loop = asyncio.get_running_loop()
        last_resync = loop.time()
        while True:
            if loop.time() - last_resync >= RESYNC_SECONDS:
                self.workers.wake_all()  # level-triggered safety net, like upstream's periodic pod sync
                last_resync = loop.time()
            try:
                await self.housekeeping()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("housekeeping")
            await asyncio.sleep(self.config.housekeeping_interval)

    async def housekeeping(self) -> None:
        """Remove what belongs to pods the API no longer has; release leaked network state."""
        assert self.pod_informer is not None
        known = {p.metadata.uid for p in self.pod_informer.list()} | set(self.workers.workers)
        for uid in self.cache.pod_uids() - known:
            await self._remove_orphan(uid)
        live_sandboxes = {c.id for c in self.cache.containers.values() if c.is_sandbox}
        await self.network.gc(live_sandboxes)
        for uid in set(await asyncio.to_thread(self.volumes.known_pod_uids)) - known - self.cache.pod_uids():
            await asyncio.to_thread(self.volumes.teardown, uid)
        if self.network.ready:
            fd = await asyncio.to_thread(host.acquire_host_lock, True)
            try:
                await self.network.ensure_rules()
            finally:
                host.release_host_lock(fd)
        self.crash_backoff.gc()
        self.image_backoff.gc()

    async def _remove_orphan(self, uid: str) -> None:
        containers = self.cache.for_pod(uid)
        if not containers:
            return
        log.info("removing containers of pod %s/%s (uid %s), which no longer exists", containers[0].pod_namespace,
                 containers[0].pod_name, uid)
        running = [c for c in containers if not c.is_sandbox and c.running]
        await asyncio.gather(*(self.runtime.stop(c.id, 2) for c in running), return_exceptions=True)
        for sb in [c for c in containers if c.is_sandbox]:
            with contextlib.suppress(Exception):
                await self.network.teardown(sb.id, sb.pid if sb.running else 0)
        for c in containers:
            await self.runtime.remove(c.id)
        await asyncio.to_thread(self.volumes.teardown, uid)


class _EmbeddedServer(uvicorn.Server):
    """uvicorn inside the kubelet's loop: the kubelet handles signals itself."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[no-untyped-def,override]
        yield


async def run_kubelet(config: KubeletConfig, kubelet_class: type[Kubelet] = Kubelet) -> None:
    """Run until SIGTERM/SIGINT. `kubelet_class`: bench/hollow_node.py's hollow kubelet, as kubemark's."""
    kubelet = kubelet_class(config)
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await kubelet.run()
