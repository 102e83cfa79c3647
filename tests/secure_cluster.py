"""A secured cluster whose pods reach the apiserver, as real processes: etcd; an apiserver serving HTTPS only, on
this host's address (the `kubernetes` Service's endpoint, which pods reach through kube-proxy), with every
admission plugin and Node,RBAC; the controller-manager's serviceaccount and root-ca-cert-publisher controllers
(a namespace gets its `default` account and `kube-root-ca.crt`); kubelets (the Docker shim) as system:node:NAME;
kube-proxy. Used by tests/integration/test_pod_volumes.py and bench/pod_volumes_bench.py. `stop()` removes
everything it made, also after a failed start.

Optionally (tests/e2e/test_road_server.py): more controllers (`controllers`), the scheduler as
system:kube-scheduler (`scheduler`), and the road server (`road`: python -m road as system:road-server,
road.minik8s.io behind the apiserver) with every component given `--tracing-config-file` towards it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import ssl
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import httpx

from apiserver.auth import pki
from machinery.netutil import default_node_ip
from tests.cluster import REPO, Etcd, Process, free_port, make_workdir, wait_for
from tests.controller_process import ControllerProcess
from tests.node_process import KubeletProcess, cleanup, ensure_images, free_cidr_block, free_service_cidr, release_cidr
from tests.road_process import RoadServer, road_args, write_tracing_config
from tests.scheduler_process import SchedulerProcess


class _Url:
    def __init__(self, url: str) -> None:
        self.url = url


class SecureCluster:
    def __init__(self, node_count: int = 2, prefix: str = "pv", *, proxy: bool = True,
                 runtimes: Sequence[str] = (), audit: bool = False,
                 controllers: Sequence[str] = ("serviceaccount", "root-ca-cert-publisher"), scheduler: bool = False,
                 road: bool = False) -> None:
        self.with_proxy = proxy
        self.runtimes = list(runtimes)  # each node's CRI runtime, in order (default: the Docker shim)
        self.audit = audit  # the apiserver writes its audit log to audit_log
        self.workdir = make_workdir(f"minik8s-{prefix}-")
        self.tag = uuid.uuid4().hex[:6]
        self.nodes = [f"{prefix}-{self.tag}-{i + 1}" for i in range(node_count)]
        self.ip = default_node_ip()
        self.port = free_port()
        self.url = f"https://{self.ip}:{self.port}"
        self.etcd = Etcd(self.workdir)
        self.service_cidr = ""
        self.pod_block = ""
        self.proxy_prefix = f"KV{uuid.uuid4().hex[:4].upper()}"
        self.apiserver: Process | None = None
        self.controllers: ControllerProcess | None = None
        self.proxy: Process | None = None
        self.kubelets: list[KubeletProcess] = []
        self.controller_names = list(controllers)
        self.with_scheduler = scheduler
        self.with_road = road
        self.scheduler: SchedulerProcess | None = None
        self.road: RoadServer | None = None

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def client(self, identity: str = "admin", timeout: float = 15) -> httpx.Client:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(self.pki.cert(identity), self.pki.key(identity))
        return httpx.Client(base_url=self.url, verify=ctx, timeout=timeout)

    def start(self) -> SecureCluster:
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> SecureCluster:
        ensure_images()
        self.service_cidr = free_service_cidr()
        self.service_ip = str(ipaddress.ip_network(self.service_cidr)[1])
        self.pod_block = free_cidr_block(23 if len(self.nodes) <= 2 else 22)
        block = ipaddress.ip_network(self.pod_block)
        self.root = self.workdir / "pki"
        self.pki = pki.ensure_pki(self.root, self.url, nodes=self.nodes, server_hosts=[self.ip, self.service_ip])
        self.etcd.start()
        tracing: list[str] = []
        road_flags: list[str] = []
        if self.with_road:
            self.road = RoadServer(self.pki, self.workdir)
            config = write_tracing_config(self.workdir / "tracing-config.yaml", self.road.otlp_port)
            tracing = ["--tracing-config-file", str(config)]
            road_flags = road_args(self.pki, self.road.port)
        self.apiserver = Process("apiserver", [
            sys.executable, "-m", "apiserver", "--etcd-servers", self.etcd.endpoint, "--bind-address", self.ip,
            "--port", "0", "--secure-port", str(self.port), "--pki-dir", str(self.root),
            "--service-cluster-ip-range", self.service_cidr, "--etcd-compaction-interval", "0",
            "--kubelet-client-certificate", str(self.pki.kubelet_client_cert),
            "--kubelet-client-key", str(self.pki.kubelet_client_key),
            "--kubelet-certificate-authority", str(self.pki.ca_cert),
            *(["--audit-log-path", str(self.audit_log)] if self.audit else []), *tracing, *road_flags],
            self.workdir / "apiserver.log")
        self.apiserver.start()

        def ready() -> bool:
            assert self.apiserver is not None
            if not self.apiserver.alive():
                raise RuntimeError(f"apiserver exited:\n{self.apiserver.log_tail()}")
            with contextlib.suppress(httpx.HTTPError), self.client(timeout=2) as c:
                return c.get("/readyz").status_code == 200
            return False

        wait_for(ready, 60, what="the secure apiserver")
        if self.road is not None:
            self.road.start()
        self.controllers = ControllerProcess(self.workdir, self.url, self.controller_names,
                                             "--kubeconfig", str(self.pki.kubeconfig("controller-manager")),
                                             *(["--cluster-cidr", self.pod_block, "--node-cidr-mask-size", "24"]
                                               if "nodeipam" in self.controller_names else []), *tracing)
        self.controllers.start(60)
        if self.with_scheduler:
            self.scheduler = SchedulerProcess(self.workdir, self.url, None, "--kubeconfig",
                                              str(self.pki.kubeconfig("scheduler")), *tracing)
            self.scheduler.start(60)
        subnets = list(block.subnets(new_prefix=24))[:len(self.nodes)]
        for i, (node, subnet) in enumerate(zip(self.nodes, subnets, strict=True)):
            kubelet = KubeletProcess(self.workdir, _Url(self.url), node, str(subnet),  # type: ignore[arg-type]
                                     extra_args=["--kubeconfig", str(self.pki.kubeconfig(f"kubelet-{node}")),
                                                 "--tls-cert-file", str(self.pki.kubelet_serving_cert(node)),
                                                 "--tls-private-key-file", str(self.pki.kubelet_serving_key(node)),
                                                 "--client-ca-file", str(self.pki.ca_cert), *tracing],
                                     tls=(self.pki.ca_cert, self.pki.kubelet_client_cert, self.pki.kubelet_client_key),
                                     container_runtime=self.runtimes[i] if i < len(self.runtimes) else "docker")
            self.kubelets.append(kubelet)
        with self.client() as api:
            for kubelet in self.kubelets:
                kubelet.start(api)
        if not self.with_proxy:
            return self
        healthz, metrics = free_port(), free_port()
        self.proxy = Process("kube-proxy", [
            sys.executable, "-m", "proxy", "--kubeconfig", str(self.pki.kubeconfig("kube-proxy")),
            "--hostname-override", ",".join(self.nodes), "--iptables-chain-prefix", self.proxy_prefix,
            "--cluster-cidr", self.pod_block, "--min-sync-period", "0.05s", "--sync-period", "30s",
            "--healthz-bind-address", f"127.0.0.1:{healthz}", "--metrics-bind-address", f"127.0.0.1:{metrics}"],
            self.workdir / "kube-proxy.log")
        self.proxy.start()

        def proxy_healthy() -> bool:
            assert self.proxy is not None
            if not self.proxy.alive():
                raise RuntimeError(f"kube-proxy exited:\n{self.proxy.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"http://127.0.0.1:{healthz}/healthz", timeout=1).status_code == 200
            return False

        wait_for(proxy_healthy, 60, what="kube-proxy healthy")
        return self

    def stop(self) -> None:
        try:
            if self.proxy is not None:
                with contextlib.suppress(Exception):
                    self.proxy.stop()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    subprocess.run([sys.executable, "-m", "proxy", "--cleanup", "--iptables-chain-prefix",
                                    self.proxy_prefix], capture_output=True, text=True, cwd=REPO, timeout=180)
            if self.kubelets:
                cleanup(self.kubelets)
        finally:
            for component in (self.scheduler, self.controllers, self.road, self.apiserver, self.etcd):
                if component is not None:
                    with contextlib.suppress(Exception):
                        component.stop()
            for cidr in (self.service_cidr, self.pod_block):
                if cidr:
                    release_cidr(cidr)
            shutil.rmtree(self.workdir, ignore_errors=True)

    def logs(self) -> str:
        parts = [("apiserver", self.apiserver.log_tail(20) if self.apiserver else "")]
        parts += [(k.node, k.log_tail(20)) for k in self.kubelets]
        return "\n".join(f"--- {n}\n{t}" for n, t in parts)
