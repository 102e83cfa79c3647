"""The scheduler as a real OS process for tests and benchmarks: `python -m scheduler --master URL
[--scheduler-name NAME]`, waited for until its caches have synced, stopped (or killed) afterwards."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from tests.cluster import Process, wait_for


class SchedulerProcess:
    def __init__(self, workdir: Path, server: str, name: str | None = None, *flags: str) -> None:
        self.name = name or "default-scheduler"
        argv = [sys.executable, "-m", "scheduler", "--master", server, *flags]
        if name:
            argv += ["--scheduler-name", name]
        self.process = Process("scheduler", argv, workdir / f"scheduler-{self.name}-{uuid.uuid4().hex[:6]}.log",
                               env={"KUBECONFIG": str(workdir / "no-kubeconfig")})

    def start(self, timeout: float = 30.0) -> None:
        log = self.process.log_path
        start_at = log.stat().st_size if log.exists() else 0
        self.process.start()

        def synced() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"scheduler exited:\n{self.process.log_tail()}")
            return f"{self.name}: caches synced" in log.read_bytes()[start_at:].decode(errors="replace")

        wait_for(synced, timeout, what=f"scheduler {self.name} to sync")

    def alive(self) -> bool:
        return self.process.alive()

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        """kill -9, as a crash would."""
        self.process.kill()

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines)
