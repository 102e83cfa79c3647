"""What admission sees of a write, and what the store calls (upstream:
staging/src/k8s.io/apiserver/pkg/admission/interfaces.go: Attributes, MutationInterface and
ValidationInterface, ObjectInterfaces). The generic store (apiserver/registry/generic.py) builds the
attributes and calls an Admission; the plugins (chain.py, noderestriction.py, podsecurity/) read
them. Nothing here imports the registry: it stands below it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from machinery.api.resources import ResourceInfo
from machinery.types import Obj


class ObjectInterfaces(Protocol):
    """The resource a write is for, as admission reaches it: its ResourceInfo, and its decoding and
    defaulting for an object a mutating webhook patched (upstream admission.ObjectInterfaces)."""

    @property
    def info(self) -> ResourceInfo: ...

    def redecode(self, obj: Obj, operation: str, old: Obj | None, subresource: str | None) -> Obj: ...


@dataclass(slots=True)
class AdmissionAttributes:
    """What admission sees of one write (upstream admission.Attributes)."""

    operation: str  # CREATE, UPDATE, DELETE
    store: ObjectInterfaces  # the resource's Store
    namespace: str | None
    name: str
    subresource: str | None
    obj: Obj | None  # the new object (None for DELETE)
    old: Obj | None  # the stored object (None for CREATE)
    user: Any
    dry_run: bool


class Admission(Protocol):
    """The admission chain the store calls: mutating plugins after the strategy's defaults, validating
    plugins after the strategy's validation (upstream: between decoding and storage)."""

    async def mutate(self, attrs: AdmissionAttributes) -> Obj: ...

    async def validate(self, attrs: AdmissionAttributes) -> None: ...
