"""The Docker shim waits for its CNI plugins through a pidfd on the event loop on Python 3.11 (whose default
watcher starts a thread per child), and keeps the default where the kernel has no pidfd_open."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from dockershim import __main__ as shim_main
from tests.cluster import REPO


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 watches children through pidfds itself")
def test_plugins_are_waited_for_without_a_thread_each() -> None:
    # in a process of its own: the watcher is the interpreter's, for every event loop after it
    script = textwrap.dedent("""
        import asyncio, threading
        from dockershim.__main__ import use_pidfd_child_watcher

        assert use_pidfd_child_watcher()
        assert isinstance(asyncio.get_event_loop_policy().get_child_watcher(), asyncio.PidfdChildWatcher)

        async def main():
            threads = threading.active_count()
            procs = [await asyncio.create_subprocess_exec("sh", "-c", "read x; exit 3", stdin=asyncio.subprocess.PIPE)
                     for _ in range(5)]
            assert threading.active_count() == threads  # none waits in a thread of its own
            for proc in procs:
                await proc.communicate(b"go\\n")
                assert proc.returncode == 3

        asyncio.run(main())
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_without_pidfd_open_the_default_watcher_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    def old_kernel(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(shim_main.os, "pidfd_open", old_kernel, raising=False)
    assert shim_main.use_pidfd_child_watcher() is False
