"""Taints and tolerations (upstream k8s.io/api/core/v1 toleration.go), shared by the scheduler's
TaintToleration plugin and the node lifecycle controller's evictions."""

from __future__ import annotations

from collections.abc import Iterable

from machinery.api.core_v1 import Taint, Toleration


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Toleration.ToleratesTaint: an empty effect or key matches any; Exists ignores the value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.value or "") == (taint.value or "")
    return False


def tolerates_taint(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)
