"""The patch metadata of a type (upstream k8s.io/apimachinery/pkg/util/strategicpatch/meta.go,
PatchMetaFromStruct): which lists merge, by which key, which maps are replaced. Upstream reads it from
Go struct tags (patchStrategy, patchMergeKey); here it is read from the pydantic models'
`json_schema_extra` (see machinery/api/base.py)."""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

# --- Patch metadata read from the pydantic models ----------------------------------------------


@dataclass(frozen=True, slots=True)
class SchemaType:
    """What the schema says a value is: a model, a map or list of something, a scalar, or unknown."""

    kind: Literal["any", "scalar", "model", "map", "list"]
    model: type[BaseModel] | None = None
    item: SchemaType | None = None  # map values / list items


@dataclass(frozen=True, slots=True)
class FieldMeta:
    """A field's type and its strategic-merge-patch metadata."""

    type: SchemaType
    strategy: str = ""  # "merge" | "replace" | ""
    merge_key: str = ""
    retain_keys: bool = False


ANY = SchemaType("any")
SCALAR = SchemaType("scalar")
UNKNOWN = FieldMeta(ANY)
_STRUCTURED = ("model", "map", "list")


def describe(tp: Any) -> SchemaType:
    """Reduce a type annotation (Optional, unions, Annotated, containers) to a SchemaType."""
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return describe(get_args(tp)[0])
    if origin is Union or origin is types.UnionType:
        described = [describe(arg) for arg in get_args(tp) if arg is not type(None)]
        structured = [d for d in described if d.kind in _STRUCTURED]
        if structured:
            return structured[0]
        return described[0] if len(described) == 1 else SCALAR
    if origin is Literal:
        return SCALAR
    if origin in (list, tuple, set, frozenset, Sequence):
        args = [a for a in get_args(tp) if a is not Ellipsis]
        return SchemaType("list", item=describe(args[0]) if args else ANY)
    if origin in (dict, Mapping):
        kv = get_args(tp)
        return SchemaType("map", item=describe(kv[1]) if len(kv) == 2 else ANY)
    if isinstance(tp, type):
        if issubclass(tp, BaseModel):
            return SchemaType("model", model=tp)
        if issubclass(tp, str | int | float | bool | bytes):
            return SCALAR
        if issubclass(tp, list | tuple):
            return SchemaType("list", item=ANY)
        if issubclass(tp, dict):
            return SchemaType("map", item=ANY)
    return ANY


def _parse_strategy(value: Any) -> tuple[str, bool]:
    """`merge`, `replace`, `retainKeys` or `merge,retainKeys` → (strategy, retain_keys)."""
    if not isinstance(value, str):
        return "", False
    parts = [p.strip() for p in value.split(",") if p.strip()]
    others = [p for p in parts if p != "retainKeys"]
    return (others[0] if others else ""), "retainKeys" in parts


@functools.cache
def model_fields(model: type[BaseModel]) -> Mapping[str, FieldMeta]:
    """Wire name → metadata of every field of `model` (cached: read once per model class)."""
    fields: dict[str, FieldMeta] = {}
    for name, info in model.model_fields.items():
        wire = info.serialization_alias or info.alias or name
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        strategy, retain_keys = _parse_strategy(extra.get("x-kubernetes-patch-strategy"))
        merge_key = extra.get("x-kubernetes-patch-merge-key")
        fields[wire] = FieldMeta(
            describe(info.annotation), strategy, merge_key if isinstance(merge_key, str) else "", retain_keys
        )
    return types.MappingProxyType(fields)


def lookup(t: SchemaType, key: str) -> FieldMeta:
    """The metadata of member `key` of a value of type `t` (unknown members: none)."""
    if t.kind == "model" and t.model is not None:
        return model_fields(t.model).get(key, UNKNOWN)
    if t.kind == "map":
        return FieldMeta(t.item or ANY)
    return UNKNOWN
