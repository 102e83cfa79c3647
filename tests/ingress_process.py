"""The ingress controller as a real OS process for tests and benchmarks: `python -m ingress_nginx --master URL`
with the host's nginx on free loopback ports and a run directory of its own; real backends (busybox httpd in
minik8s/httpd:1 containers on a Docker network of the caller's own) that answer their own name. stop() stops the
controller (which stops its nginx) and kills an nginx it could not stop: only ever ours, found by the run
directory on its command line."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.cluster import Process, make_workdir, wait_for

TEST_LABEL = "io.minik8s.test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(ip: str, port: int, host: str, path: str, timeout: float = 5.0) -> tuple[int, str]:
    """One GET on a new connection, with a Host header: (status, body)."""
    conn = http.client.HTTPConnection(ip, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": host})
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace").strip()
    finally:
        conn.close()


def endpoint_slice(namespace: str, service: str, ips: list[str], port: int = 80) -> dict[str, Any]:
    """The EndpointSlice of a selector-less Service whose port is named http."""
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{service}-1", "namespace": namespace,
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips]}


class Backends:
    """busybox httpd containers that answer their own name on /, /exact, /app/ and /app/x, /appx; /big is 2 MB."""

    def __init__(self, tag: str) -> None:
        import docker

        self.client = docker.from_env()
        self.tag = tag
        self.network = self.client.networks.create(self.tag, driver="bridge", labels={TEST_LABEL: self.tag})
        self.ips: dict[str, str] = {}

    def add(self, name: str) -> str:
        script = (f"mkdir -p /w/app && for f in /w/index.html /w/exact /w/app/index.html /w/app/x /w/appx; "
                  f"do echo {name} > $f; done && dd if=/dev/zero of=/w/big bs=1M count=2 2>/dev/null && "
                  "exec httpd -f -p 80 -h /w")
        c = self.client.containers.run("minik8s/httpd:1", ["sh", "-c", script], name=f"{self.tag}-{name}",
                                       detach=True, network=self.tag, labels={TEST_LABEL: self.tag})
        c.reload()
        self.ips[name] = str(c.attrs["NetworkSettings"]["Networks"][self.tag]["IPAddress"])
        wait_for(lambda: get(self.ips[name], 80, "x", "/") == (200, name), 30, what=f"backend {name}")
        return self.ips[name]

    def remove(self) -> None:
        for c in self.client.containers.list(all=True, filters={"label": f"{TEST_LABEL}={self.tag}"}):
            c.remove(force=True)
        self.network.remove()
        self.client.close()


class IngressController:
    def __init__(self, server: str, ingress_class: str, lease_namespace: str, *flags: str,
                 election_id: str | None = None, kubeconfig: Path | None = None) -> None:
        self.workdir = make_workdir("minik8s-ingress-")
        self.workdir.chmod(0o755)  # nginx's workers (an unprivileged user) reach the run dir's tmp/ through it
        self.run_dir = self.workdir / "run"
        self.http, self.https, self.health = free_port(), free_port(), free_port()
        connect = ["--kubeconfig", str(kubeconfig)] if kubeconfig is not None else ["--master", server]
        argv = [sys.executable, "-m", "ingress_nginx", *connect, "--ingress-class", ingress_class,
                "--run-dir", str(self.run_dir), "--bind-address", "127.0.0.1", "--http-port", str(self.http),
                "--https-port", str(self.https), "--healthz-port", str(self.health),
                "--election-id", election_id or f"ingress-{uuid.uuid4().hex[:6]}", "--leader-elect-resource-namespace",
                lease_namespace, *flags]
        self.process = Process("ingress-nginx", argv, self.workdir / "controller.log")
        self.groups: set[int] = set()

    def start(self) -> None:
        self.process.start()
        def healthy() -> bool:
            if not self.process.alive():
                raise AssertionError(f"the controller exited:\n{self.process.log_tail()}")
            return httpx.get(f"http://127.0.0.1:{self.health}/healthz", timeout=2).status_code == 200

        wait_for(healthy, 60, what="the controller's /healthz")
        self.remember_group()

    def metric(self, name: str) -> int:
        text = httpx.get(f"http://127.0.0.1:{self.health}/metrics", timeout=5).text
        return next(int(line.split()[1]) for line in text.splitlines() if line.startswith(name + " "))

    def settled(self, timeout: float = 20) -> None:
        """Until no change waits for a reload and the old workers of the last one have exited (until then they
        may answer a new connection now and then with the old configuration)."""
        wait_for(lambda: self.metric("nginx_ingress_controller_reload_in_progress") == 0, timeout,
                 what="the reload over")

    def conf(self) -> str:
        return (self.run_dir / "nginx.conf").read_text()

    def nginx_pids(self) -> list[int]:
        """Our nginx processes: those naming our run dir (the master) and the members of its process group (the
        workers, orphaned or not) whose leader was written to our pid file."""
        found = set()
        groups = set(self.groups)
        with contextlib.suppress(OSError, ValueError):
            groups.add(int((self.run_dir / "nginx.pid").read_text()))
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    cmdline = (proc / "cmdline").read_bytes()
                    fields = (proc / "stat").read_text().rsplit(")", 1)[-1].split()
                except OSError:
                    continue
                if fields[0] == "Z" or not cmdline.startswith(b"nginx"):
                    continue
                if str(self.run_dir).encode() in cmdline or int(fields[2]) in groups:
                    found.add(int(proc.name))
        return sorted(found)

    def remember_group(self) -> None:
        """Note nginx's process group (its master's pid) before something may kill the master."""
        with contextlib.suppress(OSError, ValueError):
            self.groups.add(int((self.run_dir / "nginx.pid").read_text()))

    def stop(self) -> None:
        """Stop the controller (it stops nginx gracefully); kill what is left of ours; remove the work dir."""
        self.remember_group()
        self.process.stop(timeout=30)
        try:
            try:
                wait_for(lambda: not self.nginx_pids(), 20, what="nginx gone")
            except TimeoutError as e:
                left = {pid: Path(f"/proc/{pid}/stat").read_text() for pid in self.nginx_pids()}
                raise AssertionError(f"nginx left: {left}\n{self.process.log_tail(60)}") from e
        finally:
            for pid in self.nginx_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            shutil.rmtree(self.workdir, ignore_errors=True)
