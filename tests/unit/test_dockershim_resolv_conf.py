"""dockershim rewrites the sandbox's resolv.conf Docker made (upstream dockershim's rewriteResolvFile); a failed
rewrite is a CRI error (RunPodSandbox then removes the sandbox: nothing half-made)."""

from __future__ import annotations

import asyncio
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
