"""The namespace controller: empties a namespace being deleted, then lets it go (upstream
pkg/controller/namespace, its NamespacedResourcesDeleter).

Contract with the apiserver: DELETE of a namespace whose `spec.finalizers` is not empty sets its
deletionTimestamp and `status.phase: Terminating` instead of deleting it; `PUT
/api/v1/namespaces/{name}/finalize` writes only `spec.finalizers`; the namespace is deleted once
both `spec.finalizers` and `metadata.finalizers` are empty.

For a namespace with a deletionTimestamp that still carries the `kubernetes` finalizer, every
namespaced resource the apiserver serves is emptied in it (deletecollection where the resource
has the verb, else list + delete, Background propagation), the namespace's deletion conditions
say how far that got (NamespaceContentRemaining, NamespaceFinalizersRemaining, ... as upstream
words them), and once nothing is left the finalizer is removed through /finalize. Pods still
terminating gracefully make it look again when their grace period should be over; anything else
remaining is retried with back-off.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from machinery.api.core_v1 import Namespace
from machinery.api.meta import Preconditions
from machinery.api.resources import RESOURCES, ResourceInfo
from machinery.client import KUBE_VERSION, ApiClient, ApiError, retry_on_conflict
from machinery.controller import Controller
from machinery.informer import SharedInformerFactory
from machinery.timeutil import now_rfc3339, parse_rfc3339

log = logging.getLogger(__name__)

IDENTITY = "system:serviceaccount:kube-system:namespace-controller"
USER_AGENT = f"kube-controller-manager/{KUBE_VERSION} (linux/amd64) minik8s/{IDENTITY}"

FINALIZER_KUBERNETES = "kubernetes"
NAMESPACE_INFO = next(r for r in RESOURCES if r.kind == "Namespace" and r.group == "")

# condition type -> (reason, message) when all is well (upstream namespace deletion conditions)
_OK_CONDITIONS: dict[str, tuple[str, str]] = {
    "NamespaceDeletionDiscoveryFailure": ("ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": ("ContentDeleted",
                                        "All content successfully deleted, may be waiting on finalization"),
    "NamespaceContentRemaining": ("ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}

_MAX_BACKOFF = 10.0


@dataclass
class ContentStatus:
    """What one deletion pass left behind."""

    remaining: Counter[str] = field(default_factory=Counter)  # group resource -> objects left
    finalizers: Counter[str] = field(default_factory=Counter)  # finalizer -> objects carrying it
    failures: list[str] = field(default_factory=list)  # "pods: <error>"
    estimate: float = 0.0  # seconds until graceful deletions should be over

    @property
    def done(self) -> bool:
        return not self.remaining and not self.failures

    def conditions(self) -> dict[str, tuple[str, str, str]]:
        """condition type -> (status, reason, message)."""
        out = {t: ("False", reason, message) for t, (reason, message) in _OK_CONDITIONS.items()}
        if self.failures:
            out["NamespaceDeletionContentFailure"] = (
                "True", "ContentDeletionFailed",
                f"Failed to delete all resource types, {len(self.failures)} remaining: " + ", ".join(self.failures))
        if self.remaining:
            out["NamespaceContentRemaining"] = (
                "True", "SomeResourcesRemain",
                "Some resources are remaining: " + ", ".join(
                    f"{r} has {n} resource instances" for r, n in sorted(self.remaining.items())))
        if self.finalizers:
            out["NamespaceFinalizersRemaining"] = (
                "True", "SomeFinalizersRemain",
                "Some content in the namespace has finalizers remaining: " + ", ".join(
                    f"{f} in {n} resource instances" for f, n in sorted(self.finalizers.items())))
        return out


class NamespaceController(Controller):
    """Deletes everything in a terminating namespace, then finalizes it."""

    name = "namespace"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, *, workers: int = 10) -> None:
        super().__init__(workers=workers)
        self.client = client
        self.namespaces = informers.informer_for(Namespace)
        self.watch(self.namespaces)
        self.resources: list[ResourceInfo] = [
            r for r in RESOURCES if r.namespaced and {"list", "delete"} <= set(r.verbs)
        ]
        self._attempts: Counter[str] = Counter()  # namespace -> passes that left content behind

    async def reconcile(self, key: str) -> float | None:
        ns = self.namespaces.store.get(key)
        if ns is None or ns.metadata.deletion_timestamp is None:
            self._attempts.pop(key, None)
            return None
        if FINALIZER_KUBERNETES not in ((ns.spec.finalizers if ns.spec else None) or []):
            self._attempts.pop(key, None)
            return None  # finalized already; the apiserver deletes it when metadata.finalizers empty too
        log.info("namespace: deleting all content of %s", key)
        status = await self._delete_all_content(key)
        await self._update_status(key, status)
        if not status.done:
            self._attempts[key] += 1
            delay = status.estimate if status.estimate > 0 else min(0.05 * 2 ** self._attempts[key], _MAX_BACKOFF)
            log.info("namespace: %s still has content (%s); looking again in %.1fs", key,
                     ", ".join(f"{r}: {n}" for r, n in status.remaining.items()) or "; ".join(status.failures),
                     delay)
            return delay
        self._attempts.pop(key, None)
        await self._finalize(key)
        return None

    # -- emptying ---------------------------------------------------------------------------

    async def _delete_all_content(self, namespace: str) -> ContentStatus:
        status = ContentStatus()
        now = dt.datetime.now(dt.UTC)
        for info in self.resources:
            try:
                await self._delete_collection(info, namespace)
                left = (await self.client.list_raw(info, namespace)).get("items") or []
            except ApiError as e:
                if e.is_not_found or e.code == 405:
                    continue
                status.failures.append(f"{info.group_resource}: {e.message or e}")
                continue
            if not left:
                continue
            status.remaining[info.group_resource] += len(left)
            for item in left:
                meta = item.get("metadata") or {}
                for finalizer in meta.get("finalizers") or []:
                    status.finalizers[finalizer] += 1
                deadline = parse_rfc3339(meta.get("deletionTimestamp"))
                if info.kind == "Pod" and deadline is not None:  # a graceful pod deletion: when should it end
                    status.estimate = max(status.estimate, (deadline - now).total_seconds())
        return status

    async def _delete_collection(self, info: ResourceInfo, namespace: str) -> None:
        if "deletecollection" in info.verbs:
            try:
                await self.client.delete_collection_raw(info, namespace, propagation_policy="Background")
                return
            except ApiError as e:
                if e.code != 405:
                    raise
        items = (await self.client.list_raw(info, namespace)).get("items") or []
        for item in items:
            meta = item.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            try:
                await self.client.delete_raw(info, meta["name"], namespace, propagation_policy="Background",
                                             preconditions=Preconditions(uid=meta.get("uid")))
            except ApiError as e:
                if not (e.is_not_found or e.is_conflict):
                    raise

    # -- the namespace itself ---------------------------------------------------------------

    async def _update_status(self, name: str, content: ContentStatus) -> None:
        """phase Terminating and the deletion conditions; lastTransitionTime moves only on a change."""
        wanted = content.conditions()

        async def attempt() -> None:
            ns = await self.client.get_raw(NAMESPACE_INFO, name)
            st: dict[str, Any] = ns.setdefault("status", {})
            before = {"phase": st.get("phase"), "conditions": [dict(c) for c in st.get("conditions") or []]}
            st["phase"] = "Terminating"
            by_type = {c.get("type"): c for c in st.get("conditions") or []}
            for type_, (cstatus, reason, message) in wanted.items():
                cond = by_type.get(type_)
                if cond is None:
                    cond = by_type[type_] = {"type": type_, "status": cstatus, "lastTransitionTime": now_rfc3339()}
                elif cond.get("status") != cstatus:
                    cond["status"], cond["lastTransitionTime"] = cstatus, now_rfc3339()
                cond["reason"], cond["message"] = reason, message
            st["conditions"] = list(by_type.values())
            if before == {"phase": st["phase"], "conditions": st["conditions"]}:
                return
            await self.client.update_raw(NAMESPACE_INFO, name, ns, subresource="status")

        try:
            await retry_on_conflict(attempt, attempts=10)
        except ApiError as e:
            if not e.is_not_found:
                raise

    async def _finalize(self, name: str) -> None:
        """PUT namespaces/{name}/finalize without the kubernetes finalizer (the apiserver deletes it)."""

        async def attempt() -> None:
            ns = await self.client.get_raw(NAMESPACE_INFO, name)
            spec = ns.setdefault("spec", {})
            finalizers = spec.get("finalizers") or []
            if FINALIZER_KUBERNETES not in finalizers:
                return
            spec["finalizers"] = [f for f in finalizers if f != FINALIZER_KUBERNETES]
            await self.client.update_raw(NAMESPACE_INFO, name, ns, subresource="finalize")
            log.info("namespace: %s is empty; finalized", name)

        try:
            await retry_on_conflict(attempt, attempts=10)
        except ApiError as e:
            if not e.is_not_found:
                raise
