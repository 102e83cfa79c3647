"""The pod's status, computed from what runs (pure: upstream's generateAPIPodStatus and getPhase).

Inputs are the API pod, the pod's containers as the runtime reports them (newest instance first per container name),
what the pod worker decided to say about containers it is not running (waiting reasons such as
ErrImagePull or CrashLoopBackOff) and the probe results; the output is the wire-form PodStatus.
Transition times are kept from the previous status when a condition did not change, so an
unchanged pod computes an identical status and no write is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubelet.container.runtime import ContainerStatus
from machinery.api.core_v1 import Pod
from machinery.timeutil import format_rfc3339

TERMINAL_PHASES = ("Succeeded", "Failed")
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
MAX_MESSAGE = 4096


@dataclass
class PodRuntimeState:
    """Everything besides the API pod that the status is computed from."""

    host_ip: str = ""
    pod_ip: str | None = None
    sandbox_ready: bool = False
    instances: Mapping[str, Sequence[ContainerStatus]] = field(default_factory=dict)  # newest first
    waiting: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # name -> (reason, message)
    ready: Mapping[str, bool] = field(default_factory=dict)  # readiness probe results
    started: Mapping[str, bool] = field(default_factory=dict)  # startup probe results
    messages: Mapping[str, str] = field(default_factory=dict)  # container id -> termination message
    terminating: bool = False


def _time(ts: float | None) -> str | None:
    """A runtime's Unix time as metav1.Time; None stays unset."""
    return None if ts is None else format_rfc3339(ts)


def terminated_state(c: ContainerStatus, message: str = "") -> dict[str, Any]:
    if c.oom_killed:
        reason = "OOMKilled"
    elif c.start_failed:
        reason = "StartError"
    elif c.reason in ("Completed", "Error", "ContainerCannotRun", "DeadlineExceeded"):
        reason = c.reason
    else:
        reason = "Completed" if c.exit_code == 0 else "Error"
    exit_code = 128 if c.start_failed and c.exit_code == 0 else c.exit_code
    state: dict[str, Any] = {"exitCode": exit_code, "reason": reason, "containerID": c.container_id}
    msg = message or c.message
    if msg:
        state["message"] = msg[:MAX_MESSAGE]
    started, finished = _time(c.started_at), _time(c.finished_at)
    state["startedAt"] = started or finished or _time(c.created_at)
    if finished:
        state["finishedAt"] = finished
    return {"terminated": state}


def image_id(c: ContainerStatus) -> str:
    """The runtime's image reference, as upstream shows it: docker://sha256:... for an image id, a digest as is."""
    if not c.image_ref:
        return ""
    return c.image_ref if "@" in c.image_ref or "://" in c.image_ref else f"{c.runtime}://{c.image_ref}"


def container_status(name: str, spec_image: str, instances: Sequence[ContainerStatus], rt: PodRuntimeState,
                     has_readiness: bool, has_startup: bool) -> dict[str, Any]:
    cur = instances[0] if instances else None
    prev = instances[1] if len(instances) > 1 else None
    waiting = rt.waiting.get(name)
    status: dict[str, Any] = {"name": name, "image": spec_image, "imageID": "", "ready": False,
                              "restartCount": cur.attempt if cur else 0, "started": False}
    last: dict[str, Any] = {}
    if cur is None:
        reason, message = waiting or ("ContainerCreating", "")
        state: dict[str, Any] = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    else:
        status["image"] = cur.image or spec_image
        status["imageID"] = image_id(cur)
        status["containerID"] = cur.container_id
        if cur.running:
            started = rt.started.get(name, not has_startup)
            state = {"running": {"startedAt": _time(cur.started_at)}}
            status["started"] = started
            status["ready"] = started and (rt.ready.get(name, False) if has_readiness else True)
            if prev is not None and prev.exited:
                last = terminated_state(prev, rt.messages.get(prev.id, ""))
        elif cur.exited and waiting is None:
            state = terminated_state(cur, rt.messages.get(cur.id, ""))
            if prev is not None and prev.exited:
                last = terminated_state(prev, rt.messages.get(prev.id, ""))
        else:  # created but not started, or exited and about to be restarted
            reason, message = waiting or ("ContainerCreating", "")
            state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
            if cur.exited:
                last = terminated_state(cur, rt.messages.get(cur.id, ""))
            elif prev is not None and prev.exited:
                last = terminated_state(prev, rt.messages.get(prev.id, ""))
    status["state"] = state
    status["lastState"] = last
    return status


def pod_phase(restart_policy: str, statuses: Sequence[Mapping[str, Any]]) -> str:
    """upstream getPhase for pods without init containers."""
    running = waiting = stopped = succeeded = 0
    for cs in statuses:
        state = cs.get("state") or {}
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            if state["terminated"].get("exitCode") == 0:
                succeeded += 1
        elif "waiting" in state:
            if "terminated" in (cs.get("lastState") or {}):
                stopped += 1
            else:
                waiting += 1
    total = len(statuses)
    if waiting > 0:
        return "Pending"
    if running > 0 and running + stopped == total:
        return "Running"
    if total and stopped == total:
        if restart_policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if restart_policy == "Never":
            return "Failed"
        return "Running"  # OnFailure: the failed ones are being restarted
    return "Pending"


def _condition(ctype: str, ok: bool, previous: Mapping[str, Mapping[str, Any]], now: str,
               reason: str | None = None, message: str | None = None) -> dict[str, Any]:
    status = "True" if ok else "False"
    old = previous.get(ctype)
    changed = old is None or old.get("status") != status
    cond: dict[str, Any] = {"type": ctype, "status": status,
                            "lastTransitionTime": now if changed else (old or {}).get("lastTransitionTime", now)}
    if old is not None and old.get("lastProbeTime"):
        cond["lastProbeTime"] = old["lastProbeTime"]
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def compute_pod_status(pod: Pod, rt: PodRuntimeState, now: str) -> dict[str, Any]:
    """The whole wire-form status: what the kubelet sends to pods/{name}/status."""
    old = pod.status.to_dict() if pod.status else {}
    spec = pod.spec
    containers = spec.containers if spec else []
    restart_policy = (spec.restart_policy if spec else None) or "Always"
    statuses = [
        container_status(c.name, c.image or "", rt.instances.get(c.name, ()), rt,
                         c.readiness_probe is not None, c.startup_probe is not None)
        for c in containers
    ]
    inits = (spec.init_containers if spec else None) or []
    init_statuses = []
    for c in inits:
        cs = container_status(c.name, c.image or "", rt.instances.get(c.name, ()), rt, False, False)
        term = cs["state"].get("terminated")
        cs["ready"] = bool(term) and term.get("exitCode") == 0
        cs["started"] = "running" in cs["state"]
        init_statuses.append(cs)
    ephemeral_statuses = []
    for ec in (spec.ephemeral_containers if spec else None) or []:  # never ready, never restarted
        cs = container_status(ec.name, ec.image or "", rt.instances.get(ec.name, ()), rt, False, False)
        cs["ready"] = False
        cs["started"] = "running" in cs["state"]
        ephemeral_statuses.append(cs)
    incomplete = [cs["name"] for cs in init_statuses if not cs["ready"]]
    init_failed = restart_policy == "Never" and any(
        (cs["state"].get("terminated") or {}).get("exitCode", 0) != 0 for cs in init_statuses)
    if init_failed:
        phase = "Failed"
    elif incomplete:
        phase = "Pending"
    else:
        phase = pod_phase(restart_policy, statuses)
    old_phase = old.get("phase")
    if old_phase in TERMINAL_PHASES:
        phase = old_phase  # a pod never leaves a terminal phase
    previous = {c.get("type", ""): c for c in old.get("conditions") or []}
    terminal = phase in TERMINAL_PHASES
    unready = [s["name"] for s in statuses if not s["ready"]]
    ready = not unready and not terminal and not rt.terminating
    if terminal:
        reason: str | None = "PodCompleted"
        message: str | None = None
    elif unready:
        reason, message = "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]"
    else:
        reason = message = None
    gates_ok = True
    gate_message = None
    for gate in (spec.readiness_gates if spec else None) or []:
        cond = previous.get(gate.condition_type)
        if cond is None or cond.get("status") != "True":
            gates_ok = False
            gate_message = f'corresponding condition of pod readiness gate "{gate.condition_type}" does not exist.' \
                if cond is None else f"the status of pod readiness gate \"{gate.condition_type}\" is not \"True\", " \
                f"but {cond.get('status')}"
    conditions = [
        _condition("PodReadyToStartContainers", rt.sandbox_ready and not terminal, previous, now),
        _condition("Initialized", not incomplete, previous, now,
                   "ContainersNotInitialized" if incomplete else "PodCompleted" if terminal else None,
                   f"containers with incomplete status: [{' '.join(incomplete)}]" if incomplete else None),
        _condition("ContainersReady", ready, previous, now, reason, message),
        _condition("Ready", ready and gates_ok, previous, now,
                   "ReadinessGatesNotReady" if ready and not gates_ok else reason,
                   gate_message if ready and not gates_ok else message),
    ]
    others = [c for c in old.get("conditions") or [] if c.get("type") not in KUBELET_CONDITIONS]
    if not any(c.get("type") == "PodScheduled" for c in others):
        others.insert(0, {"type": "PodScheduled", "status": "True", "lastTransitionTime": now})
    status: dict[str, Any] = {k: v for k, v in old.items() if k not in ("message", "reason")}
    status.update({"phase": phase, "conditions": others + conditions, "containerStatuses": statuses})
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    if ephemeral_statuses:
        status["ephemeralContainerStatuses"] = ephemeral_statuses
    if rt.host_ip:
        status["hostIP"] = rt.host_ip
        status["hostIPs"] = [{"ip": rt.host_ip}]
    if rt.pod_ip:
        status["podIP"] = rt.pod_ip
        status["podIPs"] = [{"ip": rt.pod_ip}]
    status.setdefault("startTime", now)
    return status
