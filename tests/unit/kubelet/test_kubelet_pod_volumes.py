"""The pod's own volumes in the kubelet (issue 12): projected and downwardAPI payloads (kubelet/volume_projected.py),
the token manager's cache and refresh (kubelet/token_manager.py), hostPath types with upstream's messages, subPath
and subPathExpr (kubelet/volumes.py), and the Services as environment variables (kubelet/service_env.py). Pure
logic, a fake API client and temporary directories."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from kubelet.configmap_secret_manager import PodObjects
from kubelet.kubelet_pods import PodContext, container_env
from kubelet.service_env import service_env
from kubelet.token_manager import Token, TokenError, TokenKey, TokenManager
from kubelet.volume_projected import (
    SetUpError,
    aggregate,
    downward_api_data,
    format_map,
    projected_data,
    setup,
    token_key,
    token_keys,
)
from kubelet.volumes import HostVolume, VolumeError, VolumeManager, expand_sub_path_expr, memory_backed_size
from machinery.api.core_v1 import Container, DownwardAPIVolumeFile, Pod, Service
from machinery.api.meta import Status
from machinery.client import ApiError
from machinery.timeutil import format_rfc3339


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def make_pod(volumes: list[dict[str, Any]], **meta: Any) -> Pod:
    return Pod.model_validate({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "prod", "uid": "u-1", **meta},
        "spec": {"serviceAccountName": "builder", "volumes": volumes, "containers": [
            {"name": "app", "image": "img:1", "resources": {"limits": {"cpu": "500m", "memory": "64Mi"},
                                                            "requests": {"cpu": "250m"}}}]}})


OBJECTS = PodObjects("prod", configmaps={"kube-root-ca.crt": {"data": {"ca.crt": "PEM"}}, "gone": None},
                     secrets={"db": {"data": {"password": b64("s3cr3t")}}})
CTX = PodContext(node_allocatable_cpu_millis=2000, node_allocatable_memory=8 << 30)


# -- downward API ------------------------------------------------------------------------------------------


def test_format_map_is_go_quoted_and_sorted() -> None:
    assert format_map({"b": 'say "hi"\n', "a": "x\\y"}) == 'a="x\\\\y"\nb="say \\"hi\\"\\n"'
    assert format_map({}) == ""


def test_downward_api_items() -> None:
    pod = make_pod([], labels={"tier": "web", "app": "shop"}, annotations={"owner": "ops"})
    items = [DownwardAPIVolumeFile.model_validate(i) for i in [
        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
        {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}, "mode": 0o400},
        {"path": "uid", "fieldRef": {"fieldPath": "metadata.uid"}},
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "tier", "fieldRef": {"fieldPath": "metadata.labels['tier']"}},
        {"path": "./sub/../owner", "fieldRef": {"fieldPath": "metadata.annotations['owner']"}},
        {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1m"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory", "divisor": "1Mi"}},
        {"path": "req", "resourceFieldRef": {"containerName": "app", "resource": "requests.memory"}},
    ]]
    errors: list[str] = []
    data = downward_api_data(items, pod, 0o644, CTX, errors)
    assert errors == []
    assert data == {"name": (b"web", 0o644), "ns": (b"prod", 0o400), "uid": (b"u-1", 0o644),
                    "labels": (b'app="shop"\ntier="web"', 0o644), "tier": (b"web", 0o644),
                    "owner": (b"ops", 0o644), "cpu": (b"500", 0o644), "mem": (b"64", 0o644), "req": (b"0", 0o644)}


def test_downward_api_errors_are_aggregated() -> None:
    items = [DownwardAPIVolumeFile.model_validate(i) for i in [
        {"path": "a", "fieldRef": {"fieldPath": "spec.nodeName"}},
        {"path": "b", "resourceFieldRef": {"containerName": "nope", "resource": "limits.cpu"}}]]
    errors: list[str] = []
    downward_api_data(items, make_pod([]), 0o644, CTX, errors)
    assert aggregate(errors) == "[unsupported fieldPath: spec.nodeName, container nope not found]"
    assert aggregate(["x", "x"]) == "x"


# -- projected ---------------------------------------------------------------------------------------------


KUBE_API_ACCESS = {"name": "kube-api-access-abcde", "projected": {"defaultMode": 0o644, "sources": [
    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                  "fieldPath": "metadata.namespace"}}]}}]}}


def test_projected_service_account_volume() -> None:
    pod = make_pod([KUBE_API_ACCESS])
    assert pod.spec is not None and pod.spec.volumes is not None
    keys = token_keys(pod)
    assert keys == [TokenKey("prod", "builder", (), 3607, "web", "u-1")]
    errors: list[str] = []
    data = projected_data(pod.spec.volumes[0], pod, OBJECTS, CTX, {keys[0]: "jwt"}, errors)
    assert errors == []
    assert data == {"token": (b"jwt", 0o644), "ca.crt": (b"PEM", 0o644), "namespace": (b"prod", 0o644)}


def test_projected_errors_name_every_missing_source() -> None:
    pod = make_pod([{"name": "p", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "audience": "vault"}},
        {"configMap": {"name": "gone"}},
        {"secret": {"name": "db", "items": [{"key": "nokey", "path": "x"}]}},
        {"secret": {"name": "absent", "optional": True}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "nokey", "path": "y"}], "optional": True}}]}}])
    assert pod.spec is not None and pod.spec.volumes is not None
    volume = pod.spec.volumes[0]
    key = token_key(pod, volume.projected.sources[0].service_account_token)  # type: ignore[union-attr,index,arg-type]
    assert key.audiences == ("vault",)
    errors: list[str] = []
    data = projected_data(volume, pod, OBJECTS, CTX, {key: TokenError('failed to fetch token: serviceaccounts '
                                                                      '"builder" not found')}, errors)
    assert data == {}
    assert errors == ['failed to fetch token: serviceaccounts "builder" not found', 'configmap "gone" not found',
                      "references non-existent secret key: nokey"]
    with pytest.raises(SetUpError) as e:
        setup(Path("/nonexistent-pod-dir"), volume, pod, OBJECTS, CTX, {key: "jwt"}, lambda _p: True)
    assert str(e.value) == ('MountVolume.SetUp failed for volume "p" : [configmap "gone" not found, '
                            "references non-existent secret key: nokey]")


def test_downward_api_volume_follows_labels(tmp_path: Path) -> None:
    volume = {"name": "info",
              "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
    pod = make_pod([volume], labels={"v": "1"})
    assert pod.spec is not None and pod.spec.volumes is not None
    path = setup(tmp_path, pod.spec.volumes[0], pod, OBJECTS, CTX, {}, lambda _p: False)
    assert (path / "labels").read_text() == 'v="1"' and os.path.islink(path / "labels")
    relabelled = make_pod([volume], labels={"v": "2", "new": "yes"})
    assert relabelled.spec is not None and relabelled.spec.volumes is not None
    setup(tmp_path, relabelled.spec.volumes[0], relabelled, OBJECTS, CTX, {}, lambda _p: False)
    assert (path / "labels").read_text() == 'new="yes"\nv="2"'


# -- the token manager ---------------------------------------------------------------------------------------


class FakeTokenClient:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.now = 1_000_000.0
        self.fail: ApiError | None = None

    async def request(self, method: str, path: str, *, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.requests.append((path, body))
        if self.fail is not None:
            raise self.fail
        seconds = body["spec"].get("expirationSeconds", 3600)
        expires = format_rfc3339(self.now + seconds)
        return {"spec": {"expirationSeconds": seconds},
                "status": {"token": f"t{len(self.requests)}", "expirationTimestamp": expires}}


def test_token_manager_caches_and_refreshes_at_80_percent() -> None:
    client = FakeTokenClient()
    manager = TokenManager(client, clock=lambda: client.now, jitter=lambda: 0.0)  # type: ignore[arg-type]
    key = TokenKey("prod", "builder", ("vault",), 3600, "web", "u-1")

    async def go() -> None:
        assert await manager.get(key) == "t1"
        path, body = client.requests[0]
        assert path == "/api/v1/namespaces/prod/serviceaccounts/builder/token"
        assert body["spec"] == {"audiences": ["vault"], "expirationSeconds": 3600,
                                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u-1"}}
        assert manager.next_refresh("u-1") == 2880
        client.now += 2879
        assert await manager.get(key) == "t1"  # 79.97 % of its life: still good
        client.now += 2
        assert await manager.get(key) == "t2"  # past 80 %: a new one
        # a failed refresh keeps the old token while it is valid, then says so
        client.fail = ApiError(Status(message='serviceaccounts "builder" not found', reason="NotFound", code=404), 404)
        client.now += 2881
        assert await manager.get(key) == "t2"
        client.now += 1000
        with pytest.raises(TokenError, match=r'expired and refresh failed: serviceaccounts "builder" not found'):
            await manager.get(key)
        other = TokenKey("prod", "builder", (), 3600, "web2", "u-2")
        with pytest.raises(TokenError, match=r'^failed to fetch token: serviceaccounts "builder" not found$'):
            await manager.get(other)
        manager.delete_pod("u-1")
        assert manager.cache == {} and manager.next_refresh("u-1") is None

    asyncio.run(go())


def test_token_manager_refreshes_day_old_tokens() -> None:
    manager = TokenManager(None, clock=lambda: 200_000.0, jitter=lambda: 0.0)  # type: ignore[arg-type]
    year = 365 * 24 * 3600
    assert manager.requires_refresh(Token("t", 200_000.0 - 24 * 3600 - 1 + year, year))
    assert not manager.requires_refresh(Token("t", 200_000.0 - 24 * 3600 + 1 + year, year))


# -- hostPath ------------------------------------------------------------------------------------------------


def test_host_path_types(tmp_path: Path) -> None:
    check = VolumeManager._host_path
    d, f = tmp_path / "dir", tmp_path / "file"
    d.mkdir()
    f.write_text("x")
    sock_path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert check("v", str(sock_path), "Socket") == sock_path
        with pytest.raises(VolumeError, match=f"^hostPath type check failed: {sock_path} is not a directory, it's a "
                                              "Socket$"):
            check("v", str(sock_path), "Directory")
    assert check("v", str(d), "Directory") == d and check("v", str(f), "File") == f
    assert check("v", "/dev/null", "CharDevice") == Path("/dev/null")
    assert check("v", str(tmp_path / "nope"), "") == tmp_path / "nope"  # no type: no check
    made = tmp_path / "a" / "b"
    check("v", str(made), "DirectoryOrCreate")
    assert made.is_dir() and (made.stat().st_mode & 0o777) == 0o755
    check("v", str(tmp_path / "new.log"), "FileOrCreate")
    assert (tmp_path / "new.log").is_file()
    cases = [
        (str(f), "Directory", f"hostPath type check failed: {f} is not a directory, it's a File"),
        (str(f), "DirectoryOrCreate", f"hostPath type check failed: {f} is not a directory, it's a File"),
        (str(d), "FileOrCreate", f"hostPath type check failed: {d} is not a file, it's a Directory"),
        (str(d), "Socket", f"hostPath type check failed: {d} is not a socket file, it's a Directory"),
        (str(f), "CharDevice", f"hostPath type check failed: {f} is not a character device, it's a File"),
        ("/dev/null", "BlockDevice", "hostPath type check failed: /dev/null is not a block device, it's a CharDevice"),
        (str(tmp_path / "missing"), "Directory", f"hostPath {tmp_path / 'missing'} doesn't exist"),
        (str(tmp_path / "missing"), "File", f"hostPath {tmp_path / 'missing'} doesn't exist"),
        (str(f / "under"), "DirectoryOrCreate", f"mkdir {f / 'under'}: not a directory"),
        (str(tmp_path / "no" / "x"), "FileOrCreate", f"open {tmp_path / 'no' / 'x'}: no such file or directory"),
        (str(d), "Fifo", "Fifo is an invalid volume type"),
        ("/a/../etc", "Directory", "invalid HostPath `/a/../etc`: must not contain '..'"),
    ]
    for path, kind, message in cases:
        with pytest.raises(VolumeError) as e:
            check("v", path, kind)
        assert str(e.value) == message, (path, kind)


def test_host_path_failure_is_a_failed_mount(tmp_path: Path) -> None:
    pod = make_pod([{"name": "data", "hostPath": {"path": str(tmp_path / "missing"), "type": "Directory"}}])
    from kubelet.volumes import VolumeSetUpError
    with pytest.raises(VolumeSetUpError) as e:
        VolumeManager(tmp_path / "root").setup(pod)
    assert str(e.value) == (f'MountVolume.SetUp failed for volume "data" : hostPath {tmp_path / "missing"} '
                            "doesn't exist")


# -- subPath and subPathExpr ---------------------------------------------------------------------------------


def test_sub_path_expr_expansion() -> None:
    assert expand_sub_path_expr("logs/$(POD_NAME)", {"POD_NAME": "web"}) == "logs/web"
    with pytest.raises(VolumeError, match=r"^missing value for EMPTY, NOPE$"):
        expand_sub_path_expr("$(NOPE)/$(EMPTY)/$(POD_NAME)", {"POD_NAME": "web", "EMPTY": ""})


def test_binds_with_sub_paths(tmp_path: Path) -> None:
    manager = VolumeManager(tmp_path)
    volume = tmp_path / "vol"
    volume.mkdir()
    os.chmod(volume, 0o750)
    (volume / "escape").symlink_to("/etc")
    volumes = {"v": HostVolume(volume), "ro": HostVolume(volume, read_only=True)}
    container = Container.model_validate({"name": "c", "image": "i", "volumeMounts": [
        {"name": "v", "mountPath": "/data", "subPath": "a/b"},
        {"name": "v", "mountPath": "/logs", "subPathExpr": "logs/$(POD_NAME)", "readOnly": True},
        {"name": "ro", "mountPath": "/ro"}]})
    assert manager.binds(container, volumes, {"POD_NAME": "web"}) == [
        f"{volume}/a/b:/data:rw", f"{volume}/logs/web:/logs:ro", f"{volume}:/ro:ro"]
    assert (volume / "a" / "b").is_dir() and ((volume / "a" / "b").stat().st_mode & 0o777) == 0o750

    def refused(mount: dict[str, Any], message: str, env: dict[str, str] | None = None) -> None:
        c = Container.model_validate({"name": "c", "image": "i", "volumeMounts": [{"name": "v", "mountPath": "/m",
                                                                                  **mount}]})
        with pytest.raises(VolumeError) as e:
            manager.binds(c, volumes, env)
        assert str(e.value) == message

    refused({"subPath": "escape"}, 'failed to prepare subPath for volumeMount "v" of container "c"')
    refused({"subPath": "escape/new"}, 'failed to create subPath directory for volumeMount "v" of container "c"')
    refused({"subPathExpr": "$(X)"}, "missing value for X")
    refused({"subPathExpr": "/$(X)"}, "error SubPath `/abs` must not be an absolute path", {"X": "abs"})
    refused({"subPathExpr": "$(X)"}, "unable to provision SubPath `../up`: must not contain '..'", {"X": "../up"})
    assert not Path("/etc/new").exists()


# -- Services as environment variables -------------------------------------------------------------------


def _service(name: str, namespace: str, ip: str, *ports: dict[str, Any]) -> Service:
    return Service.model_validate({"metadata": {"name": name, "namespace": namespace},
                                   "spec": {"clusterIP": ip, "ports": list(ports)}})


SERVICES = [_service("kubernetes", "default", "10.96.0.1", {"name": "https", "port": 443, "protocol": "TCP"}),
            _service("web-db", "prod", "10.96.0.20", {"port": 5432}, {"name": "metrics", "port": 9187,
                                                                        "protocol": "TCP"}),
            _service("headless", "prod", "None", {"port": 80}),
            _service("other", "staging", "10.96.0.30", {"port": 80})]


def test_service_env_vars() -> None:
    env = service_env(SERVICES, "prod", True)
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1" and env["KUBERNETES_SERVICE_PORT"] == "443"
    assert env["KUBERNETES_SERVICE_PORT_HTTPS"] == "443"
    assert env["KUBERNETES_PORT"] == "tcp://10.96.0.1:443"
    assert env["KUBERNETES_PORT_443_TCP_ADDR"] == "10.96.0.1" and env["KUBERNETES_PORT_443_TCP_PROTO"] == "tcp"
    assert env["WEB_DB_SERVICE_HOST"] == "10.96.0.20" and env["WEB_DB_SERVICE_PORT"] == "5432"
    assert env["WEB_DB_SERVICE_PORT_METRICS"] == "9187" and env["WEB_DB_PORT_9187_TCP"] == "tcp://10.96.0.20:9187"
    assert not any(k.startswith(("HEADLESS_", "OTHER_")) for k in env)
    # enableServiceLinks false: the master service only
    assert {k.split("_")[0] for k in service_env(SERVICES, "prod", False)} == {"KUBERNETES"}


def test_container_env_wins_over_service_env() -> None:
    pod = make_pod([])
    assert pod.spec is not None
    container = Container.model_validate({"name": "c", "image": "i", "env": [
        {"name": "KUBERNETES_SERVICE_PORT", "value": "8443"},
        {"name": "API", "value": "https://$(KUBERNETES_SERVICE_HOST)"}]})
    ctx = PodContext(service_env=service_env(SERVICES, "prod", False))
    env = dict(container_env(pod, container, ctx))
    assert env["KUBERNETES_SERVICE_PORT"] == "8443" and env["API"] == "https://10.96.0.1"
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"


# -- emptyDir medium Memory ---------------------------------------------------------------------------------


def test_memory_backed_empty_dir_size() -> None:
    def sized(limits: list[str | None], size_limit: str | None, allocatable: int = 8 << 30) -> int:
        containers = [{"name": f"c{i}", "image": "i", **({"resources": {"limits": {"memory": m}}} if m else {})}
                      for i, m in enumerate(limits)]
        pod = Pod.model_validate({"metadata": {"name": "p"}, "spec": {"containers": containers}})
        return memory_backed_size(pod, size_limit, allocatable)

    assert sized([None], None) == 8 << 30  # the node's allocatable memory
    assert sized(["64Mi", "64Mi"], None) == 128 << 20  # the pod's limit, when every container has one
    assert sized(["64Mi", None], None) == 8 << 30
    assert sized(["64Mi"], "8Mi") == 8 << 20  # sizeLimit when smaller
    assert sized(["64Mi"], "1Gi") == 64 << 20  # ... never above what the pod may use
    assert sized([None], "16Mi", allocatable=0) == 16 << 20


# -- the object watcher ---------------------------------------------------------------------------------------


class FakeWatchClient:
    """list and watch of single objects (fieldSelector metadata.name=NAME), events pushed by the test."""

    def __init__(self, objects: dict[tuple[str, str, str], Any]) -> None:
        self.objects = objects  # (plural, namespace, name) -> model
        self.queues: dict[tuple[str, str, str], asyncio.Queue[Any]] = {}
        self.lists: list[tuple[str, str, str]] = []

    @staticmethod
    def _key(model: Any, namespace: str, field_selector: str) -> tuple[str, str, str]:
        return ("configmaps" if model.__name__ == "ConfigMap" else "secrets", namespace,
                field_selector.split("=", 1)[1])

    async def list(self, model: Any, namespace: str, *, label_selector: Any = None, field_selector: str = "",
                   **_: Any) -> tuple[list[Any], str, None]:
        key = self._key(model, namespace, field_selector)
        self.lists.append(key)
        obj = self.objects.get(key)
        return ([obj] if obj is not None else []), "1", None

    async def watch(self, model: Any, namespace: str, *, field_selector: str = "", **_: Any) -> Any:
        queue = self.queues.setdefault(self._key(model, namespace, field_selector), asyncio.Queue())
        while True:
            yield await queue.get()


def test_object_watcher_wakes_pods_and_releases_watches() -> None:
    from types import SimpleNamespace

    from kubelet.object_watcher import ObjectWatcher
    from machinery.api.core_v1 import ConfigMap, Secret

    def cm(data: str, rv: str, immutable: bool | None = None) -> ConfigMap:
        return ConfigMap.model_validate({"metadata": {"name": "app", "namespace": "prod", "resourceVersion": rv},
                                         "data": {"k": data}, **({"immutable": immutable} if immutable else {})})

    def pod_using(uid: str, *volumes: dict[str, Any]) -> Pod:
        return Pod.model_validate({"metadata": {"name": uid, "namespace": "prod", "uid": uid},
                                   "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": list(volumes)}})

    async def go() -> None:
        client = FakeWatchClient({("configmaps", "prod", "app"): cm("1", "5")})
        woken: list[str] = []
        watcher = ObjectWatcher(client, woken.append)  # type: ignore[arg-type]
        a = pod_using("a", {"name": "v", "configMap": {"name": "app"}}, {"name": "s", "secret": {"secretName": "db"}})
        b = pod_using("b", {"name": "v", "configMap": {"name": "app"}})
        watcher.register_pod(a)
        watcher.register_pod(b)
        assert set(watcher.watched) == {("configmaps", "prod", "app"), ("secrets", "prod", "db")}
        assert await watcher.get(ConfigMap, "prod", "app") == (True, cm("1", "5").to_dict())
        assert await watcher.get(Secret, "prod", "db") == (True, None)  # listed: it does not exist
        assert await watcher.get(Secret, "prod", "other") == (False, None)  # not watched: read it directly
        assert sorted(client.lists) == [("configmaps", "prod", "app"), ("secrets", "prod", "db")]  # one list each
        woken.clear()
        await client.queues[("configmaps", "prod", "app")].put(
            SimpleNamespace(type="MODIFIED", object=cm("2", "6"), resource_version="6"))
        for _ in range(100):
            if set(woken) == {"a", "b"}:
                break
            await asyncio.sleep(0.01)
        assert set(woken) == {"a", "b"}  # both pods using it, at once
        assert (await watcher.get(ConfigMap, "prod", "app"))[1]["data"] == {"k": "2"}  # type: ignore[index]
        watcher.unregister_pod("a")
        assert set(watcher.watched) == {("configmaps", "prod", "app")}  # the Secret only a used
        watcher.unregister_pod("b")
        assert watcher.watched == {}
        # an immutable object is read once, then no longer watched
        client.objects[("configmaps", "prod", "app")] = cm("3", "7", immutable=True)
        watcher.register_pod(b)
        assert (await watcher.get(ConfigMap, "prod", "app"))[1]["data"] == {"k": "3"}  # type: ignore[index]
        task = watcher.watched[("configmaps", "prod", "app")].task
        await asyncio.wait_for(task, 5)  # the informer stopped by itself
        assert (await watcher.get(ConfigMap, "prod", "app"))[0] is True
        await watcher.stop()

    asyncio.run(go())
