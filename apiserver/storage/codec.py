"""How objects sit in etcd: compact JSON without metadata.resourceVersion, which is the key's mod
revision and is put back on every read (as upstream's etcd3 store does with its versioner)."""

from __future__ import annotations

from typing import Any

import orjson


def encode(obj: dict[str, Any]) -> bytes:
    meta = obj.get("metadata")
    if meta and "resourceVersion" in meta:
        meta = {k: v for k, v in meta.items() if k != "resourceVersion"}
        obj = {**obj, "metadata": meta}
    return orjson.dumps(obj)


def decode(value: bytes, revision: int) -> dict[str, Any]:
    obj = orjson.loads(value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
    return obj
