"""`python -m MODULE ARGS` without paying Python's imports at every start: per module (apiserver, kubelet,
kubectl, ...), a warm interpreter that has imported it once forks a fresh process per run, as a zygote does.
The suite starts a few hundred component processes and runs mkubectl a few hundred times; each paid
0.3-1.5 s of CPU for its imports before doing anything.

Each run is still a process of its own: its own pid (in a session of its own when asked, as
start_new_session), argv, environment, working directory (first on sys.path, as `-m` puts it), stdin, stdout
and stderr (the descriptors the caller hands over), exit code (SystemExit mapped as the interpreter does, an
uncaught exception's traceback on stderr and 1, a signal's death as -N), non-daemon threads and atexit
handlers seen out as at an interpreter's exit. Its signal dispositions are a fresh interpreter's (the server
is one). What differs: /proc/PID/cmdline is the server's (`python -m tests.warm_python MODULE SOCKET`, so it
still names the module), and its parent is a small waiter process, not the test process.

The test session turns it on (tests/conftest.py), unless MINIK8S_TEST_COLD_START=1 (every run a new
interpreter, as before); the benchmarks, which start components through tests/cluster.py too, keep it off:
what they measure is a fresh interpreter's process.

Protocol (a Unix socket per module's server): the client sends one JSON request (argv after `-m MODULE`,
env, cwd, new_session) with three descriptors for stdin, stdout and stderr (SCM_RIGHTS); the server forks a
waiter, which forks the run, answers its pid and then its exit status, one JSON line each."""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import locale
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# the modules whose `python -m` runs may be forked warm (the project's components and mkubectl)
MODULES = frozenset({"apiserver", "controllers", "kubelet", "scheduler", "dockershim", "proxy", "dns",
                     "metrics_server", "local_path_provisioner", "ingress_nginx", "containerd_node", "kubectl"})


_ENABLED = False


def enable() -> None:
    """From now on in this process, `python -m MODULE` of MODULES starts warm (unless MINIK8S_TEST_COLD_START=1)."""
    global _ENABLED
    _ENABLED = True


def enabled() -> bool:
    return _ENABLED and os.environ.get("MINIK8S_TEST_COLD_START", "") in ("", "0")


def warm_module(argv: list[str]) -> str | None:
    """The module of `[sys.executable, "-m", MODULE, ...]` if its runs may be forked warm, else None."""
    if enabled() and len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m" and argv[2] in MODULES:
        return argv[2]
    return None


# -- the server (python -m tests.warm_python MODULE SOCKET) -------------------------------------------------


def _run_child(module: str, request: dict[str, Any]) -> int:
    """In the forked run: become `python -m MODULE ARGS`; its exit code."""
    import runpy
    import traceback

    cwd = str(request["cwd"])
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in dict(request["env"]).items()})
    sys.path[0] = cwd  # what `python -m` puts first
    sys.argv = [module, *[str(a) for a in request["argv"]]]  # argv[0] becomes __main__.py's path (run_module)
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:  # as the interpreter maps it
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    with contextlib.suppress(Exception):
        threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads joined, as at exit
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _serve_one(module: str, conn: socket.socket) -> None:
    """In the waiter (a child of the server): fork the run, answer its pid, wait, answer its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    data, fds, _, _ = socket.recv_fds(conn, 1 << 22, 3)
    request = json.loads(data)
    # the pid is answered only once the run is in its own session: a killpg on the pid the moment it is
    # known (a test stopping what it just started) must find the group
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            conn.close()
            os.close(ready_r)
            if request.get("new_session"):
                os.setsid()
            os.close(ready_w)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            code = _run_child(module, request)
        finally:
            os._exit(code & 0xFF)
    for fd in fds:
        os.close(fd)
    os.close(ready_w)
    os.read(ready_r, 1)  # end of file: the run has closed its end, after setsid
    os.close(ready_r)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


def serve(module: str, path: str) -> None:
    # the imports every run makes, once: MODULE/__main__.py imported (its `if __name__ == "__main__"` off), then
    # forgotten, so that each run executes it afresh as __main__ (runpy warns about a __main__ already imported)
    __import__(f"{module}.__main__")
    del sys.modules[f"{module}.__main__"]
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(1.0)
    parent = os.getppid()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the test process is gone (even kill -9): so is this server
                return
            continue
        conn.settimeout(None)
        if os.fork() == 0:
            code = 1
            try:
                listener.close()
                _serve_one(module, conn)
                code = 0
            finally:
                os._exit(code)
        conn.close()


# -- the client -------------------------------------------------------------------------------------------


class _Server:
    def __init__(self, module: str) -> None:
        self.module = module
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir = ""
        self.path = ""

    def ensure(self) -> str:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return self.path
            self._dir = tempfile.mkdtemp(prefix=f"minik8s-warm-{self.module}-")
            self.path = os.path.join(self._dir, "sock")
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
            self._proc = subprocess.Popen([sys.executable, "-m", "tests.warm_python", self.module, self.path],
                                          cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
            assert self._proc.stdout is not None
            line = self._proc.stdout.readline()
            if line != b"ready\n":
                self._proc.kill()
                self._proc.wait()
                raise RuntimeError(f"the warm server of {self.module} did not start (said {line!r})")
            return self.path

    def stop(self) -> None:
        with self._lock:
            if self._proc is not None:
                self._proc.kill()
                self._proc.wait()
                self._proc = None
            if self._dir:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
                with contextlib.suppress(OSError):
                    os.rmdir(self._dir)
                self._dir = ""


_SERVERS: dict[str, _Server] = {}
_SERVERS_LOCK = threading.Lock()


def _server(module: str) -> _Server:
    with _SERVERS_LOCK:
        if module not in _SERVERS:
            if not _SERVERS:
                atexit.register(stop_all)
            _SERVERS[module] = _Server(module)
        return _SERVERS[module]


def stop_all() -> None:
    with _SERVERS_LOCK:
        servers = list(_SERVERS.values())
    for server in servers:
        server.stop()


class WarmProcess:
    """What the tests use of subprocess.Popen, for a run forked warm: pid, poll, wait, returncode, signals."""

    def __init__(self, args: list[str], conn: socket.socket) -> None:
        self.args = args
        self._conn = conn
        self._answers = bytearray()
        self.returncode: int | None = None
        self.pid = int(self._next_answer(None)["pid"])

    def _next_answer(self, timeout: float | None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._answers:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self._conn], [], [], remaining)
            if not readable:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            chunk = self._conn.recv(4096)
            if not chunk:
                raise RuntimeError(f"the warm server of {self.args[2]} hung up on {self.args}")
            self._answers += chunk
        line, _, rest = bytes(self._answers).partition(b"\n")
        self._answers = bytearray(rest)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = int(self._next_answer(timeout)["returncode"])
            self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.wait(0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _connect(module: str, args: list[str], env: dict[str, str], cwd: Path | str, fds: list[int],
             new_session: bool) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(_server(module).ensure())
        request = json.dumps({"argv": args, "env": env, "cwd": str(cwd), "new_session": new_session}).encode()
        socket.send_fds(conn, [request], fds)
    except BaseException:
        conn.close()
        raise
    return conn


def popen(argv: list[str], *, env: dict[str, str], cwd: Path | str, stdout: int, stderr: int,
          new_session: bool = False) -> WarmProcess:
    """argv (`[sys.executable, "-m", MODULE, ...]`, see warm_module) started as a fresh process forked from
    MODULE's warm server, stdin /dev/null, stdout and stderr on the given descriptors."""
    module = warm_module(argv)
    assert module is not None, argv
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        return WarmProcess(argv, _connect(module, argv[3:], env, cwd, [null, stdout, stderr], new_session))
    finally:
        os.close(null)


def _text(data: bytes) -> str:
    """Bytes decoded as subprocess.run(text=True) does: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()


def run(argv: list[str], *, env: dict[str, str], cwd: Path | str, stdin: str | None = None,
        timeout: float = 60) -> tuple[int, str, str]:
    """argv (`[sys.executable, "-m", MODULE, ...]`) run to its end as a process forked from MODULE's warm
    server: (exit code, stdout, stderr) as subprocess.run(text=True, capture_output=True) gives them;
    subprocess.TimeoutExpired after timeout (the run killed first)."""
    module = warm_module(argv)
    assert module is not None, argv
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        conn = _connect(module, argv[3:], env, cwd, [in_r, out_w, err_w], False)
    except BaseException:
        for fd in (in_w, out_r, err_r):
            os.close(fd)
        raise
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    deadline = time.monotonic() + timeout
    feed = (stdin or "").encode(locale.getpreferredencoding(False))
    outputs: dict[int, bytearray] = {out_r: bytearray(), err_r: bytearray()}
    answers = bytearray()
    pid = 0
    selector = selectors.DefaultSelector()
    try:
        if feed:
            os.set_blocking(in_w, False)
            selector.register(in_w, selectors.EVENT_WRITE)
        else:
            os.close(in_w)
            in_w = -1
        for fd in outputs:
            selector.register(fd, selectors.EVENT_READ)
        selector.register(conn, selectors.EVENT_READ)
        open_fds = {out_r, err_r, conn.fileno()}
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(argv, timeout, bytes(outputs[out_r]), bytes(outputs[err_r]))
            for key, _ in selector.select(remaining):
                fd = key.fd
                if fd == in_w:
                    try:
                        sent = os.write(in_w, feed)
                    except BrokenPipeError:
                        sent = len(feed)
                    feed = feed[sent:]
                    if not feed:
                        selector.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                    continue
                chunk = conn.recv(4096) if fd == conn.fileno() else os.read(fd, 65536)
                if not chunk:
                    selector.unregister(fd)
                    open_fds.discard(fd)
                elif fd == conn.fileno():
                    answers += chunk
                    if not pid and b"\n" in answers:
                        pid = int(json.loads(answers.split(b"\n", 1)[0])["pid"])
                else:
                    outputs[fd] += chunk
        lines = answers.decode().splitlines()
        if len(lines) != 2:
            raise RuntimeError(f"the warm server of {module} answered {answers!r} for {argv}")
        returncode = int(json.loads(lines[1])["returncode"])
        return returncode, _text(bytes(outputs[out_r])), _text(bytes(outputs[err_r]))
    except BaseException:
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise
    finally:
        selector.close()
        for fd in (in_w, out_r, err_r):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
