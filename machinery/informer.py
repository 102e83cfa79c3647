"""Informers: list, then watch, into a local indexed cache, and tell handlers what changed.

This is client-go's reflector + indexer + shared informer in one asyncio class. Controllers read
the cache (`Store`) instead of asking the apiserver, and their handlers only enqueue keys:

- list once, then watch from the list's resourceVersion; when a stream ends or breaks, watch
  again from the last resourceVersion seen (BOOKMARK events advance it too), backing off
  (capped, jittered) while the apiserver is unreachable, and from the minimum again once a watch
  has worked;
- when that resourceVersion is too old (410 Gone / ERROR event reason Expired), relist and hand
  the handlers the differences: adds, updates, and deletes for objects that vanished meanwhile
  (client-go delivers those as DeletedFinalStateUnknown; here on_delete gets the last known
  object, which may be stale);
- every handler has its own queue and task, so one slow handler neither delays others nor
  stalls reading the watch stream.

Objects in the store are shared, not copied: treat them as read-only (`model_copy(deep=True)`
before changing one to send it back). Their parts are shared with other cached objects too (below),
so a change in place would change every object that has an equal part: the test suite runs with
MINIK8S_CACHE_READ_ONLY_CHECK=1, under which such a change raises `CachedObjectMutated`. All store
operations are synchronous, so they are atomic with respect to other coroutines on the loop.

What is cached is made small before it is stored (issue 19: a Pod cost 30 KB in every cache):
- an informer's `transform` (client-go's SetTransform) runs on every object first; the controller-manager
  and the scheduler pass `strip_managed_fields`, as upstream's do (`cache.TransformStripManagedFields`):
  no controller reads managedFields, and an update that leaves them out keeps the stored ones;
- `compact` then interns every string (namespaces, node and image names, label values, timestamps:
  one copy per process instead of one per object) and shares each model's `__pydantic_fields_set__`
  among every cached model that set the same fields (a set of 5+ names is 728 bytes, and a Pod has 20
  models); a copy of a cached model gets its own plain set again;
- and it makes equal sub-objects one object: the containers, labels, ownerReferences, conditions (one
  second's), node addresses of the pods of one ReplicaSet, and a pod's unchanged parts across its updates
  (`_SHARED`, a table by the hash of each sub-object's shape, swept of what no cached object uses);
- but what belongs to one object alone (its uid, resourceVersion and name, a pod's IP, a container's ID) is
  neither interned nor entered in the table, nor is any part that holds it (`_UNIQUE_FIELDS`).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import inspect
import logging
import os
import random
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from operator import is_
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from machinery import tracing
from machinery.api.core_v1 import ContainerStatus, PodIP, PodStatus
from machinery.api.meta import ObjectMeta
from machinery.api.resources import resource_for_model
from machinery.client import ApiClient, ApiError, ApiUnavailable, ClientError, Selector, format_selector
from machinery.selectors import SelectorError, parse_field_selector, parse_label_selector

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

IndexFunc = Callable[[Any], list[str]]
KeyFunc = Callable[[Any], str]
TransformFunc = Callable[[Any], Any]
Handler = Callable[..., Awaitable[None] | None]

LIST_PAGE_SIZE = 500  # objects per page of an informer's list (client-go's pager's default)

NAMESPACE_INDEX = "namespace"
NODE_NAME_INDEX = "spec.nodeName"
CONTROLLER_UID_INDEX = "controllerUID"


# -- keys and index functions -----------------------------------------------------------------


def _metadata(obj: Any) -> tuple[str | None, str | None, Any]:
    """(namespace, name, metadata) of a model or a wire-form dict."""
    if isinstance(obj, Mapping):
        meta = obj.get("metadata") or {}
        return meta.get("namespace"), meta.get("name"), meta
    meta = getattr(obj, "metadata", None)
    if meta is None:
        raise ValueError(f"{type(obj).__name__} has no metadata")
    return meta.namespace, meta.name, meta


def meta_namespace_key(obj: Any) -> str:
    """The cache key: "namespace/name", or "name" for cluster-scoped objects (client-go's format)."""
    namespace, name, _ = _metadata(obj)
    if not name:
        raise ValueError("object has no metadata.name")
    return f"{namespace}/{name}" if namespace else name


def split_meta_namespace_key(key: str) -> tuple[str | None, str]:
    """Inverse of `meta_namespace_key`: (namespace or None, name)."""
    parts = key.split("/")
    if len(parts) == 1 and parts[0]:
        return None, parts[0]
    if len(parts) == 2 and parts[1]:
        return parts[0] or None, parts[1]
    raise ValueError(f"unexpected key format: {key!r}")


def namespace_index(obj: Any) -> list[str]:
    namespace, _, _ = _metadata(obj)
    return [namespace] if namespace else []


def node_name_index(obj: Any) -> list[str]:
    """Pods by spec.nodeName (the scheduler's and kubelet's question: what runs on node X)."""
    if isinstance(obj, Mapping):
        node = (obj.get("spec") or {}).get("nodeName")
    else:
        node = getattr(getattr(obj, "spec", None), "node_name", None)
    return [node] if node else []


def controller_uid_index(obj: Any) -> list[str]:
    """Objects by their controlling owner's uid (ReplicaSet -> its Pods, Deployment -> its ReplicaSets)."""
    _, _, meta = _metadata(obj)
    if isinstance(meta, Mapping):
        refs = meta.get("ownerReferences")
    else:
        refs = getattr(meta, "owner_references", None)
    for ref in refs or []:
        controller = ref.get("controller") if isinstance(ref, Mapping) else ref.controller
        if controller:
            return [ref["uid"] if isinstance(ref, Mapping) else ref.uid]
    return []


# -- what is cached: transforms and compaction -------------------------------------------------


def strip_managed_fields(obj: Any) -> Any:
    """client-go's `cache.TransformStripManagedFields`: drop metadata.managedFields before caching.

    For the caches of components that never read them (the controller-manager and the scheduler, as
    upstream's); objects they send back without managedFields keep the stored ones (the apiserver's
    field manager keeps them when an update leaves them out). Models and wire-form dicts alike."""
    if isinstance(obj, Mapping):
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        return obj
    meta = getattr(obj, "metadata", None)
    if meta is not None and getattr(meta, "managed_fields", None) is not None:
        meta.__dict__["managed_fields"] = None  # as if never sent: not in the fields set either
        object.__setattr__(meta, "__pydantic_fields_set__", meta.__pydantic_fields_set__ - {"managed_fields"})
    return obj


class CachedObjectMutated(TypeError):
    """A cached object, or a part of one, was changed in place (raised only under the read-only check)."""


mutations_refused = 0  # CachedObjectMutated raised in this process (the test suite's guard reads it)


def _mutated(what: str) -> CachedObjectMutated:
    global mutations_refused
    mutations_refused += 1
    return CachedObjectMutated(
        f"{what} of an informer's cache changed in place: cached objects (and their parts, shared with other "
        "cached objects) are read-only; change a model_copy(deep=True) instead")


# MINIK8S_CACHE_READ_ONLY_CHECK=1 (the test suite sets it, for its own process and every component it starts):
# changing a cached object in place raises CachedObjectMutated instead of corrupting every object that shares
# the changed part. Off in production: a latent mutation then changes what it changes, as before.
READ_ONLY_CHECK = os.environ.get("MINIK8S_CACHE_READ_ONLY_CHECK", "") not in ("", "0")


class _SharedFieldsSet(set[str]):
    """The `__pydantic_fields_set__` of every cached model that set the same fields: one set, not one each.

    Cached objects are read-only; a copy (`model_copy`, `copy`, `deepcopy`, pickling) gets a plain set of
    its own, which pydantic then updates as usual. Setting a field of a cached model (a bug) raises under the
    read-only check (pydantic's setattr adds the name to this set), and otherwise leaves this set as it is
    rather than marking the field set on every model that shares it."""

    __slots__ = ()

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> set[str]:
        return set(self)

    def __reduce__(self) -> tuple[type[set[str]], tuple[builtins.list[str]]]:
        return set, (builtins.list(self),)

    def add(self, name: str) -> None:
        if READ_ONLY_CHECK:
            raise _mutated(f"field {name!r} of a model")

    def update(self, *others: Iterable[str]) -> None:
        if READ_ONLY_CHECK:
            raise _mutated("a model")


def _read_only(name: str) -> Callable[..., Any]:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise _mutated(f"a {type(self).__mro__[1].__name__} ({name})")
    return refuse


class _ReadOnlyDict(dict[Any, Any]):
    """A dict of a cached object under the read-only check: equal to and dumped as the dict it replaces,
    refusing every change; copies of it are plain dicts."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _read_only("item assignment")
    clear = pop = popitem = setdefault = update = _read_only("in-place method")

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        memo[id(self)] = result
        for key, value in self.items():
            result[copy.deepcopy(key, memo)] = copy.deepcopy(value, memo)
        return result

    def __reduce__(self) -> tuple[type[dict[Any, Any]], tuple[dict[Any, Any]]]:
        return dict, (dict(self),)


class _ReadOnlyList(list[Any]):
    """A list of a cached object under the read-only check (see `_ReadOnlyDict`)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only("item assignment")
    append = clear = extend = insert = pop = remove = reverse = sort = _read_only("in-place method")

    def __copy__(self) -> builtins.list[Any]:
        return builtins.list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> builtins.list[Any]:
        result: builtins.list[Any] = []
        memo[id(self)] = result
        result.extend(copy.deepcopy(value, memo) for value in self)
        return result

    def __reduce__(self) -> tuple[type[builtins.list[Any]], tuple[builtins.list[Any]]]:
        return builtins.list, (builtins.list(self),)


_FIELDS_SETS: dict[frozenset[str], _SharedFieldsSet] = {}
_intern = sys.intern
_NONE = type(None)
_DICTS = (dict, _ReadOnlyDict)
_LISTS = (list, _ReadOnlyList)
_EMPTY_DICT_KEY = hash((dict,))  # the shape of {} (see `_share_dict`)


def _shared_fields_set(fields: set[str]) -> _SharedFieldsSet:
    key = frozenset(fields)
    shared = _FIELDS_SETS.get(key)
    if shared is None:
        shared = _FIELDS_SETS[key] = _SharedFieldsSet(key)
    return shared


# Every sub-object of a cached object (a model, dict or list below its root), by the hash of its shape: its
# type and its parts (their identities, numbers by value), the parts being shared already (bottom-up). Equal
# sub-objects of cached objects (the containers, labels, ownerReferences, conditions of the pods of one
# ReplicaSet) are then one object. An entry is dropped by `_sweep` once only this table holds its object; the
# table sweeps itself after a sixteenth of its size in new entries, so the parts of replaced and deleted objects
# (a pod's status, container statuses: an update's own parts) do not outlive them by much.
_SHARED: dict[int, Any] = {}
_SWEEP_MIN = 1024
_sweep_at = _SWEEP_MIN
_share_parts = True  # the informer memory benchmark's rows before sharing turn it off

# Fields whose value belongs to one object alone: its uid, resourceVersion and name, a pod's IP, a container's ID.
# Interning such a string, or entering a part that holds one in `_SHARED`, costs an entry (some 50 and 90 bytes)
# that no other object can ever use: a density pod had five such strings and five such parts (its status, its
# container status, its pod IP and the lists of them), a fifth of what it cost in the controller-manager. They
# are left as decoded, and a part holding one (or holding such a part) is never entered in the table.
_UNIQUE_FIELDS: dict[type[BaseModel], frozenset[str]] = {
    ObjectMeta: frozenset({"uid", "resource_version", "name"}),
    PodStatus: frozenset({"pod_ip"}),
    PodIP: frozenset({"ip"}),
    ContainerStatus: frozenset({"container_id"}),
}
_unique_parts = 0  # values of _UNIQUE_FIELDS met so far: a part during whose sharing it grew holds one
_intern_unique = False  # the informer memory benchmark's rows before this step turn it on
# The values of one object alone met while compacting it (`compact` empties it): such a value given twice in one
# object (a pod's IP, as status.podIP and status.podIPs[0].ip) is one string, not one per field.
_own_values: dict[str, str] = {}


def compact(obj: Any) -> Any:
    """Make `obj` (a model tree or wire-form dict, about to be cached) smaller in place, and return it:
    every string interned (`sys.intern`: freed again with the last object that uses it) but the values of one
    object alone (`_UNIQUE_FIELDS`), every model's
    fields set shared (`_SharedFieldsSet`), and every sub-object equal to one already cached replaced by that
    one (`_SHARED`). Values are unchanged: equal, dumped the same. `obj` itself is never shared."""
    global _own_values
    _own_values = {}
    if isinstance(obj, BaseModel):
        _share_model_parts(obj)
        _compact_fields(obj)
    elif isinstance(obj, dict):
        _share_dict_parts(obj)
    elif isinstance(obj, list):
        _share_list_parts(obj)
    _own_values = {}
    if len(_SHARED) > _sweep_at:
        _sweep()
    return obj


def _sweep() -> None:
    """Drop the entries of `_SHARED` whose object no cached object uses any more (only the table refers to
    it). Newest first: an object's parts are older than it, so they are seen once it is gone."""
    global _sweep_at
    refcount = sys.getrefcount
    for key in builtins.list(reversed(_SHARED)):
        if refcount(_SHARED.get(key)) <= 2:  # the table's reference and getrefcount's argument
            _SHARED.pop(key, None)  # (get and pop: an informer on another thread may sweep too)
    _sweep_at = len(_SHARED) + max(_SWEEP_MIN, len(_SHARED) // 16)


def _shared_number(value: Any) -> Any:
    """The one int or float equal to `value` (equal numbers are not always one object), so that the parts
    of a shape are compared by identity alone."""
    key = hash((value.__class__, value))
    other = _SHARED.get(key)
    if other is None:
        _SHARED[key] = value
        return value
    if other.__class__ is value.__class__ and other == value:
        return other
    return value  # a hash collision (or NaN): kept as it is


def _shared(value: Any) -> Any:
    """The one object equal to `value` (a model, dict or list, its parts shared first), or `value` itself."""
    if isinstance(value, BaseModel):
        return _share_model(value)
    if isinstance(value, dict):
        return _share_dict(value)
    if isinstance(value, list):
        return _share_list(value)
    return value  # any other type (the API has none): kept, not shared


def _share_model_parts(model: BaseModel) -> None:
    """Share the parts of `model` in place."""
    unique = _UNIQUE_FIELDS.get(model.__class__)
    if unique is None:
        _share_dict_values(model.__dict__)  # the model's fields, shared in place as any dict's values
    else:
        _share_values_but(model.__dict__, unique)
    fields_set = model.__pydantic_fields_set__
    if fields_set.__class__ is set:
        object.__setattr__(model, "__pydantic_fields_set__", _shared_fields_set(fields_set))
    extra = model.__pydantic_extra__
    if extra:
        _share_dict_values(extra)


def _share_model(model: BaseModel) -> BaseModel:
    unique_before = _unique_parts
    _share_model_parts(model)
    if not _share_parts or model.__pydantic_extra__ or model.__pydantic_private__:
        return _compact_fields(model)  # extra fields (a custom object's) or private state: not shared
    if _unique_parts != unique_before:
        return _compact_fields(model)  # it holds a value of one object alone: never equal to another's
    values = model.__dict__
    fields_set = model.__pydantic_fields_set__
    key = hash((model.__class__, id(fields_set), *map(id, values.values())))
    other = _SHARED.get(key)
    if other is None:
        _SHARED[key] = model
        return _compact_fields(model)
    if (other.__class__ is model.__class__ and other.__pydantic_fields_set__ is fields_set
            and not other.__pydantic_extra__ and not other.__pydantic_private__
            and all(map(is_, values.values(), other.__dict__.values()))):
        return other
    return _compact_fields(model)  # a hash collision: kept as it is


# A model's fields are its `__dict__`, a dict of its own: a combined table, keys and hashes and values, 472 bytes
# for ObjectMeta's 15 fields, 192 for a PodIP's one (pydantic builds it anew for every model). CPython's instance
# dicts share one table of keys among every instance of a class and keep only the values ("split" dicts, PEP 412):
# 221 bytes for ObjectMeta's fields, 100 for a PodIP's. A cached model (one object alone: a pod, its metadata,
# status, IP, container status) gets such a dict, equal to the one it replaces, in the same order, a plain dict to
# every reader; its keys are shared with every cached model of its class, through the instances of a class of its
# own (`_FIELD_HOLDERS`), whose dicts CPython splits. A change to it (or its copy's) that adds a key only turns it
# back into a combined dict. CPython shares up to 30 keys (a PodSpec's 41 fields are left alone), and sizes the
# values of a class's first instances for 30 keys, then less instance by instance: whether a class's split dicts
# are smaller is judged at its `_SPLIT_JUDGED_AT`th (a class for which they are not is left alone from then on).
_FIELD_HOLDERS: dict[type[BaseModel], type | None] = {}
_split_seen: dict[type[BaseModel], int] = {}  # models of a class made split so far, until it is judged
_SPLIT_MAX_KEYS = 30  # CPython's SHARED_KEYS_MAX_SIZE
_SPLIT_JUDGED_AT = 64
_split_fields = True  # the informer memory benchmark's rows before this step turn it off


def _compact_fields(model: BaseModel) -> BaseModel:
    """`model` with its `__dict__` made a split dict of equal items in the same order (see `_FIELD_HOLDERS`)."""
    cls = model.__class__
    holder = _FIELD_HOLDERS.get(cls, _NONE)
    if holder is None or not _split_fields:
        return model
    values = model.__dict__
    if holder is _NONE:
        if len(values) > _SPLIT_MAX_KEYS:
            _FIELD_HOLDERS[cls] = None
            return model
        holder = _FIELD_HOLDERS[cls] = type(f"{cls.__name__}Fields", (), {
            "__module__": __name__, "__qualname__": f"{cls.__name__}Fields"})
        _split_seen[cls] = 0
    instance = holder()
    for key, value in values.items():
        setattr(instance, key, value)
    split = instance.__dict__
    seen = _split_seen.get(cls)
    if seen is not None:  # not judged yet
        if seen + 1 < _SPLIT_JUDGED_AT:
            _split_seen[cls] = seen + 1
        else:
            del _split_seen[cls]
            if sys.getsizeof(split) >= sys.getsizeof(values) or builtins.list(split) != builtins.list(values):
                _FIELD_HOLDERS[cls] = None
                return model
    object.__setattr__(model, "__dict__", split)
    return model


def _share_value(v: Any) -> Any:
    """The one object equal to v (a string interned, a number or a part shared), or v itself."""
    cls = v.__class__
    if cls is str:
        return _intern(v)
    if cls is _NONE or cls is bool:
        return v
    if cls is dict:
        return _share_dict(v)
    if cls is list:
        return _share_list(v)
    if cls is int or cls is float:
        return _shared_number(v) if _share_parts else v
    return _shared(v)


def _share_dict_values(value: dict[Any, Any]) -> None:
    """Every value of `value` made the one equal object."""
    for key, v in value.items():
        v2 = _share_value(v)
        if v2 is not v:
            value[key] = v2


def _share_values_but(values: dict[str, Any], unique: frozenset[str]) -> None:
    """A model's fields made the one equal object, but for the values in `unique` (see `_UNIQUE_FIELDS`)."""
    global _unique_parts
    for key, v in values.items():
        if key in unique:
            if v is not None:
                _unique_parts += 1
                if v.__class__ is str:
                    v2 = _intern(v) if _intern_unique else _own_values.setdefault(v, v)
                    if v2 is not v:
                        values[key] = v2
            continue
        v2 = _share_value(v)
        if v2 is not v:
            values[key] = v2


def _share_dict_parts(value: dict[Any, Any]) -> None:
    _share_dict_values(value)


def _share_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    if not value:  # the commonest dict of all (managedFields' leaves, empty states): its shape is known
        if not _share_parts:
            return value
        key = _EMPTY_DICT_KEY
    else:
        unique_before = _unique_parts
        _share_dict_values(value)
        if not _share_parts or _unique_parts != unique_before:
            return value
        key = hash((dict, *value, *map(id, value.values())))
    other = _SHARED.get(key)
    if other is None:
        if READ_ONLY_CHECK and value.__class__ is dict:
            value = _ReadOnlyDict(value)
        _SHARED[key] = value
        return value
    if (other.__class__ in _DICTS and len(other) == len(value) and builtins.list(other) == builtins.list(value)
            and all(map(is_, value.values(), other.values()))):
        return other
    return value


def _share_list_items(value: builtins.list[Any]) -> None:
    for i, v in enumerate(value):
        v2 = _share_value(v)
        if v2 is not v:
            value[i] = v2


def _share_list_parts(value: builtins.list[Any]) -> None:
    _share_list_items(value)


def _share_list(value: builtins.list[Any]) -> builtins.list[Any]:
    unique_before = _unique_parts
    _share_list_items(value)
    if not _share_parts or _unique_parts != unique_before:
        return value
    key = hash((list, *map(id, value)))
    other = _SHARED.get(key)
    if other is None:
        if READ_ONLY_CHECK and value.__class__ is list:
            value = _ReadOnlyList(value)
        _SHARED[key] = value
        return value
    if other.__class__ in _LISTS and len(other) == len(value) and all(map(is_, value, other)):
        return other
    return value


# -- the store --------------------------------------------------------------------------------


class Store(Generic[M]):
    """Objects by key, plus secondary indexes (index name -> value -> keys) kept in step on every write."""

    def __init__(
        self, key_func: KeyFunc = meta_namespace_key, indexers: Mapping[str, IndexFunc] | None = None
    ) -> None:
        self._key_func = key_func
        self._items: dict[str, M] = {}
        self._indexers: dict[str, IndexFunc] = {}
        # index name -> value -> the keys, as a dict's keys: a set grows four times over and holds 30 to 100 keys
        # in 75 to 85 bytes each, a dict in 28 to 33 (issue 19: a ReplicaSet's pods, a node's pods)
        self._indices: dict[str, dict[str, dict[str, None]]] = {}
        if indexers:
            self.add_indexers(indexers)

    def key(self, obj: M) -> str:
        return self._key_func(obj)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Register indexes; objects already stored are indexed at once."""
        for name, fn in indexers.items():
            if name in self._indexers:
                raise ValueError(f"indexer {name!r} already registered")
            self._indexers[name] = fn
            self._indices[name] = {}
            for key, obj in self._items.items():
                self._index_one(name, key, obj)

    def upsert(self, obj: M) -> M | None:
        """Add or replace `obj`; returns the object it replaced, if any."""
        key = self._key_func(obj)
        old = self._items.get(key)
        if old is not None:
            if all(fn(old) == fn(obj) for fn in self._indexers.values()):
                self._items[key] = obj  # the usual update (a status): the indexes and the stored key stay as they are
                return old
            self._unindex(key, old)
            # entered again under this key string, the one the indexes are given now: one key string per object
            # (issue 19: the indexes of a pod bound after it was cached held a second copy of its key)
            del self._items[key]
        self._items[key] = obj
        for name in self._indexers:
            self._index_one(name, key, obj)
        return old

    add = upsert
    update = upsert

    def delete(self, key: str) -> M | None:
        """Remove the object under `key`; returns it, or None if there was none."""
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def get(self, key: str) -> M | None:
        return self._items.get(key)

    def get_by_name(self, name: str, namespace: str | None = None) -> M | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def list(self) -> builtins.list[M]:
        return builtins.list(self._items.values())

    def keys(self) -> builtins.list[str]:
        return builtins.list(self._items)

    def by_index(self, index_name: str, value: str) -> builtins.list[M]:
        return [self._items[key] for key in self.index_keys(index_name, value)]

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        if index_name not in self._indices:
            raise KeyError(f"no indexer named {index_name!r}")
        return sorted(self._indices[index_name].get(value, ()))

    def index_values(self, index_name: str) -> builtins.list[str]:
        if index_name not in self._indices:
            raise KeyError(f"no indexer named {index_name!r}")
        return sorted(self._indices[index_name])

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def _index_one(self, name: str, key: str, obj: M) -> None:
        index = self._indices[name]
        for value in self._indexers[name](obj):
            keys = index.get(value)
            if keys is None:
                index[value] = {key: None}
            else:
                keys[key] = None

    def _unindex(self, key: str, obj: M) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            for value in fn(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.pop(key, None)
                    if not keys:
                        del index[value]


# -- handlers ---------------------------------------------------------------------------------


class _Listener:
    """One registered handler set, fed by its own queue and task (client-go's processorListener)."""

    def __init__(
        self, on_add: Handler | None, on_update: Handler | None, on_delete: Handler | None, name: str
    ) -> None:
        self.handlers = {"add": on_add, "update": on_update, "delete": on_delete}
        self.name = name
        self.queue: asyncio.Queue[tuple[str, tuple[Any, ...]]] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def notify(self, kind: str, *args: Any) -> None:
        if self.handlers[kind] is not None:
            self.queue.put_nowait((kind, args))

    def start(self) -> None:
        if self.task is None or self.task.done():
            loop = asyncio.get_running_loop()
            self.task = loop.create_task(self._run(), name=f"informer-handler:{self.name}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None

    async def _run(self) -> None:
        while True:
            kind, args = await self.queue.get()
            try:
                handler = self.handlers[kind]
                assert handler is not None
                result = handler(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("%s: %s handler failed", self.name, kind)
            finally:
                self.queue.task_done()


# -- the informer -----------------------------------------------------------------------------


class Informer(Generic[M]):
    """List+watch of one resource (optionally one namespace / selector) into a Store, with handlers."""

    def __init__(
        self,
        client: ApiClient,
        model: type[M],
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: Selector = None,
        resync_period: float | None = None,
        *,
        indexers: Mapping[str, IndexFunc] | None = None,
        min_backoff: float = 0.8,
        max_backoff: float = 30.0,
        watch_timeout: int = 300,
        transform: TransformFunc | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.namespace = namespace
        self.label_selector = format_selector(label_selector)
        self.field_selector = format_selector(field_selector)
        self.resync_period = resync_period
        self.store: Store[M] = Store(indexers=indexers)
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.watch_timeout = watch_timeout  # each watch asks the server to end after 1-2x this many seconds
        self.list_page_size = LIST_PAGE_SIZE
        self._transform = transform
        self._listeners: list[_Listener] = []
        self._resource_version = ""
        self._stream_served = False  # the current watch stream has applied at least one event
        self._synced = asyncio.Event()
        self._stop = asyncio.Event()
        self._running = False
        self._task: asyncio.Task[None] | None = None
        self.name = f"{model.__name__}" + (f"/{namespace}" if namespace else "")

    # -- public surface ---------------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        """The initial list is in the store (handlers may still be working through it)."""
        return self._synced.is_set()

    @property
    def last_sync_resource_version(self) -> str:
        return self._resource_version

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until `has_synced`; False if `timeout` passed first."""
        try:
            await asyncio.wait_for(self._synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def add_event_handler(
        self,
        on_add: Handler | None = None,
        on_update: Handler | None = None,
        on_delete: Handler | None = None,
    ) -> None:
        """Register on_add(obj), on_update(old, new), on_delete(obj); sync or async callables.

        A handler added to a running informer first gets an add for every object already cached.
        """
        listener = _Listener(on_add, on_update, on_delete, self.name)
        for obj in self.store.list():
            listener.notify("add", obj)
        self._listeners.append(listener)
        if self._running:
            listener.start()

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        self.store.add_indexers(indexers)

    def set_transform(self, transform: TransformFunc | None) -> None:
        """client-go's SetTransform: `transform(obj)` returns what is cached and handed to the handlers in
        place of every listed or watched object (it may change `obj` in place and return it). Only
        before the informer starts, so the cache never holds objects of both forms."""
        if self._running or self._task is not None:
            raise RuntimeError(f"informer {self.name} has already started")
        self._transform = transform

    def _prepare(self, obj: Any) -> Any:
        """What the cache keeps of a listed or watched object: transformed, then compacted."""
        if self._transform is not None:
            obj = self._transform(obj)
        return compact(obj)

    def get(self, name: str, namespace: str | None = None) -> M | None:
        """The cached object, or None (the lister's Get)."""
        return self.store.get_by_name(name, namespace)

    def list(self) -> builtins.list[M]:
        return self.store.list()

    def start(self) -> asyncio.Task[None]:
        """Run in a background task (idempotent while running)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer:{self.name}")
        return self._task

    def stop(self) -> None:
        """Ask `run()` to end: it closes the watch and stops the handler tasks. Final, like closing
        client-go's stop channel: a stopped informer does not run again."""
        self._stop.set()

    async def wait_for_handlers(self) -> None:
        """Wait until every handler has processed every notification sent so far (tests, shutdown)."""
        for listener in builtins.list(self._listeners):
            await listener.queue.join()

    async def run(self) -> None:
        """List, watch, and keep watching until `stop()`."""
        if self._running:
            raise RuntimeError(f"informer {self.name} is already running")
        self._running = True
        for listener in self._listeners:
            listener.start()
        loop = asyncio.get_running_loop()
        worker = loop.create_task(self._list_and_watch(), name=f"reflector:{self.name}")
        resync = None
        if self.resync_period:
            resync = loop.create_task(self._resync_loop(), name=f"resync:{self.name}")
        stopper = loop.create_task(self._stop.wait())
        try:
            await asyncio.wait({worker, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if worker.done():
                worker.result()  # surface an unexpected crash of the loop
        finally:
            tasks = [t for t in (worker, resync, stopper) if t is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for listener in self._listeners:
                await listener.stop()
            self._running = False

    # -- reflector --------------------------------------------------------------------------

    async def _list_and_watch(self) -> None:
        delay = self.min_backoff
        need_list = True
        while True:
            self._stream_served = False
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                    delay = self.min_backoff
                if await self._watch_once():
                    delay = self.min_backoff
                    continue  # a healthy stream ended (server timeout): resume at once
            except ApiError as e:
                if e.is_gone and not need_list:
                    log.info("%s: resourceVersion %s is too old (%s), relisting",
                             self.name, self._resource_version, e.reason or e.code)
                    need_list = True
                    continue
                log.warning("%s: %s failed: %s", self.name, "list" if need_list else "watch", e)
            except ApiUnavailable as e:
                log.warning("%s: %s failed: %s", self.name, "list" if need_list else "watch", e)
                if self._stream_served:
                    # The watch worked until just now: a new outage backs off from the start, not from
                    # where the previous outage left the delay (up to max_backoff of needless blindness).
                    delay = self.min_backoff
            except ClientError as e:  # WatchDecodeError: the same stream would break the same way
                log.warning("%s: %s failed: %s", self.name, "list" if need_list else "watch", e)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: unexpected error in list/watch", self.name)
            await asyncio.sleep(delay * (1.0 + 0.2 * random.random()))
            delay = min(delay * 2, self.max_backoff)

    async def _relist(self) -> None:
        """List, a page at a time, and make the store equal to the answer, notifying the differences.

        Pages of `list_page_size` (client-go's pager): each page is decoded and made small (`_prepare`) before
        the next is read, so a list of 10,000 pods no longer holds them all at once as parsed JSON (17 KB a pod)
        and as models (30 KB): that list was a scheduler's peak (437 MB at 10,000 pods)."""
        prepared: builtins.list[M] = []
        continue_ = ""
        while True:
            try:
                page, resource_version, continue_ = await self.client.list(
                    self.model, self.namespace, label_selector=self.label_selector,
                    field_selector=self.field_selector, limit=self.list_page_size, continue_=continue_ or None)
            except ApiError as e:
                if not (continue_ and e.is_gone):
                    raise
                # the pages' snapshot was compacted away meanwhile: one whole list instead (client-go's pager)
                page, resource_version, continue_ = await self.client.list(
                    self.model, self.namespace, label_selector=self.label_selector,
                    field_selector=self.field_selector)
                prepared = []
            prepared.extend(self._prepare(obj) for obj in page)
            del page
            if not continue_:
                break
        self._replace_prepared(prepared, resource_version)

    def replace(self, items: Iterable[M], resource_version: str) -> None:
        """Make the store hold exactly `items` (a fresh list); notify adds, changes, vanished objects."""
        self._replace_prepared([self._prepare(obj) for obj in items], resource_version)

    def _replace_prepared(self, items: Iterable[M], resource_version: str) -> None:
        fresh: dict[str, M] = {}
        for obj in items:
            fresh[self.store.key(obj)] = obj
        for key in set(self.store.keys()) - fresh.keys():
            old = self.store.delete(key)
            if old is not None:
                self._notify("delete", old)
        for obj in fresh.values():
            old = self.store.upsert(obj)
            if old is None:
                self._notify("add", obj)
            elif _rv(old) != _rv(obj):
                self._notify("update", old, obj)
        self._resource_version = resource_version
        self._synced.set()

    async def _watch_once(self) -> bool:
        """One watch stream until it ends; True if it was healthy (delivered events or lived a while)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        delivered = False
        timeout = random.randint(self.watch_timeout, 2 * self.watch_timeout)
        events = self.client.watch(
            self.model,
            self.namespace,
            resource_version=self._resource_version or None,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            allow_bookmarks=True,
            timeout_seconds=timeout,
        )
        async with contextlib.aclosing(events):
            async for event in events:
                delivered = True
                if tracing.TRACER is None or tracing.ROOT_RATE == 0.0:  # an event starts a trace
                    self.handle_event(event.type, event.object, event.resource_version)
                else:
                    self._traced_event(event.type, event.object, event.resource_version)
                self._stream_served = True
        return delivered or loop.time() - started > 1.0

    def _traced_event(self, event_type: str, obj: Any, resource_version: str | None) -> None:
        """handle_event within an `informer.event` span (--tracing-config-file): one per watch event delivered,
        joined to the apiserver's write by the resource version (the write's etcd revision)."""
        if event_type not in ("ADDED", "MODIFIED", "DELETED"):
            self.handle_event(event_type, obj, resource_version)
            return
        try:
            info = resource_for_model(self.model)
        except KeyError:
            attributes = tracing.object_attributes(obj)
        else:
            attributes = tracing.object_attributes(obj, info.api_version, info.kind)
            attributes["k8s.resource"] = info.plural
        attributes["k8s.watch.event_type"] = event_type
        if resource_version:
            attributes["k8s.object.resource_version"] = resource_version
        with tracing.detached(), tracing.span("informer.event", tracing.CONSUMER, attributes):
            self.handle_event(event_type, obj, resource_version)

    def handle_event(self, event_type: str, obj: Any, resource_version: str | None) -> None:
        """Apply one watch event to the store and the handlers; ERROR raises ApiError (410 -> relist)."""
        if event_type == "ERROR":
            code = getattr(obj, "code", None) or 500
            raise ApiError(obj, code, "WATCH", self.name)
        if event_type in ("ADDED", "MODIFIED"):
            obj = self._prepare(obj)
            old = self.store.upsert(obj)
            if old is None:
                self._notify("add", obj)
            else:
                self._notify("update", old, obj)
        elif event_type == "DELETED":
            if self._transform is not None:
                obj = self._transform(obj)
            self.store.delete(self.store.key(obj))
            self._notify("delete", obj)
        if resource_version:
            self._resource_version = resource_version

    # -- handlers ---------------------------------------------------------------------------

    def _notify(self, kind: str, *args: Any) -> None:
        for listener in self._listeners:
            listener.notify(kind, *args)

    async def _resync_loop(self) -> None:
        """Periodically replay every cached object as an update, so level-triggered handlers re-check."""
        assert self.resync_period
        while True:
            await asyncio.sleep(self.resync_period)
            if self.has_synced:
                for obj in self.store.list():
                    self._notify("update", obj, obj)


def _rv(obj: Any) -> str | None:
    if isinstance(obj, Mapping):
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return rv if isinstance(rv, str) else None
    model_rv: str | None = obj.metadata.resource_version  # an API model's ObjectMeta
    return model_rv


# -- sharing ----------------------------------------------------------------------------------


def _canonical_selector(selector: Selector, parse: Callable[[str], object]) -> str | None:
    """One spelling per selector ("b=2,a=1", "a=1,b=2" and {"a": "1", "b": "2"} are one view), so the
    factory does not open a second list+watch for the same objects. A selector that does not parse
    is kept as written: the apiserver's 400 will say what is wrong with it."""
    text = format_selector(selector)
    if not text:
        return None
    try:
        return str(parse(text)) or None
    except SelectorError:
        return text


class SharedInformerFactory:
    """One informer per (model, namespace, selectors) per process, so controllers share caches and watches."""

    def __init__(self, client: ApiClient, resync_period: float | None = None, *,
                 transform: TransformFunc | None = None) -> None:
        self.client = client
        self.resync_period = resync_period
        self.transform = transform  # every informer's (client-go: SetTransform on each, before it starts)
        self._informers: dict[tuple[type[BaseModel], str | None, str | None, str | None], Informer[Any]] = {}
        self._started = False

    def informer_for(
        self,
        model: type[M],
        namespace: str | None = None,
        label_selector: Selector = None,
        field_selector: Selector = None,
        resync_period: float | None = None,
    ) -> Informer[M]:
        """The shared informer for this view; created on first ask (and started if the factory runs).

        The first caller's resync_period wins for a shared informer.
        """
        key = (model, namespace, _canonical_selector(label_selector, parse_label_selector),
               _canonical_selector(field_selector, parse_field_selector))
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self.client, model, namespace, key[2], key[3],
                resync_period if resync_period is not None else self.resync_period,
                transform=self.transform,
            )
            self._informers[key] = informer
            if self._started:
                informer.start()
        return informer

    def informers(self) -> builtins.list[Informer[Any]]:
        return builtins.list(self._informers.values())

    def start(self) -> None:
        """Start every informer created so far; later ones start as they are created."""
        self._started = True
        for informer in self._informers.values():
            informer.start()

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """True once every informer has synced; False if `timeout` passed first."""
        try:
            await asyncio.wait_for(
                asyncio.gather(*(i.wait_for_sync() for i in self._informers.values())), timeout
            )
        except TimeoutError:
            return False
        return all(i.has_synced for i in self._informers.values())

    async def shutdown(self) -> None:
        """Stop every informer and wait for them to finish."""
        self._started = False
        tasks = []
        for informer in self._informers.values():
            informer.stop()
            if informer._task is not None:
                tasks.append(informer._task)
        await asyncio.gather(*tasks, return_exceptions=True)
