"""The kubelet: one per node, everything wired together (upstream pkg/kubelet/kubelet.go).

    apiserver ──pods (fieldSelector spec.nodeName=NODE)──▶ informer ──▶ PodWorkers (one task per pod)
    CRI runtime ──relist + container events──▶ PLEG ─────────────────────────▶    │ PodSyncer
    probes ──verdicts───────────────────────────────────────────────────────▶    ▼
                 runtime (kuberuntime over CRI), volumes ◀── sync / terminate ──▶ pods/{name}/status

The container runtime is whatever answers CRI at --container-runtime-endpoint (the Docker shim,
containerd): it runs sandboxes and containers and sets up the pod network; the kubelet hands it
the node's podCIDR (UpdateRuntimeConfig) and reads pod IPs from sandbox statuses. The node is
Ready only while the runtime's Status says RuntimeReady and NetworkReady.

Besides the workers: node registration with Lease and status heartbeats (`NodeStatusManager`),
the HTTP server for logs and exec, and housekeeping — containers and sandboxes of pods that no
longer exist are stopped and removed with their volumes.
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

from kubelet.cm.container_manager import ContainerManager
from kubelet.cri.remote_image import RemoteImageService
from kubelet.cri.remote_runtime import DEFAULT_TIMEOUT, RemoteRuntimeService
from kubelet.kuberuntime.manager import KubeGenericRuntimeManager
from kubelet.network.dns import Configurer as DNSConfigurer
from kubelet.node_status import NodeFacts, NodeStatusManager
from kubelet.object_watcher import ObjectWatcher
from kubelet.pleg.generic import GenericPLEG
from kubelet.pod_syncer import KubeletPodSyncer, KubeletRuntimeHelper
from kubelet.pod_workers import PodWorkers
from kubelet.probes import ProbeManager, ProbeTarget
from kubelet.server import KubeletServer
from kubelet.server_auth import SubjectAccessReviewer
from kubelet.service_env import service_env
from kubelet.stats.cri_stats_provider import CRIStatsProvider
from kubelet.stats.summary import SummaryProvider
from kubelet.status_manager import StatusManager
from kubelet.volumes import VolumeManager
from machinery.api.core_v1 import Node, Pod, Service
from machinery.client import KUBE_VERSION, ApiClient
from machinery.cri.errors import CriError
from machinery.events import EventRecorder
from machinery.flowcontrol import Backoff
from machinery.informer import Informer
from machinery.kubeconfig import ClientConfig, load_kubeconfig
from machinery.netutil import default_node_ip
from machinery.uvicorn_server import QuietServer

log = logging.getLogger(__name__)

RESYNC_SECONDS = 60.0
RUNTIME_STATUS_PERIOD = 5.0


def user_agent(node_name: str) -> str:
    return f"kubelet/{KUBE_VERSION} (linux/amd64) minik8s/system:node:{node_name}"


def default_runtime_endpoint(node_name: str) -> str:
    """The Docker shim's socket for this node (python -m dockershim), as cri-dockerd runs beside each kubelet."""
    return f"unix:///run/minik8s/{node_name}/dockershim.sock"


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
    container_runtime_endpoint: str = ""  # default_runtime_endpoint(node_name)
    image_service_endpoint: str = ""  # the runtime endpoint unless given
    runtime_request_timeout: float = DEFAULT_TIMEOUT
    node_labels: dict[str, str] = field(default_factory=dict)
    lease_duration: int = 40
    node_status_update_frequency: float = 10.0
    node_status_report_frequency: float = 300.0  # upstream's 5m
    cluster_dns: list[str] = field(default_factory=list)  # KubeletConfiguration clusterDNS
    cluster_domain: str = "cluster.local"  # clusterDomain
    resolv_conf: str = "/etc/resolv.conf"  # resolvConf: the host's, for dnsPolicy Default ("" = none)
    housekeeping_interval: float = 10.0
    relist_period: float = 1.0  # upstream's PLEG relist period
    tls_cert_file: str | None = None  # serve HTTPS (kubelet/server.py)
    tls_private_key_file: str | None = None
    client_ca_file: str | None = None  # ... and require client certificates from this CA
    cgroups_per_qos: bool = True  # the QoS cgroup hierarchy (kubelet/cm) and a cgroup per pod
    cgroup_root: str = "/"  # where kubepods goes
    cgroup_driver: str = "cgroupfs"

    def __post_init__(self) -> None:
        if not self.node_ip:
            self.node_ip = default_node_ip()
        if not self.container_runtime_endpoint:
            self.container_runtime_endpoint = default_runtime_endpoint(self.node_name)
        if not self.image_service_endpoint:
            self.image_service_endpoint = self.container_runtime_endpoint


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
        self.recorder = EventRecorder(self.client, "kubelet", host=config.node_name)
        self.volumes = VolumeManager(config.root_dir)
        self.node_status = NodeStatusManager(
            self.client, NodeFacts(config.node_name, config.node_ip, config.port, config.pod_cidr,
                                   labels=dict(config.node_labels)),
            lease_duration=config.lease_duration, update_frequency=config.node_status_update_frequency,
            report_frequency=config.node_status_report_frequency)
        self.runtime_service, self.image_service = self.connect_runtime()
        self.helper = KubeletRuntimeHelper(self.volumes, config.node_name, config.node_ip,
                                           lambda: (self.node_status.cpu_millis, self.node_status.memory_bytes))
        # the QoS cgroups (set up in start; None when off or when this host's cgroups cannot be written)
        self.container_manager: ContainerManager | None = None
        # upstream's kubelet makes the PLEG over the runtime and hands it to the runtime manager too
        self.dns = DNSConfigurer(self.recorder.event, config.node_name, [config.node_ip],
                                 cluster_dns=config.cluster_dns, cluster_domain=config.cluster_domain,
                                 resolver_config=config.resolv_conf)
        self.pleg = GenericPLEG(self.runtime_service, "cri", config.relist_period)
        self.runtime = KubeGenericRuntimeManager(
            self.runtime_service, self.image_service, self.helper, self._event, self.pleg,
            logs_root=str(config.root_dir / "logs"),
            crash_backoff=Backoff(config.crashloop_backoff_base, config.crashloop_backoff_max),
            image_backoff=Backoff(config.image_backoff_base, config.image_backoff_max),
            dns_config=self.dns.get_pod_dns)
        self.status_manager = StatusManager(self.client, resync=self._wake)
        self.probes = ProbeManager(self.runtime.run_in_container, self._probe_target, self._wake, self._probe_kill,
                                   self._event)
        self.syncer = KubeletPodSyncer(self.runtime, self.status_manager, self.volumes, self.helper, self.probes,
                                       self.client, self._event, config.node_ip,
                                       lambda: self.node_status.network_ready)
        self.workers = PodWorkers(self.syncer, self.status_manager.is_own_status_write)
        # the ConfigMaps and Secrets of the pods, each watched; a change wakes the pods using it
        self.syncer.objects.watcher = ObjectWatcher(self.client, self._wake)
        self.volumes.allocatable = lambda: (self.node_status.cpu_millis, self.node_status.memory_bytes)
        self.summary = SummaryProvider(config.node_name, CRIStatsProvider(self.runtime_service), self._pod_start)
        self.reviewer: SubjectAccessReviewer | None = SubjectAccessReviewer(self.client, config.node_name)
        self.server = KubeletServer(self)
        self.pod_informer: Informer[Pod] | None = None
        self.service_informer: Informer[Service] | None = None  # the Services as env vars (service_env.py)
        self.node_informer: Informer[Node] | None = None
        self.pod_cidr: str | None = None
        self._uvicorn: uvicorn.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()  # one-off work started by informer handlers
        self.ready = asyncio.Event()

    def _pod_start(self, namespace: str, name: str) -> str | None:
        pod = self.pod_informer.get(name, namespace) if self.pod_informer else None
        return pod.status.start_time if pod is not None and pod.status is not None else None

    def connect_runtime(self) -> tuple[RemoteRuntimeService, RemoteImageService]:
        """The CRI clients (bench/hollow_node.py's hollow kubelet hands the fake runtime in instead)."""
        timeout = self.config.runtime_request_timeout
        return (RemoteRuntimeService.connect(self.config.container_runtime_endpoint, timeout),
                RemoteImageService.connect(self.config.image_service_endpoint, timeout))

    def _event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        self.recorder.event(pod, type_, reason, message)

    def _wake(self, uid: str) -> None:
        self.workers.wake(uid)

    def _probe_kill(self, uid: str, name: str, container_id: str, reason: str) -> None:
        self.runtime.request_kill(uid, name, container_id, reason)
        self.workers.wake(uid)

    def _probe_target(self, uid: str, name: str) -> ProbeTarget | None:
        status = self.runtime.get_pod_status(uid)
        instances = status.instances(name)
        if not instances or not instances[0].running:
            return None
        worker = self.workers.get(uid)
        host_network = worker is not None and worker.pod.spec is not None and bool(worker.pod.spec.host_network)
        pod_ip = self.config.node_ip if host_network else status.ip
        if not pod_ip:
            return None
        cur = instances[0]
        return ProbeTarget(cur.id, cur.started_at or 0.0, pod_ip)

    # -- life cycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self.start()
            await asyncio.gather(*self._tasks)
        finally:
            await self.shutdown()

    async def start(self) -> None:
        config = self.config
        try:
            self.node_status.facts.runtime_version = await self.runtime.version()
        except CriError as e:
            raise SystemExit(f"kubelet: cannot reach the container runtime at {config.container_runtime_endpoint}: "
                             f"{e.message}") from e
        await self.start_container_manager()
        await self.pleg.start()
        self.pleg.add_listener(self._wake)
        if config.pod_cidr:
            await self._set_pod_cidr(config.pod_cidr)
        await self.check_runtime_status()

        node = await self.node_status.register()
        if node.spec and node.spec.pod_cidr:
            await self._set_pod_cidr(node.spec.pod_cidr)

        self.node_informer = Informer(self.client, Node, field_selector={"metadata.name": config.node_name})
        self.node_informer.add_event_handler(on_add=self._node_changed,
                                             on_update=lambda _old, new: self._node_changed(new))
        self.pod_informer = Informer(self.client, Pod, field_selector={"spec.nodeName": config.node_name})
        self.pod_informer.add_event_handler(on_add=self.workers.update,
                                            on_update=lambda _old, new: self.workers.update(new),
                                            on_delete=self.workers.remove)
        self.service_informer = Informer(self.client, Service)
        services = self.service_informer
        self.helper.service_env = lambda ns, links: service_env(services.list(), ns, links)
        self.node_informer.start()
        self.service_informer.start()
        self.pod_informer.start()

        await self._start_server()
        self._tasks.append(asyncio.create_task(self.node_status.run(), name="node-status"))
        self._tasks.append(asyncio.create_task(self._runtime_status_loop(), name="runtime-status"))
        await self.pod_informer.wait_for_sync()
        # upstream refuses to start containers before the services were read once; a kubelet that cannot
        # read them (yet) starts its pods without their variables rather than not at all
        await self.service_informer.wait_for_sync(10.0)
        self._tasks.append(asyncio.create_task(self._housekeeping_loop(), name="housekeeping"))
        self._tasks.append(asyncio.create_task(self._stats_loop(), name="stats"))
        self.ready.set()
        log.info("kubelet %s ready (runtime %s at %s, node IP %s, port %d, root %s)", config.node_name,
                 self.node_status.facts.runtime_version, config.container_runtime_endpoint, config.node_ip,
                 config.port, config.root_dir)

    async def _start_server(self) -> None:
        config = uvicorn.Config(self.server.app, host=self.config.address or self.config.node_ip, port=self.config.port,
                                log_level="warning", access_log=False, lifespan="off", proxy_headers=False,
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
        for informer in (self.pod_informer, self.node_informer, self.service_informer):
            if informer is not None:
                informer.stop()
        await self.workers.stop()
        if self.syncer.objects.watcher is not None:
            await self.syncer.objects.watcher.stop()
        await self.probes.close()
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        await self.pleg.stop()
        await self.runtime.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.recorder.flush(), 2)
        await self.runtime_service.close()
        await self.image_service.close()
        await self.client.close()

    # -- the node and the runtime ---------------------------------------------------------------

    def _active_pods(self) -> list[Pod]:
        """The node's pods that still run (upstream GetActivePods): the burstable tier's shares are theirs."""
        pods = self.pod_informer.list() if self.pod_informer is not None else []
        return [p for p in pods if not (p.status and p.status.phase in ("Succeeded", "Failed"))]

    async def start_container_manager(self) -> None:
        """--cgroups-per-qos: make kubepods and its tiers (upstream's container manager Start). A host whose
        cgroups this kubelet cannot write keeps today's behaviour: the runtime's default parent."""
        config = self.config
        if not config.cgroups_per_qos:
            return
        manager = ContainerManager(config.cgroup_root, active_pods=self._active_pods)
        try:
            await asyncio.to_thread(manager.start, self.node_status.cpu_millis, self.node_status.memory_bytes)
        except OSError as e:
            log.warning("cgroups-per-qos: cannot make the QoS cgroups under %s (%s); pods run in the container "
                        "runtime's default cgroup", manager.kubepods, e)
            return
        self.container_manager = self.helper.container_manager = manager
        self.summary.provider.container_manager = manager  # the stats read the pods' cgroups (cAdvisor's source)
        log.info("QoS cgroups under %s (cgroup v%d, %s driver)", manager.kubepods, manager.cgroups.version,
                 config.cgroup_driver)

    async def _set_pod_cidr(self, cidr: str) -> None:
        """Hand the node's podCIDR to the runtime (upstream updatePodCIDR → UpdateRuntimeConfig)."""
        if cidr == self.pod_cidr:
            return
        try:
            await self.runtime.update_pod_cidr(cidr)
        except CriError as e:
            log.warning("UpdateRuntimeConfig with podCIDR %s: %s", cidr, e.message)
            return
        self.pod_cidr = cidr
        self.node_status.facts.pod_cidr = cidr
        await self.check_runtime_status()

    def _node_changed(self, node: Node) -> None:
        if node.spec and node.spec.pod_cidr and node.spec.pod_cidr != self.pod_cidr:
            if self.pod_cidr:
                log.warning("node %s: spec.podCIDR %s differs from %s in use; new pods get %s", node.metadata.name,
                            node.spec.pod_cidr, self.pod_cidr, node.spec.pod_cidr)
            task = asyncio.create_task(self._set_pod_cidr(node.spec.pod_cidr))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        if node.metadata.uid:
            self.node_status.node_uid = node.metadata.uid

    async def check_runtime_status(self) -> None:
        """The runtime's Status as the node's Ready condition (upstream updateRuntimeUp)."""
        try:
            message = (await self.runtime.status()).not_ready_message()
        except CriError as e:
            message = f"container runtime is down: {e.message}"
        was_ready = self.node_status.network_ready
        self.node_status.set_runtime_not_ready(message)
        if message and was_ready:
            log.warning("node not ready: %s", message)
        if not message and not was_ready:
            self.workers.wake_all()

    async def _runtime_status_loop(self) -> None:
        while True:
            await asyncio.sleep(RUNTIME_STATUS_PERIOD)
            await self.check_runtime_status()

    # -- stats ------------------------------------------------------------------------------------

    async def _stats_loop(self) -> None:
        """Refresh the CPU rates of /stats/summary every housekeeping interval (upstream: the eviction
        manager's 10 s monitoring updates the CRI stats provider's cache; readers never do)."""
        while True:
            try:
                await self.summary.get(update=True)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the runtime away: the next round
                log.debug("stats refresh: %s", e)
            await asyncio.sleep(self.config.housekeeping_interval)

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
        """Remove what belongs to pods the API no longer has (upstream HandlePodCleanups)."""
        assert self.pod_informer is not None
        known = {p.metadata.uid for p in self.pod_informer.list()} | set(self.workers.workers)
        for uid in self.runtime.pod_uids() - known:
            status = self.runtime.get_pod_status(uid)
            log.info("removing containers of pod %s/%s (uid %s), which no longer exists", status.namespace,
                     status.name, uid)
            await self.runtime.kill_pod(None, uid, 2)
            await self.runtime.remove_pod(uid)
            await asyncio.to_thread(self.volumes.teardown, uid)
        for uid in set(await asyncio.to_thread(self.volumes.known_pod_uids)) - known - self.runtime.pod_uids():
            await asyncio.to_thread(self.volumes.teardown, uid)
        if self.container_manager is not None:
            await self._cleanup_orphaned_pod_cgroups(known)
        self.runtime.crash_backoff.gc()
        self.runtime.image_backoff.gc()

    async def _cleanup_orphaned_pod_cgroups(self, known: set[str | None]) -> None:
        """upstream cleanupOrphanedPodCgroups: the cgroups of pods that are gone and have no containers left
        (also a previous run's leftovers, at the first housekeeping); then the QoS tiers' shares."""
        manager = self.container_manager
        assert manager is not None
        orphans = set(await asyncio.to_thread(manager.pod_cgroups)) - known - self.runtime.pod_uids()
        for uid in orphans:
            try:
                await asyncio.to_thread(manager.destroy_pod, uid)
            except OSError as e:  # a process still in it: the next round
                log.info("pod cgroup of %s, which no longer exists, not removed yet: %s", uid, e)
            else:
                log.info("removed the cgroup of pod %s, which no longer exists", uid)
        # the burstable tier follows its pods (upstream also updates it periodically): after a restart, whose
        # pods' cgroups are all there, nothing else would
        await asyncio.to_thread(manager.update_qos_cgroups)


class _EmbeddedServer(QuietServer):
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
