"""The base of every API type: camelCase on the wire, strict types, unknown fields refused.

Conventions every model in machinery.api follows:
- Python names are snake_case; the wire name is camelCase (explicit `alias=` where Kubernetes
  spells it otherwise, e.g. podIP, containerID, podCIDR).
- Every optional field defaults to None and is left out when dumped, as Go's `omitempty` does.
- Lists that strategic merge patch merges by key say so in the schema:
  `Field(None, json_schema_extra=merge_key("name"))`, and the apiserver's patcher and the
  OpenAPI documents read the key from there.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


def merge_key(key: str, strategy: str = "merge") -> dict[str, Any]:
    """Schema extensions of a list merged by `key` under strategic merge patch."""
    return {"x-kubernetes-patch-merge-key": key, "x-kubernetes-patch-strategy": strategy}


def patch_strategy(strategy: str) -> dict[str, Any]:
    """Schema extension of a field with a patch strategy but no merge key (e.g. `replace`)."""
    return {"x-kubernetes-patch-strategy": strategy}


class ApiModel(BaseModel):
    # defer_build: a model's validator and serializer are built on its first use, not when its module is imported.
    # A process imports every API type and uses a few (the apiserver at start: ~3 MB of RSS less; 10,000 pods
    # held: ~3 MB). What a model accepts and writes is the same.
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        populate_by_name=True,
        alias_generator=to_camel,
        serialize_by_alias=True,
        defer_build=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The wire form: camelCase, None fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Read the wire form: camelCase names only (Python names are for constructors)."""
        return cls.model_validate(data, by_alias=True, by_name=False)
