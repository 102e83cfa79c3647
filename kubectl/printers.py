"""Output formats: the server's Table rows aligned as kubectl aligns them, `-o yaml|json|name`.

Tables come from the apiserver (`Accept: ...;as=Table`), which computes every cell; printing them
is kubectl's tableprinter: upper-cased column names, priority-1 columns only with `-o wide`, a
NAMESPACE column first with `-A`, `kind.group/` before each name when several kinds are printed,
LABELS / label-value columns for `--show-labels` / `-L`, all through Go's tabwriter with
kubectl's settings (minwidth 6, tabwidth 4, padding 3, widths remembered for `-w`).

YAML and JSON look like kubectl's: keys sorted, JSON indented by four spaces with `<`, `>`, `&`
escaped as Go does, YAML with double-quoted strings where plain ones would change type and `|`
blocks for multi-line strings, no line wrapping.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

import yaml

from kubectl.tabwriter import TabWriter
from machinery.api.resources import ResourceInfo
from machinery.types import Obj

# -- names ------------------------------------------------------------------------------------


def kind_name(info: ResourceInfo) -> str:
    """`deployment.apps`, `pod`: the lower-cased GroupKind kubectl prefixes names with."""
    return f"{info.kind.lower()}.{info.group}" if info.group else info.kind.lower()


def resource_name(info: ResourceInfo, name: str) -> str:
    """`deployment.apps/nginx`: what `-o name` and the apply/scale/rollout messages print."""
    return f"{kind_name(info)}/{name}"


# -- JSON and YAML ------------------------------------------------------------------------------


def go_json(obj: Any) -> str:
    """json.MarshalIndent(obj, "", "    ") of an unstructured object (keys sorted, HTML escaped)."""
    text = json.dumps(obj, indent=4, sort_keys=True, ensure_ascii=False, separators=(",", ": "))
    return _escape_html(text) + "\n"


def go_compact_json(obj: Any) -> str:
    """json.Marshal: compact, keys sorted, `<>&` and U+2028/9 escaped as Go's encoder does."""
    return _escape_html(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")))


def _escape_html(text: str) -> str:
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


class _Emitter(yaml.emitter.Emitter):
    def choose_scalar_style(self) -> str:
        style = super().choose_scalar_style()
        return '"' if style == "'" else style  # go-yaml quotes with double quotes only


class _GoYamlDumper(_Emitter, yaml.serializer.Serializer, yaml.representer.SafeRepresenter,
                    yaml.resolver.Resolver):
    def __init__(self, stream: Any, **kwargs: Any) -> None:
        _Emitter.__init__(self, stream, canonical=None, indent=2, width=1 << 30, allow_unicode=True,
                          line_break=None)
        yaml.serializer.Serializer.__init__(self, explicit_start=None, explicit_end=None, version=None, tags=None)
        yaml.representer.SafeRepresenter.__init__(self, default_style=None, default_flow_style=False,
                                                  sort_keys=True)
        yaml.resolver.Resolver.__init__(self)


# go-yaml (YAML 1.1) reads these as booleans too, PyYAML does not: quote them as go-yaml does
_GO_BOOLS = frozenset({"y", "Y", "n", "N"})


def _represent_str(dumper: yaml.representer.SafeRepresenter, value: str) -> yaml.nodes.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    if value in _GO_BOOLS:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_GoYamlDumper.add_representer(str, _represent_str)


def go_yaml(obj: Any) -> str:
    """sigs.k8s.io/yaml's JSONToYAML of `obj`."""
    return yaml.dump(obj, Dumper=_GoYamlDumper)


def strip_managed_fields(obj: Obj) -> Obj:
    """kubectl hides metadata.managedFields unless --show-managed-fields."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


def as_list(items: list[Obj]) -> Obj:
    """The List kubectl prints when a `get` names zero or several objects."""
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def print_objects(out: TextIO, objects: list[tuple[ResourceInfo, Obj]], output: str, *, single: bool,
                  show_managed_fields: bool = False) -> None:
    """`-o yaml|json|name` of the objects a get found (a single object alone, anything else as a List)."""
    if output == "name":
        for info, obj in objects:
            out.write(resource_name(info, (obj.get("metadata") or {}).get("name", "")) + "\n")
        return
    shown = []
    for info, obj in objects:
        full = {"apiVersion": info.api_version, "kind": info.kind, **obj}
        shown.append(full if show_managed_fields else strip_managed_fields(full))
    doc: Any = shown[0] if single and len(shown) == 1 else as_list(shown)
    out.write(go_json(doc) if output == "json" else go_yaml(doc))


# -- tables -------------------------------------------------------------------------------------


def format_labels(labels: Mapping[str, str] | None) -> str:
    """labels.FormatLabels: `a=b,c=d` sorted by key, or <none>."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _cell_text(cell: Any) -> str:
    if cell is None:
        return ""
    if isinstance(cell, bool):
        return "true" if cell else "false"
    if isinstance(cell, float) and cell.is_integer():
        return str(int(cell))
    text = cell if isinstance(cell, str) else str(cell)
    for i, ch in enumerate(text):
        if ch in "\f\n\r":
            return text[:i] + "..."
    return text.replace("\t", "\\t")


class TablePrinter:
    """Prints server Tables, one kind after another, as `kubectl get` does (headers per kind, a blank
    line between kinds, widths remembered within a kind so watch rows line up)."""

    def __init__(self, out: TextIO, *, wide: bool = False, with_namespace: bool = False, with_kind: bool = False,
                 no_headers: bool = False, show_labels: bool = False, label_columns: Iterable[str] = ()) -> None:
        self.out = out
        self.wide = wide
        self.with_namespace = with_namespace
        self.with_kind = with_kind
        self.no_headers = no_headers
        self.show_labels = show_labels
        self.label_columns = [c for c in label_columns if c]
        self.writer = TabWriter(out, minwidth=6, tabwidth=4, padding=3, remember_widths=True)
        self._kind: str | None = None
        self._written_since_header = False
        self._separator = False
        self._columns: list[dict[str, Any]] = []
        self.rows_printed = 0

    def _start_kind(self, kind: str) -> None:
        if self._kind == kind:
            return
        self.writer.flush()
        self.writer.forget_widths()
        if self._kind is not None and not self.no_headers and self._written_since_header:
            self._separator = True  # written only if this kind prints something, as kubectl's separatorWriter
        self._kind = kind
        self._columns = []
        self._written_since_header = False

    def columns(self, table: Obj) -> list[tuple[int, str]]:
        """(cell index, header) of the columns shown."""
        shown = []
        for i, column in enumerate(table.get("columnDefinitions") or []):
            if not self.wide and column.get("priority", 0) != 0:
                continue
            shown.append((i, str(column.get("name", "")).upper()))
        return shown

    def print_table(self, info: ResourceInfo, table: Obj, *, header: bool = True) -> None:
        """Print a Table's rows (with the header unless one was printed for this kind already)."""
        self._start_kind(kind_name(info))
        rows = table.get("rows") or []
        definitions = table.get("columnDefinitions") or []
        if definitions:
            self._columns = definitions
        if not rows:
            return
        definitions = self._columns
        shown = self.columns({"columnDefinitions": definitions})
        name_index = next((i for i, c in enumerate(definitions)
                           if c.get("format") == "name" and c.get("type") == "string"), -1)
        label_headers = [c.rsplit("/", 1)[-1].upper() for c in self.label_columns]
        if self._separator:
            self.writer.write("\n")
            self._separator = False
        if header and not self.no_headers and not self._written_since_header:
            headers = (["NAMESPACE"] if self.with_namespace else []) + [h for _, h in shown] + label_headers
            if self.show_labels:
                headers.append("LABELS")
            self.writer.write("\t".join(headers) + "\n")
        for row in rows:
            cells = list(row.get("cells") or [])
            meta = ((row.get("object") or {}).get("metadata") or {}) if isinstance(row.get("object"), dict) else {}
            texts = []
            if self.with_namespace:
                texts.append(str(meta.get("namespace") or ""))
            for i, _ in shown:
                text = _cell_text(cells[i] if i < len(cells) else None)
                if i == name_index and self.with_kind:
                    text = f"{kind_name(info)}/{text}"
                texts.append(text)
            labels = meta.get("labels") or {}
            for key in self.label_columns:
                texts.append(str(labels.get(key, "")))
            if self.show_labels:
                texts.append(format_labels(labels))
            self.writer.write("\t".join(texts) + "\n")
            self.rows_printed += 1
        self._written_since_header = True

    def flush(self) -> None:
        self.writer.flush()


# -- what a mutation printed ----------------------------------------------------------------------

DRY_RUN_SUFFIX = {"client": " (dry run)", "server": " (server dry run)"}
MUTATION_OUTPUTS = ("", "yaml", "json", "name")


def check_mutation_output(output: str) -> None:
    """PrintFlags.ToPrinter of `create`/`expose`: only yaml, json and name print objects here."""
    if output not in MUTATION_OUTPUTS:
        allowed = ",".join(sorted(o for o in MUTATION_OUTPUTS if o))
        raise ValueError(f'unable to match a printer suitable for the output format "{output}", '
                         f"allowed formats are: {allowed}")


def print_mutation(out: TextIO, info: ResourceInfo, obj: Obj, output: str, operation: str, dry_run: str) -> None:
    """The object as -o asks, else `service/web created (dry run)`, as kubectl's operation printer."""
    if output in ("yaml", "json", "name"):
        print_objects(out, [(info, obj)], output, single=True)
        return
    name = (obj.get("metadata") or {}).get("name", "")
    out.write(f"{resource_name(info, name)} {operation}{DRY_RUN_SUFFIX.get(dry_run, '')}\n")
