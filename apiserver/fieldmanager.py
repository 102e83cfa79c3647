"""The apiserver's field manager (upstream k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager and
k8s.io/apimachinery/pkg/util/managedfields/internal: fieldmanager.go, conflict.go, managedfields.go):
who manages which fields of every object, kept in metadata.managedFields on each create, update and
patch, and server-side apply with its conflicts. The algorithms are machinery/managedfields'."""

from __future__ import annotations

import json
from typing import Any

from apiserver import errors
from apiserver.validation import invalid
from machinery import managedfields as mf
from machinery.api.resources import ResourceInfo
from machinery.types import Obj

MAX_MANAGER_LENGTH = 128
# upstream capmanagers.go: past ten Update entries the oldest are merged into one
MAX_UPDATE_MANAGERS = 10
ANCIENT_CHANGES = "ancient-changes"
BEFORE_FIRST_APPLY = "before-first-apply"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def manager_of(field_manager: str | None, user_agent: str) -> str | None:
    """The manager a write is recorded under: fieldManager, else the User-Agent's product (upstream
    managerOrUserAgent/prefixFromUserAgent); None when neither says one (internal writes)."""
    if field_manager:
        return field_manager
    product = "".join(c for c in user_agent.split("/", 1)[0] if c.isprintable())[:MAX_MANAGER_LENGTH]
    return product or None


def check_manager(field_manager: str | None, options_kind: str) -> None:
    """upstream ValidateFieldManager: at most 128 bytes, printable characters only (422)."""
    if not field_manager:
        return
    problems = []
    if len(field_manager.encode()) > MAX_MANAGER_LENGTH:
        problems.append(f"fieldManager: Too long: may not be more than {MAX_MANAGER_LENGTH} bytes")
    for i, c in enumerate(field_manager):
        if not c.isprintable():
            problems.append(f'fieldManager: Invalid value: "{field_manager}": invalid character '
                            f"U+{ord(c):04X} (at position {i})")
            break
    if problems:
        message = "; ".join(problems) if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        raise errors.ApiError(422, "Invalid", f'{options_kind}.meta.k8s.io "" is invalid: {message}',
                              {"group": "meta.k8s.io", "kind": options_kind,
                               "causes": [{"reason": "FieldValueInvalid", "message": p.split(": ", 1)[1],
                                           "field": "fieldManager"} for p in problems]})


def _decode(raw: Any) -> list[mf.Entry] | None:
    if raw == [{}] or raw == []:  # upstream isResetManagedFields: how a client clears them
        return []
    try:
        return mf.decode_entries(raw)
    except ValueError:
        return None


def _cap(entries: list[mf.Entry]) -> list[mf.Entry]:
    """upstream capManagersManager: at most MAX_UPDATE_MANAGERS Update entries; the oldest ones are
    merged into one "ancient-changes" entry (per API version)."""
    updates = [e for e in entries if e.operation == mf.manager.UPDATE]
    if len(updates) <= MAX_UPDATE_MANAGERS:
        return entries
    updates.sort(key=lambda e: e.time or "")
    out = [e for e in entries if e.operation != mf.manager.UPDATE]
    kept = updates[len(updates) - MAX_UPDATE_MANAGERS + 1:]
    ancient: dict[str, mf.Entry] = {}
    for e in updates[:len(updates) - MAX_UPDATE_MANAGERS + 1]:
        into = ancient.get(e.api_version)
        if into is None:
            into = ancient[e.api_version] = mf.Entry(ANCIENT_CHANGES, mf.manager.UPDATE, e.api_version, e.time, "",
                                                      set())
        into.fields = into.fields | e.fields
        into.time = max(into.time or "", e.time or "") or None
    return out + list(ancient.values()) + kept


def _set(meta: Obj, entries: list[mf.Entry]) -> None:
    entries = _cap(entries)
    if entries:
        meta["managedFields"] = mf.encode_entries(entries)
    else:
        meta.pop("managedFields", None)


def track_create(info: ResourceInfo, node: mf.TypeNode, obj: Obj, incoming: Any, manager: str | None,
                 now: str) -> None:
    """An Update operation by `manager` from nothing to `obj` (managedFields set in place); a client's
    own valid managedFields are kept as the start."""
    entries = _decode(incoming) or []
    if not entries and manager is not None:
        wire = mf.created(obj, manager, info.api_version, node, now)
        if wire:
            obj["metadata"]["managedFields"] = wire
        return
    if manager is not None:
        entries = mf.update({}, obj, entries, manager, info.api_version, "", node, now)
    _set(obj["metadata"], entries)


def track_update(info: ResourceInfo, node: mf.TypeNode, old: Obj, new: Obj, manager: str | None,
                 subresource: str | None, now: str) -> None:
    """An Update operation by `manager` from `old` to `new` (new's managedFields set in place).

    managedFields the client changed replace the stored ones (how kubectl moves client-side apply's
    fields to server-side apply; `[]` or `[{}]` clears them); left out or invalid, or written through
    a subresource, the stored ones stay (upstream decodeLiveOrNew).
    """
    meta = new["metadata"]
    old_raw, new_raw = old["metadata"].get("managedFields"), meta.get("managedFields")
    entries = _decode(new_raw) if new_raw is not None and new_raw != old_raw and not subresource else None
    if entries is None:
        if manager is None or _same(old, new):
            if old_raw is None:
                meta.pop("managedFields", None)
            else:
                meta["managedFields"] = old_raw
            return
        entries = _decode(old_raw) or []
    if manager is not None:
        entries = mf.update(old, new, entries, manager, info.api_version, subresource or "", node, now)
    _set(meta, entries)


_SPEC_REPLICAS: mf.Path = ("f:spec", "f:replicas")


def track_scale(info: ResourceInfo, old: Obj, new: Obj, manager: str | None) -> None:
    """An update through the scale subresource changed `old`'s spec.replicas into `new`'s (new's managedFields
    set in place; upstream ScaleHandler: ToSubresource, the Scale's own Update, ToParent). When the replicas
    changed, the writer's Update entry with subresource "scale" owns .spec.replicas, in the parent's version and
    without a time (ToParent takes the times from the parent's entries, which never hold that writer's key),
    and the entries that owned it lose it (an entry left with nothing goes); otherwise nothing changes."""
    meta = new["metadata"]
    old_raw = old["metadata"].get("managedFields")
    if manager is None or (old.get("spec") or {}).get("replicas") == (new.get("spec") or {}).get("replicas"):
        if old_raw is None:
            meta.pop("managedFields", None)
        else:
            meta["managedFields"] = old_raw
        return
    kept = []
    for e in _decode(old_raw) or []:
        if _SPEC_REPLICAS not in e.fields:
            kept.append(e)
        elif rest := e.fields - {_SPEC_REPLICAS}:
            kept.append(mf.Entry(e.manager, e.operation, e.api_version, e.time, e.subresource, rest))
    kept.append(mf.Entry(manager, mf.manager.UPDATE, info.api_version, None, "scale", {_SPEC_REPLICAS}))
    _set(meta, kept)


def _same(old: Obj, new: Obj) -> bool:
    return mf.strip(old) == mf.strip(new)


def apply(info: ResourceInfo, node: mf.TypeNode, live: Obj | None, config: Obj, manager: str, force: bool,
          subresource: str | None, name: str, now: str) -> Obj:
    """Server-side apply of `config` by `manager` onto `live` (None: creating): the merged object with
    its managedFields (upstream FieldManager.Apply); 400 for a configuration of another version or
    name, or with managedFields; 409 listing the conflicts unless forced."""
    if not isinstance(config.get("metadata", {}), dict | None):
        raise errors.invalid(info, "", [invalid("metadata", config["metadata"],
                                                "input should be a valid dictionary or object")])
    if config.get("apiVersion") != info.api_version:
        raise errors.bad_request("Incorrect version specified in apply patch. Specified patch version: "
                                 f"{config.get('apiVersion') or ''}, expected: {info.api_version}")
    if config.get("kind") != info.kind:
        raise errors.bad_request(f"the kind in the data ({config.get('kind') or ''}) does not match the expected "
                                 f"kind ({info.kind})")
    meta = config.get("metadata") or {}
    if meta.get("managedFields") is not None:
        raise errors.bad_request("metadata.managedFields must be nil")
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                 f"({name})")
    config = {**config, "metadata": {**meta, "name": name}}
    has_status = "status" in info.subresources
    if subresource == "status":
        reset = frozenset(k for k in config if k not in ("status", "metadata", "apiVersion", "kind"))
    else:
        reset = frozenset({"status"}) if has_status else frozenset()
    entries = (_decode(live["metadata"].get("managedFields")) or []) if live is not None else []
    if live is not None and not live["metadata"].get("managedFields"):
        # upstream skipNonAppliedManager: fields nobody was recorded for belong to "before-first-apply",
        # so a first apply does not silently take over what was set before
        before = {k: v for k, v in live.items() if k not in reset and (k != "status" or not has_status)}
        entries = mf.update({}, before, [], BEFORE_FIRST_APPLY, info.api_version, "", node, now)
    try:
        merged, entries = mf.apply(live or {}, config, entries, manager, info.api_version, subresource or "",
                                   node, force, now, reset)
    except mf.Conflicts as c:
        raise conflict_error(c) from None
    except mf.InvalidConfiguration as e:
        # upstream answers this one with a plain error: 500, no reason
        namespace = meta.get("namespace") or ""
        group, _, version = info.api_version.rpartition("/")
        raise errors.ApiError(500, "", f"failed to create typed patch object ({namespace}/{name}; {group}/{version}, "
                              f"Kind={info.kind}): {e}") from None
    if merged is not live:
        merged = {**merged, "metadata": dict(merged["metadata"])}
        _set(merged["metadata"], entries)
        if manager == "kubectl" and live is not None and LAST_APPLIED in (live["metadata"].get("annotations") or {}):
            _sync_last_applied(merged, config)
    return merged


def _sync_last_applied(merged: Obj, config: Obj) -> None:
    """upstream lastAppliedUpdater: kubectl's server-side apply keeps client-side apply's annotation
    (where it exists) equal to what it applied, so that going back to client-side apply works."""
    applied_meta = dict(config.get("metadata") or {})
    annotations = {k: v for k, v in (applied_meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if annotations:
        applied_meta["annotations"] = annotations
    else:
        applied_meta.pop("annotations", None)
    value = json.dumps({**config, "metadata": applied_meta}, separators=(",", ":"), sort_keys=True) + "\n"
    merged["metadata"]["annotations"] = {**(merged["metadata"].get("annotations") or {}), LAST_APPLIED: value}


def conflict_error(c: mf.Conflicts) -> errors.ApiError:
    """upstream internal.NewConflictError: 409 Conflict, a cause per field."""
    return errors.ApiError(409, "Conflict", c.message(), {"causes": [
        {"reason": "FieldManagerConflict", "message": f"conflict with {x.manager}", "field": x.field}
        for x in c.conflicts]})
