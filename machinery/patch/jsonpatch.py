"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902), as github.com/evanphx/json-patch (merge.go,
patch.go) applies them for the apiserver, with its error messages. Objects are wire-form dicts; no
function here mutates its inputs."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from machinery.patch.errors import PatchError, invalid
from machinery.types import Obj

# Upstream's apiserver refuses bigger JSON patches (maxJSONPatchOperations).
MAX_JSON_PATCH_OPERATIONS = 10000


# --- JSON merge patch (RFC 7386) ---------------------------------------------------------------


def json_merge_patch(original: Obj, patch: Obj) -> Obj:
    """RFC 7386: null deletes, objects merge recursively, anything else replaces."""
    if not isinstance(original, dict) or not isinstance(patch, dict):
        raise PatchError("a JSON merge patch and the object it applies to must be JSON objects")
    return _merge_patch_into(copy.deepcopy(original), patch)


def _merge_patch_into(target: Obj, patch: Obj) -> Obj:
    """Merge `patch` into `target` in place (target is already our own copy)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            target[key] = _merge_patch_into(current if isinstance(current, dict) else {}, value)
        else:
            target[key] = copy.deepcopy(value)
    return target


# --- JSON patch (RFC 6902) ---------------------------------------------------------------------


_MISSING: Any = object()
_INDEX = re.compile(r"-?[0-9]+")


def json_patch(original: Any, operations: list[Any]) -> Any:
    """RFC 6902: apply the operations in order to a copy of `original`; any failure fails all."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a JSON array of operations")
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise invalid(
            f"The allowed count of operations in the request is {MAX_JSON_PATCH_OPERATIONS}, "
            f"but the request has {len(operations)}"
        )
    doc = copy.deepcopy(original)
    for operation in operations:
        if not isinstance(operation, dict):
            raise invalid(f"a JSON patch operation must be a JSON object, not {operation!r}")
        kind = operation.get("op")
        handler = _OPERATIONS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            raise invalid(f"Unexpected kind: {kind if isinstance(kind, str) else 'unknown'}")
        doc = handler(doc, operation)
    return doc


def _pointer(operation: Obj, field: str) -> tuple[str, list[str]]:
    """The JSON pointer in `field` of an operation, and its unescaped tokens (~1 is /, ~0 is ~)."""
    op = operation["op"]
    if field not in operation:
        raise invalid(
            "operation missing path field" if field == "path" else f"{op} operation, missing from field"
        )
    pointer = operation[field]
    if not isinstance(pointer, str):
        raise invalid(f"{op} operation failed to decode {field}")
    if pointer == "":
        return pointer, []
    if not pointer.startswith("/"):
        raise invalid(f'{op} operation does not apply: JSON pointer "{pointer}" does not start with "/"')
    return pointer, [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _value(operation: Obj) -> Any:
    """The operation's value, copied so the result never shares it with the request."""
    if "value" not in operation:
        raise invalid(f"{operation['op']} operation, missing value field")
    return copy.deepcopy(operation["value"])


def _list_index(token: str, length: int, *, adding: bool) -> int | None:
    """A list index as evanphx/json-patch reads it (negative counts from the end), or None."""
    if adding and token == "-":
        return length
    if not _INDEX.fullmatch(token):
        return None
    index = int(token)
    limit = length + 1 if adding else length
    if index < 0:
        index += limit
    return index if 0 <= index < limit else None


def _parent(doc: Any, tokens: list[str]) -> Any:
    """The container holding the pointer's last token, or _MISSING."""
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            node = node.get(token, _MISSING)
        elif isinstance(node, list):
            index = _list_index(token, len(node), adding=False)
            node = _MISSING if index is None else node[index]
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node if isinstance(node, dict | list) else _MISSING


def _get(container: dict[str, Any] | list[Any], token: str) -> Any:
    """The member named by `token`, or _MISSING."""
    if isinstance(container, dict):
        return container.get(token, _MISSING)
    index = _list_index(token, len(container), adding=False)
    return _MISSING if index is None else container[index]


def _add_at(doc: Any, tokens: list[str], value: Any, op: str, path: str) -> Any:
    """Add (or, for an object member, set) `value` at the pointer; returns the new document."""
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    if parent is _MISSING:
        raise invalid(f'{op} operation does not apply: doc is missing path: "{path}"')
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
        return doc
    index = _list_index(tokens[-1], len(parent), adding=True)
    if index is None:
        raise invalid(f"error in {op} for path: '{path}': Unable to access invalid index: {tokens[-1]}")
    parent.insert(index, value)
    return doc


def _remove_at(doc: Any, tokens: list[str], op: str, path: str, what: str = "path") -> Any:
    """Remove and return the value at the pointer."""
    parent = _parent(doc, tokens) if tokens else _MISSING
    if parent is _MISSING:
        raise invalid(f'{op} operation does not apply: doc is missing {what}: "{path}"')
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise invalid(f"{op} operation does not apply: doc is missing key: {path}")
        return parent.pop(tokens[-1])
    index = _list_index(tokens[-1], len(parent), adding=False)
    if index is None:
        raise invalid(f"error in {op} for path: '{path}': Unable to access invalid index: {tokens[-1]}")
    return parent.pop(index)


def _op_add(doc: Any, operation: Obj) -> Any:
    path, tokens = _pointer(operation, "path")
    return _add_at(doc, tokens, _value(operation), "add", path)


def _op_remove(doc: Any, operation: Obj) -> Any:
    path, tokens = _pointer(operation, "path")
    _remove_at(doc, tokens, "remove", path)
    return doc


def _op_replace(doc: Any, operation: Obj) -> Any:
    path, tokens = _pointer(operation, "path")
    value = _value(operation)
    if not tokens:
        if not isinstance(value, dict | list):
            raise invalid("replace operation value must be object or array")
        return value
    parent = _parent(doc, tokens)
    if parent is _MISSING:
        raise invalid(f"replace operation does not apply: doc is missing path: {path}")
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise invalid(f"replace operation does not apply: doc is missing key: {path}")
        parent[tokens[-1]] = value
        return doc
    index = _list_index(tokens[-1], len(parent), adding=False)
    if index is None:
        raise invalid(f"replace operation does not apply: doc is missing key: {path}")
    parent[index] = value
    return doc


def _op_move(doc: Any, operation: Obj) -> Any:
    source, source_tokens = _pointer(operation, "from")
    path, tokens = _pointer(operation, "path")
    if _get_pointer(doc, source_tokens) is _MISSING:
        _missing_from("move", source)
    if source_tokens == tokens:
        return doc
    if tokens[: len(source_tokens)] == source_tokens:
        raise invalid(f"move operation does not apply: path {path} is a child of from {source}")
    value = _remove_at(doc, source_tokens, "move", source, "from path")
    return _add_at(doc, tokens, value, "move", path)


def _op_copy(doc: Any, operation: Obj) -> Any:
    source, source_tokens = _pointer(operation, "from")
    path, tokens = _pointer(operation, "path")
    value = _get_pointer(doc, source_tokens)
    if value is _MISSING:
        _missing_from("copy", source)
    return _add_at(doc, tokens, copy.deepcopy(value), "copy", path)


def _op_test(doc: Any, operation: Obj) -> Any:
    path, tokens = _pointer(operation, "path")
    expected = _value(operation)
    if tokens:
        parent = _parent(doc, tokens)
        if parent is _MISSING:
            raise invalid(f"test operation does not apply: is missing path: {path}")
        actual = _get(parent, tokens[-1])
        if actual is _MISSING:
            if isinstance(parent, list):
                raise invalid(
                    f"error in test for path: '{path}': Unable to access invalid index: {tokens[-1]}"
                )
            actual = None  # as upstream: an absent member tests equal to null
    else:
        actual = doc
    if not json_equal(actual, expected):
        raise invalid(f"test operation failed: testing value {path} failed")
    return doc


def _get_pointer(doc: Any, tokens: list[str]) -> Any:
    """The value at the pointer, or _MISSING."""
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    return _MISSING if parent is _MISSING else _get(parent, tokens[-1])


def _missing_from(op: str, source: str) -> Any:
    raise invalid(f"{op} operation does not apply: doc is missing from path: {source}")


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: numbers by value, but booleans are not numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


_OPERATIONS: dict[str, Callable[[Any, Obj], Any]] = {
    "add": _op_add,
    "remove": _op_remove,
    "replace": _op_replace,
    "move": _op_move,
    "copy": _op_copy,
    "test": _op_test,
}
