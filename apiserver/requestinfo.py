"""What a request is about (upstream: staging/.../apiserver/pkg/endpoints/request/requestinfo.go):
from the path and method, the verb (get, list, watch, create, update, patch, delete,
deletecollection), the resource, subresource, namespace and name. Routing, and later
authorization and audit, read this instead of parsing paths again."""

from __future__ import annotations

from dataclasses import dataclass

# a websocket upgrade (pods/exec as kubectl 1.30+ speaks it) is a GET, as upstream authorizes it
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "GET": "get", "WEBSOCKET": "get"}


@dataclass(frozen=True, slots=True)
class RequestInfo:
    verb: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def resolve(method: str, path: str, namespaced: frozenset[str], watch: bool = False) -> RequestInfo | None:
    """Parse the part of a resource path after `/api/v1/` or `/apis/{group}/{version}/`.

    `namespaces/{ns}/{resource}...` is a namespaced request when {resource} is one of the group's
    namespaced resources; otherwise `namespaces/{name}/{subresource}` (e.g. namespaces/x/finalize).
    None for a path of no resource shape.
    """
    parts = [p for p in path.split("/") if p]
    namespace = None
    if len(parts) >= 3 and parts[0] == "namespaces" and parts[2] in namespaced:
        namespace, parts = parts[1], parts[2:]
    if not parts or len(parts) > 3:
        return None
    resource = parts[0]
    name = parts[1] if len(parts) > 1 else None
    subresource = parts[2] if len(parts) > 2 else None
    verb = _VERBS.get(method)
    if verb is None:
        return None
    if name is None:
        verb = {"get": "watch" if watch else "list", "delete": "deletecollection"}.get(verb, verb)
    return RequestInfo(verb, resource, namespace, name, subresource)
