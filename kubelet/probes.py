"""Liveness, readiness and startup probes (upstream pkg/kubelet/prober).

One worker task per (pod, container, probe kind) runs the probe every periodSeconds once
initialDelaySeconds have passed since the container started, and turns single results into a
verdict with the thresholds (`ProbeState`, pure). Readiness starts as failed, liveness as passed,
startup as not yet passed; until startup has passed the other two wait. A readiness verdict feeds
the container's `ready`; a liveness or startup failure asks the pod worker to restart the container.
Each failed attempt is an `Unhealthy` event, as upstream records them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from machinery import tracing
from machinery.api.core_v1 import Container, Pod, Probe
from machinery.cri.errors import CriError

log = logging.getLogger(__name__)

LIVENESS, READINESS, STARTUP = "Liveness", "Readiness", "Startup"

# runs a command in a container to its end through the runtime (CRI ExecSync): (exit code, or None when
# it timed out; its output)
ExecRunner = Callable[[str, list[str], float], Awaitable[tuple[int | None, bytes]]]


@dataclass
class ProbeTarget:
    container_id: str
    started_at: float
    pod_ip: str


@dataclass
class ProbeState:
    """Counting successes and failures against the thresholds (pure; one per worker)."""

    kind: str
    success_threshold: int = 1
    failure_threshold: int = 3
    result: bool | None = None
    successes: int = 0
    failures: int = 0

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """A new container: readiness and startup start unproven, liveness is trusted until it fails."""
        self.result = self.kind == LIVENESS
        self.successes = self.failures = 0

    def observe(self, ok: bool) -> bool:
        """Record one probe result; True if the verdict changed."""
        before = self.result
        if ok:
            self.failures = 0
            self.successes += 1
            threshold = self.success_threshold if self.kind == READINESS else 1
            if self.successes >= max(threshold, 1):
                self.result = True
        else:
            self.successes = 0
            self.failures += 1
            if self.failures >= max(self.failure_threshold, 1):
                self.result = False
        return before != self.result


def resolve_port(port: int | str, container: Container) -> int:
    if isinstance(port, int):
        return port
    if port.isdigit():
        return int(port)
    for p in container.ports or []:
        if p.name == port:
            return p.container_port
    raise ValueError(f"port {port!r} is not a named port of container {container.name!r}")


async def run_probe(probe: Probe, container: Container, target: ProbeTarget, run: ExecRunner,
                    http: httpx.AsyncClient) -> tuple[bool, str]:
    """Run one probe attempt: (success, what went wrong)."""
    timeout = float(probe.timeout_seconds or 1)
    try:
        if probe.exec is not None:
            code, output = await run(target.container_id, list(probe.exec.command or []), timeout)
            if code is None:
                return False, f"command {probe.exec.command!r} timed out"
            if code != 0:
                text = output.decode(errors="replace").strip()
                return False, f"command {probe.exec.command!r} exited with {code}: {text}" if text else \
                    f"command {probe.exec.command!r} exited with {code}"
            return True, ""
        if probe.http_get is not None:
            action = probe.http_get
            host = action.host or target.pod_ip
            port = resolve_port(action.port, container)
            scheme = (action.scheme or "HTTP").lower()
            path = action.path or "/"
            if not path.startswith("/"):
                path = "/" + path
            url = f"{scheme}://{host}:{port}{path}"
            headers = {"User-Agent": "kube-probe/1.30"}
            for h in action.http_headers or []:
                headers[h.name] = h.value
            try:
                response = await http.get(url, headers=headers, timeout=timeout)
            except httpx.TimeoutException:
                return False, f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
            except httpx.HTTPError as e:
                return False, f'Get "{url}": {e}'
            if 200 <= response.status_code < 400:
                return True, ""
            return False, f"HTTP probe failed with statuscode: {response.status_code}"
        if probe.tcp_socket is not None:
            host = probe.tcp_socket.host or target.pod_ip
            port = resolve_port(probe.tcp_socket.port, container)
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
            except TimeoutError:
                return False, f"dial tcp {host}:{port}: i/o timeout"
            except OSError as e:
                return False, f"dial tcp {host}:{port}: connect: {e.strerror or e}"
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            return True, ""
        if probe.grpc is not None:
            return False, "gRPC probes are not supported by minik8s"
        return False, "probe has no handler"
    except CriError as e:
        return False, e.message
    except (ValueError, OSError) as e:
        return False, str(e)


TargetLookup = Callable[[str, str], ProbeTarget | None]
KillRequest = Callable[[str, str, str, str], None]
EventSink = Callable[[Pod, str, str, str], None]


class ProbeWorker:
    def __init__(self, manager: ProbeManager, pod: Pod, container: Container, kind: str, probe: Probe) -> None:
        self.manager = manager
        self.pod = pod
        self.container = container
        self.kind = kind
        self.probe = probe
        self.state = ProbeState(kind, probe.success_threshold or 1, probe.failure_threshold or 3)
        self.container_id = ""
        self.on_hold = False  # a liveness/startup failure asked for a restart: wait for the new container
        self.task: asyncio.Task[None] | None = None

    @property
    def uid(self) -> str:
        return self.pod.metadata.uid or ""

    async def run(self) -> None:
        period = float(self.probe.period_seconds or 10)
        while True:
            try:
                delay = await self._tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s probe of %s/%s", self.kind, self.pod.metadata.name, self.container.name)
                delay = period
            await asyncio.sleep(delay)

    async def _tick(self) -> float:
        period = float(self.probe.period_seconds or 10)
        target = self.manager.lookup(self.uid, self.container.name)
        if target is None:
            return min(period, 1.0)
        if target.container_id != self.container_id:
            self.container_id = target.container_id
            self.on_hold = False
            self.state.reset()
            self.manager.changed(self.uid)
        if self.on_hold:
            return min(period, 1.0)
        if self.kind != STARTUP and self.container.startup_probe is not None \
                and not self.manager.started(self.uid, self.container.name):
            return min(period, 1.0)
        if self.kind == STARTUP and self.state.result:
            return period
        since = time.time() - target.started_at
        initial = float(self.probe.initial_delay_seconds or 0)
        if since < initial:
            return initial - since
        with tracing.span("kubelet.probe", attributes={
                **tracing.object_attributes(self.pod, "v1", "Pod"), "k8s.probe.type": self.kind.lower(),
                "k8s.container.name": self.container.name} if tracing.active() else None) as span:
            ok, output = await run_probe(self.probe, self.container, target, self.manager.run, self.manager.http)
            tracing.set_attributes(span, {"k8s.probe.result": "success" if ok else "failure"})
        if self.manager.lookup(self.uid, self.container.name) is None:
            return min(period, 1.0)  # the container went away while we probed
        if not ok:
            self.manager.event(self.pod, "Warning", "Unhealthy", f"{self.kind} probe failed: {output}")
        if self.state.observe(ok):
            self.manager.changed(self.uid)
            if self.state.result is False and self.kind in (LIVENESS, STARTUP):
                self.on_hold = True
                self.manager.kill(self.uid, self.container.name, self.container_id,
                                  f"Container {self.container.name} failed {self.kind.lower()} probe, "
                                  "will be restarted")
        return period


class ProbeManager:
    """The probe workers of every pod on the node, and their verdicts."""

    def __init__(self, run: ExecRunner, lookup: TargetLookup, on_change: Callable[[str], None],
                 on_kill: KillRequest, on_event: EventSink) -> None:
        self.run = run
        self.lookup = lookup
        self._on_change = on_change
        self._on_kill = on_kill
        self._on_event = on_event
        self.http = httpx.AsyncClient(verify=False, follow_redirects=False, trust_env=False,
                                      limits=httpx.Limits(max_keepalive_connections=0))
        self._workers: dict[tuple[str, str, str], ProbeWorker] = {}

    async def close(self) -> None:
        for uid in {k[0] for k in self._workers}:
            self.remove_pod(uid)
        await self.http.aclose()

    def add_pod(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        for container in pod.spec.containers if pod.spec else []:
            for kind, probe in ((LIVENESS, container.liveness_probe), (READINESS, container.readiness_probe),
                                (STARTUP, container.startup_probe)):
                key = (uid, container.name, kind)
                if probe is None or key in self._workers:
                    continue
                worker = ProbeWorker(self, pod, container, kind, probe)
                worker.task = asyncio.create_task(worker.run(),
                                                  name=f"probe-{kind}-{pod.metadata.name}-{container.name}")
                self._workers[key] = worker

    def remove_pod(self, uid: str) -> None:
        for key in [k for k in self._workers if k[0] == uid]:
            worker = self._workers.pop(key)
            if worker.task is not None:
                worker.task.cancel()

    def _result(self, uid: str, name: str, kind: str) -> bool | None:
        worker = self._workers.get((uid, name, kind))
        if worker is None:
            return None
        target = self.lookup(uid, name)
        if target is None or target.container_id != worker.container_id:
            return None  # not probed yet for the container running now
        return worker.state.result

    def ready(self, uid: str, name: str) -> bool:
        return bool(self._result(uid, name, READINESS))

    def started(self, uid: str, name: str) -> bool:
        return bool(self._result(uid, name, STARTUP))

    def changed(self, uid: str) -> None:
        self._on_change(uid)

    def kill(self, uid: str, name: str, container_id: str, reason: str) -> None:
        self._on_kill(uid, name, container_id, reason)

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        self._on_event(pod, type_, reason, message)

