"""`python -m metrics_server` as a real process for tests and benchmarks: plain HTTP on a free port
(the apiserver is given `--metrics-server-url` of it), scraping every `resolution`."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

from tests.cluster import Process, free_port, wait_for


class MetricsServerProcess:
    def __init__(self, workdir: Path, master: str, resolution: str = "2s", *extra: str,
                 port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = Process("metrics-server", [
            sys.executable, "-m", "metrics_server", "--master", master, "--bind-address", "127.0.0.1",
            "--secure-port", str(self.port), "--metric-resolution", resolution, *extra,
        ], workdir / f"metrics-server-{self.port}.log")

    def start(self, timeout: float = 30.0) -> None:
        self.process.start()

        def ready() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"metrics-server exited:\n{self.process.log_tail()}")
            try:
                return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, timeout, 0.1, what="metrics-server ready")

    def stop(self) -> None:
        self.process.stop()

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines)
