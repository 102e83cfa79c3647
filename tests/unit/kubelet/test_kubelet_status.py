"""Pod status computation (kubelet.status): phases, container states, conditions, transition times."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet.container.runtime import ContainerState, ContainerStatus
from kubelet.status import PodRuntimeState, compute_pod_status, pod_phase, terminated_state
from kubelet.status_manager import status_patch
from machinery.api.core_v1 import EphemeralContainer, Pod

NOW = "2026-11-22T10:00:00Z"
LATER = "2026-11-22T10:05:00Z"


def make_pod(containers: list[str], restart_policy: str = "Always", status: dict[str, Any] | None = None,
             **extra: Any) -> Pod:
    specs = [{"name": n, "image": "minik8s/busybox:1.35", **extra.get(n, {})} for n in containers]
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                               "spec": {"containers": specs, "restartPolicy": restart_policy,
                                        **({"readinessGates": extra["gates"]} if "gates" in extra else {})},
                               "status": status or {"phase": "Pending", "qosClass": "BestEffort"}})


def inst(name: str, state: str = "running", attempt: int = 0, exit_code: int = 0, oom: bool = False,
         cid: str | None = None, error: str = "") -> ContainerStatus:
    """An instance as the runtime reports it; `error`: it failed to start (exited, never started)."""
    return ContainerStatus(id=cid or f"{name}-{attempt}", name=name, attempt=attempt, runtime="docker",
                           state=ContainerState(state), exit_code=exit_code,
                           started_at=None if error else 1795341600.0 + attempt,
                           finished_at=None if state == "running" else 1795341601.0 + attempt,
                           created_at=1795341599.0, reason="OOMKilled" if oom else "", message=error,
                           image="minik8s/busybox:1.35", image_ref="sha256:abc")


def state(**kw: Any) -> PodRuntimeState:
    return PodRuntimeState(host_ip="192.0.2.2", pod_ip="10.244.1.5", sandbox_ready=True, **kw)


def test_running_pod_with_ready_containers() -> None:
    pod = make_pod(["a", "b"])
    st = compute_pod_status(pod, state(instances={"a": [inst("a")], "b": [inst("b")]}), NOW)
    assert st["phase"] == "Running"
    assert st["podIP"] == "10.244.1.5" and st["podIPs"] == [{"ip": "10.244.1.5"}]
    assert st["hostIP"] == "192.0.2.2" and st["startTime"] == NOW and st["qosClass"] == "BestEffort"
    conds = {c["type"]: c for c in st["conditions"]}
    assert [c["type"] for c in st["conditions"]] == ["PodScheduled", "PodReadyToStartContainers", "Initialized",
                                                     "ContainersReady", "Ready"]
    assert conds["Ready"]["status"] == "True" and conds["ContainersReady"]["status"] == "True"
    a = st["containerStatuses"][0]
    assert a["state"] == {"running": {"startedAt": "2026-11-22T10:00:00Z"}}
    assert a["ready"] and a["started"] and a["restartCount"] == 0
    assert a["containerID"] == "docker://a-0" and a["imageID"] == "docker://sha256:abc"


def test_containers_not_created_yet_are_waiting_and_the_pod_pending() -> None:
    pod = make_pod(["a"])
    st = compute_pod_status(pod, state(waiting={"a": ("ErrImagePull", "no registry")}), NOW)
    assert st["phase"] == "Pending"
    assert st["containerStatuses"][0]["state"] == {"waiting": {"reason": "ErrImagePull", "message": "no registry"}}
    assert st["containerStatuses"][0]["imageID"] == ""
    ready = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert ready == {"type": "Ready", "status": "False", "lastTransitionTime": NOW, "reason": "ContainersNotReady",
                     "message": "containers with unready status: [a]"}
    st2 = compute_pod_status(pod, state(), NOW)
    assert st2["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}


def test_crash_loop_shows_waiting_with_last_termination() -> None:
    pod = make_pod(["a"])
    rt = state(instances={"a": [inst("a", "exited", attempt=3, exit_code=2), inst("a", "exited", attempt=2)]},
               waiting={"a": ("CrashLoopBackOff", "back-off 40s restarting failed container=a pod=p_ns(u1)")})
    st = compute_pod_status(pod, rt, NOW)
    cs = st["containerStatuses"][0]
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cs["lastState"]["terminated"]["exitCode"] == 2 and cs["lastState"]["terminated"]["reason"] == "Error"
    assert cs["restartCount"] == 3 and not cs["ready"]
    assert st["phase"] == "Running"  # restartPolicy Always: it is being restarted


def test_restarted_container_runs_with_the_previous_exit_as_last_state() -> None:
    pod = make_pod(["a"])
    rt = state(instances={"a": [inst("a", "running", attempt=1), inst("a", "exited", attempt=0, oom=True,
                                                                      exit_code=137)]})
    cs = compute_pod_status(pod, rt, NOW)["containerStatuses"][0]
    assert "running" in cs["state"] and cs["restartCount"] == 1
    assert cs["lastState"]["terminated"]["reason"] == "OOMKilled" and cs["lastState"]["terminated"]["exitCode"] == 137


@pytest.mark.parametrize(("policy", "codes", "phase"), [
    ("Never", [0, 0], "Succeeded"),
    ("Never", [0, 1], "Failed"),
    ("OnFailure", [0, 0], "Succeeded"),
    ("OnFailure", [0, 1], "Running"),
    ("Always", [0, 0], "Running"),
])
def test_phase_once_every_container_terminated(policy: str, codes: list[int], phase: str) -> None:
    statuses = [{"state": {"terminated": {"exitCode": c}}} for c in codes]
    assert pod_phase(policy, statuses) == phase


def test_phase_rules_for_mixed_states() -> None:
    running = {"state": {"running": {}}}
    waiting = {"state": {"waiting": {"reason": "ContainerCreating"}}}
    restarting = {"state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"exitCode": 1}}}
    done = {"state": {"terminated": {"exitCode": 0}}}
    assert pod_phase("Always", [running, waiting]) == "Pending"
    assert pod_phase("Always", [running, restarting]) == "Running"
    assert pod_phase("Never", [running, done]) == "Running"
    assert pod_phase("Always", []) == "Pending"


def test_a_terminal_phase_is_never_left() -> None:
    pod = make_pod(["a"], "Never", status={"phase": "Succeeded"})
    st = compute_pod_status(pod, state(instances={"a": [inst("a", "running")]}), NOW)
    assert st["phase"] == "Succeeded"
    ready = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "PodCompleted"


def test_readiness_and_startup_probes_gate_ready_and_started() -> None:
    pod = make_pod(["a"], a={"readinessProbe": {"exec": {"command": ["true"]}},
                             "startupProbe": {"exec": {"command": ["true"]}}})
    rt = state(instances={"a": [inst("a")]}, ready={"a": True}, started={"a": False})
    cs = compute_pod_status(pod, rt, NOW)["containerStatuses"][0]
    assert cs["started"] is False and cs["ready"] is False
    rt = state(instances={"a": [inst("a")]}, ready={"a": True}, started={"a": True})
    cs = compute_pod_status(pod, rt, NOW)["containerStatuses"][0]
    assert cs["started"] and cs["ready"]


def test_transition_times_are_kept_while_a_condition_holds() -> None:
    pod = make_pod(["a"])
    first = compute_pod_status(pod, state(instances={"a": [inst("a")]}), NOW)
    pod2 = make_pod(["a"], status=first)
    again = compute_pod_status(pod2, state(instances={"a": [inst("a")]}), LATER)
    assert again == first  # nothing changed: identical status, so no write
    flipped = compute_pod_status(pod2, state(instances={"a": [inst("a", "exited", exit_code=1)]},
                                             waiting={"a": ("CrashLoopBackOff", "")}), LATER)
    ready = next(c for c in flipped["conditions"] if c["type"] == "Ready")
    scheduled = next(c for c in flipped["conditions"] if c["type"] == "PodScheduled")
    assert ready["lastTransitionTime"] == LATER and scheduled["lastTransitionTime"] == NOW


def test_conditions_of_others_are_kept_and_readiness_gates_honoured() -> None:
    status = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": NOW},
        {"type": "example.com/gate", "status": "False", "lastTransitionTime": NOW}]}
    pod = make_pod(["a"], status=status, gates=[{"conditionType": "example.com/gate"}])
    st = compute_pod_status(pod, state(instances={"a": [inst("a")]}), LATER)
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["example.com/gate"]["status"] == "False"
    assert conds["ContainersReady"]["status"] == "True"
    assert conds["Ready"]["status"] == "False" and conds["Ready"]["reason"] == "ReadinessGatesNotReady"


def test_terminated_state_reasons() -> None:
    assert terminated_state(inst("a", "exited"))["terminated"]["reason"] == "Completed"
    assert terminated_state(inst("a", "exited", exit_code=3))["terminated"]["reason"] == "Error"
    assert terminated_state(inst("a", "exited", exit_code=137, oom=True))["terminated"]["reason"] == "OOMKilled"
    failed = inst("a", "exited", error="exec: \"nope\": executable file not found", exit_code=127)
    failed.started_at = None
    term = terminated_state(failed)["terminated"]
    assert term["reason"] == "StartError" and "executable file not found" in term["message"]
    msg = terminated_state(inst("a", "exited"), "bye")["terminated"]
    assert msg["message"] == "bye" and msg["finishedAt"] == "2026-11-22T10:00:01Z"


def test_status_patch_sends_changes_and_nulls_for_dropped_fields() -> None:
    old = {"phase": "Pending", "qosClass": "BestEffort", "message": "old"}
    new = {"phase": "Running", "qosClass": "BestEffort"}
    assert status_patch(old, new) == {"phase": "Running", "message": None}
    assert status_patch(new, new) == {}


def make_init_pod(restart_policy: str = "Always") -> Pod:
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns",
                                                                             "uid": "u1"},
                               "spec": {"restartPolicy": restart_policy,
                                        "initContainers": [{"name": "i1", "image": "x"}, {"name": "i2", "image": "x"}],
                                        "containers": [{"name": "a", "image": "x"}]},
                               "status": {"phase": "Pending"}})


def test_init_containers_keep_the_pod_pending_until_all_succeeded() -> None:
    pod = make_init_pod()
    st = compute_pod_status(pod, state(instances={"i1": [inst("i1", "exited")], "i2": [inst("i2")]},
                                       waiting={"a": ("PodInitializing", "")}), NOW)
    assert st["phase"] == "Pending"
    inits = {cs["name"]: cs for cs in st["initContainerStatuses"]}
    assert inits["i1"]["ready"] and inits["i1"]["state"]["terminated"]["reason"] == "Completed"
    assert not inits["i2"]["ready"] and "running" in inits["i2"]["state"]
    initialized = next(c for c in st["conditions"] if c["type"] == "Initialized")
    assert initialized["status"] == "False" and initialized["reason"] == "ContainersNotInitialized"
    assert initialized["message"] == "containers with incomplete status: [i2]"
    assert st["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    done = compute_pod_status(pod, state(instances={"i1": [inst("i1", "exited")], "i2": [inst("i2", "exited")],
                                                    "a": [inst("a")]}), NOW)
    assert done["phase"] == "Running"
    assert next(c for c in done["conditions"] if c["type"] == "Initialized")["status"] == "True"


def test_a_failed_init_container_fails_a_never_restarting_pod() -> None:
    rt = state(instances={"i1": [inst("i1", "exited", exit_code=1)]})
    assert compute_pod_status(make_init_pod("Never"), rt, NOW)["phase"] == "Failed"
    assert compute_pod_status(make_init_pod("OnFailure"), rt, NOW)["phase"] == "Pending"


def test_ephemeral_containers_report_their_own_statuses_and_leave_phase_and_readiness_alone() -> None:
    pod = make_pod(["a"])
    assert pod.spec is not None
    pod.spec.ephemeral_containers = [EphemeralContainer(name="dbg", image="minik8s/busybox:1.35",
                                                        target_container_name="a")]
    st = compute_pod_status(pod, state(instances={"a": [inst("a")], "dbg": [inst("dbg", "exited", exit_code=1)]}),
                            NOW)
    assert st["phase"] == "Running"
    assert {c["type"]: c["status"] for c in st["conditions"]}["Ready"] == "True"
    (eph,) = st["ephemeralContainerStatuses"]
    assert (eph["name"], eph["ready"], eph["started"], eph["restartCount"]) == ("dbg", False, False, 0)
    assert eph["state"]["terminated"]["exitCode"] == 1
    st = compute_pod_status(pod, state(instances={"a": [inst("a")]}), NOW)
    assert st["ephemeralContainerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
