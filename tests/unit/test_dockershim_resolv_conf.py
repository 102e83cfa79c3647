"""dockershim rewrites the sandbox's resolv.conf Docker made (upstream dockershim's rewriteResolvFile); a failed
rewrite is a CRI error (RunPodSandbox then removes the sandbox: nothing half-made)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import grpc
import pytest

from dockershim.service import CriError, DockerService
from machinery.cri import api_pb2 as cri


def config(**dns: list[str]) -> cri.PodSandboxConfig:
    return cri.PodSandboxConfig(metadata=cri.PodSandboxMetadata(name="web", namespace="prod", uid="u"),
                                dns_config=cri.DNSConfig(**dns))


def test_rewrites_the_file_docker_made(tmp_path: Path) -> None:
    path = tmp_path / "resolv.conf"
    path.write_text("nameserver 127.0.0.11\n")
    asyncio.run(DockerService._write_resolv_conf(
        {"ResolvConfPath": str(path)}, config(servers=["10.96.0.10"], searches=["prod.svc.cluster.local"],
                                               options=["ndots:5"])))
    assert path.read_text() == "nameserver 10.96.0.10\nsearch prod.svc.cluster.local\noptions ndots:5\n"


def test_no_dns_config_keeps_dockers_file(tmp_path: Path) -> None:
    path = tmp_path / "resolv.conf"
    path.write_text("nameserver 127.0.0.11\n")
    asyncio.run(DockerService._write_resolv_conf({"ResolvConfPath": str(path)}, config()))
    assert path.read_text() == "nameserver 127.0.0.11\n"


def test_a_failed_rewrite_is_a_cri_error(tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "resolv.conf"
    with pytest.raises(CriError) as e:
        asyncio.run(DockerService._write_resolv_conf({"ResolvConfPath": str(missing)},
                                                     config(servers=["10.96.0.10"])))
    assert e.value.code == grpc.StatusCode.UNKNOWN and "rewrite resolv.conf failed for pod 'web'" in str(e.value)


class _Container:
    def __init__(self, docker: _Docker, ident: str) -> None:
        self.docker, self.id = docker, ident

    async def start(self) -> None:
        self.docker.calls.append("start")

    async def show(self) -> dict[str, object]:
        return {"Id": SANDBOX, "ResolvConfPath": str(self.docker.resolv), "State": {"Pid": 4242}}

    async def delete(self, **kwargs: object) -> None:
        self.docker.calls.append("remove")


class _Containers:
    def __init__(self, docker: _Docker) -> None:
        self.docker = docker

    async def create(self, body: dict[str, object], name: str) -> _Container:
        self.docker.calls.append("create")
        return _Container(self.docker, SANDBOX)

    def container(self, ident: str) -> _Container:
        return _Container(self.docker, ident)


class _Docker:
    def __init__(self, resolv: Path) -> None:
        self.resolv = resolv
        self.calls: list[str] = []
        self.containers = _Containers(self)


class _Network:
    """The pod network's calls, recorded; its ADD waits until the test lets it finish."""

    ready = True

    def __init__(self, docker: _Docker, fail: bool = False) -> None:
        self.docker, self.fail = docker, fail
        self.release = asyncio.Event()
        self.adding = threading.Event()

    async def setup(self, sandbox_id: str, pid: int, meta: object, mappings: object) -> str:
        self.docker.calls.append("cni add")
        self.adding.set()
        await self.release.wait()
        if self.fail:
            from cni.invoke import CniError
            raise CniError("no address left", 11)
        return "10.244.0.9"

    async def teardown(self, sandbox_id: str, pid: int = 0) -> None:
        self.docker.calls.append("cni del")


SANDBOX = "d" * 64


def shim(docker: _Docker, network: _Network) -> DockerService:
    return DockerService(docker, node="n1", network=network,  # type: ignore[arg-type]
                         pause_image="pause", streaming=None)  # type: ignore[arg-type]


async def test_the_rewrite_is_done_while_the_network_is_set_up(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.11\n")
    docker = _Docker(resolv)
    network = _Network(docker)
    write_text = Path.write_text

    def write_once_the_add_runs(self: Path, data: str) -> int:
        # the rewrite (in its thread) goes on only once the ADD has begun: done one after the other, it never would
        assert network.adding.wait(5), "the resolv.conf was rewritten before the network's ADD began"
        return write_text(self, data)

    monkeypatch.setattr(Path, "write_text", write_once_the_add_runs)
    run = asyncio.create_task(DockerService.RunPodSandbox.__wrapped__(  # type: ignore[attr-defined]
        shim(docker, network), cri.RunPodSandboxRequest(config=config(servers=["10.96.0.10"])), None))
    async with asyncio.timeout(5):
        while resolv.read_text() != "nameserver 10.96.0.10\n":  # written while the ADD has not finished
            assert not run.done()
            await asyncio.sleep(0.01)
    assert not run.done()
    network.release.set()
    async with asyncio.timeout(5):
        assert (await run).pod_sandbox_id == SANDBOX
    assert docker.calls == ["create", "start", "cni add"]


@pytest.mark.parametrize(("network_fails", "message"), [
    (False, "rewrite resolv.conf failed"),  # the rewrite alone fails: everything made is removed
    (True, "failed to set up the network of sandbox web"),  # both fail: the network's error is the one raised
])
async def test_a_failure_during_the_network_set_up_removes_everything(tmp_path: Path, network_fails: bool,
                                                                      message: str) -> None:
    docker = _Docker(tmp_path / "gone" / "resolv.conf")
    network = _Network(docker, fail=network_fails)
    network.release.set()
    with pytest.raises(CriError) as e:
        async with asyncio.timeout(5):
            await DockerService.RunPodSandbox.__wrapped__(  # type: ignore[attr-defined]
                shim(docker, network), cri.RunPodSandboxRequest(config=config(servers=["10.96.0.10"])), None)
    assert message in e.value.message
    assert docker.calls == ["create", "start", "cni add", "cni del", "remove"]
