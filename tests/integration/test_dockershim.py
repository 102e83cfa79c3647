"""The dockershim as a CRI client sees it (after upstream's critest, cri-tools' validation suite): a real
Docker, a real `python -m dockershim` and a grpc.aio channel over its unix socket. Sandboxes, containers,
logs, exec, events, images and bad input; every test leaves nothing behind, the module's cleanup checks."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ipaddress
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import docker
import grpc
import httpx
import pytest
import websockets

from cni.config import bridge_name, network_name
from dockershim.cleanup import cleanup_node
from machinery.cri import api_pb2 as cri
from machinery.cri import api_pb2_grpc as cri_grpc
from tests.cluster import wait_for
from tests.node_process import BUSYBOX, HTTPD, PAUSE, DockershimProcess, ensure_images, free_pod_cidrs, release_cidr

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _docker() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:
        pytest.skip(f"no Docker engine: {e}")
    return client


def node_containers(client: docker.DockerClient, node: str) -> list[str]:
    return [c.id for c in client.containers.list(all=True, filters={"label": f"io.minik8s.node={node}"})]


class Shim:
    """One shim process and what the tests need to know about it."""

    def __init__(self, workdir: Path, node: str) -> None:
        self.node = node
        self.root_dir = workdir / f"root-{node}"
        self.process = DockershimProcess(workdir, node, self.root_dir)
        self.pod_cidr = ""
        self.log_dir = workdir / f"logs-{node}"

    @property
    def lease_dir(self) -> Path:
        return self.root_dir / "cni" / "ipam" / network_name(self.node)

    def leases(self) -> set[str]:
        d = self.lease_dir
        return {p.name for p in d.iterdir() if p.name[0].isdigit()} if d.is_dir() else set()

    def teardown(self) -> None:
        self.process.kill()
        try:
            # in a thread of its own: the teardown may run inside the tests' event loop
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                pool.submit(asyncio.run, cleanup_node(self.node, self.root_dir)).result()
        finally:
            self.process.remove_socket_dir()
            if self.pod_cidr:
                release_cidr(self.pod_cidr)


@contextlib.contextmanager
def running_shim(workdir: Path) -> Iterator[Shim]:
    client = _docker()
    ensure_images()
    shim = Shim(workdir, f"shim-{uuid.uuid4().hex[:6]}")
    try:
        shim.process.start()
        yield shim
    finally:
        shim.teardown()
        leftovers = node_containers(client, shim.node)
        client.close()
        assert not leftovers, f"containers of {shim.node} left behind: {leftovers}"
        assert not Path("/sys/class/net", bridge_name(shim.node)).exists()


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shim]:
    with running_shim(tmp_path_factory.mktemp("dockershim")) as s:
        s.pod_cidr = free_pod_cidrs(1)[0]
        yield s


class Client:
    def __init__(self, endpoint: str) -> None:
        self.channel = grpc.aio.insecure_channel(endpoint)
        self.runtime = cri_grpc.RuntimeServiceStub(self.channel)
        self.images = cri_grpc.ImageServiceStub(self.channel)


@pytest.fixture
async def rt(shim: Shim) -> AsyncIterator[Client]:
    client = Client(shim.process.endpoint)
    await client.runtime.UpdateRuntimeConfig(cri.UpdateRuntimeConfigRequest(
        runtime_config=cri.RuntimeConfig(network_config=cri.NetworkConfig(pod_cidr=shim.pod_cidr))))
    try:
        yield client
    finally:
        await client.channel.close()


def sandbox_config(shim: Shim, name: str, **kwargs: object) -> cri.PodSandboxConfig:
    uid = uuid.uuid4().hex
    return cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name=name, namespace="default", uid=uid, attempt=0), hostname=name,
        log_directory=str(shim.log_dir / uid), labels={"io.kubernetes.pod.uid": uid, "test": "dockershim"},
        annotations={"note": "made by test_dockershim"}, **kwargs)


def container_config(name: str, image: str = BUSYBOX, command: list[str] | None = None,
                     **kwargs: object) -> cri.ContainerConfig:
    # a pid namespace of its own, as the kubelet asks for it (CRI's zero value, POD, shares the sandbox's)
    kwargs.setdefault("linux", cri.LinuxContainerConfig(security_context=cri.LinuxContainerSecurityContext(
        namespace_options=cri.NamespaceOption(pid=cri.CONTAINER))))
    return cri.ContainerConfig(metadata=cri.ContainerMetadata(name=name, attempt=0), image=cri.ImageSpec(image=image),
                               command=command or [], log_path=f"{name}/0.log",
                               labels={"io.kubernetes.container.name": name}, **kwargs)


async def run_sandbox(rt: Client, config: cri.PodSandboxConfig) -> str:
    return (await rt.runtime.RunPodSandbox(cri.RunPodSandboxRequest(config=config))).pod_sandbox_id


async def start_container(rt: Client, sandbox_id: str, sandbox: cri.PodSandboxConfig,
                          config: cri.ContainerConfig) -> str:
    created = await rt.runtime.CreateContainer(cri.CreateContainerRequest(
        pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox))
    await rt.runtime.StartContainer(cri.StartContainerRequest(container_id=created.container_id))
    return created.container_id


async def wait_exited(rt: Client, container_id: str, timeout: float = 30.0) -> cri.ContainerStatus:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = (await rt.runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=container_id))).status
        if status.state == cri.CONTAINER_EXITED:
            return status
        assert asyncio.get_running_loop().time() < deadline, f"container {container_id[:12]} did not exit: {status}"
        await asyncio.sleep(0.1)


async def remove_sandbox(rt: Client, sandbox_id: str) -> None:
    with contextlib.suppress(grpc.aio.AioRpcError):
        await rt.runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))
    await rt.runtime.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))


@contextlib.asynccontextmanager
async def container_events(rt: Client) -> AsyncIterator[list[cri.ContainerEventResponse]]:
    """The shim's GetContainerEvents stream, collected into a list while the block runs."""
    seen: list[cri.ContainerEventResponse] = []
    stream = rt.runtime.GetContainerEvents(cri.GetEventsRequest())

    async def read() -> None:
        async for event in stream:
            seen.append(event)

    reader = asyncio.create_task(read())
    try:
        yield seen
    finally:
        reader.cancel()
        stream.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def wait_for_event(seen: list[cri.ContainerEventResponse], container_id: str, kind: int) -> None:
    deadline = asyncio.get_running_loop().time() + 20
    while not any(e.container_id == container_id and e.container_event_type == kind for e in seen):
        assert asyncio.get_running_loop().time() < deadline, f"events so far: {seen}"
        await asyncio.sleep(0.05)


async def expect_error(call: object, code: grpc.StatusCode) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == code, caught.value
    return caught.value.details() or ""


# -- runtime --------------------------------------------------------------------------------------------------


async def test_version_and_network_ready_only_after_update_runtime_config(tmp_path: Path) -> None:
    with running_shim(tmp_path) as fresh:
        client = Client(fresh.process.endpoint)
        try:
            version = await client.runtime.Version(cri.VersionRequest(version="v1"))
            assert (version.runtime_name, version.runtime_api_version) == ("docker", "v1")
            assert version.runtime_version == _docker().version()["Version"]

            def conditions(resp: cri.StatusResponse) -> dict[str, cri.RuntimeCondition]:
                return {c.type: c for c in resp.status.conditions}

            before = conditions(await client.runtime.Status(cri.StatusRequest()))
            assert before["RuntimeReady"].status is True
            assert before["NetworkReady"].status is False
            assert before["NetworkReady"].reason == "NetworkPluginNotReady"
            # no sandbox before the network is known: refused, nothing made
            config = sandbox_config(fresh, "early")
            details = await expect_error(client.runtime.RunPodSandbox(cri.RunPodSandboxRequest(config=config)),
                                         grpc.StatusCode.FAILED_PRECONDITION)
            assert "network plugin is not ready" in details
            assert not node_containers(_docker(), fresh.node)
            await expect_error(client.runtime.UpdateRuntimeConfig(cri.UpdateRuntimeConfigRequest(
                runtime_config=cri.RuntimeConfig(network_config=cri.NetworkConfig(pod_cidr="10.244.300.0/24")))),
                grpc.StatusCode.INVALID_ARGUMENT)
            await client.runtime.UpdateRuntimeConfig(cri.UpdateRuntimeConfigRequest(
                runtime_config=cri.RuntimeConfig(network_config=cri.NetworkConfig(pod_cidr="10.244.199.0/24"))))
            after = conditions(await client.runtime.Status(cri.StatusRequest()))
            assert after["NetworkReady"].status is True
        finally:
            await client.channel.close()


async def test_sandbox_gets_an_ip_of_the_pod_cidr_reachable_from_the_host(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "web")
    sandbox_id = await run_sandbox(rt, config)
    try:
        status = (await rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))).status
        assert status.state == cri.SANDBOX_READY
        assert status.metadata == config.metadata
        assert status.labels["test"] == "dockershim" and status.annotations["note"] == "made by test_dockershim"
        ip = status.network.ip
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(shim.pod_cidr)
        assert ip in shim.leases()
        await start_container(rt, sandbox_id, config, container_config("httpd", image=HTTPD))

        def serves() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                return "minik8s httpd" in httpx.get(f"http://{ip}:80/", timeout=2).text
            return False

        wait_for(serves, 20, 0.1, what=f"httpd in the pod at {ip} answering the host")
        listed = await rt.runtime.ListPodSandbox(cri.ListPodSandboxRequest(filter=cri.PodSandboxFilter(
            label_selector={"io.kubernetes.pod.uid": config.metadata.uid})))
        assert [s.id for s in listed.items] == [sandbox_id]
    finally:
        await remove_sandbox(rt, sandbox_id)


async def test_stop_and_remove_sandbox_release_the_ip_and_leave_no_container(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "brief")
    sandbox_id = await run_sandbox(rt, config)
    ip = (await rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))).status.network.ip
    assert ip in shim.leases()
    await start_container(rt, sandbox_id, config, container_config("sleeper", command=["sleep", "3600"]))
    await rt.runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))
    status = (await rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))).status
    assert status.state == cri.SANDBOX_NOTREADY
    assert ip not in shim.leases()
    containers = (await rt.runtime.ListContainers(cri.ListContainersRequest(
        filter=cri.ContainerFilter(pod_sandbox_id=sandbox_id)))).containers
    assert [c.state for c in containers] == [cri.CONTAINER_EXITED]
    await rt.runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))  # again: fine
    await rt.runtime.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))
    assert not [c for c in node_containers(_docker(), shim.node) if c in (sandbox_id, containers[0].id)]
    await rt.runtime.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))  # idempotent
    await expect_error(rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id)),
                       grpc.StatusCode.NOT_FOUND)
    assert not Path(config.log_directory, "sleeper", "0.log").is_symlink()


async def test_host_network_sandbox_has_the_nodes_network_and_no_cni_attachment(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "hostnet")
    config.linux.security_context.namespace_options.network = cri.NODE
    leases_before = shim.leases()
    sandbox_id = await run_sandbox(rt, config)
    try:
        status = (await rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))).status
        assert status.state == cri.SANDBOX_READY and status.network.ip == ""  # the kubelet uses the node's IP
        assert status.linux.namespaces.options.network == cri.NODE
        assert shim.leases() == leases_before
        container_id = await start_container(rt, sandbox_id, config, container_config("main", command=["sleep", "60"]))
        done = await rt.runtime.ExecSync(cri.ExecSyncRequest(container_id=container_id, cmd=["hostname"], timeout=10))
        assert done.stdout.decode().strip() == os.uname().nodename
    finally:
        await remove_sandbox(rt, sandbox_id)


async def test_a_restarted_shim_knows_its_network_and_its_pods(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "survivor")
    sandbox_id = await run_sandbox(rt, config)
    try:
        ip = (await rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(
            pod_sandbox_id=sandbox_id))).status.network.ip
        shim.process.kill()  # kill -9: a crash
        shim.process.start()
        fresh = Client(shim.process.endpoint)
        try:
            status = await fresh.runtime.Status(cri.StatusRequest())
            assert all(c.status for c in status.status.conditions), status  # its podCIDR was kept
            again = (await fresh.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(
                pod_sandbox_id=sandbox_id))).status
            assert (again.state, again.network.ip) == (cri.SANDBOX_READY, ip)
            assert ip in shim.leases()
        finally:
            await fresh.channel.close()
    finally:
        await remove_sandbox(Client(shim.process.endpoint), sandbox_id)
    assert ip not in shim.leases()


async def test_a_sandbox_removed_behind_the_shims_back_does_not_leak_its_address(shim: Shim, rt: Client) -> None:
    client = _docker()
    first = await run_sandbox(rt, sandbox_config(shim, "gone"))
    first_ip = (await rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(pod_sandbox_id=first))).status.network.ip
    client.api.remove_container(first, force=True)
    # the kubelet stops what it last saw: NOT_FOUND, and the address is free again
    await expect_error(rt.runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=first)),
                       grpc.StatusCode.NOT_FOUND)
    assert first_ip not in shim.leases()
    await rt.runtime.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=first))

    # while the shim is down, nobody is told: the next shim finds the address of a vanished sandbox
    second = await run_sandbox(rt, sandbox_config(shim, "gone2"))
    second_ip = (await rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(
        pod_sandbox_id=second))).status.network.ip
    shim.process.kill()
    client.api.remove_container(second, force=True)
    assert second_ip in shim.leases()
    shim.process.start()
    wait_for(lambda: second_ip not in shim.leases(), 20, 0.05, what=f"{second_ip} released by the restarted shim")


# -- containers -----------------------------------------------------------------------------------------------


async def test_container_with_mounts_env_and_command_logs_to_the_cri_log_path(shim: Shim, rt: Client,
                                                                              tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "file").write_text("from the host\n")
    config = sandbox_config(shim, "writer")
    sandbox_id = await run_sandbox(rt, config)
    try:
        app = container_config(
            "writer", command=["sh", "-c"], args=['echo "$GREETING"; cat /data/file; echo oops >&2; pwd'],
            envs=[cri.KeyValue(key="GREETING", value=b"hello from env")], working_dir="/tmp",
            mounts=[cri.Mount(container_path="/data", host_path=str(data), readonly=True)])
        container_id = await start_container(rt, sandbox_id, config, app)
        status = await wait_exited(rt, container_id)
        assert (status.exit_code, status.reason) == (0, "Completed")
        assert status.metadata.name == "writer" and status.labels["io.kubernetes.container.name"] == "writer"
        assert status.finished_at >= status.started_at > 0
        assert [(m.container_path, m.host_path, m.readonly) for m in status.mounts] == [("/data", str(data), True)]
        log_path = Path(config.log_directory, "writer", "0.log")
        assert status.log_path == str(log_path)
        lines = [json.loads(line) for line in log_path.read_text().splitlines()]
        # each stream in order (Docker does not order stdout against stderr)
        assert [e["log"] for e in lines if e["stream"] == "stdout"] == ["hello from env\n", "from the host\n", "/tmp\n"]
        assert [e["log"] for e in lines if e["stream"] == "stderr"] == ["oops\n"]
        listed = (await rt.runtime.ListContainers(cri.ListContainersRequest(filter=cri.ContainerFilter(
            pod_sandbox_id=sandbox_id, state=cri.ContainerStateValue(state=cri.CONTAINER_EXITED))))).containers
        assert [(c.id, c.metadata.name, c.pod_sandbox_id) for c in listed] == [(container_id, "writer", sandbox_id)]
    finally:
        await remove_sandbox(rt, sandbox_id)
    assert not log_path.is_symlink()


async def readlink_in(rt: Client, container_id: str, path: str) -> str:
    done = await rt.runtime.ExecSync(cri.ExecSyncRequest(container_id=container_id, cmd=["readlink", path], timeout=10))
    assert done.exit_code == 0, done.stderr
    return done.stdout.decode().strip()


async def test_containers_share_the_sandboxs_network_and_ipc_and_its_pid_namespace_when_asked(
        shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "joined")
    other_config = sandbox_config(shim, "other")
    sandbox_id = await run_sandbox(rt, config)
    other_id = await run_sandbox(rt, other_config)
    try:
        def app(name: str, pid: int) -> cri.ContainerConfig:
            return container_config(name, command=["sleep", "3600"], linux=cri.LinuxContainerConfig(
                security_context=cri.LinuxContainerSecurityContext(namespace_options=cri.NamespaceOption(pid=pid))))

        own_pid = await start_container(rt, sandbox_id, config, app("a", cri.CONTAINER))
        shared_pid = await start_container(rt, sandbox_id, config, app("b", cri.POD))
        elsewhere = await start_container(rt, other_id, other_config, app("c", cri.CONTAINER))
        for ns in ("net", "ipc"):
            a, b, c = [await readlink_in(rt, cid, f"/proc/self/ns/{ns}") for cid in (own_pid, shared_pid, elsewhere)]
            assert a == b != c, ns
        assert await readlink_in(rt, own_pid, "/proc/self/ns/pid") != await readlink_in(rt, shared_pid,
                                                                                        "/proc/self/ns/pid")
        sandbox_pid = _docker().api.inspect_container(sandbox_id)["State"]["Pid"]
        assert await readlink_in(rt, shared_pid, "/proc/self/ns/pid") == os.readlink(f"/proc/{sandbox_pid}/ns/pid")
        done = await rt.runtime.ExecSync(cri.ExecSyncRequest(container_id=own_pid, cmd=["hostname"], timeout=10))
        assert done.stdout == b"joined\n"
        labels = _docker().api.inspect_container(own_pid)["Config"]["Labels"]
        assert (labels["io.minik8s.managed"], labels["io.minik8s.node"], labels["io.kubernetes.sandbox.id"]) == (
            "true", shim.node, sandbox_id)
    finally:
        await remove_sandbox(rt, sandbox_id)
        await remove_sandbox(rt, other_id)


async def test_stop_sends_sigterm_then_sigkill_after_the_timeout(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "stopping")
    sandbox_id = await run_sandbox(rt, config)
    try:
        polite = await start_container(rt, sandbox_id, config, container_config(
            "polite", command=["sh", "-c", "trap 'echo got TERM; exit 0' TERM; while true; do sleep 0.1; done"]))
        stubborn = await start_container(rt, sandbox_id, config,
                                         container_config("stubborn", command=["sleep", "3600"]))
        loop = asyncio.get_running_loop()
        started = loop.time()
        await rt.runtime.StopContainer(cri.StopContainerRequest(container_id=polite, timeout=10))
        assert loop.time() - started < 5
        status = await wait_exited(rt, polite)
        assert (status.exit_code, status.reason) == (0, "Completed")
        assert "got TERM" in Path(status.log_path).read_text()
        started = loop.time()
        await rt.runtime.StopContainer(cri.StopContainerRequest(container_id=stubborn, timeout=1))
        assert loop.time() - started >= 0.9
        assert (await wait_exited(rt, stubborn)).exit_code == 137
        await rt.runtime.StopContainer(cri.StopContainerRequest(container_id=stubborn, timeout=1))  # again: fine
    finally:
        await remove_sandbox(rt, sandbox_id)


async def test_a_name_left_over_by_a_crash_is_replaced_unless_it_runs(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "leftover")
    sandbox_id = await run_sandbox(rt, config)
    try:
        app = container_config("c", command=["sleep", "3600"])

        async def create() -> str:
            return (await rt.runtime.CreateContainer(cri.CreateContainerRequest(
                pod_sandbox_id=sandbox_id, config=app, sandbox_config=config))).container_id

        first = await create()
        second = await create()  # same name (same attempt): the unstarted leftover is replaced
        assert first != second and first not in node_containers(_docker(), shim.node)
        await rt.runtime.StartContainer(cri.StartContainerRequest(container_id=second))
        details = await expect_error(create(), grpc.StatusCode.ALREADY_EXISTS)  # a running one stays
        assert "in use" in details
        assert (await rt.runtime.ContainerStatus(cri.ContainerStatusRequest(
            container_id=second))).status.state == cri.CONTAINER_RUNNING
    finally:
        await remove_sandbox(rt, sandbox_id)


async def test_exit_code_and_reason_error(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "failer")
    sandbox_id = await run_sandbox(rt, config)
    try:
        container_id = await start_container(rt, sandbox_id, config,
                                             container_config("failer", command=["sh", "-c", "exit 3"]))
        status = await wait_exited(rt, container_id)
        assert (status.exit_code, status.reason) == (3, "Error")
    finally:
        await remove_sandbox(rt, sandbox_id)


async def test_memory_limit_oom_kills(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "hog")
    sandbox_id = await run_sandbox(rt, config)
    try:
        # the short sleep lets Docker's OOM watch attach first (see the kubelet's OOM test)
        hog = container_config("hog", command=["sh", "-c", "sleep 0.5; dd if=/dev/zero of=/dev/null bs=64M count=1"],
                               linux=cri.LinuxContainerConfig(resources=cri.LinuxContainerResources(
                                   memory_limit_in_bytes=20 * 1024 * 1024, cpu_period=100000, cpu_quota=50000)))
        container_id = await start_container(rt, sandbox_id, config, hog)
        status = await wait_exited(rt, container_id)
        assert (status.exit_code, status.reason) == (137, "OOMKilled")
        host_config = _docker().api.inspect_container(container_id)["HostConfig"]
        assert host_config["Memory"] == host_config["MemorySwap"] == 20 * 1024 * 1024
        assert (host_config["CpuQuota"], host_config["CpuPeriod"]) == (50000, 100000)
    finally:
        await remove_sandbox(rt, sandbox_id)


async def test_a_command_that_cannot_run_is_an_error_not_a_half_started_container(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "nocmd")
    sandbox_id = await run_sandbox(rt, config)
    try:
        created = await rt.runtime.CreateContainer(cri.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=container_config("nocmd", command=["/no/such/binary"]),
            sandbox_config=config))
        details = await expect_error(rt.runtime.StartContainer(cri.StartContainerRequest(
            container_id=created.container_id)), grpc.StatusCode.UNKNOWN)
        assert "/no/such/binary" in details
        status = (await rt.runtime.ContainerStatus(cri.ContainerStatusRequest(
            container_id=created.container_id))).status
        assert status.state == cri.CONTAINER_EXITED and status.reason == "ContainerCannotRun"
        assert status.exit_code != 0 and "/no/such/binary" in status.message
    finally:
        await remove_sandbox(rt, sandbox_id)


# -- exec -----------------------------------------------------------------------------------------------------


async def test_exec_sync_output_exit_code_and_timeout(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "execsync")
    sandbox_id = await run_sandbox(rt, config)
    try:
        container_id = await start_container(rt, sandbox_id, config,
                                             container_config("main", command=["sleep", "3600"]))
        done = await rt.runtime.ExecSync(cri.ExecSyncRequest(
            container_id=container_id, cmd=["sh", "-c", "echo out; echo err >&2; exit 4"], timeout=10))
        assert (done.stdout, done.stderr, done.exit_code) == (b"out\n", b"err\n", 4)
        await expect_error(rt.runtime.ExecSync(cri.ExecSyncRequest(container_id=container_id, cmd=["sleep", "5"],
                                                                   timeout=1)), grpc.StatusCode.DEADLINE_EXCEEDED)
        await expect_error(rt.runtime.ExecSync(cri.ExecSyncRequest(container_id=container_id, cmd=[])),
                           grpc.StatusCode.INVALID_ARGUMENT)
    finally:
        await remove_sandbox(rt, sandbox_id)


async def test_exec_url_streams_stdin_and_output_and_reports_the_exit_code(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "exec")
    sandbox_id = await run_sandbox(rt, config)
    try:
        container_id = await start_container(rt, sandbox_id, config,
                                             container_config("main", command=["sleep", "3600"]))
        url = (await rt.runtime.Exec(cri.ExecRequest(container_id=container_id,
                                                     cmd=["sh", "-c", "cat; echo bye >&2; exit 7"],
                                                     stdin=True, stdout=True, stderr=True))).url
        assert url.startswith("http://127.0.0.1:")
        ws_url = "ws://" + url.removeprefix("http://")
        out, err = b"", b""
        status: dict[str, object] = {}
        async with websockets.connect(ws_url, subprotocols=["v5.channel.k8s.io"]) as ws:  # type: ignore[list-item]
            assert ws.subprotocol == "v5.channel.k8s.io"
            await ws.send(bytes([0]) + b"hello stdin\n")
            await ws.send(bytes([255, 0]))  # v5: stdin is done
            async with asyncio.timeout(20):
                async for message in ws:
                    assert isinstance(message, bytes)
                    if message[0] == 1:
                        out += message[1:]
                    elif message[0] == 2:
                        err += message[1:]
                    elif message[0] == 3:
                        status = json.loads(message[1:])
        assert (out, err) == (b"hello stdin\n", b"bye\n")
        assert status["reason"] == "NonZeroExitCode"
        assert status["details"] == {"causes": [{"reason": "ExitCode", "message": "7"}]}
        # the URL is for one session only
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(ws_url, subprotocols=["v5.channel.k8s.io"]):  # type: ignore[list-item]
                pass
        assert refused.value.response.status_code == 404
        await expect_error(rt.runtime.Exec(cri.ExecRequest(container_id=container_id, cmd=["true"])),
                           grpc.StatusCode.INVALID_ARGUMENT)
    finally:
        await remove_sandbox(rt, sandbox_id)


async def test_exec_with_a_tty_merges_output_and_takes_a_resize(shim: Shim, rt: Client) -> None:
    config = sandbox_config(shim, "tty")
    sandbox_id = await run_sandbox(rt, config)
    try:
        container_id = await start_container(rt, sandbox_id, config,
                                             container_config("main", command=["sleep", "3600"]))
        url = (await rt.runtime.Exec(cri.ExecRequest(container_id=container_id, tty=True, stdin=True, stdout=True,
                                                     cmd=["sh", "-c", "read go; stty size; echo to-stderr >&2"]))).url
        output = b""
        status: dict[str, object] = {}
        async with websockets.connect("ws://" + url.removeprefix("http://"),  # type: ignore[list-item]
                                      subprotocols=["v4.channel.k8s.io"]) as ws:
            # the resize is applied before the line that lets the command go on is written
            await ws.send(bytes([4]) + json.dumps({"Width": 91, "Height": 17}).encode())
            await ws.send(bytes([0]) + b"go\n")
            async with asyncio.timeout(20):
                async for message in ws:
                    assert isinstance(message, bytes) and message[0] != 2  # a tty has no stderr of its own
                    if message[0] == 1:
                        output += message[1:]
                    elif message[0] == 3:
                        status = json.loads(message[1:])
        assert status == {"metadata": {}, "status": "Success"}
        assert b"17 91" in output and b"to-stderr" in output
        await expect_error(rt.runtime.Exec(cri.ExecRequest(container_id=container_id, cmd=["true"], tty=True,
                                                           stdout=True, stderr=True)),
                           grpc.StatusCode.INVALID_ARGUMENT)
    finally:
        await remove_sandbox(rt, sandbox_id)


# -- events ---------------------------------------------------------------------------------------------------


async def test_container_events_follow_the_life_of_a_container(shim: Shim, rt: Client) -> None:
    async with container_events(rt) as seen:
        config = sandbox_config(shim, "events")
        sandbox_id = await run_sandbox(rt, config)
        try:
            container_id = await start_container(rt, sandbox_id, config, container_config("quick", command=["true"]))
            await wait_for_event(seen, container_id, cri.CONTAINER_STOPPED_EVENT)
            kinds = [e.container_event_type for e in seen if e.container_id == container_id]
            assert kinds[:3] == [cri.CONTAINER_CREATED_EVENT, cri.CONTAINER_STARTED_EVENT,
                                 cri.CONTAINER_STOPPED_EVENT]
            stopped = next(e for e in seen if e.container_id == container_id
                           and e.container_event_type == cri.CONTAINER_STOPPED_EVENT)
            assert stopped.pod_sandbox_status.id == sandbox_id
            assert stopped.pod_sandbox_status.metadata.uid == config.metadata.uid
            assert stopped.created_at > 0
            assert any(s.id == container_id for s in stopped.containers_statuses)
        finally:
            await remove_sandbox(rt, sandbox_id)


async def test_a_sandbox_is_announced_once_its_network_is_up_and_a_container_start_once(
        shim: Shim, rt: Client) -> None:
    """A sandbox's CREATED and STARTED events come from RunPodSandbox once its network is set up (as containerd
    sends them), each once, with the pod's address; a container's STARTED event and the kubelet's first
    ContainerStatus after StartContainer say the same (one inspect answers both), and a stop is seen at once."""
    async with container_events(rt) as seen:
        config = sandbox_config(shim, "announced")
        sandbox_id = await run_sandbox(rt, config)
        try:
            container_id = await start_container(rt, sandbox_id, config,
                                                 container_config("web", command=["sleep", "60"]))
            status = (await rt.runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=container_id))).status
            assert status.state == cri.CONTAINER_RUNNING and status.started_at > 0
            # Docker's events come in its order: once the container's start is in, the sandbox's would be too
            await wait_for_event(seen, container_id, cri.CONTAINER_STARTED_EVENT)
            of_sandbox = [e for e in seen if e.container_id == sandbox_id]
            assert [e.container_event_type for e in of_sandbox] == [cri.CONTAINER_CREATED_EVENT,
                                                                      cri.CONTAINER_STARTED_EVENT]
            ip = (await rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))
                  ).status.network.ip
            assert ip and all(e.pod_sandbox_status.network.ip == ip for e in of_sandbox)
            assert all(e.pod_sandbox_status.state == cri.SANDBOX_READY for e in of_sandbox)
            started = next(e for e in seen if e.container_id == container_id
                           and e.container_event_type == cri.CONTAINER_STARTED_EVENT)
            assert [s.state for s in started.containers_statuses] == [cri.CONTAINER_RUNNING]
            assert started.containers_statuses[0].started_at == status.started_at

            await rt.runtime.StopContainer(cri.StopContainerRequest(container_id=container_id, timeout=0))
            stopped = (await rt.runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=container_id))).status
            assert stopped.state == cri.CONTAINER_EXITED
        finally:
            await remove_sandbox(rt, sandbox_id)


async def test_a_sandbox_or_container_removed_between_the_kubelets_calls_is_not_found(shim: Shim, rt: Client) -> None:
    """CreateContainer takes the sandbox as RunPodSandbox (or its last event) left it, StartContainer what
    CreateContainer made (no inspect of either): one removed behind the shim's back is still NOT_FOUND, and
    nothing is left."""
    client = _docker()
    config = sandbox_config(shim, "vanishing")
    sandbox_id = await run_sandbox(rt, config)
    try:
        created = await rt.runtime.CreateContainer(cri.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=container_config("first", command=["sleep", "60"]),
            sandbox_config=config))
        client.api.remove_container(created.container_id, force=True)
        message = await expect_error(rt.runtime.StartContainer(cri.StartContainerRequest(
            container_id=created.container_id)), grpc.StatusCode.NOT_FOUND)
        assert created.container_id in message

        client.api.remove_container(sandbox_id, force=True)
        message = await expect_error(rt.runtime.CreateContainer(cri.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=container_config("second", command=["sleep", "60"]),
            sandbox_config=config)), grpc.StatusCode.NOT_FOUND)
        assert sandbox_id in message
        assert not node_containers(client, shim.node)
    finally:
        await remove_sandbox(rt, sandbox_id)
        client.close()


async def test_a_new_sandboxs_status_comes_from_its_run_until_it_stops_or_dies(shim: Shim, rt: Client) -> None:
    """The first PodSandboxStatus after RunPodSandbox is answered from the inspect RunPodSandbox took; once
    the sandbox is stopped, or died behind the shim's back (its die event in), Docker is asked again."""
    client = _docker()

    async def state(sandbox_id: str) -> int:
        return (await rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))).status.state

    async with container_events(rt) as seen:
        stopped = await run_sandbox(rt, sandbox_config(shim, "stopped"))
        died = await run_sandbox(rt, sandbox_config(shim, "died"))
        try:
            await rt.runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=stopped))
            assert await state(stopped) == cri.SANDBOX_NOTREADY

            client.api.kill(died)
            await wait_for_event(seen, died, cri.CONTAINER_STOPPED_EVENT)
            assert await state(died) == cri.SANDBOX_NOTREADY
        finally:
            await remove_sandbox(rt, stopped)
            await remove_sandbox(rt, died)
            client.close()


# -- images ---------------------------------------------------------------------------------------------------


async def test_images_present_locally_and_an_absent_one_is_a_clear_error(shim: Shim, rt: Client) -> None:
    pulled = await rt.images.PullImage(cri.PullImageRequest(image=cri.ImageSpec(image=PAUSE)))
    assert pulled.image_ref.startswith("sha256:")
    status = await rt.images.ImageStatus(cri.ImageStatusRequest(image=cri.ImageSpec(image=PAUSE)))
    assert status.image.id == pulled.image_ref and PAUSE in status.image.repo_tags
    listed = await rt.images.ListImages(cri.ListImagesRequest())
    assert pulled.image_ref in [i.id for i in listed.images]

    absent = f"minik8s/absent-{uuid.uuid4().hex[:6]}:1"
    before = {i.id for i in _docker().images.list(all=True)}
    details = await expect_error(rt.images.PullImage(cri.PullImageRequest(image=cri.ImageSpec(image=absent))),
                                 grpc.StatusCode.NOT_FOUND)
    assert absent in details and "no registry" in details
    assert not (await rt.images.ImageStatus(cri.ImageStatusRequest(image=cri.ImageSpec(image=absent)))).HasField(
        "image")
    assert {i.id for i in _docker().images.list(all=True)} <= before
    await rt.images.RemoveImage(cri.RemoveImageRequest(image=cri.ImageSpec(image=absent)))  # idempotent
    await expect_error(rt.images.PullImage(cri.PullImageRequest(image=cri.ImageSpec(image=""))),
                       grpc.StatusCode.INVALID_ARGUMENT)


async def test_an_image_tagged_or_removed_behind_the_shims_back_is_seen_as_it_is(shim: Shim, rt: Client) -> None:
    """ImageStatus is answered from what the shim looked up while it follows Docker's image events: a tag
    added, moved or removed with docker itself shows in the next lookups, as RemoveImage does at once."""
    client = _docker()
    name = f"minik8s/imgcache-{uuid.uuid4().hex[:6]}:1"

    async def status(image: str = name) -> str:
        found = await rt.images.ImageStatus(cri.ImageStatusRequest(image=cri.ImageSpec(image=image)))
        return found.image.id if found.HasField("image") else ""

    pause, busybox = client.images.get(PAUSE), client.images.get(BUSYBOX)
    try:
        assert await status() == ""
        pause.tag(name)
        await async_wait_for(lambda: status(), lambda found: found == pause.id, "the new tag seen")
        assert await status() == pause.id  # the same answer again (from the shim's cache)
        busybox.tag(name)  # the tag moves to another image, behind the shim's back
        await async_wait_for(lambda: status(), lambda found: found == busybox.id, "the moved tag seen")
        client.images.remove(name)  # and goes
        await async_wait_for(lambda: status(), lambda found: found == "", "the removed tag seen")
        pause.tag(name)
        await async_wait_for(lambda: status(), lambda found: found == pause.id, "the tag back")
        await rt.images.RemoveImage(cri.RemoveImageRequest(image=cri.ImageSpec(image=name)))
        assert await status() == ""  # the shim's own removal: at once
        assert await status(PAUSE) == pause.id  # the image itself stays (the tag was one of two)
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(name)
        client.close()


async def async_wait_for(get: Any, done: Any, what: str, timeout: float = 30) -> None:
    """Ask `get()` again until `done(answer)` (the shim learns Docker's image events asynchronously)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        answer = await get()
        if done(answer):
            return
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}: last {answer!r}"
        await asyncio.sleep(0.05)


# -- bad input ------------------------------------------------------------------------------------------------


async def test_bad_input_is_refused_and_leaves_nothing(shim: Shim, rt: Client) -> None:
    before = set(node_containers(_docker(), shim.node))
    unknown = "0" * 64
    await expect_error(rt.runtime.RunPodSandbox(cri.RunPodSandboxRequest(config=cri.PodSandboxConfig())),
                       grpc.StatusCode.INVALID_ARGUMENT)
    await expect_error(rt.runtime.CreateContainer(cri.CreateContainerRequest(
        pod_sandbox_id=unknown, config=container_config("x"))), grpc.StatusCode.NOT_FOUND)
    for call in (rt.runtime.PodSandboxStatus(cri.PodSandboxStatusRequest(pod_sandbox_id=unknown)),
                 rt.runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=unknown)),
                 rt.runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=unknown)),
                 rt.runtime.StartContainer(cri.StartContainerRequest(container_id=unknown)),
                 rt.runtime.StopContainer(cri.StopContainerRequest(container_id=unknown)),
                 rt.runtime.ExecSync(cri.ExecSyncRequest(container_id=unknown, cmd=["true"]))):
        await expect_error(call, grpc.StatusCode.NOT_FOUND)
    await rt.runtime.RemoveContainer(cri.RemoveContainerRequest(container_id=unknown))  # idempotent

    config = sandbox_config(shim, "badinput")
    sandbox_id = await run_sandbox(rt, config)
    try:
        # a sandbox id is no container id, and the other way round
        await expect_error(rt.runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=sandbox_id)),
                           grpc.StatusCode.NOT_FOUND)
        for bad, code in ((container_config("", command=["true"]), grpc.StatusCode.INVALID_ARGUMENT),
                          (container_config("noimage", image=""), grpc.StatusCode.INVALID_ARGUMENT),
                          (container_config("badmount", mounts=[cri.Mount(container_path="/x")]),
                           grpc.StatusCode.INVALID_ARGUMENT),
                          (container_config("absent", image=f"minik8s/absent-{uuid.uuid4().hex[:6]}:1"),
                           grpc.StatusCode.NOT_FOUND)):
            await expect_error(rt.runtime.CreateContainer(cri.CreateContainerRequest(
                pod_sandbox_id=sandbox_id, config=bad, sandbox_config=config)), code)
        listed = await rt.runtime.ListContainers(cri.ListContainersRequest(
            filter=cri.ContainerFilter(pod_sandbox_id=sandbox_id)))
        assert not listed.containers
    finally:
        await remove_sandbox(rt, sandbox_id)
    assert set(node_containers(_docker(), shim.node)) == before


async def test_a_network_that_fails_to_attach_leaves_no_sandbox_address_or_attachment(shim: Shim, rt: Client) -> None:
    """lo and eth0 are attached at once: when one fails, what the other made is released too."""
    results = shim.root_dir / "cni" / "results"
    before = (set(node_containers(_docker(), shim.node)), shim.leases(),
              set(os.listdir(results)) if results.is_dir() else set())
    # portmap, the last plugin of eth0's list, refuses a mapping to container port 0: bridge and host-local
    # (an address leased) and loopback have done their part by then
    config = sandbox_config(shim, "badport", port_mappings=[cri.PortMapping(host_port=1, container_port=0)])
    message = await expect_error(rt.runtime.RunPodSandbox(cri.RunPodSandboxRequest(config=config)),
                                 grpc.StatusCode.UNKNOWN)
    assert "failed to set up the network of sandbox badport" in message and "portmap" in message, message
    after = (set(node_containers(_docker(), shim.node)), shim.leases(),
             set(os.listdir(results)) if results.is_dir() else set())
    assert after == before


# a unix-socket forwarder to Docker's socket: killing it takes Docker away from one shim only
DOCKER_PROXY = """
import asyncio, sys

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()

async def handle(reader, writer):
    up_reader, up_writer = await asyncio.open_unix_connection("/var/run/docker.sock")
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

async def main():
    server = await asyncio.start_unix_server(handle, sys.argv[1])
    await server.serve_forever()

asyncio.run(main())
"""


async def test_docker_going_away_makes_the_runtime_not_ready_and_calls_unavailable(tmp_path: Path) -> None:
    client = _docker()
    ensure_images()
    node = f"shim-{uuid.uuid4().hex[:6]}"
    proxy_socket = tmp_path / "docker.sock"
    proxy = subprocess.Popen([sys.executable, "-c", DOCKER_PROXY, str(proxy_socket)])
    shim = DockershimProcess(tmp_path, node, tmp_path / "root", extra_args=["--docker-endpoint",
                                                                           f"unix://{proxy_socket}"])
    try:
        wait_for(proxy_socket.exists, 10, 0.05, what="the Docker proxy")
        shim.start()
        c = Client(shim.endpoint)
        try:
            def runtime_ready(resp: cri.StatusResponse) -> cri.RuntimeCondition:
                return next(cond for cond in resp.status.conditions if cond.type == "RuntimeReady")

            assert runtime_ready(await c.runtime.Status(cri.StatusRequest())).status is True
            proxy.kill()
            proxy.wait(10)
            down = runtime_ready(await c.runtime.Status(cri.StatusRequest()))
            assert (down.status, down.reason) == (False, "DockerDaemonNotReady")
            details = await expect_error(c.runtime.ListPodSandbox(cri.ListPodSandboxRequest()),
                                         grpc.StatusCode.UNAVAILABLE)
            assert "Cannot connect to Docker" in details
        finally:
            await c.channel.close()
    finally:
        proxy.kill()
        shim.kill()
        shim.remove_socket_dir()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, cleanup_node(node, tmp_path / "root")).result()
    assert not node_containers(client, node)


def test_bad_flags_and_an_absent_docker_stop_the_shim_at_start(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dockershim", "--node-name", "badflags", *args],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})

    done = run("--container-runtime-endpoint", "tcp://127.0.0.1:1234")
    assert done.returncode == 2 and "only unix:// endpoints are served" in done.stderr
    done = run("--container-runtime-endpoint", "unix://relative.sock")
    assert done.returncode == 2 and "must be absolute" in done.stderr
    done = run("--container-runtime-endpoint", f"unix://{tmp_path / 'shim.sock'}", "--root-dir",
               str(tmp_path / "root"), "--docker-endpoint", f"unix://{tmp_path / 'no-docker.sock'}")
    assert done.returncode != 0 and "cannot reach Docker" in done.stderr
    assert not (tmp_path / "shim.sock").exists()


# -- cleanup --------------------------------------------------------------------------------------------------


def test_cleanup_removes_what_a_killed_shim_left(tmp_path: Path) -> None:
    client = _docker()
    with running_shim(tmp_path) as fresh:
        cidr = free_pod_cidrs(1)[0]
        fresh.pod_cidr = cidr

        async def make_pod() -> str:
            c = Client(fresh.process.endpoint)
            try:
                await c.runtime.UpdateRuntimeConfig(cri.UpdateRuntimeConfigRequest(
                    runtime_config=cri.RuntimeConfig(network_config=cri.NetworkConfig(pod_cidr=cidr))))
                config = sandbox_config(fresh, "left")
                sandbox_id = await run_sandbox(c, config)
                await start_container(c, sandbox_id, config, container_config("left", command=["sleep", "3600"]))
                return sandbox_id
            finally:
                await c.channel.close()

        asyncio.run(make_pod())
        fresh.process.kill()
        assert len(node_containers(client, fresh.node)) == 2 and fresh.leases()
        assert Path("/sys/class/net", bridge_name(fresh.node)).exists()
        done = subprocess.run([sys.executable, "-m", "dockershim.cleanup", "--node", fresh.node,
                               "--root-dir", str(fresh.root_dir)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        assert done.returncode == 0, done.stderr
        assert f"node {fresh.node}: removed 2 container(s)" in done.stdout
        assert not node_containers(client, fresh.node)
        assert not Path("/sys/class/net", bridge_name(fresh.node)).exists()
        assert not (fresh.root_dir / "cni").exists()
    bad = subprocess.run([sys.executable, "-m", "dockershim.cleanup"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "name a --node or give --all" in bad.stderr
