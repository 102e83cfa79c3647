"""The pod-template-hash (upstream controller.ComputeHash): a stable name suffix for the ReplicaSet
a Deployment makes from one pod template, `nginx-5cfbf748d`.

Upstream feeds the template through a deterministic printer (hashutil.DeepHashObject) into FNV-32a,
then appends the Deployment's status.collisionCount (8 bytes, little endian) when it is set, and
prints the 32-bit sum in decimal through rand.SafeEncodeString, which maps every byte onto an
alphabet without vowels (so no words) and without look-alikes (0/o, 1/l/i, 3/e).

Go's printer cannot be reproduced byte for byte, so the deterministic serialization here is the
wire form as canonical JSON (keys sorted, no whitespace, None fields left out). The hash is stable
across processes and restarts, which is all a hash used as a name needs to be.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel

# k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3 (they read as o/l/e).
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

FNV32_OFFSET = 0x811C9DC5
FNV32_PRIME = 0x01000193

# apps/v1 DefaultDeploymentUniqueLabelKey
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"


def fnv32a(data: bytes, start: int = FNV32_OFFSET) -> int:
    """FNV-1a, 32 bits (Go's hash/fnv New32a); `start` continues an earlier sum."""
    h = start
    for byte in data:
        h ^= byte
        h = (h * FNV32_PRIME) & 0xFFFFFFFF
    return h


def safe_encode_string(s: str) -> str:
    """rand.SafeEncodeString: every byte of `s` becomes one character of SAFE_ALPHABET."""
    return "".join(SAFE_ALPHABET[b % len(SAFE_ALPHABET)] for b in s.encode())


def canonical_json(obj: BaseModel | dict[str, Any]) -> bytes:
    """The deterministic serialization hashed: the wire form, keys sorted, compact."""
    data = obj.model_dump(mode="json", by_alias=True, exclude_none=True) if isinstance(obj, BaseModel) else obj
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


def compute_hash(template: BaseModel | dict[str, Any] | None, collision_count: int | None = None) -> str:
    """controller.ComputeHash(template, collisionCount): the pod-template-hash label value."""
    h = fnv32a(canonical_json(template if template is not None else {}))
    if collision_count is not None:
        h = fnv32a((collision_count & 0xFFFFFFFF).to_bytes(4, "little") + bytes(4), h)
    return safe_encode_string(str(h))
