"""Kubeconfig lookup, parsing and writing behave like upstream's for the fields minik8s uses."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from machinery.kubeconfig import (
    ClientConfig,
    KubeconfigError,
    build_config_from_flags,
    find_kubeconfig,
    load_kubeconfig,
    write_kubeconfig,
)
from tests.cluster import REPO

CA_PEM = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
CERT_PEM = b"-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n"
KEY_PEM = b"-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    current: str | None = "admin@minik8s",
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "minik8s", "cluster": cluster if cluster is not None else {"server": "https://127.0.0.1:6443"}},
            {"name": "other", "cluster": {"server": "http://10.0.0.1:8080/"}},
        ],
        "users": [
            {"name": "admin", "user": user if user is not None else {"token": "t0ken"}},
            {"name": "viewer", "user": {"token": "v"}},
        ],
        "contexts": [
            {"name": "admin@minik8s", "context": context or {"cluster": "minik8s", "user": "admin"}},
            {
                "name": "viewer@other",
                "context": {"cluster": "other", "user": "viewer", "namespace": "kube-system"},
            },
        ],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


def write(path: Path, doc: Any) -> Path:
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return path


@pytest.fixture(autouse=True)
def no_ambient_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep the developer's own KUBECONFIG and ~/.kube/config out of every test."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


# -- loading ----------------------------------------------------------------------------------


def test_current_context_with_token(tmp_path: Path) -> None:
    ua = "kube-scheduler/v1.30.0 (minik8s)"
    cfg = load_kubeconfig(write(tmp_path / "config", kubeconfig()), user_agent=ua)
    assert cfg == ClientConfig(server="https://127.0.0.1:6443", token="t0ken", user_agent=ua)


def test_named_context_overrides_current_and_carries_namespace(tmp_path: Path) -> None:
    cfg = load_kubeconfig(write(tmp_path / "config", kubeconfig()), context="viewer@other")
    assert cfg.server == "http://10.0.0.1:8080"  # trailing slash trimmed
    assert cfg.token == "v"
    assert cfg.namespace == "kube-system"


def test_file_paths_resolve_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(CA_PEM)
    (tmp_path / "pki" / "admin.crt").write_bytes(CERT_PEM)
    (tmp_path / "pki" / "admin.key").write_bytes(KEY_PEM)
    doc = kubeconfig(
        cluster={"server": "https://127.0.0.1:6443", "certificate-authority": "pki/ca.crt"},
        user={"client-certificate": "pki/admin.crt", "client-key": str(tmp_path / "pki" / "admin.key")},
    )
    cfg = load_kubeconfig(write(tmp_path / "config", doc))
    assert cfg.ca_file == str(tmp_path / "pki" / "ca.crt")
    assert cfg.cert_file == str(tmp_path / "pki" / "admin.crt")
    assert cfg.key_file == str(tmp_path / "pki" / "admin.key")
    assert cfg.token is None
    assert cfg.insecure is False


def test_embedded_data_becomes_private_files_and_wins_over_paths(tmp_path: Path) -> None:
    doc = kubeconfig(
        cluster={
            "server": "https://127.0.0.1:6443",
            "certificate-authority-data": b64(CA_PEM),
            "certificate-authority": "does/not/matter.crt",
        },
        user={"client-certificate-data": b64(CERT_PEM), "client-key-data": b64(KEY_PEM)},
    )
    cfg = load_kubeconfig(write(tmp_path / "config", doc))
    assert cfg.ca_file and cfg.cert_file and cfg.key_file
    assert Path(cfg.ca_file).read_bytes() == CA_PEM
    assert Path(cfg.cert_file).read_bytes() == CERT_PEM
    assert Path(cfg.key_file).read_bytes() == KEY_PEM
    assert stat.S_IMODE(Path(cfg.key_file).stat().st_mode) == 0o600
    # Loading again reuses the same files rather than littering new ones.
    assert load_kubeconfig(tmp_path / "config").key_file == cfg.key_file


def test_token_file_and_insecure(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    doc = kubeconfig(
        cluster={"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True},
        user={"tokenFile": "token"},
    )
    cfg = load_kubeconfig(write(tmp_path / "config", doc))
    assert cfg.token == "from-file"
    assert cfg.insecure is True


def test_inline_token_wins_over_token_file(tmp_path: Path) -> None:
    doc = kubeconfig(user={"token": "inline", "tokenFile": "missing"})
    assert load_kubeconfig(write(tmp_path / "config", doc)).token == "inline"


def test_context_without_user_is_anonymous(tmp_path: Path) -> None:
    doc = kubeconfig(context={"cluster": "minik8s"})
    cfg = load_kubeconfig(write(tmp_path / "config", doc))
    assert cfg.token is None and cfg.cert_file is None


# -- lookup -----------------------------------------------------------------------------------


def test_kubeconfig_env_first_existing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = write(tmp_path / "first", kubeconfig(current="viewer@other"))
    second = write(tmp_path / "second", kubeconfig())
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{first}:{second}")
    assert find_kubeconfig() == first
    assert load_kubeconfig().server == "http://10.0.0.1:8080"


def test_kubeconfig_env_with_no_existing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(KubeconfigError, match="KUBECONFIG"):
        find_kubeconfig()


def test_home_kube_config_fallback(tmp_path: Path) -> None:
    home_config = tmp_path / "home" / ".kube" / "config"
    home_config.parent.mkdir(parents=True)
    write(home_config, kubeconfig())
    assert find_kubeconfig() == home_config
    assert load_kubeconfig().token == "t0ken"


def test_explicit_path_beats_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = write(tmp_path / "env", kubeconfig())
    explicit = write(tmp_path / "explicit", kubeconfig(current="viewer@other"))
    monkeypatch.setenv("KUBECONFIG", str(env_file))
    assert find_kubeconfig(explicit) == explicit


def test_nothing_found() -> None:
    with pytest.raises(KubeconfigError, match="no kubeconfig"):
        load_kubeconfig()


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("clusters: [unclosed", "not valid YAML"),
        ("- just\n- a list\n", "mapping"),
        (kubeconfig(current=None), "current-context"),
        (kubeconfig(current="nope"), "no context named 'nope'"),
        (kubeconfig(context={"cluster": "ghost", "user": "admin"}), "no cluster named 'ghost'"),
        (kubeconfig(context={"cluster": "minik8s", "user": "ghost"}), "no user named 'ghost'"),
        (kubeconfig(context={"user": "admin"}), "names no cluster"),
        (kubeconfig(cluster={}), "server URL"),
        (kubeconfig(cluster={"server": "127.0.0.1:6443"}), "server URL"),
        (kubeconfig(cluster={"server": "https://x", "certificate-authority-data": "!!notbase64"}), "base64"),
        (kubeconfig(cluster={"server": "https://x", "certificate-authority": "/no/ca"}), "does not exist"),
        (kubeconfig(user={"client-certificate-data": b64(CERT_PEM)}), "together"),
        (kubeconfig(user={"tokenFile": "/no/such/token"}), "tokenFile"),
        (kubeconfig(user={"exec": {"command": "aws"}}), "not supported"),
        ({"current-context": "a", "contexts": "not-a-list"}, "must be a list"),
    ],
)
def test_bad_kubeconfigs_raise_kubeconfig_error(tmp_path: Path, doc: Any, message: str) -> None:
    with pytest.raises(KubeconfigError, match=message):
        load_kubeconfig(write(tmp_path / "config", doc))


def test_missing_explicit_file(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="does not exist"):
        load_kubeconfig(tmp_path / "nope")


# -- writing ----------------------------------------------------------------------------------


def test_write_then_load_round_trip_with_paths(tmp_path: Path) -> None:
    for name, content in (("ca.crt", CA_PEM), ("node.crt", CERT_PEM), ("node.key", KEY_PEM)):
        (tmp_path / name).write_bytes(content)
    path = write_kubeconfig(
        tmp_path / "out" / "kubelet.conf",
        "https://127.0.0.1:6443",
        "system:node:node-1",
        ca_file=tmp_path / "ca.crt",
        cert_file=tmp_path / "node.crt",
        key_file=tmp_path / "node.key",
        namespace="default",
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    doc = yaml.safe_load(path.read_text())
    assert doc["current-context"] == "system:node:node-1@minik8s"
    assert doc["kind"] == "Config"
    cfg = load_kubeconfig(path)
    assert cfg == ClientConfig(
        server="https://127.0.0.1:6443",
        ca_file=str(tmp_path / "ca.crt"),
        cert_file=str(tmp_path / "node.crt"),
        key_file=str(tmp_path / "node.key"),
        namespace="default",
    )


def test_write_embedded_token_and_insecure(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(CA_PEM)
    path = write_kubeconfig(
        tmp_path / "sched.conf",
        "https://127.0.0.1:6443",
        "system:kube-scheduler",
        ca_file=tmp_path / "ca.crt",
        token="abc",
        embed=True,
        cluster="lab",
        context="sched",
    )
    doc = yaml.safe_load(path.read_text())
    assert "certificate-authority-data" in doc["clusters"][0]["cluster"]
    assert doc["contexts"][0]["name"] == "sched"
    assert doc["contexts"][0]["context"] == {"cluster": "lab", "user": "system:kube-scheduler"}
    (tmp_path / "ca.crt").unlink()  # embedded: the file no longer matters
    cfg = load_kubeconfig(path)
    assert cfg.token == "abc"
    assert cfg.ca_file and Path(cfg.ca_file).read_bytes() == CA_PEM

    insecure = load_kubeconfig(write_kubeconfig(tmp_path / "i.conf", "https://h:6443", "u", insecure=True))
    assert insecure.insecure is True


def test_write_overwrites_atomically(tmp_path: Path) -> None:
    path = tmp_path / "c.conf"
    write_kubeconfig(path, "http://a:1", "u", token="one")
    write_kubeconfig(path, "http://b:2", "u", token="two")
    assert load_kubeconfig(path) == ClientConfig(server="http://b:2", token="two")
    assert [p.name for p in tmp_path.iterdir()] == ["c.conf"]  # no temp files left behind


def test_write_requires_cert_and_key_together(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="together"):
        write_kubeconfig(tmp_path / "c.conf", "http://a:1", "u", cert_file=tmp_path / "x.crt")


LOAD_AND_WAIT = """
import sys, time
from machinery.kubeconfig import load_kubeconfig
print(load_kubeconfig(sys.argv[1]).key_file, flush=True)
if sys.argv[2] == "wait":
    time.sleep(60)
"""


def test_keys_of_a_killed_process_are_removed_by_the_next_one(tmp_path: Path) -> None:
    """A process killed with -9 runs no exit handler: its materialized key stays on disk until the next
    process that materializes one sweeps the directories of processes that are gone."""
    doc = kubeconfig(cluster={"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(CA_PEM)},
                     user={"client-certificate-data": b64(CERT_PEM), "client-key-data": b64(KEY_PEM)})
    path = write(tmp_path / "config", doc)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(REPO)}
    victim = subprocess.Popen([sys.executable, "-c", LOAD_AND_WAIT, str(path), "wait"], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert victim.stdout is not None
        key = Path(victim.stdout.readline().strip())
        assert key.read_bytes() == KEY_PEM and key.parent.name.startswith(f"minik8s-kubeconfig-{victim.pid}-")
    finally:
        victim.kill()
        victim.wait()
    assert key.exists()  # kill -9: no exit handler ran
    done = subprocess.run([sys.executable, "-c", LOAD_AND_WAIT, str(path), "exit"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not key.parent.exists()
    assert list(temp.iterdir()) == []  # and the second process removed its own at exit


def test_build_config_from_flags_lets_master_override_the_kubeconfig_server(tmp_path: Path) -> None:
    path = tmp_path / "proxy.conf"
    write_kubeconfig(path, "https://10.0.0.1:6443", "system:kube-proxy", token="t0k3n")
    from_file = build_config_from_flags(None, str(path), "kube-proxy/v1.30")
    assert (from_file.server, from_file.token, from_file.user_agent) == ("https://10.0.0.1:6443", "t0k3n",
                                                                          "kube-proxy/v1.30")
    overridden = build_config_from_flags("https://127.0.0.1:6443", str(path))
    assert (overridden.server, overridden.token) == ("https://127.0.0.1:6443", "t0k3n")
    assert build_config_from_flags("http://127.0.0.1:8080", None).server == "http://127.0.0.1:8080"
    with pytest.raises(KubeconfigError, match="neither --kubeconfig nor --master"):
        build_config_from_flags(None, None)
