"""What a list or watch asks for (upstream: storage.SelectionPredicate): namespace, name, label
selector and field selector, tested against an object's labels and selectable fields."""

from __future__ import annotations

from dataclasses import dataclass

from machinery.selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector


@dataclass(frozen=True, slots=True)
class Attrs:
    """What a predicate may test of one object, computed once per object version."""

    labels: dict[str, str]
    fields: dict[str, str]


@dataclass(frozen=True, slots=True)
class Predicate:
    namespace: str | None = None
    label: LabelSelector | None = None
    field: FieldSelector | None = None

    @classmethod
    def parse(cls, namespace: str | None, label_selector: str | None, field_selector: str | None) -> Predicate:
        """Parse the query's selectors; SelectorError (a ValueError) on bad syntax."""
        label = parse_label_selector(label_selector) if label_selector else None
        field = parse_field_selector(field_selector) if field_selector else None
        return cls(namespace or None, label if label and not label.empty else None,
                   field if field and not field.empty else None)

    @property
    def name(self) -> str | None:
        """The single name a `metadata.name=` field selector pins, if any."""
        return self.field.value_for("metadata.name") if self.field else None

    def matches(self, attrs: Attrs) -> bool:
        if self.namespace is not None and attrs.fields.get("metadata.namespace") != self.namespace:
            return False
        if self.label is not None and not self.label.matches(attrs.labels):
            return False
        return self.field is None or self.field.matches(attrs.fields)
