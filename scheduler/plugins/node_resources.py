"""NodeResourcesFit and NodeResourcesBalancedAllocation.

Filter (NodeResourcesFit): the pod's requests (upstream's PodRequests: containers summed, the max rule
for init containers, sidecars, overhead) must fit in the node's allocatable minus what the pods
already on it (bound or assumed) request, resource by resource; and the node's `pods` allocatable
bounds how many pods it takes. Each shortfall is one reason: "Insufficient cpu", "Too many pods".

Scores, cpu and memory weighted equally:
- LeastAllocated (NodeResourcesFit's default strategy): the share of allocatable left free after
  placing the pod, using "non-zero" requests (100m cpu / 200Mi memory for containers that state
  none) so that best-effort pods spread too;
- BalancedAllocation: 100 * (1 - the standard deviation of the cpu and memory fractions requested),
  favouring nodes whose resources fill evenly.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.framework import MAX_NODE_SCORE, SUCCESS, NodeInfo, PodInfo, Status, memoized_scores

NAME = "NodeResourcesFit"
BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
TOO_MANY_PODS = "Too many pods"


def insufficient_resources(pod: PodInfo, node: NodeInfo) -> list[str]:
    """fitsRequest: the reasons the pod does not fit (empty if it does)."""
    reasons: list[str] = []
    allocatable, requested, want = node.allocatable, node.requested, pod.requests
    if len(node.pods) + 1 > allocatable.allowed_pod_number:
        reasons.append(TOO_MANY_PODS)
    if want.is_zero():
        return reasons
    if want.milli_cpu > 0 and want.milli_cpu > allocatable.milli_cpu - requested.milli_cpu:
        reasons.append("Insufficient cpu")
    if want.memory > 0 and want.memory > allocatable.memory - requested.memory:
        reasons.append("Insufficient memory")
    free_storage = allocatable.ephemeral_storage - requested.ephemeral_storage
    if want.ephemeral_storage > 0 and want.ephemeral_storage > free_storage:
        reasons.append("Insufficient ephemeral-storage")
    for name, quantity in want.scalar.items():
        if quantity > 0 and quantity > allocatable.scalar.get(name, 0) - requested.scalar.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def node_resources_fit(pod: PodInfo, node: NodeInfo) -> Status:
    allocatable, requested, want = node.allocatable, node.requested, pod.requests
    # the common case first, without building a list: room for one more pod, cpu and memory
    if (len(node.pods) < allocatable.allowed_pod_number and not want.ephemeral_storage and not want.scalar
            and (want.milli_cpu <= 0 or want.milli_cpu <= allocatable.milli_cpu - requested.milli_cpu)
            and (want.memory <= 0 or want.memory <= allocatable.memory - requested.memory)):
        return SUCCESS
    reasons = insufficient_resources(pod, node)
    return Status.unschedulable(*reasons) if reasons else SUCCESS


def node_resources_fit_nodes(pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[tuple[int, Status]]:
    """node_resources_fit's failures among nodes: node_resources_fit's common case inline, the rest through it."""
    want = pod.requests
    if want.ephemeral_storage or want.scalar:
        return [(i, status) for i, node in enumerate(nodes)
                if (status := node_resources_fit(pod, node)) is not SUCCESS]
    # a request of 0 (or less) fits whatever is free, even on an overcommitted node
    cpu = want.milli_cpu if want.milli_cpu > 0 else _NO_LIMIT
    memory = want.memory if want.memory > 0 else _NO_LIMIT
    out = []
    for i in [i for i, node in enumerate(nodes)
              if node.free_pods <= 0 or cpu > node.free_milli_cpu or memory > node.free_memory]:
        status = node_resources_fit(pod, nodes[i])
        if status is not SUCCESS:
            out.append((i, status))
    return out


_NO_LIMIT = -(1 << 100)


def _least_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def least_allocated_score(pod: PodInfo, node: NodeInfo) -> int:
    alloc = node.allocatable
    pairs = ((node.non_zero_requested.milli_cpu + pod.non_zero_requests.milli_cpu, alloc.milli_cpu),
             (node.non_zero_requested.memory + pod.non_zero_requests.memory, alloc.memory))
    total = weights = 0
    for requested, capacity in pairs:
        if capacity == 0:
            continue
        total += _least_requested(requested, capacity)
        weights += 1
    return total // weights if weights else 0


def least_allocated_scores(pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
    """least_allocated_score of every node (remembered per node until it changes: see memoized_scores)."""
    return memoized_scores(NAME, pod.non_zero_requests, nodes, lambda node: least_allocated_score(pod, node))


def balanced_allocation_score(pod: PodInfo, node: NodeInfo) -> int:
    alloc = node.allocatable
    pairs = ((node.requested.milli_cpu + pod.requests.milli_cpu, alloc.milli_cpu),
             (node.requested.memory + pod.requests.memory, alloc.memory))
    fractions = [min(requested / capacity, 1.0) for requested, capacity in pairs if capacity > 0]
    std = abs(fractions[0] - fractions[1]) / 2 if len(fractions) == 2 else 0.0
    return int((1 - std) * MAX_NODE_SCORE)


def balanced_allocation_scores(pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
    """balanced_allocation_score of every node (remembered per node until it changes: see memoized_scores)."""
    return memoized_scores(BALANCED_ALLOCATION, pod.requests, nodes,
                           lambda node: balanced_allocation_score(pod, node))
