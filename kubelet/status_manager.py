"""Writing pod status to the apiserver (upstream pkg/kubelet/status/status_manager.go).

Only a status that differs from what was last written, or from what a newer copy of the API
object holds (another writer changed it, or the kubelet has not written yet), is sent: a merge
patch of `status` through the status subresource, carrying `metadata.uid` so that, as upstream's
status manager does, a pod deleted and recreated under the same name is not written with a stale
status. Fields the kubelet drops are sent as null so the patch removes them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from machinery.api.core_v1 import Pod
from machinery.client import ApiClient, ApiError

if TYPE_CHECKING:
    from kubelet.pod_workers import PodWorker

log = logging.getLogger(__name__)


def status_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch turning status `old` into `new` (top-level keys only; lists are replaced whole)."""
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    for key in old:
        if key not in new:
            patch[key] = None
    return patch


def _rv(pod: Pod) -> int:
    rv = pod.metadata.resource_version or "0"
    return int(rv) if rv.isdigit() else 0


class StatusManager:
    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.writes = 0

    async def set_status(self, worker: PodWorker, status: dict[str, Any]) -> bool:
        """Send `status` for the worker's pod if it changed; True if a write was made."""
        pod = worker.pod
        api_status = pod.status.to_dict() if pod.status else {}
        patch = status_patch(api_status, status)
        if status == worker.last_status and (not patch or _rv(pod) <= worker.last_status_rv):
            # unchanged since our last write, and the API's copy is either ours or older than it; a copy newer
            # than our write that differs (the node lifecycle controller set Ready=False) is written over, as
            # upstream's status manager reconciles what it finds in the apiserver
            return False
        if not patch:
            worker.last_status = status
            return False
        meta = pod.metadata
        worker.writing_status = True
        written_rv = 0
        try:
            updated = await self.client.patch(Pod, meta.name or "", {"metadata": {"uid": meta.uid},
                                                                     "status": patch},
                                              "merge", meta.namespace, subresource="status")
            written_rv = _rv(updated)
        except ApiError as e:
            if e.is_not_found:
                log.debug("pod %s/%s is gone; status not written", meta.namespace, meta.name)
                return False
            raise
        finally:
            if written_rv:
                worker.last_status_rv = written_rv
            worker.status_write_done(written_rv)
        self.writes += 1
        if updated.metadata.uid != meta.uid:
            log.warning("status of %s/%s landed on a pod with another uid", meta.namespace, meta.name)
        worker.last_status = status
        if updated.status is not None and (worker.pod.metadata.resource_version or "0").isdigit() \
                and int(updated.metadata.resource_version or "0") > int(worker.pod.metadata.resource_version or "0"):
            worker.pod = updated
        return True
