"""Labels and annotations the kubelet puts on CRI sandboxes and containers (upstream
pkg/kubelet/kuberuntime/labels.go; the keys are kubelet/types/labels.py, as upstream's pkg/kubelet/types/labels.go).

Labels say whose a sandbox or container is: the pod's name, namespace and uid and the container's
name; a restarted kubelet finds its pods by them (adoption). Annotations carry what the kubelet
needs back later: the spec hash (a changed spec means a new container), the restart count, the
termination message path and policy, the image as the pod spec names it.
"""

from __future__ import annotations

from kubelet.types.labels import (
    CONTAINER_HASH,
    CONTAINER_IMAGE,
    CONTAINER_NAME,
    CONTAINER_RESTART_COUNT,
    CONTAINER_TTY,
    POD_DELETION_GRACE,
    POD_NAME,
    POD_NAMESPACE,
    POD_UID,
    TERMINATION_MESSAGE_PATH,
    TERMINATION_MESSAGE_POLICY,
)
from machinery.api.core_v1 import Container, Pod


def sandbox_labels(pod: Pod) -> dict[str, str]:
    """The pod's own labels plus the kubelet's (upstream newPodLabels)."""
    meta = pod.metadata
    return {**(meta.labels or {}), POD_NAME: meta.name or "", POD_NAMESPACE: meta.namespace or "",
            POD_UID: meta.uid or ""}


def sandbox_annotations(pod: Pod) -> dict[str, str]:
    return dict(pod.metadata.annotations or {})


def container_labels(pod: Pod, container: Container) -> dict[str, str]:
    """upstream newContainerLabels."""
    meta = pod.metadata
    return {POD_NAME: meta.name or "", POD_NAMESPACE: meta.namespace or "", POD_UID: meta.uid or "",
            CONTAINER_NAME: container.name}


def container_annotations(pod: Pod, container: Container, restart_count: int, spec_hash: str) -> dict[str, str]:
    """upstream newContainerAnnotations."""
    out = {CONTAINER_HASH: spec_hash, CONTAINER_RESTART_COUNT: str(restart_count),
           TERMINATION_MESSAGE_POLICY: container.termination_message_policy or "File",
           CONTAINER_IMAGE: container.image or ""}
    if container.termination_message_path:
        out[TERMINATION_MESSAGE_PATH] = container.termination_message_path
    if container.tty:
        out[CONTAINER_TTY] = "true"
    grace = pod.spec.termination_grace_period_seconds if pod.spec else None
    if grace is not None:
        out[POD_DELETION_GRACE] = str(grace)
    return out

