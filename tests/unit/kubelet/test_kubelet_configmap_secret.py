"""ConfigMaps and Secrets in a pod (issue 12, the kubelet's slice): env valueFrom and envFrom
(kubelet/kubelet_pods.py), configMap and secret volume payloads (kubelet/volumes.py) and the atomic
`..data` swap that updates them (kubelet/atomic_writer.py). Pure logic and a temporary directory."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from kubelet import atomic_writer
from kubelet.configmap_secret_manager import PodObjects
from kubelet.container.runtime import ConfigError
from kubelet.kubelet_pods import PodContext, container_env
from kubelet.volumes import VolumeManager, VolumeSetUpError
from machinery.api.core_v1 import Pod


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


OBJECTS = PodObjects("prod", configmaps={"app": {"data": {"MODE": "dark", "game.properties": "a=1", "1BAD": "x"},
                                                 "binaryData": {"blob": b64("\x00")}},
                                         "gone": None},
                     secrets={"db": {"data": {"password": b64("s3cr3t"), "user": b64("admin")}}, "nope": None})


def make_pod(container: dict[str, Any] | None = None, volumes: list[dict[str, Any]] | None = None) -> Pod:
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": "web", "namespace": "prod", "uid": "u-1"},
                               "spec": {"containers": [{"name": "c", "image": "img:1", **(container or {})}],
                                        "volumes": volumes or []}})


def env(container: dict[str, Any], objects: PodObjects = OBJECTS) -> list[tuple[str, str]]:
    pod = make_pod(container)
    assert pod.spec is not None
    return container_env(pod, pod.spec.containers[0], PodContext(), objects)


def test_value_from_keys() -> None:
    assert env({"env": [
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "MODE"}}},
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
        {"name": "DSN", "value": "$(PASSWORD)@db/$(MODE)"},
        {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "missing", "optional": True}}},
        {"name": "OPT2", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": True}}},
    ]}) == [("MODE", "dark"), ("PASSWORD", "s3cr3t"), ("DSN", "s3cr3t@db/dark")]


@pytest.mark.parametrize(("source", "message"), [
    ({"configMapKeyRef": {"name": "gone", "key": "k"}}, 'configmap "gone" not found'),
    ({"configMapKeyRef": {"name": "app", "key": "missing"}}, "couldn't find key missing in ConfigMap prod/app"),
    ({"secretKeyRef": {"name": "nope", "key": "k"}}, 'secret "nope" not found'),
    ({"secretKeyRef": {"name": "db", "key": "token"}}, "couldn't find key token in Secret prod/db"),
])
def test_value_from_errors(source: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        env({"env": [{"name": "X", "valueFrom": source}]})


def test_env_from() -> None:
    warnings: list[tuple[str, str]] = []
    pod = make_pod({"envFrom": [{"configMapRef": {"name": "app"}}]})
    assert pod.spec is not None
    container_env(pod, pod.spec.containers[0], PodContext(), OBJECTS, warnings)
    assert warnings == [("InvalidEnvironmentVariableNames", "Keys [1BAD] from the EnvFrom configMap prod/app were "
                         "skipped since they are considered invalid environment variable names.")]
    got = env({"envFrom": [{"configMapRef": {"name": "app"}}, {"secretRef": {"name": "db"}, "prefix": "DB_"},
                           {"configMapRef": {"name": "gone", "optional": True}}],
               "env": [{"name": "MODE", "value": "light"}, {"name": "X", "value": "$(DB_user)"}]})
    # data only (not binaryData); "1BAD" is no env var name; env entries win over envFrom's
    assert dict(got) == {"game.properties": "a=1", "DB_password": "s3cr3t", "DB_user": "admin", "MODE": "light",
                         "X": "admin"}
    assert [name for name, _ in got].count("MODE") == 1
    with pytest.raises(ConfigError, match='secret "nope" not found'):
        env({"envFrom": [{"secretRef": {"name": "nope"}}]})


# -- volumes -----------------------------------------------------------------------------------------


def test_atomic_writer_swaps_data(tmp_path: Path) -> None:
    volume = tmp_path / "v"
    assert atomic_writer.write(volume, {"a": (b"1", 0o644), "dir/b": (b"2", 0o600)})
    first = os.readlink(volume / "..data")
    assert first.startswith("..") and (volume / "a").read_bytes() == b"1"
    assert (volume / "dir" / "b").read_bytes() == b"2"
    assert os.readlink(volume / "a") == "..data/a" and ((volume / "dir" / "b").stat().st_mode & 0o777) == 0o600
    assert not atomic_writer.write(volume, {"a": (b"1", 0o644), "dir/b": (b"2", 0o600)})  # unchanged: no write
    assert os.readlink(volume / "..data") == first
    assert atomic_writer.write(volume, {"a": (b"changed", 0o644), "c": (b"3", 0o644)})
    second = os.readlink(volume / "..data")
    assert second != first and not (volume / first).exists()  # the old payload is gone
    assert (volume / "a").read_bytes() == b"changed" and (volume / "c").read_bytes() == b"3"
    assert not (volume / "dir").exists() and not (volume / "dir").is_symlink()
    assert sorted(p.name for p in volume.iterdir()) == sorted(["..data", second, "a", "c"])


def test_configmap_volume_with_items_and_modes(tmp_path: Path) -> None:
    pod = make_pod(volumes=[
        {"name": "all", "configMap": {"name": "app"}},
        {"name": "some", "configMap": {"name": "app", "defaultMode": 0o400,
                                       "items": [{"key": "game.properties", "path": "conf/game"},
                                                 {"key": "blob", "path": "b", "mode": 0o600}]}},
        {"name": "maybe", "configMap": {"name": "gone", "optional": True}},
    ])
    volumes = VolumeManager(tmp_path).setup(pod, OBJECTS)
    everything = volumes["all"].path
    assert volumes["all"].read_only and everything.name == "all" and everything.parent.name == "kubernetes.io~configmap"
    assert sorted(p.name for p in everything.iterdir() if not p.name.startswith("..")) == \
        ["1BAD", "MODE", "blob", "game.properties"]
    assert (everything / "blob").read_bytes() == b"\x00" and ((everything / "MODE").stat().st_mode & 0o777) == 0o644
    some = volumes["some"].path
    assert (some / "conf" / "game").read_text() == "a=1" and ((some / "conf" / "game").stat().st_mode & 0o777) == 0o400
    assert ((some / "b").stat().st_mode & 0o777) == 0o600
    assert [p.name for p in volumes["maybe"].path.iterdir() if not p.name.startswith("..")] == []


@pytest.mark.parametrize(("volume", "message"), [
    ({"name": "cfg", "configMap": {"name": "gone"}},
     'MountVolume.SetUp failed for volume "cfg" : configmap "gone" not found'),
    ({"name": "cfg", "configMap": {"name": "app", "items": [{"key": "nokey", "path": "x"}]}},
     'MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: nokey'),
    ({"name": "s", "secret": {"secretName": "nope"}},
     'MountVolume.SetUp failed for volume "s" : secret "nope" not found'),
])
def test_missing_objects_fail_the_mount(tmp_path: Path, volume: dict[str, Any], message: str) -> None:
    with pytest.raises(VolumeSetUpError) as e:
        VolumeManager(tmp_path).setup(make_pod(volumes=[volume]), OBJECTS)
    assert str(e.value) == message
