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


@pytest.fixture
def process_named() -> Iterator[object]:
    started: list[subprocess.Popen[bytes]] = []

    def start(word: str) -> int:
        # a live process whose command line is `word 60` (sleep under another argv[0]), as containerd's carries
        # "containerd"
        proc = subprocess.Popen([word, "60"], executable="/bin/sleep")
        started.append(proc)
        return proc.pid

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_live_containerd_registered_by_pid_counts_as_a_node_agent(run_dir: Path, process_named) -> None:  # type: ignore[no-untyped-def]
    host.register_kubelet("containerd-n2", process_named("/usr/bin/containerd"))
    host.register_kubelet("n3", process_named("something-else"))  # alive, but no node agent: its pid was reused
    assert host.other_kubelets_alive("") == ["containerd-n2"]
    assert host.other_kubelets_alive("containerd-n2") == []
    host.register_kubelet("n4", 2**22 + 12345)  # beyond pid_max: dead, its entry is dropped
    assert host.other_kubelets_alive("") == ["containerd-n2"]
    assert not (run_dir / "kubelets" / "n4").exists()


def test_register_without_a_pid_records_this_process(run_dir: Path) -> None:
    host.register_kubelet("n1")
    assert (run_dir / "kubelets" / "n1").read_text().strip() == str(__import__("os").getpid())
    host.unregister_kubelet("n1")
    assert not (run_dir / "kubelets" / "n1").exists()
