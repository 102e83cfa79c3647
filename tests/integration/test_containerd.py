"""containerd's own CRI plugin as a node's runtime (containerd_node), driven with a raw grpc.aio CRI client
(machinery/cri) as the kubelet drives it: UpdateRuntimeConfig → NetworkReady, sandboxes on the node's
bridge with an address of its podCIDR, containers with CRI-format logs, ExecSync, the streaming server's Exec
URL (which protocols containerd 1.6 speaks), OOMKilled, stop/remove releasing the address, images (imported
from Docker; a pull of an absent one fails clearly), and the clean-up after a kill -9.

One containerd is shared by the module; tests that need a fresh one (readiness, clean-up) start their own.
Everything is labelled and removed at the end, even when a test fails."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import grpc
import pytest

from cni import host
from containerd_node.cleanup import cleanup_node, containerd_pids, shim_pids
from containerd_node.config import CNI_RESULTS_DIR, NodeLayout, read_marker
from containerd_node.launcher import ContainerdError, ContainerdNode, prepare
from machinery.cri import api_pb2 as pb
from machinery.cri import api_pb2_grpc as rpc
from tests.cluster import REPO, make_workdir

PAUSE = "minik8s/pause:3.9"
BUSYBOX = "minik8s/busybox:1.35"
IMAGES = (PAUSE, BUSYBOX)
LABELS = {"io.minik8s.managed": "true"}


def _skip_without_runtime() -> None:
    if os.geteuid() != 0:
        pytest.skip("containerd nodes need root")
    if shutil.which("containerd") is None or shutil.which("runc") is None:
        pytest.skip("no containerd/runc on this host (apt-get install containerd)")
    if not Path("/usr/lib/cni/bridge").exists():
        pytest.skip("no CNI plugins in /usr/lib/cni (apt-get install containernetworking-plugins)")
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip("no Docker engine to take the project's images from")
    from tests.node_process import ensure_images

    ensure_images()


@dataclass
class Cri:
    """A raw CRI client on one containerd node."""

    node: ContainerdNode
    pod_cidr: str
    channel: grpc.aio.Channel
    runtime: rpc.RuntimeServiceStub
    images: rpc.ImageServiceStub

    @property
    def layout(self) -> NodeLayout:
        return self.node.layout

    def sandbox_config(self, name: str, **extra: object) -> pb.PodSandboxConfig:
        uid = uuid.uuid4().hex
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, namespace="default", uid=uid),
            hostname=name, log_directory=str(self.layout.base_dir.parent / "logs" / uid),
            labels={**LABELS, "io.minik8s.node": self.node.node_name}, **extra)  # type: ignore[arg-type]

    async def run_sandbox(self, name: str, **extra: object) -> tuple[str, pb.PodSandboxConfig]:
        config = self.sandbox_config(name, **extra)
        reply = await self.runtime.RunPodSandbox(pb.RunPodSandboxRequest(config=config), timeout=60)
        return reply.pod_sandbox_id, config

    async def run_container(self, sandbox_id: str, sandbox: pb.PodSandboxConfig, name: str, command: list[str],
                            **extra: object) -> str:
        config = pb.ContainerConfig(metadata=pb.ContainerMetadata(name=name), image=pb.ImageSpec(image=BUSYBOX),
                                    command=command, log_path=f"{name}/0.log", labels=LABELS,
                                    **extra)  # type: ignore[arg-type]
        created = await self.runtime.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox), timeout=60)
        await self.runtime.StartContainer(pb.StartContainerRequest(container_id=created.container_id), timeout=60)
        return created.container_id

    async def container_status(self, container_id: str) -> pb.ContainerStatus:
        reply = await self.runtime.ContainerStatus(pb.ContainerStatusRequest(container_id=container_id), timeout=10)
        return reply.status

    async def wait_exited(self, container_id: str, timeout: float = 30.0) -> pb.ContainerStatus:
        async def exited() -> pb.ContainerStatus:
            while True:
                status = await self.container_status(container_id)
                if status.state == pb.CONTAINER_EXITED:
                    return status
                await asyncio.sleep(0.05)

        return await asyncio.wait_for(exited(), timeout)

    async def remove_sandbox(self, sandbox_id: str) -> None:
        await self.runtime.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
        await self.runtime.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)


async def network_ready(runtime: rpc.RuntimeServiceStub) -> pb.RuntimeCondition:
    status = await runtime.Status(pb.StatusRequest(), timeout=10)
    return next(c for c in status.status.conditions if c.type == "NetworkReady")


async def update_pod_cidr(runtime: rpc.RuntimeServiceStub, pod_cidr: str, timeout: float = 20.0) -> None:
    """Hand the podCIDR over as the kubelet does, then wait (on Status, with a deadline) for NetworkReady."""
    await runtime.UpdateRuntimeConfig(pb.UpdateRuntimeConfigRequest(runtime_config=pb.RuntimeConfig(
        network_config=pb.NetworkConfig(pod_cidr=pod_cidr))), timeout=10)

    async def ready() -> None:
        while not (await network_ready(runtime)).status:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(ready(), timeout)


@contextlib.contextmanager
def containerd_node(prefix: str) -> Iterator[tuple[ContainerdNode, str]]:
    """A started containerd node with the project's images and a free pod CIDR; removed with all it made."""
    _skip_without_runtime()
    from tests.node_process import free_pod_cidrs, release_cidr

    workdir = make_workdir(prefix)
    node = ContainerdNode(f"cd-{uuid.uuid4().hex[:6]}", workdir / "node")
    cidr = free_pod_cidrs(1)[0]
    try:
        node.start(images=IMAGES)
        yield node, cidr
    finally:
        report = cleanup_node(node.layout.base_dir)
        release_cidr(cidr)
        shutil.rmtree(workdir, ignore_errors=True)
        assert not report.errors, report.summary()
        assert not host.link_exists(node.layout.bridge)


@contextlib.asynccontextmanager
async def cri_client(node: ContainerdNode, cidr: str) -> AsyncIterator[Cri]:
    channel = grpc.aio.insecure_channel(node.endpoint)
    try:
        yield Cri(node, cidr, channel, rpc.RuntimeServiceStub(channel), rpc.ImageServiceStub(channel))
    finally:
        await channel.close()


@pytest.fixture(scope="module")
def shared_node() -> Iterator[tuple[ContainerdNode, str]]:
    with containerd_node("minik8s-containerd-") as (node, cidr):
        yield node, cidr


@pytest.fixture
async def cri(shared_node: tuple[ContainerdNode, str]) -> AsyncIterator[Cri]:
    node, cidr = shared_node
    async with cri_client(node, cidr) as client:
        if not (await network_ready(client.runtime)).status:
            await update_pod_cidr(client.runtime, cidr)
        yield client


# -- readiness and the network ---------------------------------------------------------------------------


async def test_update_runtime_config_makes_the_network_ready_with_the_node_s_bridge() -> None:
    with containerd_node("minik8s-containerd-ready-") as (node, cidr):
        async with cri_client(node, cidr) as client:
            version = await client.runtime.Version(pb.VersionRequest(), timeout=10)
            assert (version.runtime_name, version.runtime_api_version) == ("containerd", "v1")
            before = await network_ready(client.runtime)
            assert not before.status and "cni plugin not initialized" in before.message
            status = await client.runtime.Status(pb.StatusRequest(), timeout=10)
            assert next(c for c in status.status.conditions if c.type == "RuntimeReady").status

            await update_pod_cidr(client.runtime, cidr)
            rendered = json.loads((node.layout.cni_conf_dir / "10-containerd-net.conflist").read_text())
            assert rendered["name"] == f"minik8s-{node.node_name}"
            assert rendered["plugins"][0]["bridge"] == node.layout.bridge
            assert rendered["plugins"][0]["ipam"]["ranges"] == [[{"subnet": cidr}]]


async def test_a_sandbox_gets_an_address_of_the_pod_cidr_on_the_node_bridge(cri: Cri) -> None:
    sandbox_id, sandbox = await cri.run_sandbox("net")
    try:
        status = (await cri.runtime.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))).status
        assert status.state == pb.SANDBOX_READY
        ip = status.network.ip
        subnet = ipaddress.ip_network(cri.pod_cidr)
        assert ipaddress.ip_address(ip) in subnet
        gateway = str(subnet.network_address + 1)
        addrs = json.loads(subprocess.run(["ip", "-j", "-4", "addr", "show", "dev", cri.layout.bridge],
                                          capture_output=True, text=True, check=True).stdout)
        assert f"{gateway}/{subnet.prefixlen}" in [f"{a['local']}/{a['prefixlen']}" for e in addrs
                                                    for a in e["addr_info"]]
        assert ip in host.leases(cri.layout.lease_dir)
        assert any(cri.layout.netns_dir.iterdir())  # the pod's network namespace is the node's own
        # the host reaches a server in the pod at its address, and the pod has its loopback up
        await cri.run_container(sandbox_id, sandbox, "web", [
            "sh", "-c", "echo from-the-pod > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"])

        async def get() -> str:
            async with aiohttp.ClientSession() as session:
                while True:
                    with contextlib.suppress(aiohttp.ClientError):
                        async with session.get(f"http://{ip}:8080/index.html") as answer:
                            return await answer.text()
                    await asyncio.sleep(0.1)

        assert await asyncio.wait_for(get(), 30) == "from-the-pod\n"
        web = (await cri.runtime.ListContainers(pb.ListContainersRequest(filter=pb.ContainerFilter(
            pod_sandbox_id=sandbox_id)))).containers[0].id
        lo = await cri.runtime.ExecSync(pb.ExecSyncRequest(container_id=web, cmd=["ip", "-o", "addr", "show", "lo"],
                                                           timeout=10), timeout=30)
        assert b"127.0.0.1/8" in lo.stdout
    finally:
        await cri.remove_sandbox(sandbox_id)


async def test_stop_releases_the_address_and_remove_forgets_the_sandbox(cri: Cri) -> None:
    sandbox_id, _ = await cri.run_sandbox("release")
    status = (await cri.runtime.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))).status
    ip = status.network.ip
    assert ip in host.leases(cri.layout.lease_dir)
    assert (CNI_RESULTS_DIR / f"{cri.layout.network}-{sandbox_id}-eth0").exists()

    await cri.runtime.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
    assert ip not in host.leases(cri.layout.lease_dir)
    assert not (CNI_RESULTS_DIR / f"{cri.layout.network}-{sandbox_id}-eth0").exists()
    stopped = (await cri.runtime.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))).status
    assert stopped.state == pb.SANDBOX_NOTREADY

    await cri.runtime.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
    listed = await cri.runtime.ListPodSandbox(pb.ListPodSandboxRequest())
    assert sandbox_id not in [s.id for s in listed.items]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await cri.runtime.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


# -- containers, logs, exec ------------------------------------------------------------------------------


async def test_a_container_runs_and_writes_its_cri_format_log(cri: Cri) -> None:
    sandbox_id, sandbox = await cri.run_sandbox("logs")
    try:
        cid = await cri.run_container(sandbox_id, sandbox, "app", ["sh", "-c", "echo hello; echo oops >&2; exit 0"])
        status = await cri.wait_exited(cid)
        assert (status.exit_code, status.reason) == (0, "Completed")
        assert status.log_path == str(Path(sandbox.log_directory) / "app" / "0.log")
        lines = Path(status.log_path).read_text().splitlines()
        parsed = sorted((line.split(" ", 3)[1:]) for line in lines)
        assert parsed == [["stderr", "F", "oops"], ["stdout", "F", "hello"]]
        assert all(line.split(" ", 1)[0].endswith("Z") for line in lines)  # RFC 3339 nano timestamps

        failing = await cri.run_container(sandbox_id, sandbox, "fails", ["sh", "-c", "exit 3"])
        status = await cri.wait_exited(failing)
        assert (status.exit_code, status.reason) == (3, "Error")
    finally:
        await cri.remove_sandbox(sandbox_id)


async def test_exec_sync_returns_output_and_exit_code(cri: Cri) -> None:
    sandbox_id, sandbox = await cri.run_sandbox("execsync")
    try:
        cid = await cri.run_container(sandbox_id, sandbox, "app", ["sleep", "3600"])
        reply = await cri.runtime.ExecSync(pb.ExecSyncRequest(
            container_id=cid, cmd=["sh", "-c", "echo out; echo err >&2; exit 7"], timeout=10), timeout=30)
        assert (reply.stdout, reply.stderr, reply.exit_code) == (b"out\n", b"err\n", 7)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await cri.runtime.ExecSync(pb.ExecSyncRequest(container_id="no-such-container", cmd=["true"]))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await cri.remove_sandbox(sandbox_id)


async def _exec_ws(url: str, protocols: list[str], stdin: bytes | None = None) -> tuple[str, dict[int, bytes]]:
    """Open the Exec URL as a websocket with `protocols`; the chosen one and the bytes per channel."""
    channels: dict[int, bytes] = {}
    async with aiohttp.ClientSession() as session, session.ws_connect(url, protocols=protocols) as ws:
        if stdin is not None:
            await ws.send_bytes(b"\x00" + stdin)
        async for message in ws:
            if message.type == aiohttp.WSMsgType.BINARY and message.data:
                channels[message.data[0]] = channels.get(message.data[0], b"") + message.data[1:]
        return ws.protocol or "", channels


async def test_exec_url_speaks_websocket_v4_and_spdy_not_v5(cri: Cri) -> None:
    """containerd 1.6's streaming server (k8s.io/kubelet/cri/streaming of Kubernetes 1.24): websocket with
    v4.channel.k8s.io / channel.k8s.io / base64.channel.k8s.io, and SPDY/3.1; v5.channel.k8s.io alone is refused."""
    sandbox_id, sandbox = await cri.run_sandbox("exec")
    try:
        cid = await cri.run_container(sandbox_id, sandbox, "app", ["sleep", "3600"])

        async def url(cmd: list[str], stdin: bool = False) -> str:
            reply = await cri.runtime.Exec(pb.ExecRequest(container_id=cid, cmd=cmd, stdin=stdin, stdout=True,
                                                          stderr=True), timeout=10)
            assert reply.url.startswith("http://127.0.0.1:"), reply.url
            return reply.url

        # what kubectl offers (v5 first): containerd picks v4; stdin reaches the process, exit code on channel 3
        chosen, channels = await _exec_ws(await url(["sh", "-c", "head -c 5; echo; exit 4"], stdin=True),
                                          ["v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"], b"hello")
        assert chosen == "v4.channel.k8s.io"
        assert channels[1] == b"hello\n"
        error = json.loads(channels[3])
        assert (error["status"], error["reason"]) == ("Failure", "NonZeroExitCode")
        assert error["details"]["causes"] == [{"reason": "ExitCode", "message": "4"}]

        chosen, channels = await _exec_ws(await url(["sh", "-c", "echo ok"]), ["v4.channel.k8s.io"])
        assert chosen == "v4.channel.k8s.io" and channels[1] == b"ok\n"
        assert json.loads(channels[3])["status"] == "Success"

        chosen, channels = await _exec_ws(await url(["sh", "-c", "echo old"]), ["channel.k8s.io"])
        assert chosen == "channel.k8s.io" and channels[1] == b"old\n"

        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await _exec_ws(await url(["true"]), ["v5.channel.k8s.io"])
        assert refused.value.status == 403

        spdy_url = await url(["true"])
        hostport, path = spdy_url.removeprefix("http://").split("/", 1)
        conn = http.client.HTTPConnection(hostport, timeout=10)
        try:
            conn.request("POST", "/" + path, headers={"Connection": "Upgrade", "Upgrade": "SPDY/3.1",
                                                       "X-Stream-Protocol-Version": "v4.channel.k8s.io"})
            answer = conn.getresponse()
            assert answer.status == 101
            assert answer.getheader("X-Stream-Protocol-Version") == "v4.channel.k8s.io"
        finally:
            conn.close()
    finally:
        await cri.remove_sandbox(sandbox_id)


async def test_a_container_over_its_memory_limit_is_oom_killed(cri: Cri) -> None:
    sandbox_id, sandbox = await cri.run_sandbox("oom")
    try:
        limit = 16 * 1024 * 1024
        cid = await cri.run_container(
            sandbox_id, sandbox, "hog", ["sh", "-c", "tail /dev/zero"],
            linux=pb.LinuxContainerConfig(resources=pb.LinuxContainerResources(memory_limit_in_bytes=limit,
                                                                               memory_swap_limit_in_bytes=limit)))
        status = await cri.wait_exited(cid, timeout=60)
        assert (status.reason, status.exit_code) == ("OOMKilled", 137)
    finally:
        await cri.remove_sandbox(sandbox_id)


# -- images ----------------------------------------------------------------------------------------------


async def test_imported_images_are_listed_and_pulling_an_absent_one_fails_clearly(cri: Cri) -> None:
    listed = await cri.images.ListImages(pb.ListImagesRequest(), timeout=10)
    tags = {tag for image in listed.images for tag in image.repo_tags}
    assert {f"docker.io/{PAUSE}", f"docker.io/{BUSYBOX}"} <= tags
    present = await cri.images.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=BUSYBOX)), timeout=10)
    assert present.image.id.startswith("sha256:")

    absent = "minik8s/absent:0"
    status = await cri.images.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=absent)), timeout=10)
    assert not status.HasField("image")  # absent: an empty answer, no error (as the CRI asks)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await cri.images.PullImage(pb.PullImageRequest(image=pb.ImageSpec(image=absent)), timeout=60)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    assert f'failed to pull and unpack image "docker.io/{absent}"' in (err.value.details() or "")

    sandbox_id, sandbox = await cri.run_sandbox("noimage")
    try:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await cri.runtime.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=sandbox_id, sandbox_config=sandbox, config=pb.ContainerConfig(
                    metadata=pb.ContainerMetadata(name="x"), image=pb.ImageSpec(image=absent), log_path="x.log")))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert absent in (err.value.details() or "")
    finally:
        await cri.remove_sandbox(sandbox_id)


async def test_container_events_are_not_offered_so_the_kubelet_relists(cri: Cri) -> None:
    """containerd 1.6 has no GetContainerEvents (1.7 adds it): the evented PLEG must fall back to relisting."""
    stream = cri.runtime.GetContainerEvents(pb.GetEventsRequest())
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stream.read()
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


# -- restart and clean-up --------------------------------------------------------------------------------


async def test_pods_survive_a_containerd_restart(cri: Cri) -> None:
    """Shims keep the pods while containerd is away; the restarted one finds them (what lets a node's runtime
    be upgraded or restarted under a running kubelet)."""
    sandbox_id, sandbox = await cri.run_sandbox("restart")
    try:
        cid = await cri.run_container(sandbox_id, sandbox, "app", ["sleep", "3600"])
        await asyncio.to_thread(cri.node.restart)
        status = await cri.container_status(cid)
        assert status.state == pb.CONTAINER_RUNNING
        sandbox_status = await cri.runtime.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))
        assert sandbox_status.status.state == pb.SANDBOX_READY
        assert (await network_ready(cri.runtime)).status  # the rendered CNI config stays: no new podCIDR needed
    finally:
        await cri.remove_sandbox(sandbox_id)


def _iptables_nat() -> str:
    return subprocess.run(["iptables", "-w", "10", "-t", "nat", "-S"], capture_output=True, text=True,
                          check=True).stdout


async def test_cleanup_after_kill_9_leaves_nothing_of_the_node() -> None:
    with containerd_node("minik8s-containerd-kill-") as (node, cidr):
        layout = node.layout
        async with cri_client(node, cidr) as client:
            await update_pod_cidr(client.runtime, cidr)
            sandbox_id, sandbox = await client.run_sandbox(
                "victim", port_mappings=[pb.PortMapping(protocol=pb.TCP, container_port=80, host_port=0)])
            hostport_id, _ = await client.run_sandbox(
                "hostport", port_mappings=[pb.PortMapping(protocol=pb.TCP, container_port=80, host_port=39481)])
            cid = await client.run_container(sandbox_id, sandbox, "app", ["sleep", "3600"])
            assert (await client.container_status(cid)).state == pb.CONTAINER_RUNNING
        assert hostport_id in _iptables_nat()  # portmap's chain names the sandbox in its comment
        shims = shim_pids(layout)
        assert len(shims) == 2  # one runc v2 shim per pod
        for pid in shims:
            os.kill(pid, 9)
        node.kill()  # kill -9: containerd and its shims gone, containers, mounts, netns, leases left behind
        assert Path(layout.lease_dir).is_dir() and len(host.leases(layout.lease_dir)) == 2

        report = cleanup_node(layout.base_dir)
        assert not report.errors, report.summary()
        assert len(report.cni_deleted) == 2 and set(report.containers) >= {sandbox_id, hostport_id, cid}
        assert not shim_pids(layout)
        assert not layout.base_dir.exists()
        mounts = Path("/proc/self/mountinfo").read_text()
        assert str(layout.base_dir) not in mounts
        assert not host.link_exists(layout.bridge)
        assert not list(CNI_RESULTS_DIR.glob(f"*{sandbox_id}*")) and not list(CNI_RESULTS_DIR.glob(f"*{cid}*"))
        assert hostport_id not in _iptables_nat()
        assert not any(Path(p).exists() for p in (f"/sys/fs/cgroup/memory/k8s.io/{cid}",
                                                   f"/sys/fs/cgroup/memory/k8s.io/{sandbox_id}"))
        assert not containerd_pids(layout)


def test_cleanup_and_prepare_refuse_a_directory_that_is_not_a_node_s(tmp_path: Path) -> None:
    _skip_without_runtime()
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "precious").write_text("keep me")
    with pytest.raises(ValueError, match="not a containerd node directory"):
        cleanup_node(stranger)
    with pytest.raises(ContainerdError, match="not a containerd node directory"):
        prepare(NodeLayout("cd-x", stranger))
    assert (stranger / "precious").read_text() == "keep me"
    assert cleanup_node(tmp_path / "never-made").node == ""  # nothing there: nothing to do


def test_a_second_node_may_not_take_over_a_node_s_directory(tmp_path: Path) -> None:
    _skip_without_runtime()
    layout = NodeLayout("cd-a", tmp_path / "n")
    prepare(layout)
    try:
        with pytest.raises(ContainerdError, match="belongs to node 'cd-a'"):
            prepare(NodeLayout("cd-b", tmp_path / "n"))
    finally:
        cleanup_node(layout.base_dir, host_rules=False)
    assert not layout.base_dir.exists()


def test_the_command_line_local_up_uses_runs_waits_imports_and_cleans_up(tmp_path: Path) -> None:
    """`python -m containerd_node run` (what hack/supervise.sh keeps running), `wait`, `import-images` and, after
    a kill -9, `cleanup` (what hack/down.sh runs)."""
    _skip_without_runtime()
    node_dir = tmp_path / "cli-node"
    cli = [sys.executable, "-m", "containerd_node"]
    logfile = open(tmp_path / "run.log", "wb")  # noqa: SIM115 — closed below
    run = subprocess.Popen([*cli, "run", "--node", f"cd-cli-{uuid.uuid4().hex[:4]}", "--dir", str(node_dir)],
                           stdout=logfile, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    try:
        waited = subprocess.run([*cli, "wait", "--dir", str(node_dir), "--timeout", "30"], capture_output=True,
                                text=True, cwd=REPO, timeout=60)
        assert waited.returncode == 0, waited.stderr + (tmp_path / "run.log").read_text()
        assert waited.stdout.startswith("containerd 1.") and "(CRI v1)" in waited.stdout
        assert read_marker(node_dir)["pid"] == run.pid  # type: ignore[index]  # exec: containerd has the pid

        imported = subprocess.run([*cli, "import-images", "--dir", str(node_dir), BUSYBOX], capture_output=True,
                                  text=True, cwd=REPO, timeout=120)
        assert imported.returncode == 0, imported.stderr
        absent = subprocess.run([*cli, "import-images", "--dir", str(node_dir), "minik8s/absent:0"],
                                capture_output=True, text=True, cwd=REPO, timeout=120)
        assert absent.returncode == 1
        assert "images not in the local Docker engine" in absent.stderr and "minik8s/absent:0" in absent.stderr
        stranger = subprocess.run([*cli, "wait", "--dir", str(tmp_path), "--timeout", "1"], capture_output=True,
                                  text=True, cwd=REPO, timeout=60)
        assert stranger.returncode == 1 and "is not a containerd node directory" in stranger.stderr
    finally:
        os.kill(run.pid, 9)
        run.wait(10)
        logfile.close()
        cleaned = subprocess.run([*cli, "cleanup", str(node_dir)], capture_output=True, text=True, cwd=REPO,
                                 timeout=120)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert "killed 0 process(es)" in cleaned.stdout  # containerd was gone already
    assert not node_dir.exists()
