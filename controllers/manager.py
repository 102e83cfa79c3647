"""The controller-manager process (kube-controller-manager): many controllers, one process.

All controllers share one SharedInformerFactory, so a Pod is listed and watched once however many
controllers look at Pods. Each controller writes through its own ApiClient whose User-Agent names
its service account, as upstream's --use-service-account-credentials does:
`kube-controller-manager/v1.30.0 (linux/amd64) minik8s/system:serviceaccount:kube-system:deployment-controller`.
Over HTTPS that client also authenticates as the account: the manager (system:kube-controller-manager,
its kubeconfig) ensures kube-system/<account> exists and gets tokens for it through TokenRequest,
refreshed before they expire (controllers/clientbuilder.py).

Adding a controller is one entry in CONTROLLERS: its `--controllers` name, the service account it
writes as, and a factory that builds it from the ControllerContext (shared informers, a client
under its identity, the parsed flags). Factories import their module lazily, so a controller that
is disabled costs nothing, not even an import.

Leader election (--leader-elect, on by default, as upstream): replicas campaign for the Lease
kube-system/kube-controller-manager through machinery.leaderelection, writing it as the kubeconfig's
identity (system:kube-controller-manager) over a connection of its own. As upstream's, a standby
builds nothing and starts no informer until it holds the Lease; a leader that loses it exits at once
with status 1 ("leaderelection lost"); a stopped one releases it so a standby takes over at once.

The secure port (--secure-port 10257, 0 for none) serves /healthz and, to whom the apiserver allows, /metrics
(machinery/delegated_auth.py), on a standby too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import platform
import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from controllers.clientbuilder import DynamicClientBuilder
from machinery import delegated_auth, leaderelection, logs, memtrim, tracing
from machinery.client import KUBE_VERSION, ApiClient
from machinery.informer import SharedInformerFactory, strip_managed_fields
from machinery.kubeconfig import ClientConfig, KubeconfigError, load_kubeconfig
from machinery.leaderelection import parse_bool as _bool
from machinery.leaderelection import parse_duration

log = logging.getLogger("controllers.manager")
SECURE_PORT = 10257  # upstream's kube-controller-manager port

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:kube-system:"


class RunnableController(Protocol):
    name: str

    async def run(self) -> None: ...


def _platform() -> str:
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower())
    return f"{platform.system().lower()}/{arch}"


def user_agent(identity: str) -> str:
    """`kube-controller-manager/v1.30.0 (linux/amd64) minik8s/<identity>`."""
    return f"kube-controller-manager/{KUBE_VERSION} ({_platform()}) minik8s/{identity}"


@dataclass
class ControllerContext:
    """What a controller factory gets: the shared informers, the flags, and clients by identity."""

    config: ClientConfig
    informers: SharedInformerFactory
    options: argparse.Namespace
    clients: dict[str, ApiClient] = field(default_factory=dict)
    # tokens per controller service account through TokenRequest; None: the controllers use the
    # kubeconfig's credentials, only their User-Agents differ
    credentials: DynamicClientBuilder | None = None

    def client_for(self, service_account: str) -> ApiClient:
        """An ApiClient writing as system:serviceaccount:kube-system:<service_account> (one per account)."""
        client = self.clients.get(service_account)
        if client is None:
            agent = user_agent(SERVICE_ACCOUNT_PREFIX + service_account)
            if self.credentials is not None:
                client = self.credentials.client(service_account, agent)
            else:
                client = ApiClient(self.config, user_agent=agent)
            self.clients[service_account] = client
        return client

    async def close(self) -> None:
        for client in self.clients.values():
            with contextlib.suppress(Exception):
                await client.close()


@dataclass(frozen=True)
class ControllerSpec:
    service_account: str
    factory: Callable[[ControllerContext, str], RunnableController]  # (context, service account)
    enabled_by_default: bool = True
    aliases: tuple[str, ...] = ()


# -- the controllers ------------------------------------------------------------------------------


def _deployment(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.deployment import DeploymentController

    return DeploymentController(ctx.client_for(account), ctx.informers, workers=ctx.options.concurrent_deployment_syncs)


def _replicaset(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.replicaset import ReplicaSetController

    return ReplicaSetController(ctx.client_for(account), ctx.informers,
                                workers=ctx.options.concurrent_replicaset_syncs)


def _daemonset(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.daemon import DaemonSetsController

    return DaemonSetsController(ctx.client_for(account), ctx.informers, workers=ctx.options.concurrent_daemonset_syncs)


def _statefulset(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.statefulset import StatefulSetController

    return StatefulSetController(ctx.client_for(account), ctx.informers,
                                 workers=ctx.options.concurrent_statefulset_syncs)


def _garbagecollector(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.garbage_collector import GarbageCollector

    return GarbageCollector(ctx.client_for(account), ctx.informers, workers=ctx.options.concurrent_gc_syncs)


def _namespace(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.namespace import NamespaceController

    return NamespaceController(ctx.client_for(account), ctx.informers,
                               workers=ctx.options.concurrent_namespace_syncs)


def _nodeipam(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.node_ipam import NodeIpamController

    kwargs: dict[str, Any] = {"cluster_cidr": ctx.options.cluster_cidr}
    if ctx.options.node_cidr_mask_size is not None:
        kwargs["node_cidr_mask_size"] = ctx.options.node_cidr_mask_size
    return NodeIpamController(ctx.client_for(account), ctx.informers, **kwargs)


def _nodelifecycle(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.node_lifecycle import NodeLifecycleController

    opts = ctx.options
    return NodeLifecycleController(ctx.client_for(account), ctx.informers,
                                   node_monitor_grace_period=opts.node_monitor_grace_period,
                                   node_startup_grace_period=opts.node_startup_grace_period,
                                   pod_eviction_timeout=opts.pod_eviction_timeout,
                                   node_monitor_period=opts.node_monitor_period)


def _serviceaccount(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.serviceaccount import ServiceAccountsController

    return ServiceAccountsController(ctx.client_for(account), ctx.informers,
                                     workers=ctx.options.concurrent_serviceaccount_syncs)


def _endpointslice(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.endpointslice import EndpointSliceController

    return EndpointSliceController(ctx.client_for(account), ctx.informers,
                                   workers=ctx.options.concurrent_service_endpoint_syncs,
                                   max_endpoints_per_slice=ctx.options.max_endpoints_per_slice)


def _endpoint(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.endpoint import EndpointsController

    return EndpointsController(ctx.client_for(account), ctx.informers, workers=ctx.options.concurrent_endpoint_syncs)


def _endpointslicemirroring(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.endpointslicemirroring import EndpointSliceMirroringController

    return EndpointSliceMirroringController(
        ctx.client_for(account), ctx.informers, workers=ctx.options.mirroring_concurrent_service_endpoint_syncs,
        max_endpoints_per_subset=ctx.options.mirroring_max_endpoints_per_subset)


def _servicelb(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.servicelb import ServiceLoadBalancerController

    return ServiceLoadBalancerController(ctx.client_for(account), ctx.informers)


def _persistentvolume_binder(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.volume.persistentvolume import PersistentVolumeController

    return PersistentVolumeController(ctx.client_for(account), ctx.informers,
                                      sync_period=ctx.options.pvclaimbinder_sync_period)


def _pvc_protection(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.volume.pvcprotection import PVCProtectionController

    return PVCProtectionController(ctx.client_for(account), ctx.informers)


def _pv_protection(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.volume.pvprotection import PVProtectionController

    return PVProtectionController(ctx.client_for(account), ctx.informers)


def _job(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.job import JobController

    return JobController(ctx.client_for(account), ctx.informers, workers=ctx.options.concurrent_job_syncs,
                         backoff_base=ctx.options.job_pod_failure_backoff)


def _cronjob(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.cronjob import CronJobController

    return CronJobController(ctx.client_for(account), ctx.informers, workers=ctx.options.concurrent_cron_job_syncs)


def _ttl_after_finished(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.ttlafterfinished import TTLAfterFinishedController

    return TTLAfterFinishedController(ctx.client_for(account), ctx.informers,
                                      workers=ctx.options.concurrent_ttl_after_finished_syncs)


def _disruption(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.disruption import DisruptionController

    return DisruptionController(ctx.client_for(account), ctx.informers)


def _podgc(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.podgc import PodGCController

    opts = ctx.options
    return PodGCController(ctx.client_for(account), ctx.informers,
                           terminated_pod_gc_threshold=opts.terminated_pod_gc_threshold,
                           period=opts.podgc_period, quarantine=opts.podgc_quarantine)


def _root_ca_cert_publisher(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.rootcacertpublisher import RootCACertPublisher

    return RootCACertPublisher(ctx.client_for(account), ctx.informers, root_ca_bundle(ctx.options, ctx.config))


def root_ca_bundle(options: argparse.Namespace, config: ClientConfig) -> str:
    """upstream startRootCACertPublisher: --root-ca-file, else the CA the manager's kubeconfig trusts ("" for a
    plain-HTTP apiserver)."""
    path = getattr(options, "root_ca_file", None) or config.ca_file
    if not path:
        return ""
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"error parsing root-ca-file at {path}: {e}") from e


def _horizontalpodautoscaling(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.podautoscaler.horizontal import HorizontalController

    o = ctx.options
    return HorizontalController(ctx.client_for(account), ctx.informers,
                                workers=o.concurrent_horizontal_pod_autoscaler_syncs,
                                sync_period=o.horizontal_pod_autoscaler_sync_period,
                                downscale_stabilization=o.horizontal_pod_autoscaler_downscale_stabilization,
                                tolerance=o.horizontal_pod_autoscaler_tolerance,
                                cpu_initialization_period=o.horizontal_pod_autoscaler_cpu_initialization_period,
                                initial_readiness_delay=o.horizontal_pod_autoscaler_initial_readiness_delay)


def _resourcequota(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.resourcequota import ResourceQuotaController

    return ResourceQuotaController(ctx.client_for(account), ctx.informers,
                                   workers=ctx.options.concurrent_resource_quota_syncs,
                                   sync_period=ctx.options.resource_quota_sync_period)


def _replicationcontroller(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.replication import ReplicationManager

    return ReplicationManager(ctx.client_for(account), ctx.informers, workers=ctx.options.concurrent_rc_syncs)


def _clusterrole_aggregation(ctx: ControllerContext, account: str) -> RunnableController:
    from controllers.clusterroleaggregation import ClusterRoleAggregationController

    return ClusterRoleAggregationController(ctx.client_for(account), ctx.informers)


# `--controllers` name -> spec. Upstream 1.30 accepts both the short names and the
# `<name>-controller` forms, so those are aliases here.
CONTROLLERS: dict[str, ControllerSpec] = {
    "deployment": ControllerSpec("deployment-controller", _deployment, aliases=("deployment-controller",)),
    "replicaset": ControllerSpec("replicaset-controller", _replicaset, aliases=("replicaset-controller",)),
    "daemonset": ControllerSpec("daemon-set-controller", _daemonset, aliases=("daemonset-controller",)),
    "garbagecollector": ControllerSpec("generic-garbage-collector", _garbagecollector,
                                       aliases=("garbage-collector-controller",)),
    "namespace": ControllerSpec("namespace-controller", _namespace, aliases=("namespace-controller",)),
    "nodeipam": ControllerSpec("node-controller", _nodeipam, aliases=("node-ipam-controller",)),
    "nodelifecycle": ControllerSpec("node-controller", _nodelifecycle, aliases=("node-lifecycle-controller",)),
    "serviceaccount": ControllerSpec("service-account-controller", _serviceaccount,
                                     aliases=("serviceaccount-controller",)),
    "endpoint": ControllerSpec("endpoint-controller", _endpoint, aliases=("endpoints-controller",)),
    "endpointslice": ControllerSpec("endpointslice-controller", _endpointslice,
                                    aliases=("endpointslice-controller",)),
    "endpointslicemirroring": ControllerSpec("endpointslicemirroring-controller", _endpointslicemirroring,
                                             aliases=("endpointslice-mirroring-controller",)),
    # k3s's ServiceLB (`--disable=servicelb` there); upstream's "service" controller is the cloud
    # provider's, in cloud-controller-manager. It writes as that controller's account, service-controller.
    "servicelb": ControllerSpec("service-controller", _servicelb, aliases=("service-lb-controller",)),
    "persistentvolume-binder": ControllerSpec("persistent-volume-binder", _persistentvolume_binder,
                                              aliases=("persistentvolume-binder-controller",)),
    "pvc-protection": ControllerSpec("pvc-protection-controller", _pvc_protection,
                                     aliases=("persistentvolumeclaim-protection-controller",)),
    "pv-protection": ControllerSpec("pv-protection-controller", _pv_protection,
                                    aliases=("persistentvolume-protection-controller",)),
    "job": ControllerSpec("job-controller", _job, aliases=("job-controller",)),
    "cronjob": ControllerSpec("cronjob-controller", _cronjob, aliases=("cronjob-controller",)),
    "ttl-after-finished": ControllerSpec("ttl-after-finished-controller", _ttl_after_finished,
                                         aliases=("ttl-after-finished-controller",)),
    "statefulset": ControllerSpec("statefulset-controller", _statefulset, aliases=("statefulset-controller",)),
    "disruption": ControllerSpec("disruption-controller", _disruption, aliases=("disruption-controller",)),
    "podgc": ControllerSpec("pod-garbage-collector", _podgc, aliases=("pod-garbage-collector-controller",)),
    "root-ca-cert-publisher": ControllerSpec("root-ca-cert-publisher", _root_ca_cert_publisher,
                                             aliases=("root-ca-certificate-publisher-controller",)),
    "horizontalpodautoscaling": ControllerSpec("horizontal-pod-autoscaler", _horizontalpodautoscaling,
                                               aliases=("horizontal-pod-autoscaler-controller",)),
    "resourcequota": ControllerSpec("resourcequota-controller", _resourcequota,
                                    aliases=("resourcequota-controller",)),
    "replicationcontroller": ControllerSpec("replication-controller", _replicationcontroller,
                                            aliases=("replicationcontroller-controller",)),
    "clusterrole-aggregation": ControllerSpec("clusterrole-aggregation-controller", _clusterrole_aggregation,
                                              aliases=("clusterrole-aggregation-controller",)),
}


def canonical_name(name: str, registry: dict[str, ControllerSpec] | None = None) -> str | None:
    """The registry key for a --controllers name or one of its aliases (None if unknown)."""
    registry = CONTROLLERS if registry is None else registry
    if name in registry:
        return name
    return next((key for key, spec in registry.items() if name in spec.aliases), None)


def enabled_controllers(selection: Iterable[str], registry: dict[str, ControllerSpec] | None = None) -> list[str]:
    """Upstream's --controllers: `*` is every controller on by default, `foo` turns foo on, `-foo`
    turns it off (an explicit name wins over `*`). Unknown names are an error."""
    registry = CONTROLLERS if registry is None else registry
    on: set[str] = set()
    off: set[str] = set()
    star = False
    for item in (s.strip() for s in selection):
        if not item:
            continue
        if item == "*":
            star = True
            continue
        negate = item.startswith("-")
        raw = item[1:] if negate else item
        name = canonical_name(raw, registry)
        if name is None:
            raise ValueError(f'"{raw}" is not in the list of known controllers')
        (off if negate else on).add(name)
    return [name for name, spec in registry.items()
            if name not in off and (name in on or (star and spec.enabled_by_default))]


# -- flags ----------------------------------------------------------------------------------------


def _endpoints_per_slice(value: str) -> int:
    """upstream validates 1..1000 (discovery's maxEndpoints)."""
    number = int(value)
    if not 1 <= number <= 1000:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1000, got {number}")
    return number


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="controllers", description="minik8s kube-controller-manager")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig with the apiserver's address and credentials")
    p.add_argument("--master", default=None, help="apiserver URL; overrides the kubeconfig's server")
    p.add_argument("--controllers", default="*",
                   help="comma-separated controllers to run: '*' all on by default, 'foo' on, '-foo' off "
                        f"(known: {', '.join(CONTROLLERS)})")
    p.add_argument("--concurrent-deployment-syncs", type=int, default=5)
    p.add_argument("--concurrent-replicaset-syncs", type=int, default=5)
    p.add_argument("--concurrent-daemonset-syncs", type=int, default=2)
    p.add_argument("--concurrent-statefulset-syncs", type=int, default=5)
    p.add_argument("--concurrent-gc-syncs", type=int, default=20)
    p.add_argument("--concurrent-job-syncs", type=int, default=5)
    p.add_argument("--concurrent-cron-job-syncs", type=int, default=5)
    p.add_argument("--concurrent-ttl-after-finished-syncs", type=int, default=5)
    p.add_argument("--concurrent-resource-quota-syncs", type=int, default=5)
    p.add_argument("--resource-quota-sync-period", type=parse_duration, default=300.0,
                   help="how often every quota's usage is recomputed (default 5m0s)")
    p.add_argument("--concurrent-rc-syncs", type=int, default=5)
    p.add_argument("--job-pod-failure-backoff", type=parse_duration, default=10.0,
                   help="minik8s: the first back-off before a failed Job pod is replaced, doubling up to 6m "
                        "(upstream's constant DefaultJobPodFailureBackOff, 10s; shorter for tests)")
    p.add_argument("--concurrent-namespace-syncs", type=int, default=10)
    p.add_argument("--concurrent-serviceaccount-syncs", type=int, default=1)
    p.add_argument("--concurrent-service-endpoint-syncs", type=int, default=5,
                   help="EndpointSlice syncs at once")
    p.add_argument("--concurrent-endpoint-syncs", type=int, default=5, help="Endpoints syncs at once")
    p.add_argument("--mirroring-concurrent-service-endpoint-syncs", type=int, default=5)
    p.add_argument("--max-endpoints-per-slice", type=_endpoints_per_slice, default=100,
                   help="the most endpoints an EndpointSlice holds (1-1000, default 100)")
    p.add_argument("--mirroring-max-endpoints-per-subset", type=_endpoints_per_slice, default=1000)
    p.add_argument("--node-monitor-grace-period", type=parse_duration, default=40.0,
                   help="how long a silent node stays Ready before it is marked Unknown (default 40s)")
    p.add_argument("--node-startup-grace-period", type=parse_duration, default=60.0)
    p.add_argument("--node-monitor-period", type=parse_duration, default=5.0)
    p.add_argument("--pvclaimbinder-sync-period", type=parse_duration, default=15.0,
                   help="how often the persistentvolume-binder looks again at a Pending claim (default 15s)")
    p.add_argument("--pod-eviction-timeout", type=parse_duration, default=300.0,
                   help="grace before pods of an unreachable node are deleted (default 5m0s)")
    p.add_argument("--terminated-pod-gc-threshold", type=int, default=12500,
                   help="terminated pods kept before the pod garbage collector deletes the oldest (0: never)")
    p.add_argument("--podgc-period", type=parse_duration, default=20.0,
                   help="minik8s: how often the pod garbage collector looks (upstream's constant gcCheckPeriod, 20s)")
    p.add_argument("--podgc-quarantine", type=parse_duration, default=40.0,
                   help="minik8s: how long a missing node's pods wait before they are deleted as orphans "
                        "(upstream's constant quarantineTime, 40s)")
    p.add_argument("--cluster-cidr", default="10.244.0.0/16")
    p.add_argument("--node-cidr-mask-size", type=int, default=None)
    p.add_argument("--allocate-node-cidrs", type=_bool, nargs="?", const=True, default=True)
    leaderelection.add_flags(p, "kube-controller-manager")
    p.add_argument("--service-account-private-key-file", default=None,
                   help="upstream signs legacy token Secrets with it; minik8s serves no Secrets, so it is "
                        "accepted and unused (controllers get their tokens through TokenRequest)")
    p.add_argument("--root-ca-file", default=None,
                   help="the CA bundle the root-ca-cert-publisher puts in every namespace's kube-root-ca.crt "
                        "(default: the kubeconfig's certificate authority)")
    p.add_argument("--use-service-account-credentials", type=_bool, nargs="?", const=True, default=True,
                   help="each controller authenticates as its own service account, with tokens from "
                        "TokenRequest (over HTTPS; the kubeconfig's identity must be allowed to ask for them)")
    p.add_argument("--concurrent-horizontal-pod-autoscaler-syncs", type=int, default=5)
    p.add_argument("--horizontal-pod-autoscaler-sync-period", type=parse_duration, default=15.0,
                   help="how often each HorizontalPodAutoscaler is looked at (default 15s)")
    p.add_argument("--horizontal-pod-autoscaler-downscale-stabilization", type=parse_duration, default=300.0,
                   help="the window of recommendations a scale-down without behavior takes the highest of (5m)")
    p.add_argument("--horizontal-pod-autoscaler-tolerance", type=float, default=0.1,
                   help="the usage ratio within which nothing is scaled (default %(default)s)")
    p.add_argument("--horizontal-pod-autoscaler-cpu-initialization-period", type=parse_duration, default=300.0)
    p.add_argument("--horizontal-pod-autoscaler-initial-readiness-delay", type=parse_duration, default=30.0)
    delegated_auth.add_serving_flags(p, SECURE_PORT)
    tracing.add_flag(p)
    logs.add_flags(p)
    args = p.parse_args(argv)
    try:
        args.enabled = enabled_controllers(args.controllers.split(","))
    except ValueError as e:
        p.error(str(e))
    if not args.allocate_node_cidrs and "nodeipam" in args.enabled:
        args.enabled.remove("nodeipam")
    leaderelection.check_flags(p, args)
    return args


def client_config(args: argparse.Namespace) -> ClientConfig:
    """The kubeconfig (when given or found) with --master overriding its server; --master alone works."""
    config: ClientConfig | None = None
    try:
        config = load_kubeconfig(args.kubeconfig)
    except KubeconfigError:
        if args.kubeconfig is not None or args.master is None:
            raise
    if config is None:
        return ClientConfig(server=args.master)
    if args.master:
        config = ClientConfig(server=args.master, ca_file=config.ca_file, cert_file=config.cert_file,
                              key_file=config.key_file, token=config.token, insecure=config.insecure)
    return config


# -- running --------------------------------------------------------------------------------------


def service_account_credentials(args: argparse.Namespace, config: ClientConfig) -> DynamicClientBuilder | None:
    """Token sources for the controllers' own service accounts, with --use-service-account-credentials
    and a secure connection (a plain-HTTP apiserver port authenticates no one)."""
    if not getattr(args, "use_service_account_credentials", True) or not config.server.startswith("https://"):
        return None
    root = ApiClient(config, user_agent=user_agent("service-account-credentials"))
    return DynamicClientBuilder(root, config)


async def run(args: argparse.Namespace, stop: asyncio.Event | None = None) -> int:
    """Run the controllers until `stop` (or SIGTERM/SIGINT); with --leader-elect, only while leading."""
    stop = stop or asyncio.Event()
    config = client_config(args)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    # the secure port first, on a standby too (upstream's healthz and metrics do not wait for the lease)
    serving_client = ApiClient(config, user_agent=user_agent("secure-serving"))
    server, _ = await delegated_auth.start_serving(args, serving_client)
    try:
        if not args.leader_elect:
            return await run_controllers(args, config, stop)
        code = 0

        async def lead() -> None:
            nonlocal code
            code = await run_controllers(args, config, stop)

        # its own connection, so renewals never queue behind the controllers' writes (upstream's
        # "leader-election" client), under the kubeconfig's identity, not a controller's service account
        client = ApiClient(config, user_agent=user_agent("leader-election"))
        await leaderelection.run_leader_elected(client, args, "kube-controller-manager", lead, stop)
        return code
    finally:
        if server is not None:
            await server.stop()
        await serving_client.close()


async def run_controllers(args: argparse.Namespace, config: ClientConfig, stop: asyncio.Event) -> int:
    """Build the enabled controllers, start the informers, run until `stop`; 1 if a controller died."""
    informer_client = ApiClient(config, user_agent=user_agent("shared-informers"))
    # as upstream's kube-controller-manager: no controller reads managedFields, so no cache keeps them
    factory = SharedInformerFactory(informer_client, transform=strip_managed_fields)
    credentials = service_account_credentials(args, config)
    ctx = ControllerContext(config, factory, args, credentials=credentials)
    controllers: list[tuple[str, RunnableController]] = []
    for name in args.enabled:
        spec = CONTROLLERS[name]
        controllers.append((name, spec.factory(ctx, spec.service_account)))
        log.info("started %s as %s%s", name, SERVICE_ACCOUNT_PREFIX, spec.service_account)
    if credentials is not None:
        await credentials.prefetch()
    factory.start()
    # Task[object]: the controllers' tasks (None) and the stopper (True) are waited on as one set
    tasks: dict[asyncio.Task[object], str] = {
        asyncio.create_task(c.run(), name=f"controller:{name}"): name for name, c in controllers}
    stopper: asyncio.Task[object] = asyncio.create_task(stop.wait())
    trimmer = asyncio.create_task(memtrim.run())  # freed cache versions back to the system (issue 19)
    code = 0
    try:
        done, _ = await asyncio.wait({*tasks, stopper}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is stopper:
                continue
            exc = task.exception()
            log.error("controller %s stopped: %s", tasks[task], exc or "returned")
            code = 1
    finally:
        stopper.cancel()
        trimmer.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(stopper, trimmer, *tasks, return_exceptions=True)
        for _, c in controllers:
            recorder = getattr(c, "recorder", None)
            if recorder is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(recorder.flush(), 2.0)
        await factory.shutdown()
        await ctx.close()
        await informer_client.close()
        if credentials is not None:
            await credentials.root.close()
    return code


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.setup(args.v)
    tracing.setup_or_exit(args.tracing_config_file, "kube-controller-manager")
    try:
        return asyncio.run(run(args))
    except (KubeconfigError, OSError, ValueError) as e:
        log.error("%s", e)
        return 2
