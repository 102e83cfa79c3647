"""The `metrics.k8s.io/v1beta1` API as metrics-server serves it (pkg/api: node.go, pod.go,
install.go): NodeMetrics and PodMetrics, get and list, label selectors, and the group's discovery.

    GET /apis/metrics.k8s.io/v1beta1                          APIResourceList (nodes, pods)
    GET /apis/metrics.k8s.io/v1beta1/nodes[/NAME]             NodeMetrics(List)
    GET /apis/metrics.k8s.io/v1beta1/pods                     PodMetricsList of every namespace
    GET /apis/metrics.k8s.io/v1beta1/namespaces/NS/pods[/NAME]

CPU is served in nanocores ("12345678n") and memory in bytes as a binary quantity ("10240Ki"), as
metrics-server's quantities print; `timestamp` is the newer point of the window, `window` the span
between the two points the rate is taken from. An object without a rate yet is left out of lists
and 404 on get, as upstream (`nodes.metrics.k8s.io "x" not found`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from aiohttp import web

from machinery.quantity import BINARY_SI, Quantity
from machinery.selectors import SelectorError, parse_label_selector
from machinery.status import failure
from machinery.timeutil import format_go_duration, format_rfc3339, now_rfc3339
from metrics_server.storage import Storage, Usage

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
PREFIX = f"/apis/{GROUP_VERSION}"

Obj = dict[str, Any]

RESOURCE_LIST: Obj = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
    "resources": [
        {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": ["get", "list"]},
        {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]},
    ],
}
API_GROUP: Obj = {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
                  "versions": [{"groupVersion": GROUP_VERSION, "version": VERSION}],
                  "preferredVersion": {"groupVersion": GROUP_VERSION, "version": VERSION}}


def cpu_quantity(nano_cores: int) -> str:
    return str(Quantity(Fraction(max(nano_cores, 0), 10**9)))


def memory_quantity(working_set: int) -> str:
    return str(Quantity(Fraction(max(working_set, 0)), BINARY_SI))


def usage_of(u: Usage) -> Obj:
    return {"cpu": cpu_quantity(u.nano_cores), "memory": memory_quantity(u.memory)}


def status(code: int, reason: str, message: str, details: Obj | None = None) -> web.Response:
    return web.json_response(failure(code, reason, message, details), status=code)


def not_found(resource: str, name: str) -> web.Response:
    return status(404, "NotFound", f'{resource}.{GROUP} "{name}" not found',
                  {"name": name, "group": GROUP, "kind": resource})


class MetricsApi:
    """The handlers over the storage and the informers of nodes and pods (for names and labels)."""

    def __init__(self, storage: Storage, nodes: Any, pods: Any) -> None:
        self.storage = storage
        self.nodes = nodes
        self.pods = pods

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get(f"/apis/{GROUP}", self.group),
            web.get(PREFIX, self.resource_list),
            web.get(f"{PREFIX}/nodes", self.list_nodes),
            web.get(f"{PREFIX}/nodes/{{name}}", self.get_node),
            web.get(f"{PREFIX}/pods", self.list_pods),
            web.get(f"{PREFIX}/namespaces/{{namespace}}/pods", self.list_pods),
            web.get(f"{PREFIX}/namespaces/{{namespace}}/pods/{{name}}", self.get_pod),
        ]

    async def group(self, request: web.Request) -> web.Response:
        return web.json_response(API_GROUP)

    async def resource_list(self, request: web.Request) -> web.Response:
        return web.json_response(RESOURCE_LIST)

    # -- nodes ------------------------------------------------------------------------------------

    def _node_metrics(self, node: Any) -> Obj | None:
        name = node.metadata.name or ""
        usage = self.storage.node_usage(name)
        if usage is None:
            return None
        meta: Obj = {"name": name, "creationTimestamp": now_rfc3339()}
        if node.metadata.labels:
            meta["labels"] = dict(node.metadata.labels)
        return {"kind": "NodeMetrics", "apiVersion": GROUP_VERSION, "metadata": meta,
                "timestamp": format_rfc3339(usage.timestamp), "window": format_go_duration(usage.window),
                "usage": usage_of(usage)}

    async def list_nodes(self, request: web.Request) -> web.Response:
        try:
            selector = parse_label_selector(request.query.get("labelSelector", ""))
        except SelectorError as e:
            return status(400, "BadRequest", str(e))
        wanted = _field_name(request)
        items = []
        for node in sorted(self.nodes.list(), key=lambda n: n.metadata.name or ""):
            if not selector.matches(node.metadata.labels or {}) or (wanted and node.metadata.name != wanted):
                continue
            metrics = self._node_metrics(node)
            if metrics is not None:
                items.append(metrics)
        return web.json_response({"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION,
                                  "metadata": {}, "items": items})

    async def get_node(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        node = self.nodes.get(name)
        metrics = self._node_metrics(node) if node is not None else None
        if metrics is None:
            return not_found("nodes", name)
        return web.json_response(metrics)

    # -- pods -------------------------------------------------------------------------------------

    def _pod_metrics(self, pod: Any) -> Obj | None:
        namespace, name = pod.metadata.namespace or "", pod.metadata.name or ""
        found = self.storage.pod_usage(namespace, name)
        if found is None:
            return None
        timestamp, window, containers = found
        meta: Obj = {"name": name, "namespace": namespace, "creationTimestamp": now_rfc3339()}
        if pod.metadata.labels:
            meta["labels"] = dict(pod.metadata.labels)
        return {"kind": "PodMetrics", "apiVersion": GROUP_VERSION, "metadata": meta,
                "timestamp": format_rfc3339(timestamp), "window": format_go_duration(window),
                "containers": [{"name": c, "usage": usage_of(u)} for c, u in sorted(containers.items())]}

    async def list_pods(self, request: web.Request) -> web.Response:
        namespace = request.match_info.get("namespace")
        try:
            selector = parse_label_selector(request.query.get("labelSelector", ""))
        except SelectorError as e:
            return status(400, "BadRequest", str(e))
        wanted = _field_name(request)
        items = []
        for pod in sorted(self.pods.list(), key=lambda p: (p.metadata.namespace or "", p.metadata.name or "")):
            if namespace and pod.metadata.namespace != namespace:
                continue
            if not selector.matches(pod.metadata.labels or {}) or (wanted and pod.metadata.name != wanted):
                continue
            metrics = self._pod_metrics(pod)
            if metrics is not None:
                items.append(metrics)
        return web.json_response({"kind": "PodMetricsList", "apiVersion": GROUP_VERSION,
                                  "metadata": {}, "items": items})

    async def get_pod(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        pod = self.pods.get(name, namespace)
        metrics = self._pod_metrics(pod) if pod is not None else None
        if metrics is None:
            return not_found("pods", name)
        return web.json_response(metrics)


def _field_name(request: web.Request) -> str:
    """metadata.name=X of a field selector (the one field metrics-server's lists take)."""
    for term in (request.query.get("fieldSelector") or "").split(","):
        key, _, value = term.partition("=")
        if key.strip() == "metadata.name":
            return value.strip().lstrip("=")
    return ""
