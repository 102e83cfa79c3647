"""The controller-manager as a real OS process for integration tests: `python -m controllers
--master URL --controllers a,b [flags]`, started by a test, waited for until every chosen
controller's caches have synced, and stopped (or killed, as a crash) afterwards.

Leader election is off unless the flags turn it on (`--leader-elect`, `--leader-elect=true`): tests
start many controller-managers one after the other against one apiserver, and kill some of them;
with election on, each successor would wait out its killed predecessor's Lease (a new process is a
new identity), and two tests' managers running at once would take turns instead of both acting.
tests/integration/test_leader_election.py turns it on, with a Lease name of its own.
"""

from __future__ import annotations

import re
import sys
import uuid
from pathlib import Path

from tests.cluster import Process, wait_for

IDENTITY = re.compile(r"attempting to acquire leader lease \S+ as (\S+?)\.\.\.")


def leader_election_flags(flags: tuple[str, ...]) -> list[str]:
    """`--leader-elect=false` unless the flags say something about --leader-elect themselves."""
    if any(f == "--leader-elect" or f.startswith("--leader-elect=") for f in flags):
        return []
    return ["--leader-elect=false"]


def serving_flags(flags: tuple[str, ...]) -> list[str]:
    """`--secure-port=0` (no HTTPS: many components run on this host at once) unless the flags give a port."""
    if any(f == "--secure-port" or f.startswith("--secure-port=") for f in flags):
        return []
    return ["--secure-port=0"]


class ComponentProcess:
    """What the controller-manager's and the scheduler's handles share: the process, this run's part of its
    log, its leader-election identity, stop and kill."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self._start_at = 0

    def _launch(self) -> None:
        """Start the process; this run's log begins where the file ends now."""
        log = self.process.log_path
        self._start_at = log.stat().st_size if log.exists() else 0
        self.process.start()

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


class ControllerProcess(ComponentProcess):
    """Test-side handle: start the process, wait until its log says the caches synced, stop it."""

    def __init__(self, workdir: Path, server: str, controllers: list[str], *flags: str) -> None:
        self.controllers = controllers
        # the log's name says which controllers run, while that fits a file name (255 bytes)
        named = "-".join(controllers) if len(controllers) <= 6 else f"{len(controllers)}-controllers"
        super().__init__(Process(
            "controller-manager",
            [sys.executable, "-m", "controllers", "--master", server, "--controllers", ",".join(controllers),
             *leader_election_flags(flags), *serving_flags(flags), *flags],
            workdir / f"controller-manager-{named}-{uuid.uuid4().hex[:6]}.log",
            # no kubeconfig of the machine's: --master alone says where the apiserver is
            env={"KUBECONFIG": str(workdir / "no-kubeconfig")},
        ))

    def start(self, timeout: float = 30.0, *, wait_synced: bool = True) -> None:
        """Start; wait until the controllers' caches synced (wait_synced=False: a standby, which syncs
        nothing until it leads, is waited for only until it campaigns)."""
        self._launch()

        def ready() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"controller-manager exited:\n{self.process.log_tail()}")
            text = self.log_text()
            if not wait_synced:
                return IDENTITY.search(text) is not None
            return all(f"{name}: caches synced" in text for name in self.controllers)

        wait_for(ready, timeout, what=f"controllers {self.controllers} to start\n{self.process.log_tail()}")
