"""The apiserver application: one Store per resource on one etcd connection, one router per
group-version, discovery, OpenAPI, health, and errors rendered as Status objects; in front of it
all the gate (authentication, audit, authorization: apiserver.auth.gate), and behind the
routes the admission chain each Store calls (apiserver.admission)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from apiserver import discovery, discovery_aggregated, errors, openapi
from apiserver.admission.chain import ALL_PLUGINS, AdmissionChain, WebhookSource
from apiserver.admission.podsecurity.admission import PodSecurity
from apiserver.admission.podsecurity.config import load_admission_config
from apiserver.admission.priority import PriorityClasses
from apiserver.admission.resourcequota import Quotas
from apiserver.apiextensions.registry import CustomResourceRegistry
from apiserver.apiextensions.strategy import CustomResourceDefinitionStrategy
from apiserver.audit import Auditor, LogWriter, Policy
from apiserver.auth import bootstrap
from apiserver.auth.authn import Authenticator, load_token_file
from apiserver.auth.authz import AlwaysAllow, Authorizer, Decider, NodeAuthorizer, RBACAuthorizer
from apiserver.auth.gate import Gate, Limits
from apiserver.auth.serviceaccount import DEFAULT_ISSUER, TokenVerifier, load_public_keys, load_signing_key
from apiserver.controlplane import KubernetesService, advertised_port
from apiserver.endpoints import aggregator
from apiserver.endpoints.autoscaling_v1 import AutoscalingV1, with_v1
from apiserver.endpoints.installer import Dispatch, DispatchShortcut, WatchShortcut, build_router
from apiserver.endpoints.responsewriters import json_response
from apiserver.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from apiserver.metrics import ApiServerMetrics, RequestMetrics
from apiserver.registry import STRATEGIES
from apiserver.registry.allocator import NodePortAllocator, ServiceIPAllocator
from apiserver.registry.authorization import ReviewStore
from apiserver.registry.generic import Store, WriteOptions
from apiserver.registry.namespace import NamespaceStrategy
from apiserver.registry.rbac_escalation import RbacPolicy
from apiserver.registry.servicestorage import ServiceStore
from apiserver.registry.token import LiveTokenValidator, TokenIssuer
from apiserver.storage.cacher import CachedObject
from apiserver.storage.encryptionconfig import EncryptionConfig
from apiserver.storage.etcd import EtcdStorage, EtcdTLS, StorageError, TransformFailed
from apiserver.storage.predicate import Predicate
from apiserver.tracing import RequestTracing, TracedAuthenticator, TracedAuthorizer
from apiserver.warning import WarningRecorder
from machinery import memtrim, tracing
from machinery.api.resources import RESOURCES, group_versions
from machinery.api.scheduling_v1 import SYSTEM_PRIORITY_CLASSES
from machinery.podutil import pod_configmap_names, pod_secret_names
from machinery.types import Obj
from machinery.volumeutil import pod_claim_names

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass
class ApiServerConfig:
    etcd_servers: list[str] = field(default_factory=lambda: ["http://127.0.0.1:2379"])
    etcd_tls: EtcdTLS | None = None  # upstream --etcd-cafile, --etcd-certfile, --etcd-keyfile
    etcd_retry: bool = True  # False: the failover benchmark's baseline
    # encryption at rest (upstream --encryption-provider-config, read by apiserver/__main__.py)
    encryption: EncryptionConfig | None = None
    advertise_address: str = "127.0.0.1:8080"
    compaction_interval: float = 300.0  # upstream --etcd-compaction-interval (5m); 0 disables
    bookmark_interval: float = 10.0
    watch_window: int = 4096
    # the gate (upstream flag names in apiserver/__main__.py)
    client_ca_file: str | None = None
    token_auth_file: str | None = None
    service_account_key_files: list[str] = field(default_factory=list)
    service_account_issuer: str = DEFAULT_ISSUER
    # TokenRequest (serviceaccounts/token): signed with this key, for these audiences (default: the issuer)
    service_account_signing_key_file: str | None = None
    api_audiences: list[str] = field(default_factory=list)
    service_account_max_token_expiration: int = 0  # seconds; 0: no limit
    service_account_extend_token_expiration: bool = True
    authorization_modes: list[str] = field(default_factory=lambda: ["Node", "RBAC"])
    admission_plugins: list[str] = field(default_factory=lambda: list(ALL_PLUGINS))
    admission_control_config_file: str | None = None  # PodSecurity's defaults and exemptions
    audit_log_path: str | None = None
    audit_policy_file: str | None = None
    # reaching kubelets (apiserver/endpoints/proxy.py): HTTPS with this client certificate, verified against this CA
    kubelet_client_certificate: str | None = None
    kubelet_client_key: str | None = None
    kubelet_certificate_authority: str | None = None
    # the request chain's limits (upstream --max-requests-inflight, --max-mutating-requests-inflight,
    # --request-timeout, --min-request-timeout)
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    request_timeout: float = 60.0
    min_request_timeout: float = 1800.0
    # Services (upstream --service-cluster-ip-range, --service-node-port-range)
    service_cluster_ip_range: str = "10.96.0.0/12"
    service_node_port_range: str = "30000-32767"
    service_repair_interval: float = 180.0  # upstream's repair controllers run every 3 minutes; 0 disables
    # metrics.k8s.io proxied to a metrics-server and road.minik8s.io to the road server
    # (apiserver/endpoints/aggregator.py): their URLs and CAs, and the front-proxy client certificate
    # (upstream --proxy-client-cert-file/--proxy-client-key-file)
    metrics_server_url: str | None = None
    proxy_client_cert_file: str | None = None
    proxy_client_key_file: str | None = None
    metrics_server_certificate_authority: str | None = None
    road_server_url: str | None = None
    road_server_certificate_authority: str | None = None
    aggregated_discovery: bool = True  # --feature-gates AggregatedDiscoveryEndpoint (GA since 1.30)
    request_metrics: bool = True  # False: the baseline of bench/metrics_bench.py (upstream always counts)


_RBAC = "rbac.authorization.k8s.io"
_APIEXTENSIONS = {"customresourcedefinitions": CustomResourceDefinitionStrategy()}
_RBAC_RESOURCES = ("clusterroles", "roles", "clusterrolebindings", "rolebindings")


class CachedRbac:
    """RBAC objects as the watch caches hold them; the generation changes with any of them."""

    def __init__(self, stores: list[Store]):
        self.cachers = [s.cacher for s in stores]

    def generation(self) -> tuple[int, ...]:
        # asked by every request RBAC decides: lists, not generators (a third of the cost)
        return tuple([c.rv for c in self.cachers] + [len(c.store) for c in self.cachers])

    def objects(self) -> tuple[list[dict], list[dict], list[dict], list[dict]]:  # type: ignore[type-arg]
        lists = [[o.obj() for o in c.store.values()] for c in self.cachers]
        return lists[0], lists[1], lists[2], lists[3]

    def synced(self) -> bool:
        return all(c.ready.is_set() for c in self.cachers)


class ApiServer:
    """Everything the routes need, built once per process."""

    def __init__(self, config: ApiServerConfig):
        self.config = config
        self.storage = EtcdStorage(config.etcd_servers, config.etcd_tls, retry=config.etcd_retry)
        self.stores: dict[tuple[str, str], Store] = {}
        for info in RESOURCES:
            if info.virtual:
                continue
            strategy = STRATEGIES.get(f"{info.group}/{info.plural}") or _APIEXTENSIONS[info.plural]
            store_class = ServiceStore if (info.group, info.plural) == ("", "services") else Store
            transformer = config.encryption.transformer_for(info.group, info.plural) if config.encryption else None
            storage = self.storage.with_transformer(transformer) if transformer else self.storage
            self.stores[(info.group, info.plural)] = store_class(info, strategy, storage, self.namespace_state,
                                                                 watch_window=config.watch_window)
        services = self.stores[("", "services")]
        assert isinstance(services, ServiceStore)
        self.services = services
        self.services.use_allocators(ServiceIPAllocator(self.storage, config.service_cluster_ip_range),
                                     NodePortAllocator(self.storage, config.service_node_port_range))
        self._tasks: list[asyncio.Task[None]] = []
        # authentication
        tokens = load_token_file(config.token_auth_file) if config.token_auth_file else {}
        keys = [k for f in config.service_account_key_files for k in load_public_keys(f)]
        audiences = tuple(config.api_audiences) or (config.service_account_issuer,)
        verifier = TokenVerifier(keys, (config.service_account_issuer,), audiences) if keys else None
        # every service-account token is checked against the live account (and bound pod)
        validator = LiveTokenValidator(self.stores[("", "serviceaccounts")], self.stores[("", "pods")])
        self.authenticator = Authenticator(tokens, verifier, validator, validator.lookup)
        self.token_issuer: TokenIssuer | None = None
        if config.service_account_signing_key_file:
            self.token_issuer = TokenIssuer(load_signing_key(config.service_account_signing_key_file),
                                            config.service_account_issuer, audiences,
                                            config.service_account_max_token_expiration,
                                            config.service_account_extend_token_expiration)
        # authorization
        deciders: list[Decider] = []
        # the RBAC rule resolver: the RBAC authorizer, and the escalation checks whatever the modes
        rbac = RBACAuthorizer(CachedRbac([self.stores[(_RBAC, r)] for r in _RBAC_RESOURCES]))
        for mode in config.authorization_modes:
            if mode == "AlwaysAllow":
                deciders.append(AlwaysAllow())
            elif mode == "Node":
                deciders.append(NodeAuthorizer(self._pod_node, self._node_refers_to))
            elif mode == "RBAC":
                deciders.append(rbac)
            else:
                raise ValueError(f"unknown authorization mode {mode!r} (known: AlwaysAllow, Node, RBAC)")
        self.authorizer = Authorizer(deciders)
        self.reviews = [ReviewStore(info, self.authorizer, self.authenticator.review)
                        for info in RESOURCES if info.virtual]
        # admission
        admission = "admissionregistration.k8s.io"
        self.admission = AdmissionChain(
            config.admission_plugins, namespace_labels=self._namespace_labels,
            mutating_webhooks=WebhookSource(self.stores[(admission, "mutatingwebhookconfigurations")].cacher, True),
            validating_webhooks=WebhookSource(self.stores[(admission, "validatingwebhookconfigurations")].cacher,
                                              False),
            pod_security=PodSecurity(load_admission_config(config.admission_control_config_file),
                                     namespace_labels=self._namespace_labels_or_read, pods_in_namespace=self._pods_in),
            service_account_exists=self._service_account_exists, storage_classes=self._storage_classes,
            service_account=self._service_account,
            priority_classes=PriorityClasses(self._priority_class, self._priority_classes),
            limit_ranges=self._limit_ranges,
            quotas=Quotas(self._any_quota_in, self._quotas_in, self._write_quota_status),
            ingress_classes=self._ingress_classes)
        if config.admission_plugins:
            for store in self.stores.values():
                store.admission = self.admission
        for plural in _RBAC_RESOURCES:
            store = self.stores[(_RBAC, plural)]
            store.admission = RbacPolicy(self.authorizer, rbac, {"Role": self.stores[(_RBAC, "roles")],
                                                                 "ClusterRole": self.stores[(_RBAC, "clusterroles")]},
                                         store.admission)
        # audit
        self.auditor: Auditor | None = None
        if config.audit_log_path:
            policy = Policy.load(config.audit_policy_file) if config.audit_policy_file else Policy.default()
            self.auditor = Auditor(policy, LogWriter(config.audit_log_path))
        self.kubernetes_service = KubernetesService(
            self.storage, self.services, self.stores[("", "endpoints")],
            self.stores[("discovery.k8s.io", "endpointslices")], config.advertise_address,
            advertised_port(config.advertise_address))
        # custom resources, served as their CRDs come (the routes' watch dispatchers are set by create_app)
        self.custom = CustomResourceRegistry(self.stores[("apiextensions.k8s.io", "customresourcedefinitions")],
                                             self.storage, self.namespace_state, config.watch_window,
                                             config.min_request_timeout, {})
        self.custom.admission = self.admission if config.admission_plugins else None
        self._bootstrapped = False
        self._priority_classes_made = False
        self._priority_memo: tuple[tuple[CachedObject, ...], list[Obj]] = ((), [])
        self._namespace_state_memo: dict[str, tuple[CachedObject, str]] = {}
        self._bootstrap_revisions: dict[tuple[str, str], int] = {}

    def _pod_node(self, namespace: str, name: str) -> str | None:
        cached = self.stores[("", "pods")].cached(namespace, name)
        return cached.attrs.fields.get("spec.nodeName", "") if cached is not None else None

    def _node_refers_to(self, node: str, resource: str, namespace: str, name: str) -> bool:
        """Does a pod bound to node, in namespace, use this Secret, ConfigMap or claim (or, for a
        PersistentVolume, a claim bound to it)? Read from the watch caches (upstream keeps a graph
        fed by informers; a namespace's pods are few enough to scan)."""
        if resource == "persistentvolumes":
            claims = self.stores[("", "persistentvolumeclaims")]
            for cached in list(claims.cacher.store.values()):
                claim = cached.obj()
                meta = claim["metadata"]
                if (claim.get("spec") or {}).get("volumeName") == name and self._node_refers_to(
                        node, "persistentvolumeclaims", meta.get("namespace", ""), meta["name"]):
                    return True
            return False
        pods = self.stores[("", "pods")]
        prefix = pods.prefix(namespace)
        visit = {"secrets": pod_secret_names, "configmaps": pod_configmap_names,
                 "persistentvolumeclaims": pod_claim_names, "serviceaccounts": _pod_service_account}[resource]
        for key, cached in list(pods.cacher.store.items()):
            if key.startswith(prefix) and cached.attrs.fields.get("spec.nodeName") == node \
                    and name in visit(cached.obj()):
                return True
        return False

    def _pods_in(self, namespace: str) -> list[bytes]:
        """The namespace's pods as the watch cache holds them (JSON, by name): PodSecurity decodes
        only as many as it has time to check."""
        pods = self.stores[("", "pods")]
        prefix = pods.prefix(namespace)
        found = sorted((k, o.raw) for k, o in list(pods.cacher.store.items()) if k.startswith(prefix))
        return [raw for _, raw in found]

    async def _namespace_labels_or_read(self, namespace: str) -> dict[str, str] | None:
        """From the watch cache, or from etcd for a namespace the cache has not seen yet (just created):
        a policy must not fall back to the cluster default because the cache is a moment behind."""
        cached = self.namespaces.cached(None, namespace)
        if cached is not None:
            return cached.attrs.labels
        try:
            obj = await self.namespaces.get(None, namespace)
        except errors.ApiError:
            return None
        return (obj.get("metadata") or {}).get("labels") or {}

    async def _storage_classes(self) -> list[Obj]:
        """Every StorageClass, from etcd: a default class created a moment ago counts for the next claim."""
        found = await self.stores[("storage.k8s.io", "storageclasses")].list(None, Predicate())
        return found.objects()

    async def _ingress_classes(self) -> list[Obj]:
        """Every IngressClass, from etcd: a default class created a moment ago counts for the next Ingress."""
        found = await self.stores[("networking.k8s.io", "ingressclasses")].list(None, Predicate())
        return found.objects()

    async def _service_account(self, namespace: str, name: str) -> Obj | None:
        """The ServiceAccount from the watch cache, or etcd when the cache has not seen it (yet)."""
        accounts = self.stores[("", "serviceaccounts")]
        cached = accounts.cached(namespace, name)
        if cached is not None:
            return cached.obj()
        try:
            return await accounts.get(namespace, name)
        except errors.ApiError as e:
            if e.code == 404:
                return None
            raise

    async def _priority_class(self, name: str) -> Obj | None:
        """A PriorityClass from the watch cache, else etcd (a class created a moment ago counts)."""
        store = self.stores[("scheduling.k8s.io", "priorityclasses")]
        cached = store.cached(None, name)
        if cached is not None:
            return cached.obj()
        try:
            return await store.get(None, name)
        except errors.ApiError as e:
            if e.code == 404:
                return None
            raise

    def _priority_classes(self) -> list[Obj]:
        """Every PriorityClass in the watch cache, decoded once per change of the cache (every pod create
        asks for the default class): read-only, shared by the callers."""
        current = tuple(self.stores[("scheduling.k8s.io", "priorityclasses")].cacher.store.values())
        seen, decoded = self._priority_memo
        if len(seen) != len(current) or any(a is not b for a, b in zip(seen, current, strict=True)):
            decoded = [o.obj() for o in current]
            self._priority_memo = (current, decoded)
        return decoded

    def _cached_in(self, plural: str, namespace: str) -> list[Obj]:
        store = self.stores[("", plural)]
        prefix = store.prefix(namespace)
        return [o.obj() for k, o in list(store.cacher.store.items()) if k.startswith(prefix)]

    def _limit_ranges(self, namespace: str) -> list[Obj]:
        """The namespace's LimitRanges, from the watch cache (upstream's lister)."""
        return self._cached_in("limitranges", namespace)

    def _any_quota_in(self, namespace: str) -> bool:
        store = self.stores[("", "resourcequotas")]
        prefix = store.prefix(namespace)
        return any(k.startswith(prefix) for k in list(store.cacher.store))

    async def _quotas_in(self, namespace: str) -> list[Obj]:
        """The namespace's ResourceQuotas from etcd: usage is checked against what is written, not a cache."""
        return (await self.stores[("", "resourcequotas")].list(namespace, Predicate(namespace))).objects()

    async def _write_quota_status(self, quota: Obj) -> Obj:
        """A /status write pinned to the resourceVersion the quota was read at (409 if it moved)."""
        meta = quota["metadata"]
        return await self.stores[("", "resourcequotas")].update(meta.get("namespace"), meta["name"], quota,
                                                                 WriteOptions(), "status")

    async def _service_account_exists(self, namespace: str, name: str) -> bool:
        """The watch cache first; etcd when it has not seen the account (yet), as upstream's lister
        falls back to a live lookup for an account created a moment ago."""
        accounts = self.stores[("", "serviceaccounts")]
        if accounts.cached(namespace, name) is not None:
            return True
        try:
            await accounts.get(namespace, name)
        except errors.ApiError as e:
            if e.code == 404:
                return False
            raise
        return True

    def _namespace_labels(self, namespace: str) -> dict[str, str] | None:
        cached = self.namespaces.cached(None, namespace)
        return cached.attrs.labels if cached is not None else None

    @property
    def namespaces(self) -> Store:
        return self.stores[("", "namespaces")]

    async def namespace_state(self, namespace: str) -> str | None:
        """"Active", "Terminating" or None, from the watch cache with etcd behind it; from etcd for a
        while after a DELETE, when the cache may not show it Terminating yet (upstream's live lookup)."""
        cached = self.namespaces.cached(None, namespace)
        strategy = self.namespaces.strategy
        if isinstance(strategy, NamespaceStrategy) and strategy.recently_deleted(namespace):
            cached = None
        if cached is not None:
            memo = self._namespace_state_memo.get(namespace)
            if memo is not None and memo[0] is cached:  # the same cached object: decoded before
                return memo[1]
            obj = cached.obj()
        else:
            try:
                obj = await self.namespaces.get(None, namespace)
            except errors.ApiError:
                return None
        state = "Terminating" if obj["metadata"].get("deletionTimestamp") else \
            (obj.get("status") or {}).get("phase") or "Active"
        if cached is not None:
            if len(self._namespace_state_memo) >= 4096:
                self._namespace_state_memo.clear()
            self._namespace_state_memo[namespace] = (cached, state)
        return state

    async def start(self) -> None:
        for store in self.stores.values():
            store.cacher.start()
        self.custom.start()
        self._tasks.append(asyncio.create_task(self._ensure_system_namespaces()))
        self._tasks.append(asyncio.create_task(self._ensure_system_priority_classes()))
        self._tasks.append(asyncio.create_task(self._ensure_bootstrap_policy()))
        self._tasks.append(asyncio.create_task(self._bookmarks()))
        self._tasks.append(asyncio.create_task(memtrim.run()))  # freed cache versions back to the system
        self._tasks.append(asyncio.create_task(self.kubernetes_service.run()))
        if self.config.service_repair_interval > 0:
            self._tasks.append(asyncio.create_task(self._repair_service_ranges()))
        if self.config.compaction_interval > 0:
            self._tasks.append(asyncio.create_task(self._compactor()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        try:  # the other apiservers stop sending clients here at once, not after the lease runs out
            await asyncio.wait_for(self.kubernetes_service.remove_own_lease(), 5)
        except (StorageError, errors.ApiError, TimeoutError) as e:
            log.warning("giving back the kubernetes endpoint lease: %s", e)
        await self.custom.stop()
        for store in self.stores.values():
            await store.cacher.stop()
        await self.admission.close()
        if self.auditor is not None:
            self.auditor.close()
        await self.storage.close()

    async def ready(self) -> bool:
        """Storage and every watch cache up, and the bootstrap RBAC policy written and seen by the
        caches the authorizer reads (so the first request of a component is not refused)."""
        if not self._bootstrapped or not self._priority_classes_made \
                or not all(s.cacher.ready.is_set() for s in self.stores.values()):
            return False
        if not self.custom.synced.is_set():  # the custom resources of the CRDs there are, served
            return False
        if any(self.stores[key].cacher.rv < rv for key, rv in self._bootstrap_revisions.items()):
            return False
        return await self.storage.ready()

    async def _ensure_bootstrap_policy(self) -> None:
        """Upstream's rbac/bootstrap-roles post-start hook: create the default cluster roles and
        bindings, and reconcile those still marked for autoupdate."""
        roles, bindings = bootstrap.policy_objects()
        delay = 0.2
        for plural, objects in (("clusterroles", roles), ("clusterrolebindings", bindings)):
            store = self.stores[(_RBAC, plural)]
            for wanted in objects:
                name = wanted["metadata"]["name"]
                while True:
                    try:
                        written = await self._reconcile_one(store, name, wanted)
                        break
                    except StorageError as e:
                        log.warning("bootstrap policy %s %s: %s; retrying", plural, name, e)
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, 5)
                if written:
                    key = (_RBAC, plural)
                    self._bootstrap_revisions[key] = max(self._bootstrap_revisions.get(key, 0), written)
        self._bootstrapped = True

    @staticmethod
    async def _reconcile_one(store: Store, name: str, wanted: dict) -> int:  # type: ignore[type-arg]
        try:
            existing = await store.get(None, name)
        except errors.ApiError as e:
            if e.code != 404:
                raise
            try:
                created = await store.create(None, copy.deepcopy(wanted), WriteOptions())
            except errors.ApiError as e2:
                if e2.code == 409:
                    return 0
                raise
            return int(created["metadata"]["resourceVersion"])
        update = bootstrap.reconciled(existing, wanted)
        if update is None:
            return 0
        updated = await store.update(None, name, update, WriteOptions())
        return int(updated["metadata"]["resourceVersion"])

    async def _ensure_system_namespaces(self) -> None:
        """The bootstrap controller's job upstream: the namespaces every cluster has."""
        delay = 0.2
        pending = list(SYSTEM_NAMESPACES)
        while pending:
            name = pending[0]
            try:
                await self.namespaces.create(None, {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": name}}, WriteOptions())
                pending.pop(0)
            except errors.ApiError as e:
                if e.code == 409:
                    pending.pop(0)
                    continue
                raise
            except StorageError as e:
                log.warning("creating namespace %s: %s; retrying", name, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5)

    async def _ensure_system_priority_classes(self) -> None:
        """Upstream's scheduling/bootstrap-system-priority-classes post-start hook: system-node-critical
        and system-cluster-critical exist (part of readiness, as upstream's hook is of /readyz)."""
        store = self.stores[("scheduling.k8s.io", "priorityclasses")]
        delay = 0.2
        pending = list(SYSTEM_PRIORITY_CLASSES.items())
        while pending:
            name, (value, description) = pending[0]
            try:
                await store.create(None, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                          "metadata": {"name": name}, "value": value, "description": description},
                                   WriteOptions())
                pending.pop(0)
            except errors.ApiError as e:
                if e.code != 409:
                    raise
                pending.pop(0)
            except StorageError as e:
                log.warning("creating priority class %s: %s; retrying", name, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5)
        self._priority_classes_made = True

    async def _bookmarks(self) -> None:
        while True:
            await asyncio.sleep(self.config.bookmark_interval)
            for store in [*self.stores.values(), *(s for c in list(self.custom.served.values())
                                                   for s in c.stores.values())]:
                store.cacher.send_bookmarks()

    async def _repair_service_ranges(self) -> None:
        """Upstream's ClusterIP and NodePort repair controllers: what no Service holds goes back."""
        while True:
            await asyncio.sleep(self.config.service_repair_interval)
            try:
                await self.services.repair()
            except (StorageError, errors.ApiError) as e:
                log.warning("service range repair: %s", e)

    async def _compactor(self) -> None:
        """Compact etcd to the revision seen one interval ago, as upstream's apiserver does."""
        last = 0
        while True:
            await asyncio.sleep(self.config.compaction_interval)
            try:
                if last:
                    await self.storage.compact(last)
                last = await self.storage.current_revision()
            except StorageError as e:
                log.warning("compaction: %s", e)


def _status_response(e: errors.ApiError) -> Response:
    """The Status as upstream writes it: Go's json.Encoder ends the body with a newline; a Status that says
    when to retry says it in Retry-After too (upstream responsewriters.ErrorNegotiated)."""
    retry_after = (e.details or {}).get("retryAfterSeconds")
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    return Response(orjson.dumps(e.status()) + b"\n", status_code=e.code, media_type="application/json",
                    headers=headers)


def _error_response(request: Request, e: Exception) -> Response:
    """The Status the app's exception handlers answer for e (for WatchShortcut, which runs outside them)."""
    if isinstance(e, errors.ApiError):
        return _status_response(e)
    if isinstance(e, TransformFailed):
        return _status_response(errors.internal(str(e)))
    if isinstance(e, StorageError):
        return _status_response(errors.unavailable(f"storage is unavailable: {e}"))
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _status_response(errors.internal(f"{type(e).__name__}: {e}"))


def _static(document: dict[str, Any]) -> Callable[[], Awaitable[Response]]:
    """A route that answers one fixed document (an aggregated group's discovery)."""
    async def endpoint() -> Response:
        return json_response(document)
    return endpoint


def create_app(config: ApiServerConfig) -> FastAPI:
    server = ApiServer(config)
    proxies = [aggregator.Proxy(api, url, config.proxy_client_cert_file, config.proxy_client_key_file, ca)
               for api, url, ca in ((aggregator.METRICS, config.metrics_server_url,
                                     config.metrics_server_certificate_authority),
                                    (aggregator.ROAD, config.road_server_url, config.road_server_certificate_authority))
               if url]

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await server.start()
        # What exists now (modules, the app, routes) lives as long as the process: keep the cyclic
        # collector from walking it again and again, and let it run less often. Full collections
        # were the long tail of list and create latency (84 ms median pauses, bench --gc-stats).
        gc.freeze()
        gc.set_threshold(50_000, 20, 100)
        try:
            yield
        finally:
            await server.stop()
            for proxy in proxies:
                await proxy.close()

    # FastAPI's own OpenTelemetry (its spans, metrics and logs through the global providers) is off: the apiserver
    # traces through --tracing-config-file (apiserver.tracing) and counts through /metrics, and nothing sets those
    # global providers; left on, FastAPI asks them on every request whether they are configured (~2% of a create)
    app = FastAPI(title="minik8s apiserver", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None,
                  telemetry={"tracing": False, "metrics": False, "logs": False})
    app.state.server = server
    app.add_middleware(AutoscalingV1)  # innermost: autoscaling/v1 HPAs through the v2 handlers
    served: dict[str, Dispatch] = {}  # the built-in group-versions' dispatches, filled below
    app.add_middleware(DispatchShortcut, served=served, error_response=_error_response)
    app.add_middleware(WarningRecorder)  # inside the gate: it reads the request's audit context
    watch_dispatchers: dict[str, Dispatch] = {}  # filled by build_router below
    server.custom.watch_dispatchers = watch_dispatchers  # and by the custom resources' registry
    # right inside the gate, outside the recorder: a watch records no warnings (no admission runs), and
    # the recorder's frame and closure would stay for as long as each watch streams
    app.add_middleware(WatchShortcut, dispatchers=watch_dispatchers, error_response=_error_response)
    traced = tracing.TRACER is not None  # --tracing-config-file: spans of requests (apiserver/tracing.py)
    app.add_middleware(Gate, authenticator=cast(Authenticator, TracedAuthenticator(server.authenticator)) if traced
                       else server.authenticator,
                       authorizer=cast(Authorizer, TracedAuthorizer(server.authorizer)) if traced
                       else server.authorizer,
                       auditor=server.auditor,
                       limits=Limits(config.max_requests_inflight, config.max_mutating_requests_inflight,
                                     config.request_timeout))
    request_metrics = ApiServerMetrics()
    if config.request_metrics:  # outermost: a request the gate refuses is counted too
        app.add_middleware(RequestMetrics, metrics=request_metrics)
    if traced:  # outermost: the span covers the whole chain, refusals too
        app.add_middleware(RequestTracing)

    @app.exception_handler(errors.ApiError)
    async def api_error(request: Request, e: errors.ApiError) -> Response:
        return _status_response(e)

    @app.exception_handler(StorageError)
    async def storage_error(request: Request, e: StorageError) -> Response:
        if isinstance(e, TransformFailed):  # upstream: storage.NewInternalError
            return _status_response(errors.internal(str(e)))
        return _status_response(errors.unavailable(f"storage is unavailable: {e}"))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> Response:
        if e.status_code == 404:
            return _status_response(errors.page_not_found())
        if e.status_code == 405:
            return _status_response(errors.ApiError(405, "MethodNotAllowed",
                                                    f"the server does not allow this method on the requested "
                                                    f"resource ({request.method} {request.url.path})"))
        return _status_response(errors.ApiError(e.status_code, "BadRequest", str(e.detail)))

    @app.exception_handler(RequestValidationError)
    async def request_invalid(request: Request, e: RequestValidationError) -> Response:
        return _status_response(errors.bad_request(f"invalid request: {e.errors()[0].get('msg', e)}"))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, e: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return _status_response(errors.internal(f"{type(e).__name__}: {e}"))

    # -- discovery, version, health, OpenAPI -----------------------------------------------
    # (with and without the trailing slash, both answered directly as upstream does: no redirect)

    def aggregated(request: Request, core: bool) -> Response | None:
        """The aggregated discovery document when the client asks for it (discovery_aggregated.py)."""
        version = discovery_aggregated.negotiate(request.headers.get("accept", ""))
        if version is None or not config.aggregated_discovery:
            return None
        document = discovery_aggregated.group_discovery_list(version, core, server.custom.infos(),
                                                             server.custom.groups())
        if not core:  # what is served beside the registry: autoscaling/v1 and the aggregated groups
            discovery_aggregated.add_version_alias(document, "autoscaling", "v2", "v1")
            for proxy in proxies:
                document["items"].append(discovery_aggregated.group_from_resource_list(proxy.api.resource_list))
        return Response(orjson.dumps(document), media_type=discovery_aggregated.content_type(version),
                        headers={"Vary": "Accept"})

    @app.get("/api", include_in_schema=False)
    @app.get("/api/", include_in_schema=False)
    async def get_api(request: Request) -> Response:
        return aggregated(request, True) or json_response(discovery.api_versions(config.advertise_address))

    @app.get("/apis", include_in_schema=False)
    @app.get("/apis/", include_in_schema=False)
    async def get_apis(request: Request) -> Response:
        found = aggregated(request, False)
        if found is not None:
            return found
        groups = with_v1(discovery.api_group_list(server.custom.groups()))
        for proxy in proxies:
            groups["groups"].append(proxy.api.api_group_entry)
        return json_response(groups)

    for proxy in proxies:  # before /apis/{group}/...: these paths are the aggregated servers'
        api = proxy.api
        group_document = _static({"kind": "APIGroup", "apiVersion": "v1", **api.api_group_entry})
        for path in (f"/apis/{api.group}", f"/apis/{api.group}/"):
            app.add_api_route(path, group_document, methods=["GET"], include_in_schema=False)
        app.add_api_route(f"/apis/{api.group_version}", _static(api.resource_list), methods=["GET"],
                          include_in_schema=False)
        app.add_api_route(f"/apis/{api.group_version}/{{path:path}}", proxy, methods=["GET", "HEAD"],
                          include_in_schema=False)

    @app.get("/api/{version}", include_in_schema=False)
    async def get_core_version(version: str) -> Response:
        found = discovery.api_resource_list(version)
        if found is None:
            raise errors.page_not_found()
        return json_response(found)

    @app.get("/apis/{group}", include_in_schema=False)
    @app.get("/apis/{group}/", include_in_schema=False)
    async def get_group(group: str) -> Response:
        found = discovery.api_group(group, server.custom.groups())
        if found is None:
            raise server.custom.not_found()  # 503 until the CRDs are served
        return json_response(with_v1(found))

    @app.get("/apis/{group}/{version}", include_in_schema=False)
    async def get_group_version(group: str, version: str) -> Response:
        found = discovery.api_resource_list(f"{group}/{version}", server.custom.infos())
        if found is None:
            raise server.custom.not_found()
        return json_response(found)

    @app.get("/version", include_in_schema=False)
    async def get_version() -> Response:
        return json_response(discovery.VERSION_INFO)

    @app.get("/healthz", include_in_schema=False)
    @app.get("/livez", include_in_schema=False)
    async def healthz() -> Response:
        return PlainTextResponse("ok")

    @app.get("/metrics", include_in_schema=False)
    async def metrics_text() -> Response:
        return Response(request_metrics.render(), media_type=METRICS_CONTENT_TYPE)

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        if await server.ready():
            return PlainTextResponse("ok")
        return PlainTextResponse("[-]etcd or watch caches not ready\nreadyz check failed", status_code=503)

    @app.get("/openapi/v2", include_in_schema=False)
    async def openapi_v2(request: Request) -> Response:
        if server.custom.served:  # custom resources' paths and definitions added (upstream's aggregated spec)
            if "protobuf" in request.headers.get("accept", ""):
                return Response(server.custom.openapi_v2_protobuf(openapi.openapi_v2_json()),
                                media_type=openapi.V2_PROTOBUF_CONTENT_TYPE)
            return Response(orjson.dumps(server.custom.openapi_v2(openapi.openapi_v2_json())),
                            media_type="application/json")
        if "protobuf" in request.headers.get("accept", ""):
            return Response(openapi.openapi_v2_protobuf(), media_type=openapi.V2_PROTOBUF_CONTENT_TYPE)
        return Response(orjson.dumps(openapi.openapi_v2_json()), media_type="application/json")

    @app.get("/openapi/v3", include_in_schema=False)
    async def openapi_v3_root() -> Response:
        root = openapi.openapi_v3_root()
        if server.custom.served:
            root = {"paths": dict(sorted({**root["paths"], **server.custom.openapi_v3_paths()}.items()))}
        return json_response(root)

    @app.get("/openapi/v3/{path:path}", include_in_schema=False)
    async def openapi_v3_group(path: str) -> Response:
        doc = openapi.openapi_v3_group(path) or server.custom.openapi_v3(path)
        if doc is None:
            raise errors.page_not_found()
        return json_response(doc)

    reviews = {(r.info.api_version, r.info.plural): r for r in server.reviews}
    for group_version in group_versions():
        stores = [reviews[(i.api_version, i.plural)] if i.virtual else server.stores[(i.group, i.plural)]
                  for i in group_versions()[group_version]]
        app.include_router(build_router(stores, config.min_request_timeout,  # type: ignore[arg-type]
                                        watch_dispatchers))
    served.update(watch_dispatchers)  # no custom resource is served yet: these are the routers above

    # custom resources: every group-version no router above serves (upstream's crdHandler, the
    # apiextensions-apiserver's delegate)
    @app.api_route("/apis/{group}/{version}/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                   include_in_schema=False)
    async def custom_resources(request: Request, group: str, version: str, path: str) -> Response:
        if not path and request.method == "GET":
            found = discovery.api_resource_list(f"{group}/{version}", server.custom.infos())
            if found is None:
                raise server.custom.not_found()
            return json_response(found)
        return await server.custom.dispatch(request, group, version, path)

    return app


def _pod_service_account(pod: Obj) -> set[str]:
    """The Node authorizer's pod -> serviceaccount edge."""
    return {(pod.get("spec") or {}).get("serviceAccountName") or "default"}
