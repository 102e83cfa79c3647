"""The controller-manager as a real OS process for integration tests: `python -m controllers
--master URL --controllers a,b [flags]`, started by a test, waited for until every chosen
controller's caches have synced, and stopped (or killed, as a crash) afterwards."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.cluster import Process, wait_for


class ControllerProcess:
    """Test-side handle: start the process, wait until its log says the caches synced, stop it."""

    def __init__(self, workdir: Path, server: str, controllers: list[str], *flags: str) -> None:
        self.controllers = controllers
        self.process = Process(
            "controller-manager",
            [sys.executable, "-m", "controllers", "--master", server, "--controllers", ",".join(controllers),
             *flags],
            workdir / f"controller-manager-{'-'.join(controllers)}.log",
            # no kubeconfig of the machine's: --master alone says where the apiserver is
            env={"KUBECONFIG": str(workdir / "no-kubeconfig")},
        )

    def start(self, timeout: float = 30.0) -> None:
        log = self.process.log_path
        start_at = log.stat().st_size if log.exists() else 0
        self.process.start()

        def synced() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"controller-manager exited:\n{self.process.log_tail()}")
            text = log.read_bytes()[start_at:].decode(errors="replace")
            return all(f"{name}: caches synced" in text for name in self.controllers)

        wait_for(synced, timeout, what=f"controllers {self.controllers} to sync\n{self.process.log_tail()}")

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        """kill -9, as a crash would."""
        self.process.kill()

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines)
