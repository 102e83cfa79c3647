"""The kubelet's own Prometheus metrics, with upstream's names, help and buckets (pkg/kubelet/metrics/metrics.go),
served at `GET /metrics` (authorized as `nodes/metrics`, kubelet/server_auth.py) in the text format by
prometheus-client:

- `kubelet_runtime_operations_total`, `kubelet_runtime_operations_duration_seconds` and
  `kubelet_runtime_operations_errors_total` by `operation_type`: every CRI call (kubelet/cri/, as upstream's
  instrumented_services.go wraps the remote runtime and image services);
- `kubelet_pod_start_duration_seconds`: from the kubelet seeing a pod for the first time to the pod running (its
  first status write with phase Running), and `kubelet_started_pods_total`;
- the process's own (`process_resident_memory_bytes`, ...).

One registry per process (a kubelet is one process; unit tests that build several share it, and only add).
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.process_collector import ProcessCollector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)

RUNTIME_OPERATIONS = Counter("kubelet_runtime_operations_total",
                             "[ALPHA] Cumulative number of runtime operations by operation type.",
                             ("operation_type",), registry=REGISTRY)
RUNTIME_OPERATIONS_DURATION = Histogram(
    "kubelet_runtime_operations_duration_seconds",
    "[ALPHA] Duration in seconds of runtime operations. Broken down by operation type.", ("operation_type",),
    buckets=tuple(0.005 * 2.5 ** i for i in range(14)), registry=REGISTRY)  # ExponentialBuckets(.005, 2.5, 14)
RUNTIME_OPERATIONS_ERRORS = Counter("kubelet_runtime_operations_errors_total",
                                    "[ALPHA] Cumulative number of runtime operation errors by operation type.",
                                    ("operation_type",), registry=REGISTRY)
POD_START_DURATION = Histogram(
    "kubelet_pod_start_duration_seconds",
    "[ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
    buckets=(0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700,
             3600), registry=REGISTRY)
STARTED_PODS = Counter("kubelet_started_pods_total", "[ALPHA] Cumulative number of pods started",
                       registry=REGISTRY)

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_OPERATIONS: dict[str, str] = {}


def operation_type(request: object) -> str:
    """Upstream's operation_type of a CRI request: `RunPodSandboxRequest` → `run_podsandbox`,
    `ListContainerStatsRequest` → `list_container_stats`."""
    name = type(request).__name__
    found = _OPERATIONS.get(name)
    if found is None:
        found = _OPERATIONS[name] = _CAMEL.sub("_", name.removesuffix("Request")).lower().replace("pod_sandbox",
                                                                                                  "podsandbox")
    return found


def render() -> bytes:
    return generate_latest(REGISTRY)
