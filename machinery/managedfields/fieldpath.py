"""Field paths and sets in their fieldsV1 form (upstream structured-merge-diff fieldpath: element.go,
serialize-pe.go, serialize.go, set.go).

A path is a tuple of path elements, each kept in its serialized form: `f:<field>` (a field of a map),
`k:{"name":"c"}` (an item of an associative list, its key fields as compact JSON with sorted names),
`v:<json>` (an item of a set) and `i:<n>` (an item of a list by index). A set of paths is a Python set;
fieldsV1 nests the elements, `{}` marking a leaf member and `".": {}` a member that also has children.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

Path = tuple[str, ...]


def value_json(value: Any) -> str:
    """A value as structured-merge-diff serializes it: compact JSON, map keys sorted."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def field(name: str) -> str:
    return "f:" + name


def key_element(fields: Mapping[str, Any]) -> str:
    return "k:" + value_json(dict(fields))


def value_element(value: Any) -> str:
    return "v:" + value_json(value)


def encode_fields(paths: Iterable[Path]) -> dict[str, Any]:
    """A set of paths as fieldsV1."""
    root: dict[str, Any] = {}
    members: list[dict[str, Any]] = []
    for path in paths:
        node = root
        for element in path:
            child = node.get(element)
            if child is None:
                child = node[element] = {}
            node = child
        members.append(node)
    for node in members:
        if node:
            node["."] = {}
    return _sorted(root)


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    # upstream writes "." first, then the children in their serialized order
    if not node:
        return node
    keys = sorted(node, key=element_order) if len(node) > 1 else list(node)
    return {k: _sorted(node[k]) for k in keys}


_ORDER = {".": 0, "f": 1, "k": 2, "v": 3, "i": 4}


def element_order(element: str) -> tuple[int, str]:
    # upstream's order: the "." member marker, then fields, keys, values, indexes
    return _ORDER.get(element[0], 5), element


def decode_fields(fields: Any) -> set[Path]:
    """fieldsV1 as a set of paths; ValueError on what is no fieldsV1."""
    if not isinstance(fields, dict):
        raise ValueError("expected an object")
    out: set[Path] = set()
    _decode(fields, (), out)
    return out


def _decode(node: dict[str, Any], prefix: Path, out: set[Path]) -> None:
    for key, child in node.items():
        if key == ".":
            if prefix:
                out.add(prefix)
            continue
        if not isinstance(key, str) or key[:2] not in ("f:", "k:", "v:", "i:"):
            raise ValueError(f"unknown path element {key!r}")
        if key[:2] in ("k:", "v:"):
            try:
                json.loads(key[2:])
            except ValueError:
                raise ValueError(f"invalid path element {key!r}") from None
        if not isinstance(child, dict):
            raise ValueError(f"expected an object under {key!r}")
        path = (*prefix, key)
        if not child:
            out.add(path)
        else:
            _decode(child, path, out)


def element_string(element: str) -> str:
    """One element as upstream's PathElement.String: `.name`, `[name="c",port=80]`, `[="v"]`, `[3]`."""
    kind, rest = element[:2], element[2:]
    if kind == "f:":
        return "." + rest
    if kind == "k:":
        fields = json.loads(rest)
        return "[" + ",".join(f"{k}={value_json(v)}" for k, v in fields.items()) + "]"
    if kind == "v:":
        return "[=" + rest + "]"
    return "[" + rest + "]"


def path_string(path: Path) -> str:
    """A path as upstream's Path.String: `.spec.containers[name="c"].image`."""
    return "".join(element_string(e) for e in path)


def has_prefix(path: Path, prefix: Path) -> bool:
    return path[:len(prefix)] == prefix
