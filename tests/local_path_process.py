"""The local-path provisioner as a real OS process for tests and benchmarks: `python -m local_path_provisioner
--master URL --path DIR`, after `python -m local_path_provisioner install` (its namespace, RBAC, the default
StorageClass local-path and the ConfigMap), waited for until its caches synced; stopped or killed -9.

Leader election is off unless the flags turn it on, as for the controller-manager (tests/controller_process.py):
a provisioner killed and started again would otherwise wait out its predecessor's Lease."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from tests.cluster import REPO, Process, wait_for
from tests.controller_process import IDENTITY, ComponentProcess, leader_election_flags


def install(server: str, path: Path, *flags: str) -> str:
    """`python -m local_path_provisioner install`: what rancher's manifest creates, but the Deployment."""
    done = subprocess.run([sys.executable, "-m", "local_path_provisioner", "install", "--master", server,
                           "--path", str(path), *flags], capture_output=True, text=True, timeout=60, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"install failed:\n{done.stdout}{done.stderr}")
    return done.stdout


class ProvisionerProcess(ComponentProcess):
    def __init__(self, workdir: Path, server: str, path: Path | None, *flags: str) -> None:
        """`path` None: the provisioner reads its base directory from the ConfigMap install wrote."""
        self.path = path
        argv = [sys.executable, "-m", "local_path_provisioner", "--master", server,
                *(["--path", str(path)] if path is not None else []), *leader_election_flags(flags), *flags]
        super().__init__(Process("local-path-provisioner", argv,
                                 workdir / f"local-path-provisioner-{uuid.uuid4().hex[:6]}.log",
                                 env={"KUBECONFIG": str(workdir / "no-kubeconfig")}))

    def start(self, timeout: float = 30.0, *, wait_synced: bool = True) -> None:
        self._launch()

        def ready() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"local-path provisioner exited:\n{self.process.log_tail()}")
            text = self.log_text()
            return "local-path-provisioner: caches synced" in text if wait_synced else \
                IDENTITY.search(text) is not None

        wait_for(ready, timeout, what=f"the local-path provisioner to start\n{self.process.log_tail()}")
