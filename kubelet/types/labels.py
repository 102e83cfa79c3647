"""The label and annotation keys the kubelet puts on CRI sandboxes and containers, and the reading
of them back (upstream pkg/kubelet/types/labels.go; the restart count as kuberuntime/labels.go's
getContainerInfoFromAnnotations reads it).

They live below both kuberuntime/ (which writes them) and pleg/ (which reads them from what the
runtime lists), so neither package imports the other for them.
"""

from __future__ import annotations

from collections.abc import Mapping

POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_UID = "io.kubernetes.pod.uid"
CONTAINER_NAME = "io.kubernetes.container.name"
CONTAINER_HASH = "io.kubernetes.container.hash"
CONTAINER_RESTART_COUNT = "io.kubernetes.container.restartCount"
TERMINATION_MESSAGE_PATH = "io.kubernetes.container.terminationMessagePath"
TERMINATION_MESSAGE_POLICY = "io.kubernetes.container.terminationMessagePolicy"
POD_DELETION_GRACE = "io.kubernetes.pod.terminationGracePeriod"
CONTAINER_IMAGE = "io.minik8s.container.image"  # the image as the pod spec names it
CONTAINER_TTY = "io.minik8s.container.tty"
SANDBOX_CONTAINER_NAME = "POD"


def restart_count(annotations: Mapping[str, str], attempt: int) -> int:
    """The restart count the kubelet wrote, else the CRI attempt (an annotation not a number too)."""
    try:
        return int(annotations.get(CONTAINER_RESTART_COUNT, attempt))
    except ValueError:
        return attempt
