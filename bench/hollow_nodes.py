"""Many hollow nodes in one process, as kubemark's hollow-node and KWOK: the density benchmark's kubelets.

    python -m bench.hollow_nodes --master URL --nodes N [--node-name-prefix hollow-] [--first-node-ip IP]

Each node is what a kubelet shows the control plane, with no container behind it:

- registration and heartbeats are the real kubelet's `kubelet.node_status.NodeStatusManager`, one per node:
  the Node created with labels, capacity and allocatable (`--node-cpu`, `--node-memory`, 110 pods),
  addresses, nodeInfo and conditions; its Lease in kube-node-lease renewed every 10 s (a 40 s lease), its
  status recomputed every 10 s and written when it changed or 5 minutes passed, as upstream's kubelet does.
  Ready is False (KubeletNotReady) until node IPAM gives the node a podCIDR, as on a real node.
- pods bound to its nodes go through the real kubelet's status code: `kubelet.status.compute_pod_status`
  computes the status from a runtime state (as generateAPIPodStatus does) and `kubelet.status_manager.
  StatusManager` writes it (merge patch of pods/status carrying the uid, only when it changed, own writes
  recognised on the watch). A pod first gets the Pending status a kubelet writes before its sandbox is
  up (ContainerCreating, hostIP), then Running: every container running and ready (the fake container
  ids say `hollow://`), the next free address of the node's podCIDR, the Ready conditions.
- a terminating pod (deletionTimestamp set) is confirmed gone with the kubelet's final delete: grace 0,
  precondition on its uid. Its address goes back to the node.

What it leaves out, as KWOK does: the kubelet's server (no logs/exec), events (Pulled/Created/Started),
probes, volumes, the PLEG and the CRI. The real kubelet on the fake CRI runtime is `bench/hollow_node.py`
(one node per process: an informer, pod workers, PLEG relisting and a gRPC server per node); this one
serves hundreds of nodes from one process with one pod watch (`spec.nodeName!=""`, filtered by node: one
field selector cannot name many nodes) and one Node watch.

It lives under bench/ rather than as a component package: it is a benchmark tool built from the kubelet's
own modules (node_status, status, status_manager), as upstream's kubemark links pkg/kubelet, and a
component may not import another (.importlinter).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import random
import signal
import time
import uuid
from typing import Any

from kubelet.container.runtime import ContainerState, ContainerStatus
from kubelet.node_status import NodeFacts, NodeStatusManager
from kubelet.status import PodRuntimeState, compute_pod_status
from kubelet.status_manager import StatusManager
from machinery.api.core_v1 import Node, Pod
from machinery.client import KUBE_VERSION, ApiClient, ApiError, ApiUnavailable
from machinery.informer import Informer, strip_managed_fields
from machinery.kubeconfig import build_config_from_flags
from machinery.quantity import parse_quantity
from machinery.timeutil import now_rfc3339
from machinery.workqueue import RateLimitingQueue

log = logging.getLogger("hollow_nodes")

HOLLOW_LABEL = "minik8s.io/hollow-node"  # on every hollow Node: which process serves it


class HollowNodeFacts(NodeFacts):
    """`NodeFacts` whose nodeInfo is the hollow node's own (fixed ids per node, no file read per report)."""

    def status(self, ready: bool, reason: str, message: str, heartbeat: str,
               previous: dict[str, dict[str, Any]]) -> dict[str, Any]:
        out = super().status(ready, reason, message, heartbeat, previous)
        node_id = str(uuid.uuid5(uuid.NAMESPACE_DNS, self.node_name))
        out["nodeInfo"].update({"machineID": node_id.replace("-", ""), "systemUUID": node_id, "bootID": node_id,
                                "kernelVersion": "hollow", "osImage": "hollow node (bench.hollow_nodes)"})
        return out


class HollowNode:
    """One node: its status manager (registration, Lease, Node status) and its pods' addresses."""

    def __init__(self, client: ApiClient, name: str, ip: str, cpu_millis: int, memory_bytes: int,
                 labels: dict[str, str], *, lease_duration: int, update_frequency: float,
                 report_frequency: float) -> None:
        self.name = name
        self.ip = ip
        facts = HollowNodeFacts(name, ip, 10250, runtime_version="hollow://1.0", labels=labels,
                                cpu_millis=cpu_millis, memory_bytes=memory_bytes)
        self.status = NodeStatusManager(client, facts, lease_duration=lease_duration,
                                        update_frequency=update_frequency, report_frequency=report_frequency)
        self.pod_cidr: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
        self._free: list[str] = []  # addresses given back, reused first
        self._next = 2  # .1 is the node's bridge on a real node
        self.ips: dict[str, str] = {}  # pod uid -> address
        self.waiting: set[str] = set()  # keys of pods that wait for the podCIDR

    def set_pod_cidr(self, cidr: str) -> None:
        if self.pod_cidr is None:
            self.pod_cidr = ipaddress.ip_network(cidr, strict=False)
            self.status.facts.pod_cidr = cidr
            self.status.set_network_ready(True)

    def address(self, uid: str) -> str | None:
        """The pod's address from the node's podCIDR (None while the node has none, or it is full)."""
        if uid in self.ips:
            return self.ips[uid]
        if self.pod_cidr is None:
            return None
        if self._free:
            ip = self._free.pop()
        elif self._next < self.pod_cidr.num_addresses - 1:
            ip = str(self.pod_cidr.network_address + self._next)
            self._next += 1
        else:
            return None
        self.ips[uid] = ip
        return ip

    def release(self, uid: str) -> None:
        ip = self.ips.pop(uid, None)
        if ip is not None:
            self._free.append(ip)


def running_state(pod: Pod, host_ip: str, pod_ip: str) -> PodRuntimeState:
    """What a runtime reports for a started pod: the sandbox up with its address, each container running."""
    uid = pod.metadata.uid or ""
    now = time.time()
    instances = {}
    for c in (pod.spec.containers if pod.spec else None) or []:
        instances[c.name] = [ContainerStatus(
            id=f"{uid[:8]}-{c.name}", name=c.name, state=ContainerState.RUNNING, runtime="hollow",
            created_at=now, started_at=now, image=c.image or "", image_ref=f"{c.image}@sha256:{'0' * 64}")]
    return PodRuntimeState(host_ip=host_ip, pod_ip=pod_ip, sandbox_ready=True, instances=instances)


class HollowKubelet:
    """The process: its nodes, one Node watch and one pod watch, and the workers writing pod status."""

    def __init__(self, client: ApiClient, nodes: list[HollowNode], *, workers: int = 16,
                 register_concurrency: int = 20) -> None:
        self.client = client
        self.nodes = {n.name: n for n in nodes}
        self.workers = workers
        self.register_concurrency = register_concurrency
        self.status_manager = StatusManager(client, resync=self._resync)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(name="hollow_pods")
        self.node_informer: Informer[Node] = Informer(client, Node, transform=strip_managed_fields)
        self.pod_informer: Informer[Pod] = Informer(client, Pod, field_selector="spec.nodeName!=",
                                                    transform=strip_managed_fields)
        self.pending_written: set[str] = set()  # pod uids whose Pending status is written
        self.started: set[str] = set()  # pod uids whose Running status is written
        self.deleted: set[str] = set()  # pod uids whose final delete was sent
        self._uid_key: dict[str, str] = {}
        self._tasks: list[asyncio.Task[Any]] = []

    # -- watches ---------------------------------------------------------------------------------

    def _node_changed(self, node: Node) -> None:
        mine = self.nodes.get(node.metadata.name or "")
        if mine is not None and mine.pod_cidr is None and node.spec is not None and node.spec.pod_cidr:
            mine.set_pod_cidr(node.spec.pod_cidr)
            for key in mine.waiting:
                self.queue.add(key)  # pods that waited for an address
            mine.waiting.clear()

    def _ours(self, pod: Pod) -> bool:
        return bool(pod.spec and pod.spec.node_name in self.nodes)

    def _pod_added(self, pod: Pod) -> None:
        if self._ours(pod):
            self._uid_key[pod.metadata.uid or ""] = _key(pod)
            self.queue.add(_key(pod))

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        if not self._ours(new):
            return
        if self.status_manager.is_own_status_write(old, new) and new.metadata.deletion_timestamp is None:
            return
        self._uid_key[new.metadata.uid or ""] = _key(new)
        self.queue.add(_key(new))

    def _pod_deleted(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        node = self.nodes.get((pod.spec.node_name if pod.spec else None) or "")
        if node is not None:
            node.release(uid)
        self.status_manager.forget(uid)
        for s in (self.pending_written, self.started, self.deleted):
            s.discard(uid)
        self._uid_key.pop(uid, None)

    def _resync(self, uid: str) -> None:
        key = self._uid_key.get(uid)
        if key is not None:
            self.queue.add(key)

    # -- pods ------------------------------------------------------------------------------------

    async def sync_pod(self, pod: Pod) -> None:
        """One pass of what the kubelet does for the pod: start it (statuses), or confirm its deletion."""
        uid = pod.metadata.uid or ""
        node = self.nodes[(pod.spec.node_name if pod.spec else None) or ""]
        meta = pod.metadata
        if meta.deletion_timestamp is not None:
            if uid in self.deleted:
                return
            self.deleted.add(uid)
            with contextlib.suppress(ApiError):  # gone already, or recreated under the name (uid differs)
                await self.client.delete(Pod, meta.name or "", meta.namespace, grace_period_seconds=0,
                                         preconditions={"uid": uid})
            node.release(uid)
            return
        phase = pod.status.phase if pod.status else None
        if phase in ("Succeeded", "Failed"):
            return
        now = now_rfc3339()
        if uid not in self.pending_written and uid not in self.started:
            pending = compute_pod_status(pod, PodRuntimeState(host_ip=node.ip), now)
            await self.status_manager.set_status(pod, pending)
            self.pending_written.add(uid)
            pod = self.status_manager.latest(pod)
        ip = node.address(uid)
        if ip is None:
            node.waiting.add(_key(pod))  # no podCIDR yet (or full): the Node update requeues it
            return
        status = compute_pod_status(pod, running_state(pod, node.ip, ip), now)
        if uid in self.started:
            # keep what was reported running: the same containers, the same start times
            last = self.status_manager.last_status(uid) or {}
            status["containerStatuses"] = last.get("containerStatuses", status["containerStatuses"])
            status["startTime"] = last.get("startTime", status.get("startTime"))
        await self.status_manager.set_status(pod, status)
        self.started.add(uid)

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                namespace, name = key.split("/", 1)
                pod = self.pod_informer.get(name, namespace)
                if pod is not None and self._ours(pod):
                    await self.sync_pod(self.status_manager.latest(pod))
                self.queue.forget(key)
            except (ApiError, ApiUnavailable) as e:
                log.warning("syncing pod %s: %s", key, e)
                self.queue.add_rate_limited(key)
            except Exception:
                log.exception("syncing pod %s", key)
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

    # -- life cycle ------------------------------------------------------------------------------

    async def _register_and_beat(self, node: HollowNode, gate: asyncio.Semaphore, first_beat: float) -> None:
        async with gate:
            await node.status.register()
        # spread the nodes' heartbeats over their period, as their kubelets would not start in step
        await asyncio.sleep(random.uniform(0, first_beat))
        await node.status.run()

    async def run(self) -> None:
        gate = asyncio.Semaphore(self.register_concurrency)
        self.node_informer.add_event_handler(on_add=self._node_changed,
                                             on_update=lambda _old, new: self._node_changed(new))
        self.pod_informer.add_event_handler(on_add=self._pod_added, on_update=self._pod_updated,
                                            on_delete=self._pod_deleted)
        self._tasks = [asyncio.create_task(self._register_and_beat(n, gate, n.status.lease_duration / 4))
                       for n in self.nodes.values()]
        self._tasks.append(self.node_informer.start())
        self._tasks.append(self.pod_informer.start())
        self._tasks += [asyncio.create_task(self._worker()) for _ in range(self.workers)]
        log.info("serving %d hollow nodes", len(self.nodes))
        await asyncio.gather(*self._tasks)

    async def stop(self) -> None:
        self.node_informer.stop()
        self.pod_informer.stop()
        self.queue.shutdown()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _key(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


def node_names(prefix: str, count: int, first: int = 0) -> list[str]:
    width = max(3, len(str(first + count - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(first, first + count)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="hollow_nodes", description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--master", default=None, help="apiserver URL (overrides the kubeconfig's server)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig with the apiserver's address and credentials")
    p.add_argument("--nodes", type=int, default=10, help="how many nodes this process serves (default %(default)s)")
    p.add_argument("--node-name-prefix", default="hollow-node-", help="node names: PREFIX000, PREFIX001, ...")
    p.add_argument("--first-node-index", type=int, default=0, help="the first node's number (default 0)")
    p.add_argument("--first-node-ip", default="100.65.0.1",
                   help="the first node's InternalIP; the next nodes count up from it (default %(default)s)")
    p.add_argument("--node-cpu", default="4", help="each node's cpu capacity (default %(default)s)")
    p.add_argument("--node-memory", default="16Gi", help="each node's memory capacity (default %(default)s)")
    p.add_argument("--node-labels", default="", help="extra labels on every node, k=v,k2=v2")
    p.add_argument("--node-lease-duration-seconds", type=int, default=40, help="(default %(default)s)")
    p.add_argument("--node-status-update-frequency", type=float, default=10.0, help="(default %(default)s)")
    p.add_argument("--node-status-report-frequency", type=float, default=300.0,
                   help="(default %(default)s, the kubelet's and upstream's 5m)")
    p.add_argument("--workers", type=int, default=0,
                   help="pods synced at once (default: one per node, at most 100: a kubelet writes its pods' "
                        "statuses one after the other, so N kubelets write N at once)")
    p.add_argument("-v", type=int, default=0, help="log level: 0 warnings, 1 info, 4 debug")
    args = p.parse_args(argv)
    if not args.master and not args.kubeconfig:
        p.error("--master or --kubeconfig is required")
    if args.nodes < 1:
        p.error("--nodes must be at least 1")
    return args


def build(args: argparse.Namespace) -> HollowKubelet:
    agent = f"hollow-kubelet/{KUBE_VERSION} (linux/amd64) minik8s/{args.node_name_prefix}*"
    config = build_config_from_flags(args.master, args.kubeconfig, user_agent=agent)
    client = ApiClient(config, user_agent=agent, max_connections=128)
    labels = {HOLLOW_LABEL: args.node_name_prefix.rstrip("-") or "hollow"}
    for item in filter(None, (s.strip() for s in args.node_labels.split(","))):
        k, _, v = item.partition("=")
        labels[k] = v
    cpu_millis = parse_quantity(args.node_cpu).milli_value()
    memory = int(parse_quantity(args.node_memory).value)
    first_ip = ipaddress.ip_address(args.first_node_ip)
    nodes = [HollowNode(client, name, str(first_ip + i), cpu_millis, memory, labels,
                        lease_duration=args.node_lease_duration_seconds,
                        update_frequency=args.node_status_update_frequency,
                        report_frequency=args.node_status_report_frequency)
             for i, name in enumerate(node_names(args.node_name_prefix, args.nodes, args.first_node_index))]
    return HollowKubelet(client, nodes, workers=args.workers or min(args.nodes, 100))


async def _main(args: argparse.Namespace) -> None:
    hollow = build(args)
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: main_task.cancel() if main_task else None)
    try:
        await hollow.run()
    except asyncio.CancelledError:
        pass
    finally:
        await hollow.stop()
        await hollow.client.close()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    level = logging.DEBUG if args.v >= 4 else logging.INFO if args.v >= 1 else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
