"""tests/warm_python.py, the warm starts of the test session: a run forked from a warm interpreter answers
as a new interpreter's run does (exit code, stdout, stderr, stdin, environment, working directory), a timed
out run is killed, and a component started through tests/cluster.py's Process is a process of its own in a
session of its own that stop() ends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import warm_python
from tests.cluster import Process, wait_for

KUBECTL = [sys.executable, "-m", "kubectl"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {**{k: v for k, v in os.environ.items() if k != "KUBECONFIG"}, "HOME": str(home),
            "KUBECONFIG": str(tmp_path / "kubeconfig")}


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An address that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def cold(argv: list[str], env: dict[str, str], cwd: Path, stdin: str | None = None) -> tuple[int, str, str]:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, cwd=cwd, timeout=60)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("args, stdin", [
    (["version", "--client"], None),  # exit 0, stdout
    (["bogus"], None),  # exit 1, one line on stderr
    (["get", "pods", "-o", "xml"], None),  # an argument error
    (["config", "view"], None),  # reads $KUBECONFIG and $HOME of this run's environment
    (["apply", "-f", "-"], "kind: [unclosed\n"),  # stdin read to its end
])
def test_a_warm_run_answers_as_a_new_interpreter(args: list[str], stdin: str | None, env: dict[str, str],
                                                 tmp_path: Path) -> None:
    warm_python.enable()
    argv = [*KUBECTL, *args]
    assert warm_python.warm_module(argv) == "kubectl"
    assert warm_python.run(argv, env=env, cwd=tmp_path, stdin=stdin) == cold(argv, env, tmp_path, stdin)


def test_a_warm_run_past_its_timeout_is_killed(env: dict[str, str], tmp_path: Path, silent_server: str) -> None:
    warm_python.enable()
    with pytest.raises(subprocess.TimeoutExpired):
        warm_python.run([*KUBECTL, "-s", silent_server, "get", "pods"], env=env, cwd=tmp_path, timeout=3)


def test_a_warm_component_is_a_process_of_its_own_session(tmp_path: Path, silent_server: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    warm_python.enable()
    argv = [*KUBECTL, "-s", silent_server, "get", "pods", "-w"]
    codes = []
    for mode in ("cold", "warm"):
        monkeypatch.setenv("MINIK8S_TEST_COLD_START", "1" if mode == "cold" else "0")
        process = Process(f"watch-{mode}", argv, tmp_path / f"watch-{mode}.log", env={"HOME": str(tmp_path)})
        process.start()
        try:
            assert isinstance(process.proc, warm_python.WarmProcess) == (mode == "warm")
            assert process.proc is not None
            pid = process.proc.pid
            assert pid != os.getpid() and os.getpgid(pid) == pid and os.getsid(pid) == pid  # start_new_session
            assert Path(f"/proc/{pid}/cwd").resolve() == warm_python.REPO
            assert process.alive()
            process.stop()  # SIGTERM to its process group
            assert not process.alive()
            codes.append(process.proc.returncode)
            wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists(), 10, what="the stopped process gone")
        finally:
            process.kill()
    assert codes[0] == codes[1], codes


def test_cold_start_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    warm_python.enable()
    monkeypatch.setenv("MINIK8S_TEST_COLD_START", "1")
    assert warm_python.warm_module([*KUBECTL, "version"]) is None
    monkeypatch.delenv("MINIK8S_TEST_COLD_START")
    assert warm_python.warm_module([*KUBECTL, "version"]) == "kubectl"
    assert warm_python.warm_module([sys.executable, "-m", "pytest"]) is None  # only the project's components
    assert warm_python.warm_module(["/usr/bin/etcd", "-m", "kubectl"]) is None
