"""The generic store every resource is served by (upstream: pkg/registry/generic/registry/store.go).

It owns the rules common to all kinds — system metadata, generateName, generation, compare-and-swap
updates, graceful and finalizer-held deletion, lists with selectors and pages, watches through the
cache — and calls the resource's Strategy for what differs (defaults, validation, selectable fields).
"""

from __future__ import annotations

import base64
import binascii
import builtins
import copy
import functools
import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from sys import intern
from typing import Any

import orjson
from pydantic import ValidationError

from apiserver import errors, fieldmanager
from apiserver.admission.interfaces import Admission, AdmissionAttributes
from apiserver.patch import APPLY_PATCH, UnsupportedPatchType, apply_patch, decode_apply
from apiserver.printers import table_for
from apiserver.registry.meta import validate_object_meta, validate_object_meta_update
from apiserver.registry.strategy import Strategy
from apiserver.storage import codec
from apiserver.storage.cacher import CachedObject, Cacher, TooOld, Watcher
from apiserver.storage.etcd import Compacted, EtcdStorage, KeyExists, KeyNotFound, RevisionConflict
from apiserver.storage.predicate import Attrs, Fields, Predicate
from apiserver.validation import FieldError, invalid, required
from machinery import managedfields
from machinery.api.resources import ResourceInfo
from machinery.patch import PatchError
from machinery.timeutil import now_rfc3339
from machinery.types import Obj

# upstream's utilrand alphabet: no vowels (no words), no 0/1/3 (look like letters)
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATE_NAME_ATTEMPTS = 8
_MAX_CAS_RETRIES = 16
# upstream Store.ReturnDeletedObject: a DELETE that removed one of these at once answers the object
# itself (pods, namespaces, services); every other resource answers a Status naming what went (finalizeDelete)
_RETURNS_DELETED_OBJECT = frozenset({("", "pods"), ("", "namespaces"), ("", "services")})
# upstream DefaultWatchCacheSizes: no watch cache for events (one per pod scheduled, created, started, ...: at
# 30,000 pods the largest cache of all, which no controller watches); their lists and watches read etcd
UNCACHED = frozenset({("", "events"), ("events.k8s.io", "events")})


def loc_to_path(loc: tuple[Any, ...]) -> str:
    """('spec', 'containers', 0, 'image') → 'spec.containers[0].image'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _delete_path(obj: Any, loc: tuple[Any, ...]) -> None:
    for part in loc[:-1]:
        obj = obj[part]
    if isinstance(obj, dict):
        obj.pop(loc[-1], None)


# pydantic names union members and validators inside a loc; they are not fields of the object
def _field_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    out = []
    for part in loc:
        if isinstance(part, str) and (part in {"int", "str", "float", "bool", "list", "dict", "none"}
                                      or "[" in part or part.startswith("function-")):
            break
        out.append(part)
    return tuple(out)


@dataclass
class WriteOptions:
    dry_run: bool = False
    field_validation: str = "Warn"  # Strict | Warn | Ignore, as the query parameter says
    field_manager: str | None = None
    force: bool = False
    warnings: list[str] = field(default_factory=list)
    user: Any = None  # the request's authenticated user (machinery.authn.user.UserInfo); None for internal writes
    user_agent: str = ""  # names the field manager when fieldManager is not given
    apply: bool = False  # set by server-side apply: the object's managedFields are already the apply's


@dataclass
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None  # Orphan | Background | Foreground
    orphan_dependents: bool | None = None
    precondition_uid: str | None = None
    precondition_rv: str | None = None
    dry_run: bool = False
    user: Any = None  # as WriteOptions.user


@dataclass
class ListResult:
    items: list[Obj]
    resource_version: str
    continue_token: str = ""
    raw: list[bytes] | None = None  # from the watch cache: each item's wire JSON, ready to splice

    def objects(self) -> list[Obj]:
        return [orjson.loads(r) for r in self.raw] if self.raw is not None else self.items


def _interned(pairs: dict[str, str]) -> dict[str, str]:
    return {intern(k) if isinstance(k, str) else k: intern(v) if isinstance(v, str) else v for k, v in pairs.items()}


# The objects made from one template (a ReplicaSet's or a Job's pods) carry the same labels: the watch cache
# holds one dict of them for all (a pod's two labels: 184 bytes each otherwise). Bounded: full, it starts afresh
# (objects keep the dicts they were given), so labels no other object has cost nothing lasting here.
_SHARED_LABELS: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
_SHARED_LABELS_MAX = 1024


def _shared_labels(labels: dict[str, str]) -> dict[str, str]:
    try:
        key = tuple(labels.items())
        shared = _SHARED_LABELS.get(key)
    except TypeError:  # an unhashable value: not a valid label, but the cache holds what etcd holds
        return _interned(labels)
    if shared is None:
        if len(_SHARED_LABELS) >= _SHARED_LABELS_MAX:
            _SHARED_LABELS.clear()
        shared = _SHARED_LABELS[key] = _interned(labels)
    return shared

class Store:
    def __init__(self, info: ResourceInfo, strategy: Strategy, storage: EtcdStorage,
                 namespace_state: Callable[[str], Awaitable[str | None]] | None = None,
                 watch_window: int = 4096, root: str | None = None):
        self.info = info
        self.strategy = strategy
        self.storage = storage
        # custom resources live under their group (/registry/<group>/<plural>/), as upstream keeps them
        self.root = root or f"/registry/{info.plural}/"
        self.cacher = Cacher(storage, self.root, self.attrs_of, window=watch_window,
                             enabled=(info.group, info.plural) not in UNCACHED)
        # the field selector may test exactly what the strategy exposes (upstream GetAttrs)
        self.selectable_fields = frozenset(strategy.field_values({"metadata": {}}))
        # "Active", "Terminating" or None (missing): lets creates honour namespace lifecycle
        self.namespace_state = namespace_state
        # set by the apiserver; requests with a user (opts.user) are admitted, internal writes are not
        self.admission: Admission | None = None
        self.returns_deleted_object = (info.group, info.plural) in _RETURNS_DELETED_OBJECT
        # the scale subresource's (specReplicasPath, statusReplicasPath, labelSelectorPath): a custom
        # resource's come from its CRD; None reads spec.replicas, status.replicas and spec.selector
        self.scale_paths: tuple[str, str, str] | None = None

    @functools.cached_property
    def type_node(self) -> managedfields.TypeNode:
        """The schema field ownership reads (a custom resource's comes from its CRD)."""
        return managedfields.from_model(self.info.model)

    def field_manager(self, opts: WriteOptions) -> str | None:
        return fieldmanager.manager_of(opts.field_manager, opts.user_agent)

    def table(self, objects: builtins.list[Obj], **options: Any) -> Obj:
        """The meta.k8s.io Table of objects (a custom resource's columns come from its CRD)."""
        return table_for(self.info.plural, objects, **options)

    # -- keys and attributes -----------------------------------------------------------------

    def key(self, namespace: str | None, name: str) -> str:
        if self.info.namespaced:
            return f"{self.root}{namespace}/{name}"
        return f"{self.root}{name}"

    def prefix(self, namespace: str | None) -> str:
        return f"{self.root}{namespace}/" if self.info.namespaced and namespace else self.root

    def attrs_of(self, obj: Obj) -> Attrs:
        # The watch cache keeps one Attrs per object: interned, the namespaces, node names, phases and label
        # pairs that thousands of objects share are held once, not once per object (10,000 pods: ~5 MB less);
        # the fields as a tuple against the resource's shared index of their names (Fields), the same labels as
        # one dict (10,000 pods: another 2.9 MB less).
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return Attrs(_shared_labels(labels), Fields(self.strategy.field_values(obj)))

    # -- schema: the pydantic model is the schema --------------------------------------------

    def check_schema(self, body: Obj, opts: WriteOptions) -> Obj:
        """Types and unknown fields, per fieldValidation; returns the object in canonical wire form."""
        name = (body.get("metadata") or {}).get("name") or ""
        name = name if isinstance(name, str) else ""  # a Status names objects by strings only
        try:
            return self.info.model.from_dict(body).to_dict()  # type: ignore[attr-defined]
        except ValidationError as e:
            problems = e.errors()
        unknown = [p for p in problems if p["type"] == "extra_forbidden"]
        wrong: dict[str, FieldError] = {}
        for p in problems:
            if p["type"] == "extra_forbidden":
                continue
            path = loc_to_path(_field_loc(p["loc"]))
            if p["type"] == "missing":
                wrong.setdefault(path, required(path))
            else:
                wrong.setdefault(path, invalid(path, p.get("input"), p["msg"][0].lower() + p["msg"][1:]))
        if wrong:
            raise errors.invalid(self.info, name, list(wrong.values()))
        paths = [loc_to_path(p["loc"]) for p in unknown]
        if opts.field_validation == "Strict":
            raise errors.invalid(self.info, name, [
                FieldError("FieldValueInvalid", path, f'unknown field "{path}"') for path in paths])
        if opts.field_validation != "Ignore":
            opts.warnings.extend(f'unknown field "{path}"' for path in paths)
        pruned = copy.deepcopy(body)
        for p in sorted(unknown, key=lambda p: len(p["loc"]), reverse=True):
            _delete_path(pruned, p["loc"])
        return self.check_schema(pruned, WriteOptions(field_validation="Ignore"))


    def redecode(self, obj: Obj, operation: str, old: Obj | None, subresource: str | None) -> Obj:
        """An object a mutating webhook patched, checked against the schema and defaulted again, as
        upstream decodes it (admission.ObjectInterfaces)."""
        checked = self.check_schema(obj, WriteOptions(field_validation="Ignore"))
        if operation == "CREATE":
            self.strategy.prepare_for_create(checked)
        elif old is not None and not subresource:
            self.strategy.prepare_for_update(checked, old)
        return checked
    def _check_type_meta(self, body: Obj) -> None:
        if body.get("metadata") is None:
            body["metadata"] = {}  # `metadata: null` decodes as empty ObjectMeta upstream
        elif not isinstance(body["metadata"], dict):
            raise errors.invalid(self.info, "", [invalid("metadata", body["metadata"],
                                                         "input should be a valid dictionary or object")])
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version and api_version != self.info.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({self.info.api_version})")
        if kind and kind != self.info.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind "
                                     f"({self.info.kind})")
        body["apiVersion"], body["kind"] = self.info.api_version, self.info.kind

    def _check_namespace(self, body: Obj, namespace: str | None) -> None:
        meta = body.setdefault("metadata", {})
        if not self.info.namespaced:
            meta.pop("namespace", None)
            return
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                     "on the request")
        meta["namespace"] = namespace

    def _validate(self, obj: Obj, old: Obj | None, subresource: str | None = None) -> None:
        meta = obj["metadata"]
        errs = validate_object_meta(meta, self.info.namespaced, self.info.kind)
        if old is not None:
            errs += validate_object_meta_update(meta, old["metadata"])
        errs += self.strategy.validate(obj)
        if old is None:
            errs += self.strategy.validate_create(obj)
        elif subresource:
            errs += self.strategy.validate_subresource_update(subresource, obj, old)
        else:
            errs += self.strategy.validate_update(obj, old)
        if errs:
            raise errors.invalid(self.info, meta.get("name") or meta.get("generateName") or "", errs)

    # -- reads -------------------------------------------------------------------------------

    async def _read(self, namespace: str | None, name: str) -> tuple[Obj, int]:
        kv = await self.storage.get(self.key(namespace, name))
        if kv is None:
            raise errors.not_found(self.info, name)
        return codec.decode(kv.value, kv.mod_revision), kv.mod_revision

    async def _read_twice(self, namespace: str | None, name: str) -> tuple[Obj, Obj, int]:
        """The stored object decoded twice (one to keep, one to change) and its mod revision: decoding the JSON
        again costs a sixth of a deep copy of the decoded object (31 against 188 µs for a 1 KB pod)."""
        kv = await self.storage.get(self.key(namespace, name))
        if kv is None:
            raise errors.not_found(self.info, name)
        return codec.decode(kv.value, kv.mod_revision), codec.decode(kv.value, kv.mod_revision), kv.mod_revision

    async def get(self, namespace: str | None, name: str) -> Obj:
        return (await self._read(namespace, name))[0]

    async def list(self, namespace: str | None, predicate: Predicate, *, limit: int = 0,
                   continue_token: str = "", resource_version: str = "") -> ListResult:
        _parse_rv(resource_version)  # a malformed one is a 400, as for a watch
        if resource_version and resource_version != "0" and not continue_token and not limit:
            pass  # served consistently from etcd below: at least as new as asked for
        if resource_version == "0" and not continue_token and self.cacher.enabled:
            await self.cacher.ready.wait()
            objs, rv = self.cacher.snapshot(predicate)
            return ListResult([], str(rv), raw=[o.raw for o in objs])
        revision, start = 0, None
        prefix = self.prefix(namespace)
        if continue_token:
            revision, start = _decode_continue(continue_token, prefix)
        items: list[Obj] = []
        name = predicate.name
        if name is not None and (namespace or not self.info.namespaced) and not continue_token:
            # the object and the revision from one read: a revision read afterwards may already be past
            # a write made in between, which a watch from it would never show (a kubelet's own Node)
            kv, rv = await self.storage.get_with_revision(self.key(namespace, name))
            if kv is not None:
                obj = codec.decode(kv.value, kv.mod_revision)
                if predicate.matches(self.attrs_of(obj)):
                    items.append(obj)
            return ListResult(items, str(rv))
        next_key = ""
        while True:
            want = max(limit - len(items), 100) if limit else 0
            try:
                kvs, at, more = await self.storage.list(prefix, revision=revision, limit=want, start_key=start)
            except Compacted as e:
                raise errors.gone("The provided continue parameter is too old to display a consistent list "
                                  "result. You can start a new list without the continue parameter.") from e
            revision = revision or at  # etcd's header says "now"; later pages read the first page's revision
            for kv in kvs:
                obj = codec.decode(kv.value, kv.mod_revision)
                if predicate.matches(self.attrs_of(obj)):
                    items.append(obj)
                    if limit and len(items) == limit:
                        next_key = kv.key
                        break
            if next_key or not more or not kvs:
                break
            start = kvs[-1].key + "\0"
        token = ""
        if next_key:
            # only a real "more" is worth a token: look whether anything follows
            rest, _, _ = await self.storage.list(prefix, revision=revision, limit=1, start_key=next_key + "\0")
            if rest:
                token = _encode_continue(revision, next_key[len(prefix):] + "\0")
        return ListResult(items, str(revision), token)

    async def watch(self, namespace: str | None, predicate: Predicate, resource_version: str,
                    bookmarks: bool, encoded: bool = True) -> Watcher:
        rv = _parse_rv(resource_version)
        if rv and rv > self.cacher.rv and rv > await self.storage.current_revision():
            raise errors.timeout(f"Too large resource version: {rv}, current: {self.cacher.rv}")
        try:
            return await self.cacher.watch(predicate, rv, bookmarks, encoded)
        except TooOld as e:
            raise errors.gone(f"too old resource version: {rv} ({e})") from e

    # -- writes ------------------------------------------------------------------------------

    async def create(self, namespace: str | None, body: Obj, opts: WriteOptions) -> Obj:
        self._check_type_meta(body)
        self._check_namespace(body, namespace)
        obj = self.check_schema(body, opts)
        meta = obj["metadata"]
        incoming = meta.pop("managedFields", None)
        for system_field in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                             "selfLink"):
            meta.pop(system_field, None)
        now = meta["creationTimestamp"] = now_rfc3339()
        meta["uid"] = new_uid()
        meta["generation"] = 1
        generate = not meta.get("name") and meta.get("generateName")
        if generate:
            meta["name"] = _generated_name(meta["generateName"])
        if opts.apply:  # the apply made them
            meta["managedFields"] = incoming
        else:
            fieldmanager.track_create(self.info, self.type_node, obj, incoming, self.field_manager(opts), now)
        self.strategy.prepare_for_create(obj)
        admission = self.admission if opts.user is not None else None
        if admission is not None:
            attrs = AdmissionAttributes("CREATE", self, namespace, meta.get("name") or "", None, obj, None,
                                        opts.user, opts.dry_run)
            obj = await admission.mutate(attrs)
            meta = obj["metadata"]
        finish = await self.begin_create(obj, opts)
        try:
            self._validate(obj, None)
            if admission is not None:
                attrs.obj = obj
                await admission.validate(attrs)
            if self.info.namespaced:
                await self._require_namespace(namespace or "", meta["name"])
            if opts.dry_run:
                await finish(False)
                return obj
            for attempt in range(_GENERATE_NAME_ATTEMPTS):
                try:
                    revision = await self.storage.create(self.key(namespace, meta["name"]), codec.encode(obj))
                    break
                except KeyExists:
                    if not generate or attempt == _GENERATE_NAME_ATTEMPTS - 1:
                        raise errors.already_exists(self.info, meta["name"]) from None
                    meta["name"] = _generated_name(meta["generateName"])
        except BaseException:
            await finish(False)  # nothing the failed create took stays taken
            raise
        await finish(True)
        meta["resourceVersion"] = str(revision)
        return obj

    # -- hooks of resources with storage beside the object (upstream Store.BeginCreate, BeginUpdate,
    # AfterDelete): a Service's ClusterIP and NodePorts live in their own etcd keys ------------

    async def begin_create(self, obj: Obj, opts: WriteOptions) -> Finish:
        """Take what obj needs beyond its own key; the answer is called with whether the create went
        through (on False it gives back what was taken)."""
        return _finish_nothing

    async def begin_update(self, new: Obj, old: Obj, opts: WriteOptions) -> Finish:
        """As begin_create for an update: take what new needs that old did not have; the answer, called
        with True, gives back what old had and new no longer needs, with False what was taken."""
        return _finish_nothing

    async def after_delete(self, obj: Obj) -> None:
        """Give back what a deleted object held."""

    async def _require_namespace(self, namespace: str, name: str) -> None:
        if self.namespace_state is None:
            return
        state = await self.namespace_state(namespace)
        if state is None:
            raise errors.ApiError(404, "NotFound", f'namespaces "{namespace}" not found',
                                  {"name": namespace, "kind": "namespaces"})
        if state == "Terminating":
            raise errors.forbidden(self.info, name, f"unable to create new content in namespace {namespace} "
                                   "because it is being terminated")

    async def update(self, namespace: str | None, name: str, body: Obj, opts: WriteOptions,
                     subresource: str | None = None) -> Obj:
        """PUT: replace the object (or its status) — compare-and-swap on the resourceVersion given."""
        self._check_type_meta(body)
        self._check_namespace(body, namespace)
        body_name = (body.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise errors.bad_request(f"the name of the object ({body_name}) does not match the name on the URL "
                                     f"({name})")
        body["metadata"]["name"] = name
        new = self.check_schema(body, opts)

        async def transform(old: Obj) -> Obj:
            return new

        return await self.guaranteed_update(namespace, name, transform, opts, subresource,
                                             expected_rv=new["metadata"].get("resourceVersion") or None)

    async def patch(self, namespace: str | None, name: str, patch_type: str, body: bytes, opts: WriteOptions,
                    subresource: str | None = None) -> tuple[Obj, bool]:
        """PATCH; returns (object, created) — an apply patch creates what is missing."""
        model = self.info.model
        applying = patch_type.split(";", 1)[0].strip().lower() == APPLY_PATCH
        config: Obj = {}
        if applying:
            try:
                config = decode_apply(body)
            except PatchError as e:
                raise errors.bad_request(str(e)) from e
            opts.apply = True
        manager = self.field_manager(opts) or ""

        async def transform(old: Obj) -> Obj:
            if applying:
                applied = fieldmanager.apply(self.info, self.type_node, old, config, manager, opts.force,
                                             subresource, name, now_rfc3339())
                if applied is old:
                    return old
                self._check_namespace(applied, namespace)
                return self.check_schema(applied, opts)
            try:
                patched = apply_patch(old, patch_type, body, model)
            except UnsupportedPatchType as e:
                raise errors.unsupported_media_type(patch_type) from e
            except PatchError as e:
                raise errors.ApiError(422 if patch_type.startswith("application/json-patch") else 400,
                                      "Invalid" if patch_type.startswith("application/json-patch") else "BadRequest",
                                      str(e)) from e
            if not isinstance(patched, dict):
                raise errors.bad_request("the patch did not produce an object")
            self._check_type_meta(patched)
            self._check_namespace(patched, namespace)
            if (patched.get("metadata") or {}).get("name") != name:
                raise errors.bad_request("metadata.name: the name of a patched object may not change")
            return self.check_schema(patched, opts)

        try:
            return await self.guaranteed_update(namespace, name, transform, opts, subresource), False
        except errors.ApiError as e:
            if e.code != 404 or not patch_type.startswith("application/apply-patch") or subresource:
                raise
        applied = fieldmanager.apply(self.info, self.type_node, None, config, manager, opts.force, None, name,
                                     now_rfc3339())
        self._check_type_meta(applied)
        return await self.create(namespace, applied, opts), True

    async def guaranteed_update(self, namespace: str | None, name: str,
                                 transform: Callable[[Obj], Awaitable[Obj]], opts: WriteOptions,
                                 subresource: str | None, expected_rv: str | None = None) -> Obj:
        """Read, transform, write with compare-and-swap; retry when someone wrote in between,
        unless the client pinned a resourceVersion (then that is a 409 Conflict)."""
        for _ in range(_MAX_CAS_RETRIES):
            old, copied, mod_revision = await self._read_twice(namespace, name)
            new = await transform(copied)
            # a resourceVersion the client wrote (in a PUT body, or one a patch changed) is a precondition
            written = (new.get("metadata") or {}).get("resourceVersion") or None
            pinned = expected_rv or (written if written != old["metadata"]["resourceVersion"] else None)
            if pinned is not None and pinned != str(mod_revision):
                raise errors.conflict(self.info, name)
            new = self._prepare_update(new, old, subresource)
            if not opts.apply:
                fieldmanager.track_update(self.info, self.type_node, old, new, self.field_manager(opts), subresource,
                                          now_rfc3339())
            admission = self.admission if opts.user is not None else None
            if admission is not None:
                attrs = AdmissionAttributes("UPDATE", self, namespace, name, subresource, new, old, opts.user,
                                            opts.dry_run)
                new = await admission.mutate(attrs)
            finish = await self.begin_update(new, old, opts)
            try:
                self._validate(new, old, subresource)
                if _spec_of(new) != _spec_of(old):
                    new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
                if admission is not None:
                    attrs.obj = new
                    await admission.validate(attrs)
                if new == old or opts.dry_run:
                    await finish(False)
                    return old if new == old else new  # no-op writes are skipped, as upstream does
                meta = new["metadata"]
                deleted = bool(meta.get("deletionTimestamp") and not meta.get("finalizers")
                               and not meta.get("deletionGracePeriodSeconds") and not self.strategy.holds_deletion(new))
                try:
                    if deleted:
                        revision = await self.storage.delete(self.key(namespace, name), mod_revision)
                    else:
                        revision = await self.storage.update(self.key(namespace, name), codec.encode(new),
                                                             mod_revision)
                except RevisionConflict:
                    if pinned is not None:
                        raise errors.conflict(self.info, name) from None
                    await finish(False)
                    continue
                except KeyNotFound:
                    raise errors.not_found(self.info, name) from None
            except BaseException:
                await finish(False)
                raise
            await finish(True)
            if deleted:
                await self.after_delete(new)
            meta["resourceVersion"] = str(revision)
            return new
        raise errors.conflict(self.info, name, "too many concurrent writers; try again")

    def _prepare_update(self, new: Obj, old: Obj, subresource: str | None) -> Obj:
        if subresource in ("status", "finalize", "ephemeralcontainers"):
            self.strategy.prepare_for_subresource_update(subresource, new, old)
        meta, old_meta = new.setdefault("metadata", {}), old["metadata"]
        # system fields an update never changes (upstream BeforeUpdate); a uid given must be the
        # stored one (validation says "field is immutable"), a missing one is filled in
        if not meta.get("uid") and "uid" in old_meta:
            meta["uid"] = old_meta["uid"]
        for system_field in ("creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                             "generation"):
            if system_field in old_meta:
                meta[system_field] = old_meta[system_field]
            else:
                meta.pop(system_field, None)
        meta.pop("selfLink", None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if subresource is None:
            self.strategy.prepare_for_update(new, old)
        return new

    # -- deletes -----------------------------------------------------------------------------

    async def delete(self, namespace: str | None, name: str, options: DeleteOptions) -> tuple[Obj, bool]:
        """DELETE; returns (object, gone) — gone is False while a grace period or finalizers hold it."""
        admitted = self.admission is None or options.user is None
        for _ in range(_MAX_CAS_RETRIES):
            obj, updated, mod_revision = await self._read_twice(namespace, name)
            meta = obj["metadata"]
            if not admitted and self.admission is not None:
                await self.admission.validate(AdmissionAttributes("DELETE", self, namespace, name, None, None, obj,
                                                                  options.user, options.dry_run))
                admitted = True
            if options.precondition_uid and options.precondition_uid != meta.get("uid"):
                raise errors.conflict(self.info, name, f"Precondition failed: UID in precondition: "
                                      f"{options.precondition_uid}, UID in object meta: {meta.get('uid')}")
            if options.precondition_rv and options.precondition_rv != meta.get("resourceVersion"):
                raise errors.conflict(self.info, name, f"Precondition failed: ResourceVersion in precondition: "
                                      f"{options.precondition_rv}, ResourceVersion in object meta: "
                                      f"{meta.get('resourceVersion')}")
            umeta = updated["metadata"]
            finalizers: list[str] = list(umeta.get("finalizers") or [])
            policy = options.propagation_policy or ("Orphan" if options.orphan_dependents else None)
            if policy == "Orphan" and "orphan" not in finalizers:
                finalizers.append("orphan")
            if policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            grace = self.strategy.deletion_grace_period(obj, options.grace_period_seconds)
            if umeta.get("deletionTimestamp") and umeta.get("deletionGracePeriodSeconds") is not None:
                grace = min(grace, umeta["deletionGracePeriodSeconds"])  # a second delete may only shorten it
            held = self.strategy.holds_deletion(obj)
            if finalizers or grace > 0 or held:
                if finalizers:
                    umeta["finalizers"] = finalizers
                if held:
                    self.strategy.prepare_for_delete(updated)
                if not umeta.get("deletionTimestamp") or grace < (umeta.get("deletionGracePeriodSeconds") or 0):
                    umeta["deletionTimestamp"] = now_rfc3339(grace)
                umeta["deletionGracePeriodSeconds"] = grace
                if grace == 0 and not finalizers and not held:
                    pass  # falls through to the real delete below
                else:
                    if updated == obj or options.dry_run:
                        return updated, False
                    try:
                        revision = await self.storage.update(self.key(namespace, name), codec.encode(updated),
                                                             mod_revision)
                    except RevisionConflict:
                        continue
                    umeta["resourceVersion"] = str(revision)
                    return updated, False
            if options.dry_run:
                return obj, True
            try:
                await self.storage.delete(self.key(namespace, name), mod_revision)
            except RevisionConflict:
                continue
            except KeyNotFound:
                raise errors.not_found(self.info, name) from None
            await self.after_delete(obj)
            return obj, True
        raise errors.conflict(self.info, name, "too many concurrent writers; try again")

    def deleted_answer(self, obj: Obj) -> Obj:
        """What a DELETE that removed obj at once answers (upstream finalizeDelete): the object for pods, services and
        namespaces, else a Success Status whose details name it (kind is the resource, as upstream has it)."""
        if self.returns_deleted_object:
            return obj
        meta = obj.get("metadata") or {}
        details = {"name": meta.get("name", ""), "group": self.info.group, "kind": self.info.plural,
                   "uid": meta.get("uid", "")}
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {k: v for k, v in details.items() if v}}

    async def delete_collection(self, namespace: str | None, predicate: Predicate,
                                options: DeleteOptions) -> builtins.list[Obj]:  # `list` is a method here
        listed = await self.list(namespace, predicate)
        out = []
        for item in listed.items:
            meta = item["metadata"]
            try:
                obj, _ = await self.delete(meta.get("namespace"), meta["name"], options)
            except errors.ApiError as e:
                if e.code == 404:
                    continue
                raise
            out.append(obj)
        return out

    # -- cached reads for other stores -------------------------------------------------------

    def cached(self, namespace: str | None, name: str) -> CachedObject | None:
        return self.cacher.store.get(self.key(namespace, name))


Finish = Callable[[bool], Awaitable[None]]


async def _finish_nothing(succeeded: bool) -> None:
    return None


def _spec_of(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def new_uid() -> str:
    """A random (version 4) UUID as text, as str(uuid.uuid4()) gives it at a third of its cost: every create
    draws one. The random bytes come from os.urandom 4 KiB at a time (a getrandom(2) per UID was a tenth of
    that cost); a forked child draws its own (_refill_uids_in_child), never its parent's."""
    global _uid_hex, _uid_at
    at = _uid_at
    if at >= len(_uid_hex):
        _uid_hex, at = os.urandom(_UID_BATCH).hex(), 0
    _uid_at = at + 32
    h = _uid_hex[at:at + 32]
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_UUID_VARIANT[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


_UUID_VARIANT = "89ab"  # RFC 4122's variant: the top two bits of the clock sequence are 10
_UID_BATCH = 4096  # random bytes drawn at once: 256 UIDs
_uid_hex = ""  # hex digits of random bytes not handed out yet from _uid_at on
_uid_at = 0


def _refill_uids_in_child() -> None:
    global _uid_hex, _uid_at
    _uid_hex, _uid_at = "", 0


os.register_at_fork(after_in_child=_refill_uids_in_child)


def _generated_name(base: str) -> str:
    base = base[: 63 - 5]
    return base + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))


def _parse_rv(resource_version: str) -> int | None:
    if not resource_version:
        return None
    try:
        rv = int(resource_version)
    except ValueError:
        raise errors.bad_request(f'invalid resource version "{resource_version}"') from None
    if rv < 0:
        raise errors.bad_request(f'invalid resource version "{resource_version}"')
    return rv


def _encode_continue(revision: int, start: str) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": start})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str, prefix: str) -> tuple[int, str]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        revision, start = int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise errors.bad_request("continue key is not valid: malformed token") from None
    if data.get("v") != "meta.k8s.io/v1" or revision <= 0 or ".." in start or start.startswith("/"):
        raise errors.bad_request("continue key is not valid: incorrect encoded start resourceVersion (version "
                                 "meta.k8s.io/v1)")
    return revision, prefix + start
