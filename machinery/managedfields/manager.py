"""The ownership of fields by managers (upstream k8s.io/apimachinery/pkg/util/managedfields/internal:
managedfields.go, fieldmanager.go, stripmeta.go, conflict.go; and structured-merge-diff merge/update.go:
Updater.Update, Updater.Apply, prune).

Every write records who set which fields: an Update operation takes the fields it added or changed
(from everybody else), an Apply operation owns exactly the fields of its applied configuration, may
not change a field another manager owns unless forced (a conflict), and removes the fields it applied
before and applies no more, when nobody else owns them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from machinery.managedfields.fieldpath import Path, decode_fields, element_order, encode_fields, path_string
from machinery.managedfields.schema import TypeNode
from machinery.managedfields.typed import compare, duplicates, merge, remove, to_set, whole_fields

APPLY = "Apply"
UPDATE = "Update"
FIELDS_V1 = "FieldsV1"
# the fields nobody owns: the type and the system's metadata (upstream stripmeta.go)
_STRIPPED_META = frozenset({"name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName",
                            "generation", "managedFields", "resourceVersion"})


@dataclass
class Entry:
    """One managedFields entry, its fieldsV1 decoded."""

    manager: str
    operation: str
    api_version: str
    time: str | None
    subresource: str
    fields: set[Path]
    raw: dict[str, Any] | None = field(default=None, compare=False)  # the wire form, while unchanged

    def ident(self) -> tuple[str, str, str, str]:
        # upstream BuildManagerIdentifier: appliers are one manager whichever version they apply
        return self.manager, self.operation, self.subresource, "" if self.operation == APPLY else self.api_version

    def describe(self) -> str:
        """The manager as upstream's printManager names it in conflicts."""
        out = f'"{self.manager}"'
        if self.subresource:
            out += f' with subresource "{self.subresource}"'
        if self.operation == UPDATE:
            out += f" using {self.api_version}"
        return out


@dataclass(frozen=True)
class Conflict:
    manager: str  # as Entry.describe
    path: Path

    @property
    def field(self) -> str:
        return path_string(self.path)


class InvalidConfiguration(ValueError):
    """An applied configuration the schema refuses (upstream: "failed to create typed patch object")."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(problems[0] if len(problems) == 1 else "errors:\n  " + "\n  ".join(problems))


class Conflicts(Exception):
    """An apply would change fields other managers own (upstream merge.Conflicts)."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = conflicts
        super().__init__(self.message())

    def message(self) -> str:
        """upstream internal/conflict.go getConflictMessage."""
        c = self.conflicts
        if len(c) == 1:
            return f"Apply failed with 1 conflict: conflict with {c[0].manager}: {c[0].field}"
        lines: list[str] = []
        for manager in sorted({x.manager for x in c}):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {x.field}" for x in c if x.manager == manager)
        return f"Apply failed with {len(c)} conflicts: " + "\n".join(lines)


def decode_entries(raw: Any) -> list[Entry]:
    """metadata.managedFields as entries; ValueError on entries upstream would refuse to decode."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError("managedFields must be a list")
    out: list[Entry] = []
    for item in raw:
        if not isinstance(item, dict):
            raise ValueError("a managedFields entry must be an object")
        if item.get("fieldsType") not in (None, FIELDS_V1) and item.get("fieldsV1") is not None:
            raise ValueError(f'unsupported fieldsType "{item.get("fieldsType")}"')
        operation = item.get("operation") or ""
        if operation not in (APPLY, UPDATE):
            raise ValueError(f'unsupported operation "{operation}"')
        out.append(Entry(str(item.get("manager") or ""), operation, str(item.get("apiVersion") or ""),
                         item.get("time"), str(item.get("subresource") or ""),
                         decode_fields(item.get("fieldsV1") or {}), item))
    return out


def encode_entries(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """Entries as metadata.managedFields, in upstream's order (Apply before Update, then oldest first)."""
    out = []
    for e in sorted(entries, key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource)):
        if e.raw is not None:
            out.append(e.raw)
            continue
        wire: dict[str, Any] = {"manager": e.manager, "operation": e.operation, "apiVersion": e.api_version}
        if e.time:
            wire["time"] = e.time
        wire["fieldsType"] = FIELDS_V1
        wire["fieldsV1"] = encode_fields(e.fields)
        if e.subresource:
            wire["subresource"] = e.subresource
        out.append(wire)
    return out


def strip(obj: Any) -> Any:
    """The object without the fields nobody owns."""
    if not isinstance(obj, dict):
        return obj
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        rest = {k: v for k, v in meta.items() if k not in _STRIPPED_META}
        if rest:
            out["metadata"] = rest
    return out


def _without(obj: Any, reset: frozenset[str]) -> Any:
    return {k: v for k, v in obj.items() if k not in reset} if reset and isinstance(obj, dict) else obj


def created(obj: Any, manager: str, api_version: str, node: TypeNode, now: str) -> list[dict[str, Any]]:
    """metadata.managedFields of an object `manager` created with an Update operation: the same as
    encode_entries(update({}, obj, [], ...)), built in one walk (creates are the hot path)."""
    fields = whole_fields(strip(obj), node)
    if not fields:
        return []
    return [{"manager": manager, "operation": UPDATE, "apiVersion": api_version, "time": now,
             "fieldsType": FIELDS_V1, "fieldsV1": fields}]


def update(old: Any, new: Any, entries: list[Entry], manager: str, api_version: str, subresource: str,
           node: TypeNode, now: str) -> list[Entry]:
    """The entries after an Update operation by `manager` changed `old` into `new` (upstream
    Updater.Update: the manager takes what it added or changed; nobody keeps what was removed)."""
    added, modified, removed = compare(strip(old), strip(new), node)
    changed = added | modified
    if not changed and not removed:
        return entries
    mine = (manager, UPDATE, subresource, api_version)
    out: list[Entry] = []
    own: Entry | None = None
    for e in entries:
        if e.ident() == mine:
            own = e
            continue
        out.append(_lose(e, changed | removed))
    if changed:
        fields = ((own.fields - removed) if own is not None else set()) | changed
        out.append(Entry(manager, UPDATE, api_version, now, subresource, fields))
    elif own is not None:  # it only removed fields: its entry keeps its time (upstream managedFieldsUpdater)
        out.append(_lose(own, removed))
    return [e for e in out if e.fields]


def _lose(e: Entry, paths: set[Path]) -> Entry:
    if e.fields.isdisjoint(paths):
        return e
    return Entry(e.manager, e.operation, e.api_version, e.time, e.subresource, e.fields - paths)


def _prefixes(paths: Iterable[Path]) -> set[Path]:
    return {p[:i] for p in paths for i in range(1, len(p) + 1)}


def apply(live: Any, config: Any, entries: list[Entry], manager: str, api_version: str, subresource: str,
          node: TypeNode, force: bool, now: str, reset: frozenset[str] = frozenset()) -> tuple[Any, list[Entry]]:
    """The object and entries after `manager` applied `config` to `live` (upstream Updater.Apply).

    `reset` names the top-level fields this endpoint leaves alone (the status of the main resource,
    all but the status of the status subresource). Raises Conflicts unless forced.
    """
    live_s = strip(live)
    config_s = _without(strip(config), reset)
    problems = duplicates(config_s, node)
    if problems:
        raise InvalidConfiguration(problems)
    merged = merge(live_s, config_s, node)
    mine = (manager, APPLY, subresource, "")
    own = next((e for e in entries if e.ident() == mine), None)
    last = own.fields if own is not None else set()
    applied = to_set(config_s, node)
    others = [e for e in entries if e.ident() != mine]
    added, modified, removed = compare(live_s, merged, node)
    changed = added | modified
    conflicts = [Conflict(e.describe(), p) for e in others for p in e.fields & changed]
    if conflicts and not force:
        conflicts.sort(key=lambda c: (c.manager, [element_order(x) for x in c.path]))
        raise Conflicts(conflicts)
    others = [_lose(e, changed | removed) for e in others]
    gone = last - applied
    if gone:
        keep = _prefixes(p for e in others for p in e.fields) | _prefixes(applied)
        pruned = remove(merged, gone - keep, node)
        if pruned != merged:
            _, _, dropped = compare(merged, pruned, node)
            others = [_lose(e, dropped) for e in others]
            merged = pruned
    if merged == live_s and own is not None and applied == last:
        return live, entries
    out = [e for e in others if e.fields]
    if applied:
        out.append(Entry(manager, APPLY, api_version, now, subresource, applied))
    return _restore(live, config, merged), out


def _restore(live: Any, config: Any, merged: Any) -> Any:
    """The merged object with the type and system metadata back (the live object's, else the config's)."""
    base = live if isinstance(live, dict) and live else config if isinstance(config, dict) else {}
    out = dict(merged)
    for key in ("apiVersion", "kind"):
        if key in base:
            out[key] = base[key]
    meta = {k: v for k, v in (base.get("metadata") or {}).items() if k in _STRIPPED_META}
    meta.update(out.get("metadata") or {})
    out["metadata"] = meta
    return out
