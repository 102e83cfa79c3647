"""The QoS and pod cgroups (upstream cm.qosContainerManager and cm.podContainerManager, cgroupfs driver)."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable

from kubelet.cm.cgroup_manager import CgroupManager
from kubelet.cm.helpers import (
    BEST_EFFORT,
    BURSTABLE,
    GUARANTEED,
    MIN_SHARES,
    ResourceConfig,
    burstable_cpu_shares,
    milli_cpu_to_shares,
    qos_class,
    resource_config_for_pod,
)
from machinery.api.core_v1 import Pod

log = logging.getLogger(__name__)

KUBEPODS = "kubepods"  # upstream defaultNodeAllocatableCgroupName
POD_PREFIX = "pod"  # podCgroupNamePrefix


class ContainerManager:
    """`<cgroup_root>/kubepods` and its QoS tiers, and a cgroup per pod under its tier. Blocking file-system
    work: the kubelet calls these in a thread."""

    def __init__(self, cgroup_root: str = "/", cgroups: CgroupManager | None = None,
                 active_pods: Callable[[], list[Pod]] = list) -> None:
        self.cgroups = cgroups or CgroupManager()
        self.cgroup_root = "/" + cgroup_root.strip("/")
        self.kubepods = posixpath.join(self.cgroup_root, KUBEPODS)
        # Guaranteed pods sit right under kubepods (upstream: their cgroups are the tier's)
        self.tiers = {GUARANTEED: self.kubepods, BURSTABLE: posixpath.join(self.kubepods, "burstable"),
                      BEST_EFFORT: posixpath.join(self.kubepods, "besteffort")}
        self.active_pods = active_pods  # the pods the kubelet runs (the burstable tier's shares are theirs)

    def start(self, allocatable_cpu_millis: int, allocatable_memory: int) -> None:
        """Make the hierarchy: kubepods sized by the node's allocatable (upstream's node allocatable cgroup,
        cpu.shares = MilliCPUToShares(allocatable cpu)), then the burstable and besteffort tiers. The root
        is made when missing (upstream wants it there; a host's init system would have made it)."""
        if self.cgroup_root != "/" and not self.cgroups.exists(self.cgroup_root):
            self.cgroups.create(self.cgroup_root, ResourceConfig())
        self.cgroups.create(self.kubepods, ResourceConfig(cpu_shares=milli_cpu_to_shares(allocatable_cpu_millis),
                                                          memory=allocatable_memory))
        self.cgroups.create(self.tiers[BURSTABLE], ResourceConfig(cpu_shares=self._burstable_shares()))
        self.cgroups.create(self.tiers[BEST_EFFORT], ResourceConfig(cpu_shares=MIN_SHARES))

    def _burstable_shares(self) -> int:
        return burstable_cpu_shares(self.active_pods())

    def update_qos_cgroups(self) -> None:
        """upstream UpdateCgroups: the burstable tier's shares follow its pods' requests; besteffort stays at 2."""
        self.cgroups.update(self.tiers[BURSTABLE], ResourceConfig(cpu_shares=self._burstable_shares()))
        self.cgroups.update(self.tiers[BEST_EFFORT], ResourceConfig(cpu_shares=MIN_SHARES))

    # -- pods -----------------------------------------------------------------------------------

    def pod_cgroup(self, pod: Pod) -> str:
        """upstream GetPodContainerName: <tier>/pod<UID> (cgroupfs keeps the UID as it is)."""
        return posixpath.join(self.tiers[qos_class(pod)], POD_PREFIX + (pod.metadata.uid or ""))

    def ensure_pod(self, pod: Pod) -> bool:
        """upstream EnsureExists: make the pod's cgroup with its requests and limits unless it is there;
        True when it was made (the QoS tiers are updated first, as upstream's syncPod does)."""
        name = self.pod_cgroup(pod)
        if self.cgroups.exists(name):
            return False
        self.update_qos_cgroups()
        self.cgroups.create(name, resource_config_for_pod(pod))
        return True

    def pod_cgroups(self) -> dict[str, list[str]]:
        """upstream GetAllPodsFromCgroups: pod UID -> its cgroups found under the tiers."""
        out: dict[str, list[str]] = {}
        for tier in dict.fromkeys(self.tiers.values()):
            for child in self.cgroups.children(tier):
                if child.startswith(POD_PREFIX):
                    out.setdefault(child[len(POD_PREFIX):], []).append(posixpath.join(tier, child))
        return out

    def destroy_pod(self, uid: str) -> bool:
        """Remove the pod's cgroups (its containers must be gone: OSError EBUSY otherwise); True if any was
        there."""
        # its cgroup under each tier, looked up by name: listing every pod's cgroups in every hierarchy made each
        # removal cost as much as the node had pods
        names = [name for tier in dict.fromkeys(self.tiers.values())
                 if self.cgroups.exists_anywhere(name := posixpath.join(tier, POD_PREFIX + uid))]
        for name in names:
            self.cgroups.destroy(name)
        return bool(names)
