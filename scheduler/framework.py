"""The scheduling framework (kube-scheduler's pkg/scheduler/framework), cut to what minik8s runs.

A scheduling cycle for one pod: every node of the snapshot goes through the *filter* plugins in
order (the first failure decides that node's Status); the nodes left are *scored* by every score
plugin, each plugin's scores are normalized over those nodes to 0..100 (NormalizeScore), multiplied
by the plugin's weight and summed; the highest total wins, ties broken at random. If no node is left,
`FitError` explains why in upstream's words ("0/3 nodes are available: 1 Insufficient cpu, ...").

The objects plugins see:

- `PodInfo`: the pod plus what every plugin would otherwise recompute per node (resource
  requests under upstream's init-container max rule, host ports, tolerations, controlling owner).
  Upstream keeps the same in its PodInfo and in PreFilter's CycleState.
- `NodeInfo`: one node and the pods bound (or assumed) to it, with running sums of what they
  request, the host ports they hold and how many pods of each owner it runs. The scheduler's cache
  keeps one per node, updated incrementally from informer events.
- `Snapshot`: the nodes to consider in one cycle. A cycle never awaits between taking the snapshot
  and assuming its pod, so on one event loop the cache cannot change under it: the snapshot shares
  the cache's NodeInfos instead of copying them (upstream copies because its cache is concurrent).

Plugins are small pure functions on these objects (see scheduler/plugins); `FilterPlugin` and
`ScorePlugin` give them a name, and score plugins a weight and a NormalizeScore step.
"""

from __future__ import annotations

import enum
import functools
import operator
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from machinery.api.core_v1 import Node, Pod, Taint, Toleration
from machinery.quantity import parse_quantity

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0

# Requests assumed for scoring when a container states none (upstream's schedutil.DefaultMilliCPURequest
# and DefaultMemoryRequest), so that best-effort pods still spread by count.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

# Upstream's numFeasibleNodesToFind: below this many nodes every node is filtered and scored.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5

LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"


# -- status -----------------------------------------------------------------------------------


class Code(enum.IntEnum):
    """framework.Code: what a plugin's verdict means for the pod."""

    SUCCESS = 0
    ERROR = 1  # something broke; the pod is retried with backoff
    UNSCHEDULABLE = 2  # does not fit now; preemption could help
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3  # does not fit, and removing pods would not change that
    SKIP = 4


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's verdict: a code and the reasons, worded as upstream words them."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    @classmethod
    def unschedulable(cls, *reasons: str, unresolvable: bool = False) -> Status:
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        return cls(code, tuple(reasons))

    def message(self) -> str:
        return ", ".join(self.reasons)


SUCCESS = Status()


# -- resources --------------------------------------------------------------------------------


# Pods of one workload repeat the same few quantity strings: parse each once.
@functools.lru_cache(maxsize=4096)
def _value(quantity: Any) -> int:
    """Quantity.Value(): whole units, rounded up; a malformed quantity counts as 0."""
    try:
        return parse_quantity(quantity).int_value()
    except (ValueError, TypeError):
        return 0


@functools.lru_cache(maxsize=4096)
def _milli_value(quantity: Any) -> int:
    """Quantity.MilliValue(): thousandths, rounded up; a malformed quantity counts as 0."""
    try:
        return parse_quantity(quantity).milli_value()
    except (ValueError, TypeError):
        return 0


def is_scalar_resource_name(name: str) -> bool:
    """Extended resources (`example.com/foo`, not in kubernetes.io) and hugepages: counted by name."""
    if name.startswith("hugepages-") or name.startswith("attachable-volumes-"):
        return True
    return "/" in name and not name.startswith(("kubernetes.io/", "requests."))


@dataclass(slots=True)
class Resource:
    """framework.Resource: cpu in millicores, memory and ephemeral storage in bytes, pod count,
    and scalar (extended) resources by name."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pod_number: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_list(cls, resources: Mapping[str, Any] | None) -> Resource:
        r = cls()
        for name, quantity in (resources or {}).items():
            r.add_one(name, quantity)
        return r

    def add_one(self, name: str, quantity: Any) -> None:
        if name == "cpu":
            self.milli_cpu += _milli_value(quantity)
        elif name == "memory":
            self.memory += _value(quantity)
        elif name == "ephemeral-storage":
            self.ephemeral_storage += _value(quantity)
        elif name == "pods":
            self.allowed_pod_number += _value(quantity)
        elif is_scalar_resource_name(name):
            self.scalar[name] = self.scalar.get(name, 0) + _value(quantity)

    def add(self, other: Resource, sign: int = 1) -> None:
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral_storage += sign * other.ephemeral_storage
        self.allowed_pod_number += sign * other.allowed_pod_number
        for name, value in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + sign * value

    def set_max(self, other: Resource) -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        self.ephemeral_storage = max(self.ephemeral_storage, other.ephemeral_storage)
        self.allowed_pod_number = max(self.allowed_pod_number, other.allowed_pod_number)
        for name, value in other.scalar.items():
            self.scalar[name] = max(self.scalar.get(name, 0), value)

    def copy(self) -> Resource:
        return Resource(self.milli_cpu, self.memory, self.ephemeral_storage, self.allowed_pod_number,
                        dict(self.scalar))

    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or any(self.scalar.values()))


def _container_requests(container: Any, non_missing: bool) -> Resource:
    requests = container.resources.requests if container.resources is not None else None
    r = Resource.from_list(requests)
    if non_missing:
        # Upstream's NonMissingContainerRequests: only a request that is absent gets the default.
        if not requests or "cpu" not in requests:
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST
        if not requests or "memory" not in requests:
            r.memory = DEFAULT_MEMORY_REQUEST
    return r


def pod_requests(pod: Pod, *, non_missing: bool = False) -> Resource:
    """resource.PodRequests: what the pod needs on a node.

    Regular containers add up; restartable init containers (sidecars, restartPolicy Always) run
    alongside them and add too; each ordinary init container runs alone (with the sidecars started
    before it), so the pod needs the larger of the sum and the biggest such init step; pod overhead
    comes on top. With `non_missing`, containers without a cpu/memory request count upstream's
    defaults (100m, 200Mi): the "non-zero" requests scoring uses.
    """
    spec = pod.spec
    total = Resource()
    if spec is None:
        return total
    for container in spec.containers:
        total.add(_container_requests(container, non_missing))
    init_max = Resource()
    sidecars = Resource()
    for container in spec.init_containers or ():
        requests = _container_requests(container, non_missing)
        if container.restart_policy == "Always":
            total.add(requests)
            sidecars.add(requests)
            step = sidecars.copy()
        else:
            step = requests
            step.add(sidecars)
        init_max.set_max(step)
    total.set_max(init_max)
    if spec.overhead:
        total.add(Resource.from_list(spec.overhead))
    return total


ResourceKey = tuple[int, int, int, int, tuple[tuple[str, int], ...]]
_SHARED_RESOURCES: dict[ResourceKey, Resource] = {}
_SHARED_RESOURCES_MAX = 4096


def shared_resource(r: Resource) -> Resource:
    """The one Resource equal to `r` among the pods' requests (issue 19: two Resources and their scalar dicts,
    272 bytes a pod, when the pods of a template all request the same). A PodInfo's requests are read, never
    changed: NodeInfo adds them into its own. Distinct requests are few; past the bound the table starts again."""
    key = (r.milli_cpu, r.memory, r.ephemeral_storage, r.allowed_pod_number,
           tuple(sorted(r.scalar.items())) if r.scalar else ())
    shared = _SHARED_RESOURCES.get(key)
    if shared is None:
        if len(_SHARED_RESOURCES) >= _SHARED_RESOURCES_MAX:
            _SHARED_RESOURCES.clear()
        shared = _SHARED_RESOURCES[key] = r
    return shared


# -- host ports -------------------------------------------------------------------------------

DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"

HostPort = tuple[str, str, int]  # (host IP, protocol, port)


def host_ports(pod: Pod) -> list[HostPort]:
    """The (ip, protocol, port) triples a pod's containers claim on their node (hostPort > 0)."""
    out: list[HostPort] = []
    if pod.spec is None:
        return out
    for container in pod.spec.containers:
        for port in container.ports or ():
            if port.host_port and port.host_port > 0:
                out.append((port.host_ip or DEFAULT_BIND_ALL_HOST_IP, port.protocol or "TCP", port.host_port))
    return out


class HostPortInfo:
    """framework.HostPortInfo: host ports in use on a node, by IP; 0.0.0.0 clashes with every IP."""

    __slots__ = ("_by_ip",)

    def __init__(self) -> None:
        self._by_ip: dict[str, Counter[tuple[str, int]]] = {}

    def add(self, ip: str, protocol: str, port: int) -> None:
        if port > 0:
            self._by_ip.setdefault(ip or DEFAULT_BIND_ALL_HOST_IP, Counter())[(protocol or "TCP", port)] += 1

    def remove(self, ip: str, protocol: str, port: int) -> None:
        ip = ip or DEFAULT_BIND_ALL_HOST_IP
        ports = self._by_ip.get(ip)
        if ports is None:
            return
        key = (protocol or "TCP", port)
        ports[key] -= 1
        if ports[key] <= 0:
            del ports[key]
        if not ports:
            del self._by_ip[ip]

    def conflicts(self, ip: str, protocol: str, port: int) -> bool:
        if port <= 0:
            return False
        ip = ip or DEFAULT_BIND_ALL_HOST_IP
        key = (protocol or "TCP", port)
        if ip == DEFAULT_BIND_ALL_HOST_IP:
            return any(key in ports for ports in self._by_ip.values())
        return any(key in self._by_ip.get(candidate, ()) for candidate in (DEFAULT_BIND_ALL_HOST_IP, ip))

    def __len__(self) -> int:
        return sum(sum(ports.values()) for ports in self._by_ip.values())


# -- taints and tolerations -------------------------------------------------------------------


# -- pods and nodes as plugins see them ------------------------------------------------------


def controller_uid(pod: Pod) -> str | None:
    for ref in pod.metadata.owner_references or ():
        if ref.controller:
            return ref.uid
    return None


def pod_key(pod: Pod) -> str:
    """How the cache and queue know a pod: its uid (a recreated pod is another pod), else ns/name."""
    return pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"


class PodInfo:
    """A pod with what plugins need from it computed once (upstream's framework.PodInfo)."""

    __slots__ = ("_state", "host_ports", "key", "name", "namespace", "non_zero_requests", "owner_uid", "pod",
                 "priority", "requests", "tolerations")

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        self.key = pod_key(pod)
        self.namespace = pod.metadata.namespace or ""
        self.name = pod.metadata.name or ""
        spec = pod.spec
        self.priority = (spec.priority if spec is not None else None) or 0
        self.requests = shared_resource(pod_requests(pod))
        self.non_zero_requests = shared_resource(pod_requests(pod, non_missing=True))
        # One PodInfo per pod in the cache (issue 19): no empty lists and dict of its own, requests shared with
        # every pod that requests the same; the tolerations are the informer's cached list (read-only).
        self.host_ports: Sequence[HostPort] = host_ports(pod) or ()
        self.tolerations: Sequence[Toleration] = (spec.tolerations or ()) if spec is not None else ()
        self.owner_uid = controller_uid(pod)
        self._state: dict[str, Any] | None = None

    @property
    def state(self) -> dict[str, Any]:
        """What plugins derive from the pod once and reuse on every node (upstream's CycleState)."""
        if self._state is None:
            self._state = {}
        return self._state

    @property
    def node_name(self) -> str | None:
        return self.pod.spec.node_name if self.pod.spec is not None else None

    @property
    def terminating(self) -> bool:
        return self.pod.metadata.deletion_timestamp is not None

    def __repr__(self) -> str:
        return f"PodInfo({self.namespace}/{self.name})"


def node_ready_status(node: Node) -> str | None:
    """The status of the node's Ready condition ("True", "False", "Unknown"), None without one."""
    for condition in (node.status.conditions if node.status is not None else None) or ():
        if condition.type == "Ready":
            return condition.status
    return None


class NodeInfo:
    """One node, the pods on it (bound or assumed) and the running totals plugins read."""

    __slots__ = ("allocatable", "free_memory", "free_milli_cpu", "free_pods", "generation", "labels", "name", "node",
                 "non_zero_requested", "owner_counts", "pods", "ready", "requested", "score_memo", "taints",
                 "unschedulable", "used_ports", "zone")

    def __init__(self, name: str, node: Node | None = None) -> None:
        self.name = name
        self.node: Node | None = None
        self.pods: dict[str, PodInfo] = {}
        self.requested = Resource()
        self.non_zero_requested = Resource()
        self.used_ports = HostPortInfo()
        self.owner_counts: Counter[tuple[str, str]] = Counter()  # (namespace, controller uid) -> pods
        self.allocatable = Resource()
        self.labels: dict[str, str] = {}
        self.taints: list[Taint] = []
        self.unschedulable = False
        self.ready: str | None = None
        self.zone = ""  # region and zone labels as one key (utilnode.GetZoneKey), "" without either
        # allocatable minus requested (cpu, memory) and pods the node still takes: NodeResourcesFit's common
        # case reads these on hundreds of nodes a cycle (kept by set_node and _account)
        self.free_milli_cpu = self.free_memory = self.free_pods = 0
        # plugin name -> (generation, the pod's requests, score): see memoized_scores
        self.score_memo: dict[str, tuple[int, Resource, int]] = {}
        self.generation = 0
        if node is not None:
            self.set_node(node)

    @classmethod
    def build(cls, node: Node, pods: Iterable[Pod | PodInfo] = ()) -> NodeInfo:
        """A NodeInfo for `node` holding `pods` (tests and one-off callers)."""
        info = cls(node.metadata.name or "", node)
        for pod in pods:
            info.add_pod(pod if isinstance(pod, PodInfo) else PodInfo(pod))
        return info

    def set_node(self, node: Node) -> None:
        self.node = node
        status = node.status
        self.allocatable = Resource.from_list(status.allocatable if status is not None else None)
        self.labels = dict(node.metadata.labels or {})
        spec = node.spec
        self.taints = list(spec.taints or ()) if spec is not None else []
        self.unschedulable = bool(spec.unschedulable) if spec is not None else False
        self.ready = node_ready_status(node)
        region = self.labels.get(LABEL_REGION, "")
        zone = self.labels.get(LABEL_ZONE, "")
        self.zone = f"{region}:\x00:{zone}" if region or zone else ""  # utilnode.GetZoneKey
        self._update_free()
        self.generation += 1

    def _update_free(self) -> None:
        self.free_milli_cpu = self.allocatable.milli_cpu - self.requested.milli_cpu
        self.free_memory = self.allocatable.memory - self.requested.memory
        self.free_pods = self.allocatable.allowed_pod_number - len(self.pods)

    def add_pod(self, pod: PodInfo) -> None:
        if pod.key in self.pods:
            self.remove_pod(self.pods[pod.key])
        self.pods[pod.key] = pod
        self._account(pod, 1)

    def remove_pod(self, pod: PodInfo) -> bool:
        current = self.pods.pop(pod.key, None)
        if current is None:
            return False
        self._account(current, -1)
        return True

    def _account(self, pod: PodInfo, sign: int) -> None:
        self.requested.add(pod.requests, sign)
        self.non_zero_requested.milli_cpu += sign * pod.non_zero_requests.milli_cpu
        self.non_zero_requested.memory += sign * pod.non_zero_requests.memory
        for ip, protocol, port in pod.host_ports:
            if sign > 0:
                self.used_ports.add(ip, protocol, port)
            else:
                self.used_ports.remove(ip, protocol, port)
        if pod.owner_uid and not pod.terminating:
            owner = (pod.namespace, pod.owner_uid)
            self.owner_counts[owner] += sign
            if self.owner_counts[owner] <= 0:
                del self.owner_counts[owner]
        self._update_free()
        self.generation += 1

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"


@dataclass
class Snapshot:
    """The nodes one scheduling cycle considers (those with a Node object), in a stable order."""

    nodes: list[NodeInfo]

    def get(self, name: str) -> NodeInfo | None:
        for node in self.nodes:
            if node.name == name:
                return node
        return None

    def __len__(self) -> int:
        return len(self.nodes)


# -- plugins ----------------------------------------------------------------------------------


class FilterPlugin(Protocol):
    """Filter(pod, node) -> Status: can the pod run on this node at all?"""

    @property
    def name(self) -> str: ...  # read-only: a frozen dataclass (Filter) is a FilterPlugin

    def filter(self, pod: PodInfo, node: NodeInfo) -> Status: ...


class ScorePlugin(Protocol):
    """Score(pod, node) -> 0..100 per feasible node, then NormalizeScore over all of them, times weight."""

    @property
    def name(self) -> str: ...

    @property
    def weight(self) -> int: ...

    def score(self, pod: PodInfo, node: NodeInfo) -> int: ...

    def normalize_score(self, pod: PodInfo, nodes: Sequence[NodeInfo], scores: list[int]) -> None: ...


FilterFunc = Callable[[PodInfo, NodeInfo], Status]
# the failures among nodes, as (index into nodes, Status), in the nodes' order
FilterNodesFunc = Callable[[PodInfo, Sequence[NodeInfo]], list[tuple[int, Status]]]
SkipFunc = Callable[[PodInfo], bool]
ScoreFunc = Callable[[PodInfo, NodeInfo], int]
ScoreNodesFunc = Callable[[PodInfo, Sequence[NodeInfo]], list[int]]
NormalizeFunc = Callable[[PodInfo, Sequence[NodeInfo], list[int]], None]


@dataclass(frozen=True)
class Filter:
    """A filter function with its plugin name (what failure statuses are attributed to).

    `skip(pod)`, if given, is upstream's PreFilter answering Skip: True when the plugin has nothing to
    check for this pod (no nodeSelector, no host ports ...), so the cycle does not call it per node.

    `filter_nodes(pod, nodes)`, if given, is the same filter over many nodes at once: the (index,
    Status) of exactly the nodes `fn` turns down, in order, only without a Python call per node that
    passes (a cycle filters hundreds of nodes; most pass every filter)."""

    name: str
    fn: FilterFunc
    skip: SkipFunc | None = None
    filter_nodes: FilterNodesFunc | None = None

    def filter(self, pod: PodInfo, node: NodeInfo) -> Status:
        return self.fn(pod, node)

    def filter_all(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[tuple[int, Status]]:
        if self.filter_nodes is not None:
            return self.filter_nodes(pod, nodes)
        return failures_of(self.fn, pod, nodes)


def failures_of(fn: FilterFunc, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[tuple[int, Status]]:
    """A per-node filter over many nodes: the (index, Status) of the nodes it turns down."""
    out = []
    for i, node in enumerate(nodes):
        status = fn(pod, node)
        if status is not SUCCESS and not status.is_success:
            out.append((i, status))
    return out


@dataclass(frozen=True)
class Score:
    """A score function with its plugin name, weight and (optional) NormalizeScore.

    `score_nodes(pod, nodes)`, if given, is the same score for all the nodes at once: exactly
    `[fn(pod, node) for node in nodes]`, only without a Python call per node (a scheduling cycle
    scores every feasible node with every plugin)."""

    name: str
    fn: ScoreFunc
    weight: int = 1
    normalize: NormalizeFunc | None = None
    score_nodes: ScoreNodesFunc | None = None

    def score(self, pod: PodInfo, node: NodeInfo) -> int:
        return self.fn(pod, node)

    def score_all(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        if self.score_nodes is not None:
            return self.score_nodes(pod, nodes)
        fn = self.fn
        return [fn(pod, node) for node in nodes]

    def normalize_score(self, pod: PodInfo, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        if self.normalize is not None:
            self.normalize(pod, nodes, scores)


def memoized_scores(name: str, requests: Resource, nodes: Sequence[NodeInfo],
                    score: Callable[[NodeInfo], int]) -> list[int]:
    """`[score(node) for node in nodes]` for a score that depends only on the node (its pods and allocatable,
    which bump its generation) and on the pod's requests: each node remembers its last such score per plugin.
    Pods of one template share one requests object (shared_resource) and a cycle changes one node, so a burst
    scores the hundreds of nodes it did not change from memory."""
    out = []
    for node in nodes:
        memo = node.score_memo.get(name)
        if memo is not None and memo[0] == node.generation and memo[1] is requests:
            out.append(memo[2])
        else:
            value = score(node)
            node.score_memo[name] = (node.generation, requests, value)
            out.append(value)
    return out


def default_normalize_score(scores: list[int], reverse: bool = False, max_priority: int = MAX_NODE_SCORE) -> None:
    """helper.DefaultNormalizeScore: scale so the best is max_priority; `reverse` flips (fewer is better)."""
    max_count = max(scores, default=0)
    if max_count == 0:
        if reverse:
            scores[:] = [max_priority] * len(scores)
        return
    for i, score in enumerate(scores):
        scaled = max_priority * score // max_count
        scores[i] = max_priority - scaled if reverse else scaled


# -- failure messages -------------------------------------------------------------------------

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"
NO_NODES_MSG = "no nodes available to schedule pods"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"


@dataclass(eq=False)
class FitError(Exception):
    """No node fits: the Status of every node that was tried, and the message upstream prints."""

    pod: PodInfo
    num_all_nodes: int
    node_to_status: dict[str, Status]
    post_filter_msg: str = ""

    def __str__(self) -> str:
        return self.message()

    def reasons_histogram(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for status in self.node_to_status.values():
            counts.update(status.reasons)
        return counts

    def message(self) -> str:
        """FitError.Error(): "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) ...." with the
        reasons sorted as strings, then the PostFilter (preemption) verdict."""
        if self.num_all_nodes == 0:
            return NO_NODES_MSG
        msg = NO_NODE_AVAILABLE_MSG.format(self.num_all_nodes) + ":"
        reasons = sorted(f"{count} {reason}" for reason, count in self.reasons_histogram().items())
        if reasons:
            msg += f" {', '.join(reasons)}."
        if self.post_filter_msg:
            msg += f" {self.post_filter_msg}"
        return msg


def preemption_message(pod: PodInfo, num_nodes: int) -> str:
    """What a framework without a PostFilter says; the scheduler replaces it with DefaultPreemption's
    verdict (scheduler/plugins/default_preemption.py), which evicts lower-priority pods where that helps."""
    if pod.pod.spec is not None and pod.pod.spec.preemption_policy == "Never":
        return "preemption: not eligible due to preemptionPolicy=Never."
    return f"preemption: 0/{num_nodes} nodes are available: {num_nodes} {PREEMPTION_NOT_HELPFUL}."


# -- one scheduling decision --------------------------------------------------------------------


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes are enough (upstream's adaptive percentageOfNodesToScore)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage <= 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass
class ScheduleResult:
    node: str
    evaluated_nodes: int
    feasible_nodes: int
    next_start_index: int
    # what the cycle found, for its trace span: the nodes filtered out (their Status), the feasible ones
    # and their total scores (empty when there was one feasible node: nothing was scored)
    statuses: dict[str, Status] = field(default_factory=dict)
    feasible: Sequence[NodeInfo] = ()
    totals: Sequence[int] = ()


class Framework:
    """The filter and score plugins of one scheduler profile, and the cycle that runs them."""

    def __init__(self, filters: Sequence[FilterPlugin], scores: Sequence[ScorePlugin],
                 percentage_of_nodes_to_score: int = 0) -> None:
        self.filters = list(filters)
        self.scores = list(scores)
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        # (name, function, skip, nodes function) per filter: the cycle calls the functions themselves
        self._filter_calls: list[tuple[str, FilterFunc, SkipFunc | None, FilterNodesFunc]] = []
        for p in self.filters:
            fn = p.fn if isinstance(p, Filter) else p.filter
            nodes_fn = (p.filter_nodes if isinstance(p, Filter) else None) or functools.partial(failures_of, fn)
            self._filter_calls.append((p.name, fn, p.skip if isinstance(p, Filter) else None, nodes_fn))

    def filters_for(self, pod: PodInfo) -> list[tuple[str, FilterFunc]]:
        """PreFilter: the (name, function) of the filters that have something to check for this pod."""
        return [(name, fn) for name, fn, skip, _ in self._filter_calls if skip is None or not skip(pod)]

    def node_filters_for(self, pod: PodInfo) -> list[tuple[str, FilterNodesFunc]]:
        """PreFilter, for filtering many nodes at once: (name, nodes function) of the filters left."""
        return [(name, fn) for name, _, skip, fn in self._filter_calls if skip is None or not skip(pod)]

    def run_filter_plugins(self, pod: PodInfo, node: NodeInfo,
                           filters: Sequence[tuple[str, FilterFunc]] | None = None) -> Status:
        """The first failing filter's Status (named after its plugin), or SUCCESS."""
        for name, fn in self.filters_for(pod) if filters is None else filters:
            status = fn(pod, node)
            if status is not SUCCESS and not status.is_success:
                if not status.plugin:
                    status = Status(status.code, status.reasons, name)
                return status
        return SUCCESS

    def find_nodes_that_fit(self, pod: PodInfo, snapshot: Snapshot, start: int = 0,
                            nominated: Mapping[str, Mapping[str, PodInfo]] | None = None
                            ) -> tuple[list[NodeInfo], dict[str, Status], int]:
        """Filter nodes round-robin from `start` until enough fit: (feasible, failed statuses, processed).

        On one thread: the plugins are pure Python on one core (the GIL), so upstream's 16 filtering
        goroutines would only add overhead here. What upstream does to bound the work is
        kept: stop once enough nodes fit (adaptive percentageOfNodesToScore, all nodes below 100) and
        start the next pod where this one stopped, so every node gets its turn.
        """
        nodes = snapshot.nodes
        total = len(nodes)
        wanted = num_feasible_nodes_to_find(total, self.percentage_of_nodes_to_score)
        feasible: list[NodeInfo] = []
        statuses: dict[str, Status] = {}
        filters = self.node_filters_for(pod)
        start = start % total if total else 0
        order = nodes[start:] + nodes[:start] if start else nodes
        # The nodes go through the filters a chunk at a time, each filter over the whole chunk (what passed
        # the ones before): the same verdicts as node after node, in the same order, and as many nodes
        # processed, since a chunk is never larger than the feasible nodes still wanted.
        processed = 0
        while processed < total and len(feasible) < wanted:
            chunk = order[processed:processed + wanted - len(feasible)]
            processed += len(chunk)
            targets = chunk
            if nominated:  # RunFilterPluginsWithNominatedPods: room promised to pods at least as important
                targets = [self._with_nominated(pod, node, nominated) for node in chunk]
            alive: Sequence[int] = range(len(chunk))  # indices into chunk of the nodes every filter so far passed
            failed: dict[int, Status] = {}
            for name, fn in filters:
                candidates = targets if len(alive) == len(chunk) else [targets[i] for i in alive]
                failures = fn(pod, candidates)
                if failures:
                    out = set()
                    for j, status in failures:
                        out.add(j)
                        failed[alive[j]] = status if status.plugin else Status(status.code, status.reasons, name)
                    alive = [i for j, i in enumerate(alive) if j not in out]
                    if not alive:
                        break
            if failed:
                for i in sorted(failed):
                    statuses[chunk[i].name] = failed[i]
                feasible.extend(chunk[i] for i in alive)
            else:
                feasible.extend(chunk)
        return feasible, statuses, processed if len(feasible) >= wanted else total

    @staticmethod
    def _with_nominated(pod: PodInfo, node: NodeInfo, nominated: Mapping[str, Mapping[str, PodInfo]]) -> NodeInfo:
        ahead = [p for p in (nominated.get(node.name) or {}).values()
                 if p.priority >= pod.priority and p.key != pod.key]
        return node_with_pods(node, ahead) if ahead else node

    def prioritize_nodes(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        """Weighted sum of every score plugin's normalized scores, per node (same order as `nodes`)."""
        totals: list[int] | None = None
        # what plugins gave every node alike (no node tainted, no preferred affinity, ...), added at the end:
        # the same totals without two passes over the nodes per such plugin
        offset = 0
        for plugin in self.scores:
            scores = plugin.score_all(pod, nodes) if isinstance(plugin, Score) else [
                plugin.score(pod, node) for node in nodes]
            plugin.normalize_score(pod, nodes, scores)
            if len(scores) != len(nodes):
                raise ValueError(f"plugin {plugin.name} scored {len(scores)} of {len(nodes)} nodes")
            if not scores:
                continue
            lowest, highest = min(scores), max(scores)
            if lowest < MIN_NODE_SCORE or highest > MAX_NODE_SCORE:
                i, score = next((i, s) for i, s in enumerate(scores) if not MIN_NODE_SCORE <= s <= MAX_NODE_SCORE)
                raise ValueError(f"plugin {plugin.name} scored node {nodes[i].name} {score}, out of 0..100")
            weight = plugin.weight
            if lowest == highest:
                offset += lowest * weight
                continue
            if weight != 1:
                scores = [s * weight for s in scores]
            totals = scores if totals is None else list(map(operator.add, totals, scores))
        if totals is None:
            return [offset] * len(nodes)
        return [t + offset for t in totals] if offset else totals

    def schedule(self, pod: PodInfo, snapshot: Snapshot, start: int = 0,
                 rng: random.Random | None = None,
                 nominated: Mapping[str, Mapping[str, PodInfo]] | None = None) -> ScheduleResult:
        """Pick a node for `pod`, or raise FitError saying why none fits. `nominated`: node → the pods
        preemption nominated there (status.nominatedNodeName), whose room others of lower priority may
        not take."""
        total = len(snapshot)
        if total == 0:
            raise FitError(pod, 0, {})
        feasible, statuses, processed = self.find_nodes_that_fit(pod, snapshot, start, nominated)
        next_start = (start + processed) % total
        if not feasible:
            raise FitError(pod, total, statuses, preemption_message(pod, total))
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, processed, 1, next_start, statuses, feasible)
        totals = self.prioritize_nodes(pod, feasible)
        return ScheduleResult(select_host(feasible, totals, rng), processed, len(feasible), next_start, statuses,
                              feasible, totals)


def node_with_pods(node: NodeInfo, pods: Iterable[PodInfo]) -> NodeInfo:
    """A copy of node with pods added (the cycle's snapshot is not changed)."""
    copy = NodeInfo(node.name, node.node)
    for existing in node.pods.values():
        copy.add_pod(existing)
    for pod in pods:
        copy.add_pod(pod)
    return copy


def select_host(nodes: Sequence[NodeInfo], totals: Sequence[int], rng: random.Random | None = None) -> str:
    """The node with the highest total score; ties broken uniformly at random."""
    best = max(totals)
    candidates = [node.name for node, total in zip(nodes, totals, strict=True) if total == best]
    if len(candidates) == 1:
        return candidates[0]
    return (rng or random).choice(candidates)
