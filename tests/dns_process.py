"""The cluster DNS as a real OS process for tests and benchmarks: `python -m dns --master URL` on
loopback, on a free port (UDP and TCP), waited for until /ready answers; stopped or killed after.
Queries go through dnslib's client (DNSRecord.send), UDP or TCP."""

from __future__ import annotations

import socket
import sys
import uuid
from pathlib import Path

import httpx
from dnslib import EDNS0, QTYPE, DNSRecord

from tests.cluster import Process, wait_for


def free_dns_port() -> int:
    """A port free for both UDP and TCP on loopback."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = int(udp.getsockname()[1])
            with socket.socket() as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port


class DNSProcess:
    def __init__(self, workdir: Path, server: str, *flags: str) -> None:
        self.port = free_dns_port()
        self.health_port = free_dns_port()
        self.flags = flags
        argv = [sys.executable, "-m", "dns", "--master", server, "--bind-address", "127.0.0.1",
                "--port", str(self.port), "--health-port", str(self.health_port), *flags]
        self.process = Process("dns", argv, workdir / f"dns-{uuid.uuid4().hex[:6]}.log")

    def ready(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.health_port}/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def start(self, timeout: float = 30.0) -> None:
        """Start and wait for /ready; a process that exits meanwhile fails at once, with its log."""
        self.process.start()
        try:
            wait_for(lambda: self.ready() or not self.process.alive(), timeout, what="dns to be ready")
        except Exception:
            self.process.stop()
            raise TimeoutError(f"dns not ready:\n{self.process.log_tail()}") from None
        if not self.process.alive():
            raise RuntimeError(f"dns exited:\n{self.process.log_tail()}")

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        self.process.kill()

    def query(self, name: str, qtype: str = "A", *, tcp: bool = False, timeout: float = 2.0,
              edns: int | None = None) -> DNSRecord:
        question = DNSRecord.question(name, qtype)
        if edns is not None:
            question.add_ar(EDNS0(udp_len=edns))
        return DNSRecord.parse(question.send("127.0.0.1", self.port, tcp=tcp, timeout=timeout))


def answers(reply: DNSRecord, qtype: str | None = None) -> list[str]:
    """The rdata of the answer section (of one type), as text, sorted."""
    return sorted(str(rr.rdata) for rr in reply.rr if qtype is None or QTYPE[rr.rtype] == qtype)
