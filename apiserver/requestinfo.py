"""What a request is about, parsed once (upstream: staging/.../apiserver/pkg/endpoints/request/requestinfo.go,
and the list options its ParameterCodec decodes once): from the path and method, the verb (get, list, watch,
create, update, patch, delete, deletecollection), the API group and version, the resource, subresource,
namespace and name; from the query string, one parsed set of options.

The gate computes a RequestInfo for every request and leaves it in scope["minik8s.request_info"]; the
authorizer, audit, admission (through the write options) and every handler read that one object, so no
second parser can disagree with the first. A parameter given twice counts by its first value, as Go's
url.Values.Get and the parameter codec take it: `?watch=0&watch=1` is a list, and
`?fieldSelector=spec.nodeName%3Dnode-1&fieldSelector=` selects node-1's pods for the authorizer and the
storage alike.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from machinery.api.resources import RESOURCES

SCOPE_KEY = "minik8s.request_info"

# a websocket upgrade (pods/exec as kubectl 1.30+ speaks it) is a GET, as upstream authorizes it
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "GET": "get", "WEBSOCKET": "get"}
# upstream's BasicLongRunningRequestCheck(sets.NewString("watch", "proxy"),
#                                         sets.NewString("attach", "exec", "proxy", "log", "portforward"))
_LONG_RUNNING_VERBS = frozenset({"watch", "proxy"})
_LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})
_READ_ONLY_VERBS = frozenset({"get", "list", "watch"})  # upstream maxinflight's nonMutatingRequestVerbs


class Query:
    """The query string, parsed once: `get` is the first value of a parameter (Go's url.Values.Get),
    `getlist` all of them (dryRun, command). Shared by the requests with the same query: read only."""

    __slots__ = ("_values",)

    def __init__(self, raw: bytes = b"") -> None:
        values: dict[str, list[str]] = {}
        if raw:
            # as Starlette read it: the bytes as latin-1, then %-escapes as UTF-8; blank values kept
            for key, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
                values.setdefault(key, []).append(value)
        self._values = values

    def get(self, name: str, default: Any = None) -> Any:
        values = self._values.get(name)
        return values[0] if values else default

    def getlist(self, name: str) -> list[str]:
        return list(self._values.get(name, ()))

    def __getitem__(self, name: str) -> str:
        values = self._values.get(name)
        if not values:
            raise KeyError(name)
        return values[0]

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def flag(self, name: str) -> bool:
        """A boolean option as upstream's parameter codec decodes it (Convert_Slice_string_To_bool): absent
        is false, "0" or "false" (any case) is false, anything else, even empty, is true."""
        value = self.get(name)
        return value is not None and value != "0" and value.lower() != "false"


@dataclass(frozen=True, slots=True)
class ResourcePath:
    """The resource part of a path after `/api/v1/` or `/apis/{group}/{version}/`."""

    verb: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """upstream request.RequestInfo, plus the parsed query and what the chain decides from it."""

    verb: str
    is_resource_request: bool
    path: str
    query: Query
    api_group: str = ""
    api_version: str = ""
    target: ResourcePath | None = None  # None: not a resource request
    long_running: bool = False
    read_only: bool = True
    asked_timeout: str | None = None  # the client's ?timeout=, a Go duration
    # the authorizer's Attributes after the user (verb, resource request, path, group, version, resource,
    # subresource, namespace, name, field selector): built once, not per request
    attributes: tuple[Any, ...] = ()

    @property
    def resource(self) -> str:
        return self.target.resource if self.target else ""

    @property
    def subresource(self) -> str:
        return (self.target.subresource or "") if self.target else ""

    @property
    def namespace(self) -> str:
        return (self.target.namespace or "") if self.target else ""

    @property
    def name(self) -> str:
        return (self.target.name or "") if self.target else ""


def resolve(method: str, path: str, namespaced: frozenset[str], watch: bool = False) -> ResourcePath | None:
    """Parse the part of a resource path after `/api/v1/` or `/apis/{group}/{version}/`.

    `namespaces/{ns}/{resource}...` is a namespaced request when {resource} is one of the group's
    namespaced resources; otherwise `namespaces/{name}/{subresource}` (e.g. namespaces/x/finalize).
    None for a path of no resource shape.
    """
    parts = [p for p in path.split("/") if p]
    namespace = None
    if len(parts) >= 3 and parts[0] == "namespaces" and parts[2] in namespaced:
        namespace, parts = parts[1], parts[2:]
    if not parts or (len(parts) > 3 and parts[2] != "proxy"):  # {name}/proxy/{path...}: the path is the target's
        return None
    resource = parts[0]
    name = parts[1] if len(parts) > 1 else None
    subresource = parts[2] if len(parts) > 2 else None
    verb = _VERBS.get(method)
    if verb is None:
        return None
    if name is None:
        verb = {"get": "watch" if watch else "list", "delete": "deletecollection"}.get(verb, verb)
    return ResourcePath(verb, resource, namespace, name, subresource)


def _namespaced_by_group_version() -> dict[tuple[str, str], frozenset[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for info in RESOURCES:
        names = out.setdefault((info.group, info.version), set())
        if info.namespaced:
            names.add(info.plural)
    return {k: frozenset(v) for k, v in out.items()}


_GROUP_VERSIONS = _namespaced_by_group_version()
# metrics.k8s.io, served by the metrics-server behind the apiserver (apiserver/endpoints/aggregator.py): its
# paths are resource requests too, authorized as nodes.metrics.k8s.io and pods.metrics.k8s.io (not as
# discovery's `/apis/*`)
_GROUP_VERSIONS[("metrics.k8s.io", "v1beta1")] = frozenset({"pods"})
# road.minik8s.io, served by the road server behind the apiserver: the road of a namespaced object is
# namespaced (authorized as e.g. deployments.road.minik8s.io in that namespace)
_GROUP_VERSIONS[("road.minik8s.io", "v1alpha1")] = frozenset(
    info.plural for info in RESOURCES if info.namespaced and not info.virtual)
# autoscaling/v1 HorizontalPodAutoscalers, served from the v2 storage (apiserver/endpoints/autoscaling_v1.py)
_GROUP_VERSIONS[("autoscaling", "v1")] = frozenset({"horizontalpodautoscalers"})


class _AnyButNamespaceSubresources:
    """For a group-version not built in (a custom resource's, served as its CRD comes): upstream's own
    rule, `namespaces/{ns}/{resource}` is namespaced unless {resource} is a namespace's subresource."""

    def __contains__(self, resource: object) -> bool:
        return resource not in ("status", "finalize")


_CUSTOM_GROUP_VERSION = _AnyButNamespaceSubresources()

_CACHE_SIZE = 4096
# (method, path, query) -> RequestInfo: the same requests come again and again (a controller's creates, a
# kubelet's status writes), and parsing one costs more than the dictionary lookup
_cache: dict[tuple[str, str, bytes], RequestInfo] = {}


def request_info(method: str, path: str, query: bytes) -> RequestInfo:
    """The one RequestInfo of a request (upstream RequestInfoFactory.NewRequestInfo); `method` is the HTTP
    method, "POST" for a websocket upgrade (exec over websockets is authorized as a create)."""
    key = (method, path, query)
    info = _cache.get(key)
    if info is None:
        info = _parse(method, path, query)
        if len(_cache) >= _CACHE_SIZE:
            _cache.clear()
        _cache[key] = info
    return info


def _parse(method: str, path: str, raw_query: bytes) -> RequestInfo:
    query = Query(raw_query)
    group = version = rest = None
    if path.startswith("/api/"):
        version, _, rest = path[5:].partition("/")
        group = ""
    elif path.startswith("/apis/"):
        group, _, tail = path[6:].partition("/")
        version, _, rest = tail.partition("/")
    if rest and group is not None and version is not None:
        namespaced: Any = _GROUP_VERSIONS.get((group, version))
        if namespaced is None and group and version:
            namespaced = _CUSTOM_GROUP_VERSION
        if namespaced is not None:
            target = resolve(method, rest, namespaced, method == "GET" and query.flag("watch"))
            if target is not None:
                verb = target.verb
                attributes = (verb, True, path, group, version, target.resource, target.subresource or "",
                              target.namespace or "", target.name or "", query.get("fieldSelector") or "")
                return RequestInfo(verb, True, path, query, group, version, target,
                                   long_running=(verb in _LONG_RUNNING_VERBS
                                                 or target.subresource in _LONG_RUNNING_SUBRESOURCES),
                                   read_only=verb in _READ_ONLY_VERBS, asked_timeout=query.get("timeout"),
                                   attributes=attributes)
    verb = method.lower()
    return RequestInfo(verb, False, path, query, read_only=verb in _READ_ONLY_VERBS,
                       asked_timeout=query.get("timeout"), attributes=(verb, False, path))


def of_scope(scope: MutableMapping[str, Any]) -> RequestInfo:
    """The request's RequestInfo, as the gate left it (computed here for a scope that did not pass it)."""
    info = scope.get(SCOPE_KEY)
    if info is None:
        kind = scope["type"]
        method = scope.get("method", "GET") if kind == "http" else "POST"
        info = scope[SCOPE_KEY] = request_info(method, scope["path"], scope.get("query_string") or b"")
    return info  # type: ignore[no-any-return]


