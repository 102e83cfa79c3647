"""mkubectl's output formats: server Tables as kubectl prints them, YAML and JSON as kubectl writes them."""

from __future__ import annotations

import io
import json
from typing import Any

import yaml

from kubectl.commands.get import jsonpath_value, sort_rows
from kubectl.printers import TablePrinter, go_json, go_yaml, kind_name, print_objects, resource_name
from machinery.api.resources import resource_for

PODS = resource_for("", "pods")
DEPLOYMENTS = resource_for("apps", "deployments")
assert PODS is not None and DEPLOYMENTS is not None

COLUMNS = [
    {"name": "Name", "type": "string", "format": "name", "priority": 0},
    {"name": "Ready", "type": "string", "format": "", "priority": 0},
    {"name": "Age", "type": "string", "format": "", "priority": 0},
    {"name": "IP", "type": "string", "format": "", "priority": 1},
    {"name": "Nominated Node", "type": "string", "format": "", "priority": 1},
]


def row(name: str, ready: str, age: str, ip: str, ns: str = "default", labels: dict[str, str] | None = None
        ) -> dict[str, Any]:
    return {"cells": [name, ready, age, ip, "<none>"],
            "object": {"kind": "PartialObjectMetadata", "metadata": {"name": name, "namespace": ns,
                                                                      "labels": labels or {}}}}


def table(*rows: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Table", "columnDefinitions": COLUMNS, "rows": list(rows)}


def printed(**options: Any) -> tuple[TablePrinter, io.StringIO]:
    out = io.StringIO()
    return TablePrinter(out, **options), out


def test_default_columns_hide_priority_one() -> None:
    printer, out = printed()
    printer.print_table(PODS, table(row("a", "1/1", "5s", "10.0.0.1"), row("longer-name", "0/1", "3m", "<none>")))
    printer.flush()
    assert out.getvalue() == ("NAME          READY   AGE\n"
                              "a             1/1     5s\n"
                              "longer-name   0/1     3m\n")


def test_wide_namespace_and_labels() -> None:
    printer, out = printed(wide=True, with_namespace=True, show_labels=True, label_columns=["app"])
    printer.print_table(PODS, table(row("a", "1/1", "5s", "10.0.0.1", "ns1", {"app": "web", "x": "y"})))
    printer.flush()
    header, line = out.getvalue().splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "READY", "AGE", "IP", "NOMINATED", "NODE", "APP", "LABELS"]
    assert line.split() == ["ns1", "a", "1/1", "5s", "10.0.0.1", "<none>", "web", "app=web,x=y"]


def test_several_kinds_prefix_names_and_separate_tables() -> None:
    printer, out = printed(with_kind=True)
    printer.print_table(DEPLOYMENTS, table(row("web", "1/1", "5s", "")))
    printer.print_table(PODS, table())  # nothing for this kind: no header, no blank line
    printer.print_table(PODS, table(row("web-1", "1/1", "5s", "")))
    printer.flush()
    assert out.getvalue() == ("NAME                  READY   AGE\n"
                              "deployment.apps/web   1/1     5s\n"
                              "\n"
                              "NAME        READY   AGE\n"
                              "pod/web-1   1/1     5s\n")


def test_watch_rows_reuse_the_header_and_widths() -> None:
    printer, out = printed()
    printer.print_table(PODS, table(row("a", "0/1", "1s", "")))
    printer.flush()
    event = {"kind": "Table", "columnDefinitions": [], "rows": [row("b", "1/1", "2s", "")]}
    printer.print_table(PODS, event, header=False)
    printer.flush()
    assert out.getvalue() == "NAME   READY   AGE\na      0/1     1s\nb      1/1     2s\n"


def test_multiline_cells_are_cut_as_kubectl_does() -> None:
    printer, out = printed(no_headers=True)
    printer.print_table(PODS, table(row("a", "line1\nline2", "1s", "")))
    printer.flush()
    assert out.getvalue() == "a     line1...   1s\n"  # minimum width 6


def test_names() -> None:
    assert kind_name(DEPLOYMENTS) == "deployment.apps"
    assert resource_name(PODS, "x") == "pod/x"


def test_yaml_like_go_yaml() -> None:
    doc = {"b": {"y": "y", "n": "7", "t": "2026-01-01T00:00:00Z", "e": "", "s": "plain", "on": "on"},
           "a": [{"k": 1}], "m": {}, "l": [], "multi": "x\ny\n"}
    assert go_yaml(doc) == (
        "a:\n- k: 1\nb:\n  e: \"\"\n  \"n\": \"7\"\n  \"on\": \"on\"\n  s: plain\n  t: \"2026-01-01T00:00:00Z\"\n"
        "  \"y\": \"y\"\nl: []\nm: {}\nmulti: |\n  x\n  y\n")
    long = "x" * 300
    assert go_yaml({"k": long}) == f"k: {long}\n"  # never wrapped
    assert yaml.safe_load(go_yaml(doc)) == doc


def test_json_like_go() -> None:
    text = go_json({"b": 1, "a": {"html": "<&>", "u": "é"}})
    assert text == '{\n    "a": {\n        "html": "\\u003c\\u0026\\u003e",\n        "u": "é"\n    },\n    "b": 1\n}\n'
    assert json.loads(text) == {"b": 1, "a": {"html": "<&>", "u": "é"}}


def test_single_object_or_list() -> None:
    out = io.StringIO()
    pod = {"metadata": {"name": "p", "managedFields": [{}]}, "spec": {}}
    print_objects(out, [(PODS, pod)], "json", single=True)
    assert json.loads(out.getvalue()) == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    out = io.StringIO()
    print_objects(out, [(PODS, pod)], "yaml", single=False)
    listed = yaml.safe_load(out.getvalue())
    assert listed["kind"] == "List" and listed["metadata"] == {"resourceVersion": ""}
    assert listed["items"][0]["kind"] == "Pod"
    out = io.StringIO()
    print_objects(out, [(PODS, pod), (DEPLOYMENTS, {"metadata": {"name": "d"}})], "name", single=False)
    assert out.getvalue() == "pod/p\ndeployment.apps/d\n"


def test_sort_by_jsonpath() -> None:
    t = {"rows": [{"object": {"metadata": {"creationTimestamp": "2026-01-01T00:00:03Z"}, "count": 3}},
                  {"object": {"metadata": {"creationTimestamp": "2026-01-01T00:00:01Z"}, "count": 10}},
                  {"object": {"metadata": {}}}]}
    sort_rows(t, ".metadata.creationTimestamp")
    assert [jsonpath_value(r["object"], "{.metadata.creationTimestamp}") for r in t["rows"]] == [
        None, "2026-01-01T00:00:01Z", "2026-01-01T00:00:03Z"]
    sort_rows(t, ".count")
    assert [r["object"].get("count") for r in t["rows"]] == [None, 3, 10]
    assert jsonpath_value({"a": [{"b": 1}]}, ".a[0].b") == 1
