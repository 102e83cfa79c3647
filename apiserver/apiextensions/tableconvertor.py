"""The Table of a custom resource from its CRD's additionalPrinterColumns (upstream
apiextensions-apiserver pkg/registry/customresource/tableconvertor): NAME, then each column's value
at its JSONPath; a version without columns shows NAME and AGE. The JSONPath subset is client-go's
util/jsonpath as CRDs use it: `.a.b`, `[n]`, `[*]`, `['key']` and filters `[?(@.type=="Ready")]`."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

import orjson

from machinery.timeutil import parse_rfc3339, translate_timestamp_since
from machinery.types import Obj

_NAME_DOC = ("Name must be unique within a namespace. Is required when creating resources, although some resources "
             "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
             "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
             "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
        "description": "CreationTimestamp is a timestamp representing the server time when this object was created."}

_TOKEN = re.compile(r"""\.\.|\.([A-Za-z0-9_\-$/]+)|\[\s*'([^']*)'\s*\]|\[\s*"([^"]*)"\s*\]|\[\s*(-?\d+)\s*\]"""
                    r"""|\[\s*\*\s*\]|\[\s*\?\((.*?)\)\s*\]""")
_FILTER = re.compile(r"""^@((?:\.[A-Za-z0-9_\-]+)+)\s*(==|!=)\s*(?:"([^"]*)"|'([^']*)'|(-?[\d.]+)|(true|false))$""")


class JSONPathError(ValueError):
    pass


def _template(path: str) -> str:
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1].strip()
    if path.startswith("$"):
        path = path[1:]
    return path


def evaluate(path: str, obj: Any) -> list[Any]:
    """The values at a JSONPath (an empty list when nothing is there)."""
    expr = _template(path)
    nodes = [obj]
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            raise JSONPathError(f"unrecognized character in action: {expr[pos:]!r}")
        pos = m.end()
        token = m.group(0)
        out: list[Any] = []
        if m.group(1) is not None or m.group(2) is not None or m.group(3) is not None:
            key = next(g for g in (m.group(1), m.group(2), m.group(3)) if g is not None)
            if key == "*":
                for n in nodes:
                    out.extend(n.values() if isinstance(n, dict) else n if isinstance(n, list) else [])
            else:
                out = [n[key] for n in nodes if isinstance(n, dict) and key in n]
        elif m.group(4) is not None:
            i = int(m.group(4))
            out = [n[i] for n in nodes if isinstance(n, list) and -len(n) <= i < len(n)]
        elif token.replace(" ", "") == "[*]":
            for n in nodes:
                out.extend(n if isinstance(n, list) else n.values() if isinstance(n, dict) else [])
        elif m.group(5) is not None:
            f = _FILTER.match(m.group(5).strip())
            if f is None:
                raise JSONPathError(f"unsupported filter {m.group(5)!r}")
            keys = f.group(1).strip(".").split(".")
            want: Any = next((g for g in (f.group(3), f.group(4)) if g is not None), None)
            if want is None and f.group(5) is not None:
                want = float(f.group(5)) if "." in f.group(5) else int(f.group(5))
            elif want is None and f.group(6) is not None:
                want = f.group(6) == "true"
            for n in nodes:
                for item in n if isinstance(n, list) else []:
                    v: Any = item
                    for k in keys:
                        v = v.get(k) if isinstance(v, dict) else None
                    if (v == want) == (f.group(2) == "=="):
                        out.append(item)
        else:
            raise JSONPathError("recursive descent is not supported")
        nodes = out
    return nodes


def columns_of(version: Obj) -> list[Obj]:
    return list(version.get("additionalPrinterColumns") or []) or [_AGE]


def _cell(column: Obj, obj: Obj, now: datetime) -> Any:
    try:
        found = evaluate(column.get("jsonPath") or "", obj)
    except JSONPathError:
        return None
    if not found:
        return None
    value = found[0]
    kind = column.get("type")
    if kind == "date" and isinstance(value, str):
        return translate_timestamp_since(value, now) if parse_rfc3339(value) is not None else value
    if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "string" and isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    return str(value).lower() if isinstance(value, bool) else str(value)


def table(columns: list[Obj], objects: list[Obj], *, include_object: str = "Metadata", resource_version: str = "",
          continue_token: str = "", now: datetime | None = None) -> Obj:
    now = now or datetime.now(UTC)
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": _NAME_DOC, "priority": 0}]
    for c in columns:
        definitions.append({"name": c.get("name", ""), "type": "string" if c.get("type") == "date" else c.get("type"),
                            "format": c.get("format") or "", "description": c.get("description") or "",
                            "priority": c.get("priority") or 0})
    rows = []
    for obj in objects:
        row: Obj = {"cells": [(obj.get("metadata") or {}).get("name", "")] + [_cell(c, obj, now) for c in columns]}
        if include_object == "Object":
            row["object"] = copy.deepcopy(obj)
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": copy.deepcopy(obj.get("metadata") or {})}
        rows.append(row)
    metadata: Obj = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": definitions,
            "rows": rows}
