"""Serving custom resources as their CRDs come and go (upstream apiextensions-apiserver: the crdHandler
of pkg/apiserver/customresource_handler.go, and the controllers it runs in every apiserver:
status/naming_controller.go, establish/establishing_controller.go, finalizer/crd_finalizer.go).

Every apiserver watches the CRDs in its watch cache. For each CRD whose names are accepted it builds one
generic Store per served version (the routes, watch cache and discovery follow); for each CRD it keeps
the status conditions NamesAccepted and Established and `acceptedNames` current; a deleted CRD (held by
the cleanup finalizer) has its objects deleted, then the finalizer removed, and is no longer served.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.apiextensions import openapi
from apiserver.apiextensions.customresource import CustomResourceStore
from apiserver.apiextensions.strategy import CLEANUP_FINALIZER, is_condition_true, set_condition
from apiserver.endpoints.installer import Dispatch, build_router
from apiserver.openapi_v2_proto import encode_document
from apiserver.registry.generic import DeleteOptions, Store, WriteOptions
from apiserver.requestinfo import of_scope
from apiserver.storage.etcd import EtcdStorage, StorageError
from apiserver.storage.predicate import Predicate
from apiserver.warning import add_warning
from machinery.api.resources import RESOURCES, ResourceInfo
from machinery.types import Obj

log = logging.getLogger(__name__)


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes' version order (upstream version.CompareKubeAwareVersionStrings): GA before beta
    before alpha, higher numbers first, then anything else alphabetically."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if m is None:
        return (3, 0, 0, version)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    return ({None: 0, "beta": 1, "alpha": 2}[stage], -major, -minor, version)


@dataclass
class Served:
    crd: Obj
    fingerprint: str
    stores: dict[str, CustomResourceStore] = field(default_factory=dict)  # by version


class CustomResourceRegistry:
    def __init__(self, crds: Store, storage: EtcdStorage,
                 namespace_state: Callable[[str], Awaitable[str | None]], watch_window: int,
                 min_request_timeout: float, watch_dispatchers: dict[str, Dispatch]) -> None:
        self.crds = crds
        self.storage = storage
        self.namespace_state = namespace_state
        self.watch_window = watch_window
        self.min_request_timeout = min_request_timeout
        self.watch_dispatchers = watch_dispatchers
        self.admission: Any = None
        self.served: dict[str, Served] = {}
        self.dispatchers: dict[str, Dispatch] = {}  # /apis/<group>/<version> → its dispatch
        self._finalizing: dict[str, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None
        # the CRDs there were at start are served (upstream's readyz check crd-informer-synced)
        self.synced = asyncio.Event()
        self.generation = 0  # moves whenever what is served changes (the OpenAPI documents are rebuilt)
        self._v2_proto: tuple[int, bytes] | None = None
        self._openapi: tuple[int, dict[str, tuple[dict[str, Any], str]], dict[str, Any], dict[str, Any]] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        for task in [self._task, *self._finalizing.values()]:
            if task is not None:
                task.cancel()
        for served in list(self.served.values()):
            for store in served.stores.values():
                await store.cacher.stop()
        self.served.clear()

    async def _run(self) -> None:
        while True:
            try:
                watcher = await self.crds.watch(None, Predicate(), "0", False, encoded=False)
                seen: set[str] = set()
                replaying = len(watcher.queue)
                if replaying == 0:  # a relist that found no CRD at all
                    for gone in list(self.served):
                        await self._unserve(gone)
                    self.synced.set()
                while True:
                    batch = await watcher.next_batch()
                    ended = False
                    for item in batch:
                        if item is None:
                            ended = True
                            break
                        if not isinstance(item, tuple):
                            continue
                        kind, cached = item
                        crd = cached.obj()
                        name = crd["metadata"]["name"]
                        if replaying > 0:
                            seen.add(name)
                            replaying -= 1
                            if replaying == 0:  # a relist: what is served but no longer listed has gone
                                for gone in set(self.served) - seen:
                                    await self._unserve(gone)
                        await self._handle(kind, crd)
                        if replaying == 0:
                            self.synced.set()
                    if ended:
                        break
                watcher.stop()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("custom resource registry: watching CRDs")
                await asyncio.sleep(1)

    # -- one CRD -----------------------------------------------------------------------------

    async def _handle(self, kind: str, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        if kind == "DELETED":
            await self._unserve(name)
            return
        try:
            if await self._sync_names(crd):
                return  # the status write comes back as its own event
        except (errors.ApiError, StorageError) as e:
            log.warning("CRD %s: naming: %s", name, e)
        if is_condition_true(crd, "NamesAccepted") or is_condition_true(crd, "Established"):
            await self._serve(crd)
        if crd["metadata"].get("deletionTimestamp") and CLEANUP_FINALIZER in (crd["metadata"].get("finalizers")
                                                                              or []):
            served = self.served.get(name)
            if served is not None:
                for store in served.stores.values():
                    store.terminating = True
            task = self._finalizing.get(name)
            if task is None or task.done():
                self._finalizing[name] = asyncio.create_task(self._finalize(name))

    def _other_names(self, crd: Obj) -> dict[str, set[str]]:
        group, me = crd["spec"]["group"], crd["metadata"]["name"]
        taken: dict[str, set[str]] = {k: set() for k in ("plural", "singular", "shortNames", "kind", "listKind")}
        for cached in list(self.crds.cacher.store.values()):
            other = cached.obj()
            if other["metadata"]["name"] == me or (other.get("spec") or {}).get("group") != group:
                continue
            accepted = (other.get("status") or {}).get("acceptedNames") or {}
            for k in ("plural", "singular", "kind", "listKind"):
                if accepted.get(k):
                    taken[k].add(accepted[k])
            taken["shortNames"].update(accepted.get("shortNames") or [])
        if not group.endswith(".k8s.io") and "." in group:
            return taken
        for info in RESOURCES:  # a CRD in a built-in group may not take a built-in's names
            if info.group == group:
                taken["plural"].add(info.plural)
                taken["kind"].add(info.kind)
                taken["shortNames"].update(info.short_names)
        return taken

    async def _sync_names(self, crd: Obj) -> bool:
        """The naming and establishing controllers: acceptedNames and the NamesAccepted and Established
        conditions (upstream calculateNamesAndConditions). Returns whether the status was written."""
        if crd["metadata"].get("deletionTimestamp"):
            return False
        requested = crd["spec"]["names"]
        status = crd.get("status") or {}
        accepted = copy.deepcopy(status.get("acceptedNames") or {})
        taken = self._other_names(crd)
        reason, message = "NoConflicts", "no conflicts found"
        new = dict(accepted)
        conflicts = []
        shorts = requested.get("shortNames") or []
        clash = [s for s in shorts if s in taken["shortNames"]]
        # upstream's order: plural, singular, shortNames, kind, listKind
        for key, why in (("plural", "PluralConflict"), ("singular", "SingularConflict"), ("shortNames", ""),
                         ("kind", "KindConflict"), ("listKind", "ListKindConflict")):
            if key == "shortNames":
                if clash:
                    conflicts.append(("ShortNamesConflict", f'"{clash[0]}" is already in use'))
                else:
                    new["shortNames"] = list(shorts)
                continue
            wanted = requested.get(key)
            if wanted and wanted in taken[key]:
                conflicts.append((why, f'"{wanted}" is already in use'))
            elif wanted:
                new[key] = wanted
        if not shorts:
            new.pop("shortNames", None)
        if not clash:
            if requested.get("categories"):
                new["categories"] = list(requested["categories"])
            else:
                new.pop("categories", None)
        if conflicts:
            reason, message = conflicts[0]
        wanted_status = copy.deepcopy(status)
        wanted_status["acceptedNames"] = new
        probe = {"status": wanted_status}
        set_condition(probe, "NamesAccepted", "False" if conflicts else "True", reason, message)
        if not conflicts and not is_condition_true(probe, "Established"):
            set_condition(probe, "Established", "True", "InitialNamesAccepted", "the initial names have been accepted")
        elif conflicts and not is_condition_true(probe, "Established"):
            set_condition(probe, "Established", "False", "NotAccepted", "not all names are accepted")
        if probe["status"] == status:
            return False
        wanted_status = probe["status"]

        async def transform(old: Obj) -> Obj:
            old["status"] = {**(old.get("status") or {}), "acceptedNames": wanted_status["acceptedNames"],
                             "conditions": wanted_status["conditions"]}
            return old

        await self.crds.guaranteed_update(None, crd["metadata"]["name"], transform, WriteOptions(), "status")
        return True

    async def _serve(self, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        spec = crd["spec"]
        fingerprint = json.dumps([spec, (crd.get("status") or {}).get("acceptedNames")], sort_keys=True)
        served = self.served.get(name)
        if served is not None and served.fingerprint == fingerprint:
            served.crd = crd
            return
        stores: dict[str, CustomResourceStore] = {}
        for version in spec["versions"]:
            if not version.get("served"):
                continue
            store = CustomResourceStore(crd, version["name"], self.storage, self.namespace_state, self.watch_window)
            store.admission = self.admission
            store.cacher.start()
            stores[version["name"]] = store
        old = self.served.get(name)
        self.served[name] = Served(crd, fingerprint, stores)
        if old is not None:
            for store in old.stores.values():
                await store.cacher.stop()
        await asyncio.gather(*(s.cacher.ready.wait() for s in stores.values()))
        self._rebuild_routes()

    async def _unserve(self, name: str) -> None:
        served = self.served.pop(name, None)
        if served is None:
            return
        self._rebuild_routes()
        for store in served.stores.values():
            await store.cacher.stop()

    def _rebuild_routes(self) -> None:
        by_prefix: dict[str, list[Store]] = {}
        for served in self.served.values():
            for store in served.stores.values():
                by_prefix.setdefault(store.info.prefix, []).append(store)
        for prefix in list(self.dispatchers):
            if prefix not in by_prefix:
                del self.dispatchers[prefix]
                self.watch_dispatchers.pop(prefix, None)
        for prefix, stores in by_prefix.items():
            found: dict[str, Dispatch] = {}
            build_router(stores, self.min_request_timeout, found)
            self.dispatchers[prefix] = found[prefix]
            self.watch_dispatchers[prefix] = found[prefix]
        self.generation += 1

    async def _finalize(self, name: str) -> None:
        """Upstream crd_finalizer: delete every object, wait for them to go, then drop the finalizer."""
        delay = 0.2
        while True:
            try:
                served = self.served.get(name)
                store = next(iter(served.stores.values())) if served and served.stores else None
                remaining = 0
                if store is not None:
                    await self._set_terminating(name, "True", "InstanceDeletionInProgress",
                                                "CustomResource deletion is in progress")
                    listed = await store.list(None, Predicate())
                    for obj in listed.items:
                        meta = obj["metadata"]
                        if not meta.get("deletionTimestamp"):
                            with contextlib.suppress(errors.ApiError):
                                await store.delete(meta.get("namespace"), meta["name"], DeleteOptions())
                    remaining = len((await store.list(None, Predicate())).items)
                if remaining == 0:
                    await self._set_terminating(name, "False", "InstanceDeletionCompleted", "removed all instances")

                    async def drop(old: Obj) -> Obj:
                        meta = old["metadata"]
                        meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != CLEANUP_FINALIZER]
                        if not meta["finalizers"]:
                            meta.pop("finalizers")
                        return old

                    await self.crds.guaranteed_update(None, name, drop, WriteOptions(), None)
                    return
            except errors.ApiError as e:
                if e.code == 404:
                    return
                log.warning("CRD %s: removing its objects: %s", name, e)
            except StorageError as e:
                log.warning("CRD %s: removing its objects: %s", name, e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5)

    async def _set_terminating(self, name: str, status: str, reason: str, message: str) -> None:
        async def transform(old: Obj) -> Obj:
            set_condition(old, "Terminating", status, reason, message)
            return old

        await self.crds.guaranteed_update(None, name, transform, WriteOptions(), "status")

    # -- what the app asks -------------------------------------------------------------------

    def infos(self) -> list[ResourceInfo]:
        return [s.info for served in self.served.values() for s in served.stores.values()]

    def store_for(self, group: str, version: str, plural: str) -> CustomResourceStore | None:
        for served in self.served.values():
            store = served.stores.get(version)
            if store is not None and store.info.group == group and store.info.plural == plural:
                return store
        return None

    def groups(self) -> dict[str, list[str]]:
        """Group → served versions, most preferred first."""
        out: dict[str, set[str]] = {}
        for info in self.infos():
            out.setdefault(info.group, set()).add(info.version)
        return {g: sorted(vs, key=version_priority) for g, vs in sorted(out.items())}

    def _openapi_documents(self) -> tuple[dict[str, tuple[dict[str, Any], str]], dict[str, Any], dict[str, Any]]:
        """(v3 documents by path with their hashes, v2 paths, v2 definitions), rebuilt when what is served changes."""
        if self._openapi is None or self._openapi[0] != self.generation:
            by_gv: dict[str, list[tuple[ResourceInfo, dict[str, Any]]]] = {}
            for served in self.served.values():
                for store in served.stores.values():
                    by_gv.setdefault(f"apis/{store.info.api_version}", []).append((store.info, store.schema))
            v3 = {}
            for gv_path, entries in by_gv.items():
                document = openapi.v3_document(entries)
                digest = hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest().upper()
                v3[gv_path] = (document, digest)
            paths, definitions = openapi.v2_additions([e for entries in by_gv.values() for e in entries])
            self._openapi = (self.generation, v3, paths, definitions)
        return self._openapi[1], self._openapi[2], self._openapi[3]

    def openapi_v3_paths(self) -> dict[str, dict[str, str]]:
        return {p: {"serverRelativeURL": f"/openapi/v3/{p}?hash={digest}"}
                for p, (_, digest) in self._openapi_documents()[0].items()}

    def openapi_v3(self, gv_path: str) -> dict[str, Any] | None:
        found = self._openapi_documents()[0].get(gv_path.strip("/"))
        return found[0] if found else None

    def openapi_v2(self, base: dict[str, Any]) -> dict[str, Any]:
        """The built-in v2 document with the custom resources' paths and definitions added."""
        _, paths, definitions = self._openapi_documents()
        if not paths:
            return base
        return {**base, "paths": dict(sorted({**base["paths"], **paths}.items())),
                "definitions": {**base["definitions"], **definitions}}

    def openapi_v2_protobuf(self, base: dict[str, Any]) -> bytes:
        if self._v2_proto is not None and self._v2_proto[0] == self.generation:
            return self._v2_proto[1]
        data = encode_document(self.openapi_v2(base))
        self._v2_proto = (self.generation, data)
        return data

    def not_found(self) -> errors.ApiError:
        """What a path no one serves answers: 404, or 503 while the CRDs there were at start are not all
        served yet (after a restart, their clients must retry rather than conclude the resource is gone)."""
        return errors.page_not_found() if self.synced.is_set() else errors.paths_not_installed()

    async def dispatch(self, request: Request, group: str, version: str, path: str) -> Response:
        found = self.dispatchers.get(f"/apis/{group}/{version}")
        if found is None:
            raise self.not_found()
        target = of_scope(request.scope).target
        store = self.store_for(group, version, target.resource) if target is not None else None
        if store is not None and store.deprecation:
            add_warning(store.deprecation)
        return await found(request, path)
