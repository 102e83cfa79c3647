"""Label and field selectors parse, print, match and fail the way apimachinery's do."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from machinery import selectors
from machinery.selectors import (
    DOES_NOT_EXIST,
    DOUBLE_EQUALS,
    EQUALS,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_EQUALS,
    NOT_IN,
    FieldSelector,
    LabelSelector,
    Requirement,
    SelectorError,
    escape_field_value,
    label_selector_to_string,
    nested_field,
    parse_field_selector,
    parse_label_selector,
    selector_from_label_selector,
    selector_from_set,
    unescape_field_value,
)

QNAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
    "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
BINARY_OPS = "in, notin, =, ==, !=, gt, lt"


def parse_error(text: str) -> str:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    return str(info.value)


# --------------------------------------------------------------------------------------------
# Label selector syntax: what parses, and its canonical string.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("   \t\n ", ""),
        ("x=a", "x=a"),
        ("y==b", "y==b"),
        ("z!=c", "z!=c"),
        ("x=a,y=b,z=c", "x=a,y=b,z=c"),
        ("z=c,x=a,y=b", "x=a,y=b,z=c"),
        ("x!=a,y=b", "x!=a,y=b"),
        ("x=", "x="),
        ("x= ", "x="),
        ("x=,z= ", "x=,z="),
        ("x= ,z= ", "x=,z="),
        ("  x  =  a  ,  y != b  ", "x=a,y!=b"),
        ("x\t=\na\r,\ty", "x=a,y"),
        ("!x", "!x"),
        ("! x", "!x"),
        ("partition", "partition"),
        ("partition,!other", "!other,partition"),
        ("x>1", "x>1"),
        ("x<5", "x<5"),
        ("x>1,z<5", "x>1,z<5"),
        ("x > 0", "x>0"),
        ("x>007", "x>007"),
        ("x in (a)", "x in (a)"),
        ("x in(a)", "x in (a)"),
        ("x notin (a)", "x notin (a)"),
        ("x in (b,a)", "x in (a,b)"),
        ("x in (a, a, b)", "x in (a,b)"),
        ("env in (prod, qa), tier notin (x)", "env in (prod,qa),tier notin (x)"),
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
        ("x in ()", "x in ()"),
        ("x in (,)", "x in ()"),
        ("x in (,a)", "x in (,a)"),
        ("x in (a,)", "x in (,a)"),
        ("x in (,,a)", "x in (,a)"),
        ("x in (a,,,b)", "x in (,a,b)"),
        ("in in (in, notin)", "in in (in,notin)"),
        ("notin notin (in)", "notin notin (in)"),
        ("in=notin", "in=notin"),
        ("in", "in"),
        ("!notin", "!notin"),
        ("example.com/app=web", "example.com/app=web"),
        ("k8s.io/a-b_c.d==A.b-C_9", "k8s.io/a-b_c.d==A.b-C_9"),
        ("a=b\x00,garbage(((", "a=b"),
    ],
)
def test_parse_canonical_string(text: str, canonical: str) -> None:
    sel = parse_label_selector(text)
    assert str(sel) == canonical
    # the canonical form parses back to the same selector
    assert parse_label_selector(canonical) == sel


def test_parse_sorts_by_key_and_keeps_ties_in_order() -> None:
    sel = parse_label_selector("b=1,a!=x,a=y,c")
    assert [(r.key, r.operator, r.values) for r in sel.requirements] == [
        ("a", NOT_EQUALS, ("x",)),
        ("a", EQUALS, ("y",)),
        ("b", EQUALS, ("1",)),
        ("c", EXISTS, ()),
    ]


def test_parsed_operators() -> None:
    ops = {
        "a=b": EQUALS,
        "a==b": DOUBLE_EQUALS,
        "a!=b": NOT_EQUALS,
        "a in (b)": IN,
        "a notin (b)": NOT_IN,
        "a": EXISTS,
        "!a": DOES_NOT_EXIST,
        "a>1": GREATER_THAN,
        "a<1": LESS_THAN,
    }
    for text, op in ops.items():
        (req,) = parse_label_selector(text).requirements
        assert req.operator == op, text


def test_parse_is_cached_and_results_are_shared() -> None:
    assert parse_label_selector("cache=me") is parse_label_selector("cache=me")
    assert parse_label_selector("") is LabelSelector.everything()


# --------------------------------------------------------------------------------------------
# Label selector syntax errors: every branch of the parser, with upstream's messages.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # parse(): what may start a requirement, what may follow one
        (",", "found ',', expected: !, identifier, or 'end of string'"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("(a)", "found '(', expected: !, identifier, or 'end of string'"),
        (")", "found ')', expected: !, identifier, or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a,,b", "found ',', expected: identifier after ','"),
        ("a, =b", "found '=', expected: identifier after ','"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a=b)", "found ')', expected: ',' or 'end of string'"),
        ("a in (b) c", "found 'c', expected: ',' or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("!a in (b)", "found 'in', expected: ',' or 'end of string'"),
        # parseKeyAndInferOperator
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("!!a", "unable to parse requirement: found '!', expected: identifier"),
        ("!,a", "unable to parse requirement: found ',', expected: identifier"),
        # parseOperator
        ("a b", f"unable to parse requirement: found 'b', expected: {BINARY_OPS}"),
        ("a ! b", f"unable to parse requirement: found '!', expected: {BINARY_OPS}"),
        ("a (b)", f"unable to parse requirement: found '(', expected: {BINARY_OPS}"),
        ("a )", f"unable to parse requirement: found ')', expected: {BINARY_OPS}"),
        # parseValues
        ("a in", "unable to parse requirement: found '' expected: '('"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a notin in", "unable to parse requirement: found 'in' expected: '('"),
        ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a in ((b))", "unable to parse requirement: found '(', expected: ',', ')' or identifier"),
        # parseIdentifiersList
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (b=c)", "unable to parse requirement: found '=', expected: ',' or ')'"),
        ("a in (b,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
        ("a in (b,", "unable to parse requirement: found '', expected: ',', or identifier"),
        ("a in (,,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
        # parseExactValue
        ("a==(b)", "unable to parse requirement: found '(', expected: identifier"),
        ("a=!b", "unable to parse requirement: found '!', expected: identifier"),
        ("a>=1", "unable to parse requirement: found '=', expected: identifier"),
        ("a===b", "unable to parse requirement: found '=', expected: identifier"),
        ("a!==b", "unable to parse requirement: found '=', expected: identifier"),
        ("x=a||y=b", 'unable to parse requirement: values[0][x]: Invalid value: "a||y": ' + VALUE_RULE),
        ("x==a==b", "found '==', expected: ',' or 'end of string'"),
    ],
)
def test_parse_syntax_errors(text: str, message: str) -> None:
    assert parse_error(text) == message


@pytest.mark.parametrize(
    ("key", "detail"),
    [
        ("-a", "name part " + QNAME_RULE),
        ("a-", "name part " + QNAME_RULE),
        (
            "a/b/c",
            "a qualified name "
            + QNAME_RULE
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        ),
        ("/a", "prefix part must be non-empty"),
        ("a/", "name part must be non-empty; name part " + QNAME_RULE),
        ("Example.com/a", "prefix part " + SUBDOMAIN_RULE),
        ("x" * 64, "name part must be no more than 63 characters"),
        ("a" * 254 + "/b", "prefix part must be no more than 253 characters"),
        ("\u00e9" * 32, "name part must be no more than 63 characters; name part " + QNAME_RULE),
        ("\u00e9", "name part " + QNAME_RULE),
        ("a'b", "name part " + QNAME_RULE),
    ],
)
def test_parse_rejects_bad_keys(key: str, detail: str) -> None:
    message = f'unable to parse requirement: <nil>: Invalid value: "{key}": {detail}'
    assert parse_error(key + "=x") == message
    assert parse_error(key) == message
    assert parse_error("!" + key) == message
    assert parse_error(key + " in (x)") == message


def test_parse_accepts_longest_valid_keys_and_values() -> None:
    prefix = ".".join(["a" * 63] * 3) + "." + "b" * 61  # 253 characters
    key = prefix + "/" + "n" * 63
    value = "v" * 63
    sel = parse_label_selector(f"{key}={value}")
    assert sel.matches({key: value})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a=-x", f'values[0][a]: Invalid value: "-x": {VALUE_RULE}'),
        ("a!=x_", f'values[0][a]: Invalid value: "x_": {VALUE_RULE}'),
        ("a=" + "v" * 64, f'values[0][a]: Invalid value: "{"v" * 64}": must be no more than 63 characters'),
        (
            "a=" + "v" * 63 + "-",
            f'values[0][a]: Invalid value: "{"v" * 63}-": must be no more than 63 characters; {VALUE_RULE}',
        ),
        ("a in (ok, -bad)", f'values[0][a]: Invalid value: "-bad": {VALUE_RULE}'),
        ("a in (ok, zz-)", f'values[1][a]: Invalid value: "zz-": {VALUE_RULE}'),
        ("a=b\u00e9", f'values[0][a]: Invalid value: "b\u00e9": {VALUE_RULE}'),
        ("a>b", "values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer"),
        ("a<", "values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer"),
        (
            "a>1.5",
            "values[0]: Invalid value: \"1.5\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            "a>1_000",
            "values[0]: Invalid value: \"1_000\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            "a>9223372036854775808",
            "values[0]: Invalid value: \"9223372036854775808\": for 'Gt', 'Lt' operators, "
            "the value must be an integer",
        ),
        ("a>-1", f'values[0][a]: Invalid value: "-1": {VALUE_RULE}'),
        (
            "a>b.c-",
            "[values[0]: Invalid value: \"b.c-\": for 'Gt', 'Lt' operators, the value must be an integer, "
            f'values[0][a]: Invalid value: "b.c-": {VALUE_RULE}]',
        ),
    ],
)
def test_parse_rejects_bad_values(text: str, message: str) -> None:
    assert parse_error(text) == "unable to parse requirement: " + message


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(SelectorError, match="label selector must be a string, not int"):
        parse_label_selector(3)  # type: ignore[arg-type]


def test_selector_error_is_a_value_error() -> None:
    assert issubclass(SelectorError, ValueError)


# --------------------------------------------------------------------------------------------
# Label selector matching.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("", {}, True),
        ("", None, True),
        ("", {"any": "thing"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y", {"x": "y", "other": "z"}, True),
        ("x=y", {"x": "z"}, False),
        ("x=y", {}, False),
        ("x=y", None, False),
        ("x==y", {"x": "y"}, True),
        ("x==y", {"x": "Y"}, False),
        ("x=", {"x": ""}, True),
        ("x=", {}, False),
        ("x!=y", {}, True),
        ("x!=y", None, True),
        ("x!=y", {"x": "y"}, False),
        ("x!=y", {"x": "z"}, True),
        ("x!=", {"x": ""}, False),
        ("x!=", {}, True),
        ("x in (a)", {"x": "a"}, True),
        ("x in (a)", {"x": "b"}, False),
        ("x in (a,b)", {"x": "a"}, True),
        ("x in (a,b)", {"x": "b"}, True),
        ("x in (a,b)", {"x": "c"}, False),
        ("x in (a,b)", {}, False),
        ("x in ()", {"x": ""}, True),
        ("x in ()", {}, False),
        ("x in (a,)", {"x": ""}, True),
        ("x notin (a)", {"x": "a"}, False),
        ("x notin (a)", {"x": "b"}, True),
        ("x notin (a,b)", {}, True),
        ("x notin (a,b)", {"x": "a"}, False),
        ("x notin (a,b)", {"x": "c"}, True),
        ("x notin ()", {"x": ""}, False),
        ("x notin ()", {}, True),
        ("x", {"x": ""}, True),
        ("x", {"x": "v"}, True),
        ("x", {}, False),
        ("x", None, False),
        ("!x", {}, True),
        ("!x", None, True),
        ("!x", {"x": ""}, False),
        ("x=a,y=b", {"x": "a", "y": "b"}, True),
        ("x=a,y=b", {"x": "a"}, False),
        ("x=a,y=b", {"y": "b"}, False),
        ("x=a,x=b", {"x": "a"}, False),
        ("x=a,x==a", {"x": "a"}, True),
        ("x=a,!y", {"x": "a"}, True),
        ("x=a,!y", {"x": "a", "y": ""}, False),
        ("env in (prod,qa),tier!=db", {"env": "qa", "tier": "web"}, True),
        ("env in (prod,qa),tier!=db", {"env": "qa", "tier": "db"}, False),
        ("env in (prod,qa),tier!=db", {"env": "dev"}, False),
        ("example.com/app=web", {"example.com/app": "web"}, True),
        ("example.com/app=web", {"app": "web"}, False),
    ],
)
def test_matches(text: str, labels: dict[str, str] | None, expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("a>5", "10", True),
        ("a>5", "6", True),
        ("a>5", "5", False),
        ("a>5", "-10", False),
        ("a>5", "+7", True),
        ("a>5", "007", True),
        ("a>5", " 7", False),
        ("a>5", "7.0", False),
        ("a>5", "1_0", False),
        ("a>5", "seven", False),
        ("a>5", "", False),
        ("a>5", "\u0667", False),  # an Arabic-Indic 7: Python's int() takes it, Go's ParseInt does not
        ("a>5", "9223372036854775807", True),
        ("a>5", "9223372036854775808", False),  # overflows int64
        ("a<5", "4", True),
        ("a<5", "5", False),
        ("a<5", "-9223372036854775808", True),
        ("a<5", "-9223372036854775809", False),
        ("a<0", "-1", True),
        ("a>9223372036854775807", "9223372036854775807", False),
        ("a<0", "-0", False),
    ],
)
def test_greater_and_less_than(text: str, value: str, expected: bool) -> None:
    sel = parse_label_selector(text)
    assert sel.matches({"a": value}) is expected
    assert sel.matches({}) is False
    assert sel.matches({"b": value}) is False


def test_matches_any_mapping() -> None:
    labels = MappingProxyType({"a": "1", "b": "2"})
    assert parse_label_selector("a=1,b=2").matches(labels)
    assert parse_label_selector("a=1,b in (2,3),!c").matches(labels)
    assert not parse_label_selector("a=1,b=3").matches(labels)


# --------------------------------------------------------------------------------------------
# The LabelSelector object.
# --------------------------------------------------------------------------------------------


def test_everything_and_nothing() -> None:
    everything = LabelSelector()
    assert everything == LabelSelector.everything()
    assert everything.empty and not everything.is_nothing
    assert everything.matches(None) and everything.matches({"a": "b"})
    assert str(everything) == "" and repr(everything) == "LabelSelector('')"

    nothing = LabelSelector.nothing()
    assert nothing == LabelSelector(nothing=True)
    assert not nothing.empty and nothing.is_nothing
    assert not nothing.matches(None) and not nothing.matches({}) and not nothing.matches({"a": "b"})
    assert str(nothing) == "" and repr(nothing) == "LabelSelector.nothing()"
    assert nothing.requirements == ()
    assert nothing.value_for("a") is None
    assert nothing != everything
    assert hash(nothing) != hash(everything)


def test_non_empty_selector() -> None:
    sel = parse_label_selector("a=b")
    assert not sel.empty and not sel.is_nothing
    assert repr(sel) == "LabelSelector('a=b')"


def test_selector_equality_and_hash() -> None:
    a = parse_label_selector("x=1,y in (b,a)")
    b = parse_label_selector("y in (a,b), x=1")
    assert a == b and hash(a) == hash(b)
    assert a != parse_label_selector("x=1")
    assert a != "x=1,y in (a,b)"
    assert len({a, b}) == 1


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("a=b", "a", "b"),
        ("a==b", "a", "b"),
        ("a in (b)", "a", "b"),
        ("a=", "a", ""),
        ("a in (b,c)", "a", None),
        ("a notin (b)", "a", None),
        ("a!=b", "a", None),
        ("a", "a", None),
        ("!a", "a", None),
        ("a>1", "a", None),
        ("a=b", "c", None),
        ("x=1,a=b", "a", "b"),
        ("a!=x,a=y", "a", None),  # upstream looks only at the first requirement for the key
        ("a=y,a!=x", "a", "y"),
    ],
)
def test_label_value_for(text: str, key: str, value: str | None) -> None:
    assert parse_label_selector(text).value_for(key) == value


def test_add_returns_a_new_sorted_selector() -> None:
    base = parse_label_selector("b=2")
    more = base.add(Requirement("a", EQUALS, ["1"]), Requirement("c", EXISTS))
    assert str(more) == "a=1,b=2,c"
    assert str(base) == "b=2"
    assert more.matches({"a": "1", "b": "2", "c": ""})
    assert LabelSelector.nothing().add(Requirement("a", EXISTS)) is LabelSelector.nothing()
    assert str(LabelSelector().add(Requirement("z", DOES_NOT_EXIST))) == "!z"


def test_selectors_are_immutable() -> None:
    sel = parse_label_selector("a=b")
    with pytest.raises(AttributeError):
        sel._requirements = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del sel._nothing
    req = sel.requirements[0]
    with pytest.raises(AttributeError):
        req.key = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del req.values


def test_selector_constructor_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="expected Requirement, got str"):
        LabelSelector(["a=b"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no requirements"):
        LabelSelector([Requirement("a", EXISTS)], nothing=True)


# --------------------------------------------------------------------------------------------
# Requirement (labels.NewRequirement).
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "op", "values", "text"),
    [
        ("a", EQUALS, ["b"], "a=b"),
        ("a", DOUBLE_EQUALS, ["b"], "a==b"),
        ("a", NOT_EQUALS, ["b"], "a!=b"),
        ("a", IN, ["c", "b"], "a in (b,c)"),
        ("a", NOT_IN, ["b"], "a notin (b)"),
        ("a", EXISTS, None, "a"),
        ("a", EXISTS, [], "a"),
        ("a", DOES_NOT_EXIST, (), "!a"),
        ("a", GREATER_THAN, ["1"], "a>1"),
        ("a", LESS_THAN, ["2"], "a<2"),
    ],
)
def test_requirement_string(key: str, op: str, values: list[str] | None, text: str) -> None:
    req = Requirement(key, op, values)
    assert str(req) == text
    assert req.key == key and req.operator == op
    assert req.values == tuple(values or ())


def test_requirement_keeps_given_values_but_prints_them_sorted() -> None:
    req = Requirement("a", IN, ["c", "a", "a"])
    assert req.values == ("c", "a", "a")
    assert str(req) == "a in (a,a,c)"


def test_requirement_matches_repr_eq_hash() -> None:
    req = Requirement("a", IN, ["x", "y"])
    assert req.matches({"a": "y"}) and not req.matches({"a": "z"}) and not req.matches(None)
    assert Requirement("a", DOES_NOT_EXIST).matches(None)
    assert repr(req) == "Requirement('a', 'in', ['x', 'y'])"
    assert req == Requirement("a", IN, ("x", "y"))
    assert hash(req) == hash(Requirement("a", IN, ("x", "y")))
    assert req != Requirement("a", IN, ["y", "x"])
    assert req != Requirement("a", NOT_IN, ["x", "y"])
    assert req != "a in (x,y)"


@pytest.mark.parametrize(
    ("key", "op", "values", "message"),
    [
        ("", EQUALS, ["x"], f'key: Invalid value: "": name part must be non-empty; name part {QNAME_RULE}'),
        ("a b", EXISTS, None, f'key: Invalid value: "a b": name part {QNAME_RULE}'),
        ("a\tb", EXISTS, None, f'key: Invalid value: "a\\tb": name part {QNAME_RULE}'),
        ('a"b', EXISTS, None, f'key: Invalid value: "a\\"b": name part {QNAME_RULE}'),
        (
            "a",
            IN,
            [],
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            "a",
            NOT_IN,
            None,
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            "a",
            EQUALS,
            ["x", "y"],
            'values: Invalid value: []string{"x", "y"}: exact-match compatibility requires one single value',
        ),
        (
            "a",
            NOT_EQUALS,
            [],
            "values: Invalid value: []string{}: exact-match compatibility requires one single value",
        ),
        (
            "a",
            EXISTS,
            ["x"],
            'values: Invalid value: []string{"x"}: values set must be empty for exists and does not exist',
        ),
        (
            "a",
            DOES_NOT_EXIST,
            [""],
            'values: Invalid value: []string{""}: values set must be empty for exists and does not exist',
        ),
        (
            "a",
            GREATER_THAN,
            None,
            "values: Invalid value: []string(nil): for 'Gt', 'Lt' operators, exactly one value is required",
        ),
        (
            "a",
            LESS_THAN,
            ["1", "2"],
            'values: Invalid value: []string{"1", "2"}: '
            "for 'Gt', 'Lt' operators, exactly one value is required",
        ),
        (
            "a",
            "bogus",
            ["x"],
            'operator: Unsupported value: "bogus": supported values: "in", "notin", "=", "==", "!=", '
            '"gt", "lt", "exists", "!"',
        ),
        (
            "-",
            IN,
            None,
            f'[key: Invalid value: "-": name part {QNAME_RULE}, values: Invalid value: []string(nil): '
            "for 'in', 'notin' operators, values set can't be empty]",
        ),
        (
            "a",
            IN,
            ["-x", "y-"],
            f'[values[0][a]: Invalid value: "-x": {VALUE_RULE}, '
            f'values[1][a]: Invalid value: "y-": {VALUE_RULE}]',
        ),
    ],
)
def test_requirement_errors(key: str, op: str, values: list[str] | None, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        Requirement(key, op, values)
    assert str(info.value) == message


def test_requirement_type_errors() -> None:
    with pytest.raises(SelectorError, match="key: must be a string, not int"):
        Requirement(1, EXISTS)  # type: ignore[arg-type]
    with pytest.raises(SelectorError, match="values: must be a list of strings"):
        Requirement("a", IN, "abc")
    with pytest.raises(SelectorError, match="values: must be a list of strings"):
        Requirement("a", IN, 5)  # type: ignore[arg-type]
    with pytest.raises(SelectorError, match="values: must be a list of strings, found int"):
        Requirement("a", IN, ["a", 1])  # type: ignore[list-item]
    with pytest.raises(SelectorError, match="operator: Unsupported value: None"):
        Requirement("a", None, ["x"])  # type: ignore[arg-type]


def test_go_quoting_and_aggregation_helpers() -> None:
    assert selectors._go_quote('a"b\\c\n\x01\u200b\U000e0001\u00e9') == (
        '"a\\"b\\\\c\\n\\x01\\u200b\\U000e0001\u00e9"'
    )
    assert selectors._aggregate(["x"]) == "x"
    assert selectors._aggregate(["x", "x"]) == "x"
    assert selectors._aggregate(["x", "y", "x"]) == "[x, y]"


# --------------------------------------------------------------------------------------------
# The API object form (metav1.LabelSelector).
# --------------------------------------------------------------------------------------------


def test_none_selects_nothing_and_empty_selects_everything() -> None:
    assert selector_from_label_selector(None) is LabelSelector.nothing()
    for empty in (
        {},
        {"matchLabels": {}},
        {"matchExpressions": []},
        {"matchLabels": None, "matchExpressions": None},
    ):
        sel = selector_from_label_selector(empty)
        assert sel.empty and sel.matches({"a": "b"}) and sel.matches(None)


def test_match_labels_and_expressions() -> None:
    sel = selector_from_label_selector(
        {
            "matchLabels": {"app": "web", "tier": "front"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "qa"]},
                {"key": "track", "operator": "NotIn", "values": ["canary"]},
                {"key": "owner", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []},
            ],
        }
    )
    assert str(sel) == "app=web,env in (prod,qa),!legacy,owner,tier=front,track notin (canary)"
    good = {"app": "web", "tier": "front", "env": "qa", "owner": "me"}
    assert sel.matches(good)
    assert sel.matches({**good, "track": "stable"})
    assert not sel.matches({**good, "track": "canary"})
    assert not sel.matches({**good, "legacy": "1"})
    assert not sel.matches({**good, "env": "dev"})
    assert not sel.matches({k: v for k, v in good.items() if k != "owner"})
    assert not sel.matches({**good, "tier": "back"})
    assert sel.value_for("app") == "web"
    assert sel.value_for("env") is None


def test_match_labels_null_value_reads_as_empty() -> None:
    sel = selector_from_label_selector({"matchLabels": {"a": None}})
    assert str(sel) == "a="
    assert sel.matches({"a": ""})


@pytest.mark.parametrize(
    ("sel", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Foo"}]},
            '"Foo" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "in"}]},
            '"in" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt"}]},
            '"Gt" is not a valid label selector operator',
        ),
        ({"matchExpressions": [{"key": "a"}]}, '"" is not a valid label selector operator'),
        ({"matchExpressions": [{"key": "a", "operator": 3}]}, '"3" is not a valid label selector operator'),
        (
            {"matchExpressions": [{"key": "a", "operator": ["In"]}]},
            "\"['In']\" is not a valid label selector operator",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]},
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: []string{"x"}: values set must be empty for exists and does not exist',
        ),
        (
            {"matchExpressions": [{"operator": "Exists"}]},
            f'key: Invalid value: "": name part must be non-empty; name part {QNAME_RULE}',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "-no"]}]},
            f'values[1][a]: Invalid value: "-no": {VALUE_RULE}',
        ),
        ({"matchLabels": {"a": "-x"}}, f'values[0][a]: Invalid value: "-x": {VALUE_RULE}'),
        ({"matchLabels": {"a b": "x"}}, f'key: Invalid value: "a b": name part {QNAME_RULE}'),
        ({"matchLabels": {"a": 1}}, "values: must be a list of strings, found int"),
        (
            {"matchLabels": {"a": "x"}, "matchExpressions": [{"key": "b", "operator": "Nope"}]},
            '"Nope" is not a valid label selector operator',
        ),
        ([], "label selector must be an object, not list"),
        ("app=web", "label selector must be an object, not str"),
        ({"matchLabels": ["a"]}, "matchLabels: must be an object"),
        ({"matchExpressions": {"key": "a"}}, "matchExpressions: must be a list"),
        ({"matchExpressions": ["a"]}, "matchExpressions: each item must be an object"),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": "ab"}]},
            "values: must be a list of strings",
        ),
    ],
)
def test_label_selector_object_errors(sel: Any, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        selector_from_label_selector(sel)
    assert str(info.value) == message
    assert label_selector_to_string(sel) == "<error>"


@pytest.mark.parametrize(
    ("sel", "text"),
    [
        (None, "<none>"),
        ({}, "<none>"),
        ({"matchLabels": {}}, "<none>"),
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        (
            {
                "matchLabels": {"a": "1"},
                "matchExpressions": [
                    {"key": "gone", "operator": "DoesNotExist"},
                    {"key": "env", "operator": "In", "values": ["qa", "prod"]},
                ],
            },
            "a=1,env in (prod,qa),!gone",
        ),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, "a"),
        ({"matchExpressions": [{"key": "a", "operator": "Nope"}]}, "<error>"),
    ],
)
def test_label_selector_to_string(sel: dict[str, Any] | None, text: str) -> None:
    assert label_selector_to_string(sel) == text
    if not text.startswith("<"):
        # the printed form is what `kubectl -l` sends: it parses back to itself
        assert str(parse_label_selector(text)) == text


def test_selector_from_set() -> None:
    assert selector_from_set(None) is LabelSelector.everything()
    assert selector_from_set({}) is LabelSelector.everything()
    sel = selector_from_set({"b": "2", "a": "1"})
    assert str(sel) == "a=1,b=2"
    assert sel.matches({"a": "1", "b": "2", "c": "3"})
    assert not sel.matches({"a": "1"})
    assert sel.value_for("b") == "2"
    # like labels.SelectorFromSet, it does not validate
    assert selector_from_set({"-bad": "x y"}).matches({"-bad": "x y"})


# --------------------------------------------------------------------------------------------
# Field selectors.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "requirements", "canonical"),
    [
        ("", [], ""),
        (",", [], ""),
        (",,", [], ""),
        ("=", [], ""),
        ("==", [], ""),
        ("!=", [], ""),
        ("spec.nodeName=n1", [("spec.nodeName", "=", "n1")], "spec.nodeName=n1"),
        ("spec.nodeName==n1", [("spec.nodeName", "=", "n1")], "spec.nodeName=n1"),
        ("status.phase!=Failed", [("status.phase", "!=", "Failed")], "status.phase!=Failed"),
        ("b=1,a=2", [("a", "=", "2"), ("b", "=", "1")], "a=2,b=1"),
        ("b=1,,a!=2,", [("a", "!=", "2"), ("b", "=", "1")], "a!=2,b=1"),
        ("a=", [("a", "=", "")], "a="),
        ("a!=", [("a", "!=", "")], "a!="),
        ("=x", [("", "=", "x")], "=x"),
        ("a!b=c", [("a!b", "=", "c")], "a!b=c"),
        (" a = b ", [(" a ", "=", " b ")], " a = b "),
        ("a=x\\,y", [("a", "=", "x,y")], "a=x\\,y"),
        ("a=x\\=y", [("a", "=", "x=y")], "a=x\\=y"),
        ("a=x\\\\y", [("a", "=", "x\\y")], "a=x\\\\y"),
        ("a=x\\,y,b=z", [("a", "=", "x,y"), ("b", "=", "z")], "a=x\\,y,b=z"),
        ("a=\\\\,b=z", [("a", "=", "\\"), ("b", "=", "z")], "a=\\\\,b=z"),
        ("a=1,a=2", [("a", "=", "1"), ("a", "=", "2")], "a=1,a=2"),
        ("a=caf\u00e9", [("a", "=", "caf\u00e9")], "a=caf\u00e9"),
    ],
)
def test_field_selector_parse(text: str, requirements: list[tuple[str, str, str]], canonical: str) -> None:
    sel = parse_field_selector(text)
    assert sel.requirements == requirements
    assert str(sel) == canonical
    assert sel.empty is (not requirements)
    assert parse_field_selector(canonical) == sel


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", "invalid selector: 'abc'; can't understand 'abc'"),
        ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
        ("a=b, ", "invalid selector: 'a=b, '; can't understand ' '"),
        ("a!b", "invalid selector: 'a!b'; can't understand 'a!b'"),
        ("a=x\\y", "invalid field selector: invalid escape sequence: \\y"),
        ("a=x\\", "invalid field selector: invalid escape sequence: \\"),
        ("a=b=c", "invalid field selector: unescaped character in value: 61"),
        ("a===b", "invalid field selector: unescaped character in value: 61"),
        ("a!==b", "invalid field selector: unescaped character in value: 61"),
        ("a=!=b", "invalid field selector: unescaped character in value: 61"),
    ],
)
def test_field_selector_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_field_selector(text)
    assert str(info.value) == message


def test_field_selector_rejects_non_strings() -> None:
    with pytest.raises(SelectorError, match="field selector must be a string, not NoneType"):
        parse_field_selector(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        ("", {}, True),
        ("spec.nodeName=n1", {"spec.nodeName": "n1"}, True),
        ("spec.nodeName=n1", {"spec.nodeName": "n2"}, False),
        ("spec.nodeName=n1", {}, False),
        ("spec.nodeName=", {}, True),
        ("spec.nodeName=", {"spec.nodeName": ""}, True),
        ("spec.nodeName=", {"spec.nodeName": "n1"}, False),
        ("spec.nodeName!=", {"spec.nodeName": "n1"}, True),
        ("spec.nodeName!=", {}, False),
        ("status.phase!=Failed", {}, True),
        ("status.phase!=Failed", {"status.phase": "Running"}, True),
        ("status.phase!=Failed", {"status.phase": "Failed"}, False),
        ("a=1,b!=2", {"a": "1", "b": "3"}, True),
        ("a=1,b!=2", {"a": "1", "b": "2"}, False),
        ("a=1,b!=2", {"a": "2"}, False),
        ("a=1,a=2", {"a": "1"}, False),
        ("a=x\\,y", {"a": "x,y"}, True),
    ],
)
def test_field_selector_matches(text: str, fields: dict[str, str], expected: bool) -> None:
    sel = parse_field_selector(text)
    assert sel.matches(fields) is expected
    assert sel.matches(MappingProxyType(fields)) is expected


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("spec.nodeName=n1", "spec.nodeName", "n1"),
        ("spec.nodeName==n1", "spec.nodeName", "n1"),
        ("spec.nodeName=", "spec.nodeName", ""),
        ("spec.nodeName!=n1", "spec.nodeName", None),
        ("spec.nodeName=n1,status.phase!=Failed", "spec.nodeName", "n1"),
        ("spec.nodeName=n1,status.phase!=Failed", "status.phase", None),
        ("spec.nodeName=n1", "metadata.name", None),
        ("", "spec.nodeName", None),
        ("a!=x,a=y", "a", "y"),
    ],
)
def test_field_value_for(text: str, field: str, value: str | None) -> None:
    assert parse_field_selector(text).value_for(field) == value


def test_field_selector_validate() -> None:
    sel = parse_field_selector("metadata.name=x,spec.nodeName=n1")
    assert sel.validate({"metadata.name", "metadata.namespace", "spec.nodeName"}) is sel
    assert sel.validate(["metadata.name", "spec.nodeName"]) is sel
    assert sel.validate(frozenset({"metadata.name", "spec.nodeName"})) is sel
    with pytest.raises(SelectorError) as info:
        sel.validate({"metadata.name"})
    assert str(info.value) == "field label not supported: spec.nodeName"
    with pytest.raises(SelectorError, match=r"^field label not supported: foo$"):
        parse_field_selector("foo=bar").validate(set())
    assert parse_field_selector("").validate(set()).empty


def test_field_selector_object() -> None:
    sel = parse_field_selector("b=1,a!=2,b=3")
    assert sel.fields == ("a", "b")
    assert sel is parse_field_selector("b=1,a!=2,b=3")  # parsed once
    assert repr(sel) == "FieldSelector('a!=2,b=1,b=3')"
    assert sel == FieldSelector([("a", "!=", "2"), ("b", "==", "1"), ("b", "=", "3")])
    assert hash(sel) == hash(FieldSelector([("a", "!=", "2"), ("b", "=", "1"), ("b", "=", "3")]))
    assert sel != parse_field_selector("a!=2")
    assert sel != "a!=2,b=1,b=3"
    assert FieldSelector.everything() == FieldSelector() == parse_field_selector("")
    assert FieldSelector().empty and FieldSelector().matches({})
    reqs = sel.requirements
    reqs.clear()  # a copy: the selector is unchanged
    assert len(sel.requirements) == 3
    with pytest.raises(AttributeError):
        sel._terms = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del sel._terms


def test_field_selector_constructor_errors() -> None:
    with pytest.raises(SelectorError, match="invalid field selector operator: 'in'"):
        FieldSelector([("a", "in", "x")])
    with pytest.raises(SelectorError, match="need string fields and values"):
        FieldSelector([("a", "=", 1)])  # type: ignore[list-item]
    with pytest.raises(SelectorError, match="need string fields and values"):
        FieldSelector([(None, "=", "x")])  # type: ignore[list-item]


@pytest.mark.parametrize("value", ["", "plain", "a,b", "a=b", "a\\b", "\\", ",=\\,=", "x\\,y", "caf\u00e9"])
def test_escape_round_trip(value: str) -> None:
    escaped = escape_field_value(value)
    assert unescape_field_value(escaped) == value
    sel = parse_field_selector(f"f={escaped}")
    assert sel.requirements == [("f", "=", value)]
    assert sel.matches({"f": value})


def test_escape_and_unescape() -> None:
    assert escape_field_value("a\\b,c=d") == "a\\\\b\\,c\\=d"
    assert unescape_field_value("plain") == "plain"
    with pytest.raises(SelectorError, match="unescaped character in value: 44"):
        unescape_field_value("a,b")
    with pytest.raises(SelectorError, match="invalid escape sequence: \\\\n"):
        unescape_field_value("a\\n")


# --------------------------------------------------------------------------------------------
# Reading fields out of wire-form objects.
# --------------------------------------------------------------------------------------------

POD = {
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default", "generation": 3, "labels": {"a": "b"}},
    "spec": {"nodeName": "n1", "unschedulable": True, "hostNetwork": False, "containers": [{"name": "c"}]},
    "status": {"phase": "Running", "podIP": None, "ratio": 0.5},
    "involvedObject": {"kind": "Pod"},
}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("kind", "Pod"),
        ("metadata.name", "p"),
        ("metadata.namespace", "default"),
        ("spec.nodeName", "n1"),
        ("status.phase", "Running"),
        ("involvedObject.kind", "Pod"),
        ("spec.unschedulable", "true"),
        ("spec.hostNetwork", "false"),
        ("metadata.generation", "3"),
        ("status.ratio", "0.5"),
        ("status.podIP", ""),
        ("status.hostIP", ""),
        ("metadata.labels", ""),
        ("spec.containers", ""),
        ("spec.containers.name", ""),
        ("spec.nodeName.more", ""),
        ("missing.deeper.still", ""),
        ("", ""),
    ],
)
def test_nested_field(path: str, value: str) -> None:
    assert nested_field(POD, path) == value


def test_nested_field_edge_objects() -> None:
    assert nested_field(None, "spec.nodeName") == ""
    assert nested_field({}, "kind") == ""
    assert nested_field(MappingProxyType({"spec": {"nodeName": "n"}}), "spec.nodeName") == "n"


def test_field_selector_over_objects() -> None:
    pods = [
        {"metadata": {"name": f"p{i}"}, "spec": {"nodeName": f"n{i % 3}"} if i % 4 else {}} for i in range(12)
    ]
    sel = parse_field_selector("spec.nodeName=n1").validate({"spec.nodeName", "metadata.name"})
    picked = [p["metadata"]["name"] for p in pods if sel.matches({f: nested_field(p, f) for f in sel.fields})]
    assert picked == ["p1", "p7", "p10"]
    unscheduled = parse_field_selector("spec.nodeName=")
    assert [
        p["metadata"]["name"]
        for p in pods
        if unscheduled.matches({"spec.nodeName": nested_field(p, "spec.nodeName")})
    ] == [
        "p0",
        "p4",
        "p8",
    ]
