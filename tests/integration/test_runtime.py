"""The kubelet's Docker runtime against the real Docker engine: sandboxes and the containers that
join them, labels, the event-fed container cache, graceful stop, exec (with stdin), logs, OOM,
missing images, and finding containers again by label (what a restarted kubelet relies on).

Everything is created under a test node name and removed at the end (kubelet.cleanup)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from kubelet.cleanup import cleanup_node
from kubelet.container_config import PodContext, build_create_config, container_env, spec_hash
from kubelet.docker_client import DockerClient, DockerError
from kubelet.runtime import (
    LABEL_CONTAINER_NAME,
    LABEL_CONTAINER_TYPE,
    LABEL_HASH,
    LABEL_IMAGE,
    LABEL_RESTART_COUNT,
    LABEL_SANDBOX_ID,
    DockerRuntime,
    RuntimeCache,
    docker_name,
    pod_labels,
)
from machinery.api.core_v1 import Pod
from tests.node_process import BUSYBOX, PAUSE, ensure_images


async def eventually(check: Callable[[], Awaitable[object] | object], timeout: float = 10.0,
                     what: str = "condition") -> object:
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
    def __init__(self, node: str, docker: DockerClient, cache: RuntimeCache, runtime: DockerRuntime) -> None:
        self.node = node
        self.docker = docker
        self.cache = cache
        self.runtime = runtime
        self.changed: list[str] = []

    def pod(self, name: str, containers: list[dict[str, Any]], **spec: Any) -> Pod:
        return Pod.model_validate({"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"name": name, "namespace": "rt", "uid": str(uuid.uuid4())},
                                   "spec": {"nodeName": self.node, "containers": containers, **spec}})

    async def sandbox(self, pod: Pod) -> str:
        info = await self.runtime.create_sandbox(pod_uid=pod.metadata.uid or "", pod_name=pod.metadata.name or "",
                                                 namespace="rt", attempt=0, hostname=pod.metadata.name or "")
        return info.id

    async def app(self, pod: Pod, sandbox_id: str, index: int = 0, attempt: int = 0, start: bool = True) -> str:
        assert pod.spec is not None
        c = pod.spec.containers[index]
        labels = {**pod_labels(self.node, pod.metadata.uid or "", pod.metadata.name or "", "rt"),
                  LABEL_CONTAINER_NAME: c.name, LABEL_CONTAINER_TYPE: "container", LABEL_RESTART_COUNT: str(attempt),
                  LABEL_HASH: spec_hash(c), LABEL_IMAGE: c.image or "", LABEL_SANDBOX_ID: sandbox_id}
        env = container_env(pod, c, PodContext(node_name=self.node))
        config = build_create_config(pod, c, image=c.image or "", sandbox_id=sandbox_id, env=env, binds=[],
                                     labels=labels)
        cid = await self.runtime.create_container(
            docker_name(c.name, pod.metadata.name or "", "rt", pod.metadata.uid or "", attempt), config)
        if start:
            await self.runtime.start(cid)
        return cid


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    await asyncio.to_thread(ensure_images)
    node = f"rt-{uuid.uuid4().hex[:6]}"
    docker = DockerClient()
    cache = RuntimeCache(docker, node, relist_period=2.0)
    e = Env(node, docker, cache, DockerRuntime(docker, cache, node, PAUSE))
    cache.add_listener(e.changed.append)
    await cache.start()
    try:
        yield e
    finally:
        await cache.stop()
        await cleanup_node(node, tmp_path_factory.mktemp("rt-state"), docker=docker)
        assert await docker.list_containers({"label": [f"io.minik8s.node={node}"]}) == []
        await docker.close()


pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_app_containers_join_the_sandbox_namespaces_and_carry_labels(env: Env) -> None:
    pod = env.pod("joined", [{"name": "app", "image": BUSYBOX, "command": ["sleep", "3600"]}])
    sandbox_id = await env.sandbox(pod)
    app_id = await env.app(pod, sandbox_id)
    sandbox = await env.docker.inspect_container(sandbox_id)
    app = await env.docker.inspect_container(app_id)
    assert sandbox["HostConfig"]["NetworkMode"] == "none"
    assert app["HostConfig"]["NetworkMode"] == f"container:{sandbox_id}"
    assert app["HostConfig"]["IpcMode"] == f"container:{sandbox_id}"
    labels = app["Config"]["Labels"]
    assert labels["io.minik8s.managed"] == "true" and labels["io.minik8s.node"] == env.node
    assert labels["io.kubernetes.pod.uid"] == pod.metadata.uid and labels["io.kubernetes.container.name"] == "app"
    assert sandbox["Config"]["Labels"]["io.kubernetes.docker.type"] == "podsandbox"
    code, out = await env.docker.exec_run(app_id, ["hostname"], 5)
    assert (code, out) == (0, b"joined\n")
    code, out = await env.docker.exec_run(app_id, ["sh", "-c", "ls /sys/class/net"], 5)
    assert out.split() == [b"lo"]  # no network until CNI gives the sandbox one


async def test_the_cache_follows_docker_events(env: Env) -> None:
    pod = env.pod("brief", [{"name": "c", "image": BUSYBOX, "command": ["sh", "-c", "sleep 0.3; exit 7"]}])
    sandbox_id = await env.sandbox(pod)
    cid = await env.app(pod, sandbox_id)
    uid = pod.metadata.uid or ""

    def exited() -> bool:
        info = env.cache.containers.get(cid)
        return info is not None and info.exited

    await eventually(exited, 10, "the exit seen through Docker's events")
    info = env.cache.containers[cid]
    assert info.exit_code == 7 and info.finished_at and info.started_at and info.finished_at > info.started_at
    assert uid in env.changed
    assert [i.id for i in env.cache.instances(uid, "c")] == [cid]
    assert [s.id for s in env.cache.sandboxes(uid)] == [sandbox_id]
    await env.docker.remove_container(cid)  # behind the runtime's back: the destroy event tells the cache
    await eventually(lambda: cid not in env.cache.containers, 10, "the removal seen")


async def test_stop_sends_sigterm_then_sigkill_after_the_grace_period(env: Env) -> None:
    pod = env.pod("stopping", [
        {"name": "polite", "image": BUSYBOX,
         "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]},
        {"name": "stubborn", "image": BUSYBOX, "command": ["sleep", "3600"]},
    ])
    sandbox_id = await env.sandbox(pod)
    polite = await env.app(pod, sandbox_id, 0)
    stubborn = await env.app(pod, sandbox_id, 1)
    await eventually(lambda: env.cache.containers[polite].running and env.cache.containers[stubborn].running, 5,
                     "both running")
    started = time.monotonic()
    await env.runtime.stop(polite, 10)
    assert time.monotonic() - started < 5
    assert env.cache.containers[polite].exit_code == 0
    started = time.monotonic()
    await env.runtime.stop(stubborn, 1)
    assert time.monotonic() - started >= 0.9
    assert env.cache.containers[stubborn].exit_code == 137


async def test_exec_with_exit_codes_output_stdin_and_timeout(env: Env) -> None:
    pod = env.pod("execs", [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}])
    cid = await env.app(pod, await env.sandbox(pod))
    assert await env.docker.exec_run(cid, ["sh", "-c", "echo hi; exit 4"], 5) == (4, b"hi\n")
    code, _ = await env.docker.exec_run(cid, ["sleep", "5"], 0.3)
    assert code is None
    exec_id = await env.docker.exec_create(cid, ["sh", "-c", "tr a-z A-Z; echo done >&2"], stdin=True)
    stream = await env.docker.exec_start(exec_id)
    await stream.write(b"abc\n")
    stream.close_stdin()
    got: dict[int, bytes] = {1: b"", 2: b""}
    async for kind, data in stream.output():
        got[kind] += data
    await stream.close()
    assert got == {1: b"ABC\n", 2: b"done\n"}
    assert (await env.docker.exec_inspect(exec_id))["ExitCode"] == 0


async def test_logs_are_demultiplexed_with_tail_and_timestamps(env: Env) -> None:
    pod = env.pod("logs", [{"name": "c", "image": BUSYBOX,
                            "command": ["sh", "-c", "echo one; echo two >&2; echo three; sleep 3600"]}])
    cid = await env.app(pod, await env.sandbox(pod))

    async def lines() -> list[tuple[int, bytes]]:
        return [chunk async for chunk in env.docker.logs(cid)]

    await eventually(lambda: _count(lines(), 3), 10, "three log lines")
    chunks = await lines()
    assert sorted(chunks) == [(1, b"one\n"), (1, b"three\n"), (2, b"two\n")]
    tail = [data async for _, data in env.docker.logs(cid, tail=1)]
    assert len(tail) == 1
    stamped = [data async for _, data in env.docker.logs(cid, timestamps=True)]
    assert all(d.split(b" ", 1)[0].endswith(b"Z") for d in stamped)


async def _count(chunks: Awaitable[list[Any]], n: int) -> bool:
    return len(await chunks) >= n


async def test_memory_limit_ends_in_oom_killed(env: Env) -> None:
    pod = env.pod("oom", [{"name": "c", "image": BUSYBOX,
                           "command": ["sh", "-c", "sleep 0.5; dd if=/dev/zero of=/dev/null bs=64M count=1"],
                           "resources": {"limits": {"memory": "20Mi"}}}])
    cid = await env.app(pod, await env.sandbox(pod))
    await eventually(lambda: env.cache.containers[cid].exited, 15, "the hog killed")
    info = await env.cache.refresh(cid)
    assert info is not None and info.oom_killed and info.exit_code == 137


async def test_missing_image_is_absent_and_cannot_be_pulled(env: Env) -> None:
    assert await env.docker.inspect_image("minik8s/does-not-exist:1") is None
    assert await env.docker.inspect_image(BUSYBOX) is not None
    with pytest.raises(DockerError):
        await env.docker.pull_image("minik8s/does-not-exist:1")


async def test_a_fresh_cache_finds_existing_containers_by_label(env: Env) -> None:
    pod = env.pod("adopt", [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}])
    sandbox_id = await env.sandbox(pod)
    cid = await env.app(pod, sandbox_id, attempt=2)
    fresh = RuntimeCache(env.docker, env.node)
    await fresh.relist()
    uid = pod.metadata.uid or ""
    [found] = fresh.instances(uid, "c")
    assert found.id == cid and found.attempt == 2 and found.running and found.sandbox_id == sandbox_id
    assert found.pod_name == "adopt" and found.pod_namespace == "rt" and found.image == BUSYBOX
    assert [s.id for s in fresh.sandboxes(uid)] == [sandbox_id]
    other = RuntimeCache(env.docker, f"{env.node}-other")
    await other.relist()
    assert other.for_pod(uid) == []  # another node's kubelet never sees them


async def test_a_name_left_over_by_a_crash_is_replaced(env: Env) -> None:
    pod = env.pod("leftover", [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}])
    sandbox_id = await env.sandbox(pod)
    first = await env.app(pod, sandbox_id, start=False)
    second = await env.app(pod, sandbox_id)  # same name (same attempt): the unstarted one is replaced
    assert first != second
    await eventually(lambda: first not in env.cache.containers, 5, "the leftover gone from the cache")
