"""Label and field selectors with apimachinery semantics.

Label selectors (`?labelSelector=`, `kubectl -l`, `spec.selector`) follow
k8s.io/apimachinery/pkg/labels/selector.go: the same lexer and recursive-descent parser, the same
validation of keys and values, the same error messages, the same canonical string (requirements
sorted by key, set values sorted). `selector_from_label_selector` is metav1.LabelSelectorAsSelector:
`None` selects nothing, `{}` selects everything.

Field selectors (`?fieldSelector=`) follow k8s.io/apimachinery/pkg/fields/selector.go: comma-separated
`field=value` / `field==value` / `field!=value` terms, with `\\,` `\\=` `\\\\` escapes in values, and a
missing field reads as "".

Both kinds are parsed once into immutable objects whose `matches()` is cheap: it runs once per
object when a list or watch filters thousands of objects.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, ItemsView, Iterable, Mapping
from typing import Any, Final

from machinery.validation import is_qualified_name, is_valid_label_value

__all__ = [
    "DOES_NOT_EXIST",
    "DOUBLE_EQUALS",
    "EQUALS",
    "EXISTS",
    "GREATER_THAN",
    "IN",
    "LESS_THAN",
    "NOT_EQUALS",
    "NOT_IN",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "escape_field_value",
    "label_selector_to_string",
    "nested_field",
    "parse_field_selector",
    "parse_label_selector",
    "selector_from_label_selector",
    "selector_from_set",
    "unescape_field_value",
]


class SelectorError(ValueError):
    """A selector that cannot be parsed or converted; the message reads like apimachinery's."""


# --------------------------------------------------------------------------------------------
# Operators (the strings of k8s.io/apimachinery/pkg/selection).
# --------------------------------------------------------------------------------------------

IN: Final = "in"
NOT_IN: Final = "notin"
EQUALS: Final = "="
DOUBLE_EQUALS: Final = "=="
NOT_EQUALS: Final = "!="
EXISTS: Final = "exists"
DOES_NOT_EXIST: Final = "!"
GREATER_THAN: Final = "gt"
LESS_THAN: Final = "lt"

_BINARY_OPERATORS: Final = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)
_VALID_OPERATORS: Final = (*_BINARY_OPERATORS, EXISTS, DOES_NOT_EXIST)

# metav1.LabelSelectorOperator -> selection.Operator
_LABEL_SELECTOR_OPERATORS: Final[dict[str, str]] = {
    "In": IN,
    "NotIn": NOT_IN,
    "Exists": EXISTS,
    "DoesNotExist": DOES_NOT_EXIST,
}

_INT_RE: Final = re.compile(r"[+-]?[0-9]+")
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def _parse_int64(s: str) -> int | None:
    """strconv.ParseInt(s, 10, 64), or None when it would fail."""
    if _INT_RE.fullmatch(s) is None:
        return None
    n = int(s)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


_GO_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def _go_quote(s: str) -> str:
    """Go's %q for a string."""
    out = ['"']
    for ch in s:
        esc = _GO_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            if code < 0x80:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _go_string_slice(values: list[str] | None) -> str:
    """Go's %#v for a []string."""
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(_go_quote(v) for v in values) + "}"


def _invalid(path: str, shown: str, detail: str) -> str:
    """field.Invalid(...).Error()."""
    return f"{path}: Invalid value: {shown}: {detail}"


def _aggregate(errs: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message alone, several deduplicated in brackets."""
    seen = list(dict.fromkeys(errs))
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


# --------------------------------------------------------------------------------------------
# Label selector requirements.
# --------------------------------------------------------------------------------------------

_Labels = Mapping[str, str]
_Matcher = Callable[[_Labels], bool]


def _compile(key: str, op: str, values: tuple[str, ...]) -> _Matcher:
    """A fast predicate over a label mapping for one requirement (Requirement.Matches)."""
    if op in (EQUALS, DOUBLE_EQUALS, IN):
        if len(values) == 1:
            v = values[0]
            return lambda ls: ls.get(key) == v
        vs = frozenset(values)
        return lambda ls: ls.get(key) in vs
    if op in (NOT_EQUALS, NOT_IN):
        if len(values) == 1:
            v = values[0]
            return lambda ls: ls.get(key) != v
        vs = frozenset(values)
        return lambda ls: ls.get(key) not in vs
    if op == EXISTS:
        return lambda ls: key in ls
    if op == DOES_NOT_EXIST:
        return lambda ls: key not in ls
    bound = _parse_int64(values[0]) if len(values) == 1 else None
    if bound is None:  # pragma: no cover - construction validates gt/lt values
        return lambda ls: False
    greater = op == GREATER_THAN

    def compare(ls: _Labels) -> bool:
        raw = ls.get(key)
        if raw is None:
            return False
        n = _parse_int64(raw)
        if n is None:
            return False
        return n > bound if greater else n < bound

    return compare


class Requirement:
    """One term of a label selector: key, operator (one of the module constants) and values.

    The constructor validates like labels.NewRequirement and raises SelectorError.
    """

    __slots__ = ("_match", "key", "operator", "values")

    key: str
    operator: str
    values: tuple[str, ...]
    _match: _Matcher

    def __init__(self, key: str, operator: str, values: Iterable[str] | None = None) -> None:
        if not isinstance(key, str):
            raise SelectorError(f"key: must be a string, not {type(key).__name__}")
        if isinstance(values, str) or (values is not None and not isinstance(values, Iterable)):
            raise SelectorError("values: must be a list of strings")
        given = None if values is None else list(values)
        for v in given or ():
            if not isinstance(v, str):
                raise SelectorError(f"values: must be a list of strings, found {type(v).__name__}")
        vals = given or []
        errs: list[str] = []
        key_errs = is_qualified_name(key)
        if key_errs:
            errs.append(_invalid("key", _go_quote(key), "; ".join(key_errs)))
        if operator in (IN, NOT_IN):
            if not vals:
                errs.append(
                    _invalid(
                        "values",
                        _go_string_slice(given),
                        "for 'in', 'notin' operators, values set can't be empty",
                    )
                )
        elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
            if len(vals) != 1:
                errs.append(
                    _invalid(
                        "values",
                        _go_string_slice(given),
                        "exact-match compatibility requires one single value",
                    )
                )
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if vals:
                errs.append(
                    _invalid(
                        "values",
                        _go_string_slice(given),
                        "values set must be empty for exists and does not exist",
                    )
                )
        elif operator in (GREATER_THAN, LESS_THAN):
            if len(vals) != 1:
                errs.append(
                    _invalid(
                        "values",
                        _go_string_slice(given),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    )
                )
            for i, v in enumerate(vals):
                if _parse_int64(v) is None:
                    errs.append(
                        _invalid(
                            f"values[{i}]",
                            _go_quote(v),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        )
                    )
        else:
            shown = _go_quote(operator) if isinstance(operator, str) else repr(operator)
            supported = ", ".join(_go_quote(o) for o in _VALID_OPERATORS)
            errs.append(f"operator: Unsupported value: {shown}: supported values: {supported}")
        for i, v in enumerate(vals):
            value_errs = is_valid_label_value(v)
            if value_errs:
                errs.append(_invalid(f"values[{i}][{key}]", _go_quote(v), "; ".join(value_errs)))
        if errs:
            raise SelectorError(_aggregate(errs))
        self._init(key, operator, tuple(vals))

    def _init(self, key: str, operator: str, values: tuple[str, ...]) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "operator", operator)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "_match", _compile(key, operator, values))

    @classmethod
    def _unchecked(cls, key: str, operator: str, values: tuple[str, ...]) -> Requirement:
        """Build without validation (labels.SelectorFromValidatedSet)."""
        r = cls.__new__(cls)
        r._init(key, operator, values)
        return r

    def matches(self, labels: _Labels | None) -> bool:
        """Whether this requirement holds for the labels (a missing label fails `in`/`=`/gt/lt)."""
        return bool(self._match(labels if labels is not None else _NO_LABELS))

    def __str__(self) -> str:
        op = self.operator
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        if op == EXISTS:
            return self.key
        vals = self.values
        shown = vals[0] if len(vals) == 1 else ",".join(sorted(vals))
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({shown})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{symbol}{shown}"

    def __repr__(self) -> str:
        return f"Requirement({self.key!r}, {self.operator!r}, {list(self.values)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirement):
            return NotImplemented
        return (self.key, self.operator, self.values) == (other.key, other.operator, other.values)

    def __hash__(self) -> int:
        return hash((self.key, self.operator, self.values))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")


_NO_LABELS: Final[Mapping[str, str]] = {}


# --------------------------------------------------------------------------------------------
# Label selectors.
# --------------------------------------------------------------------------------------------


class LabelSelector:
    """An immutable AND of requirements, sorted by key; or the special selector matching nothing.

    `LabelSelector()` matches everything; `LabelSelector.nothing()` matches nothing (what a nil
    `spec.selector` means). Build from text with `parse_label_selector`, from the API object form
    with `selector_from_label_selector`, from a map with `selector_from_set`.
    """

    __slots__ = ("_eq_items", "_matchers", "_nothing", "_requirements")

    _requirements: tuple[Requirement, ...]
    _nothing: bool
    _matchers: tuple[_Matcher, ...]
    _eq_items: ItemsView[str, str] | None  # {key: value}.items() when every requirement is a plain equality

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        given = tuple(requirements)
        for r in given:
            if not isinstance(r, Requirement):
                raise TypeError(f"expected Requirement, got {type(r).__name__}")
        reqs = tuple(sorted(given, key=lambda r: r.key))  # stable: ties keep their order
        if nothing and reqs:
            raise ValueError("the nothing selector has no requirements")
        object.__setattr__(self, "_requirements", reqs)
        object.__setattr__(self, "_nothing", nothing)
        object.__setattr__(self, "_matchers", tuple(r._match for r in reqs))
        eq_items: ItemsView[str, str] | None = None
        if all(r.operator in (EQUALS, DOUBLE_EQUALS) for r in reqs):
            eq = {r.key: r.values[0] for r in reqs}
            if len(eq) == len(reqs):  # "a=x,a=y" must stay unsatisfiable
                eq_items = eq.items()
        object.__setattr__(self, "_eq_items", eq_items)

    @classmethod
    def everything(cls) -> LabelSelector:
        """The selector that matches every label set (labels.Everything)."""
        return _EVERYTHING

    @classmethod
    def nothing(cls) -> LabelSelector:
        """The selector that matches no label set (labels.Nothing)."""
        return _NOTHING

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        """The requirements, sorted by key."""
        return self._requirements

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (false for `nothing()`)."""
        return not self._requirements and not self._nothing

    @property
    def is_nothing(self) -> bool:
        """True for the selector that matches nothing."""
        return self._nothing

    def matches(self, labels: _Labels | None) -> bool:
        """Whether every requirement holds for `labels` (None reads as no labels)."""
        if self._nothing:
            return False
        if labels is None:
            labels = _NO_LABELS
        eq_items = self._eq_items
        if eq_items is not None:
            return eq_items <= labels.items()
        for match in self._matchers:  # noqa: SIM110 - a plain loop beats all(<genexpr>) here
            if not match(labels):
                return False
        return True

    def value_for(self, key: str) -> str | None:
        """The single value `key` must equal (`=`, `==`, or `in` with one value), else None.

        labels.Selector.RequiresExactMatch.
        """
        for r in self._requirements:
            if r.key == key:
                if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def add(self, *requirements: Requirement) -> LabelSelector:
        """A new selector with extra requirements (adding to `nothing()` keeps matching nothing)."""
        if self._nothing:
            return self
        return LabelSelector((*self._requirements, *requirements))

    def __str__(self) -> str:
        return ",".join(str(r) for r in self._requirements)

    def __repr__(self) -> str:
        if self._nothing:
            return "LabelSelector.nothing()"
        return f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self._nothing == other._nothing and self._requirements == other._requirements

    def __hash__(self) -> int:
        return hash((self._nothing, self._requirements))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")


_EVERYTHING: Final = LabelSelector()
_NOTHING: Final = LabelSelector(nothing=True)


# Lexer tokens (labels.Token).
_EOS, _CLOSE, _COMMA, _NOT, _DEQ, _EQ, _GT, _ID, _IN, _LT, _NEQ, _NOTIN, _OPEN = range(1, 14)
_STRING2TOKEN: Final[dict[str, int]] = {
    ")": _CLOSE,
    ",": _COMMA,
    "!": _NOT,
    "==": _DEQ,
    "=": _EQ,
    ">": _GT,
    "in": _IN,
    "<": _LT,
    "!=": _NEQ,
    "notin": _NOTIN,
    "(": _OPEN,
}
_WHITESPACE: Final = frozenset(" \t\r\n")
_SPECIAL: Final = frozenset("=!(),<>")
_OPERATOR_TOKENS: Final[dict[int, str]] = {
    _IN: IN,
    _EQ: EQUALS,
    _DEQ: DOUBLE_EQUALS,
    _GT: GREATER_THAN,
    _LT: LESS_THAN,
    _NOTIN: NOT_IN,
    _NEQ: NOT_EQUALS,
}


def _lex(text: str) -> list[tuple[int, str]]:
    """labels.Lexer: the whole token stream, ending with end-of-string."""
    nul = text.find("\x00")  # Go's lexer reads a NUL byte as the end of input
    if nul >= 0:
        text = text[:nul]
    items: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            items.append((_EOS, ""))
            return items
        if text[i] in _SPECIAL:
            # longest special-symbol token: every single symbol is a token, pairs are "==" "!="
            pair = text[i : i + 2]
            tok = _STRING2TOKEN.get(pair) if len(pair) == 2 else None
            if tok is not None:
                items.append((tok, pair))
                i += 2
            else:
                items.append((_STRING2TOKEN[text[i]], text[i]))
                i += 1
        else:
            j = i
            while j < n and text[j] not in _WHITESPACE and text[j] not in _SPECIAL:
                j += 1
            word = text[i:j]
            items.append((_STRING2TOKEN.get(word, _ID), word))
            i = j


class _Parser:
    """labels.Parser: recursive descent over the token stream."""

    __slots__ = ("items", "pos")

    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def lookahead(self, values: bool = True) -> tuple[int, str]:
        """The next token; in the Values context `in`/`notin` are plain identifiers."""
        tok, lit = self.items[self.pos]
        if values and tok in (_IN, _NOTIN):
            tok = _ID
        return tok, lit

    def consume(self, values: bool = True) -> tuple[int, str]:
        """The next token, advancing (never past end-of-string)."""
        item = self.lookahead(values)
        if self.pos < len(self.items) - 1:
            self.pos += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok in (_ID, _NOT):
                try:
                    requirements.append(self.parse_requirement())
                except SelectorError as e:
                    raise SelectorError(f"unable to parse requirement: {e}") from None
                t, lit = self.consume()
                if t == _EOS:
                    return requirements
                if t == _COMMA:
                    t2, lit2 = self.lookahead()
                    if t2 not in (_ID, _NOT):
                        raise SelectorError(f"found '{lit2}', expected: identifier after ','")
                else:
                    raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            elif tok == _EOS:
                return requirements
            else:
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def parse_requirement(self) -> Requirement:
        key, op = self.parse_key_and_infer_operator()
        if op in (EXISTS, DOES_NOT_EXIST):
            return Requirement(key, op, [])
        op = self.parse_operator()
        values = self.parse_values() if op in (IN, NOT_IN) else self.parse_exact_value()
        return Requirement(key, op, sorted(values))

    def parse_key_and_infer_operator(self) -> tuple[str, str]:
        op = ""
        tok, lit = self.consume()
        if tok == _NOT:
            op = DOES_NOT_EXIST
            tok, lit = self.consume()
        if tok != _ID:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key_errs = is_qualified_name(lit)
        if key_errs:
            raise SelectorError(_invalid("<nil>", _go_quote(lit), "; ".join(key_errs)))
        nxt, _ = self.lookahead()
        if nxt in (_EOS, _COMMA) and op != DOES_NOT_EXIST:
            op = EXISTS
        return lit, op

    def parse_operator(self) -> str:
        tok, lit = self.consume(values=False)
        op = _OPERATOR_TOKENS.get(tok)
        if op is None:
            raise SelectorError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        return op

    def parse_values(self) -> set[str]:
        tok, lit = self.consume()
        if tok != _OPEN:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok in (_ID, _COMMA):
            values = self.parse_identifiers_list()
            self.consume()  # the ')' that parse_identifiers_list stopped at
            return values
        if tok == _CLOSE:  # "()"
            self.consume()
            return {""}
        raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.consume()
            if tok == _ID:
                values.add(lit)
                tok2, lit2 = self.lookahead()
                if tok2 == _COMMA:
                    continue
                if tok2 == _CLOSE:
                    return values
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _COMMA:  # empty values: "(,", ",,", ",)"
                if not values:
                    values.add("")
                tok2, _ = self.lookahead()
                if tok2 == _CLOSE:
                    values.add("")
                    return values
                if tok2 == _COMMA:
                    self.consume()
                    values.add("")
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        tok, _ = self.lookahead()
        if tok in (_EOS, _COMMA):
            return {""}
        tok, lit = self.consume()
        if tok == _ID:
            return {lit}
        raise SelectorError(f"found '{lit}', expected: identifier")


@functools.lru_cache(maxsize=512)
def _parse_label_selector_cached(text: str) -> LabelSelector:
    reqs = _Parser(text).parse()
    return LabelSelector(reqs) if reqs else _EVERYTHING


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the `?labelSelector=` / `kubectl -l` syntax (labels.Parse); "" selects everything.

    Raises SelectorError with apimachinery's message on bad syntax, keys or values.
    """
    if not isinstance(text, str):
        raise SelectorError(f"label selector must be a string, not {type(text).__name__}")
    return _parse_label_selector_cached(text)


def selector_from_label_selector(sel: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a metav1.LabelSelector dict (metav1.LabelSelectorAsSelector).

    None matches nothing; `{}` (no matchLabels, no matchExpressions) matches everything.
    """
    if sel is None:
        return _NOTHING
    if not isinstance(sel, Mapping):
        raise SelectorError(f"label selector must be an object, not {type(sel).__name__}")
    match_labels = sel.get("matchLabels") or {}
    match_expressions = sel.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping):
        raise SelectorError("matchLabels: must be an object")
    if not isinstance(match_expressions, list | tuple):
        raise SelectorError("matchExpressions: must be a list")
    if not match_labels and not match_expressions:
        return _EVERYTHING
    reqs: list[Requirement] = []
    for k, v in match_labels.items():
        reqs.append(Requirement(k, EQUALS, ["" if v is None else v]))
    for expr in match_expressions:
        if not isinstance(expr, Mapping):
            raise SelectorError("matchExpressions: each item must be an object")
        op_name = expr.get("operator")
        op = _LABEL_SELECTOR_OPERATORS.get(op_name) if isinstance(op_name, str) else None
        if op is None:
            shown = _go_quote("" if op_name is None else str(op_name))
            raise SelectorError(f"{shown} is not a valid label selector operator")
        values = expr.get("values")
        key = expr.get("key")
        reqs.append(Requirement("" if key is None else key, op, values if values else None))
    return LabelSelector(reqs)


def label_selector_to_string(sel: Mapping[str, Any] | None) -> str:
    """metav1.FormatLabelSelector: the `-l` form of a selector dict, "<none>" if empty, "<error>" if bad."""
    try:
        text = str(selector_from_label_selector(sel))
    except SelectorError:
        return "<error>"
    return text or "<none>"


def selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """A selector requiring exactly these labels (labels.SelectorFromSet, unvalidated); empty → everything."""
    if not labels:
        return _EVERYTHING
    return LabelSelector(Requirement._unchecked(k, EQUALS, (v,)) for k, v in labels.items())


# --------------------------------------------------------------------------------------------
# Field selectors.
# --------------------------------------------------------------------------------------------


def escape_field_value(value: str) -> str:
    """fields.EscapeValue: backslash-escape `\\`, `,` and `=` for use in a field selector."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_field_value(value: str) -> str:
    """fields.UnescapeValue: undo escape_field_value; raises SelectorError on bad escapes."""
    if "\\" not in value and "," not in value and "=" not in value:
        return value
    out: list[str] = []
    in_slash = False
    for c in value:
        if in_slash:
            if c in "\\,=":
                out.append(c)
            else:
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            # Go prints the rune with %v, i.e. as its number
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """fields.splitTerms: split on commas not escaped by a backslash."""
    if not text:
        return []
    if "\\" not in text:
        return text.split(",")
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """fields.splitTerm: split at the first operator (`!=`, `==`, `=`); None if there is none."""
    i_eq = term.find("=")
    if i_eq < 0:
        return None
    if i_eq > 0 and term[i_eq - 1] == "!":
        return term[: i_eq - 1], NOT_EQUALS, term[i_eq + 1 :]
    if term.startswith("==", i_eq):
        return term[:i_eq], DOUBLE_EQUALS, term[i_eq + 2 :]
    return term[:i_eq], EQUALS, term[i_eq + 1 :]


class FieldSelector:
    """An immutable AND of `field=value` / `field!=value` terms over string-valued fields."""

    __slots__ = ("_terms",)

    _terms: tuple[tuple[str, bool, str], ...]  # (field, is_equals, value)

    def __init__(self, requirements: Iterable[tuple[str, str, str]] = ()) -> None:
        terms: list[tuple[str, bool, str]] = []
        for field, op, value in requirements:
            if not isinstance(field, str) or not isinstance(value, str):
                raise SelectorError("field selector terms need string fields and values")
            if op in (EQUALS, DOUBLE_EQUALS):
                terms.append((field, True, value))
            elif op == NOT_EQUALS:
                terms.append((field, False, value))
            else:
                raise SelectorError(f"invalid field selector operator: {op!r}")
        object.__setattr__(self, "_terms", tuple(terms))

    @classmethod
    def everything(cls) -> FieldSelector:
        """The field selector that matches everything."""
        return _FIELDS_EVERYTHING

    @property
    def requirements(self) -> list[tuple[str, str, str]]:
        """The terms as (field, "=" or "!=", value), in canonical (sorted) order."""
        return [(f, EQUALS if eq else NOT_EQUALS, v) for f, eq, v in self._terms]

    @property
    def fields(self) -> tuple[str, ...]:
        """The distinct field names the selector reads."""
        return tuple(dict.fromkeys(f for f, _, _ in self._terms))

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything."""
        return not self._terms

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether every term holds; a field missing from `fields` reads as ""."""
        get = fields.get
        for field, is_eq, value in self._terms:  # noqa: SIM110 - a plain loop beats all(<genexpr>)
            if (get(field, "") == value) is not is_eq:
                return False
        return True

    def value_for(self, field: str) -> str | None:
        """The value an `=` term requires of `field`, else None (fields.Selector.RequiresExactMatch)."""
        for f, is_eq, v in self._terms:
            if is_eq and f == field:
                return v
        return None

    def validate(self, allowed: Iterable[str]) -> FieldSelector:
        """Raise SelectorError `field label not supported: <f>` for a field outside `allowed`."""
        allowed_set = allowed if isinstance(allowed, set | frozenset) else set(allowed)
        for f, _, _ in self._terms:
            if f not in allowed_set:
                raise SelectorError(f"field label not supported: {f}")
        return self

    def __str__(self) -> str:
        return ",".join(f"{f}{'=' if eq else '!='}{escape_field_value(v)}" for f, eq, v in self._terms)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self._terms == other._terms

    def __hash__(self) -> int:
        return hash(self._terms)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")


_FIELDS_EVERYTHING: Final = FieldSelector()


@functools.lru_cache(maxsize=512)
def _parse_field_selector_cached(text: str) -> FieldSelector:
    terms: list[tuple[str, str, str]] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, raw = split
        value = unescape_field_value(raw)
        if not field and not value:  # Transform drops a term that is empty on both sides
            continue
        terms.append((field, op, value))
    return FieldSelector(terms) if terms else _FIELDS_EVERYTHING


def parse_field_selector(text: str) -> FieldSelector:
    """Parse the `?fieldSelector=` syntax (fields.ParseSelector); "" selects everything.

    Field names are not checked here: call `.validate(allowed)` with the resource's fields.
    """
    if not isinstance(text, str):
        raise SelectorError(f"field selector must be a string, not {type(text).__name__}")
    return _parse_field_selector_cached(text)


@functools.lru_cache(maxsize=256)
def _split_path(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def nested_field(obj: Mapping[str, Any] | None, path: str) -> str:
    """The value at a dotted path (`spec.nodeName`, `involvedObject.kind`) as a string, "" if missing.

    Booleans render as "true"/"false" and numbers in decimal, like the apiserver's field sets;
    objects and lists render as "".
    """
    cur: Any = obj
    for part in _split_path(path):
        if type(cur) is not dict and not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if isinstance(cur, str):
        return cur
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, int | float):
        return str(cur)
    return ""
