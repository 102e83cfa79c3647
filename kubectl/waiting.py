"""Waiting on one object through list + watch (what kubectl's informers do for delete and rollout status).

The object is listed by `metadata.name`, then watched from the list's resourceVersion; a stream the
server ends is resumed from the last resourceVersion seen, and an expired one (410) is relisted.
Callers bound the wait with a deadline (asyncio.timeout).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kubectl.context import Context
from machinery.api.resources import ResourceInfo
from machinery.client import ApiError
from machinery.selectors import escape_field_value
from machinery.types import Obj

# called with ("ADDED"|"MODIFIED"|"DELETED", object or None when absent); True ends the wait
Condition = Callable[[str, Obj | None], bool]


def _uid(obj: Obj | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


async def watch_object(ctx: Context, info: ResourceInfo, namespace: str | None, name: str,
                       condition: Condition) -> None:
    """Feed every state of the object to `condition` until it returns True (the caller's deadline bounds it)."""
    path = info.collection_path(namespace)
    selector = f"metadata.name={escape_field_value(name)}"
    while True:
        listed = await ctx.client.request("GET", path, params={"fieldSelector": selector})
        items = [i for i in listed.get("items") or [] if (i.get("metadata") or {}).get("name") == name]
        if condition("ADDED" if items else "DELETED", items[0] if items else None):
            return
        rv = (listed.get("metadata") or {}).get("resourceVersion") or ""
        while True:
            params = {"fieldSelector": selector, "resourceVersion": rv or None, "allowWatchBookmarks": "true",
                      "timeoutSeconds": 300}
            started = time.monotonic()
            try:
                async for etype, obj in ctx.client.watch_events(path, params):
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if etype == "BOOKMARK":
                        continue
                    if condition(etype, obj):
                        return
            except ApiError as e:
                if e.is_gone:
                    break  # too old to resume: list again
                raise
            # the server ended the stream: resume from the last resourceVersion (not in a tight loop)
            if time.monotonic() - started < 1.0:
                await asyncio.sleep(1.0)


async def wait_for_deletion(ctx: Context, info: ResourceInfo, namespace: str | None, name: str, uid: str) -> None:
    """Until the object (this uid, if known) is gone."""

    def gone(etype: str, obj: Obj | None) -> bool:
        if obj is None:
            return True
        if uid and _uid(obj) != uid:
            return True  # a new object of the same name: ours is gone
        return etype == "DELETED"

    await watch_object(ctx, info, namespace, name, gone)
