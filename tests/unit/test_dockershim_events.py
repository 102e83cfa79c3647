"""The Docker shim's bookkeeping between its calls and Docker's event stream (dockershim/service.py), as pure
logic: a sandbox's CREATED and STARTED events sent by RunPodSandbox once its network is up (as containerd
sends them), its inspect kept until an event says it changed, and one inspect after StartContainer shared by the
first ContainerStatus and the container's start event. The calls themselves run on a real Docker in
tests/integration/test_dockershim.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dockershim import translate as tr
from dockershim.network import PodNetwork
from dockershim.service import DockerService, _AfterStart
from machinery.cri import api_pb2 as cri

NODE = "n1"
SANDBOX = "a" * 64
CONTAINER = "c" * 64


@pytest.fixture
def service(tmp_path: Path) -> DockerService:
    return DockerService(None, node=NODE, network=PodNetwork(NODE, tmp_path, []),  # type: ignore[arg-type]
                         pause_image="pause", streaming=None)  # type: ignore[arg-type]


def sandbox(running: bool = True) -> dict[str, Any]:
    return {"Id": SANDBOX, "Name": "/k8s_POD_web_prod_uid1_0", "Created": "2026-11-24T23:00:00.000000001Z",
            "State": {"Running": running, "StartedAt": "2026-11-24T23:00:02.5Z"},
            "Config": {"Labels": {tr.LABEL_MANAGED: "true", tr.LABEL_NODE: NODE, tr.LABEL_TYPE: tr.TYPE_SANDBOX}}}


def event(action: str, ident: str = SANDBOX, kind: str = tr.TYPE_SANDBOX) -> dict[str, Any]:
    return {"Action": action, "Actor": {"ID": ident, "Attributes": {tr.LABEL_TYPE: kind}}}


def listening(service: DockerService) -> asyncio.Queue[asyncio.Future[cri.ContainerEventResponse | None]]:
    ordered: asyncio.Queue[asyncio.Future[cri.ContainerEventResponse | None]] = asyncio.Queue()
    service._ordered = ordered
    service._subscribers.add(asyncio.Queue())
    return ordered


async def test_a_run_sandbox_sends_its_created_and_started_events_and_keeps_its_inspect(
        service: DockerService) -> None:
    ordered = listening(service)
    data = sandbox()
    service._ran(data, None)
    sent = [ordered.get_nowait().result() for _ in range(ordered.qsize())]
    assert [(e.container_id, e.container_event_type) for e in sent if e is not None] == [
        (SANDBOX, cri.CONTAINER_CREATED_EVENT), (SANDBOX, cri.CONTAINER_STARTED_EVENT)]
    created, started = sent
    assert created is not None and started is not None
    assert created.created_at == 1_795_561_200_000_000_001
    assert started.created_at == 1_795_561_202_500_000_000
    assert started.pod_sandbox_status.state == cri.SANDBOX_READY
    assert started.pod_sandbox_status.metadata.uid == "uid1"
    assert not started.containers_statuses  # a sandbox is no container
    # the kubelet's PodSandboxStatus and CreateContainer take this inspect, not another
    assert service._started[SANDBOX] is data
    assert await service._sandbox_of(SANDBOX) is data


async def test_dockers_own_creation_and_start_events_of_a_sandbox_are_not_sent_again(service: DockerService) -> None:
    data = sandbox()
    service._ran(data, None)
    assert service._track_sandbox(event("create")) is True
    assert service._track_sandbox(event("start")) is True
    assert service._sandbox_cache[SANDBOX] is data  # taken after the start: newer than those events
    assert service._track_sandbox(event("die")) is False
    assert SANDBOX not in service._sandbox_cache and SANDBOX not in service._started


async def test_a_start_event_drops_an_inspect_taken_before_the_start(service: DockerService) -> None:
    service._sandbox_cache[SANDBOX] = sandbox(running=False)
    assert service._track_sandbox(event("start")) is True
    assert SANDBOX not in service._sandbox_cache


async def test_a_sandbox_that_died_while_its_network_was_set_up_is_read_from_docker(service: DockerService) -> None:
    ordered = listening(service)
    changes = service._sandbox_changes.get(SANDBOX)  # when RunPodSandbox took its inspect
    service._track_sandbox(event("die"))
    service._ran(sandbox(), changes)
    assert SANDBOX not in service._started and SANDBOX not in service._sandbox_cache
    assert ordered.empty()  # Docker's die event tells it; no STARTED after it


async def test_no_events_are_queued_without_a_subscriber(service: DockerService) -> None:
    service._ran(sandbox(), None)
    assert service._ordered is None and SANDBOX in service._started


async def test_the_inspect_after_a_start_answers_the_first_status_and_the_start_event_once(
        service: DockerService) -> None:
    shown = {"Id": CONTAINER}
    after = _AfterStart(asyncio.get_running_loop().create_future())
    after.shown.set_result(shown)
    service._after_start[CONTAINER] = after
    assert await service._shown_after_start(CONTAINER, status=True) is shown
    assert await service._shown_after_start(CONTAINER, status=True) is None  # a later status asks Docker
    assert await service._shown_after_start(CONTAINER, status=False) is shown
    assert CONTAINER not in service._after_start


async def test_a_start_event_waits_for_the_inspect_startcontainer_is_taking(service: DockerService) -> None:
    after = _AfterStart(asyncio.get_running_loop().create_future())
    service._after_start[CONTAINER] = after
    waiting = asyncio.create_task(service._shown_after_start(CONTAINER, status=False))
    await asyncio.sleep(0)
    assert not waiting.done()
    after.shown.set_result(None)  # the inspect failed (removed meanwhile): each asks Docker itself
    assert await waiting is None
    assert await service._shown_after_start(CONTAINER, status=True) is None


@pytest.mark.parametrize("action", ["die", "destroy"])
async def test_the_inspect_after_a_start_is_dropped_by_a_later_event(service: DockerService, action: str) -> None:
    after = _AfterStart(asyncio.get_running_loop().create_future())
    after.shown.set_result({"Id": CONTAINER})
    service._after_start[CONTAINER] = after
    service._track_container(event("create", CONTAINER, tr.TYPE_CONTAINER))  # older than the start
    service._track_container(event("start", CONTAINER, tr.TYPE_CONTAINER))
    assert CONTAINER in service._after_start
    service._track_container(event(action, CONTAINER, tr.TYPE_CONTAINER))
    assert await service._shown_after_start(CONTAINER, status=True) is None
