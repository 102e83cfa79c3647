"""Aggregated discovery (upstream staging/src/k8s.io/apiserver/pkg/endpoints/discovery/aggregated,
KEP 3352): `/api` and `/apis` answer every group, version and resource in one document when the
client asks for `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList` (kubectl ≥ 1.30)
or `v=v2beta1` (kubectl 1.27-1.29), instead of one request per group-version. Built from the same
resource table (and the custom resources served) as the unaggregated documents in discovery.py."""

from __future__ import annotations

import copy
from typing import Any

from apiserver.discovery import _SUBRESOURCE_VERBS
from machinery.api.resources import RESOURCES, ResourceInfo

_GROUP = "apidiscovery.k8s.io"


def negotiate(accept: str) -> str | None:
    """The aggregated-discovery version the Accept header asks for first (v2 or v2beta1), or None."""
    for part in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in part.split(";")[1:] if "=" in p)
        media = part.split(";")[0].strip()
        if media in ("application/json", "*/*") and params.get("g") == _GROUP and \
                params.get("as") == "APIGroupDiscoveryList" and params.get("v") in ("v2", "v2beta1"):
            return params["v"]
        if media in ("application/json", "*/*") and "g" not in params:
            return None  # plain JSON preferred
    return None


def content_type(version: str) -> str:
    return f"application/json;g={_GROUP};v={version};as=APIGroupDiscoveryList"


def _subresource(info: ResourceInfo, sub: str, kind: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"subresource": sub, "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"])}
    if kind == "Scale":
        entry["responseKind"] = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    elif kind == "Binding":
        entry["responseKind"] = {"group": "", "version": "v1", "kind": "Binding"}
    elif kind == "TokenRequest":
        entry["responseKind"] = {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}
    elif kind:
        entry["responseKind"] = {"group": info.group, "version": info.version, "kind": kind}
    else:
        entry["responseKind"] = {"group": "", "version": "", "kind": ""}
    return entry


def _resource(info: ResourceInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": info.plural,
        "responseKind": {"group": info.group, "version": info.version, "kind": info.kind},
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": list(info.verbs),
    }
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    if info.subresources:
        entry["subresources"] = [_subresource(info, sub, kind) for sub, kind in info.subresources.items()]
    return entry


def group_discovery_list(version: str, core: bool, extra: list[ResourceInfo] | None = None,
                         preferred: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """`/api` (core: the legacy group alone) or `/apis` (every named group, custom resources' after the
    built-in ones; `preferred` orders a custom group's versions, most preferred first)."""
    groups: dict[str, dict[str, list[ResourceInfo]]] = {}
    for info in [*RESOURCES, *(extra or [])]:
        if (info.group == "") != core:
            continue
        groups.setdefault(info.group, {}).setdefault(info.version, []).append(info)
    items = []
    for group, versions in groups.items():
        order = (preferred or {}).get(group) or list(versions)
        metadata: dict[str, Any] = {"creationTimestamp": None}
        if group:
            metadata["name"] = group
        items.append({"metadata": metadata, "versions": [
            {"version": v, "resources": [_resource(i) for i in versions[v]], "freshness": "Current"}
            for v in order if v in versions]})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"{_GROUP}/{version}", "metadata": {}, "items": items}


def add_version_alias(document: dict[str, Any], group: str, served: str, alias: str) -> None:
    """A group's `alias` version beside `served`, the same resources in the alias's version, after it (less
    preferred): autoscaling/v1 HorizontalPodAutoscalers, converted from the v2 objects
    (apiserver/endpoints/autoscaling_v1.py)."""
    for item in document["items"]:
        if item["metadata"].get("name") != group:
            continue
        versions = item["versions"]
        source = next((v for v in versions if v["version"] == served), None)
        if source is None or any(v["version"] == alias for v in versions):
            return
        copied = copy.deepcopy(source)
        copied["version"] = alias
        for resource in copied["resources"]:
            kinds = [resource.get("responseKind"), *(s.get("responseKind") for s in resource.get("subresources", []))]
            for kind in kinds:
                if kind and kind.get("group") == group and kind.get("version") == served:
                    kind["version"] = alias
        versions.append(copied)


def group_from_resource_list(resource_list: dict[str, Any]) -> dict[str, Any]:
    """An aggregated group entry for a group served outside the resource table (the metrics-server's
    metrics.k8s.io), from its APIResourceList."""
    group, _, version = resource_list["groupVersion"].rpartition("/")
    resources = [{"resource": r["name"], "responseKind": {"group": group, "version": version, "kind": r["kind"]},
                  "scope": "Namespaced" if r["namespaced"] else "Cluster", "singularResource": r["singularName"],
                  "verbs": list(r["verbs"])} for r in resource_list["resources"]]
    return {"metadata": {"name": group, "creationTimestamp": None},
            "versions": [{"version": version, "resources": resources, "freshness": "Current"}]}
