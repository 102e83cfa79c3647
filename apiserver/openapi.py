"""The apiserver's OpenAPI documents, generated from the pydantic models of machinery.api.

- `/openapi/v3` (kubectl 1.30+): `openapi_v3_root()` lists one document per group-version
  (`api/v1`, `apis/apps/v1`, ...) plus `api` and `apis`; `openapi_v3_group(path)` is that
  OpenAPI 3.0 document. kubectl looks for the PATCH operation of a kind (found by its
  `x-kubernetes-group-version-kind`) and its `fieldValidation` parameter; when present it leaves
  validation to the server (`fieldValidation=Strict`).
- `/openapi/v2` (kubectl 1.27, 1.28, as protobuf only): `openapi_v2_json()` is the Swagger 2.0
  document, `openapi_v2_protobuf()` the same as gnostic's `openapi.v2.Document` message.

The models are the single source of the schemas: `models_json_schema(by_alias=True)`, then
post-processed into the shape upstream's kube-openapi publishes — definitions named
`io.k8s.api.core.v1.Pod`, no nulls (`anyOf [X, null]` → X), no titles, `apiVersion`/`kind` plain
strings, IntOrString and Quantity as upstream's named definitions, the strategic-merge extensions
(`x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`) kept on their fields, and the kinds
marked with `x-kubernetes-group-version-kind`.

Everything is computed once per process (functools.cache); the returned dicts are shared, so callers
must not mutate them.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, RootModel, create_model
from pydantic.json_schema import CoreModeRef, DefsRef, GenerateJsonSchema, models_json_schema

from apiserver.openapi_v2_proto import encode_document
from machinery.api import authentication_v1, meta
from machinery.api.base import ApiModel
from machinery.api.resources import RESOURCES, ResourceInfo, group_versions

V2_PROTOBUF_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
V2_JSON_CONTENT_TYPE = "application/json"
V3_JSON_CONTENT_TYPE = "application/json"

META_PREFIX = "io.k8s.apimachinery.pkg.apis.meta.v1"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
PATCH = f"{META_PREFIX}.Patch"
STATUS = f"{META_PREFIX}.Status"
DELETE_OPTIONS = f"{META_PREFIX}.DeleteOptions"

PATCH_CONTENT_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)

# Python module of a model → (definition name prefix, group, version).
MODULES: dict[str, tuple[str, str, str]] = {
    "machinery.api.meta": (META_PREFIX, "", "v1"),
    "machinery.api.core_v1": ("io.k8s.api.core.v1", "", "v1"),
    "machinery.api.apps_v1": ("io.k8s.api.apps.v1", "apps", "v1"),
    "machinery.api.batch_v1": ("io.k8s.api.batch.v1", "batch", "v1"),
    "machinery.api.coordination_v1": ("io.k8s.api.coordination.v1", "coordination.k8s.io", "v1"),
    "machinery.api.discovery_v1": ("io.k8s.api.discovery.v1", "discovery.k8s.io", "v1"),
    "machinery.api.autoscaling_v1": ("io.k8s.api.autoscaling.v1", "autoscaling", "v1"),
    "machinery.api.autoscaling_v2": ("io.k8s.api.autoscaling.v2", "autoscaling", "v2"),
    "machinery.api.storage_v1": ("io.k8s.api.storage.v1", "storage.k8s.io", "v1"),
    "machinery.api.networking_v1": ("io.k8s.api.networking.v1", "networking.k8s.io", "v1"),
    "machinery.api.scheduling_v1": ("io.k8s.api.scheduling.v1", "scheduling.k8s.io", "v1"),
    "machinery.api.rbac_v1": ("io.k8s.api.rbac.v1", "rbac.authorization.k8s.io", "v1"),
    "machinery.api.admissionregistration_v1": ("io.k8s.api.admissionregistration.v1",
                                               "admissionregistration.k8s.io", "v1"),
    "machinery.api.authorization_v1": ("io.k8s.api.authorization.v1", "authorization.k8s.io", "v1"),
    "machinery.api.authentication_v1": ("io.k8s.api.authentication.v1", "authentication.k8s.io", "v1"),
    "machinery.api.policy_v1": ("io.k8s.api.policy.v1", "policy", "v1"),
    "machinery.api.authentication_v1beta1": ("io.k8s.api.authentication.v1beta1", "authentication.k8s.io",
                                             "v1beta1"),
    "machinery.api.authentication_v1alpha1": ("io.k8s.api.authentication.v1alpha1", "authentication.k8s.io",
                                              "v1alpha1"),
    "machinery.api.apiextensions_v1": ("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1",
                                       "apiextensions.k8s.io", "v1"),
    __name__: (META_PREFIX, "", "v1"),  # the discovery types and Patch below
}

_SUBRESOURCE_MODULES = (authentication_v1,)  # TokenRequest: the kind of serviceaccounts/token, found by name

_INFO = {"title": "Kubernetes", "version": "unversioned"}
_V2_REF = "#/definitions/"
_V3_REF = "#/components/schemas/"


# ----------------------------------------------------------------------------- meta/v1 types
# Types of meta/v1 that only the OpenAPI documents mention: the discovery documents (the `api` and
# `apis` OpenAPI documents describe `/api`, `/apis` and `/apis/<group>/<version>`) and Patch.


class Patch(RootModel[dict[str, Any]]):
    """Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."""


class ServerAddressByClientCIDR(ApiModel):
    client_cidr: str = Field(alias="clientCIDR")
    server_address: str


class APIVersions(ApiModel):
    """APIVersions lists the versions that are available, to allow clients to discover the API at /api."""

    api_version: str | None = None
    kind: str | None = None
    versions: list[str]
    server_address_by_client_cidrs: list[ServerAddressByClientCIDR] = Field(
        alias="serverAddressByClientCIDRs")


class GroupVersionForDiscovery(ApiModel):
    group_version: str
    version: str


class APIGroup(ApiModel):
    """APIGroup contains the name, the supported versions, and the preferred version of a group."""

    api_version: str | None = None
    kind: str | None = None
    name: str
    versions: list[GroupVersionForDiscovery]
    preferred_version: GroupVersionForDiscovery | None = None
    server_address_by_client_cidrs: list[ServerAddressByClientCIDR] | None = Field(
        None, alias="serverAddressByClientCIDRs")


class APIGroupList(ApiModel):
    """APIGroupList is a list of APIGroup, to allow clients to discover the API at /apis."""

    api_version: str | None = None
    kind: str | None = None
    groups: list[APIGroup]


class APIResource(ApiModel):
    name: str
    singular_name: str
    namespaced: bool
    group: str | None = None
    version: str | None = None
    kind: str
    verbs: list[str]
    short_names: list[str] | None = None
    categories: list[str] | None = None
    storage_version_hash: str | None = None


class APIResourceList(ApiModel):
    """APIResourceList lists the resources of a group-version, and whether they are namespaced."""

    api_version: str | None = None
    kind: str | None = None
    group_version: str
    resources: list[APIResource]


# ----------------------------------------------------------------------------- definitions


def definition_name(model: type) -> str | None:
    """`io.k8s.api.core.v1.Pod` for core_v1.Pod; None for a model outside MODULES."""
    entry = MODULES.get(model.__module__)
    return f"{entry[0]}.{model.__name__}" if entry else None


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": version}


class _KubernetesNames(GenerateJsonSchema):
    """Names definitions the upstream way: by the Go package of the type, then the type's name."""

    def get_defs_ref(self, core_mode_ref: CoreModeRef) -> DefsRef:
        defs_ref = super().get_defs_ref(core_mode_ref)
        core_ref = core_mode_ref[0]
        no_id = core_ref.rsplit(":", 1)[0]
        if "[" not in no_id:  # generics keep pydantic's names
            for module, (prefix, _, _) in MODULES.items():
                if no_id.startswith(module + "."):
                    qualname = no_id[len(module) + 1:]
                    name = DefsRef(f"{prefix}.{qualname.rsplit('.', 1)[-1]}")
                    self._prioritized_defsref_choices[defs_ref].insert(0, name)
                    break
        return defs_ref


@dataclass
class _Catalog:
    """Every definition, with `#/definitions/` references, and how to find a kind's definition."""

    definitions: dict[str, dict[str, Any]]
    by_model: dict[type, str]
    list_of: dict[type, str] = field(default_factory=dict)  # kind model → its List definition


def _list_model(model: type[BaseModel], kind: str) -> type[BaseModel]:
    """`PodList`, made from Pod: what a list request answers."""
    return create_model(
        f"{kind}List",
        __base__=ApiModel,
        __module__=model.__module__,
        __doc__=f"{kind}List is a list of {kind} objects.",
        api_version=(str | None, None),
        kind=(str | None, None),
        metadata=(meta.ListMeta | None, None),
        items=(list[model], ...),  # type: ignore[valid-type]
    )


def _find_kind(name: str, near: type[BaseModel]) -> type[BaseModel] | None:
    """The model of a subresource's kind (Scale, Binding): in the module of `near`, else any module."""
    modules = [near.__module__, *MODULES]
    for module_name in modules:
        candidate = getattr(sys.modules.get(module_name), name, None)
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _kind_models() -> list[tuple[type[BaseModel], list[dict[str, str]]]]:
    """The top-level kinds to publish, each with its x-kubernetes-group-version-kind list."""
    kinds: dict[type[BaseModel], list[dict[str, str]]] = {}
    for info in RESOURCES:
        kinds.setdefault(info.model, []).append(_gvk(info.group, info.version, info.kind))
        for kind in info.subresources.values():
            model = _find_kind(kind, info.model) if kind and kind != info.kind else None
            if model is not None and model.__module__ in MODULES:
                _, group, version = MODULES[model.__module__]
                gvk = _gvk(group, version, kind)
                if gvk not in kinds.setdefault(model, []):
                    kinds[model].append(gvk)
    kinds[meta.Status] = [_gvk("", "v1", "Status")]
    kinds[meta.DeleteOptions] = [_gvk(*_split_api_version(gv), "DeleteOptions") for gv in group_versions()]
    if _gvk("", "v1", "DeleteOptions") not in kinds[meta.DeleteOptions]:
        kinds[meta.DeleteOptions].insert(0, _gvk("", "v1", "DeleteOptions"))
    kinds[APIVersions] = [_gvk("", "v1", "APIVersions")]
    kinds[APIGroupList] = [_gvk("", "v1", "APIGroupList")]
    kinds[APIGroup] = [_gvk("", "v1", "APIGroup")]
    kinds[APIResourceList] = [_gvk("", "v1", "APIResourceList")]
    return list(kinds.items())


def _split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


@functools.cache
def _catalog() -> _Catalog:
    kinds = _kind_models()
    lists: dict[type, type[BaseModel]] = {}
    models: list[type[BaseModel]] = [model for model, _ in kinds]
    gvks: dict[type, list[dict[str, str]]] = dict(kinds)
    for info in RESOURCES:
        if info.model not in lists:
            list_model = _list_model(info.model, info.kind)
            lists[info.model] = list_model
            models.append(list_model)
            gvks[list_model] = [_gvk(info.group, info.version, f"{info.kind}List")]
    models.append(Patch)

    key_map, schema = models_json_schema(
        [(model, "validation") for model in models],
        by_alias=True,
        ref_template=_V2_REF + "{model}",
        schema_generator=_KubernetesNames,
    )
    raw_defs: dict[str, Any] = schema.get("$defs", {})
    by_model = {model: key_map[(model, "validation")]["$ref"].removeprefix(_V2_REF) for model in models}

    definitions = {name: _clean(value) for name, value in raw_defs.items()}
    definitions[INT_OR_STRING] = {
        "description": "IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML "
        "marshalling and unmarshalling, it produces or consumes the inner type.  This allows you to have, "
        "for example, a JSON field that can accept a name or number.",
        "type": "string",
        "format": "int-or-string",
    }
    definitions[QUANTITY] = {
        "description": "Quantity is a fixed-point representation of a number: \"64Mi\", \"250m\", \"1\".",
        "type": "string",
    }
    _inline_scalars(definitions)
    for model, gvk_list in gvks.items():
        definitions[by_model[model]]["x-kubernetes-group-version-kind"] = gvk_list
    definitions = {name: definitions[name] for name in sorted(definitions)}
    return _Catalog(definitions, by_model, {kind: by_model[lst] for kind, lst in lists.items()})


def _merge_any_of(options: list[Any]) -> dict[str, Any]:
    """One schema for what pydantic wrote as anyOf (after dropping null)."""
    if len(options) == 1:
        return dict(options[0])
    types = {option.get("type") for option in options if isinstance(option, dict) and len(option) == 1}
    if len(types) == len(options):
        if types == {"integer", "string"}:
            return {"$ref": _V2_REF + INT_OR_STRING}
        if types == {"integer", "number", "string"}:
            return {"$ref": _V2_REF + QUANTITY}
        if types == {"integer", "number"}:
            return {"type": "number"}
    return {}  # anything: kube-openapi reads a schema without type as arbitrary


def _clean(node: Any) -> Any:
    """pydantic's JSON Schema → kube-openapi's dialect (shared by the v2 and v3 documents)."""
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    while "anyOf" in node:
        options = [o for o in node.pop("anyOf") if o != {"type": "null"}]
        inner = _merge_any_of(options)
        if "$ref" in inner:
            node.pop("x-kubernetes-int-or-string", None)  # said by the named definition
        node = {**inner, **{k: v for k, v in node.items() if k not in inner or k == "description"}}
    for key in ("title", "default", "examples", "$defs"):
        node.pop(key, None)
    if "const" in node:  # Literal["v1"]: apiVersion and kind are plain strings
        value = node.pop("const")
        if isinstance(value, str):
            node["type"] = "string"
    if isinstance(node.get("additionalProperties"), bool):
        # false: every model forbids unknown fields; true: dict[str, Any], which "object" says
        del node["additionalProperties"]
    for bound in ("Minimum", "Maximum"):  # JSON Schema 2020-12 → OpenAPI 2.0/3.0 form
        value = node.get(f"exclusive{bound}")
        if isinstance(value, int | float) and not isinstance(value, bool):
            node[bound.lower()] = value
            node[f"exclusive{bound}"] = True
    for key in ("properties",):
        if key in node:
            node[key] = {name: _clean(value) for name, value in node[key].items()}
    for key in ("items", "additionalProperties", "allOf", "oneOf"):
        if key in node:
            node[key] = _clean(node[key])
    if "$ref" in node:
        node.pop("type", None)
    return node


def _inline_scalars(definitions: dict[str, dict[str, Any]]) -> None:
    """Inline and drop definitions that are not objects (enums, aliases), as upstream inlines them."""
    keep = {INT_OR_STRING, QUANTITY}
    scalars = {
        name: schema for name, schema in definitions.items()
        if name not in keep and schema.get("type") not in ("object", None) and "properties" not in schema
    }
    if not scalars:
        return

    def visit(node: Any) -> Any:
        if isinstance(node, list):
            return [visit(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref", "")
        name = ref.removeprefix(_V2_REF)
        if name in scalars:
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**scalars[name], **rest}
        return {k: visit(v) for k, v in node.items()}

    for name in scalars:
        del definitions[name]
    for name in list(definitions):
        definitions[name] = visit(definitions[name])


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _reachable(definitions: dict[str, dict[str, Any]], roots: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The definitions `roots` name, and all they refer to, in name order."""
    seen: set[str] = set()
    todo = [root for root in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(ref.removeprefix(_V2_REF) for ref in _refs(definitions[name]))
    return {name: definitions[name] for name in sorted(seen)}


def _rewrite_refs(node: Any, prefix: str) -> Any:
    if isinstance(node, dict):
        out = {k: _rewrite_refs(v, prefix) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith(_V2_REF):
            out["$ref"] = prefix + ref.removeprefix(_V2_REF)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(item, prefix) for item in node]
    return node


# ----------------------------------------------------------------------------- paths and operations

# Query parameters: name → (type, description).
_PARAMS: dict[str, tuple[str, str]] = {
    "pretty": ("string", "If 'true', then the output is pretty printed."),
    "dryRun": ("string", "When present, indicates that modifications should not be persisted. An invalid "
               "or unrecognized dryRun directive will result in an error response and no further processing "
               "of the request. Valid values are: - All: all dry run stages will be processed"),
    "fieldManager": ("string", "fieldManager is a name associated with the actor or entity that is making "
                     "these changes. The value must be less than or 128 characters long, and only contain "
                     "printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint."),
    "fieldValidation": ("string", "fieldValidation instructs the server on how to handle objects in the "
                        "request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: "
                        "- Ignore: unknown fields are dropped silently. - Warn: a warning is sent for each "
                        "unknown field. - Strict: the request fails with a BadRequest error."),
    "force": ("boolean", "Force is going to \"force\" Apply requests. It means user will re-acquire "
              "conflicting fields owned by other people. Force flag must be unset for non-apply patch "
              "requests."),
    "gracePeriodSeconds": ("integer", "The duration in seconds before the object should be deleted. Value "
                           "must be non-negative integer. The value zero indicates delete immediately."),
    "orphanDependents": ("boolean", "Deprecated: please use the PropagationPolicy."),
    "propagationPolicy": ("string", "Whether and how garbage collection will be performed: 'Orphan', "
                          "'Background' or 'Foreground'."),
    "allowWatchBookmarks": ("boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."),
    "continue": ("string", "The continue option should be set when retrieving more results from the server."),
    "fieldSelector": ("string", "A selector to restrict the list of returned objects by their fields. "
                      "Defaults to everything."),
    "labelSelector": ("string", "A selector to restrict the list of returned objects by their labels. "
                      "Defaults to everything."),
    "limit": ("integer", "limit is a maximum number of responses to return for a list call."),
    "resourceVersion": ("string", "resourceVersion sets a constraint on what resource versions a request may "
                        "be served from."),
    "resourceVersionMatch": ("string", "resourceVersionMatch determines how resourceVersion is applied to "
                             "list calls."),
    "timeoutSeconds": ("integer", "Timeout for the list/watch call."),
    "watch": ("boolean", "Watch for changes to the described resources and return them as a stream of add, "
              "update, and remove notifications. Specify resourceVersion."),
    "container": ("string", "The container for which to stream logs (or in which to execute the command)."),
    "follow": ("boolean", "Follow the log stream of the pod."),
    "limitBytes": ("integer", "If set, the number of bytes to read from the server before terminating the "
                   "log output."),
    "previous": ("boolean", "Return previous terminated container logs."),
    "sinceSeconds": ("integer", "A relative time in seconds before the current time from which to show "
                     "logs."),
    "tailLines": ("integer", "If set, the number of lines from the end of the logs to show."),
    "timestamps": ("boolean", "If true, add an RFC3339 timestamp at the beginning of every line of log "
                   "output."),
    "command": ("string", "Command is the remote command to execute. argv array."),
    "stdin": ("boolean", "Redirect the standard input stream of the pod for this call."),
    "stdout": ("boolean", "Redirect the standard output stream of the pod for this call."),
    "stderr": ("boolean", "Redirect the standard error stream of the pod for this call."),
    "tty": ("boolean", "TTY if true indicates that a tty will be allocated for the exec call."),
    "ports": ("integer", "List of ports to forward Required when using WebSockets"),
}
_LIST_PARAMS = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit",
                "resourceVersion", "resourceVersionMatch", "timeoutSeconds", "watch")
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_PATCH_PARAMS = (*_WRITE_PARAMS, "force")
_DELETE_PARAMS = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")
_LOG_PARAMS = ("container", "follow", "limitBytes", "previous", "sinceSeconds", "tailLines", "timestamps")
_EXEC_PARAMS = ("command", "container", "stderr", "stdin", "stdout", "tty")
_CONNECT_PARAMS = {"exec": _EXEC_PARAMS, "attach": ("container", "stderr", "stdin", "stdout", "tty"),
                   "portforward": ("ports",)}

_TEXT: dict[str, Any] = {"type": "string"}  # a response that is not an object (logs, exec)


@dataclass
class _Operation:
    method: str  # get | put | post | patch | delete
    operation_id: str
    action: str  # x-kubernetes-action
    gvk: dict[str, str]
    description: str
    tag: str
    params: tuple[str, ...] = ()
    body: str | None = None  # definition name of the request body
    responses: dict[str, str | dict[str, Any]] = field(default_factory=dict)  # code → definition / schema
    consumes: tuple[str, ...] = ("*/*",)
    produces: tuple[str, ...] = ("application/json",)


@dataclass
class _Path:
    path: str
    path_params: tuple[str, ...]
    operations: list[_Operation]


def _group_token(group: str) -> str:
    """Upstream's operation-id spelling of a group: "" → Core, coordination.k8s.io → Coordination."""
    if not group:
        return "Core"
    group = group.removesuffix(".k8s.io")
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[.\-]", group) if part)


def _tag(group: str, version: str) -> str:
    """Upstream's tag of a group-version: core_v1, apps_v1, coordination_v1."""
    token = _group_token(group)
    return f"{token[:1].lower()}{token[1:]}_{version}"


def _resource_paths(info: ResourceInfo, catalog: _Catalog) -> list[_Path]:
    gv = _group_token(info.group) + info.version[:1].upper() + info.version[1:]
    tag = _tag(info.group, info.version)
    gvk = _gvk(info.group, info.version, info.kind)
    kind_def = catalog.by_model[info.model]
    list_def = catalog.list_of[info.model]
    scope = "Namespaced" if info.namespaced else ""
    verbs = set(info.verbs)
    base = f"{info.prefix}/namespaces/{{namespace}}/{info.plural}" if info.namespaced else (
        f"{info.prefix}/{info.plural}")
    scope_params: tuple[str, ...] = ("namespace",) if info.namespaced else ()
    kind_responses: dict[str, str | dict[str, Any]] = {"200": kind_def, "201": kind_def}
    paths: list[_Path] = []

    def op(method: str, verb: str, action: str, description: str, suffix: str = "", **kw: Any) -> _Operation:
        # upstream: patchAppsV1NamespacedDeploymentScale, connectCoreV1GetNamespacedPodExec
        verb, _, mid = verb.partition(":")
        return _Operation(method, f"{verb}{gv}{mid}{scope}{info.kind}{suffix}", action, kw.pop("gvk", gvk),
                          description, tag, **kw)

    collection: list[_Operation] = []
    if "list" in verbs:
        collection.append(op("get", "list", "list", f"list or watch objects of kind {info.kind}",
                             params=_LIST_PARAMS, responses={"200": list_def},
                             produces=("application/json", "application/json;stream=watch")))
    if "create" in verbs:
        collection.append(op("post", "create", "post", f"create a {info.kind}", params=_WRITE_PARAMS,
                             body=kind_def, responses={**kind_responses, "202": kind_def}))
    if "deletecollection" in verbs:
        collection.append(op("delete", "deleteCollection", "deletecollection",
                             f"delete collection of {info.kind}", params=(*_DELETE_PARAMS, *_LIST_PARAMS),
                             body=DELETE_OPTIONS, responses={"200": STATUS}))
    if collection:
        paths.append(_Path(base, scope_params, collection))

    item: list[_Operation] = []
    if "get" in verbs:
        item.append(op("get", "read", "get", f"read the specified {info.kind}", responses={"200": kind_def}))
    if "update" in verbs:
        item.append(op("put", "replace", "put", f"replace the specified {info.kind}", params=_WRITE_PARAMS,
                       body=kind_def, responses=kind_responses))
    if "patch" in verbs:
        item.append(op("patch", "patch", "patch", f"partially update the specified {info.kind}",
                       params=_PATCH_PARAMS, body=PATCH, responses=kind_responses,
                       consumes=PATCH_CONTENT_TYPES))
    if "delete" in verbs:
        item.append(op("delete", "delete", "delete", f"delete a {info.kind}", params=_DELETE_PARAMS,
                       body=DELETE_OPTIONS, responses={"200": STATUS, "202": STATUS}))
    if item:
        paths.append(_Path(f"{base}/{{name}}", ("name", *scope_params), item))

    if info.namespaced and "list" in verbs:
        paths.append(_Path(f"{info.prefix}/{info.plural}", (), [_Operation(
            "get", f"list{gv}{info.kind}ForAllNamespaces", "list", gvk,
            f"list or watch objects of kind {info.kind}", tag, params=_LIST_PARAMS,
            responses={"200": list_def}, produces=("application/json", "application/json;stream=watch"))]))

    for sub, sub_kind in info.subresources.items():
        paths.extend(_subresource_paths(info, sub, sub_kind, base, scope_params, op, catalog))
    return paths


def _subresource_paths(info: ResourceInfo, sub: str, sub_kind: str, base: str, scope_params: tuple[str, ...],
                       op: Any, catalog: _Catalog) -> list[_Path]:
    path = f"{base}/{{name}}/{sub}"
    params = ("name", *scope_params)
    title = sub[:1].upper() + sub[1:]
    if sub_kind == info.kind or sub in ("status", "scale"):
        model = info.model if sub_kind == info.kind else _find_kind(sub_kind, info.model)
        if model is None or model not in catalog.by_model:
            return []
        definition = catalog.by_model[model]
        _, group, version = MODULES[model.__module__]
        gvk = _gvk(group, version, sub_kind) if model is not info.model else _gvk(info.group, info.version,
                                                                                  info.kind)
        responses = {"200": definition, "201": definition}
        return [_Path(path, params, [
            op("get", "read", "get", f"read {sub} of the specified {info.kind}", title,
               gvk=gvk, responses={"200": definition}),
            op("put", "replace", "put", f"replace {sub} of the specified {info.kind}", title,
               gvk=gvk, params=_WRITE_PARAMS, body=definition, responses=responses),
            op("patch", "patch", "patch", f"partially update {sub} of the specified {info.kind}", title,
               gvk=gvk, params=_PATCH_PARAMS, body=PATCH, responses=responses, consumes=PATCH_CONTENT_TYPES),
        ])]
    if sub_kind and sub != "proxy":  # binding: create only
        model = _find_kind(sub_kind, info.model)
        if model is None or model not in catalog.by_model:
            return []
        definition = catalog.by_model[model]
        _, group, version = MODULES[model.__module__]
        return [_Path(path, params, [
            op("post", "create", "post", f"create {sub} of a {info.kind}", title,
               gvk=_gvk(group, version, sub_kind), params=_WRITE_PARAMS, body=definition,
               responses={"200": definition, "201": definition, "202": definition}),
        ])]
    if sub == "log":
        return [_Path(path, params, [
            op("get", "read", "get", f"read log of the specified {info.kind}", title, params=_LOG_PARAMS,
               responses={"200": _TEXT}, produces=("text/plain",)),
        ])]
    # exec, attach, portforward, proxy: connections (upgraded to a stream)
    connect_gvk = _gvk(info.group, info.version, f"{info.kind}{title}Options")
    return [_Path(path, params, [
        op(method, f"connect:{method.capitalize()}", "connect",
           f"connect {method.upper()} requests to {sub} of {info.kind}", title, gvk=connect_gvk,
           params=_CONNECT_PARAMS.get(sub, ()), responses={"200": _TEXT}, produces=("*/*",))
        for method in (("get", "post", "put", "patch", "delete") if sub == "proxy" else ("get", "post"))
    ])]


def _discovery_paths(gv_path: str) -> list[_Path]:
    """`/api/`, `/apis/` and `/apis/<group>/<version>/`: the discovery documents."""
    if gv_path == "api":
        return [_Path("/api/", (), [_Operation(
            "get", "getCoreAPIVersions", "", {}, "get available API versions", "core",
            responses={"200": f"{META_PREFIX}.APIVersions"})])]
    if gv_path == "apis":
        return [_Path("/apis/", (), [_Operation(
            "get", "getAPIVersions", "", {}, "get available API versions", "apis",
            responses={"200": f"{META_PREFIX}.APIGroupList"})])]
    group, version = _split_api_version(gv_path.removeprefix("api/").removeprefix("apis/"))
    token = _group_token(group) + version[:1].upper() + version[1:]
    return [_Path(f"/{gv_path}/", (), [_Operation(
        "get", f"get{token}APIResources", "", {}, "get available resources", _tag(group, version),
        responses={"200": f"{META_PREFIX}.APIResourceList"})])]


@functools.cache
def _paths_by_group_version() -> dict[str, list[_Path]]:
    """OpenAPI v3 document path (`api/v1`, `apis/apps/v1`, `api`, `apis`) → its paths."""
    catalog = _catalog()
    out: dict[str, list[_Path]] = {"api": _discovery_paths("api"), "apis": _discovery_paths("apis")}
    for api_version, infos in group_versions().items():
        gv_path = f"apis/{api_version}" if "/" in api_version else f"api/{api_version}"
        paths = _discovery_paths(gv_path)
        for info in infos:
            paths.extend(_resource_paths(info, catalog))
        out[gv_path] = paths
    return out


def _path_param(name: str) -> dict[str, Any]:
    description = ("object name and auth scope, such as for teams and projects" if name == "namespace"
                   else "name of the resource")
    return {"description": description, "in": "path", "name": name, "required": True}


def _operation_refs(operation: _Operation) -> list[str]:
    names = [operation.body] if operation.body else []
    names += [r for r in operation.responses.values() if isinstance(r, str)]
    return names


# ----------------------------------------------------------------------------- OpenAPI v3


def _v3_schema(target: str | dict[str, Any]) -> dict[str, Any]:
    return {"$ref": _V3_REF + target} if isinstance(target, str) else dict(target)


def _v3_operation(operation: _Operation) -> dict[str, Any]:
    out: dict[str, Any] = {"description": operation.description, "operationId": operation.operation_id}
    if operation.params:
        out["parameters"] = [
            {"description": _PARAMS[name][1], "in": "query", "name": name,
             "schema": {"type": _PARAMS[name][0], "uniqueItems": True}}
            for name in operation.params
        ]
    if operation.body:
        content_types = operation.consumes if operation.body == PATCH else ("*/*",)
        out["requestBody"] = {
            "content": {ct: {"schema": {"$ref": _V3_REF + operation.body}} for ct in content_types},
            "required": operation.body != DELETE_OPTIONS,
        }
    out["responses"] = {
        code: {
            "content": {ct: {"schema": _v3_schema(target)} for ct in operation.produces},
            "description": _STATUS_TEXT.get(code, "OK"),
        }
        for code, target in operation.responses.items()
    }
    out["tags"] = [operation.tag]
    if operation.action:
        out["x-kubernetes-action"] = operation.action
    if operation.gvk:
        out["x-kubernetes-group-version-kind"] = dict(operation.gvk)
    return out


_STATUS_TEXT = {"200": "OK", "201": "Created", "202": "Accepted", "401": "Unauthorized"}


def _v3_path_item(path: _Path) -> dict[str, Any]:
    item: dict[str, Any] = {op.method: _v3_operation(op) for op in path.operations}
    item["parameters"] = [
        {**_path_param(name), "schema": {"type": "string", "uniqueItems": True}} for name in path.path_params
    ] + [{"description": _PARAMS["pretty"][1], "in": "query", "name": "pretty",
          "schema": {"type": "string", "uniqueItems": True}}]
    return item


def _v3_schemas(names: Iterable[str]) -> dict[str, Any]:
    catalog = _catalog()
    schemas = _rewrite_refs(_reachable(catalog.definitions, names), _V3_REF)
    if INT_OR_STRING in schemas:  # v3: upstream's OpenAPIV3OneOfTypes
        schemas[INT_OR_STRING] = {
            "description": schemas[INT_OR_STRING]["description"],
            "format": "int-or-string",
            "oneOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }
    if QUANTITY in schemas:
        schemas[QUANTITY] = {
            "description": schemas[QUANTITY]["description"],
            "oneOf": [{"type": "string"}, {"type": "number"}],
        }
    return schemas


@functools.cache
def _v3_documents() -> dict[str, tuple[dict[str, Any], str]]:
    """v3 document path → (document, hash of its JSON)."""
    out: dict[str, tuple[dict[str, Any], str]] = {}
    for gv_path, paths in _paths_by_group_version().items():
        roots = [name for path in paths for op in path.operations for name in _operation_refs(op)]
        document = {
            "openapi": "3.0.0",
            "info": dict(_INFO),
            "paths": {path.path: _v3_path_item(path) for path in paths},
            "components": {"schemas": _v3_schemas(roots)},
        }
        out[gv_path] = (document, _hash(document))
    return out


def _hash(document: dict[str, Any]) -> str:
    data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha512(data).hexdigest().upper()


@functools.cache
def openapi_v3_root() -> dict[str, Any]:
    """`/openapi/v3`: the documents there are, each with a URL whose `hash` changes with its content."""
    return {
        "paths": {
            gv_path: {"serverRelativeURL": f"/openapi/v3/{gv_path}?hash={digest}"}
            for gv_path, (_, digest) in sorted(_v3_documents().items())
        }
    }


def openapi_v3_group(gv_path: str) -> dict[str, Any] | None:
    """`/openapi/v3/<gv_path>` (`api/v1`, `apis/apps/v1`, `api`, `apis`); None if there is none."""
    entry = _v3_documents().get(gv_path.strip("/"))
    return entry[0] if entry else None


def openapi_v3_hash(gv_path: str) -> str | None:
    """The hash `openapi_v3_root()` puts in the URL of `gv_path` (for an ETag)."""
    entry = _v3_documents().get(gv_path.strip("/"))
    return entry[1] if entry else None


# ----------------------------------------------------------------------------- OpenAPI v2


def _v2_param(name: str) -> dict[str, Any]:
    kind, description = _PARAMS[name]
    return {"description": description, "in": "query", "name": name, "type": kind, "uniqueItems": True}


def _v2_operation(operation: _Operation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "consumes": list(operation.consumes),
        "description": operation.description,
        "operationId": operation.operation_id,
    }
    params: list[dict[str, Any]] = []
    if operation.body:
        params.append({"in": "body", "name": "body", "required": operation.body != DELETE_OPTIONS,
                       "schema": {"$ref": _V2_REF + operation.body}})
    params += [_v2_param(name) for name in operation.params]
    if params:
        out["parameters"] = params
    out["produces"] = list(operation.produces)
    responses: dict[str, Any] = {}
    for code, target in operation.responses.items():
        schema = {"$ref": _V2_REF + target} if isinstance(target, str) else dict(target)
        responses[code] = {"description": _STATUS_TEXT.get(code, "OK"), "schema": schema}
    responses["401"] = {"description": "Unauthorized"}
    out["responses"] = responses
    out["schemes"] = ["https"]
    out["tags"] = [operation.tag]
    if operation.action:
        out["x-kubernetes-action"] = operation.action
    if operation.gvk:
        out["x-kubernetes-group-version-kind"] = dict(operation.gvk)
    return out


def _v2_path_item(path: _Path) -> dict[str, Any]:
    item: dict[str, Any] = {op.method: _v2_operation(op) for op in path.operations}
    item["parameters"] = [
        {**_path_param(name), "type": "string", "uniqueItems": True} for name in path.path_params
    ] + [_v2_param("pretty")]
    return item


@functools.cache
def openapi_v2_json() -> dict[str, Any]:
    """`/openapi/v2` as JSON: the Swagger 2.0 document of every group-version."""
    paths: dict[str, Any] = {}
    for gv_paths in _paths_by_group_version().values():
        for path in gv_paths:
            paths[path.path] = _v2_path_item(path)
    return {
        "swagger": "2.0",
        "info": dict(_INFO),
        "paths": dict(sorted(paths.items())),
        "definitions": copy.deepcopy(_catalog().definitions),
    }


@functools.cache
def openapi_v2_protobuf() -> bytes:
    """`/openapi/v2` as kubectl 1.27/1.28 ask for it: gnostic's `openapi.v2.Document` message."""
    return encode_document(openapi_v2_json())


@functools.cache
def openapi_v2_etag() -> str:
    """A strong ETag for `/openapi/v2` (both forms change together)."""
    return '"' + hashlib.sha512(openapi_v2_protobuf()).hexdigest().upper() + '"'
