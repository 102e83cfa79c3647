"""Fixtures shared by integration modules that need a real node: one kubelet per module on the session's
apiserver, driving the host's Docker engine (skips when there is none), removed with all it made; an etcd
of a module's own; and, for modules that start their own secure apiserver as a `secure` fixture, its admin
client and a fresh namespace per test."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.auth_cluster import SecureApiServer
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
def admin(secure: SecureApiServer) -> Iterator[httpx.Client]:
    """A cluster-admin client of the module's own `secure` apiserver (each such module defines `secure`)."""
    with secure.client("admin", timeout=30) as client:
        yield client


@pytest.fixture
def ns(request: pytest.FixtureRequest, admin: httpx.Client) -> Iterator[str]:
    """A fresh namespace on the module's secure apiserver, named after the module (`NS_PREFIX` overrides)."""
    module = request.module
    prefix = getattr(module, "NS_PREFIX", module.__name__.rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-"))
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    assert admin.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


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
