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
from tests.controller_process import ComponentProcess, leader_election_flags, serving_flags


class SchedulerProcess(ComponentProcess):
    def __init__(self, workdir: Path, server: str, name: str | None = None, *flags: str) -> None:
        self.name = name or "default-scheduler"
        argv = [sys.executable, "-m", "scheduler", "--master", server, *leader_election_flags(flags),
                *serving_flags(flags), *flags]
        if name:
            argv += ["--scheduler-name", name]
        super().__init__(Process("scheduler", argv, workdir / f"scheduler-{self.name}-{uuid.uuid4().hex[:6]}.log",
                                 env={"KUBECONFIG": str(workdir / "no-kubeconfig")}))

    def start(self, timeout: float = 30.0) -> None:
        """Start and wait until the caches synced (a standby fills them too, before it campaigns)."""
        self._launch()

        def synced() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"scheduler exited:\n{self.process.log_tail()}")
            return f"{self.name}: caches synced" in self.log_text()

        wait_for(synced, timeout, what=f"scheduler {self.name} to sync")
