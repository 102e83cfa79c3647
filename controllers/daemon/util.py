"""The DaemonSet controller's pure parts (upstream pkg/controller/daemon/util/daemonset_util.go and the
eligibility half of daemon_controller.go): which nodes should run a daemon pod, the tolerations every
daemon pod gets, the node affinity that pins a pod to its node for the default scheduler, and which
pods are up to date."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from controllers import history
from controllers.deployment.util import int_or_percent
from machinery.api.apps_v1 import DaemonSet
from machinery.api.core_v1 import (
    Affinity,
    Node,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodSpec,
    Toleration,
)
from machinery.flowcontrol import Backoff
from machinery.nodeaffinity import RequiredNodeAffinity
from machinery.taints import (
    TAINT_NODE_DISK_PRESSURE,
    TAINT_NODE_MEMORY_PRESSURE,
    TAINT_NODE_NETWORK_UNAVAILABLE,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_PID_PRESSURE,
    TAINT_NODE_UNREACHABLE,
    TAINT_NODE_UNSCHEDULABLE,
    tolerates_taint,
)

# apps/v1 labels on every daemon pod (k8s.io/api/apps/v1 types.go, extensions DaemonSetTemplateGenerationKey)
CONTROLLER_REVISION_HASH_LABEL = history.CONTROLLER_REVISION_HASH_LABEL
POD_TEMPLATE_GENERATION_LABEL = "pod-template-generation"
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
OBJECT_NAME_FIELD = "metadata.name"


def daemon_tolerations(host_network: bool) -> list[Toleration]:
    """What AddOrUpdateDaemonPodTolerations adds: daemon pods stay on not-ready and unreachable nodes
    (NoExecute, no time limit) and are placed despite pressure and cordons; network-unavailable too
    for host-network pods, which need no pod network."""
    out = [Toleration(key=TAINT_NODE_NOT_READY, operator="Exists", effect="NoExecute"),
           Toleration(key=TAINT_NODE_UNREACHABLE, operator="Exists", effect="NoExecute"),
           Toleration(key=TAINT_NODE_DISK_PRESSURE, operator="Exists", effect="NoSchedule"),
           Toleration(key=TAINT_NODE_MEMORY_PRESSURE, operator="Exists", effect="NoSchedule"),
           Toleration(key=TAINT_NODE_PID_PRESSURE, operator="Exists", effect="NoSchedule"),
           Toleration(key=TAINT_NODE_UNSCHEDULABLE, operator="Exists", effect="NoSchedule")]
    if host_network:
        out.append(Toleration(key=TAINT_NODE_NETWORK_UNAVAILABLE, operator="Exists", effect="NoSchedule"))
    return out


def _same_toleration(a: Toleration, b: Toleration) -> bool:
    """MatchToleration: the same key, operator, value and effect (tolerationSeconds may differ)."""
    return ((a.key or "") == (b.key or "") and (a.operator or "Equal") == (b.operator or "Equal")
            and (a.value or "") == (b.value or "") and (a.effect or "") == (b.effect or ""))


def add_or_update_tolerations(existing: Iterable[Toleration], added: Iterable[Toleration]) -> list[Toleration]:
    """AddOrUpdateTolerationInPodSpec for each added toleration: a matching one is replaced, else appended."""
    out = list(existing)
    for toleration in added:
        for i, current in enumerate(out):
            if _same_toleration(current, toleration):
                out[i] = toleration
                break
        else:
            out.append(toleration)
    return out


def add_daemon_tolerations(spec: PodSpec) -> PodSpec:
    """The pod spec with the daemon tolerations added (a copy)."""
    tolerations = add_or_update_tolerations(spec.tolerations or [], daemon_tolerations(bool(spec.host_network)))
    return spec.model_copy(update={"tolerations": tolerations})


def node_name_affinity(affinity: Affinity | None, node_name: str) -> Affinity:
    """ReplaceDaemonSetPodNodeNameNodeAffinity: the required node affinity becomes the one term
    `metadata.name In [node_name]` (the controller already checked the template's own terms);
    preferred terms and pod (anti-)affinity are kept."""
    term = NodeSelectorTerm(match_fields=[NodeSelectorRequirement(key=OBJECT_NAME_FIELD, operator="In",
                                                                  values=[node_name])])
    affinity = affinity or Affinity()
    node_affinity = affinity.node_affinity or NodeAffinity()
    node_affinity = node_affinity.model_copy(update={
        "required_during_scheduling_ignored_during_execution": NodeSelector(node_selector_terms=[term])})
    return affinity.model_copy(update={"node_affinity": node_affinity})


def target_node_name(pod: Pod) -> str | None:
    """GetTargetNodeName: spec.nodeName once bound, else the node its `metadata.name In [x]` affinity pins."""
    spec = pod.spec
    if spec is None:
        return None
    if spec.node_name:
        return spec.node_name
    affinity = spec.affinity.node_affinity if spec.affinity is not None else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity is not None else None
    for term in required.node_selector_terms if required is not None else ():
        for req in term.match_fields or ():
            if req.key == OBJECT_NAME_FIELD and req.operator == "In" and len(req.values or []) == 1:
                return (req.values or [""])[0]
    return None


def new_daemon_pod(ds: DaemonSet, node_name: str) -> Pod:
    """NewPod: what the controller would create for the node, for the eligibility predicates."""
    assert ds.spec is not None
    spec = add_daemon_tolerations(ds.spec.template.spec or PodSpec(containers=[]))
    return Pod(spec=spec.model_copy(update={"node_name": node_name}))


def node_should_run_daemon_pod(node: Node, ds: DaemonSet) -> tuple[bool, bool]:
    """NodeShouldRunDaemonPod: (should run, should continue running). A node the template's nodeSelector
    or required affinity rules out gets no pod and loses its pod; a NoSchedule or NoExecute taint the pod
    (with the daemon tolerations) does not tolerate keeps a new pod off, and only an untolerated
    NoExecute one evicts a running pod."""
    pod = new_daemon_pod(ds, node.metadata.name or "")
    if not RequiredNodeAffinity(pod).matches(node.metadata.labels or {}, node.metadata.name or ""):
        return False, False
    tolerations = pod.spec.tolerations or [] if pod.spec is not None else []
    untolerated = [t for t in (node.spec.taints if node.spec is not None else None) or []
                   if t.effect in ("NoSchedule", "NoExecute") and not tolerates_taint(tolerations, t)]
    if untolerated:
        return False, not any(t.effect == "NoExecute" for t in untolerated)
    return True, True


def template_generation(ds: DaemonSet) -> str | None:
    return (ds.metadata.annotations or {}).get(TEMPLATE_GENERATION_ANNOTATION)


def is_pod_updated(pod: Pod, hash_: str, generation: str | None) -> bool:
    """IsPodUpdated: the pod carries the current revision's hash or the current template generation."""
    labels = pod.metadata.labels or {}
    template_matches = generation is not None and labels.get(POD_TEMPLATE_GENERATION_LABEL) == generation
    hash_matches = bool(hash_) and labels.get(CONTROLLER_REVISION_HASH_LABEL) == hash_
    return hash_matches or template_matches


def surge_and_unavailable(ds: DaemonSet, desired: int) -> tuple[int, int]:
    """updatedDesiredNodeCounts' (maxSurge, maxUnavailable) for `desired` nodes: surge rounds up,
    unavailability down; both zero would stall a rollout, so unavailability becomes 1 (upstream too)."""
    assert ds.spec is not None
    strategy = ds.spec.update_strategy
    rolling = strategy.rolling_update if strategy is not None else None
    if rolling is None:
        return 0, 1
    max_surge = int_or_percent(rolling.max_surge, desired, True)
    max_unavailable = int_or_percent(rolling.max_unavailable, desired, False)
    if max_surge == 0 and max_unavailable == 0:
        max_unavailable = 1
    return max_surge, max_unavailable


def find_updated_pods_on_node(pods: Sequence[Pod], hash_: str, generation: str | None,
                              ) -> tuple[Pod | None, Pod | None, bool]:
    """findUpdatedPodsOnNode: (the updated pod, the old pod, ok); not ok when a node has two of either,
    which the manage loop sorts out first."""
    new = old = None
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            continue
        if is_pod_updated(pod, hash_, generation):
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


def rolling_update_without_surge(ds: DaemonSet, node_to_pods: dict[str, list[Pod]], hash_: str,
                                 max_unavailable: int, is_available: Callable[[Pod], bool]) -> list[Pod]:
    """rollingUpdate with maxSurge 0: the old pods to delete now. Unavailable old pods always go; of the
    available ones, as many as maxUnavailable leaves room for after counting the nodes already short."""
    generation = template_generation(ds)
    unavailable = 0
    replacements: list[Pod] = []
    candidates: list[Pod] = []
    for node_name in sorted(node_to_pods):
        new, old, ok = find_updated_pods_on_node(node_to_pods[node_name], hash_, generation)
        if not ok or (new is None) == (old is None):
            unavailable += 1  # the manage loop creates or deletes here
        elif new is not None:
            if not is_available(new):
                unavailable += 1
        elif old is not None:
            if not is_available(old):
                replacements.append(old)
                unavailable += 1  # already unavailable: its replacement costs nothing more, but counts
            elif unavailable < max_unavailable:
                candidates.append(old)
    room = max(0, min(max_unavailable - unavailable, len(candidates)))
    return [*replacements, *candidates[:room]]


def rolling_update_with_surge(ds: DaemonSet, node_to_pods: dict[str, list[Pod]], hash_: str, max_surge: int,
                              is_available: Callable[[Pod], bool], should_run: Callable[[str], bool],
                              ) -> tuple[list[Pod], list[str]]:
    """rollingUpdate with maxSurge > 0: (old pods whose replacement is available, nodes to surge a new pod
    onto). Nodes with an unavailable old pod always get one; others as maxSurge allows."""
    generation = template_generation(ds)
    surging = 0
    old_to_delete: list[Pod] = []
    allowed: list[str] = []
    candidates: list[str] = []
    for node_name in sorted(node_to_pods):
        if not should_run(node_name):
            continue
        new, old, ok = find_updated_pods_on_node(node_to_pods[node_name], hash_, generation)
        if not ok or old is None:
            continue  # nothing to replace: the manage loop handles the node
        if new is None:
            if not is_available(old):
                allowed.append(node_name)
            elif surging < max_surge:
                candidates.append(node_name)
        elif not is_available(new):
            surging += 1  # waiting for the new pod to become available
        else:
            old_to_delete.append(old)
    room = max(0, min(max_surge - surging, len(candidates)))
    return old_to_delete, [*allowed, *candidates[:room]]


def oldest_first(pods: Iterable[Pod]) -> list[Pod]:
    """podByCreationTimestampAndPhase, the part that matters here: older first (RFC 3339 times sort as
    text), then by name."""
    return sorted(pods, key=lambda pod: (pod.metadata.creation_timestamp or "~", pod.metadata.name or ""))


class FailedPodsBackoff:
    """upstream's failedPodsBackoff: a failed daemon pod on a node is deleted (and so re-created) at once the
    first time, then only after a window of 1 s doubling up to 15 min, per DaemonSet generation and node; so a
    kubelet that keeps rejecting the pod is not fought in a hot loop."""

    BASE = 1.0
    CAP = 900.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._backoff = Backoff(self.BASE, self.CAP, clock=clock)

    @staticmethod
    def key(ds: DaemonSet, node: str) -> str:
        """upstream failedPodsBackoffKey: a new generation of the DaemonSet starts over."""
        observed = ds.status.observed_generation if ds.status is not None else None
        return f"{ds.metadata.uid}/{observed or 0}/{node}"

    def admit(self, ds: DaemonSet, node: str) -> float | None:
        """None when the failed pod on `node` may be deleted now (its window opens or doubles), else the
        seconds until it may."""
        key = self.key(ds, node)
        if self._backoff.in_backoff(key):
            return self._backoff.remaining_since_update(key)
        self._backoff.next(key)
        return None

    def gc(self) -> None:
        self._backoff.gc()
