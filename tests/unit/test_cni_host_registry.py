"""cni.host's registry of the node agents that use the shared host rules: a kubelet, a Docker shim, or a node's
own containerd (registered with its pid by containerd_node) keeps the rules in place while it lives."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cni import host


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(host, "RUN_DIR", tmp_path)
    return tmp_path


class Processes:
    """Live processes whose command line is `WORD 60` (sleep under another argv[0]), as containerd's carries
    "containerd"; stopped after the test."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, word: str) -> int:
        proc = subprocess.Popen([word, "60"], executable="/bin/sleep")
        self.started.append(proc)
        return proc.pid

    def states(self) -> list[tuple[int, str, int | None]]:
        """(pid, argv[0], exit status or None while it runs): what a failure shows (once, a live process was
        seen gone in a CI run; this tells by which signal, if it happens again)."""
        return [(p.pid, str(p.args[0]), p.poll()) for p in self.started]


@pytest.fixture
def processes() -> Iterator[Processes]:
    started = Processes()
    yield started
    for proc in started.started:
        proc.kill()
        proc.wait()


def test_a_live_containerd_registered_by_pid_counts_as_a_node_agent(run_dir: Path, processes: Processes) -> None:
    host.register_kubelet("containerd-n2", processes.start("/usr/bin/containerd"))
    host.register_kubelet("n3", processes.start("something-else"))  # alive, but no node agent: its pid was reused
    assert host.other_kubelets_alive("") == ["containerd-n2"], processes.states()
    assert host.other_kubelets_alive("containerd-n2") == []
    host.register_kubelet("n4", 2**22 + 12345)  # beyond pid_max: dead, its entry is dropped
    assert host.other_kubelets_alive("") == ["containerd-n2"], processes.states()
    assert not (run_dir / "kubelets" / "n4").exists()


def test_register_without_a_pid_records_this_process(run_dir: Path) -> None:
    host.register_kubelet("n1")
    assert (run_dir / "kubelets" / "n1").read_text().strip() == str(__import__("os").getpid())
    host.unregister_kubelet("n1")
    assert not (run_dir / "kubelets" / "n1").exists()
