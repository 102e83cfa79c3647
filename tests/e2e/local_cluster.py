"""A whole minik8s cluster as local processes, for end-to-end tests and the pod-startup benchmark: its own
etcd, apiserver (plain HTTP; it reaches the kubelets over HTTPS as kube-apiserver-kubelet-client, with
certificates from a cluster CA in the work dir), controller-manager (every controller, node IPAM on a /24 block of
10.244.0.0/16 free on this host), scheduler, and kubelets with unique node names, each on its CRI runtime: the
Docker shim (the default) or a containerd of its own (`runtimes`), with the host's CNI plugins. `stop()`
removes everything it made — processes, containers, CNI attachments,
bridges, IP leases, state dirs, and the shared host rules when no other kubelet needs them — and is safe
to call after a failed or partial start.

With `service_network=True` (issue 11) it also runs what makes Services route: a Service CIDR of its own (a
free /24 of 10.97.0.0/16, so the packet-filter rules of clusters sharing this host never meet), one kube-proxy
for the host's nodes with a chain prefix of its own (its rules removed by `--cleanup` on stop), and the cluster
DNS at the range's .10 with the kubelets pointed at it. (The EndpointSlice, Endpoints, mirroring and service
load-balancer controllers run in every cluster.)"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import shutil
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from apiserver.auth.pki import ensure_kubelet_pki
from tests.cluster import REPO, ApiServer, Etcd, Process, free_port, make_workdir, wait_for
from tests.controller_process import ControllerProcess
from tests.kubectl import write_kubeconfig
from tests.node_process import (
    BACKOFF_BASE,
    KubeletProcess,
    cleanup,
    ensure_images,
    free_cidr_block,
    free_service_cidr,
    release_cidr,
)
from tests.scheduler_process import SchedulerProcess

CONTROLLERS = ["deployment", "replicaset", "garbagecollector", "namespace", "nodeipam", "nodelifecycle",
               "serviceaccount", "endpointslice", "endpoint", "endpointslicemirroring", "servicelb", "daemonset",
               "persistentvolume-binder", "pvc-protection", "pv-protection", "job", "cronjob",
               "ttl-after-finished", "statefulset", "disruption", "podgc", "root-ca-cert-publisher",
               "horizontalpodautoscaling", "resourcequota", "replicationcontroller"]
CLUSTER_CIDR = "10.244.0.0/16"
CLUSTER_DOMAIN = "cluster.local"


class ServiceComponent:
    """kube-proxy or the cluster DNS as a process of the cluster, up when its health endpoint answers."""

    def __init__(self, name: str, argv: list[str], log: Path, health_url: str) -> None:
        self.name, self.health_url = name, health_url
        self.process = Process(name, argv, log)

    def healthy(self) -> bool:
        if not self.process.alive():
            raise RuntimeError(f"{self.name} exited:\n{self.process.log_tail()}")
        try:
            return httpx.get(self.health_url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def start(self, timeout: float = 30.0) -> None:
        self.process.start()
        wait_for(self.healthy, timeout, what=f"{self.name} healthy")

    def kill(self) -> None:
        """kill -9, as a crash."""
        self.process.kill()

    def stop(self) -> None:
        self.process.stop()

    @property
    def pid(self) -> int | None:
        return self.process.proc.pid if self.process.alive() and self.process.proc else None

    def log_tail(self, lines: int = 30) -> str:
        return self.process.log_tail(lines)


class LocalCluster:
    def __init__(self, prefix: str = "e2e", node_count: int = 2, *, backoff_base: float = BACKOFF_BASE,
                 kubelet_args: Sequence[str] = (), workdir: Path | None = None, audit: bool = False,
                 controller_args: Sequence[str] = (), runtimes: Sequence[str] = ("docker",),
                 service_network: bool = False) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.service_network = service_network
        self.service_cidr = ""  # the apiserver's --service-cluster-ip-range, claimed on this host
        self.dns_ip = ""  # the kube-dns Service's ClusterIP (the range's .10, as 10.96.0.10 is upstream's)
        self.proxy_prefix = f"KE{uuid.uuid4().hex[:4].upper()}"  # this cluster's chains: KE1A2B-SERVICES ...
        self.proxy: ServiceComponent | None = None
        self.dns: ServiceComponent | None = None
        self.own_workdir = workdir is None
        self.workdir = workdir or make_workdir(f"minik8s-{prefix}-")
        self.etcd = Etcd(self.workdir)
        # with `audit`, every request is logged at level Metadata (no policy file): who, what, when
        self.audit_log: Path | None = self.workdir / "audit.log" if audit else None
        audit_args = ["--audit-log-path", str(self.audit_log)] if self.audit_log else []
        self.node_names = [f"{prefix}-{self.tag}-{chr(ord('a') + i)}" for i in range(node_count)]
        # kubelets serve HTTPS and take only the apiserver's client certificate (logs, exec)
        self.pki = ensure_kubelet_pki(self.workdir, self.node_names)
        kubelet_tls_args = ["--kubelet-client-certificate", str(self.pki.kubelet_client_cert),
                            "--kubelet-client-key", str(self.pki.kubelet_client_key),
                            "--kubelet-certificate-authority", str(self.pki.ca_cert)]
        self.apiserver = ApiServer(self.workdir, self.etcd, *audit_args, *kubelet_tls_args)
        self.backoff_base = backoff_base
        self.kubelet_args = list(kubelet_args)
        self.controller_args = list(controller_args)
        # node i runs on runtimes[i % len(runtimes)]: ("docker", "containerd") makes one node of each
        self.runtimes = [runtimes[i % len(runtimes)] for i in range(node_count)]
        self.ipam_cidr = ""  # the controller-manager's --cluster-cidr: a free block of this host
        self.controllers: ControllerProcess | None = None
        self.scheduler: SchedulerProcess | None = None
        self.kubelets: list[KubeletProcess] = []
        self.kubeconfig = self.workdir / "kubeconfig"

    @property
    def url(self) -> str:
        return self.apiserver.url

    def client(self, timeout: float = 10.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def start(self) -> LocalCluster:
        ensure_images()
        try:
            self.etcd.start()
            if self.service_network:
                self._service_network_flags()
            self.apiserver.start()
            write_kubeconfig(self.kubeconfig, self.url)
            prefix = 24 - math.ceil(math.log2(max(2, len(self.node_names))))
            self.ipam_cidr = free_cidr_block(prefix)
            self.controllers = ControllerProcess(self.workdir, self.url, CONTROLLERS, "--cluster-cidr",
                                                 self.ipam_cidr, "--node-cidr-mask-size", "24", *self.controller_args)
            self.controllers.start()
            self.scheduler = SchedulerProcess(self.workdir, self.url)
            self.scheduler.start()
            self.kubelets = [KubeletProcess(self.workdir, self.apiserver, name, backoff_base=self.backoff_base,
                                            extra_args=[*self.kubelet_args, *self._kubelet_tls_args(name)],
                                            tls=(self.pki.ca_cert, self.pki.kubelet_client_cert,
                                                 self.pki.kubelet_client_key), container_runtime=runtime)
                             for name, runtime in zip(self.node_names, self.runtimes, strict=True)]
            with self.client() as api:
                for k in self.kubelets:
                    k.start(api)
                # Ready is not yet schedulable: the node lifecycle controller lifts the not-ready taints a moment
                # later, and a workload created before that lands on the nodes that were Ready first
                wait_for(lambda: self._nodes_schedulable(api), 30, 0.1, what="every node without NoSchedule taints")
            if self.service_network:
                self._start_service_network()
        except BaseException:
            self.stop()
            raise
        return self

    def _nodes_schedulable(self, api: httpx.Client) -> bool:
        for name in self.node_names:
            taints = (api.get(f"/api/v1/nodes/{name}").json().get("spec") or {}).get("taints") or []
            if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints):
                return False
        return True

    def _service_network_flags(self) -> None:
        """Before the apiserver and kubelets start: their flags for this cluster's Service network."""
        self.service_cidr = free_service_cidr()
        self.dns_ip = str(ipaddress.ip_network(self.service_cidr)[10])
        self.apiserver.process.argv += ["--service-cluster-ip-range", self.service_cidr]
        self.kubelet_args += ["--cluster-dns", self.dns_ip, "--cluster-domain", CLUSTER_DOMAIN]

    def _start_service_network(self) -> None:
        """After the nodes: one kube-proxy for all of them (they share this host's packet filter) and the DNS."""
        nodes = ",".join(self.node_names)
        healthz, metrics = free_port(), free_port()
        self.proxy = ServiceComponent("kube-proxy", [
            sys.executable, "-m", "proxy", "--master", self.url, "--hostname-override", nodes,
            "--iptables-chain-prefix", self.proxy_prefix, "--cluster-cidr", self.ipam_cidr,
            "--min-sync-period", "0.05s", "--sync-period", "30s",
            "--healthz-bind-address", f"127.0.0.1:{healthz}", "--metrics-bind-address", f"127.0.0.1:{metrics}",
        ], self.workdir / "kube-proxy.log", f"http://127.0.0.1:{healthz}/healthz")
        self.proxy.start()
        # pods reach it on the node address through kube-proxy's DNAT of dns_ip:53; its port is its own. It
        # listens on every address, as local-up runs it: its UDP answers leave from the address each query
        # came to, which conntrack maps back to dns_ip
        port, health = free_port(), free_port()
        self.dns = ServiceComponent("dns", [
            sys.executable, "-m", "dns", "--master", self.url, "--cluster-domain", CLUSTER_DOMAIN,
            "--port", str(port), "--health-port", str(health), "--service-ip", self.dns_ip,
        ], self.workdir / "dns.log", f"http://127.0.0.1:{health}/ready")
        self.dns.start()

    def _stop_service_network(self) -> None:
        for component in (self.dns, self.proxy):
            if component is not None:
                with contextlib.suppress(Exception):
                    component.stop()
        if self.service_network:
            # every chain and jump rule of this cluster's prefix goes, also after a kill -9; iptables-restore waits
            # for the host's xtables lock, which other clusters' proxies on this host take too
            with contextlib.suppress(subprocess.TimeoutExpired):
                subprocess.run([sys.executable, "-m", "proxy", "--cleanup", "--iptables-chain-prefix",
                                self.proxy_prefix], capture_output=True, text=True, cwd=REPO, timeout=180)
        if self.service_cidr:
            release_cidr(self.service_cidr)

    def _kubelet_tls_args(self, node: str) -> list[str]:
        return ["--tls-cert-file", str(self.pki.kubelet_serving_cert(node)),
                "--tls-private-key-file", str(self.pki.kubelet_serving_key(node)),
                "--client-ca-file", str(self.pki.ca_cert)]

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log's events so far (audit.k8s.io/v1 Event objects, one JSON per line)."""
        assert self.audit_log is not None, "this cluster runs without an audit log"
        if not self.audit_log.exists():
            return []
        lines = self.audit_log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{") and line.endswith("}")]

    def kubelet(self, node: str) -> KubeletProcess:
        return next(k for k in self.kubelets if k.node == node)

    def logs(self, lines: int = 30) -> str:
        """The tails of every component's log, for a failure message."""
        parts = [("apiserver", self.apiserver.process.log_tail(lines))]
        if self.controllers:
            parts.append(("controller-manager", self.controllers.log_tail(lines)))
        if self.scheduler:
            parts.append(("scheduler", self.scheduler.log_tail(lines)))
        parts += [(f"kubelet {k.node}", k.log_tail(lines)) for k in self.kubelets]
        parts += [(c.name, c.log_tail(lines)) for c in (self.proxy, self.dns) if c is not None]
        return "\n".join(f"--- {name}\n{text}" for name, text in parts)

    def stop(self) -> None:
        """Kubelets and their runtimes first (kill -9, then `dockershim.cleanup` of their nodes), then the
        control plane."""
        try:
            try:
                self._stop_service_network()
            finally:  # the nodes go even if the proxy's cleanup failed
                if self.kubelets:
                    cleanup(self.kubelets)
        finally:
            for component in (self.scheduler, self.controllers, self.apiserver, self.etcd):
                if component is not None:
                    with contextlib.suppress(Exception):
                        component.stop()
            if self.ipam_cidr:
                release_cidr(self.ipam_cidr)
            if self.own_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
