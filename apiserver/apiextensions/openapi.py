"""OpenAPI v2 and v3 of the custom resources being served (upstream apiextensions-apiserver
pkg/controller/openapi/builder): each served version's structural schema as a definition named by the
reversed group (`com.example.stable.v1.CronTab`, with apiVersion, kind and a `$ref` to ObjectMeta
added), its List, and the REST paths with `x-kubernetes-group-version-kind` and the write parameters
kubectl looks for (`fieldValidation`): what `kubectl explain` and kubectl's validation read."""

from __future__ import annotations

import copy
from typing import Any

from apiserver import openapi as builtin
from machinery.api.resources import ResourceInfo

_META = "io.k8s.apimachinery.pkg.apis.meta.v1"
OBJECT_META = f"{_META}.ObjectMeta"
LIST_META = f"{_META}.ListMeta"
_API_VERSION_DOC = ("APIVersion defines the versioned schema of this representation of an object. Servers should "
                    "convert recognized schemas to the latest internal value, and may reject unrecognized values. "
                    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
                    "api-conventions.md#resources")
_KIND_DOC = ("Kind is a string value representing the REST resource this object represents. Servers may infer "
             "this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
             "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds")


def definition_name(info: ResourceInfo, kind: str | None = None) -> str:
    reversed_group = ".".join(reversed(info.group.split(".")))
    return f"{reversed_group}.{info.version}.{kind or info.kind}"


def _v2_schema(node: Any) -> Any:
    """v2 has no nullable, oneOf/anyOf/not or x-kubernetes-validations: dropped, as upstream's v2 builder does."""
    if isinstance(node, dict):
        out = {k: _v2_schema(v) for k, v in node.items()
               if k not in ("nullable", "oneOf", "anyOf", "not", "allOf", "x-kubernetes-validations")}
        return out
    if isinstance(node, list):
        return [_v2_schema(v) for v in node]
    return node


def _kind_schema(info: ResourceInfo, schema: dict[str, Any], ref_prefix: str) -> dict[str, Any]:
    out = copy.deepcopy(schema)
    props = out.setdefault("properties", {})
    props["apiVersion"] = {"type": "string", "description": _API_VERSION_DOC}
    props["kind"] = {"type": "string", "description": _KIND_DOC}
    props["metadata"] = {"$ref": ref_prefix + OBJECT_META}
    out["type"] = "object"
    out["x-kubernetes-group-version-kind"] = [{"group": info.group, "version": info.version, "kind": info.kind}]
    return out


def _list_schema(info: ResourceInfo, ref_prefix: str) -> dict[str, Any]:
    return {
        "description": f"{info.kind}List is a list of {info.kind}",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": _API_VERSION_DOC},
            "items": {"type": "array", "description": f"List of {info.plural}. More info: "
                      "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
                      "items": {"$ref": ref_prefix + definition_name(info)}},
            "kind": {"type": "string", "description": _KIND_DOC},
            "metadata": {"$ref": ref_prefix + LIST_META},
        },
        "x-kubernetes-group-version-kind": [{"group": info.group, "version": info.version,
                                              "kind": f"{info.kind}List"}],
    }


_WRITE = ("dryRun", "fieldManager", "fieldValidation")
# a custom resource takes no strategic merge patch (no patch strategies): kubectl reads this list and
# sends a JSON merge patch instead
PATCH_CONTENT_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")


def _operations(info: ResourceInfo, ref_prefix: str, v3: bool) -> dict[str, dict[str, Any]]:
    """Path → method → operation, for one resource."""
    gvk = {"group": info.group, "version": info.version, "kind": info.kind}
    kind_ref = ref_prefix + definition_name(info)
    list_ref = ref_prefix + definition_name(info, f"{info.kind}List")
    token = "".join(p[:1].upper() + p[1:] for p in info.group.replace("-", ".").split(".")) + info.version.title()
    scoped = "Namespaced" if info.namespaced else ""

    def param(name: str, kind: str = "string") -> dict[str, Any]:
        return ({"in": "query", "name": name, "schema": {"type": kind, "uniqueItems": True}} if v3
                else {"in": "query", "name": name, "type": kind, "uniqueItems": True})

    def op(verb: str, action: str, ref: str | None, params: tuple[str, ...] = (), body: bool = False,
           patch: bool = False, codes: tuple[str, ...] = ("200",)) -> dict[str, Any]:
        out: dict[str, Any] = {"operationId": f"{verb}{token}{scoped}{info.kind}",
                               "tags": [f"{token[:1].lower()}{token[1:]}"],
                               "x-kubernetes-action": action, "x-kubernetes-group-version-kind": dict(gvk)}
        parameters = [param(p) for p in params]
        if v3:
            if body:
                types = PATCH_CONTENT_TYPES if patch else ("*/*",)
                schema = {"type": "object"} if patch else {"$ref": kind_ref}
                out["requestBody"] = {"content": {t: {"schema": schema} for t in types}, "required": True}
            out["responses"] = {c: {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}
                                for c in codes} if ref else {"200": {"description": "OK"}}
        else:
            if body:
                parameters.insert(0, {"in": "body", "name": "body", "required": True,
                                      "schema": {"type": "object"} if patch else {"$ref": kind_ref}})
            out["consumes"] = list(PATCH_CONTENT_TYPES) if patch else ["application/json",
                                                                              "application/yaml"]
            out["produces"] = ["application/json", "application/yaml"]
            out["responses"] = {c: {"description": "OK", "schema": {"$ref": ref}} for c in codes} if ref else {
                "200": {"description": "OK"}}
        if parameters:
            out["parameters"] = parameters
        return out

    base = (f"{info.prefix}/namespaces/{{namespace}}/{info.plural}" if info.namespaced
            else f"{info.prefix}/{info.plural}")
    paths: dict[str, dict[str, Any]] = {
        base: {"get": op("list", "list", list_ref, ("labelSelector", "fieldSelector", "limit", "continue",
                                                    "resourceVersion", "watch")),
               "post": op("create", "post", kind_ref, _WRITE, body=True, codes=("200", "201", "202")),
               "delete": op("deletecollection", "deletecollection", None)},
        f"{base}/{{name}}": {"get": op("read", "get", kind_ref),
                             "put": op("replace", "put", kind_ref, _WRITE, body=True, codes=("200", "201")),
                             "patch": op("patch", "patch", kind_ref, (*_WRITE, "force"), body=True, patch=True,
                                         codes=("200", "201")),
                             "delete": op("delete", "delete", None)},
    }
    if info.namespaced:
        paths[f"{info.prefix}/{info.plural}"] = {"get": op("list", "list", list_ref, ("labelSelector",
                                                                                      "fieldSelector"))}
        paths[f"{info.prefix}/{info.plural}"]["get"]["operationId"] = f"list{token}{info.kind}ForAllNamespaces"
    for sub in info.subresources:
        ref = kind_ref if sub == "status" else ref_prefix + "io.k8s.api.autoscaling.v1.Scale"
        paths[f"{base}/{{name}}/{sub}"] = {"get": op("read", "get", ref),
                                           "put": op("replace", "put", ref, _WRITE, body=True),
                                           "patch": op("patch", "patch", ref, (*_WRITE, "force"), body=True,
                                                       patch=True)}
    for path, item in paths.items():
        names = ["namespace", "name"] if "{name}" in path else ["namespace"]
        names = [n for n in names if f"{{{n}}}" in path]
        item["parameters"] = [({"in": "path", "name": n, "required": True, "schema": {"type": "string"}} if v3
                               else {"in": "path", "name": n, "required": True, "type": "string"}) for n in names]
    return paths


def _reachable(definitions: dict[str, Any], roots: list[str], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in out or name not in definitions:
            continue
        out[name] = definitions[name]
        stack = [definitions[name]]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str) and ref.startswith(prefix):
                    todo.append(ref[len(prefix):])
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
    return out


def v3_document(entries: list[tuple[ResourceInfo, dict[str, Any]]]) -> dict[str, Any]:
    """The v3 document of one custom group-version: its resources (info, schema of that version)."""
    prefix = "#/components/schemas/"
    schemas: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for info, schema in entries:
        schemas[definition_name(info)] = _kind_schema(info, schema, prefix)
        schemas[definition_name(info, f"{info.kind}List")] = _list_schema(info, prefix)
        paths.update(_operations(info, prefix, True))
    core = builtin.openapi_v3_group("api/v1") or {}
    apps = builtin.openapi_v3_group("apis/apps/v1") or {}
    autoscaling: dict[str, Any] = (apps.get("components") or {}).get("schemas") or {}
    known = {**autoscaling, **((core.get("components") or {}).get("schemas") or {})}
    schemas.update(_reachable(known, [OBJECT_META, LIST_META, "io.k8s.api.autoscaling.v1.Scale"], prefix))
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"}, "paths": paths,
            "components": {"schemas": schemas}}


def v2_additions(entries: list[tuple[ResourceInfo, dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(paths, definitions) of the custom resources, to merge into the v2 document."""
    prefix = "#/definitions/"
    definitions: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for info, schema in entries:
        definitions[definition_name(info)] = _v2_schema(_kind_schema(info, schema, prefix))
        definitions[definition_name(info, f"{info.kind}List")] = _list_schema(info, prefix)
        paths.update(_operations(info, prefix, False))
    return paths, definitions
