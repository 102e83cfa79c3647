"""Real processes for integration tests: etcd on a temporary data dir and free ports, and minik8s
components as `python -m ...` subprocesses. Nothing is faked; everything is stopped afterwards."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests import warm_python

REPO = Path(__file__).resolve().parent.parent


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now, never the same one twice in this process: two calls in a row may get one
    port back from the kernel (a secure apiserver's plain and secure ports once did, and it could not start)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def ok(r: httpx.Response) -> dict[str, Any]:
    """The JSON of a successful response; a failed one fails the test with the request and the answer."""
    assert r.is_success, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    return r.json()  # type: ignore[no-any-return]


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


# Processes whose log shows an informer's cached object changed in place (machinery/informer.py's read-only check,
# on in the tests): "name: log line", found when they stop; tests/conftest.py fails the test or the session on one.
CACHE_MUTATIONS: list[str] = []
CACHE_MUTATION_MARK = b"CachedObjectMutated"


@dataclass
class Process:
    """A child process with its log file; stop() is SIGTERM then SIGKILL."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | warm_python.WarmProcess | None = None

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 — closed with the process
        try:
            env = {**os.environ, **self.env}
            if warm_python.warm_module(self.argv):  # `python -m COMPONENT`: forked from a warm interpreter
                self.proc = warm_python.popen(self.argv, env=env, cwd=REPO, stdout=log.fileno(), stderr=log.fileno(),
                                              new_session=True)
            else:
                self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env,
                                             start_new_session=True)
        finally:
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
        self._note_cache_mutations()

    def _note_cache_mutations(self) -> None:
        try:
            log = self.log_path.read_bytes()
        except OSError:
            return
        if CACHE_MUTATION_MARK in log:
            lines = [line for line in log.splitlines() if CACHE_MUTATION_MARK in line]
            note = f"{self.name}: {lines[-1].decode(errors='replace')}"
            if note not in CACHE_MUTATIONS:
                CACHE_MUTATIONS.append(note)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class EtcdTLSFiles:
    """etcd's PKI for a test cluster (apiserver.auth.pki.ensure_etcd_pki under workdir): the flags a member
    serves client and peer TLS with, the apiserver's flags, and clients with or without a certificate."""

    def __init__(self, workdir: Path, members: list[str]) -> None:
        from apiserver.auth.pki import ensure_etcd_pki

        self.pki = ensure_etcd_pki(workdir / "etcd-pki", {m: [] for m in members})
        self.ca = self.pki.etcd_ca_cert
        self.client_cert, self.client_key = self.pki.etcd_client_cert, self.pki.etcd_client_key

    def member_flags(self, member: str) -> list[str]:
        d = self.pki.etcd_member_dir(member)
        return ["--client-cert-auth", "--trusted-ca-file", str(d / "ca.crt"),
                "--cert-file", str(d / "server.crt"), "--key-file", str(d / "server.key"),
                "--peer-client-cert-auth", "--peer-trusted-ca-file", str(d / "ca.crt"),
                "--peer-cert-file", str(d / "peer.crt"), "--peer-key-file", str(d / "peer.key")]

    def apiserver_args(self) -> list[str]:
        return ["--etcd-cafile", str(self.ca), "--etcd-certfile", str(self.client_cert),
                "--etcd-keyfile", str(self.client_key)]

    def http(self) -> httpx.Client:
        """A client of etcd's HTTP side (/health, the /v3 gateway) with the apiserver's certificate."""
        context = ssl.create_default_context(cafile=self.ca)
        context.load_cert_chain(self.client_cert, self.client_key)
        return httpx.Client(verify=context, timeout=2, trust_env=False)

    def storage_tls(self) -> Any:
        from apiserver.storage.etcd import EtcdTLS

        return EtcdTLS(str(self.ca), str(self.client_cert), str(self.client_key))


def etcd_read(endpoint: str, *, ca: Path | None = None, cert: Path | None = None, key: Path | None = None,
              server_name: str | None = None) -> str:
    """One read of every key under /registry/ over etcd's gRPC API, as etcdctl would make it (TLS when `ca` is
    given, presenting cert/key if given, checking the server's certificate for `server_name` instead of the
    endpoint's host): "ok: N keys", or the error the client got."""
    import asyncio

    import grpc
    from aetcd import rpc

    from apiserver.storage.etcd import prefix_end

    target = endpoint.split("://", 1)[-1]

    async def read() -> str:
        if ca is not None:
            credentials = grpc.ssl_channel_credentials(ca.read_bytes(), key.read_bytes() if key else None,
                                                       cert.read_bytes() if cert else None)
            options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
            channel = grpc.aio.secure_channel(target, credentials, options=options)
        else:
            channel = grpc.aio.insecure_channel(target)
        try:
            resp = await rpc.KVStub(channel).Range(
                rpc.RangeRequest(key=b"/registry/", range_end=prefix_end(b"/registry/"), keys_only=True), timeout=5)
            return f"ok: {len(resp.kvs)} keys"
        except grpc.aio.AioRpcError as e:
            return f"{e.code().name}: {e.details()}"
        finally:
            await channel.close()

    return asyncio.run(read())


def assert_etcd_takes_only_the_apiserver(endpoint: str, pki_dir: Path, server_name: str | None = None) -> None:
    """etcd at `endpoint` (https://) as local-up and compose run it, with the cluster's PKI in `pki_dir`: plain
    gRPC, TLS without a client certificate and the cluster CA's kubernetes-admin are refused; the apiserver's
    etcd client certificate reads."""
    ca = pki_dir / "etcd" / "ca.crt"
    plain = endpoint.replace("https://", "http://")
    for answer in (etcd_read(plain), etcd_read(endpoint, ca=ca, server_name=server_name),
                   etcd_read(endpoint, ca=ca, cert=pki_dir / "admin.crt", key=pki_dir / "admin.key",
                             server_name=server_name)):
        assert answer.startswith("UNAVAILABLE"), (endpoint, answer)
    answer = etcd_read(endpoint, ca=ca, cert=pki_dir / "apiserver-etcd-client.crt",
                       key=pki_dir / "apiserver-etcd-client.key", server_name=server_name)
    assert answer.startswith("ok: ") and answer != "ok: 0 keys", (endpoint, answer)


class Etcd:
    def __init__(self, workdir: Path, *, tls: bool = False):
        """One member on free loopback ports; `tls`: client and peer TLS with client certificates required
        (etcd's own CA under workdir/etcd-pki), as local-up and compose run it."""
        self.workdir = workdir
        self.client_port, self.peer_port = free_port(), free_port()
        scheme = "https" if tls else "http"
        self.tls = EtcdTLSFiles(workdir, ["test"]) if tls else None
        self.endpoint = f"{scheme}://127.0.0.1:{self.client_port}"
        peer = f"{scheme}://127.0.0.1:{self.peer_port}"
        etcd = shutil.which("etcd") or "/usr/bin/etcd"
        self.process = Process("etcd", [
            etcd, "--name", "test", "--data-dir", str(workdir / "etcd-data"),
            "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"test={peer}", "--log-level", "warn",
            *(self.tls.member_flags("test") if self.tls else []),
        ], workdir / "etcd.log")

    @property
    def apiserver_args(self) -> list[str]:
        return self.tls.apiserver_args() if self.tls else []

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
            if self.tls:
                with self.tls.http() as client:
                    return client.get(f"{self.endpoint}/health").status_code == 200
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
            "--port", str(self.port), *WITHOUT_SERVICE_ACCOUNT_ADMISSION, *getattr(etcd, "apiserver_args", ()),
            *extra_args,
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
