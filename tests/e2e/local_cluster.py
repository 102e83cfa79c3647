"""A whole minik8s cluster as local processes, for end-to-end tests and the pod-startup benchmark: its own
etcd, apiserver (plain HTTP; it reaches the kubelets over HTTPS as kube-apiserver-kubelet-client, with
certificates from a cluster CA in the work dir), controller-manager (every controller, node IPAM on a /24 block of
10.244.0.0/16 free on this host), scheduler, and kubelets with unique node names, each on its CRI runtime: the
Docker shim (the default) or a containerd of its own (`runtimes`), with the host's CNI plugins. `stop()`
removes everything it made — processes, containers, CNI attachments,
bridges, IP leases, state dirs, and the shared host rules when no other kubelet needs them — and is safe
to call after a failed or partial start."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from apiserver.auth.pki import ensure_kubelet_pki
from tests.cluster import ApiServer, Etcd, make_workdir
from tests.controller_process import ControllerProcess
from tests.kubectl import write_kubeconfig
from tests.node_process import BACKOFF_BASE, KubeletProcess, cleanup, ensure_images, free_cidr_block, release_cidr
from tests.scheduler_process import SchedulerProcess

CONTROLLERS = ["deployment", "replicaset", "garbagecollector", "namespace", "nodeipam", "nodelifecycle",
               "serviceaccount", "endpointslice", "endpoint", "endpointslicemirroring", "servicelb"]
CLUSTER_CIDR = "10.244.0.0/16"


class LocalCluster:
    def __init__(self, prefix: str = "e2e", node_count: int = 2, *, backoff_base: float = BACKOFF_BASE,
                 kubelet_args: Sequence[str] = (), workdir: Path | None = None, audit: bool = False,
                 controller_args: Sequence[str] = (), runtimes: Sequence[str] = ("docker",)) -> None:
        self.tag = uuid.uuid4().hex[:6]
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
        except BaseException:
            self.stop()
            raise
        return self

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
        return "\n".join(f"--- {name}\n{text}" for name, text in parts)

    def stop(self) -> None:
        """Kubelets and their runtimes first (kill -9, then `dockershim.cleanup` of their nodes), then the
        control plane."""
        try:
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
