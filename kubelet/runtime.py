"""The Docker runtime of the kubelet (dockershim's role): pod sandboxes and app containers as
labelled Docker containers, and a cache of their state kept fresh by Docker's event stream.

Every container the kubelet makes carries labels saying whose it is — `io.minik8s.managed=true`,
`io.minik8s.node`, `io.kubernetes.pod.uid/name/namespace`, `io.kubernetes.container.name`
(`POD` for the sandbox) — plus its restart count and spec hash. Those labels, not names or
memory, are the truth: a restarted kubelet finds its pods' containers by them (adoption).

`RuntimeCache` is the kubelet's PLEG: it lists this node's containers once, then follows Docker's
events (create/start/die/oom/destroy) and re-inspects what changed, telling listeners which pod
changed; a periodic relist catches anything an event stream might have dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubelet.docker_client import Conflict, DockerClient, DockerError, NotFound
from machinery.timeutil import format_rfc3339

log = logging.getLogger(__name__)

LABEL_MANAGED = "io.minik8s.managed"
LABEL_NODE = "io.minik8s.node"
LABEL_POD_UID = "io.kubernetes.pod.uid"
LABEL_POD_NAME = "io.kubernetes.pod.name"
LABEL_POD_NAMESPACE = "io.kubernetes.pod.namespace"
LABEL_CONTAINER_NAME = "io.kubernetes.container.name"
LABEL_CONTAINER_TYPE = "io.kubernetes.docker.type"  # podsandbox | container
LABEL_RESTART_COUNT = "io.kubernetes.container.restartCount"
LABEL_HASH = "io.kubernetes.container.hash"
LABEL_IMAGE = "io.minik8s.container.image"  # the image as the pod spec names it
LABEL_TERMINATION_MESSAGE = "io.kubernetes.container.terminationMessagePath"
LABEL_SANDBOX_ID = "io.kubernetes.sandbox.id"
LABEL_HOST_NETWORK = "io.minik8s.hostNetwork"
SANDBOX_NAME = "POD"

_ZERO_TIME = "0001-01-01T00:00:00Z"


def parse_docker_time(value: str | None) -> float | None:
    """Docker's RFC 3339 nano timestamps as epoch seconds; None for the zero time."""
    if not value or value.startswith("0001-01-01"):
        return None
    text = value.rstrip("Z")
    if "." in text:
        head, frac = text.split(".", 1)
        frac = frac[:6]
        text = f"{head}.{frac}"
    try:
        parsed = dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)
    except ValueError:
        return None
    return parsed.timestamp()


def rfc3339(ts: float | None) -> str | None:
    if ts is None:
        return None
    return format_rfc3339(ts)


@dataclass
class ContainerInfo:
    """What the kubelet knows about one Docker container of a pod (from `docker inspect`)."""

    id: str
    name: str  # the pod spec's container name, POD for the sandbox
    pod_uid: str
    pod_name: str
    pod_namespace: str
    is_sandbox: bool
    attempt: int
    state: str  # created | running | paused | restarting | removing | exited | dead
    exit_code: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    created_at: float | None = None
    oom_killed: bool = False
    error: str = ""
    pid: int = 0
    image: str = ""
    image_ref: str = ""  # sha256:... of the image it runs
    spec_hash: str = ""
    sandbox_id: str = ""
    tty: bool = False
    host_network: bool = False
    termination_message_host_path: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.state in ("running", "restarting", "paused")

    @property
    def exited(self) -> bool:
        """Finished, or failed to start (Docker leaves those "created" with an error)."""
        return self.state in ("exited", "dead") or (self.state == "created" and bool(self.error))

    @property
    def container_id(self) -> str:
        return f"docker://{self.id}"

    @classmethod
    def from_inspect(cls, data: dict[str, Any]) -> ContainerInfo:
        labels = (data.get("Config") or {}).get("Labels") or {}
        state = data.get("State") or {}
        mounts = data.get("Mounts") or []
        term_path = labels.get(LABEL_TERMINATION_MESSAGE, "")
        host_path = ""
        if term_path:
            for m in mounts:
                if m.get("Destination") == term_path:
                    host_path = m.get("Source", "")
        try:
            attempt = int(labels.get(LABEL_RESTART_COUNT, "0"))
        except ValueError:
            attempt = 0
        return cls(
            id=data["Id"],
            name=labels.get(LABEL_CONTAINER_NAME, ""),
            pod_uid=labels.get(LABEL_POD_UID, ""),
            pod_name=labels.get(LABEL_POD_NAME, ""),
            pod_namespace=labels.get(LABEL_POD_NAMESPACE, ""),
            is_sandbox=labels.get(LABEL_CONTAINER_TYPE) == "podsandbox",
            attempt=attempt,
            state=str(state.get("Status") or "unknown"),
            exit_code=int(state.get("ExitCode") or 0),
            started_at=parse_docker_time(state.get("StartedAt")),
            finished_at=parse_docker_time(state.get("FinishedAt")),
            created_at=parse_docker_time(data.get("Created")),
            oom_killed=bool(state.get("OOMKilled")),
            error=str(state.get("Error") or ""),
            pid=int(state.get("Pid") or 0),
            image=labels.get(LABEL_IMAGE, (data.get("Config") or {}).get("Image", "")),
            image_ref=str(data.get("Image") or ""),
            spec_hash=labels.get(LABEL_HASH, ""),
            sandbox_id=labels.get(LABEL_SANDBOX_ID, ""),
            tty=bool((data.get("Config") or {}).get("Tty")),
            host_network=labels.get(LABEL_HOST_NETWORK) == "true",
            termination_message_host_path=host_path,
            labels=dict(labels),
        )


def pod_labels(node_name: str, pod_uid: str, pod_name: str, namespace: str) -> dict[str, str]:
    return {LABEL_MANAGED: "true", LABEL_NODE: node_name, LABEL_POD_UID: pod_uid, LABEL_POD_NAME: pod_name,
            LABEL_POD_NAMESPACE: namespace}


def docker_name(container: str, pod_name: str, namespace: str, uid: str, attempt: int) -> str:
    """dockershim's naming: k8s_<container>_<pod>_<namespace>_<uid>_<attempt>."""
    return f"k8s_{container}_{pod_name}_{namespace}_{uid}_{attempt}"


Listener = Callable[[str], None]


class RuntimeCache:
    """This node's containers by id, kept current by Docker events plus a periodic relist."""

    def __init__(self, docker: DockerClient, node_name: str, relist_period: float = 10.0) -> None:
        self.docker = docker
        self.node_name = node_name
        self.relist_period = relist_period
        self.containers: dict[str, ContainerInfo] = {}
        self._listeners: list[Listener] = []
        self._synced = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._inspect_locks: dict[str, asyncio.Lock] = {}
        self._refreshes: set[asyncio.Task[ContainerInfo | None]] = set()

    def add_listener(self, listener: Listener) -> None:
        """`listener(pod_uid)` is called whenever a container of that pod changed."""
        self._listeners.append(listener)

    @property
    def filters(self) -> dict[str, list[str]]:
        return {"label": [f"{LABEL_MANAGED}=true", f"{LABEL_NODE}={self.node_name}"]}

    async def start(self) -> None:
        await self.relist()
        self._tasks.append(asyncio.create_task(self._events_loop(), name="pleg-events"))
        self._tasks.append(asyncio.create_task(self._relist_loop(), name="pleg-relist"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    # -- queries --------------------------------------------------------------------------------

    def for_pod(self, pod_uid: str) -> list[ContainerInfo]:
        return [c for c in self.containers.values() if c.pod_uid == pod_uid]

    def sandboxes(self, pod_uid: str) -> list[ContainerInfo]:
        """The pod's sandboxes, newest first."""
        out = [c for c in self.for_pod(pod_uid) if c.is_sandbox]
        return sorted(out, key=lambda c: (c.attempt, c.created_at or 0), reverse=True)

    def instances(self, pod_uid: str, name: str) -> list[ContainerInfo]:
        """The instances of one app container, newest first."""
        out = [c for c in self.for_pod(pod_uid) if not c.is_sandbox and c.name == name]
        return sorted(out, key=lambda c: (c.attempt, c.created_at or 0), reverse=True)

    def pod_uids(self) -> set[str]:
        return {c.pod_uid for c in self.containers.values() if c.pod_uid}

    # -- keeping it fresh ---------------------------------------------------------------------

    async def refresh(self, container_id: str) -> ContainerInfo | None:
        """Re-inspect one container (after our own action or an event); None if it is gone."""
        lock = self._inspect_locks.setdefault(container_id, asyncio.Lock())
        async with lock:
            try:
                info = ContainerInfo.from_inspect(await self.docker.inspect_container(container_id))
            except NotFound:
                old = self.containers.pop(container_id, None)
                self._inspect_locks.pop(container_id, None)
                if old is not None:
                    self._notify(old.pod_uid)
                return None
            if info.labels.get(LABEL_NODE) != self.node_name:
                return None
            old = self.containers.get(container_id)
            self.containers[container_id] = info
            if old is None or old.state != info.state or old.finished_at != info.finished_at:
                self._notify(info.pod_uid)
            return info

    async def _safe_refresh(self, container_id: str) -> ContainerInfo | None:
        try:
            return await self.refresh(container_id)
        except Exception as e:  # the next relist retries
            log.warning("inspecting container %s: %s", container_id[:12], e)
            return None

    def forget(self, container_id: str) -> None:
        old = self.containers.pop(container_id, None)
        self._inspect_locks.pop(container_id, None)
        if old is not None:
            self._notify(old.pod_uid)

    async def relist(self) -> None:
        listed = await self.docker.list_containers(self.filters)
        seen = set()
        stale = []
        for item in listed:
            cid = item["Id"]
            seen.add(cid)
            cached = self.containers.get(cid)
            if cached is None or cached.state != item.get("State"):
                stale.append(cid)
        await asyncio.gather(*(self._safe_refresh(cid) for cid in stale))
        for cid in [c for c in self.containers if c not in seen]:
            self.forget(cid)
        self._synced.set()

    async def _relist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.relist_period)
            try:
                await self.relist()
            except (DockerError, OSError) as e:
                log.warning("relisting containers: %s", e)
            except Exception:
                log.exception("relisting containers")

    async def _events_loop(self) -> None:
        delay = 0.5
        while True:
            try:
                filters = {**self.filters, "type": ["container"]}
                async for event in self.docker.events(filters):
                    delay = 0.5
                    action = str(event.get("Action") or event.get("status") or "")
                    cid = (event.get("Actor") or {}).get("ID") or event.get("id")
                    if not cid or action.startswith(("exec_", "attach", "resize", "top", "export")):
                        continue
                    if action == "destroy":
                        self.forget(cid)
                    else:
                        task = asyncio.create_task(self._safe_refresh(cid))
                        self._refreshes.add(task)
                        task.add_done_callback(self._refreshes.discard)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("docker event stream broke (%s); relisting", e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10)
                with contextlib.suppress(Exception):
                    await self.relist()

    def _notify(self, pod_uid: str) -> None:
        if not pod_uid:
            return
        for listener in self._listeners:
            try:
                listener(pod_uid)
            except Exception:
                log.exception("runtime listener failed")


class DockerRuntime:
    """Pod-level operations on Docker; every change is mirrored into the cache at once."""

    def __init__(self, docker: DockerClient, cache: RuntimeCache, node_name: str, pause_image: str) -> None:
        self.docker = docker
        self.cache = cache
        self.node_name = node_name
        self.pause_image = pause_image

    async def create_sandbox(self, *, pod_uid: str, pod_name: str, namespace: str, attempt: int,
                             hostname: str, extra_hosts: list[str] | None = None,
                             dns: list[str] | None = None, host_network: bool = False, host_pid: bool = False,
                             host_ipc: bool = False) -> ContainerInfo:
        """Create and start the pause container, with no network (CNI gives it one) or the host's."""
        labels = {**pod_labels(self.node_name, pod_uid, pod_name, namespace), LABEL_CONTAINER_NAME: SANDBOX_NAME,
                  LABEL_CONTAINER_TYPE: "podsandbox", LABEL_RESTART_COUNT: str(attempt)}
        if host_network:
            labels[LABEL_HOST_NETWORK] = "true"
        host_config: dict[str, Any] = {"NetworkMode": "host" if host_network else "none",
                                       "IpcMode": "host" if host_ipc else "shareable",
                                       "RestartPolicy": {"Name": "no"}, "CpuShares": 2}
        if host_pid:
            host_config["PidMode"] = "host"
        if extra_hosts:
            host_config["ExtraHosts"] = extra_hosts
        if dns:
            host_config["Dns"] = dns
        config: dict[str, Any] = {"Image": self.pause_image, "Labels": labels, "HostConfig": host_config}
        if not host_network:  # a host-network pod has the node's hostname
            config["Hostname"] = hostname[:63]
        name = docker_name(SANDBOX_NAME, pod_name, namespace, pod_uid, attempt)
        cid = await self._create(name, config)
        try:
            await self.docker.start_container(cid)
        except DockerError:
            with contextlib.suppress(DockerError):
                await self.docker.remove_container(cid)
            self.cache.forget(cid)
            raise
        info = await self.cache.refresh(cid)
        if info is None:
            raise DockerError(404, f"sandbox {cid[:12]} vanished right after it started")
        return info

    async def create_container(self, name: str, config: dict[str, Any]) -> str:
        return await self._create(name, config)

    async def _create(self, name: str, config: dict[str, Any]) -> str:
        try:
            cid = await self.docker.create_container(name, config)
        except Conflict:
            # a leftover of ours with the same name (e.g. a crash between create and start): replace it
            log.info("container name %s in use; removing the old one", name)
            with contextlib.suppress(NotFound):
                await self.docker.remove_container(name)
            cid = await self.docker.create_container(name, config)
        await self.cache.refresh(cid)
        return cid

    async def start(self, container_id: str) -> None:
        try:
            await self.docker.start_container(container_id)
        finally:
            await self.cache.refresh(container_id)

    async def stop(self, container_id: str, grace: int) -> None:
        with contextlib.suppress(NotFound):
            await self.docker.stop_container(container_id, grace)
        await self.cache.refresh(container_id)

    async def remove(self, container_id: str) -> None:
        with contextlib.suppress(NotFound):
            await self.docker.remove_container(container_id, force=True)
        self.cache.forget(container_id)

    async def image_ref(self, image: str) -> dict[str, Any] | None:
        return await self.docker.inspect_image(image)
