"""A real kubelet (Docker through the dockershim) gives pods their ConfigMaps and Secrets: env valueFrom and
envFrom, configMap and secret volumes (a Secret on tmpfs), an updated ConfigMap reaching the files in seconds
(the kubelet watches each object its pods use, kubelet/object_watcher.py), and pods whose ConfigMap is
missing waiting with upstream's reasons (CreateContainerConfigError, FailedMount) until it appears. One
kubelet for the module (kubelet_node)."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, wait_for
from tests.node_process import BUSYBOX

PASSWORD = "pw-" + uuid.uuid4().hex[:12]
SYNC_PERIOD = 60.0  # kubelet.kubelet.RESYNC_SECONDS


@pytest.fixture
def api(apiserver: ApiServer) -> Any:
    with httpx.Client(base_url=apiserver.url, timeout=10) as client:
        yield client


def create(api: httpx.Client, ns: str, resource: str, body: dict[str, Any]) -> None:
    r = api.post(f"/api/v1/namespaces/{ns}/{resource}", json=body)
    assert r.status_code == 201, r.text


def pod(name: str, node: str, script: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": BUSYBOX, "command": ["sh", "-c", script], **spec.pop("container", {})}
    return {"metadata": {"name": name}, "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                                                 "containers": [container], **spec}}


def get(api: httpx.Client, ns: str, name: str) -> dict[str, Any]:
    r = api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    assert r.status_code == 200, r.text
    return r.json()


def running(p: dict[str, Any]) -> bool:
    return (p.get("status") or {}).get("phase") == "Running"


def waiting(p: dict[str, Any]) -> tuple[str, str] | None:
    for cs in (p.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state", {}).get("waiting")
        if state:
            return state.get("reason", ""), state.get("message", "")
    return None


def log(api: httpx.Client, ns: str, name: str) -> str:
    r = api.get(f"/api/v1/namespaces/{ns}/pods/{name}/log")
    return r.text if r.status_code == 200 else ""


def events(api: httpx.Client, ns: str, name: str) -> list[dict[str, Any]]:
    items = api.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
    return [e for e in items if e["involvedObject"]["name"] == name]


def test_env_and_volumes_with_an_update(api: httpx.Client, namespace: str, kubelet_node: str) -> None:
    create(api, namespace, "configmaps", {"metadata": {"name": "app"},
                                          "data": {"MODE": "dark", "conf.txt": "version=1", "1BAD": "x"}})
    create(api, namespace, "secrets", {"metadata": {"name": "db"}, "stringData": {"password": PASSWORD,
                                                                                   "user": "admin"}})
    script = ('echo "MODE=$MODE PASSWORD=$PASSWORD USER=$DB_user"; cat /etc/secret/password; echo; '
              "ls -lL /etc/secret/; while true; do echo \"conf: $(cat /etc/cfg/conf.txt)\"; sleep 1; done")
    create(api, namespace, "pods", pod("reader", kubelet_node, script, container={
        "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "MODE"}}},
                {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
        "envFrom": [{"secretRef": {"name": "db"}, "prefix": "DB_"}, {"configMapRef": {"name": "app"}}],
        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}, {"name": "secret", "mountPath": "/etc/secret"}]},
        volumes=[{"name": "cfg", "configMap": {"name": "app"}},
                 {"name": "secret", "secret": {"secretName": "db", "defaultMode": 0o400}}]))
    wait_for(lambda: "conf: version=1" in log(api, namespace, "reader"), 60, what="the pod's first output")
    out = log(api, namespace, "reader")
    assert f"MODE=dark PASSWORD={PASSWORD} USER=admin" in out and f"\n{PASSWORD}\n" in out
    assert "-r--------" in out  # defaultMode 0400 on the secret's files
    assert any(e["reason"] == "InvalidEnvironmentVariableNames" and e["type"] == "Warning" and e["message"] ==
               f"Keys [1BAD] from the EnvFrom configMap {namespace}/app were skipped since they are considered "
               "invalid environment variable names." for e in events(api, namespace, "reader"))
    uid = get(api, namespace, "reader")["metadata"]["uid"]
    mounts = Path("/proc/mounts").read_text()
    assert any(f"/pods/{uid}/volumes/kubernetes.io~secret/secret" in line and line.startswith("tmpfs")
               for line in mounts.splitlines()), "the secret volume is not a tmpfs"
    # an update reaches the file within the kubelet's sync period (the ..data swap: no half-written file)
    r = api.patch(f"/api/v1/namespaces/{namespace}/configmaps/app", json={"data": {"conf.txt": "version=2"}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    wait_for(lambda: "conf: version=2" in log(api, namespace, "reader"), SYNC_PERIOD / 4,
             what="the updated ConfigMap in the pod's volume (the kubelet watches it: well before a resync)")
    lines = [line for line in log(api, namespace, "reader").splitlines() if line.startswith("conf: ")]
    assert set(lines) <= {"conf: version=1", "conf: version=2"}, lines


def test_missing_configmap_waits_then_starts(api: httpx.Client, namespace: str, kubelet_node: str) -> None:
    create(api, namespace, "pods", pod("env-wait", kubelet_node, "echo got=$X; sleep 3600", container={
        "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "x"}}}]}))
    create(api, namespace, "pods", pod("vol-wait", kubelet_node, "cat /cfg/x; echo; sleep 3600", container={
        "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}, volumes=[{"name": "cfg",
                                                                            "configMap": {"name": "later"}}]))
    wait_for(lambda: waiting(get(api, namespace, "env-wait")) == ("CreateContainerConfigError",
                                                                   'configmap "later" not found'),
             60, what="env-wait to wait with CreateContainerConfigError")
    wait_for(lambda: any(e["reason"] == "FailedMount" and e["message"] ==
                         'MountVolume.SetUp failed for volume "cfg" : configmap "later" not found'
                         for e in events(api, namespace, "vol-wait")), 60, what="vol-wait's FailedMount event")
    assert not running(get(api, namespace, "vol-wait"))
    create(api, namespace, "configmaps", {"metadata": {"name": "later"}, "data": {"x": "arrived"}})
    for name in ("env-wait", "vol-wait"):
        wait_for(lambda name=name: "arrived" in log(api, namespace, name), 60, what=f"{name} to start")
    assert "got=arrived" in log(api, namespace, "env-wait")


def test_secret_key_missing_is_a_config_error(api: httpx.Client, namespace: str, kubelet_node: str) -> None:
    create(api, namespace, "secrets", {"metadata": {"name": "s"}, "data": {"a": base64.b64encode(b"1").decode()}})
    create(api, namespace, "pods", pod("nokey", kubelet_node, "sleep 3600", container={
        "env": [{"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "b"}}}]}))
    wait_for(lambda: waiting(get(api, namespace, "nokey")) == ("CreateContainerConfigError",
                                                                f"couldn't find key b in Secret {namespace}/s"),
             60, what="CreateContainerConfigError for the missing key")
