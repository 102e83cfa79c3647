"""Real kubectl binaries against a test apiserver: find a versioned binary, run it with its own
kubeconfig and discovery cache, and read `get -w` output line by line with a deadline.

The machine's google-cloud-sdk ships kubectl.1.27 … kubectl.1.33 next to the plain `kubectl`.
Every run has a deadline; a watch is a Popen that is killed when the test is done with it."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TIMEOUT = 60.0
_ENV_DROP = ("KUBECONFIG", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


def kubectl_dir() -> Path | None:
    """The folder that holds the versioned binaries: the one the plain `kubectl` resolves into."""
    plain = shutil.which("kubectl")
    return Path(os.path.realpath(plain)).parent if plain else None


def find_kubectl(version: str) -> Path | None:
    """`kubectl.<version>` (e.g. "1.27") if it is installed and executable, else None."""
    folder = kubectl_dir()
    candidates = [folder / f"kubectl.{version}"] if folder else []
    if found := shutil.which(f"kubectl.{version}"):
        candidates.append(Path(found))
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def write_kubeconfig(path: Path, server: str, namespace: str | None = None) -> Path:
    """A kubeconfig with one cluster at `server`, no credentials (plain http), and a default namespace."""
    context = f"{{cluster: minik8s, user: tester{', namespace: ' + namespace if namespace else ''}}}"
    path.write_text(
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        f"- name: minik8s\n  cluster: {{server: \"{server}\"}}\n"
        "users:\n"
        "- name: tester\n  user: {}\n"
        "contexts:\n"
        f"- name: minik8s\n  context: {context}\n"
        "current-context: minik8s\n"
    )
    return path


@dataclass
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def ok(self) -> Result:
        """Assert exit code 0; return self so a test can chain `.stdout`."""
        assert self.returncode == 0, f"{' '.join(self.argv)} exited {self.returncode}\n{self}"
        return self

    def __str__(self) -> str:
        return f"--- stdout\n{self.stdout}--- stderr\n{self.stderr}"


class Kubectl:
    """One kubectl version bound to one apiserver, with its own kubeconfig, cache dir and HOME."""

    def __init__(self, binary: Path, version: str, server: str, workdir: Path, namespace: str | None = None):
        self.binary, self.version, self.server = binary, version, server
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = write_kubeconfig(workdir / "kubeconfig", server, namespace)
        self.cache_dir = workdir / "cache"
        home = workdir / "home"
        home.mkdir(exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP and not k.startswith("KUBECTL_")}
        self.env["HOME"] = str(home)  # no ~/.kube/config, ~/.kube/cache or kuberc from the machine

    def argv(self, *args: str) -> list[str]:
        return [str(self.binary), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir), *args]

    def run(self, *args: str, timeout: float = DEFAULT_TIMEOUT, stdin: str | None = None) -> Result:
        argv = self.argv(*args)
        try:
            done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, env=self.env,
                                  cwd=self.workdir)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise TimeoutError(f"{' '.join(argv)} still running after {timeout}s\n--- stdout\n{out}--- stderr\n{err}"
                               ) from None
        return Result(argv, done.returncode, done.stdout, done.stderr)

    def watch(self, *args: str) -> KubectlWatch:
        return KubectlWatch(self.argv(*args), self.env, self.workdir)


class KubectlWatch:
    """A long-running kubectl (`get -w`): its stdout lines arrive on a queue read by a thread."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path):
        self.argv = argv
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._stderr_path = cwd / f"watch-{time.monotonic_ns()}.stderr"
        self._stderr = open(self._stderr_path, "w")  # noqa: SIM115 — closed in close()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env,
                                     cwd=cwd)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for_line(self, match: Callable[[str], bool], timeout: float = 20.0, what: str = "line") -> str:
        """The first line not yet consumed that satisfies match; TimeoutError (with all output) after timeout."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {what} within {timeout}s from {' '.join(self.argv)}\n{self.output()}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self._queue.put(None)  # stay ended for later callers
                raise AssertionError(f"kubectl exited ({self.proc.poll()}) before {what}\n{self.output()}")
            self.lines.append(line)
            if match(line):
                return line

    def output(self) -> str:
        self._stderr.flush()
        return "--- stdout\n" + "\n".join(self.lines) + "\n--- stderr\n" + self._stderr_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._thread.join(5)
        self._stderr.close()

    def __enter__(self) -> KubectlWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
