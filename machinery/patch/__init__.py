"""Patches of wire-form objects, shared by the apiserver (which applies them) and kubectl (which
computes them), as upstream keeps them in k8s.io/apimachinery/pkg/util/strategicpatch and
github.com/evanphx/json-patch:

- `json_merge_patch` (RFC 7386) and `json_patch` (RFC 6902): machinery/patch/jsonpatch.py;
- `strategic_merge_patch`: Kubernetes strategic merge patch guided by a model's patch metadata
  (machinery/patch/strategic.py, the metadata in machinery/patch/schema.py);
- `three_way_merge_patch`: the patch client-side apply sends (machinery/patch/threeway.py).

Objects are wire-form dicts (camelCase JSON); no function here mutates its inputs. Failures raise
`PatchError`, which carries the HTTP code and reason the apiserver answers with.
"""

from __future__ import annotations

from machinery.patch.errors import PatchError
from machinery.patch.jsonpatch import MAX_JSON_PATCH_OPERATIONS, json_equal, json_merge_patch, json_patch
from machinery.patch.strategic import strategic_merge_patch
from machinery.patch.threeway import three_way_merge_patch

__all__ = [
    "MAX_JSON_PATCH_OPERATIONS",
    "PatchError",
    "json_equal",
    "json_merge_patch",
    "json_patch",
    "strategic_merge_patch",
    "three_way_merge_patch",
]
