"""kube-proxy as a real process for tests and benchmarks (`python -m proxy` with a chain prefix of its
own, so it never touches another cluster's rules on this host), backends as Docker containers of
minik8s/httpd:1 on a Docker network of the test's own (its subnet is the proxy's --cluster-cidr), and
helpers to read the host's packet filter and to talk to a Service."""

from __future__ import annotations

import http.client
import ipaddress
import random
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from tests.cluster import REPO, Process, free_port, wait_for

HTTPD = "minik8s/httpd:1"
BUSYBOX = "minik8s/busybox:1.35"
TEST_LABEL = "io.minik8s.test"


def new_prefix() -> str:
    """A chain prefix of this test's own: KT + 4 hex digits (chain names stay within 28 characters)."""
    return "KT" + uuid.uuid4().hex[:4].upper()


def iptables_save() -> str:
    return subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout


def own_lines(prefix: str) -> list[str]:
    """Lines of iptables-save that mention one of this prefix's chains."""
    return [line for line in iptables_save().splitlines() if f"{prefix}-" in line]


def cleanup_prefix(prefix: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy", "--cleanup", "--iptables-chain-prefix", prefix],
                          capture_output=True, text=True, cwd=REPO, timeout=60)


@dataclass
class ProxyProcess:
    workdir: Path
    master: str
    cluster_cidr: str
    nodes: str = "proxy-test-node"
    prefix: str = field(default_factory=new_prefix)
    extra: tuple[str, ...] = ()
    healthz_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    process: Process | None = None

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "proxy", "--master", self.master, "--hostname-override", self.nodes,
                "--iptables-chain-prefix", self.prefix, "--cluster-cidr", self.cluster_cidr,
                "--min-sync-period", "0.05s", "--sync-period", "30s",
                "--healthz-bind-address", f"127.0.0.1:{self.healthz_port}",
                "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}", *self.extra]

    def start(self) -> None:
        self.process = Process(f"proxy-{self.prefix}", self.argv(), self.workdir / f"proxy-{self.prefix}.log")
        self.process.start()
        wait_for(self.healthy, 30, what=f"kube-proxy {self.prefix} healthy")

    def healthy(self) -> bool:
        assert self.process is not None
        if not self.process.alive():
            raise RuntimeError(f"kube-proxy exited:\n{self.process.log_tail()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.healthz_port, timeout=1)
            conn.request("GET", "/healthz")
            return conn.getresponse().status == 200
        except OSError:
            return False

    def metric(self, name: str) -> float | None:
        conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=2)
        conn.request("GET", "/metrics")
        for line in conn.getresponse().read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def pid(self) -> int:
        assert self.process is not None and self.process.proc is not None
        return self.process.proc.pid

    def cleanup(self) -> None:
        """Stop it and remove every rule and chain of its prefix."""
        self.stop()
        done = cleanup_prefix(self.prefix)
        assert done.returncode == 0, done.stderr


@dataclass
class Backends:
    """httpd containers answering their own name on / , on a Docker network of the test's own."""

    tag: str = field(default_factory=lambda: f"proxytest-{uuid.uuid4().hex[:6]}")
    client: Any = field(default_factory=docker.from_env)
    network: Any = None
    containers: list[Any] = field(default_factory=list)

    def start(self, count: int) -> None:
        self.network = self.client.networks.create(self.tag, driver="bridge", labels={TEST_LABEL: self.tag})
        for i in range(count):
            self.add(f"{self.tag}-b{i}")

    def add(self, name: str) -> Any:
        c = self.client.containers.run(
            HTTPD, ["sh", "-c", f"mkdir -p /w && echo {name} > /w/index.html && exec httpd -f -p 80 -h /w"],
            name=name, detach=True, network=self.tag, labels={TEST_LABEL: self.tag})
        self.containers.append(c)
        ip = self.ip(c)
        wait_for(lambda: http_get(ip, 80) == name, 20, what=f"backend {name} answering")
        return c

    def ip(self, container: Any) -> str:
        container.reload()
        return str(container.attrs["NetworkSettings"]["Networks"][self.tag]["IPAddress"])

    def ips(self) -> list[str]:
        return [self.ip(c) for c in self.containers]

    @property
    def subnet(self) -> str:
        self.network.reload()
        return str(self.network.attrs["IPAM"]["Config"][0]["Subnet"])

    @property
    def gateway(self) -> str:
        """The host's own address on the network: a LOCAL address (NodePorts, load-balancer IPs)."""
        self.network.reload()
        config = self.network.attrs["IPAM"]["Config"][0]
        return str(config.get("Gateway") or next(ipaddress.ip_network(config["Subnet"]).hosts()))

    def remove(self) -> None:
        for c in self.client.containers.list(all=True, filters={"label": f"{TEST_LABEL}={self.tag}"}):
            c.remove(force=True)
        for n in self.client.networks.list(filters={"label": f"{TEST_LABEL}={self.tag}"}):
            n.remove()
        self.client.close()


def http_get(ip: str, port: int, timeout: float = 2.0) -> str:
    """One GET / on a new connection (a new conntrack entry: the load balancing happens per connection)."""
    conn = http.client.HTTPConnection(ip, port, timeout=timeout)
    try:
        conn.request("GET", "/")
        return conn.getresponse().read().decode().strip()
    finally:
        conn.close()


def service_ip_block() -> str:
    """A /24 of 10.96.0.0/12 for one test module's ClusterIPs, chosen at random away from the apiserver's
    usual first addresses, so test clusters on one host do not program the same addresses."""
    return f"10.{random.randint(100, 110)}.{random.randint(0, 255)}"


def free_node_port(taken: str | None = None) -> int:
    """A node port in 30000-32767 no rule on this host uses yet."""
    rules = taken if taken is not None else iptables_save()
    while True:
        port = random.randint(30000, 32767)
        if f"--dport {port} " not in rules:
            return port
