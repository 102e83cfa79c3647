"""Field sets of values, their comparison, the apply merge and the removal of fields (upstream
structured-merge-diff typed: tofieldset.go, compare.go, merge.go, remove.go).

Values are wire-form JSON values; no function here mutates its inputs.
"""

from __future__ import annotations

from typing import Any

from machinery.managedfields.fieldpath import (
    Path,
    element_order,
    element_string,
    field,
    key_element,
    path_string,
    value_element,
)
from machinery.managedfields.schema import TypeNode

_MISSING: Any = object()


def item_element(node: TypeNode, item: Any, index: int) -> str:
    """The path element of a list item: its key, its value, or its index."""
    if node.list_type == "map" and isinstance(item, dict):
        return key_element({k: item.get(k, node.key_defaults.get(k)) for k in node.keys
                            if k in item or k in node.key_defaults})
    if node.list_type == "set":
        return value_element(item)
    return f"i:{index}"


def _is_map(node: TypeNode, value: Any) -> bool:
    return isinstance(value, dict) and node.kind in ("struct", "map", "deduced") and not node.atomic


def _is_list(node: TypeNode, value: Any) -> bool:
    return isinstance(value, list) and node.kind == "list" and node.list_type in ("map", "set")


def to_set(value: Any, node: TypeNode) -> set[Path]:
    """The fields a value sets (upstream TypedValue.ToFieldSet)."""
    out: set[Path] = set()
    _to_set(value, node, (), out)
    return out


def _to_set(value: Any, node: TypeNode, path: Path, out: set[Path]) -> None:
    if _is_map(node, value):
        for key, child in value.items():
            child_path = (*path, field(key))
            _to_set(child, node.field(key), child_path, out)
            if child is None or child == {} or not node.is_field(key):
                out.add(child_path)
    elif _is_list(node, value):
        item_node = node.item()
        for i, item in enumerate(value):
            item_path = (*path, item_element(node, item, i))
            if node.list_type == "map":
                _to_set(item, item_node, item_path, out)
            out.add(item_path)
    elif path:
        out.add(path)


def duplicates(value: Any, node: TypeNode) -> list[str]:
    """The associative lists of `value` holding one key twice, as structured-merge-diff's validation
    says them (`.spec.containers[name="c"].env: duplicate entries for key [name="A"]`): an applied
    configuration may not have them."""
    out: list[str] = []
    _duplicates(value, node, (), out)
    return out


def _duplicates(value: Any, node: TypeNode, path: Path, out: list[str]) -> None:
    if _is_map(node, value):
        for key, child in value.items():
            _duplicates(child, node.field(key), (*path, field(key)), out)
    elif _is_list(node, value):
        seen: set[str] = set()
        item_node = node.item()
        for i, item in enumerate(value):
            element = item_element(node, item, i)
            if element in seen:
                out.append(f"{path_string(path)}: duplicate entries for key {element_string(element)}")
                continue
            seen.add(element)
            if node.list_type == "map":
                _duplicates(item, item_node, (*path, element), out)


def compare(old: Any, new: Any, node: TypeNode) -> tuple[set[Path], set[Path], set[Path]]:
    """(added, modified, removed) between two values (upstream TypedValue.Compare)."""
    added: set[Path] = set()
    modified: set[Path] = set()
    removed: set[Path] = set()
    _compare(old, new, node, (), added, modified, removed)
    return added, modified, removed


def _compare(old: Any, new: Any, node: TypeNode, path: Path,
             added: set[Path], modified: set[Path], removed: set[Path]) -> None:
    if old is new:
        return
    if old is _MISSING:
        _whole(new, node, path, added)
        return
    if new is _MISSING:
        _whole(old, node, path, removed)
        return
    old_map, new_map = _is_map(node, old) or old is _MISSING, _is_map(node, new) or new is _MISSING
    # two empty maps are compared as leaves: that keeps the difference between empty and missing
    empty = old in (_MISSING, {}) and new in (_MISSING, {})
    if old_map and new_map and not empty:
        o: dict[str, Any] = {} if old is _MISSING else old
        n: dict[str, Any] = {} if new is _MISSING else new
        for key in o.keys() | n.keys():
            ov, nv = o.get(key, _MISSING), n.get(key, _MISSING)
            if ov == nv:
                continue
            child_path = (*path, field(key))
            child = node.field(key)
            if not node.is_field(key) or child.kind in ("map", "list"):
                if ov is _MISSING:
                    added.add(child_path)
                elif nv is _MISSING:
                    removed.add(child_path)
            _compare(ov, nv, child, child_path, added, modified, removed)
        return
    old_list = _is_list(node, old) or old is _MISSING
    new_list = _is_list(node, new) or new is _MISSING
    if old_list and new_list and (old is not _MISSING or new is not _MISSING):
        item_node = node.item()
        o_items = _keyed(node, [] if old is _MISSING else old)
        n_items = _keyed(node, [] if new is _MISSING else new)
        for element in o_items.keys() | n_items.keys():
            ov, nv = o_items.get(element, _MISSING), n_items.get(element, _MISSING)
            if ov == nv:
                continue
            item_path = (*path, element)
            if ov is _MISSING:
                added.add(item_path)
            elif nv is _MISSING:
                removed.add(item_path)
            if node.list_type == "map":
                _compare(ov, nv, item_node, item_path, added, modified, removed)
        return
    # a leaf: a scalar, an atomic list or map, or a value of another shape than the schema's
    if old is _MISSING:
        added.add(path)
    elif new is _MISSING:
        removed.add(path)
    elif old != new:
        modified.add(path)


def _whole(value: Any, node: TypeNode, path: Path, out: set[Path]) -> None:
    """What _compare finds when one side is missing: every field of the value, and the maps, lists
    and items in it (a short cut of the same walk: objects are created far more often than changed)."""
    if _is_map(node, value) and value:
        for key, child in value.items():
            child_path = (*path, field(key))
            child_node = node.field(key)
            if child_node.kind in ("map", "list") or not node.is_field(key):
                out.add(child_path)
            _whole(child, child_node, child_path, out)
    elif _is_list(node, value) and value:
        item_node = node.item()
        for i, item in enumerate(value):
            item_path = (*path, item_element(node, item, i))
            out.add(item_path)
            if node.list_type == "map":
                _whole(item, item_node, item_path, out)
    elif path:
        out.add(path)


def whole_fields(value: Any, node: TypeNode) -> dict[str, Any] | None:
    """fieldsV1 of everything in `value` as _whole finds it, built at once (the fieldsV1 of a create);
    None for a leaf. Scalars, the most of any object, are told apart before any schema lookup."""
    if type(value) is dict:
        if not value or node.atomic or node.kind not in _MAP_KINDS:
            return None
        out: dict[str, Any] = {}
        for key in sorted(value):
            child = value[key]
            if type(child) is not dict and type(child) is not list:
                out["f:" + key] = {}
                continue
            child_node = node.field(key)
            sub = whole_fields(child, child_node)
            if sub is None:
                out["f:" + key] = {}
            elif child_node.kind in _GRANULAR or not node.is_field(key):
                out["f:" + key] = {".": {}, **sub}
            else:
                out["f:" + key] = sub
        return out
    if type(value) is list:
        if not value or node.kind != "list" or node.list_type not in _ASSOCIATIVE:
            return None
        item_node = node.item()
        items: dict[str, Any] = {}
        keyed = node.list_type == "map"
        for i, item in enumerate(value):
            sub = whole_fields(item, item_node) if keyed else None
            items[item_element(node, item, i)] = {".": {}, **sub} if sub else {}
        return {k: items[k] for k in sorted(items, key=element_order)} if len(items) > 1 else items
    return None


_MAP_KINDS = frozenset({"struct", "map", "deduced"})
_GRANULAR = frozenset({"map", "list"})
_ASSOCIATIVE = frozenset({"map", "set"})


def _keyed(node: TypeNode, items: list[Any]) -> dict[str, Any]:
    return {item_element(node, item, i): item for i, item in enumerate(items)}


def merge(live: Any, config: Any, node: TypeNode) -> Any:
    """The applied configuration merged onto the live value (upstream TypedValue.Merge): the
    configuration's values win, maps merge by field, associative lists by key."""
    if _is_map(node, live) and _is_map(node, config):
        out = dict(live)
        for key, value in config.items():
            out[key] = merge(live[key], value, node.field(key)) if key in live else value
        return out
    if _is_list(node, live) and _is_list(node, config):
        item_node = node.item()
        applied = _keyed(node, config)
        out_items: list[Any] = []
        seen: set[str] = set()
        for i, item in enumerate(live):
            element = item_element(node, item, i)
            if element in applied and element not in seen:
                item = merge(item, applied[element], item_node) if node.list_type == "map" else applied[element]
            seen.add(element)
            out_items.append(item)
        out_items.extend(item for element, item in applied.items() if element not in seen)
        return out_items
    return config


def remove(value: Any, paths: set[Path], node: TypeNode) -> Any:
    """The value without the fields at `paths` (upstream TypedValue.RemoveItems)."""
    if not paths:
        return value
    tree: dict[str, Any] = {}
    for path in paths:
        t = tree
        for element in path[:-1]:
            t = t.setdefault(element, {})
            if t is None:
                break
        else:
            t[path[-1]] = None  # None: remove this whole element
    return _remove(value, tree, node)


def _remove(value: Any, tree: dict[str, Any], node: TypeNode) -> Any:
    if _is_map(node, value):
        out = {}
        for key, child in value.items():
            element = field(key)
            if element in tree:
                sub = tree[element]
                if sub is None:
                    continue
                out[key] = _remove(child, sub, node.field(key))
            else:
                out[key] = child
        return out
    if _is_list(node, value):
        out_items = []
        item_node = node.item()
        for i, item in enumerate(value):
            element = item_element(node, item, i)
            if element in tree:
                sub = tree[element]
                if sub is None:
                    continue
                if node.list_type == "map":
                    item = _remove(item, sub, item_node)
            out_items.append(item)
        return out_items
    return value
