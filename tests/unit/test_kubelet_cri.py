"""The kubelet over the CRI, on the in-memory fake runtime (machinery/cri/testing/fake_runtime.py):
the CRI clients over a real unix socket, computePodActions, SyncPod and the pod workers with status,
restarts and back-off, image pull failures, probes, and graceful deletion. No Docker, no root."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from kubelet.container.helpers import hash_container
from kubelet.container.runtime import ContainerState, ContainerStatus, PodStatus, SandboxStatus
from kubelet.cri.remote_image import RemoteImageService
from kubelet.cri.remote_runtime import RemoteRuntimeService, dial
from kubelet.kuberuntime.container_config import (
    RunContainerOptions,
    generate_container_config,
    generate_pod_sandbox_config,
    pod_log_directory,
)
from kubelet.kuberuntime.pod_actions import KillRequest, compute_pod_actions
from machinery.api.core_v1 import EphemeralContainer
from machinery.cri import api_pb2 as pb
from machinery.cri.errors import CriError
from machinery.cri.testing.fake_runtime import FakeRuntime, FakeRuntimeError, serve
from tests.unit.kubelet_fakes import IMAGE, NODE_IP, FakeKubelet, container_state, eventually, make_pod


@pytest.fixture
async def kubelet(tmp_path: Path) -> AsyncIterator[FakeKubelet]:
    k = FakeKubelet(tmp_path)
    await k.start()
    yield k
    await k.stop()


# -- the clients and the fake over a socket -----------------------------------------------------------


async def test_clients_talk_to_the_fake_over_a_unix_socket(tmp_path: Path) -> None:
    fake = FakeRuntime(images=[IMAGE])
    endpoint = f"unix://{tmp_path}/cri.sock"
    server = await serve(fake, endpoint)
    runtime = RemoteRuntimeService.connect(endpoint, timeout=5)
    images = RemoteImageService.connect(endpoint, timeout=5)
    try:
        assert (await runtime.version()).runtime_name == "fakeRuntime"
        status = await runtime.status()
        assert {c.type: c.status for c in status.conditions} == {"RuntimeReady": True, "NetworkReady": False}
        await runtime.update_runtime_config("10.244.1.0/24")
        assert fake.pod_cidr == "10.244.1.0/24"
        sandbox_id = await runtime.run_pod_sandbox(generate_pod_sandbox_config(make_pod(), 0, str(tmp_path)))
        assert (await runtime.pod_sandbox_status(sandbox_id)).network.ip.startswith("10.244.1.")  # of the podCIDR
        assert [s.id for s in await runtime.list_pod_sandbox({"io.kubernetes.pod.uid": "uid-p"})] == [sandbox_id]
        assert await images.image_status(IMAGE) is not None and await images.image_status("nope:1") is None
        fake.inject_error("StopPodSandbox", FakeRuntimeError("boom", grpc.StatusCode.UNAVAILABLE))
        with pytest.raises(CriError) as err:
            await runtime.stop_pod_sandbox(sandbox_id)
        assert err.value.code == grpc.StatusCode.UNAVAILABLE and err.value.message == "boom"
        with pytest.raises(CriError) as err:
            await runtime.container_status("missing")
        assert err.value.is_not_found
    finally:
        await runtime.close()
        await images.close()
        await server.stop(None)


def test_an_endpoint_that_is_not_a_unix_socket_is_refused() -> None:
    with pytest.raises(ValueError, match="only unix"):
        dial("tcp://127.0.0.1:1234")
    with pytest.raises(ValueError, match="empty"):
        dial("")


# -- computePodActions ----------------------------------------------------------------------------


def _running(name: str, sandbox: str = "sb1", cid: str | None = None, hash_: str = "",
             attempt: int = 0) -> ContainerStatus:
    return ContainerStatus(id=cid or f"{name}-{attempt}", name=name, state=ContainerState.RUNNING, attempt=attempt,
                           sandbox_id=sandbox, hash=hash_, started_at=1.0, created_at=1.0)


def _exited(name: str, code: int, attempt: int = 0) -> ContainerStatus:
    return ContainerStatus(id=f"{name}-{attempt}", name=name, state=ContainerState.EXITED, exit_code=code,
                           attempt=attempt, sandbox_id="sb1", started_at=1.0, finished_at=2.0, created_at=1.0)


def test_a_new_pod_gets_a_sandbox_and_all_its_containers() -> None:
    pod = make_pod(containers=[{"name": "a", "image": IMAGE}, {"name": "b", "image": IMAGE}])
    actions = compute_pod_actions(pod, PodStatus("uid-p"), {})
    assert actions.create_sandbox and not actions.kill_pod and actions.attempt == 0
    assert [c.name for c in actions.containers_to_start] == ["a", "b"]


def test_a_dead_sandbox_is_replaced_with_the_next_attempt() -> None:
    pod = make_pod()
    status = PodStatus("uid-p", sandboxes=[SandboxStatus("sb1", 0, ready=False)], containers=[_exited("c", 137)])
    actions = compute_pod_actions(pod, status, {})
    assert actions.create_sandbox and actions.kill_pod and actions.attempt == 1
    assert [c.name for c in actions.containers_to_start] == ["c"]


def test_a_finished_pod_that_does_not_restart_keeps_its_dead_sandbox() -> None:
    pod = make_pod(restartPolicy="Never")
    status = PodStatus("uid-p", sandboxes=[SandboxStatus("sb1", 0, ready=False)], containers=[_exited("c", 0)])
    actions = compute_pod_actions(pod, status, {})
    assert not actions.create_sandbox and not actions.containers_to_start


def test_changed_spec_and_failed_liveness_kill_and_restart() -> None:
    pod = make_pod(containers=[{"name": "a", "image": IMAGE}, {"name": "b", "image": IMAGE},
                               {"name": "c", "image": IMAGE}])
    assert pod.spec is not None
    _, b, c = pod.spec.containers
    status = PodStatus("uid-p", sandboxes=[SandboxStatus("sb1", 0, ready=True)],
                       containers=[_running("a", hash_="old"), _running("b", hash_=hash_container(b)),
                                   _running("c", hash_=hash_container(c))])
    actions = compute_pod_actions(pod, status, {"b": KillRequest("b-0", "Container b failed liveness probe")})
    assert not actions.create_sandbox and actions.sandbox_id == "sb1"
    assert set(actions.containers_to_kill) == {"a-0", "b-0"} and actions.spec_changed == {"a"}
    assert actions.containers_to_kill["b-0"][1] == "Container b failed liveness probe"
    assert [x.name for x in actions.containers_to_start] == ["a", "b"]  # c keeps running


def test_init_containers_run_one_after_the_other_before_the_app() -> None:
    pod = make_pod(initContainers=[{"name": "i1", "image": IMAGE}, {"name": "i2", "image": IMAGE}])
    status = PodStatus("uid-p", sandboxes=[SandboxStatus("sb1", 0, ready=True)], containers=[_exited("i1", 0)])
    actions = compute_pod_actions(pod, status, {})
    assert actions.next_init_container is not None and actions.next_init_container.name == "i2"
    assert actions.init_pending and not actions.containers_to_start
    failed = PodStatus("uid-p", sandboxes=[SandboxStatus("sb1", 0, ready=True)], containers=[_exited("i1", 1)])
    assert compute_pod_actions(make_pod(initContainers=[{"name": "i1", "image": IMAGE}], restartPolicy="Never"),
                               failed, {}).init_failed


def test_ephemeral_containers_start_once_even_during_init_and_never_again() -> None:
    pod = make_pod(initContainers=[{"name": "i1", "image": IMAGE}])
    assert pod.spec is not None
    pod.spec.ephemeral_containers = [EphemeralContainer(name="dbg", image=IMAGE, target_container_name="c")]
    status = PodStatus("uid-p", sandboxes=[SandboxStatus("sb1", 0, ready=True)], containers=[_running("i1")])
    actions = compute_pod_actions(pod, status, {})
    assert actions.init_pending and [c.name for c in actions.ephemeral_to_start] == ["dbg"]
    status.containers.append(_exited("dbg", 1))
    assert compute_pod_actions(pod, status, {}).ephemeral_to_start == []  # never restarted
    fresh = compute_pod_actions(pod, PodStatus("uid-p"), {})
    assert fresh.create_sandbox and fresh.ephemeral_to_start == []  # not with a new sandbox


def test_an_ephemeral_containers_config_shares_its_targets_pid_namespace() -> None:
    pod = make_pod()
    ec = EphemeralContainer(name="dbg", image=IMAGE, target_container_name="c")
    config = generate_container_config(pod, ec, 0, RunContainerOptions(), "target-id")
    ns = config.linux.security_context.namespace_options
    assert (ns.pid, ns.target_id) == (pb.TARGET, "target-id")
    assert generate_container_config(pod, ec, 0, RunContainerOptions()).linux.security_context.namespace_options.pid \
        == pb.CONTAINER


# -- SyncPod and the pod workers, on the fake -------------------------------------------------------


async def test_a_pod_runs_and_its_status_says_so(kubelet: FakeKubelet) -> None:
    kubelet.add(make_pod())
    pod = await eventually(lambda: kubelet.api_pod() if container_state(kubelet.api_pod()).get("ready") else None,
                           what="a ready container")
    status = pod.status.to_dict()
    assert status["phase"] == "Running" and status["podIP"].startswith("10.88.") and status["hostIP"] == NODE_IP
    cs = container_state(pod)
    assert cs["containerID"].startswith("fake://") and cs["restartCount"] == 0 and "running" in cs["state"]
    assert kubelet.fake.calls.count("RunPodSandbox") == 1
    sandbox = next(iter(kubelet.fake.sandbox_configs.values()))
    assert sandbox.metadata.uid == "uid-p" and sandbox.log_directory.endswith("ns_p_uid-p")
    assert (kubelet.volumes.pod_dir("uid-p") / "etc-hosts").read_text().count(status["podIP"]) == 1
    assert {"Pulled", "Created", "Started"} <= set(kubelet.reasons())


async def test_a_crashing_container_restarts_with_crash_loop_back_off(kubelet: FakeKubelet) -> None:
    kubelet.add(make_pod())
    await eventually(lambda: kubelet.fake.running_containers("c"), what="a running container")
    first = kubelet.fake.running_containers("c")[0].id
    kubelet.fake.exit_container(first, 1)
    await eventually(lambda: container_state(kubelet.api_pod()).get("restartCount") == 1 and
                     kubelet.fake.running_containers("c"), what="the first restart (at once)")
    second = kubelet.fake.running_containers("c")[0].id
    kubelet.fake.exit_container(second, 2)
    waiting = await eventually(lambda: container_state(kubelet.api_pod()).get("state", {}).get("waiting"),
                               what="CrashLoopBackOff")
    assert waiting["reason"] == "CrashLoopBackOff" and "back-off" in waiting["message"]
    assert container_state(kubelet.api_pod())["lastState"]["terminated"]["exitCode"] == 2
    assert "BackOff" in kubelet.reasons()
    await eventually(lambda: container_state(kubelet.api_pod()).get("restartCount") == 2 and
                     "running" in container_state(kubelet.api_pod())["state"], what="the restart after the window")


async def test_an_oom_killed_container_of_a_never_restarting_pod_fails_it(kubelet: FakeKubelet) -> None:
    kubelet.add(make_pod(restartPolicy="Never"))
    await eventually(lambda: kubelet.fake.running_containers("c"), what="a running container")
    kubelet.fake.exit_container(kubelet.fake.running_containers("c")[0].id, 137, "OOMKilled")
    pod = await eventually(lambda: kubelet.api_pod() if kubelet.api_pod().status.phase == "Failed" else None,
                           what="phase Failed")
    assert container_state(pod)["state"]["terminated"]["reason"] == "OOMKilled"
    await eventually(lambda: all(s.state == 1 for s in kubelet.fake.sandboxes.values()), what="the sandbox stopped")


async def test_an_image_that_cannot_be_pulled_backs_off(kubelet: FakeKubelet) -> None:
    kubelet.fake.pull_errors["nowhere/app:1"] = "no registry is reachable"
    kubelet.add(make_pod(containers=[{"name": "c", "image": "nowhere/app:1"}]))
    waiting = await eventually(lambda: container_state(kubelet.api_pod()).get("state", {}).get("waiting", {})
                               .get("reason") == "ErrImagePull" and
                               container_state(kubelet.api_pod())["state"]["waiting"], what="ErrImagePull")
    assert "no registry is reachable" in waiting["message"]
    await eventually(lambda: container_state(kubelet.api_pod()).get("state", {}).get("waiting", {})
                     .get("reason") == "ImagePullBackOff", what="ImagePullBackOff")
    del kubelet.fake.pull_errors["nowhere/app:1"]
    await eventually(lambda: "running" in container_state(kubelet.api_pod()).get("state", {}),
                     what="running once the image can be pulled")


async def test_never_pull_of_a_missing_image_waits_with_err_image_never_pull(kubelet: FakeKubelet) -> None:
    kubelet.add(make_pod(containers=[{"name": "c", "image": "absent:1", "imagePullPolicy": "Never"}]))
    waiting = await eventually(lambda: container_state(kubelet.api_pod()).get("state", {}).get("waiting", {})
                               .get("reason") == "ErrImageNeverPull", what="ErrImageNeverPull")
    assert waiting and "PullImage" not in kubelet.fake.calls


async def test_no_network_no_sandbox_until_the_runtime_has_one(tmp_path: Path) -> None:
    kubelet = FakeKubelet(tmp_path, network_ready=False)
    await kubelet.start()
    try:
        kubelet.add(make_pod())
        await eventually(lambda: "NetworkNotReady" in kubelet.reasons(), what="NetworkNotReady")
        assert "RunPodSandbox" not in kubelet.fake.calls
        kubelet.network_ready = True
        kubelet.workers.wake_all()
        await eventually(lambda: kubelet.fake.running_containers("c"), what="started once the network is ready")
    finally:
        await kubelet.stop()


async def test_a_failing_exec_liveness_probe_restarts_the_container(kubelet: FakeKubelet) -> None:
    healthy = {"ok": True}
    kubelet.fake.exec_handler = lambda _cid, cmd: (b"", b"sick", 0 if healthy["ok"] else 1)
    kubelet.add(make_pod(containers=[{"name": "c", "image": IMAGE, "livenessProbe": {
        "exec": {"command": ["check"]}, "periodSeconds": 1, "failureThreshold": 1}}]))
    await eventually(lambda: kubelet.fake.running_containers("c"), what="a running container")
    await eventually(lambda: "ExecSync" in kubelet.fake.calls, what="the probe ran")
    first = kubelet.fake.running_containers("c")[0].id
    healthy["ok"] = False
    await eventually(lambda: kubelet.fake.running_containers("c") and
                     kubelet.fake.running_containers("c")[0].id != first, timeout=5, what="a new container")
    assert any(r == "Unhealthy" and "sick" in m for _, r, m in kubelet.events)
    assert any(r == "Killing" and "failed liveness probe" in m for _, r, m in kubelet.events)


async def test_deletion_stops_removes_and_confirms(kubelet: FakeKubelet) -> None:
    pod = make_pod(terminationGracePeriodSeconds=3)
    kubelet.add(pod)
    await eventually(lambda: kubelet.fake.running_containers("c"), what="a running container")
    data = kubelet.api_pod().to_dict()
    data["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z"
    data["metadata"]["deletionGracePeriodSeconds"] = 3
    data["metadata"]["resourceVersion"] = "100"
    kubelet.add(type(pod).model_validate(data))
    await eventually(lambda: kubelet.client.deleted == ["p"], what="the deletion confirmed, once")
    assert not kubelet.fake.containers and not kubelet.fake.sandboxes
    assert "StopContainer" in kubelet.fake.calls and "Killing" in kubelet.reasons()
    assert not kubelet.volumes.pod_dir("uid-p").exists()


async def test_deleting_a_pod_abandons_its_hanging_image_pull(kubelet: FakeKubelet) -> None:
    """upstream's pod worker cancels the sync under way when the pod becomes terminating: a pull that
    hangs (a registry that never answers) does not hold the deletion up."""
    import asyncio

    kubelet.fake.pull_gates["hang:1"] = asyncio.Event()  # never set
    pod = make_pod(containers=[{"name": "c", "image": "hang:1"}], terminationGracePeriodSeconds=1)
    kubelet.add(pod)
    await eventually(lambda: "PullImage" in kubelet.fake.calls, what="the pull under way")
    data = kubelet.api_pod().to_dict()
    data["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z"
    data["metadata"]["resourceVersion"] = "100"
    kubelet.add(type(pod).model_validate(data))
    await eventually(lambda: kubelet.client.deleted == ["p"], what="the deletion confirmed while the pull hangs")
    assert not kubelet.fake.sandboxes and not kubelet.fake.containers


async def test_a_failed_sandbox_is_retried_and_reported(kubelet: FakeKubelet) -> None:
    kubelet.fake.inject_error("RunPodSandbox", "the runtime is busy")
    kubelet.add(make_pod())
    await eventually(lambda: kubelet.fake.running_containers("c"), what="started on the retry")
    assert any(r == "FailedCreatePodSandBox" and "the runtime is busy" in m for _, r, m in kubelet.events)


async def test_a_new_pods_images_are_looked_up_while_its_sandbox_is_made(kubelet: FakeKubelet) -> None:
    kubelet.fake.inject_error("RunPodSandbox", "the runtime is busy")  # the first attempt fails after the lookup
    kubelet.fake.inject_error("ImageStatus", "the image store is busy")  # ... which fails too: nobody takes it
    kubelet.add(make_pod(containers=[{"name": "c", "image": IMAGE}, {"name": "d", "image": IMAGE}]))
    await eventually(lambda: len(kubelet.fake.running_containers()) == 2, what="both started on the retry")
    calls = [c for c in kubelet.fake.calls if c in ("ImageStatus", "RunPodSandbox", "CreateContainer")]
    # each attempt asks before the sandbox is made; the retry asks afresh (the failed lookup is not reused), and
    # the second container of the same image asks for itself
    assert calls[:5] == ["ImageStatus", "RunPodSandbox", "ImageStatus", "RunPodSandbox", "CreateContainer"], calls
    assert calls[5:] == ["ImageStatus", "CreateContainer"], calls
    assert any(r == "FailedCreatePodSandBox" for _, r, _m in kubelet.events)


async def test_a_log_directory_that_cannot_be_made_beside_the_sandbox_fails_the_sync_before_any_container(
        kubelet: FakeKubelet, tmp_path: Path) -> None:
    """The pod's log directory is made while the runtime makes the sandbox: when it cannot be (a file in its
    place), the sync fails before any container is created, and the retry, once it can, starts the pod in the
    sandbox made before."""
    pod = make_pod()
    blocker = Path(pod_log_directory(kubelet.runtime.logs_root, pod))
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a directory")
    kubelet.add(pod)
    await eventually(lambda: (worker := kubelet.workers.get("uid-p")) is not None and worker.failures > 0,
                     what="the sync failed")
    assert "RunPodSandbox" in kubelet.fake.calls and "CreateContainer" not in kubelet.fake.calls
    blocker.unlink()
    await eventually(lambda: kubelet.fake.running_containers("c"), what="started on a retry")
    assert kubelet.fake.calls.count("RunPodSandbox") == 1 and blocker.is_dir()
    assert kubelet.volumes.hosts_file("uid-p") is not None  # the sandbox's /etc/hosts was written all the same


async def test_a_failed_image_lookup_beside_the_sandbox_fails_the_sync_and_is_retried(kubelet: FakeKubelet) -> None:
    kubelet.fake.inject_error("ImageStatus", "the image store is busy")
    kubelet.add(make_pod())
    await eventually(lambda: kubelet.fake.running_containers("c"), what="started on the retry")
    calls = [c for c in kubelet.fake.calls if c in ("ImageStatus", "RunPodSandbox", "CreateContainer")]
    # the sandbox made on the first attempt is kept; the retry looks the image up again, alone
    assert calls == ["ImageStatus", "RunPodSandbox", "ImageStatus", "CreateContainer"], calls


async def test_a_restarted_kubelet_adopts_what_runs(tmp_path: Path) -> None:
    first = FakeKubelet(tmp_path)
    await first.start()
    first.add(make_pod())
    await eventually(lambda: first.fake.running_containers("c"), what="a running container")
    await first.stop()
    second = FakeKubelet(tmp_path)
    second.fake = first.fake  # the same runtime, a new kubelet
    second.runtime.runtime_service.stub = first.fake
    second.runtime.image_service.stub = first.fake
    await second.start()
    try:
        second.add(first.api_pod())
        await eventually(lambda: second.workers.get("uid-p") and second.workers.get("uid-p").syncs > 0,  # type: ignore[union-attr]
                         what="a sync")
        assert first.fake.calls.count("RunPodSandbox") == 1 and first.fake.calls.count("StartContainer") == 1
        assert container_state(second.api_pod())["restartCount"] == 0
    finally:
        await second.stop()


async def test_the_node_is_not_ready_while_the_runtime_network_is_not(tmp_path: Path) -> None:
    fake = FakeRuntime()
    from kubelet.kuberuntime.manager import KubeGenericRuntimeManager
    from kubelet.pleg.generic import GenericPLEG

    manager = KubeGenericRuntimeManager(RemoteRuntimeService(fake), RemoteImageService(fake), None,  # type: ignore[arg-type]
                                        lambda *_: None, GenericPLEG(RemoteRuntimeService(fake), "fake"),
                                        logs_root=str(tmp_path))
    message = (await manager.status()).not_ready_message()
    assert message == "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady: " \
                      "Network plugin returns error: no pod CIDR yet"
    await manager.update_pod_cidr("10.244.3.0/24")  # UpdateRuntimeConfig
    assert (await manager.status()).not_ready_message() == ""
    fake.runtime_ready = False
    assert (await manager.status()).not_ready_message().startswith("container runtime is down")


async def test_the_pleg_relists_less_while_the_runtime_streams_events() -> None:
    from kubelet.pleg.generic import GenericPLEG

    fake = FakeRuntime()
    pleg = GenericPLEG(RemoteRuntimeService(fake), "fake", relist_period=0.05)
    await pleg.start()
    try:
        await eventually(lambda: pleg.events_flowing, what="the event stream open")
    finally:
        await pleg.stop()
    silent = FakeRuntime()
    silent.inject_error("GetContainerEvents", FakeRuntimeError("no events here", grpc.StatusCode.UNIMPLEMENTED))
    pleg = GenericPLEG(RemoteRuntimeService(silent), "fake", relist_period=0.05)
    await pleg.start()
    try:
        await eventually(lambda: pleg.relists >= 3, what="relisting every period without events")
        assert not pleg.events_flowing
    finally:
        await pleg.stop()


async def test_the_pleg_takes_a_sandboxs_own_events_as_a_sandboxs() -> None:
    """A sandbox's creation and start are the kubelet's own RunPodSandbox: no ContainerStatus of a sandbox
    id (NOT_FOUND, one wasted round trip each); one that stops is read at once, one removed forgotten."""
    from kubelet.pleg.generic import GenericPLEG

    fake = FakeRuntime([IMAGE])
    pleg = GenericPLEG(RemoteRuntimeService(fake), "fake", relist_period=0.05)
    await pleg.start()
    try:
        await eventually(lambda: pleg.events_flowing, what="the event stream open")
        config = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name="p", namespace="ns", uid="uid-p"),
                                     labels={"io.kubernetes.pod.uid": "uid-p"})
        sandbox_id = (await fake.RunPodSandbox(pb.RunPodSandboxRequest(config=config))).pod_sandbox_id
        await pleg.refresh_sandbox(sandbox_id)  # as the kubelet does once RunPodSandbox returns
        container = pb.ContainerConfig(metadata=pb.ContainerMetadata(name="c"), image=pb.ImageSpec(image=IMAGE),
                                       labels={"io.kubernetes.pod.uid": "uid-p"})
        container_id = (await fake.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=container, sandbox_config=config))).container_id
        # events come in order: once the container's is in, the sandbox's two came before it
        await eventually(lambda: pleg.cache.container(container_id), what="the container's event taken")
        assert "ContainerStatus" not in fake.calls
        assert fake.calls.count("PodSandboxStatus") == 1

        await fake.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))  # behind the kubelet's back
        await eventually(lambda: not pleg.cache.get("uid-p").sandboxes[0].ready, what="the stopped sandbox read")
        await fake.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))
        await eventually(lambda: not pleg.cache.get("uid-p").sandboxes, what="the removed sandbox forgotten")
        assert pleg.cache.container(container_id) is None
        assert "ContainerStatus" not in fake.calls
    finally:
        await pleg.stop()


class _HeldRuntime(RemoteRuntimeService):
    """The fake's CRI client, with answers held back on request: a list (or one container's status) is taken
    from the runtime at once and handed over only when the test releases it, as a slow reply on a busy node."""

    def __init__(self, fake: FakeRuntime) -> None:
        super().__init__(fake)
        self.hold_list: asyncio.Event | None = None
        self.hold_status: dict[str, asyncio.Event] = {}
        self.taken = asyncio.Event()

    async def list_containers(self, labels: dict[str, str] | None = None,
                              sandbox_id: str = "") -> list[pb.Container]:
        listed = await super().list_containers(labels, sandbox_id)
        if self.hold_list is not None:
            self.taken.set()
            await self.hold_list.wait()
        return listed

    async def container_status(self, container_id: str) -> pb.ContainerStatus:
        status = await super().container_status(container_id)
        gate = self.hold_status.pop(container_id, None)
        if gate is not None:
            self.taken.set()
            await gate.wait()
        return status


async def _sandbox_and_container(fake: FakeRuntime) -> tuple[str, str]:
    config = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name="p", namespace="ns", uid="uid-p"),
                                 labels={"io.kubernetes.pod.uid": "uid-p"})
    sandbox_id = (await fake.RunPodSandbox(pb.RunPodSandboxRequest(config=config))).pod_sandbox_id
    container = pb.ContainerConfig(metadata=pb.ContainerMetadata(name="c"), image=pb.ImageSpec(image=IMAGE),
                                   labels={"io.kubernetes.pod.uid": "uid-p"})
    container_id = (await fake.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sandbox_id, config=container, sandbox_config=config))).container_id
    return sandbox_id, container_id


async def test_a_relist_taken_before_a_new_container_does_not_forget_it() -> None:
    """The kubelet creates, starts and reads a container while a relist's list, taken just before, is on
    its way: the list lacks the container, yet the container stays in the cache (else the pod's next sync
    would create it again: "container name in use")."""
    from kubelet.pleg.generic import GenericPLEG

    fake = FakeRuntime([IMAGE])
    runtime = _HeldRuntime(fake)
    pleg = GenericPLEG(runtime, "fake", evented=False)
    await pleg.relist()
    runtime.hold_list = asyncio.Event()
    relist = asyncio.ensure_future(pleg.relist())
    await runtime.taken.wait()  # the list is taken: no container in it yet
    sandbox_id, container_id = await _sandbox_and_container(fake)
    await fake.StartContainer(pb.StartContainerRequest(container_id=container_id))
    await pleg.refresh_sandbox(sandbox_id)
    await pleg.refresh_container(container_id, sandbox_id)  # as the kubelet does after StartContainer
    runtime.hold_list.set()
    await relist
    cached = pleg.cache.container(container_id)
    assert cached is not None and cached.state == ContainerState.RUNNING
    assert [s.id for s in pleg.cache.get("uid-p").sandboxes] == [sandbox_id]
    # a container that really went is forgotten by the next relist all the same
    runtime.hold_list = None
    await fake.RemoveContainer(pb.RemoveContainerRequest(container_id=container_id))
    await pleg.relist()
    assert pleg.cache.container(container_id) is None


async def test_a_late_status_does_not_take_a_container_back_in_its_life() -> None:
    """A status read while the container was only created, handed over after the kubelet read it running,
    leaves it running in the cache; a later exit is still taken."""
    from kubelet.pleg.generic import GenericPLEG

    fake = FakeRuntime([IMAGE])
    runtime = _HeldRuntime(fake)
    pleg = GenericPLEG(runtime, "fake", evented=False)
    sandbox_id, container_id = await _sandbox_and_container(fake)
    gate = runtime.hold_status[container_id] = asyncio.Event()
    late = asyncio.ensure_future(pleg.refresh_container(container_id, sandbox_id))  # reads CREATED, held
    await runtime.taken.wait()
    await fake.StartContainer(pb.StartContainerRequest(container_id=container_id))
    await pleg.refresh_container(container_id, sandbox_id)
    gate.set()
    assert (await late) is not None
    cached = pleg.cache.container(container_id)
    assert cached is not None and cached.state == ContainerState.RUNNING
    fake.exit_container(container_id, 1)
    await pleg.refresh_container(container_id, sandbox_id)
    cached = pleg.cache.container(container_id)
    assert cached is not None and cached.state == ContainerState.EXITED and cached.exit_code == 1
