"""Writing pod status to the apiserver (upstream pkg/kubelet/status/status_manager.go), keyed by pod UID.

Only a status that differs from what was last written, or from what a newer copy of the API
object holds (another writer changed it, or the kubelet has not written yet), is sent: a merge
patch of `status` through the status subresource, carrying `metadata.uid` so that, as upstream's
status manager does, a pod deleted and recreated under the same name is not written with a stale
status. Fields the kubelet drops are sent as null so the patch removes them.

Per pod uid it remembers its last write: the status, the resourceVersion the write produced, and
whether a write is on its way. With those `is_own_status_write` tells the pod workers that a watch
event carries only the kubelet's own write (no reason to sync), and `latest` hands the syncer the
pod with the newest status it knows (the write's answer comes before the watch event).

resourceVersions are opaque to clients (API conventions): compared for equality only. The order
comes from the watch, which shows a pod's versions in order: until the informer shows the version
our write produced, what it shows is older, and our written status is held over it (as
controllers/node_lifecycle.py holds its own writes). A relist may skip a version: after
CACHE_CATCH_UP_SECONDS the informer's copy is believed again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubelet import metrics
from machinery.api.core_v1 import Pod, PodStatus
from machinery.client import ApiClient, ApiError

log = logging.getLogger(__name__)


def status_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch turning status `old` into `new` (top-level keys only; lists are replaced whole)."""
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    for key in old:
        if key not in new:
            patch[key] = None
    return patch


CACHE_CATCH_UP_SECONDS = 30.0  # how long our own write outranks an informer that has not shown it


def _rv(pod: Pod) -> str | None:
    return pod.metadata.resource_version or None


def only_status_changed(old: Pod, new: Pod) -> bool:
    ignore = {"resource_version", "managed_fields", "generation"}
    return old.spec == new.spec and old.metadata.model_dump(exclude=ignore) == new.metadata.model_dump(exclude=ignore)


@dataclass
class _PodStatusRecord:
    status: dict[str, Any] | None = None  # what was last written (or found already in place)
    written_rv: str | None = None  # the pod's resourceVersion our last write produced
    # the status our last write returned, as JSON: made a model only when a sync needs it before the informer
    # shows it (decoding every answer into a Pod cost a fifth of a status write)
    written_status: dict[str, Any] | None = None
    # written_rv while the informer has not shown it (what it shows meanwhile is older), and since when
    awaiting: str | None = None
    awaiting_since: float = 0.0
    shown: str | None = None  # the last version the informer showed
    writing: bool = False  # a write is on its way (its response not yet in)
    # the status-only versions the watch showed meanwhile, in its order: ours, or another writer's
    unsettled: list[str | None] = field(default_factory=list)
    first_seen: float = field(default_factory=time.monotonic)  # the pod's first status: this kubelet saw it
    started: bool = False  # its Running status is written (or was in place: a pod adopted after a restart)

    def held(self, pod: Pod) -> bool:
        """Is our last write newer than `pod`? (the informer has not shown it yet)"""
        if self.awaiting is None:
            return False
        if _rv(pod) == self.awaiting or time.monotonic() - self.awaiting_since >= CACHE_CATCH_UP_SECONDS:
            self.awaiting = None  # shown (or, after a relist that skipped it, no longer waited for)
            return False
        return True


class StatusManager:
    def __init__(self, client: ApiClient, resync: Callable[[str], None] | None = None) -> None:
        self.client = client
        self.resync = resync or (lambda _uid: None)  # wakes the pod's worker
        self.writes = 0
        self._pods: dict[str, _PodStatusRecord] = {}

    def _record(self, uid: str) -> _PodStatusRecord:
        record = self._pods.get(uid)
        if record is None:
            record = self._pods[uid] = _PodStatusRecord()
        return record

    def last_status(self, uid: str) -> dict[str, Any] | None:
        record = self._pods.get(uid)
        return record.status if record else None

    def forget(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def latest(self, pod: Pod) -> Pod:
        """`pod`, with the status our last write returned while the informer has not shown that write."""
        record = self._pods.get(pod.metadata.uid or "")
        if record is not None and record.written_status is not None and record.held(pod):
            return pod.model_copy(update={"status": PodStatus.model_validate(record.written_status)})
        return pod

    def is_own_status_write(self, old: Pod, new: Pod) -> bool:
        """Does the update `old` → `new` carry nothing but our own status write? (as upstream's pod config
        drops the kubelet's own status updates). A status another writer changed (the node lifecycle
        controller's Ready=False) is not ours: the sync writes what the kubelet sees over it.
        Every update the informer shows passes here (the pod workers call it first): it is how the
        status manager learns that the informer has shown our write."""
        record = self._pods.get(new.metadata.uid or "")
        if record is None:
            return False
        record.shown = _rv(new)
        if record.awaiting is not None and _rv(new) == record.awaiting:
            record.awaiting = None
            return only_status_changed(old, new)  # our write itself
        if not only_status_changed(old, new):
            return False
        if record.writing:
            # the watch may deliver our write before its response is in: which one it is, is known only then
            record.unsettled.append(_rv(new))
            return True
        return record.held(new)  # older than our write: what it says, our write has overtaken

    def _write_done(self, uid: str, record: _PodStatusRecord, rv: str | None) -> None:
        record.writing = False
        seen, record.unsettled = record.unsettled, []
        if rv is not None and rv in seen:  # the watch showed our write already: what came after it is newer
            record.awaiting = None
            if seen.index(rv) < len(seen) - 1:
                self.resync(uid)  # another writer changed the status after our write
        elif rv is None and seen:
            self.resync(uid)  # no write of ours: what the watch showed meanwhile was another writer's

    async def set_status(self, pod: Pod, status: dict[str, Any]) -> bool:
        """Send `status` for `pod` if it changed; True if a write was made."""
        uid = pod.metadata.uid or ""
        record = self._record(uid)
        api_status = pod.status.to_dict() if pod.status else {}
        patch = status_patch(api_status, status)
        if status == record.status and (not patch or _rv(pod) == record.written_rv or record.held(pod)):
            return False
        if not patch:
            record.status = status
            return False
        meta = pod.metadata
        if not record.started and status.get("phase") == "Running":
            record.started = True
            if api_status.get("phase") != "Running":  # started by this kubelet now, not adopted running
                metrics.POD_START_DURATION.observe(time.monotonic() - record.first_seen)
                metrics.STARTED_PODS.inc()
        record.writing = True
        written_rv: str | None = None
        try:
            updated = await self.client.patch_raw(Pod, meta.name or "", {"metadata": {"uid": meta.uid},
                                                                        "status": patch},
                                                  "merge", meta.namespace, subresource="status")
            written_rv = (updated.get("metadata") or {}).get("resourceVersion") or None
        except ApiError as e:
            if e.is_not_found:
                log.debug("pod %s/%s is gone; status not written", meta.namespace, meta.name)
                return False
            raise
        finally:
            if written_rv is not None:
                record.written_rv = written_rv
                # a write that changed nothing answers with a version the watch may have shown already
                # (the apiserver skips no-op writes): that one is not waited for
                shown = written_rv in (_rv(pod), record.shown)
                record.awaiting, record.awaiting_since = (None if shown else written_rv), time.monotonic()
            self._write_done(uid, record, written_rv)
        self.writes += 1
        if (updated.get("metadata") or {}).get("uid") != meta.uid:
            log.warning("status of %s/%s landed on a pod with another uid", meta.namespace, meta.name)
        record.status = status
        if updated.get("status") is not None:
            record.written_status = updated["status"]
        return True
