"""The pod garbage collector's choices (controllers/podgc.py), as upstream's gc_controller_test.go:
terminated pods over the threshold go evicted-first then oldest; readiness and the out-of-service taint."""

from __future__ import annotations

from controllers.podgc import is_terminating, out_of_service, terminated_to_delete
from machinery.api.core_v1 import Node, Pod


def pod(name: str, created: str, phase: str = "Succeeded", reason: str | None = None,
        deleting: bool = False) -> Pod:
    status: dict[str, str] = {"phase": phase}
    if reason:
        status["reason"] = reason
    meta = {"name": name, "namespace": "ns", "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = created
    return Pod.from_dict({"metadata": meta, "status": status})


def names(pods: list[Pod]) -> list[str]:
    return [p.metadata.name or "" for p in pods]


def test_terminated_over_threshold_oldest_first_evicted_before_all() -> None:
    pods = [pod("new", "2026-01-03T00:00:00Z"), pod("old", "2026-01-01T00:00:00Z", phase="Failed"),
            pod("running", "2025-01-01T00:00:00Z", phase="Running"),
            pod("evicted", "2026-01-05T00:00:00Z", phase="Failed", reason="Evicted"),
            pod("mid-b", "2026-01-02T00:00:00Z"), pod("mid-a", "2026-01-02T00:00:00Z")]
    assert names(terminated_to_delete(pods, 2)) == ["evicted", "old", "mid-a"]
    assert terminated_to_delete(pods, 5) == []
    assert terminated_to_delete(pods, 0) == []  # 0 turns the threshold off


def test_terminating_means_deleted_but_not_terminal() -> None:
    assert is_terminating(pod("a", "2026-01-01T00:00:00Z", phase="Running", deleting=True))
    assert not is_terminating(pod("b", "2026-01-01T00:00:00Z", phase="Failed", deleting=True))
    assert not is_terminating(pod("c", "2026-01-01T00:00:00Z", phase="Running"))


def test_out_of_service_taint() -> None:
    tainted = Node.from_dict({"metadata": {"name": "n"}, "spec": {"taints": [
        {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]}})
    assert out_of_service(tainted)
    assert not out_of_service(Node.from_dict({"metadata": {"name": "n"}, "spec": {}}))
