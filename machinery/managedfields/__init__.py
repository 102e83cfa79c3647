"""Field ownership (upstream k8s.io/apimachinery/pkg/util/managedfields and
sigs.k8s.io/structured-merge-diff/v4: fieldpath, typed, merge): fieldsV1 sets, the apply merge, the
ownership bookkeeping of Update and Apply operations, and apply conflicts."""

from machinery.managedfields.fieldpath import Path, decode_fields, encode_fields, path_string
from machinery.managedfields.manager import (
    Conflict,
    Conflicts,
    Entry,
    InvalidConfiguration,
    apply,
    created,
    decode_entries,
    encode_entries,
    strip,
    update,
)
from machinery.managedfields.schema import TypeNode, from_model, from_openapi

__all__ = [
    "Conflict", "Conflicts", "Entry", "InvalidConfiguration", "Path", "TypeNode", "apply", "created",
    "decode_entries", "decode_fields", "encode_entries", "encode_fields", "from_model", "from_openapi",
    "path_string", "strip", "update",
]
