"""What the watch cache keeps per object to match selectors (apiserver/storage/predicate.py's Attrs, made by
apiserver/registry/generic.py's Store.attrs_of): the fields as a Fields mapping (a tuple of values against an
index of names shared by the resource), the labels as one dict shared by the objects that have the same ones.
Both must answer every selector as the dicts they replace did."""

from __future__ import annotations

import types
from typing import Any

import pytest

from apiserver.registry import generic
from apiserver.registry.generic import Store
from apiserver.registry.pod import PodStrategy
from apiserver.storage.predicate import Attrs, Fields, Predicate


def attrs_of(obj: dict[str, Any]) -> Attrs:
    store: Any = types.SimpleNamespace(strategy=PodStrategy.__new__(PodStrategy))
    return Store.attrs_of(store, obj)


def pod(name: str, labels: dict[str, str] | None, node: str = "", phase: str = "Pending") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", **({"labels": labels} if labels is not None else {})},
            "spec": {"nodeName": node, "restartPolicy": "Always"}, "status": {"phase": phase}}


def test_fields_read_as_the_strategys_dict_of_field_values() -> None:
    obj = pod("web-1", {"app": "web"}, node="node-a", phase="Running")
    values = PodStrategy.__new__(PodStrategy).field_values(obj)
    fields = attrs_of(obj).fields
    assert isinstance(fields, Fields)
    assert fields == values and dict(fields) == values and list(fields) == list(values)
    assert fields["spec.nodeName"] == "node-a" and fields.get("status.phase") == "Running"
    assert fields.get("no.such.field") is None and fields.get("no.such.field", "") == ""
    assert "metadata.name" in fields and "no.such.field" not in fields
    with pytest.raises(KeyError):
        fields["no.such.field"]


def test_objects_of_one_resource_share_one_index_of_field_names() -> None:
    a, b = attrs_of(pod("a", None)).fields, attrs_of(pod("b", None)).fields
    assert isinstance(a, Fields) and isinstance(b, Fields)
    assert a._index is b._index
    assert (a["metadata.name"], b["metadata.name"]) == ("a", "b")


def test_objects_with_the_same_labels_share_one_dict_and_others_do_not() -> None:
    first = attrs_of(pod("a", {"app": "web", "tier": "front"}))
    second = attrs_of(pod("b", {"app": "web", "tier": "front"}))
    other = attrs_of(pod("c", {"app": "db"}))
    assert first.labels is second.labels
    assert first.labels == {"app": "web", "tier": "front"} and other.labels == {"app": "db"}
    assert attrs_of(pod("d", None)).labels == {}


def test_the_shared_labels_are_bounded_and_start_afresh_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generic, "_SHARED_LABELS", {})
    monkeypatch.setattr(generic, "_SHARED_LABELS_MAX", 3)
    held = [attrs_of(pod(f"p{i}", {"unique": str(i)})) for i in range(10)]
    assert len(generic._SHARED_LABELS) <= 3
    assert [a.labels for a in held] == [{"unique": str(i)} for i in range(10)]  # each object keeps its own


def test_selectors_match_the_compact_attrs_as_they_matched_dicts() -> None:
    attrs = attrs_of(pod("web-1", {"app": "web"}, node="node-a", phase="Running"))
    as_dicts = Attrs(dict(attrs.labels), dict(attrs.fields))
    for labels, fields, namespace in [
        (None, "spec.nodeName=node-a", "ns"), (None, "spec.nodeName!=node-a", None), ("app=web", None, None),
        ("app in (web,db),tier notin (x)", "status.phase=Running,metadata.name=web-1", "ns"),
        ("app=db", None, None), (None, "status.phase=Pending", None), (None, None, "other"),
    ]:
        predicate = Predicate.parse(namespace, labels, fields)
        assert predicate.matches(attrs) == predicate.matches(as_dicts), (labels, fields, namespace)
    assert Predicate.parse("ns", "app=web", "spec.nodeName=node-a").matches(attrs)
    assert not Predicate.parse(None, None, "spec.nodeName=node-b").matches(attrs)
