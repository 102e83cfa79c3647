"""cni.host's host lock: shared by pods being set up, exclusive for the shared rules' teardown; a pod's set-up
takes it at once (no thread) unless the teardown holds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cni import host


def test_the_lock_is_taken_at_once_unless_held_the_other_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "RUN_DIR", tmp_path)
    monkeypatch.setattr(host, "LOCK_FILE", tmp_path / "host-network.lock")
    first = host.try_host_lock(True)
    second = host.try_host_lock(True)  # pods set up side by side share it
    assert first is not None and second is not None
    assert host.try_host_lock(False) is None  # the rules' teardown waits for them
    host.release_host_lock(first)
    host.release_host_lock(second)
    exclusive = host.try_host_lock(False)
    assert exclusive is not None
    assert host.try_host_lock(True) is None  # a pod's set-up then waits (in a thread: acquire_host_lock)
    host.release_host_lock(exclusive)
    shared = host.try_host_lock(True)
    assert shared is not None
    host.release_host_lock(shared)
