"""autoscaling/v1 ⇄ autoscaling/v2 HorizontalPodAutoscalers (upstream pkg/apis/autoscaling/v1/conversion.go).

v1 knows one target, `targetCPUUtilizationPercentage`, and reports `currentCPUUtilizationPercentage`; what
else a v2 object holds travels in v1 annotations, as upstream keeps it: the other metrics in
`autoscaling.alpha.kubernetes.io/metrics`, `behavior` in `.../behavior`, the status' other current
metrics in `.../current-metrics` and its conditions in `.../conditions` (JSON; minik8s writes the v2
forms there). A v1 object read back as v2 gets them back, so nothing is lost either way.
"""

from __future__ import annotations

import copy
import json
from typing import Any

Obj = dict[str, Any]

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
_ANNOTATIONS = (METRICS_ANNOTATION, BEHAVIOR_ANNOTATION, CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION)


def _is_cpu_utilization(metric: Obj) -> bool:
    resource = metric.get("resource") or {}
    target = resource.get("target") or {}
    return (metric.get("type") == "Resource" and resource.get("name") == "cpu"
            and target.get("type") == "Utilization" and target.get("averageUtilization") is not None)


def v2_to_v1(obj: Obj) -> Obj:
    out: Obj = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": copy.deepcopy(obj.get("metadata") or {})}
    annotations = dict(out["metadata"].get("annotations") or {})
    spec = obj.get("spec") or {}
    v1spec: Obj = {k: copy.deepcopy(spec[k]) for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec}
    others = []
    for metric in spec.get("metrics") or []:
        if "targetCPUUtilizationPercentage" not in v1spec and _is_cpu_utilization(metric):
            v1spec["targetCPUUtilizationPercentage"] = metric["resource"]["target"]["averageUtilization"]
        else:
            others.append(metric)
    if others:
        annotations[METRICS_ANNOTATION] = json.dumps(others, separators=(",", ":"))
    if spec.get("behavior") is not None:
        annotations[BEHAVIOR_ANNOTATION] = json.dumps(spec["behavior"], separators=(",", ":"))
    out["spec"] = v1spec
    if "status" in obj:
        status = obj.get("status") or {}
        v1status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime") if k in status}
        v1status["currentReplicas"] = status.get("currentReplicas", 0)
        v1status["desiredReplicas"] = status.get("desiredReplicas", 0)
        current_others = []
        for metric in status.get("currentMetrics") or []:
            resource = metric.get("resource") or {}
            utilization = (resource.get("current") or {}).get("averageUtilization")
            if (metric.get("type") == "Resource" and resource.get("name") == "cpu" and utilization is not None
                    and "currentCPUUtilizationPercentage" not in v1status):
                v1status["currentCPUUtilizationPercentage"] = utilization
            else:
                current_others.append(metric)
        if current_others:
            annotations[CURRENT_METRICS_ANNOTATION] = json.dumps(current_others, separators=(",", ":"))
        if status.get("conditions"):
            annotations[CONDITIONS_ANNOTATION] = json.dumps(status["conditions"], separators=(",", ":"))
        out["status"] = v1status
    if annotations:
        out["metadata"]["annotations"] = annotations
    return out


def _load(annotations: Obj, key: str) -> Any:
    raw = annotations.pop(key, None)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def v1_to_v2(obj: Obj) -> Obj:
    meta = copy.deepcopy(obj.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    metrics_extra = _load(annotations, METRICS_ANNOTATION)
    behavior = _load(annotations, BEHAVIOR_ANNOTATION)
    current_extra = _load(annotations, CURRENT_METRICS_ANNOTATION)
    conditions = _load(annotations, CONDITIONS_ANNOTATION)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    out: Obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta}
    spec = obj.get("spec") or {}
    v2spec: Obj = {k: copy.deepcopy(spec[k]) for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec}
    metrics = []
    if spec.get("targetCPUUtilizationPercentage") is not None:
        metrics.append({"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": spec["targetCPUUtilizationPercentage"]}}})
    if isinstance(metrics_extra, list):
        metrics += metrics_extra
    if metrics:
        v2spec["metrics"] = metrics
    if isinstance(behavior, dict):
        v2spec["behavior"] = behavior
    out["spec"] = v2spec
    if obj.get("status") is not None:
        status = obj["status"]
        v2status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime", "currentReplicas",
                                                "desiredReplicas") if k in status}
        current = []
        if status.get("currentCPUUtilizationPercentage") is not None:
            current.append({"type": "Resource", "resource": {"name": "cpu", "current": {
                "averageUtilization": status["currentCPUUtilizationPercentage"]}}})
        if isinstance(current_extra, list):
            current += current_extra
        if current:
            v2status["currentMetrics"] = current
        if isinstance(conditions, list):
            v2status["conditions"] = conditions
        out["status"] = v2status
    return out


def to_v1_answer(body: Any) -> Any:
    """A v2 answer (object, list, watch event, Table with objects) as v1 would give it."""
    if not isinstance(body, dict):
        return body
    kind = body.get("kind")
    if kind == "HorizontalPodAutoscaler":
        return v2_to_v1(body)
    if kind == "HorizontalPodAutoscalerList":
        return {**body, "apiVersion": "autoscaling/v1", "items": [v2_to_v1(i) for i in body.get("items") or []]}
    if "type" in body and isinstance(body.get("object"), dict) and set(body) <= {"type", "object"}:
        return {**body, "object": to_v1_answer(body["object"])}
    if kind == "Table":
        for row in body.get("rows") or []:
            if isinstance(row.get("object"), dict) and row["object"].get("kind") == "HorizontalPodAutoscaler":
                row["object"] = v2_to_v1(row["object"])
    return body
