"""The storage of one served version of a custom resource (upstream apiextensions-apiserver
pkg/registry/customresource: etcd.go, strategy.go, validator.go, status_strategy.go).

The generic Store serves it unchanged; what differs is said here: objects live under
/registry/<group>/<plural>/, are checked against the version's structural schema (pruned,
defaulted, validated, CEL rules) instead of a pydantic model, have their status and scale where
the CRD says, are printed with its additionalPrinterColumns, and read in whichever served version
the client asks (the None conversion: only apiVersion changes, done on the way out of etcd).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from pydantic import ValidationError

from apiserver import errors
from apiserver.apiextensions import cel, tableconvertor
from apiserver.apiextensions.schema import EMBEDDED, apply_defaults, prune, validate_value
from apiserver.registry.generic import Store, WriteOptions, loc_to_path
from apiserver.registry.meta import validate_object_meta, validate_object_meta_update
from apiserver.registry.strategy import Strategy
from apiserver.storage.etcd import EtcdStorage
from apiserver.validation import FieldError, invalid
from machinery import managedfields
from machinery.api.apiextensions_v1 import CustomResource
from machinery.api.meta import ObjectMeta
from machinery.api.resources import ALL_VERBS, ResourceInfo
from machinery.types import Obj

STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class VersionTransformer:
    """The None conversion between the storage version and a served one: objects are written with
    the storage version's apiVersion and read with the served version's."""

    def __init__(self, stored: str, served: str) -> None:
        self.stored = stored.encode()
        self.served = served.encode()

    def _rewrite(self, data: bytes, to: bytes) -> bytes:
        obj = orjson.loads(data)
        if isinstance(obj, dict) and obj.get("apiVersion", "").encode() != to:
            obj["apiVersion"] = to.decode()
            return orjson.dumps(obj)
        return data

    def transform_to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        return self._rewrite(data, self.stored)

    def transform_from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        return self._rewrite(data, self.served), False


def version_of(crd: Obj, name: str) -> Obj:
    return next(v for v in crd["spec"]["versions"] if v.get("name") == name)


def resource_info(crd: Obj, version: str) -> ResourceInfo:
    spec = crd["spec"]
    names = (crd.get("status") or {}).get("acceptedNames") or spec["names"]
    if not names.get("plural"):
        names = spec["names"]
    subresources: dict[str, str] = {}
    sub = version_of(crd, version).get("subresources") or {}
    if "status" in sub:
        subresources["status"] = names["kind"]
    if "scale" in sub:
        subresources["scale"] = "Scale"
    return ResourceInfo(spec["group"], version, names["kind"], names["plural"], names.get("singular") or "",
                        spec.get("scope") == "Namespaced", CustomResource,
                        short_names=tuple(names.get("shortNames") or ()),
                        categories=tuple(names.get("categories") or ()),
                        verbs=ALL_VERBS, subresources=subresources)


class CustomResourceStrategy(Strategy):
    def __init__(self, version: Obj) -> None:
        self.schema: Obj = (version.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}
        sub = version.get("subresources") or {}
        self.has_status_subresource = "status" in sub
        # the version's selectableFields: more field-selector labels than metadata.name and namespace
        self.selectable = [f["jsonPath"] for f in version.get("selectableFields") or [] if f.get("jsonPath")]

    def field_values(self, obj: Obj) -> dict[str, str]:
        values = super().field_values(obj)
        for path in self.selectable:
            found = tableconvertor.evaluate(path, obj)
            value = found[0] if found else ""
            values[path.lstrip(".")] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return values

    def prepare_for_create(self, obj: Obj) -> None:
        if self.has_status_subresource:  # status is the status subresource's to write
            obj.pop("status", None)


class CustomResourceStore(Store):
    def __init__(self, crd: Obj, version: str, storage: EtcdStorage,
                 namespace_state: Callable[[str], Awaitable[str | None]] | None, watch_window: int) -> None:
        info = resource_info(crd, version)
        spec = crd["spec"]
        stored = next(v["name"] for v in spec["versions"] if v.get("storage"))
        view = storage.with_transformer(VersionTransformer(f"{spec['group']}/{stored}", info.api_version))
        v = version_of(crd, version)
        super().__init__(info, CustomResourceStrategy(v), view, namespace_state, watch_window=watch_window,
                         root=f"/registry/{spec['group']}/{spec['names']['plural']}/")
        self.crd_name: str = crd["metadata"]["name"]
        self.schema = self.strategy.schema  # type: ignore[attr-defined]
        self.columns = tableconvertor.columns_of(v)
        self.terminating = False
        # a deprecated version answers every request with a warning (upstream: its deprecationWarning, or
        # "<group>/<version> <Kind> is deprecated")
        self.deprecation: str | None = None
        if v.get("deprecated"):
            self.deprecation = v.get("deprecationWarning") or f"{info.api_version} {info.kind} is deprecated"
        scale = (v.get("subresources") or {}).get("scale")
        if scale:
            self.scale_paths = (scale.get("specReplicasPath") or ".spec.replicas",
                                scale.get("statusReplicasPath") or ".status.replicas",
                                scale.get("labelSelectorPath") or "")

    @functools.cached_property
    def type_node(self) -> managedfields.TypeNode:
        """Field ownership reads the version's structural schema (list types, map keys)."""
        return managedfields.from_openapi(self.schema)

    def table(self, objects: list[Obj], **options: Any) -> Obj:
        return tableconvertor.table(self.columns, objects, **options)

    def check_schema(self, body: Obj, opts: WriteOptions) -> Obj:
        """Prune what the schema does not specify (refused with fieldValidation=Strict, a warning with
        Warn), then fill its defaults (upstream: the structural pruning and defaulting of the decoder)."""
        obj = copy.deepcopy(body)
        name = (obj.get("metadata") or {}).get("name") or ""
        name = name if isinstance(name, str) else ""
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            try:
                ObjectMeta.from_dict(meta)
            except ValidationError as e:
                errs = []
                for p in e.errors():
                    path = loc_to_path(("metadata", *p["loc"]))
                    if p["type"] == "extra_forbidden":
                        continue
                    errs.append(invalid(path, p.get("input"), p["msg"][0].lower() + p["msg"][1:]))
                if errs:
                    raise errors.invalid(self.info, name, errs) from None
                known = set(ObjectMeta.model_fields)  # unknown metadata fields are pruned as upstream
                aliases = {f.alias or k for k, f in ObjectMeta.model_fields.items()} | known
                obj["metadata"] = {k: v for k, v in meta.items() if k in aliases}
        unknown: list[str] = []
        prune(obj, self.schema, unknown=unknown)
        if unknown and opts.field_validation == "Strict":
            raise errors.invalid(self.info, name, [FieldError("FieldValueInvalid", p, f'unknown field "{p}"')
                                                   for p in unknown])
        if unknown and opts.field_validation != "Ignore":
            opts.warnings.extend(f'unknown field "{p}"' for p in unknown)
        apply_defaults(obj, self.schema)
        return obj

    def _validate(self, obj: Obj, old: Obj | None, subresource: str | None = None) -> None:
        meta = obj["metadata"]
        errs = validate_object_meta(meta, self.info.namespaced, self.info.kind)
        if old is not None:
            errs += validate_object_meta_update(meta, old["metadata"])
        errs += validate_value({k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")},
                               {**self.schema, "required": [r for r in self.schema.get("required") or []
                                                            if r not in ("apiVersion", "kind", "metadata")]}, "")
        if not errs:
            errs += cel.validate_object(obj, old, self.schema)
        errs += _embedded_checks(obj, self.schema)
        if errs:
            raise errors.invalid(self.info, meta.get("name") or meta.get("generateName") or "", errs)

    async def create(self, namespace: str | None, body: Obj, opts: WriteOptions) -> Obj:
        if self.terminating:
            raise errors.ApiError(405, "MethodNotAllowed",
                                  "create not allowed while custom resource definition is terminating")
        return await super().create(namespace, body, opts)

    async def patch(self, namespace: str | None, name: str, patch_type: str, body: bytes, opts: WriteOptions,
                    subresource: str | None = None) -> tuple[Obj, bool]:
        if patch_type.split(";")[0].strip().lower() == STRATEGIC_MERGE:  # upstream: CRs have no patch strategies
            raise errors.ApiError(415, "UnsupportedMediaType",
                                  "the body of the request was in an unknown format - accepted media types "
                                  "include: application/json-patch+json, application/merge-patch+json, "
                                  "application/apply-patch+yaml")
        return await super().patch(namespace, name, patch_type, body, opts, subresource)


def _embedded_checks(obj: Obj, schema: Obj, path: str = "") -> list[FieldError]:
    """Embedded resources' metadata (x-kubernetes-embedded-resource) must be valid object metadata."""
    errs: list[FieldError] = []
    for name, sub in (schema.get("properties") or {}).items():
        value = obj.get(name) if isinstance(obj, dict) else None
        where = f"{path}.{name}" if path else name
        if isinstance(sub, dict) and isinstance(value, dict):
            if sub.get(EMBEDDED) and isinstance(value.get("metadata"), dict):
                meta = value["metadata"]
                if meta.get("name") is not None and not isinstance(meta.get("name"), str):
                    errs.append(invalid(f"{where}.metadata.name", meta["name"], "must be a string"))
            errs += _embedded_checks(value, sub, where)
    return errs
