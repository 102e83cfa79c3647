"""The node labels a kubelet owns (upstream: pkg/kubelet/apis/well_known_labels.go): the kubelet
may set these on its own Node (NodeRestriction admission lets it) and accepts only these among the
`kubernetes.io` / `k8s.io` labels of --node-labels. Anything else in those namespaces
(node-role.kubernetes.io/*, node-restriction.kubernetes.io/*) is for the cluster's admins."""

from __future__ import annotations

from collections.abc import Iterable

KUBELET_LABELS = (
    "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type", "kubernetes.io/os", "kubernetes.io/arch",
    "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
)
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
_KUBELET_LABELS = frozenset(KUBELET_LABELS)


def label_namespace(key: str) -> str:
    prefix, slash, _ = key.partition("/")
    return prefix if slash else ""


def in_namespace(namespace: str, allowed: str) -> bool:
    """namespace is allowed or a subdomain of it."""
    return namespace == allowed or namespace.endswith("." + allowed)


def is_kubelet_label(key: str) -> bool:
    """IsKubeletLabel."""
    if key in _KUBELET_LABELS:
        return True
    namespace = label_namespace(key)
    return any(in_namespace(namespace, allowed) for allowed in KUBELET_LABEL_NAMESPACES)


def is_kubernetes_label(key: str) -> bool:
    namespace = label_namespace(key)
    return in_namespace(namespace, "kubernetes.io") or in_namespace(namespace, "k8s.io")


def unknown_kubernetes_labels(keys: Iterable[object]) -> list[str]:
    """The keys in the kubernetes.io / k8s.io namespaces a kubelet may not set, sorted."""
    return sorted(k for k in keys if isinstance(k, str) and is_kubernetes_label(k) and not is_kubelet_label(k))
