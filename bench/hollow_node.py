"""A hollow node for the benchmarks, as kubemark's hollow-node: the real kubelet whose container runtime
starts no containers but reports them started.

    python -m bench.hollow_node --node-name NAME --master URL [any other kubelet flag]

Everything above the runtime is the kubelet's own code, unchanged (`kubelet.kubelet.Kubelet`): node
registration, the Lease heartbeat and node status, the pod informer, the pod workers with their sync
loop, the PLEG (`RuntimeCache`) following an event stream, the status manager and the events it records.
Two pieces below it are swapped for in-memory ones:

- `HollowDocker` answers the Docker Engine API calls the kubelet makes (`kubelet.docker_client.DockerClient`,
  its runtime interface): containers are created, started ("running" at once), stopped and removed as
  records with Docker's inspect shape, and each change is sent on the event stream, as dockerd does.
  Every image is present; there is nothing to exec into and no log output.
- `HollowNetwork` gives each sandbox the next free address of the node's podCIDR instead of running the
  CNI plugins; it installs no host rules.

So a hollow pod costs the control plane and the kubelet what a real one costs, and nothing on the host:
a thousand fit on a 2-core machine. This lives in bench/ on purpose: the kubelet package has no fake
runtime, and no test uses this one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ipaddress
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from kubelet.__main__ import main as kubelet_main
from kubelet.docker_client import Conflict, DockerClient, DockerError, HijackedStream, NotFound
from kubelet.kubelet import Kubelet, KubeletConfig
from kubelet.network import PodNetwork
from kubelet.runtime import ContainerInfo, DockerRuntime, RuntimeCache
from machinery.api.core_v1 import Pod

log = logging.getLogger(__name__)

JSONDict = dict[str, Any]
_ZERO_TIME = "0001-01-01T00:00:00Z"


def docker_now() -> str:
    """The current time as Docker writes it (RFC 3339, nanoseconds, UTC)."""
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond:06d}000Z"


def matches(labels: Mapping[str, str], filters: Mapping[str, list[str]]) -> bool:
    """Docker's `label` filter: every `key` or `key=value` given must hold."""
    for item in filters.get("label", []):
        key, sep, value = item.partition("=")
        if key not in labels or (sep and labels[key] != value):
            return False
    return True


class HollowDocker(DockerClient):
    """The Engine API calls of the kubelet, answered from memory. No process is ever started."""

    def __init__(self) -> None:  # no socket, no HTTP client
        self.containers: dict[str, JSONDict] = {}
        self.names: dict[str, str] = {}
        self._subscribers: list[asyncio.Queue[JSONDict]] = []

    async def close(self) -> None:
        pass

    async def version(self) -> JSONDict:
        return {"Version": "hollow", "ApiVersion": "1.41"}

    async def info(self) -> JSONDict:
        return {"Containers": len(self.containers), "ServerVersion": "hollow"}

    # -- events

    def _emit(self, container: JSONDict, action: str) -> None:
        event = {"Type": "container", "Action": action, "status": action, "id": container["Id"],
                 "Actor": {"ID": container["Id"], "Attributes": dict(container["Config"]["Labels"])}}
        for queue in self._subscribers:
            queue.put_nowait(event)

    async def events(self, filters: Mapping[str, list[str]]) -> AsyncIterator[JSONDict]:
        queue: asyncio.Queue[JSONDict] = asyncio.Queue()
        self._subscribers.append(queue)
        try:
            while True:
                event = await queue.get()
                if matches(event["Actor"]["Attributes"], filters):
                    yield event
        finally:
            self._subscribers.remove(queue)

    # -- containers

    def _get(self, ref: str) -> JSONDict:
        cid = self.names.get(ref.lstrip("/"), ref)
        if cid not in self.containers:
            matching = [c for c in self.containers if c.startswith(ref)] if len(ref) >= 12 else []
            if len(matching) != 1:
                raise NotFound(404, f"No such container: {ref}")
            cid = matching[0]
        return self.containers[cid]

    async def list_containers(self, filters: Mapping[str, list[str]], all: bool = True) -> list[JSONDict]:
        return [{"Id": c["Id"], "Names": [c["Name"]], "Image": c["Config"]["Image"], "State": c["State"]["Status"],
                 "Labels": dict(c["Config"]["Labels"])}
                for c in self.containers.values()
                if matches(c["Config"]["Labels"], filters) and (all or c["State"]["Status"] == "running")]

    async def inspect_container(self, container_id: str) -> JSONDict:
        c = self._get(container_id)
        return {**c, "State": dict(c["State"]), "Config": {**c["Config"], "Labels": dict(c["Config"]["Labels"])}}

    async def create_container(self, name: str, config: Mapping[str, Any]) -> str:
        if name in self.names:
            raise Conflict(409, f'Conflict. The container name "/{name}" is already in use by container '
                                f'"{self.names[name]}"')
        cid = uuid.uuid4().hex + uuid.uuid4().hex
        image = str(config.get("Image") or "")
        self.containers[cid] = {
            "Id": cid, "Name": f"/{name}", "Created": docker_now(), "Image": image_id(image),
            "Config": {"Image": image, "Labels": dict(config.get("Labels") or {}), "Tty": bool(config.get("Tty"))},
            "HostConfig": dict(config.get("HostConfig") or {}), "Mounts": [],
            "State": {"Status": "created", "Running": False, "Pid": 0, "ExitCode": 0, "Error": "",
                      "OOMKilled": False, "StartedAt": _ZERO_TIME, "FinishedAt": _ZERO_TIME},
        }
        self.names[name] = cid
        self._emit(self.containers[cid], "create")
        return cid

    async def start_container(self, container_id: str) -> None:
        c = self._get(container_id)
        if c["State"]["Status"] != "running":
            c["State"].update(Status="running", Running=True, ExitCode=0, Error="", StartedAt=docker_now(),
                              FinishedAt=_ZERO_TIME)
            self._emit(c, "start")

    def _exit(self, c: JSONDict, code: int) -> None:
        if c["State"]["Status"] == "running":
            c["State"].update(Status="exited", Running=False, ExitCode=code, FinishedAt=docker_now())
            self._emit(c, "die")

    async def stop_container(self, container_id: str, timeout: int) -> None:
        self._exit(self._get(container_id), 0)  # the app ends on SIGTERM without waiting for the grace period

    async def kill_container(self, container_id: str, signal: str = "KILL") -> None:
        self._exit(self._get(container_id), 137)

    async def remove_container(self, container_id: str, force: bool = True) -> None:
        c = self._get(container_id)
        if c["State"]["Status"] == "running" and not force:
            raise Conflict(409, f"You cannot remove a running container {c['Id']}")
        self._exit(c, 137)
        del self.containers[c["Id"]]
        self.names.pop(c["Name"].lstrip("/"), None)
        self._emit(c, "destroy")

    async def logs(self, container_id: str, *, follow: bool = False, tail: int | None = None,
                   timestamps: bool = False, since: float | None = None,
                   tty: bool = False) -> AsyncIterator[tuple[int, bytes]]:
        self._get(container_id)
        return
        yield  # an async generator with nothing to say: hollow containers write no output

    # -- images: every image is present

    async def inspect_image(self, image: str) -> JSONDict | None:
        return {"Id": image_id(image), "RepoTags": [image]}

    async def pull_image(self, image: str) -> None:
        pass

    # -- exec: nothing runs inside a hollow container

    async def exec_create(self, container_id: str, cmd: list[str], *, stdin: bool = False, stdout: bool = True,
                          stderr: bool = True, tty: bool = False, env: list[str] | None = None) -> str:
        self._get(container_id)
        raise DockerError(501, "hollow node: its containers run no processes to exec into")

    async def exec_start(self, exec_id: str, tty: bool = False) -> HijackedStream:
        raise DockerError(501, "hollow node: no exec")

    async def exec_run(self, container_id: str, cmd: list[str], timeout: float,
                       limit: int = 10240) -> tuple[int | None, bytes]:
        self._get(container_id)
        return 0, b""  # an exec probe of a hollow container succeeds, as the app it stands for would


def image_id(image: str) -> str:
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


class HollowNetwork(PodNetwork):
    """Addresses from the node's podCIDR, handed out in memory: no CNI plugin, bridge or host rule."""

    def __init__(self, node_name: str) -> None:  # no CNI runtime, no state on disk
        self.node_name = node_name
        self.cidr: ipaddress.IPv4Network | None = None
        self.ips: dict[str, str] = {}  # sandbox id -> address

    @property
    def ready(self) -> bool:
        return self.cidr is not None

    @property
    def pod_cidr(self) -> str | None:
        return str(self.cidr) if self.cidr else None

    def configure(self, pod_cidr: str) -> bool:
        cidr = ipaddress.IPv4Network(pod_cidr, strict=False)
        if cidr == self.cidr:
            return False
        self.cidr = cidr
        return True

    def network_name(self) -> str:
        return f"hollow-{self.node_name}"

    def attached(self, sandbox_id: str) -> bool:
        return sandbox_id in self.ips

    def pod_ip(self, sandbox_id: str) -> str | None:
        return self.ips.get(sandbox_id)

    async def ensure_rules(self, force: bool = False) -> None:
        pass

    async def setup(self, sandbox: ContainerInfo, pod: Pod) -> str:
        if self.cidr is None:
            raise DockerError(500, "network plugin is not ready: the node has no podCIDR yet")
        used = set(self.ips.values())
        hosts = self.cidr.hosts()
        next(hosts)  # .1 is the bridge's, as with host-local
        for address in hosts:
            if str(address) not in used:
                self.ips[sandbox.id] = str(address)
                return str(address)
        raise DockerError(500, f"no address left in {self.cidr}")

    async def teardown(self, sandbox_id: str, pid: int = 0) -> None:
        self.ips.pop(sandbox_id, None)

    async def gc(self, live_sandbox_ids: set[str]) -> None:
        for sandbox_id in set(self.ips) - live_sandbox_ids:
            del self.ips[sandbox_id]


class HollowKubelet(Kubelet):
    """`Kubelet` with the hollow runtime and network wired in where the Docker and CNI ones would be."""

    def __init__(self, config: KubeletConfig) -> None:
        super().__init__(config)
        self._unused_docker = self.docker  # made by Kubelet.__init__, never connected; closed at start
        self.docker = HollowDocker()
        self.cache = RuntimeCache(self.docker, config.node_name, config.relist_period)
        self.runtime = DockerRuntime(self.docker, self.cache, config.node_name, config.pause_image)
        self.network = HollowNetwork(config.node_name)
        self.probes.docker = self.docker

    async def start(self) -> None:
        await self._unused_docker.close()
        await super().start()

    async def _remove_host_rules_if_last(self) -> None:
        pass  # a hollow node never installed the host's forwarding rules: leave the real nodes' alone


def main(argv: list[str] | None = None) -> None:
    kubelet_main(argv, HollowKubelet)  # the kubelet's own flags and signal handling


if __name__ == "__main__":
    main()
