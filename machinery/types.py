"""The shape every component passes API objects around in before (or instead of) decoding them:
a wire-form dict, camelCase keys as the JSON has them (client-go's `unstructured.Unstructured`
holds the same `map[string]interface{}`; kopf names it `RawBody` in `structs/bodies.py`)."""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = ["Obj"]

Obj: TypeAlias = dict[str, Any]
