"""Discovery documents (/api, /apis, /api/v1, /apis/{group}/{version}) built from the resource
table: what real kubectl reads before anything else."""

from __future__ import annotations

from typing import Any

from machinery.api.resources import RESOURCES, ResourceInfo, group_versions

# verbs per subresource, as upstream's discovery lists them
_SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "binding": ["create"],
    "finalize": ["update"],
    "log": ["get"],
    "exec": ["create", "get"],
    "token": ["create"],
    "eviction": ["create"],
    "ephemeralcontainers": ["get", "patch", "update"],
    "attach": ["create", "get"],
    "portforward": ["create", "get"],
    "proxy": ["create", "delete", "get", "patch", "update"],
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group_list(extra: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Every group; `extra`: the groups of custom resources (group → versions, preferred first), after
    the built-in ones as upstream lists them."""
    groups: dict[str, list[str]] = {}
    for info in RESOURCES:
        if info.group and info.version not in groups.setdefault(info.group, []):
            groups[info.group].append(info.version)
    for group, versions in (extra or {}).items():
        if group not in groups:
            groups[group] = list(versions)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {"name": group, "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
             "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]}}
            for group, versions in groups.items()
        ],
    }


def api_group(group: str, extra: dict[str, list[str]] | None = None) -> dict[str, Any] | None:
    for entry in api_group_list(extra)["groups"]:
        if entry["name"] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **entry}
    return None


def _resource_entry(info: ResourceInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": info.plural, "singularName": info.singular, "namespaced": info.namespaced,
                             "kind": info.kind, "verbs": list(info.verbs)}
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    return entry


def _subresource_entry(info: ResourceInfo, sub: str, kind: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": f"{info.plural}/{sub}", "singularName": "", "namespaced": info.namespaced,
                             "kind": kind or info.kind, "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"])}
    if kind == "Scale":
        entry.update(group="autoscaling", version="v1")
    elif kind == "Binding":
        entry.update(group="", version="v1")
    elif kind == "Eviction":
        entry.update(group="policy", version="v1")
    elif kind == "TokenRequest":
        entry.update(group="authentication.k8s.io", version="v1")
    return entry


def api_resource_list(group_version: str, extra: list[ResourceInfo] | None = None) -> dict[str, Any] | None:
    """The APIResourceList of a group-version; `extra`: custom resources served beside the built-in ones."""
    infos = group_versions().get(group_version)
    more = [i for i in extra or [] if i.api_version == group_version]
    if infos is None and not more:
        return None
    infos = (infos or []) + more
    resources = []
    for info in infos:
        resources.append(_resource_entry(info))
        resources.extend(_subresource_entry(info, sub, kind) for sub, kind in info.subresources.items())
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


VERSION_INFO = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.0-minik8s",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-11-21T00:00:00Z",
    "goVersion": "python3",
    "compiler": "cpython",
    "platform": "linux/amd64",
}
