"""Fixtures: one real etcd and one real apiserver process per test session, and a fresh
namespace per test so tests do not see each other's objects."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from machinery import informer
from tests import warm_python
from tests.cluster import CACHE_MUTATIONS, ApiServer, Etcd, make_workdir

# An informer's cached objects are read-only (their parts are shared with other cached objects): in the tests,
# changing one in place raises CachedObjectMutated, here and in every component the tests start.
os.environ["MINIK8S_CACHE_READ_ONLY_CHECK"] = "1"
informer.READ_ONLY_CHECK = True


def pytest_configure(config: pytest.Config) -> None:
    """Component processes and mkubectl runs start forked from a warm interpreter (tests/warm_python.py)."""
    warm_python.enable()


@pytest.fixture(scope="session", autouse=True)
def components_kept_cached_objects_read_only() -> Iterator[None]:
    """Fails the session (at its end) if a component stopped later than its tests (a module's or the session's
    cluster) logged a cached object changed in place."""
    yield
    assert not CACHE_MUTATIONS, f"a component changed an informer's cached object in place: {CACHE_MUTATIONS}"


@pytest.fixture(autouse=True)
def cached_objects_stay_read_only() -> Iterator[None]:
    """Fails a test in whose process, or in a component it stopped, a cached object was changed in place (the
    error may have been caught and logged: a controller's handler or sync goes on after it)."""
    before, components_before = informer.mutations_refused, len(CACHE_MUTATIONS)
    yield
    assert informer.mutations_refused == before, "an informer's cached object was changed in place (see the log)"
    assert len(CACHE_MUTATIONS) == components_before, (
        f"a component changed an informer's cached object in place: {CACHE_MUTATIONS[components_before:]}")


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


# Fixtures wider than a module that must live in one process only: the e2e clusters (tests/e2e/conftest.py); the
# locally built image that the e2e tests and the compose cluster's roll to (its tear-down removes the image from
# the host's Docker); the compose cluster's images (hack/cluster-images.sh, once a session, minutes the first time).
ONE_PROCESS_FIXTURES = frozenset({"local_cluster", "service_cluster", "httpd_b", "httpd_b_image", "compose_images"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The unit of work of pytest-xdist's `--dist loadgroup` (`MINIK8S_TEST_WORKERS=2 ./hack/test.sh`): a test
    module, so its module-scoped cluster starts once, on one worker; and the modules that use one of
    ONE_PROCESS_FIXTURES at session or package scope (directly or through another such module) form one group,
    so that cluster or image exists once. Only under `--dist loadgroup`."""
    if getattr(config.option, "dist", "no") != "loadgroup":
        return
    parent: dict[str, str] = {}  # union-find over module paths and fixture names

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for item in items:
        module = item.nodeid.split("::", 1)[0]
        find(module)
        info = getattr(item, "_fixtureinfo", None)
        for name in sorted(ONE_PROCESS_FIXTURES & set(getattr(item, "fixturenames", ()))):
            defs = info.name2fixturedefs.get(name) if info is not None else None
            if defs and defs[-1].scope in ("session", "package"):
                parent[find(module)] = find(f"fixture:{name}")
    members: dict[str, list[str]] = {}
    for key in sorted(k for k in parent if not k.startswith("fixture:")):
        members.setdefault(find(key), []).append(key)
    names = {root: group[0] if len(group) == 1 else "+".join(m.rsplit("/", 1)[-1].removesuffix(".py") for m in group)
             for root, group in members.items()}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(names[find(item.nodeid.split("::", 1)[0])]))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """With --durations=N (hack/test.sh passes 30): after pytest's slowest steps, the N slowest test modules,
    each the sum of its tests' set-up, call and tear-down (a module-scoped cluster's start is in its first
    test's set-up): where the suite's time goes, module by module, so it is seen before it creeps up."""
    count = config.option.durations
    if not count:
        return
    totals: dict[str, float] = {}
    tests: dict[str, set[str]] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            duration = getattr(report, "duration", None)
            nodeid = getattr(report, "nodeid", "")
            if duration is None or not nodeid or getattr(report, "when", None) is None:
                continue
            module = nodeid.split("::", 1)[0]
            totals[module] = totals.get(module, 0.0) + duration
            tests.setdefault(module, set()).add(nodeid)
    if not totals:
        return
    terminalreporter.write_sep("=", f"slowest {min(count, len(totals))} modules")
    for module, seconds in sorted(totals.items(), key=lambda kv: -kv[1])[:count]:
        terminalreporter.write_line(f"{seconds:8.2f}s {len(tests[module]):4d} tests  {module}")
    terminalreporter.write_line(f"{sum(totals.values()):8.2f}s in all ({len(totals)} modules)")


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
