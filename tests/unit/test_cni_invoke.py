"""cni/invoke.py hands a plugin its configuration on stdin: from a pipe filled before the plugin starts when
the pipe holds it all, else fed while the plugin reads (a configuration larger than a pipe). A real process
reads it; no network is touched (tests/integration/test_cni.py runs the real plugins)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cni.invoke import CniError, CniRuntime, RuntimeConf, filled_pipe

# a plugin that answers how many bytes of configuration it read
COUNTING_PLUGIN = """#!/bin/sh
size=$(wc -c)
printf '{"cniVersion":"1.0.0","size":%s}' "$size"
"""


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_filled_pipe_holds_the_data_then_ends() -> None:
    reader = filled_pipe(b'{"cniVersion":"1.0.0"}')
    assert reader is not None
    try:
        assert os.read(reader, 1024) == b'{"cniVersion":"1.0.0"}'
        assert os.read(reader, 1024) == b""  # the writer is closed: the plugin sees the end
    finally:
        os.close(reader)


def test_data_larger_than_a_pipe_is_no_filled_pipe_and_leaves_no_descriptor() -> None:
    before = open_fds()
    assert filled_pipe(b"x" * (4 << 20)) is None
    assert open_fds() == before


@pytest.mark.parametrize("padding", [0, 1 << 20], ids=["fits-a-pipe", "larger-than-a-pipe"])
async def test_the_plugin_reads_its_whole_configuration(tmp_path: Path, padding: int) -> None:
    plugin = tmp_path / "bin" / "counting"
    plugin.parent.mkdir()
    plugin.write_text(COUNTING_PLUGIN)
    plugin.chmod(0o755)
    conflist: dict[str, Any] = {"cniVersion": "1.0.0", "name": "count",
                                "plugins": [{"type": "counting", "padding": "x" * padding}]}
    runtime = CniRuntime(tmp_path / "results", [str(plugin.parent)])
    rt = RuntimeConf("c1", "", "eth0")
    before = open_fds()
    result = await runtime.add(conflist, rt)
    sent = json.dumps(runtime.plugin_stdin(conflist, conflist["plugins"][0], rt, None)).encode()
    assert result.raw["size"] == len(sent)
    assert open_fds() == before


async def test_a_plugin_that_does_not_answer_in_time_is_killed(tmp_path: Path) -> None:
    plugin = tmp_path / "bin" / "hanging"
    plugin.parent.mkdir()
    pid_file = tmp_path / "pid"
    plugin.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    plugin.chmod(0o755)
    runtime = CniRuntime(tmp_path / "results", [str(plugin.parent)], timeout=0.5)
    conflist = {"cniVersion": "1.0.0", "name": "hang", "plugins": [{"type": "hanging"}]}
    with pytest.raises(CniError) as caught:
        await runtime.add(conflist, RuntimeConf("c1", "", "eth0"))
    assert caught.value.code == 11 and "timed out" in caught.value.msg
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists()  # killed and reaped
    assert not (tmp_path / "results").exists()  # no result cached


def test_a_cached_attachment_is_found_by_container_id_in_any_network(tmp_path: Path) -> None:
    runtime = CniRuntime(tmp_path / "results", [])
    assert runtime.read_cache(None, "c1") is None  # nothing cached yet: no results directory
    conflist = {"cniVersion": "1.0.0", "name": "net-a", "plugins": [{"type": "bridge"}]}
    runtime._write_cache(conflist, RuntimeConf("c1", "", "eth0"), {"cniVersion": "1.0.0"})
    runtime._write_cache(conflist, RuntimeConf("c12", "", "eth0"), {"cniVersion": "1.0.0"})
    found = runtime.read_cache(None, "c1")
    assert found is not None and found["containerId"] == "c1" and found["networkName"] == "net-a"
    assert runtime.read_cache(None, "c1", "lo") is None
