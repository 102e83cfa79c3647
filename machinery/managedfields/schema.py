"""What a value is, for field ownership (upstream structured-merge-diff schema: elements.go, and
k8s.io/apimachinery/pkg/util/managedfields' type converter from the OpenAPI models).

A TypeNode says whether a value is a struct (named fields), a granular map, a list (atomic, set, or
map keyed by list-map-keys), a scalar, or unknown ("deduced": maps are granular, lists atomic).
Built-in types are read from the pydantic models' patch metadata (a list merged by key is a map-list
keyed by it; a primitive list merged is a set; other lists are atomic); custom resources from their
structural schema (x-kubernetes-list-type, x-kubernetes-list-map-keys, x-kubernetes-map-type).
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel

from machinery.api.meta import ObjectMeta
from machinery.patch.schema import ANY, FieldMeta, SchemaType, model_fields

Kind = Literal["struct", "map", "list", "scalar", "deduced"]

# upstream's list-map-keys where the OpenAPI says more than the patch merge key (core/v1: a
# container's ports by containerPort and protocol, a service's by port and protocol; the topology
# spread constraints by topologyKey and whenUnsatisfiable); the defaulted key fields
_KEYS_BY_MERGE_KEY: dict[str, tuple[str, ...]] = {
    "containerPort": ("containerPort", "protocol"),
    "topologyKey": ("topologyKey", "whenUnsatisfiable"),
}
_KEY_DEFAULTS: dict[str, Any] = {"protocol": "TCP"}


class TypeNode:
    """The schema of one value."""

    kind: Kind = "deduced"
    atomic: bool = False
    list_type: str = "atomic"  # atomic | set | map (lists only)
    keys: tuple[str, ...] = ()
    key_defaults: dict[str, Any] = {}

    def field(self, name: str) -> TypeNode:
        """The schema of member `name` (a struct's field, a map's value)."""
        return DEDUCED

    def is_field(self, name: str) -> bool:
        """Whether `name` is a named field of a struct (not an entry of a map)."""
        return False

    def item(self) -> TypeNode:
        return DEDUCED


class _Deduced(TypeNode):
    pass


class _Scalar(TypeNode):
    kind: Kind = "scalar"


DEDUCED: TypeNode = _Deduced()
SCALAR: TypeNode = _Scalar()


class _ModelNode(TypeNode):
    def __init__(self, t: SchemaType, meta: FieldMeta | None) -> None:
        self.t = t
        self._fields: dict[str, TypeNode] = {}
        self._named: frozenset[str] = frozenset(model_fields(t.model)) if t.kind == "model" and t.model else frozenset()
        self._item: TypeNode | None = None
        if t.kind == "model":
            self.kind = "struct"
        elif t.kind == "map":
            self.kind = "map"
        elif t.kind == "list":
            self.kind = "list"
            item = t.item or ANY
            if meta is not None and meta.strategy == "merge" and meta.merge_key:
                self.list_type = "map"
                self.keys = (meta.merge_key,)
                if meta.merge_key == "port" and item.model is not None and "protocol" in model_fields(item.model):
                    self.keys = ("port", "protocol")
                self.keys = _KEYS_BY_MERGE_KEY.get(meta.merge_key, self.keys)
                self.key_defaults = {k: v for k, v in _KEY_DEFAULTS.items() if k in self.keys}
            elif meta is not None and meta.strategy == "merge" and item.kind == "scalar":
                self.list_type = "set"
        elif t.kind == "scalar":
            self.kind = "scalar"

    def field(self, name: str) -> TypeNode:
        node = self._fields.get(name)
        if node is None:
            node = self._field(name)
            if name in self._named:  # a map's entries are many, its value type one: cache the fields only
                self._fields[name] = node
        return node

    def _field(self, name: str) -> TypeNode:
        if self.t.kind == "model" and self.t.model is not None:
            meta = model_fields(self.t.model).get(name)
            return _model_node(meta.type, meta) if meta is not None else DEDUCED
        if self.t.kind == "map":
            return _model_node(self.t.item or ANY, None)
        return DEDUCED

    def is_field(self, name: str) -> bool:
        return name in self._named

    def item(self) -> TypeNode:
        if self._item is None:
            self._item = _model_node(self.t.item or ANY, None) if self.t.kind == "list" else DEDUCED
        return self._item


@functools.cache
def _model_node(t: SchemaType, meta: FieldMeta | None) -> TypeNode:
    if t.kind == "any":
        return DEDUCED
    if t.kind == "scalar":
        return SCALAR
    return _ModelNode(t, meta)


def from_model(model: type[BaseModel]) -> TypeNode:
    """The schema of a built-in kind, read from its pydantic model."""
    return _model_node(SchemaType("model", model=model), None)


class _OpenAPINode(TypeNode):
    def __init__(self, schema: dict[str, Any], root: bool = False) -> None:
        self.schema = schema
        self.root = root
        t = schema.get("type")
        props = schema.get("properties")
        if schema.get("x-kubernetes-int-or-string"):
            self.kind = "scalar"
        elif t == "array":
            self.kind = "list"
            self.list_type = schema.get("x-kubernetes-list-type") or "atomic"
            if self.list_type == "map":
                self.keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
                item_props = (schema.get("items") or {}).get("properties") or {}
                self.key_defaults = {k: item_props[k]["default"] for k in self.keys
                                     if isinstance(item_props.get(k), dict) and "default" in item_props[k]}
        elif t == "object" or props is not None or root:
            if props or root:
                self.kind = "struct"
            elif isinstance(schema.get("additionalProperties"), dict):
                self.kind = "map"
            else:
                self.kind = "deduced" if schema.get("x-kubernetes-preserve-unknown-fields") else "map"
            self.atomic = schema.get("x-kubernetes-map-type") == "atomic"
        elif t in ("string", "integer", "number", "boolean"):
            self.kind = "scalar"

    def field(self, name: str) -> TypeNode:
        if self.root and name == "metadata":
            return from_model(ObjectMeta)
        props = self.schema.get("properties") or {}
        if isinstance(props.get(name), dict):
            return _OpenAPINode(props[name])
        extra = self.schema.get("additionalProperties")
        if isinstance(extra, dict):
            return _OpenAPINode(extra)
        return DEDUCED

    def is_field(self, name: str) -> bool:
        return name in (self.schema.get("properties") or {}) or (self.root and name == "metadata")

    def item(self) -> TypeNode:
        items = self.schema.get("items")
        return _OpenAPINode(items) if isinstance(items, dict) else DEDUCED


def from_openapi(schema: dict[str, Any]) -> TypeNode:
    """The schema of a custom resource, read from its version's structural schema."""
    return _OpenAPINode(schema, root=True)
