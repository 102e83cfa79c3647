"""Fixtures shared by integration modules that need a real node: one kubelet per module on the session's
apiserver, driving the host's Docker engine (skips when there is none), removed with all it made; and an etcd
of a module's own."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cluster import ApiServer, Etcd, make_workdir


@pytest.fixture(scope="module")
def own_etcd(workdir: Path) -> Iterator[Etcd]:
    """An etcd of the module's own (in its workdir): its nodes, pods and controllers stay out of the other
    modules' way."""
    folder = workdir / f"etcd-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    server = Etcd(folder)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kubelet_node(apiserver: ApiServer) -> Iterator[str]:
    """The name of a Ready node whose kubelet runs this module's pods (give them spec.nodeName: no scheduler)."""
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine to run a kubelet's pods: {e}")
    from tests.node_process import KubeletProcess, cleanup, ensure_images, free_pod_cidrs

    ensure_images()
    workdir = make_workdir("minik8s-kubelet-")
    kubelet = KubeletProcess(workdir, apiserver, f"it-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
    try:
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            kubelet.start(api)
        yield kubelet.node
    finally:
        cleanup([kubelet])
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            api.delete(f"/api/v1/nodes/{kubelet.node}")  # no later test's scheduler may pick it
        shutil.rmtree(workdir, ignore_errors=True)
