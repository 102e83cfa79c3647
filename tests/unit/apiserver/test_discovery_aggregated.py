"""The aggregated discovery document carries what is served beside the resource table: autoscaling/v1 beside
v2 (kubectl 1.27's `autoscale` creates v1), and the metrics-server's metrics.k8s.io (kubectl top looks for it
in discovery before it asks)."""

from __future__ import annotations

from apiserver import discovery_aggregated
from apiserver.endpoints import aggregator


def test_autoscaling_v1_follows_v2_with_the_same_resources_in_its_own_version() -> None:
    document = discovery_aggregated.group_discovery_list("v2", False)
    discovery_aggregated.add_version_alias(document, "autoscaling", "v2", "v1")
    discovery_aggregated.add_version_alias(document, "autoscaling", "v2", "v1")  # once only
    group = next(i for i in document["items"] if i["metadata"].get("name") == "autoscaling")
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]  # v2 preferred
    hpa = next(r for r in group["versions"][1]["resources"] if r["resource"] == "horizontalpodautoscalers")
    assert hpa["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"}
    assert {s["subresource"]: s["responseKind"]["version"] for s in hpa.get("subresources", [])} == {"status": "v1"}
    v2 = next(r for r in group["versions"][0]["resources"] if r["resource"] == "horizontalpodautoscalers")
    assert v2["responseKind"]["version"] == "v2"  # the copy did not touch the served version


def test_the_metrics_group_from_its_resource_list() -> None:
    entry = discovery_aggregated.group_from_resource_list(aggregator.METRICS.resource_list)
    assert entry["metadata"]["name"] == "metrics.k8s.io"
    [version] = entry["versions"]
    assert version["version"] == "v1beta1"
    assert {r["resource"]: (r["scope"], r["responseKind"]["kind"], r["verbs"]) for r in version["resources"]} == {
        "nodes": ("Cluster", "NodeMetrics", ["get", "list"]), "pods": ("Namespaced", "PodMetrics", ["get", "list"])}
