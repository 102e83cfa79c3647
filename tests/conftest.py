"""Fixtures: one real etcd and one real apiserver process per test session, and a fresh
namespace per test so tests do not see each other's objects."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, Etcd, make_workdir


@pytest.fixture(scope="session")
def workdir() -> Iterator[Any]:
    path = make_workdir("minik8s-test-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def etcd(workdir: Any) -> Iterator[Etcd]:
    server = Etcd(workdir)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def apiserver(workdir: Any, etcd: Etcd) -> Iterator[ApiServer]:
    server = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0", "--watch-bookmark-interval", "1")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def api(apiserver: ApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=apiserver.url, timeout=10) as client:
        yield client


@pytest.fixture
def namespace(api: httpx.Client) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert r.status_code == 201, r.text
    yield name
    api.delete(f"/api/v1/namespaces/{name}")


def etcd_keys(etcd: Etcd, prefix: str) -> dict[str, bytes]:
    """What etcd itself holds under prefix, read with our etcd client (not through the apiserver)."""
    from apiserver.storage.etcd import EtcdStorage

    async def read() -> dict[str, bytes]:
        storage = EtcdStorage([etcd.endpoint])
        try:
            kvs, _, _ = await storage.list(prefix)
            return {kv.key: kv.value for kv in kvs}
        finally:
            await storage.close()

    return asyncio.run(read())
