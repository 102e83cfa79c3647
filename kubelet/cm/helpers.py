"""Pure computations of the pod and QoS cgroups' settings (upstream cm/helpers_linux.go, qos/policy)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from machinery.api.core_v1 import Container, Pod
from machinery.quantity import parse_quantity

MIN_SHARES = 2  # upstream MinShares: the kernel's floor
MAX_SHARES = 262144  # MaxShares
SHARES_PER_CPU = 1024
MILLI_CPU_TO_CPU = 1000
QUOTA_PERIOD = 100_000  # µs: the CFS period limits are expressed in (upstream QuotaPeriod)
MIN_QUOTA_PERIOD = 1000  # MinQuotaPeriod

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"
QOS_RESOURCES = ("cpu", "memory")


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """upstream MilliCPUToShares: 1024 shares a CPU, clamped to the kernel's [2, 262144]."""
    if milli_cpu == 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, milli_cpu * SHARES_PER_CPU // MILLI_CPU_TO_CPU))


def milli_cpu_to_quota(milli_cpu: int, period: int = QUOTA_PERIOD) -> int:
    """upstream MilliCPUToQuota: the CFS quota (µs per `period`) of a CPU limit; 0 for none, at least 1 ms."""
    if milli_cpu == 0:
        return 0
    return max(MIN_QUOTA_PERIOD, milli_cpu * period // MILLI_CPU_TO_CPU)


def cpu_shares_to_weight(shares: int) -> int:
    """upstream CpuSharesToCpuWeight (cgroup v2's cpu.weight, 1-10000, from v1's shares, 2-262144)."""
    return 1 + ((shares - 2) * 9999) // 262142


@dataclass(frozen=True)
class ResourceConfig:
    """What a cgroup is given (upstream cm.ResourceConfig); None leaves the kernel's default."""

    cpu_shares: int | None = None
    cpu_quota: int | None = None  # µs per period; -1 unlimited
    cpu_period: int | None = None
    memory: int | None = None  # bytes


def _quantities(resources: Mapping[str, object] | None) -> dict[str, tuple[int, int]]:
    """name -> (milli value, value) of the cpu and memory a container states."""
    out: dict[str, tuple[int, int]] = {}
    for name, raw in (resources or {}).items():
        if name in QOS_RESOURCES:
            q = parse_quantity(raw)
            out[name] = (q.milli_value(), q.int_value())
    return out


def _init_and_regular(pod: Pod) -> tuple[list[Container], list[Container]]:
    spec = pod.spec
    if spec is None:
        return [], []
    return list(spec.init_containers or []), list(spec.containers)


def qos_class(pod: Pod) -> str:
    """upstream GetPodQOS: the class the apiserver wrote into status.qosClass, else ComputePodQOS."""
    if pod.status is not None and pod.status.qos_class:
        return pod.status.qos_class
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    init, regular = _init_and_regular(pod)
    for c in [*regular, *init]:
        res = c.resources
        for name, (milli, _) in _quantities(res.requests if res else None).items():
            if milli > 0:
                requests[name] = requests.get(name, 0) + milli
        found = set()
        for name, (milli, _) in _quantities(res.limits if res else None).items():
            if milli > 0:
                found.add(name)
                limits[name] = limits.get(name, 0) + milli
        if not found.issuperset(QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and requests == {k: v for k, v in limits.items() if k in requests} and len(requests) == len(limits):
        return GUARANTEED
    return BURSTABLE


def _pod_totals(pod: Pod, part: str) -> dict[str, int]:
    """resource.PodRequests / PodLimits for cpu (millis) and memory (bytes): the regular containers and
    the sidecars (restartable init containers) add up, each ordinary init container runs alone (with the
    sidecars started before it), so the pod needs the larger of the sum and the biggest such step; the
    pod's overhead comes on top."""
    def of(c: Container) -> dict[str, int]:
        res = c.resources
        values = _quantities((res.requests if part == "requests" else res.limits) if res else None)
        return {name: milli if name == "cpu" else value for name, (milli, value) in values.items()}

    def add(into: dict[str, int], more: Mapping[str, int]) -> None:
        for name, v in more.items():
            into[name] = into.get(name, 0) + v

    init, regular = _init_and_regular(pod)
    total: dict[str, int] = {}
    for c in regular:
        add(total, of(c))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in init:
        if c.restart_policy == "Always":
            add(total, of(c))
            add(sidecars, of(c))
            step = dict(sidecars)
        else:
            step = of(c)
            add(step, sidecars)
        for name, v in step.items():
            init_max[name] = max(init_max.get(name, 0), v)
    for name, v in init_max.items():
        total[name] = max(total.get(name, 0), v)
    if pod.spec is not None and pod.spec.overhead:
        add(total, {name: milli if name == "cpu" else value
                    for name, (milli, value) in _quantities(pod.spec.overhead).items()})
    return total


def _every_container_limits(pod: Pod, resource: str) -> bool:
    init, regular = _init_and_regular(pod)
    for c in [*regular, *init]:
        limits = _quantities(c.resources.limits if c.resources else None)
        if limits.get(resource, (0, 0))[0] == 0:
            return False
    return True


def resource_config_for_pod(pod: Pod, period: int = QUOTA_PERIOD) -> ResourceConfig:
    """upstream ResourceConfigForPod: the pod cgroup's settings by QoS class. Shares from the summed CPU
    requests; a CFS quota from the summed CPU limits and a memory limit only where every container states
    one (always for Guaranteed); BestEffort gets the minimum shares and nothing else."""
    klass = qos_class(pod)
    if klass == BEST_EFFORT:
        return ResourceConfig(cpu_shares=MIN_SHARES)
    requests = _pod_totals(pod, "requests")
    limits = _pod_totals(pod, "limits")
    shares = milli_cpu_to_shares(requests.get("cpu", 0))
    quota = milli_cpu_to_quota(limits.get("cpu", 0), period)
    memory = limits.get("memory", 0)
    if klass == GUARANTEED:
        return ResourceConfig(cpu_shares=shares, cpu_quota=quota, cpu_period=period, memory=memory)
    cpu_limited = _every_container_limits(pod, "cpu")
    memory_limited = _every_container_limits(pod, "memory")
    return ResourceConfig(cpu_shares=shares, cpu_quota=quota if cpu_limited else None,
                          cpu_period=period if cpu_limited else None, memory=memory if memory_limited else None)


def burstable_cpu_shares(pods: Iterable[Pod]) -> int:
    """upstream qosContainerManager.setCPUCgroupConfig: the burstable cgroup's shares are its pods'
    summed CPU requests."""
    millis = sum(_pod_totals(p, "requests").get("cpu", 0) for p in pods if qos_class(p) == BURSTABLE)
    return milli_cpu_to_shares(millis)
