"""The nginx process (upstream internal/ingress/controller/nginx.go, internal/nginx/main.go): started once in
the foreground (`daemon off`, the controller's child), every new configuration tested with `nginx -t` on a
temporary file before it replaces nginx.conf, then a graceful reload (SIGHUP to the master: new workers take
new connections, the old ones finish theirs). A configuration that fails the test never replaces the running
one. Everything lives under the run directory: nginx.conf, nginx.pid, logs/, tmp/, ssl/."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
from pathlib import Path

log = logging.getLogger(__name__)


class NginxError(Exception):
    """nginx refused a configuration or would not start; the message is nginx's own."""


def find_nginx() -> str:
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                           if os.access(p, os.X_OK)), None)
    if found is None:
        raise NginxError("nginx not found (apt-get install nginx-light)")
    return found


class Nginx:
    def __init__(self, run_dir: Path, binary: str | None = None):
        self.run_dir = run_dir
        self.binary = binary or find_nginx()
        self.conf = run_dir / "nginx.conf"
        self.pid_file = run_dir / "nginx.pid"
        self.process: asyncio.subprocess.Process | None = None
        self.reloads = 0
        self.failed_tests = 0

    def prepare(self) -> None:
        """The run directory: open to nginx's workers (they run as an unprivileged user and buffer large
        responses under tmp/), but ssl/ (the keys) is the master's alone."""
        for sub in ("logs", "tmp", "ssl"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.run_dir, 0o755)
        os.chmod(self.run_dir / "tmp", 0o755)
        os.chmod(self.run_dir / "ssl", 0o700)

    def _argv(self, conf: Path, *extra: str) -> list[str]:
        # -e: the error log before the configuration is read (Debian's default is /var/log/nginx)
        return [self.binary, "-p", f"{self.run_dir}/", "-e", str(self.run_dir / "logs" / "error.log"),
                "-c", str(conf), *extra]

    async def test(self, text: str) -> None:
        """`nginx -t` on `text` (written next to nginx.conf); NginxError with nginx's output if it fails."""
        candidate = self.run_dir / "nginx.conf.new"
        candidate.write_text(text)
        proc = await asyncio.create_subprocess_exec(*self._argv(candidate, "-t", "-q"),
                                                    stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            self.failed_tests += 1
            candidate.unlink(missing_ok=True)
            raise NginxError(out.decode(errors="replace").strip())

    def _swap(self) -> None:
        os.replace(self.run_dir / "nginx.conf.new", self.conf)

    def stale_master(self) -> int | None:
        """The pid of an nginx master a previous run of ours left (killed before it could stop it)."""
        try:
            pid = int(self.pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if b"nginx" in cmdline and str(self.run_dir).encode() in cmdline else None

    def stale_group(self) -> int | None:
        """The process group of the nginx a previous run of ours left: its master (killed or not) led it, so
        workers orphaned by a killed master, which still hold the ports, are found by it too."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if group_members(pid) else None

    async def start(self, text: str) -> None:
        """Test `text`, make it nginx.conf and start nginx on it (after stopping what a previous run left)."""
        stale = self.stale_group()
        if stale is not None:
            log.info("stopping the nginx (process group %d) a previous run left", stale)
            await _stop_group(stale)
        await self.test(text)
        self._swap()
        # its own session and process group: the master and its workers go together (see stale_group)
        self.process = await asyncio.create_subprocess_exec(*self._argv(self.conf, "-g", "daemon off;"),
                                                            stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
        for _ in range(100):  # up to 5 s for the pid file: nginx has bound its ports then
            if self.process.returncode is not None:
                raise NginxError(f"nginx exited with {self.process.returncode} at start: "
                                 f"{self._error_log_tail()}")
            if self.stale_master() == self.process.pid:
                return
            await asyncio.sleep(0.05)
        raise NginxError("nginx did not write its pid file within 5s")

    async def reload(self, text: str) -> None:
        """Test, swap, SIGHUP (nginx -s reload). A failed test raises and leaves the running config alone."""
        await self.test(text)
        self._swap()
        if self.process is None or self.process.returncode is not None:
            raise NginxError("nginx is not running")
        old = set(self.workers())
        self.process.send_signal(signal.SIGHUP)
        await self._wait_gone(old)
        self.reloads += 1

    def workers(self) -> list[int]:
        """The master's children (its workers), from /proc."""
        if self.process is None:
            return []
        return children(self.process.pid)

    async def _wait_gone(self, old: set[int], timeout: float = 30.0) -> None:
        """Until the old workers have finished their connections and exited: until then they may still accept
        a new connection now and then and answer it with the old configuration."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while old & set(self.workers()) and loop.time() < deadline:
            await asyncio.sleep(0.02)

    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def stop(self, timeout: float = 10.0) -> None:
        """SIGQUIT (graceful: workers finish their requests), SIGTERM then SIGKILL past `timeout`."""
        proc, self.process = self.process, None
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGQUIT)
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()

    def _error_log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.run_dir / "logs" / "error.log").read_text(errors="replace").strip().splitlines()[-1]
        return ""


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return found


def group_members(pgid: int) -> list[int]:
    """The nginx processes of process group `pgid` (zombies aside)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z" and cmdline.startswith(b"nginx"):
            found.append(int(entry.name))
    return found


async def _stop_group(pgid: int, timeout: float = 10.0) -> None:
    """SIGQUIT to the group (a live master stops gracefully, orphaned workers finish), SIGKILL past `timeout`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGQUIT)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while group_members(pgid):
        if loop.time() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            break
        await asyncio.sleep(0.05)
