"""hack/lib.sh's ensure_node_modules (hack/setup.sh installs the JavaScript client's tests/js/node_modules with
it) and the checks tests/node_js.py makes before the JavaScript client's test: each refusal says what is wrong
and what to do. node and npm are stand-in scripts here, so the logic runs without the registry; the real
`npm ci` runs in hack/setup.sh and the real client in tests/integration/test_js_client.py."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster import REPO
from tests.node_js import JS_DIR, modules_installed, node_binary, node_major

TOOLS = ("bash", "cat", "cut", "date", "dirname", "sha256sum", "mkdir")


def _bin(tmp_path: Path, node_version: str | None, npm_exit: int = 0) -> Path:
    """A PATH directory with the tools lib.sh uses, a node that prints NODE_VERSION (none when None) and an npm
    that records its arguments, makes node_modules under its --prefix and exits NPM_EXIT."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    if node_version is not None:
        (bin_dir / "node").write_text(f"#!/bin/sh\necho {node_version}\n")
    (bin_dir / "npm").write_text(
        "#!/bin/sh\n"
        f'echo "$@" >>"{tmp_path}/npm-calls"\n'
        'while [ $# -gt 0 ]; do [ "$1" = --prefix ] && mkdir -p "$2/node_modules"; shift; done\n'
        f"exit {npm_exit}\n")
    for script in ("node", "npm"):
        if (bin_dir / script).exists():
            (bin_dir / script).chmod(0o755)
    return bin_dir


def _js_dir(tmp_path: Path) -> Path:
    js = tmp_path / "js"
    js.mkdir()
    shutil.copy(JS_DIR / "package.json", js)
    shutil.copy(JS_DIR / "package-lock.json", js)
    return js


def _ensure(bin_dir: Path, js: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "bash"), "-c", f'source "{REPO}/hack/lib.sh" && ensure_node_modules "{js}"'],
        env={"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/root")},
        capture_output=True, text=True, timeout=30)


def test_the_node_version_is_the_same_in_lib_sh_and_package_json() -> None:
    script = (REPO / "hack" / "lib.sh").read_text()
    default = re.search(r'^MINIK8S_NODE_MAJOR="\$\{MINIK8S_NODE_MAJOR:-(\d+)\}"', script, re.MULTILINE)
    assert default, "MINIK8S_NODE_MAJOR's default not found in hack/lib.sh"
    assert int(default.group(1)) == node_major()
    lock = json.loads((JS_DIR / "package-lock.json").read_text())
    assert lock["packages"][""]["engines"] == json.loads((JS_DIR / "package.json").read_text())["engines"]
    assert lock["packages"][""]["dependencies"] == {"@kubernetes/client-node": "1.4.0"}  # pinned, no range


def test_ensure_node_modules_installs_once_then_again_when_the_lock_changes(tmp_path: Path) -> None:
    bin_dir, js = _bin(tmp_path, "v20.20.2"), _js_dir(tmp_path)
    first = _ensure(bin_dir, js)
    assert first.returncode == 0, first.stderr
    assert f"npm ci --prefix {js} (node v20.20.2; node_modules not installed yet)" in first.stderr
    want = hashlib.sha256((js / "package-lock.json").read_bytes()).hexdigest()
    assert (js / "node_modules" / ".minik8s-install-stamp").read_text() == want + "\n"
    modules_installed(js)  # what the test checks is what setup wrote
    again = _ensure(bin_dir, js)
    assert again.returncode == 0 and "npm: skip," in again.stderr
    with (js / "package-lock.json").open("a") as lock:
        lock.write("\n")
    with pytest.raises(pytest.fail.Exception, match=r"node_modules is stale .*hack/setup.sh installs it"):
        modules_installed(js)
    stale = _ensure(bin_dir, js)
    assert stale.returncode == 0 and "node_modules stale" in stale.stderr
    modules_installed(js)
    assert (tmp_path / "npm-calls").read_text().splitlines() == [
        f"ci --prefix {js} --engine-strict --no-audit --no-fund"] * 2


def test_ensure_node_modules_refuses_a_missing_or_old_node_and_a_failed_npm(tmp_path: Path) -> None:
    for case, version, npm_exit, says in [
            ("none", None, 0, "node: not found (Node.js >= 20 with npm is needed for"),
            ("old", "v18.19.0", 0, "node: v18.19.0 found; "),
            ("odd", "nonsense", 0, "node: nonsense found; "),
            ("npm", "v22.1.0", 7, "failed (exit 7)")]:
        where = tmp_path / case
        where.mkdir()
        bin_dir, js = _bin(where, version, npm_exit), _js_dir(where)
        run = _ensure(bin_dir, js)
        assert run.returncode == 1 and says in run.stderr, (case, run.stderr)
        if version is not None and npm_exit == 0:
            assert f"{js}/package.json needs node 20 or newer" in run.stderr
        assert not (js / "node_modules" / ".minik8s-install-stamp").exists()
        with pytest.raises(pytest.fail.Exception, match=r"node_modules is missing: hack/setup.sh installs it"):
            modules_installed(js)


def test_the_tests_check_refuses_a_missing_or_old_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "none").mkdir()
    monkeypatch.setenv("PATH", str(_bin(tmp_path / "none", None)))
    with pytest.raises(pytest.fail.Exception, match=r"node is not on PATH: .*Node.js >= 20 \(hack/setup.sh"):
        node_binary()
    (tmp_path / "old").mkdir()
    monkeypatch.setenv("PATH", str(_bin(tmp_path / "old", "v18.19.0")))
    with pytest.raises(pytest.fail.Exception, match=r"node v18.19.0 is older than the 20"):
        node_binary()
    (tmp_path / "new").mkdir()
    monkeypatch.setenv("PATH", str(_bin(tmp_path / "new", "v20.1.0")))
    assert node_binary() == str(tmp_path / "new" / "bin" / "node")
