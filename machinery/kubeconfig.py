"""Kubeconfig files: how every minik8s process (and mkubectl) finds the apiserver and proves who it is.

The format and lookup are upstream's, so the same file works for real kubectl:
explicit path, else the first existing file in $KUBECONFIG, else ~/.kube/config; the context is
`current-context` unless one is named. Relative file paths resolve against the kubeconfig's
directory; `*-data` fields (base64 PEM) override their file twins and are written to private
temporary files, because Python's ssl module loads client certificates only from files.
Multi-file merging and exec/auth-provider plugins are not supported and say so.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import dataclasses
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class KubeconfigError(Exception):
    """The kubeconfig is missing, unreadable, or does not describe a usable context."""


@dataclass(frozen=True)
class ClientConfig:
    """Everything the API client needs to reach and authenticate to one apiserver."""

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    insecure: bool = False
    user_agent: str | None = None
    namespace: str | None = None  # the context's default namespace (mkubectl uses it)


def find_kubeconfig(path: str | os.PathLike[str] | None = None) -> Path:
    """The kubeconfig to use: `path`, else the first existing $KUBECONFIG entry, else ~/.kube/config."""
    if path is not None:
        candidate = Path(path).expanduser()
        if not candidate.is_file():
            raise KubeconfigError(f"kubeconfig {candidate} does not exist")
        return candidate
    env = os.environ.get("KUBECONFIG", "")
    entries = [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    for candidate in entries:
        if candidate.is_file():
            return candidate
    if entries:
        raise KubeconfigError(f"none of the files in KUBECONFIG exist: {env}")
    default = Path.home() / ".kube" / "config"
    if default.is_file():
        return default
    raise KubeconfigError(f"no kubeconfig: pass a path, set KUBECONFIG, or create {default}")


def load_kubeconfig(
    path: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    user_agent: str | None = None,
) -> ClientConfig:
    """Read a kubeconfig (found as `find_kubeconfig` does) and resolve one context to a ClientConfig."""
    file = find_kubeconfig(path)
    try:
        doc = yaml.safe_load(file.read_text())
    except OSError as e:
        raise KubeconfigError(f"cannot read kubeconfig {file}: {e}") from e
    except yaml.YAMLError as e:
        raise KubeconfigError(f"kubeconfig {file} is not valid YAML: {e}") from e
    return parse_kubeconfig(
        doc, base_dir=file.parent, context=context, user_agent=user_agent, source=str(file)
    )



def build_config_from_flags(master: str | None, kubeconfig: str | None, user_agent: str | None = None) -> ClientConfig:
    """A component's connection from its --master and --kubeconfig flags (upstream's clientcmd.BuildConfigFromFlags):
    the kubeconfig with --master, if given, overriding its server; --master alone without one."""
    if kubeconfig:
        config = load_kubeconfig(kubeconfig, user_agent=user_agent)
        return dataclasses.replace(config, server=master) if master else config
    if not master:
        raise KubeconfigError("neither --kubeconfig nor --master was given")
    return ClientConfig(server=master, user_agent=user_agent)

def parse_kubeconfig(
    doc: Any,
    *,
    base_dir: Path,
    context: str | None = None,
    user_agent: str | None = None,
    source: str = "kubeconfig",
) -> ClientConfig:
    """Resolve one context of an already parsed kubeconfig document."""
    if not isinstance(doc, dict):
        raise KubeconfigError(f"{source}: expected a mapping at the top level")
    context_name = context or doc.get("current-context")
    if not context_name:
        raise KubeconfigError(f"{source}: no context given and current-context is not set")
    ctx = _named(doc, "contexts", "context", context_name, source)
    cluster_name = ctx.get("cluster")
    user_name = ctx.get("user")
    if not cluster_name:
        raise KubeconfigError(f"{source}: context {context_name!r} names no cluster")
    cluster = _named(doc, "clusters", "cluster", cluster_name, source)
    user = _named(doc, "users", "user", user_name, source) if user_name else {}

    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("http://", "https://")):
        raise KubeconfigError(f"{source}: cluster {cluster_name!r} needs a server URL (http:// or https://)")

    where = f"{source}: cluster {cluster_name!r}"
    ca_file = _file_or_data(cluster, "certificate-authority", base_dir, where, ".crt")
    where = f"{source}: user {user_name!r}"
    cert_file = _file_or_data(user, "client-certificate", base_dir, where, ".crt")
    key_file = _file_or_data(user, "client-key", base_dir, where, ".key")
    if (cert_file is None) != (key_file is None):
        raise KubeconfigError(f"{where}: client-certificate and client-key must be given together")

    token = user.get("token")
    token_file = user.get("tokenFile")
    if not token and token_file:
        token_path = _resolve(token_file, base_dir)
        try:
            token = token_path.read_text().strip()
        except OSError as e:
            raise KubeconfigError(f"{where}: cannot read tokenFile {token_path}: {e}") from e
    if token is not None and not isinstance(token, str):
        raise KubeconfigError(f"{where}: token must be a string")
    if not (token or cert_file) and ("exec" in user or "auth-provider" in user):
        raise KubeconfigError(f"{where}: exec and auth-provider credential plugins are not supported")

    namespace = ctx.get("namespace")
    return ClientConfig(
        server=server.rstrip("/"),
        ca_file=ca_file,
        cert_file=cert_file,
        key_file=key_file,
        token=token or None,
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        user_agent=user_agent,
        namespace=namespace if isinstance(namespace, str) and namespace else None,
    )


def write_kubeconfig(
    path: str | os.PathLike[str],
    server: str,
    user: str,
    *,
    ca_file: str | os.PathLike[str] | None = None,
    cert_file: str | os.PathLike[str] | None = None,
    key_file: str | os.PathLike[str] | None = None,
    token: str | None = None,
    insecure: bool = False,
    embed: bool = False,
    cluster: str = "minik8s",
    context: str | None = None,
    namespace: str | None = None,
) -> Path:
    """Write a one-context kubeconfig (mode 0600, atomically) for `user` on `server`.

    The launcher writes one per component identity. File paths are stored absolute, or with
    `embed=True` their contents go in as `*-data`, so the file can be copied elsewhere.
    """
    if (cert_file is None) != (key_file is None):
        raise KubeconfigError("cert_file and key_file must be given together")
    cluster_entry: dict[str, Any] = {"server": server}
    user_entry: dict[str, Any] = {}
    if ca_file is not None:
        _put_file(cluster_entry, "certificate-authority", ca_file, embed)
    if insecure:
        cluster_entry["insecure-skip-tls-verify"] = True
    if cert_file is not None and key_file is not None:
        _put_file(user_entry, "client-certificate", cert_file, embed)
        _put_file(user_entry, "client-key", key_file, embed)
    if token is not None:
        user_entry["token"] = token
    context_name = context or f"{user}@{cluster}"
    context_entry: dict[str, Any] = {"cluster": cluster, "user": user}
    if namespace:
        context_entry["namespace"] = namespace
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": cluster_entry}],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": context_name, "context": context_entry}],
        "current-context": context_name,
        "preferences": {},
    }
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            yaml.safe_dump(doc, out, default_flow_style=False, sort_keys=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


# -- helpers ----------------------------------------------------------------------------------


def _named(doc: dict[str, Any], section: str, field: str, name: str, source: str) -> dict[str, Any]:
    entries = doc.get(section) or []
    if not isinstance(entries, list):
        raise KubeconfigError(f"{source}: {section} must be a list")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(field) or {}
            if not isinstance(body, dict):
                raise KubeconfigError(f"{source}: {section} entry {name!r} has no {field} mapping")
            return body
    raise KubeconfigError(f"{source}: no {field} named {name!r} in {section}")


def _resolve(value: Any, base_dir: Path) -> Path:
    p = Path(str(value)).expanduser()
    return p if p.is_absolute() else base_dir / p


def _file_or_data(entry: dict[str, Any], key: str, base_dir: Path, where: str, suffix: str) -> str | None:
    """`key-data` (base64, wins) written to a private temp file, else `key` resolved; None if neither."""
    data = entry.get(f"{key}-data")
    if data:
        try:
            content = base64.b64decode("".join(str(data).split()), validate=True)
        except (binascii.Error, ValueError) as e:
            raise KubeconfigError(f"{where}: {key}-data is not valid base64") from e
        return _materialize(content, suffix)
    value = entry.get(key)
    if not value:
        return None
    p = _resolve(value, base_dir)
    if not p.is_file():
        raise KubeconfigError(f"{where}: {key} file {p} does not exist")
    return str(p)


def _put_file(entry: dict[str, Any], key: str, file: str | os.PathLike[str], embed: bool) -> None:
    p = Path(file).expanduser().resolve()
    if embed:
        entry[f"{key}-data"] = base64.b64encode(p.read_bytes()).decode("ascii")
    else:
        entry[key] = str(p)


_tmpdir: Path | None = None
_TMP_PREFIX = "minik8s-kubeconfig-"


def sweep_dead_process_dirs(parent: Path | None = None) -> list[Path]:
    """Remove the key directories of processes that died without running their exit handlers (kill -9):
    each is named after its process id, and a process that is gone needs its keys no more."""
    removed = []
    for d in Path(parent or tempfile.gettempdir()).glob(f"{_TMP_PREFIX}*-*"):
        pid = d.name[len(_TMP_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _materialize(content: bytes, suffix: str) -> str:
    """Write `content` once per process to a 0600 file in a private directory removed at exit (or, after a
    kill -9, by the next process that materializes one)."""
    global _tmpdir
    if _tmpdir is None or not _tmpdir.is_dir():
        sweep_dead_process_dirs()
        _tmpdir = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-"))
        atexit.register(shutil.rmtree, _tmpdir, True)
    target = _tmpdir / (hashlib.sha256(content).hexdigest()[:24] + suffix)
    if not target.exists():
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(content)
    return str(target)
