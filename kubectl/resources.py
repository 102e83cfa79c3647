"""From what the user typed to resources: `deploy`, `deployments.apps`, `po,deploy`, `pod/nginx`, `all`.

Names resolve as kubectl's RESTMapper resolves them: plural, singular, short name or kind, case
insensitively, optionally qualified by group (`deployments.apps`) or version and group
(`deployments.v1.apps`). The table is machinery's RESOURCES; a name it lacks is looked up in the
server's discovery documents before mkubectl says `the server doesn't have a resource type`
(which also makes an unreachable server show up as such, as with kubectl).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from kubectl.errors import CommandError
from machinery.api.resources import RESOURCES, ResourceInfo, resource_for_kind
from machinery.client import ApiClient


class _Unknown(BaseModel):
    """The model of a resource known only from discovery: no patch metadata, any content."""


def _matches(info: ResourceInfo, resource: str) -> bool:
    return resource in (info.plural, info.singular, info.kind.lower()) or resource in info.short_names


@dataclass
class Target:
    """One resource type and the names asked for (none: every object, or a selector's)."""

    info: ResourceInfo
    names: list[str] = field(default_factory=list)


class Resolver:
    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self._discovered: list[ResourceInfo] | None = None

    async def _discovery(self) -> list[ResourceInfo]:
        if self._discovered is None:
            found: list[ResourceInfo] = []
            versions = ["/api/v1"]
            groups = await self.client.request("GET", "/apis")
            for group in (groups or {}).get("groups") or []:
                preferred = (group.get("preferredVersion") or {}).get("groupVersion")
                if preferred:
                    versions.append(f"/apis/{preferred}")
            for path in versions:
                doc = await self.client.request("GET", path)
                group_version = (doc or {}).get("groupVersion", "")
                group, _, version = group_version.rpartition("/")
                for r in (doc or {}).get("resources") or []:
                    if "/" in r.get("name", ""):
                        continue
                    known = resource_for_kind(group_version, r.get("kind", ""))
                    found.append(known or ResourceInfo(
                        group, version, r.get("kind", ""), r["name"], r.get("singularName") or r["kind"].lower(),
                        bool(r.get("namespaced")), _Unknown, short_names=tuple(r.get("shortNames") or ()),
                        categories=tuple(r.get("categories") or ()), verbs=tuple(r.get("verbs") or ()),
                    ))
            self._discovered = found
        return self._discovered

    async def resolve(self, typed: str) -> ResourceInfo:
        """One resource type by any of its names; CommandError if neither we nor the server know it."""
        name = typed.strip().lower()
        if not name:
            raise CommandError("arguments in resource/name form must have a single resource and name")
        resource, _, qualifier = name.partition(".")
        version, group = "", qualifier
        if qualifier and "." in qualifier:
            maybe_version, _, rest = qualifier.partition(".")
            if maybe_version.startswith("v") and maybe_version[1:2].isdigit():
                version, group = maybe_version, rest
        for candidates in (RESOURCES, None):
            infos = candidates if candidates is not None else await self._discovery()
            for info in infos:
                if not _matches(info, resource):
                    continue
                if qualifier and info.group != group:
                    continue
                if version and info.version != version:
                    continue
                return info
        raise CommandError(f'the server doesn\'t have a resource type "{resource}"')

    async def expand(self, typed: str) -> list[ResourceInfo]:
        """`a,b` or `all` → the resource types, in the order given (category `all` in table order)."""
        out: list[ResourceInfo] = []
        for part in typed.split(","):
            if part.strip().lower() == "all":
                out.extend(i for i in RESOURCES if "all" in i.categories)
            else:
                out.append(await self.resolve(part))
        unique: list[ResourceInfo] = []
        for info in out:
            if info not in unique:
                unique.append(info)
        return unique

    async def for_object(self, obj: dict[str, Any]) -> ResourceInfo | None:
        """The resource of a manifest's apiVersion and kind (None: no such kind on the server)."""
        api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
        info = resource_for_kind(api_version, kind)
        if info is not None:
            return info
        for candidate in await self._discovery():
            if candidate.api_version == api_version and candidate.kind == kind:
                return candidate
        return None


def multiple_types_requested(args: list[str]) -> bool:
    """resource.MultipleTypesRequested: `all`, `a,b`, or TYPE/NAME pairs of different types."""
    if len(args) == 1 and args[0].lower() == "all":
        return True
    kinds: set[str] = set()
    for arg in args:
        if "/" in arg:
            kinds.add(arg.split("/", 1)[0].lower())
    if kinds:
        return len(kinds) > 1
    return bool(args) and len({t.lower() for t in args[0].split(",")}) > 1


async def targets_from_args(resolver: Resolver, args: list[str]) -> list[Target]:
    """`TYPE [NAME...]`, `TYPE1,TYPE2 [NAME...]` or `TYPE/NAME...` as a list of targets."""
    if not args:
        raise CommandError("Required resource not specified.")
    with_slash = [a for a in args if "/" in a]
    if with_slash and len(with_slash) != len(args):
        raise CommandError(
            "there is no need to specify a resource type as a separate argument when passing arguments in "
            "resource/name form (e.g. 'mkubectl get resource/<resource_name>' instead of "
            "'mkubectl get resource resource/<resource_name>'"
        )
    targets: list[Target] = []
    if with_slash:
        for arg in args:
            typed, _, name = arg.partition("/")
            if not typed or not name or "/" in name:
                raise CommandError("arguments in resource/name form must have a single resource and name")
            info = await resolver.resolve(typed)
            if targets and targets[-1].info == info:
                targets[-1].names.append(name)
            else:
                targets.append(Target(info, [name]))
        return targets
    infos = await resolver.expand(args[0])
    return [Target(info, list(args[1:])) for info in infos]
