"""Which of its own EndpointSlice writes a controller has not yet seen in its informer (upstream
staging/src/k8s.io/endpointslice/endpointslice_tracker.go).

Reconciling from a cache that has not yet shown the slice just created would create it again; so
every write is remembered (slice uid → the resourceVersion written, or deleted) until the informer
delivers it, and a Service with writes outstanding is looked at again shortly instead (upstream's
StaleInformerCache error). Watch events arrive in order, so the event carrying the written
resourceVersion is always delivered; a lost watch (relist) is covered by a time limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from machinery.api.discovery_v1 import EndpointSlice

DELETED = ""
STALE_AFTER = 10.0  # seconds after which an unseen write is no longer waited for


@dataclass
class EndpointSliceTracker:
    clock: Callable[[], float] = time.monotonic
    # owner key -> slice uid -> (resourceVersion written or DELETED, when)
    _expected: dict[str, dict[str, tuple[str, float]]] = field(default_factory=dict)

    def written(self, owner: str, slice_: EndpointSlice) -> None:
        if slice_.metadata.uid:
            self._expected.setdefault(owner, {})[slice_.metadata.uid] = (
                slice_.metadata.resource_version or "", self.clock())

    def deleted(self, owner: str, slice_: EndpointSlice) -> None:
        if slice_.metadata.uid:
            self._expected.setdefault(owner, {})[slice_.metadata.uid] = (DELETED, self.clock())

    def observed(self, owner: str, slice_: EndpointSlice, gone: bool = False) -> bool:
        """The informer delivered this slice (gone: its deletion); True when it is one of our own writes
        (upstream's ShouldSync false: nothing to look at again)."""
        expected = self._expected.get(owner)
        uid = slice_.metadata.uid or ""
        if expected is None or uid not in expected:
            return False
        want, _ = expected[uid]
        if (gone and want == DELETED) or (not gone and want != DELETED and want == slice_.metadata.resource_version):
            del expected[uid]
            if not expected:
                del self._expected[owner]
            return True
        if gone:  # someone else deleted what we last wrote: no longer waited for, but worth a sync
            del expected[uid]
            if not expected:
                del self._expected[owner]
        return False

    def stale(self, owner: str) -> bool:
        """Some write for this owner is not in the cache yet."""
        expected = self._expected.get(owner)
        if not expected:
            return False
        now = self.clock()
        for uid in [u for u, (_, when) in expected.items() if now - when > STALE_AFTER]:
            del expected[uid]
        if not expected:
            del self._expected[owner]
            return False
        return True

    def forget(self, owner: str) -> None:
        self._expected.pop(owner, None)
