"""A kubelet on the fake CRI runtime for unit tests: the runtime manager, the syncer and the pod
workers wired as the Kubelet wires them, with an in-memory stand-in for the apiserver's pod status
and deletion calls (no etcd, no Docker, no root)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubelet.cri.remote_image import RemoteImageService
from kubelet.cri.remote_runtime import RemoteRuntimeService
from kubelet.kuberuntime.manager import KubeGenericRuntimeManager
from kubelet.pleg.generic import GenericPLEG
from kubelet.pod_syncer import KubeletPodSyncer, KubeletRuntimeHelper
from kubelet.pod_workers import PodWorkers
from kubelet.probes import ProbeManager, ProbeTarget
from kubelet.status_manager import StatusManager
from kubelet.volumes import VolumeManager
from machinery.api.core_v1 import Pod
from machinery.cri.testing.fake_runtime import FakeRuntime
from machinery.flowcontrol import Backoff

IMAGE = "minik8s/busybox:1.35"
NODE_IP = "192.0.2.10"


class PodStatusClient:
    """The two calls the syncer makes to the apiserver: PATCH pods/{name}/status and the final DELETE."""

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}
        self.deleted: list[str] = []
        self.patches = 0

    async def patch_raw(self, kind: Any, name: str, body: dict[str, Any], patch_type: str, namespace: str | None,
                        subresource: str | None = None) -> dict[str, Any]:
        pod = self.pods[name]
        status = pod.status.to_dict() if pod.status else {}
        for key, value in body["status"].items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = value
        data = pod.to_dict()
        data["status"] = status
        data["metadata"]["resourceVersion"] = str(int(pod.metadata.resource_version or "1") + 1)
        self.pods[name] = Pod.model_validate(data)
        self.patches += 1
        return self.pods[name].to_dict()

    async def delete(self, kind: Any, name: str, namespace: str | None, **_: Any) -> None:
        self.deleted.append(name)


def make_pod(name: str = "p", containers: list[dict[str, Any]] | None = None, uid: str | None = None,
             **spec: Any) -> Pod:
    return Pod.model_validate({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}", "resourceVersion": "1"},
        "spec": {"nodeName": "n1", "containers": containers or [{"name": "c", "image": IMAGE}], **spec},
        "status": {"phase": "Pending"}})


class FakeKubelet:
    """What kubelet.kubelet.Kubelet builds, on FakeRuntime."""

    def __init__(self, root: Path, *, backoff_base: float = 0.2, network_ready: bool = True) -> None:
        self.fake = FakeRuntime(images=[IMAGE])
        self.client = PodStatusClient()
        self.events: list[tuple[str, str, str]] = []
        self.volumes = VolumeManager(root)
        self.helper = KubeletRuntimeHelper(self.volumes, "n1", NODE_IP, lambda: (2000, 2 << 30))
        runtime_service = RemoteRuntimeService(self.fake)
        self.pleg = GenericPLEG(runtime_service, "fake", relist_period=0.05)
        self.runtime = KubeGenericRuntimeManager(
            runtime_service, RemoteImageService(self.fake), self.helper, self.event, self.pleg,
            logs_root=str(root / "logs"), runtime_name="fake",
            crash_backoff=Backoff(backoff_base, 10 * backoff_base),
            image_backoff=Backoff(backoff_base, 10 * backoff_base))
        self.status = StatusManager(self.client, resync=lambda uid: self.workers.wake(uid))  # type: ignore[arg-type]
        self.probes = ProbeManager(self.runtime.run_in_container, self.probe_target, lambda uid: self.workers.wake(uid),
                                   self.probe_kill, lambda _p, t, r, m: self.events.append((t, r, m)))
        self.network_ready = network_ready
        self.syncer = KubeletPodSyncer(self.runtime, self.status, self.volumes, self.helper, self.probes,
                                       self.client, self.event, NODE_IP,  # type: ignore[arg-type]
                                       lambda: self.network_ready)
        self.workers = PodWorkers(self.syncer, self.status.is_own_status_write)

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    def probe_kill(self, uid: str, name: str, container_id: str, reason: str) -> None:
        self.runtime.request_kill(uid, name, container_id, reason)
        self.workers.wake(uid)

    def probe_target(self, uid: str, name: str) -> ProbeTarget | None:
        status = self.runtime.get_pod_status(uid)
        instances = status.instances(name)
        if not instances or not instances[0].running or not status.ip:
            return None
        return ProbeTarget(instances[0].id, instances[0].started_at or 0.0, status.ip)

    async def start(self) -> None:
        await self.pleg.start()
        self.pleg.add_listener(lambda uid: self.workers.wake(uid))

    async def stop(self) -> None:
        await self.workers.stop()
        await self.probes.close()
        await self.pleg.stop()
        await self.runtime.close()

    def add(self, pod: Pod) -> None:
        self.client.pods[pod.metadata.name or ""] = pod
        self.workers.update(pod)

    def api_pod(self, name: str = "p") -> Pod:
        return self.client.pods[name]

    def reasons(self) -> list[str]:
        return [r for _, r, _ in self.events]


async def eventually(check: Callable[[], Any], timeout: float = 5.0, what: str = "") -> Any:
    """Wait on a condition with a deadline (no sleeps standing in for synchronisation)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.01)


def container_state(pod: Pod, name: str = "c") -> dict[str, Any]:
    for cs in (pod.status.to_dict() if pod.status else {}).get("containerStatuses") or []:
        if cs["name"] == name:
            return dict(cs)
    return {}
