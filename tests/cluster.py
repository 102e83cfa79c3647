"""Real processes for integration tests: etcd on a temporary data dir and free ports, and minik8s
components as `python -m ...` subprocesses. Nothing is faked; everything is stopped afterwards."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition: Callable[[], object], timeout: float = 20.0, interval: float = 0.05,
             what: str = "condition") -> object:
    """Poll until condition() is truthy; fail with `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as e:
            last_error = e
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_error})"
                                                                           if last_error else ""))


@dataclass
class Process:
    """A child process with its log file; stop() is SIGTERM then SIGKILL."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 — closed with the process
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                     env={**os.environ, **self.env}, start_new_session=True)
        log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9, as a crash would."""
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 10.0) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Etcd:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.client_port, self.peer_port = free_port(), free_port()
        self.endpoint = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        etcd = shutil.which("etcd") or "/usr/bin/etcd"
        self.process = Process("etcd", [
            etcd, "--name", "test", "--data-dir", str(workdir / "etcd-data"),
            "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"test={peer}", "--log-level", "warn",
        ], workdir / "etcd.log")

    def start(self) -> None:
        self.process.start()
        try:
            wait_for(self.healthy, 30, what=f"etcd on {self.endpoint}")
        except Exception:
            self.process.stop()  # never leave a half-started etcd behind
            raise

    def healthy(self) -> bool:
        if not self.process.alive():
            raise RuntimeError(f"etcd exited:\n{self.process.log_tail()}")
        try:
            return httpx.get(f"{self.endpoint}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        self.process.stop()


# Most tests run no service-account controller, so no namespace has its `default` ServiceAccount and
# the ServiceAccount admission plugin would refuse every pod: as upstream's integration tests do, the
# test apiservers run without it unless a test turns it on (a later --disable-admission-plugins wins).
WITHOUT_SERVICE_ACCOUNT_ADMISSION = ("--disable-admission-plugins", "ServiceAccount")
ALL_ADMISSION = ("--disable-admission-plugins", "")


class ApiServer:
    def __init__(self, workdir: Path, etcd: Etcd, *extra_args: str, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = Process("apiserver", [
            sys.executable, "-m", "apiserver", "--etcd-servers", etcd.endpoint, "--bind-address", "127.0.0.1",
            "--port", str(self.port), *WITHOUT_SERVICE_ACCOUNT_ADMISSION, *extra_args,
        ], workdir / f"apiserver-{self.port}.log")

    def start(self) -> None:
        self.process.start()
        try:
            wait_for(self.ready, 30, what=f"apiserver on {self.url}")
        except Exception:
            self.process.stop()
            raise

    def ready(self) -> bool:
        if not self.process.alive():
            raise RuntimeError(f"apiserver exited:\n{self.process.log_tail()}")
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def restart(self) -> None:
        self.process.stop()
        self.start()

    def stop(self) -> None:
        self.process.stop()


def make_workdir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
