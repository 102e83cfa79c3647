"""cni/invoke.py hands a plugin its configuration on stdin: from a pipe filled before the plugin starts when
the pipe holds it all, else fed while the plugin reads (a configuration larger than a pipe). A real process
reads it; no network is touched (tests/integration/test_cni.py runs the real plugins)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cni.invoke import CniRuntime, RuntimeConf, filled_pipe

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
