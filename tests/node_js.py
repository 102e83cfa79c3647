"""Node.js for the JavaScript client's test (tests/js, tests/integration/test_js_client.py): what
tests/js/package.json asks and whether hack/setup.sh's `npm ci` installed its lock file. Each check fails the
test (never skips it) with what to do."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster import REPO

JS_DIR = REPO / "tests" / "js"


def node_major(js_dir: Path = JS_DIR) -> int:
    """The Node.js major version tests/js/package.json's engines ask (">=N"): 1.4.0 of the client runs on 20,
    its 2.x wants 22."""
    engines = json.loads((js_dir / "package.json").read_text())["engines"]["node"]
    match = re.fullmatch(r">=\s*(\d+)", engines)
    assert match, f"{js_dir}/package.json: engines.node {engines!r} is not >=N"
    return int(match.group(1))


def node_binary(js_dir: Path = JS_DIR) -> str:
    """node from PATH, failing the test (not skipping it) when it is missing or too old."""
    want = node_major(js_dir)
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"node is not on PATH: the JavaScript client's test needs Node.js >= {want} "
                    "(hack/setup.sh checks it and installs tests/js/node_modules)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    major = re.match(r"v(\d+)\.", version)
    if major is None or int(major.group(1)) < want:
        pytest.fail(f"node {version} is older than the {want} {js_dir}/package.json requires")
    return node


def modules_installed(js_dir: Path = JS_DIR) -> None:
    """Fails the test unless JS_DIR/node_modules is what hack/setup.sh's `npm ci` made from its lock file."""
    want = hashlib.sha256((js_dir / "package-lock.json").read_bytes()).hexdigest()
    stamp = js_dir / "node_modules" / ".minik8s-install-stamp"
    have = stamp.read_text().strip() if stamp.exists() else None
    if have != want:
        state = "missing" if have is None else f"stale ({js_dir}/package-lock.json changed since)"
        pytest.fail(f"{js_dir}/node_modules is {state}: hack/setup.sh installs it (npm ci --prefix {js_dir})")
