"""The kubelet's runtime (kubelet.kuberuntime over CRI, with its PLEG) against a real Docker shim and
the real Docker engine: sandboxes and the containers that join them, labels, the PLEG following the
runtime's container events, graceful stop, exec, logs from the CRI log file, OOM, a missing image,
a fresh runtime manager finding what runs (what a restarted kubelet relies on), and a container
made but never started replaced.

Everything runs under a test node's own dockershim and is removed at the end (dockershim.cleanup)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import docker
import pytest
import pytest_asyncio

from dockershim.cleanup import cleanup_node
from kubelet.container.runtime import LogOptions
from kubelet.cri.remote_image import RemoteImageService
from kubelet.cri.remote_runtime import RemoteRuntimeService
from kubelet.kuberuntime.manager import KubeGenericRuntimeManager
from kubelet.pleg.generic import GenericPLEG
from kubelet.pod_syncer import KubeletRuntimeHelper
from kubelet.volumes import VolumeManager
from machinery.api.core_v1 import Pod
from machinery.flowcontrol import Backoff
from tests.node_process import BUSYBOX, DockershimProcess, ensure_images, free_pod_cidrs, release_cidr


async def eventually(check: Callable[[], Awaitable[object] | object], timeout: float = 10.0,
                     what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


class Env:
    def __init__(self, node: str, root: Path, endpoint: str) -> None:
        self.node = node
        self.root = root
        self.endpoint = endpoint
        self.events: list[tuple[str, str, str]] = []
        self.runtime = self.manager()
        self.changed: list[str] = []

    def manager(self) -> KubeGenericRuntimeManager:
        helper = KubeletRuntimeHelper(VolumeManager(self.root), self.node, "127.0.0.1", lambda: (1000, 1 << 30))
        runtime_service = RemoteRuntimeService.connect(self.endpoint, 30)
        return KubeGenericRuntimeManager(
            runtime_service, RemoteImageService.connect(self.endpoint, 30), helper,
            lambda _pod, t, r, m: self.events.append((t, r, m)), GenericPLEG(runtime_service, "cri", 1.0),
            logs_root=str(self.root / "logs"), crash_backoff=Backoff(1, 10), image_backoff=Backoff(1, 10))

    def pod(self, name: str, containers: list[dict[str, Any]], **spec: Any) -> Pod:
        return Pod.model_validate({"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"name": name, "namespace": "rt", "uid": str(uuid.uuid4())},
                                   "spec": {"nodeName": self.node, "containers": containers, **spec}})

    async def run(self, pod: Pod, runtime: KubeGenericRuntimeManager | None = None) -> None:
        runtime = runtime or self.runtime
        runtime.helper.pod_volumes[pod.metadata.uid or ""] = \
            await asyncio.to_thread(runtime.helper.volumes.setup, pod)  # type: ignore[attr-defined]
        await runtime.sync_pod(pod)

    def reasons(self) -> list[str]:
        return [r for _, r, _ in self.events]


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    await asyncio.to_thread(ensure_images)
    node = f"rt-{uuid.uuid4().hex[:6]}"
    workdir = tmp_path_factory.mktemp("rt")
    root = workdir / "root"
    shim = DockershimProcess(workdir, node, root)
    await asyncio.to_thread(shim.start)
    cidr = free_pod_cidrs(1)[0]
    e = Env(node, root, shim.endpoint)
    try:
        await e.runtime.version()
        await e.runtime.update_pod_cidr(cidr)
        await eventually(lambda: _network_ready(e), 20, what="the shim's network ready")
        await e.runtime.pleg.start()
        e.runtime.pleg.add_listener(e.changed.append)
        yield e
    finally:
        await e.runtime.pleg.stop()
        await e.runtime.close()
        shim.kill()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            await asyncio.wrap_future(pool.submit(asyncio.run, cleanup_node(node, root)))
        shim.remove_socket_dir()
        release_cidr(cidr)
        client = docker.from_env()
        try:
            assert client.containers.list(all=True, filters={"label": f"io.minik8s.node={node}"}) == []
        finally:
            client.close()


async def _network_ready(e: Env) -> bool:
    return (await e.runtime.status()).network_ready


pytestmark = pytest.mark.asyncio(loop_scope="session")


def _docker_containers(uid: str) -> list[Any]:
    client = docker.from_env()
    try:
        return client.containers.list(all=True, filters={"label": f"io.kubernetes.pod.uid={uid}"})
    finally:
        client.close()


async def test_app_containers_join_the_sandbox_namespaces_and_carry_labels(env: Env) -> None:
    pod = env.pod("duo", [{"name": "a", "image": BUSYBOX, "command": ["sleep", "3600"]},
                          {"name": "b", "image": BUSYBOX, "command": ["sleep", "3600"]}])
    uid = pod.metadata.uid or ""
    await env.run(pod)
    status = env.runtime.get_pod_status(uid)
    assert status.ip and len(status.sandboxes) == 1 and status.sandboxes[0].ready
    assert {c.name for c in status.running_containers} == {"a", "b"}
    assert all(c.runtime == "docker" and c.sandbox_id == status.sandboxes[0].id for c in status.containers)
    by_name = {c.labels["io.kubernetes.container.name"]: c for c in await asyncio.to_thread(_docker_containers, uid)}
    sandbox = by_name["POD"]
    for name in ("a", "b"):
        assert by_name[name].attrs["HostConfig"]["NetworkMode"] == f"container:{sandbox.id}"
        assert by_name[name].labels["io.kubernetes.pod.namespace"] == "rt"
    await env.runtime.kill_pod(pod, uid, 0)
    await env.runtime.remove_pod(uid)
    assert await asyncio.to_thread(_docker_containers, uid) == []


async def test_the_pleg_follows_the_runtimes_container_events(env: Env) -> None:
    pod = env.pod("short", [{"name": "c", "image": BUSYBOX, "command": ["sh", "-c", "sleep 1; exit 3"]}],
                  restartPolicy="Never")
    uid = pod.metadata.uid or ""
    await env.run(pod)
    env.changed.clear()
    # well inside the 1 s relist period after the exit: the event, not the relist, brought it
    exited = await eventually(lambda: [c for c in env.runtime.get_pod_status(uid).containers if c.exited], 10,
                              what="the exit seen")
    assert exited[0].exit_code == 3 and exited[0].reason == "Error" and uid in env.changed
    await env.runtime.kill_pod(pod, uid, 0)
    await env.runtime.remove_pod(uid)


async def test_stop_sends_sigterm_then_sigkill_after_the_grace_period(env: Env) -> None:
    pod = env.pod("stop", [
        {"name": "polite", "image": BUSYBOX,
         "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]},
        {"name": "stubborn", "image": BUSYBOX, "command": ["sleep", "3600"]}])
    uid = pod.metadata.uid or ""
    await env.run(pod)
    started = time.monotonic()
    await env.runtime.kill_pod(pod, uid, 2)
    elapsed = time.monotonic() - started
    by_name = {c.name: c for c in env.runtime.get_pod_status(uid).containers}
    assert by_name["polite"].exit_code == 0 and by_name["stubborn"].exit_code == 137
    assert 1.5 < elapsed < 10, elapsed
    assert env.reasons().count("Killing") >= 2
    await env.runtime.remove_pod(uid)


async def test_exec_with_exit_codes_output_and_timeout(env: Env) -> None:
    pod = env.pod("exec", [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}])
    uid = pod.metadata.uid or ""
    await env.run(pod)
    cid = env.runtime.get_pod_status(uid).running_containers[0].id
    assert await env.runtime.run_in_container(cid, ["sh", "-c", "echo out; echo err >&2; exit 4"], 10) == \
        (4, b"out\nerr\n")
    code, _ = await env.runtime.run_in_container(cid, ["sleep", "5"], 1)
    assert code is None  # timed out
    await env.runtime.kill_pod(pod, uid, 0)
    await env.runtime.remove_pod(uid)


async def test_logs_from_the_cri_log_file_with_tail_and_timestamps(env: Env) -> None:
    pod = env.pod("logs", [{"name": "c", "image": BUSYBOX,
                            # stdout and stderr are two pipes: the pause keeps their order in the log
                            "command": ["sh", "-c", "for i in 1 2 3; do echo line$i; done; sleep 0.3; echo oops >&2"]}],
                  restartPolicy="Never")
    uid = pod.metadata.uid or ""
    await env.run(pod)
    c = await eventually(lambda: next((c for c in env.runtime.get_pod_status(uid).containers if c.exited), None),
                         what="the container done")
    assert c.log_path.endswith("/c/0.log")

    async def read(**options: Any) -> bytes:
        return b"".join([x async for x in env.runtime.get_container_logs(c, LogOptions(**options))])

    assert await read() == b"line1\nline2\nline3\noops\n"
    assert await read(tail_lines=2) == b"line3\noops\n"
    stamped = (await read(tail_lines=1, timestamps=True)).decode()
    assert stamped.endswith(" oops\n") and stamped[:4].isdigit() and "T" in stamped.split(" ")[0]
    assert await read(limit_bytes=8) == b"line1\nli"
    await env.runtime.remove_pod(uid)


async def test_memory_limit_ends_in_oom_killed(env: Env) -> None:
    pod = env.pod("oom", [{"name": "c", "image": BUSYBOX, "resources": {"limits": {"memory": "16Mi"}},
                           "command": ["sh", "-c", "head -c 64m /dev/zero | tail"]}], restartPolicy="Never")
    uid = pod.metadata.uid or ""
    await env.run(pod)
    c = await eventually(lambda: next((c for c in env.runtime.get_pod_status(uid).containers if c.exited), None), 20,
                         what="the container killed")
    assert c.oom_killed and c.exit_code == 137
    await env.runtime.kill_pod(pod, uid, 0)
    await env.runtime.remove_pod(uid)


async def test_a_missing_image_cannot_be_pulled(env: Env) -> None:
    pod = env.pod("missing", [{"name": "c", "image": "minik8s/absent:1"}])
    uid = pod.metadata.uid or ""
    result = await env.runtime.sync_pod(pod)
    reason, message = result.waiting["c"]
    assert reason == "ErrImagePull" and "minik8s/absent:1" in message and result.requeue_after is not None
    assert "Failed" in env.reasons() and not env.runtime.get_pod_status(uid).containers
    await env.runtime.kill_pod(pod, uid, 0)
    await env.runtime.remove_pod(uid)


async def test_a_fresh_runtime_manager_finds_what_runs(env: Env) -> None:
    pod = env.pod("adopt", [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}])
    uid = pod.metadata.uid or ""
    await env.run(pod)
    before = env.runtime.get_pod_status(uid)
    fresh = env.manager()
    try:
        await fresh.pleg.start()
        found = fresh.get_pod_status(uid)
        assert [s.id for s in found.sandboxes] == [s.id for s in before.sandboxes] and found.ip == before.ip
        assert [c.id for c in found.running_containers] == [c.id for c in before.running_containers]
        assert found.containers[0].attempt == 0 and found.containers[0].hash == before.containers[0].hash
        calls_before = len(_docker_containers(uid))
        await env.run(pod, fresh)  # nothing to do: nothing new
        assert len(_docker_containers(uid)) == calls_before
    finally:
        await fresh.pleg.stop()
        await fresh.close()
    await env.runtime.kill_pod(pod, uid, 0)
    await env.runtime.remove_pod(uid)


async def test_a_container_made_but_never_started_is_replaced(env: Env) -> None:
    pod = env.pod("crashed", [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}])
    uid = pod.metadata.uid or ""
    await env.run(pod)
    running = env.runtime.get_pod_status(uid).running_containers[0]
    # a kubelet that crashed between CreateContainer and StartContainer left this one behind
    await env.runtime.runtime_service.stop_container(running.id, 0)
    await env.runtime.runtime_service.remove_container(running.id)
    env.runtime.pleg.forget_container(running.id)
    from kubelet.kuberuntime.container_config import (
        RunContainerOptions,
        generate_container_config,
        generate_pod_sandbox_config,
        pod_log_directory,
    )
    assert pod.spec is not None
    sandbox = env.runtime.get_pod_status(uid).sandboxes[0]
    sandbox_config = generate_pod_sandbox_config(pod, 0, pod_log_directory(str(env.root / "logs"), pod))
    left = await env.runtime.runtime_service.create_container(
        sandbox.id, generate_container_config(pod, pod.spec.containers[0], 0, RunContainerOptions()), sandbox_config)
    await env.runtime.pleg.refresh_container(left, sandbox.id)
    await env.run(pod)
    status = env.runtime.get_pod_status(uid)
    assert left not in {c.id for c in status.containers} and len(status.running_containers) == 1
    await env.runtime.kill_pod(pod, uid, 0)
    await env.runtime.remove_pod(uid)
