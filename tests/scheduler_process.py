"""The scheduler as a real OS process for tests and benchmarks: `python -m scheduler --master URL
[--scheduler-name NAME]`, waited for until its caches have synced, stopped (or killed) afterwards.

Leader election is off unless the flags turn it on, for the reasons tests/controller_process.py
gives (a restarted scheduler would wait out its killed predecessor's Lease; schedulers of different
names running at once would share the default Lease kube-system/kube-scheduler and take turns)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from tests.cluster import Process, wait_for
from tests.controller_process import IDENTITY, leader_election_flags


class SchedulerProcess:
    def __init__(self, workdir: Path, server: str, name: str | None = None, *flags: str) -> None:
        self.name = name or "default-scheduler"
        argv = [sys.executable, "-m", "scheduler", "--master", server, *leader_election_flags(flags), *flags]
        if name:
            argv += ["--scheduler-name", name]
        self.process = Process("scheduler", argv, workdir / f"scheduler-{self.name}-{uuid.uuid4().hex[:6]}.log",
                               env={"KUBECONFIG": str(workdir / "no-kubeconfig")})
        self._start_at = 0

    def start(self, timeout: float = 30.0) -> None:
        """Start and wait until the caches synced (a standby fills them too, before it campaigns)."""
        log = self.process.log_path
        self._start_at = log.stat().st_size if log.exists() else 0
        self.process.start()

        def synced() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"scheduler exited:\n{self.process.log_tail()}")
            return f"{self.name}: caches synced" in self.log_text()

        wait_for(synced, timeout, what=f"scheduler {self.name} to sync")

    def log_text(self) -> str:
        """What this run of the process logged so far."""
        return self.process.log_path.read_bytes()[self._start_at:].decode(errors="replace")

    def identity(self) -> str:
        """The leader-election identity this run campaigns as (`<hostname>_<uuid>`)."""
        m = IDENTITY.search(self.log_text())
        if m is None:
            raise RuntimeError(f"no leader-election identity in the log:\n{self.process.log_tail()}")
        return m.group(1)

    def alive(self) -> bool:
        return self.process.alive()

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        """kill -9, as a crash would."""
        self.process.kill()

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines)
