"""Claiming by controller references (upstream pkg/controller/controller_ref_manager.go, and
metav1.GetControllerOf / NewControllerRef).

An owner (a ReplicaSet claiming pods, a Deployment claiming ReplicaSets) adopts orphans its
selector matches by patching a controller ownerReference in, and releases the objects it owns
that its selector no longer matches by patching its reference out; objects controlled by someone
else are never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from machinery.api.meta import ObjectMeta, OwnerReference
from machinery.client import ApiClient, ApiError
from machinery.informer import Store, meta_namespace_key
from machinery.selectors import LabelSelector

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


def controller_ref(obj: Any) -> OwnerReference | None:
    """metav1.GetControllerOf: the ownerReference with controller: true, if any."""
    for ref in obj.metadata.owner_references or []:
        if ref.controller:
            return ref
    return None


def resolve_controller_key(obj: Any, kind: str, owners: Store[Any]) -> str | None:
    """resolveControllerRef: the cache key of obj's controller when it is a `kind` in `owners` with the uid the
    reference names (a namesake made after the owner's deletion is not it)."""
    ref = controller_ref(obj)
    if ref is None or ref.kind != kind:
        return None
    owner = owners.get_by_name(ref.name, obj.metadata.namespace)
    return meta_namespace_key(owner) if owner is not None and owner.metadata.uid == ref.uid else None


def new_controller_ref(owner: Any, api_version: str, kind: str) -> OwnerReference:
    """metav1.NewControllerRef: controller and blockOwnerDeletion both true."""
    return OwnerReference(api_version=api_version, kind=kind, name=owner.metadata.name or "",
                          uid=owner.metadata.uid or "", controller=True, block_owner_deletion=True)


# -- claiming (controller.ControllerRefManager) ------------------------------------------------


class ControllerRefManager(Generic[M]):
    """Adopt orphans that match the selector, release owned objects that stopped matching.

    `can_adopt` re-reads the owner from the apiserver once (RecheckDeletionTimestamp), so an owner
    deleted a moment ago does not adopt anything on the strength of a stale cache.
    """

    def __init__(self, client: ApiClient, owner: Any, owner_api_version: str, owner_kind: str,
                 selector: LabelSelector, model: type[M], can_adopt: Callable[[], Awaitable[None]]) -> None:
        self.client = client
        self.owner = owner
        self.api_version = owner_api_version
        self.kind = owner_kind
        self.selector = selector
        self.model = model
        self._can_adopt = can_adopt
        self._adopt_checked: Exception | bool = False

    async def claim(self, objs: Sequence[M]) -> list[M]:
        """The objects this owner controls after claiming; raises the first error after trying all."""
        owner_uid = self.owner.metadata.uid
        owner_deleting = self.owner.metadata.deletion_timestamp is not None
        claimed: list[M] = []
        errors: list[Exception] = []
        for obj in objs:
            meta: ObjectMeta = obj.metadata  # type: ignore[attr-defined]
            ref = controller_ref(obj)
            matches = self.selector.matches(meta.labels or {})
            try:
                if ref is not None:
                    if ref.uid != owner_uid:
                        continue  # someone else's
                    if matches:
                        claimed.append(obj)
                    elif not owner_deleting:
                        await self._release(obj)
                    continue
                if owner_deleting or not matches or meta.deletion_timestamp is not None:
                    continue
                if self.owner.metadata.namespace and meta.namespace != self.owner.metadata.namespace:
                    continue
                adopted = await self._adopt(obj)
                if adopted is not None:
                    claimed.append(adopted)
            except ApiError as e:
                if not e.is_not_found:
                    errors.append(e)
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]
        return claimed

    async def _check_can_adopt(self) -> None:
        if self._adopt_checked is False:
            try:
                await self._can_adopt()
                self._adopt_checked = True
            except Exception as e:
                self._adopt_checked = e
        if isinstance(self._adopt_checked, Exception):
            raise self._adopt_checked

    async def _adopt(self, obj: M) -> M | None:
        await self._check_can_adopt()
        meta: ObjectMeta = obj.metadata  # type: ignore[attr-defined]
        ref = new_controller_ref(self.owner, self.api_version, self.kind).to_dict()
        patch = {"metadata": {"ownerReferences": [ref], "uid": meta.uid}}
        log.info("%s %s/%s adopts %s", self.kind, self.owner.metadata.namespace, self.owner.metadata.name, meta.name)
        return await self.client.patch(self.model, meta.name or "", patch, "strategic", meta.namespace)

    async def _release(self, obj: M) -> None:
        meta: ObjectMeta = obj.metadata  # type: ignore[attr-defined]
        patch = {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": self.owner.metadata.uid}],
                              "uid": meta.uid}}
        log.info("%s %s/%s releases %s", self.kind, self.owner.metadata.namespace, self.owner.metadata.name, meta.name)
        await self.client.patch(self.model, meta.name or "", patch, "strategic", meta.namespace)


def recheck_deletion_timestamp(client: ApiClient, owner: Any) -> Callable[[], Awaitable[None]]:
    """controller.RecheckDeletionTimestamp: a fresh read says the owner is the same and not deleting."""
    model = type(owner)

    async def check() -> None:
        meta = owner.metadata
        fresh = await client.get(model, meta.name, meta.namespace)
        if fresh.metadata.uid != meta.uid:  # type: ignore[attr-defined]
            raise RuntimeError(f"original {model.__name__} {meta.namespace}/{meta.name} is gone: got uid "
                               f"{fresh.metadata.uid}, wanted {meta.uid}")  # type: ignore[attr-defined]
        if fresh.metadata.deletion_timestamp is not None:  # type: ignore[attr-defined]
            raise RuntimeError(f"{meta.namespace}/{meta.name} has just been deleted at "
                               f"{fresh.metadata.deletion_timestamp}")  # type: ignore[attr-defined]

    return check


