"""Field errors as upstream's apimachinery/pkg/util/validation/field reports them, and the common
checks (DNS-1123 names, label keys and values, quantities) every strategy uses."""

from __future__ import annotations

import functools
import ipaddress
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

# upstream field.ErrorType → (StatusCause.reason, the words in the message)
_ERROR_TYPES = {
    "FieldValueRequired": "Required value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueTooLong": "Too long",
    "FieldValueTypeInvalid": "Invalid value",
}


@dataclass
class FieldError:
    reason: str  # one of _ERROR_TYPES
    field: str  # "spec.template.spec.containers[0].name"
    detail: str = ""
    value: Any = None
    has_value: bool = False

    def message(self) -> str:
        """`Invalid value: -1: must be greater than or equal to 0`, as upstream prints it."""
        words = _ERROR_TYPES.get(self.reason, "Invalid value")
        parts = [words]
        if self.has_value:
            parts.append(_show(self.value))
        if self.detail:
            parts.append(self.detail)
        return ": ".join(parts)

    def full(self) -> str:
        return f"{self.field}: {self.message()}"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return go_value(value)
    return str(value)


def required(field: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", field, detail)


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", field, detail, value, True)


def not_supported(field: str, value: Any, supported: list[str]) -> FieldError:
    detail = "supported values: " + ", ".join(f'"{s}"' for s in supported)
    return FieldError("FieldValueNotSupported", field, detail, value, True)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", field, detail)


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError("FieldValueDuplicate", field, "", value, True)


def not_found(field: str, value: Any) -> FieldError:
    return FieldError("FieldValueNotFound", field, "", value, True)


def too_long(field: str, max_length: int) -> FieldError:
    """upstream field.TooLong: the value itself is never echoed back."""
    unit = "byte" if max_length == 1 else "bytes"
    return FieldError("FieldValueTooLong", field, f"may not be more than {max_length} {unit}")


def internal_error(field: str, detail: str) -> FieldError:
    return FieldError("InternalError", field, detail)


_ERROR_TYPES.update({
    "FieldValueNotFound": "Not found",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
})


# ---------------------------------------------------------------------------------------------
# Go-style rendering of composite values (field.Error prints them with %#v).
# ---------------------------------------------------------------------------------------------


def _go_quote(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


class StringMap(dict[str, str]):
    """A map[string]string (labels, selectors): shown as Go shows one, map[string]string{"a":"b"}.
    Plain dicts are objects (structs upstream) and are shown as JSON."""


def go_value(value: Any) -> str:
    """How upstream shows a composite value in `Invalid value: ...`: string maps and slices as Go
    prints them, objects as compact JSON."""
    if isinstance(value, StringMap):
        inner = ", ".join(f"{_go_quote(k)}:{_go_quote(v)}" for k, v in sorted(value.items()))
        return "map[string]string{" + inner + "}"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(_go_quote(v) for v in value) + "}"
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)



# ---------------------------------------------------------------------------------------------
# Names, labels, annotations (k8s.io/apimachinery/pkg/util/validation), messages verbatim.
# ---------------------------------------------------------------------------------------------

NameValidator = Callable[[str, bool], list[str]]

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
LABEL_VALUE_MAX_LENGTH = 63
QUALIFIED_NAME_MAX_LENGTH = 63
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * (1 << 10)  # 256 KiB

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_ERR = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                      "and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_ERR = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                          "characters, '-' or '.', and must start and end with an alphanumeric character")
_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_ERR = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
              "alphanumeric character")
_LABEL_VALUE_FMT = "(" + _QNAME_FMT + ")?"
_LABEL_VALUE_ERR = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
                    "or '.', and must start and end with an alphanumeric character")
_PERCENT_FMT = "[0-9]+%"
_PERCENT_ERR = "a valid percent string must be a numeric string followed by an ending '%'"
_HTTP_HEADER_NAME_FMT = "[-A-Za-z0-9]+"
_HTTP_HEADER_NAME_ERR = "a valid HTTP header must consist of alphanumeric characters or '-'"

_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_QNAME_RE = re.compile(f"^{_QNAME_FMT}$")
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_PERCENT_RE = re.compile(f"^{_PERCENT_FMT}$")
_HTTP_HEADER_NAME_RE = re.compile(f"^{_HTTP_HEADER_NAME_FMT}$")
_PORT_NAME_CHARSET_RE = re.compile("^[-a-z0-9]+$")
_PORT_NAME_ONE_LETTER_RE = re.compile("[a-z]")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError, including its double space before `or`."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    out = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            out += " or "
        out += f"'{example}', "
    return out + f"regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def inclusive_range_error(lo: int, hi: int) -> str:
    return f"must be between {lo} and {hi}, inclusive"


def _blen(s: str) -> int:
    """Go's len(): bytes, not code points."""
    return len(s.encode())


def is_dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if _blen(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL_RE.match(value):
        if _DNS1123_SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_ERR, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if _blen(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """A label key: optional DNS-subdomain prefix and '/', then a name of at most 63 characters."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return ["a valid label key " + regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif _blen(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX_LENGTH))
    if not _QNAME_RE.match(name):
        errs.append("name part " + regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs: list[str] = []
    if _blen(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(LABEL_VALUE_MAX_LENGTH))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_http_header_name(value: str) -> list[str]:
    if not _HTTP_HEADER_NAME_RE.match(value):
        return [regex_error(_HTTP_HEADER_NAME_ERR, _HTTP_HEADER_NAME_FMT, "X-Header-Name")]
    return []


def _mask_trailing_dash(name: str) -> str:
    """A generateName prefix may end in '-': the random suffix follows it."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-1] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    """apimachinery NameIsDNSSubdomain: most kinds (pods, nodes, deployments, ...)."""
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    """apimachinery NameIsDNSLabel: namespaces (their names end up in DNS as one label)."""
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def validate_dns1123_label(value: str, field: str) -> list[FieldError]:
    return [invalid(field, value, m) for m in is_dns1123_label(value)]


def validate_dns1123_subdomain(value: str, field: str) -> list[FieldError]:
    return [invalid(field, value, m) for m in is_dns1123_subdomain(value)]


def validate_qualified_name(value: str, field: str) -> list[FieldError]:
    return [invalid(field, value, m) for m in is_qualified_name(value)]


def validate_labels(labels: dict[str, str] | None, field: str) -> list[FieldError]:
    """ValidateLabels: every key a qualified name, every value a label value (errors name the map)."""
    errs: list[FieldError] = []
    for key, value in (labels or {}).items():
        errs += validate_qualified_name(key, field)
        errs += [invalid(field, value, m) for m in is_valid_label_value(value)]
    return errs


def validate_annotations(annotations: dict[str, str] | None, field: str) -> list[FieldError]:
    """Keys are qualified names (case-insensitively); keys and values together at most 256 KiB."""
    errs: list[FieldError] = []
    total = 0
    for key, value in (annotations or {}).items():
        errs += [invalid(field, key, m) for m in is_qualified_name(key.lower())]
        total += _blen(key) + _blen(value)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def validate_nonnegative(value: int | None, field: str) -> list[FieldError]:
    if value is not None and value < 0:
        return [invalid(field, value, "must be greater than or equal to 0")]
    return []


def validate_replicas(value: int | None, field: str) -> list[FieldError]:
    """An int32 count: not negative, and within int32 (upstream's decoder refuses more)."""
    if value is not None and value > INT32_MAX:
        return [invalid(field, value, f"must be less than or equal to {INT32_MAX}")]
    return validate_nonnegative(value, field)


def validate_immutable(new: Any, old: Any, field: str) -> list[FieldError]:
    """ValidateImmutableField: semantic equality, so a missing list or map equals an empty one."""
    if not semantic_equal(new, old):
        return [invalid(field, new, "field is immutable")]
    return []


def _prune(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def semantic_equal(a: Any, b: Any) -> bool:
    """apiequality.Semantic.DeepEqual on wire dicts: null, {} and [] are all 'unset'."""
    a, b = _prune(a), _prune(b)
    return ((a in (None, {}, [])) and (b in (None, {}, []))) or a == b


# ---------------------------------------------------------------------------------------------
# Ports, percents, IPs.
# ---------------------------------------------------------------------------------------------


def is_valid_port_num(port: int) -> list[str]:
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def is_valid_port_name(port: str) -> list[str]:
    """An IANA_SVC_NAME: at most 15 of [-a-z0-9], at least one letter, no '--', no edge '-'."""
    errs: list[str] = []
    if _blen(port) > 15:
        errs.append(max_len_error(15))
    if not _PORT_NAME_CHARSET_RE.match(port):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_ONE_LETTER_RE.search(port):
        errs.append("must contain at least one letter (a-z)")
    if "--" in port:
        errs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def validate_port_num_or_name(port: int | str | None, field: str) -> list[FieldError]:
    """An IntOrString port (probes, services): a number 1-65535 or a named port."""
    if isinstance(port, bool) or port is None:
        return [invalid(field, port, "must be an integer or a port name")]
    if isinstance(port, int):
        return [invalid(field, port, m) for m in is_valid_port_num(port)]
    return [invalid(field, port, m) for m in is_valid_port_name(port)]


def is_valid_percent(value: str) -> list[str]:
    if not _PERCENT_RE.match(value):
        return [regex_error(_PERCENT_ERR, _PERCENT_FMT, "1%", "93%")]
    return []


def int_or_percent_value(value: int | str | None) -> int:
    """getIntOrPercentValue: the number in "25%" or 25; anything unparsable counts as 0."""
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int):
        return value
    if not is_valid_percent(value):
        return int(value[:-1])
    try:
        return int(value)
    except ValueError:
        return 0


def validate_nonnegative_int_or_percent(value: int | str | None, field: str) -> list[FieldError]:
    """ValidatePositiveIntOrPercent (which, despite its name, allows 0)."""
    if isinstance(value, str):
        return [invalid(field, value, m) for m in is_valid_percent(value)]
    if isinstance(value, int) and not isinstance(value, bool):
        return validate_nonnegative(value, field)
    return [invalid(field, value, "must be an integer or percentage (e.g '5%')")]


def validate_not_more_than_100_percent(value: int | str | None, field: str) -> list[FieldError]:
    if isinstance(value, str) and not is_valid_percent(value) and int(value[:-1]) > 100:
        return [invalid(field, value, "must not be greater than 100%")]
    return []


def is_valid_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def validate_ip(value: str, field: str) -> list[FieldError]:
    if not is_valid_ip(value):
        return [invalid(field, value, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]
    return []


def validate_cidr(value: str, field: str) -> list[FieldError]:
    """A CIDR as net.ParseCIDR reads it: host bits may be set ("10.0.0.1/24" is fine)."""
    try:
        ipaddress.ip_network(value, strict=False)
        ok = "/" in value
    except ValueError:
        ok = False
    if not ok:
        return [invalid(field, value, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")]
    return []


# ---------------------------------------------------------------------------------------------
# Label selectors (metav1 validation.ValidateLabelSelector).
# ---------------------------------------------------------------------------------------------


def validate_label_selector(selector: dict[str, Any] | None, field: str) -> list[FieldError]:
    """Keys and values valid; In/NotIn need values, Exists/DoesNotExist must have none."""
    if selector is None:
        return []
    errs = validate_labels(selector.get("matchLabels"), f"{field}.matchLabels")
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        path = f"{field}.matchExpressions[{i}]"
        op = expr.get("operator")
        values = expr.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{path}.values",
                                     "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden(f"{path}.values",
                                      "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errs.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
        errs += validate_qualified_name(expr.get("key") or "", f"{path}.key")
        for j, value in enumerate(values):
            errs += [invalid(f"{path}.values[{j}]", value, m) for m in is_valid_label_value(value)]
    return errs


# ---------------------------------------------------------------------------------------------
# Quantities (k8s.io/apimachinery/pkg/api/resource): parse, compare, print canonically.
# ---------------------------------------------------------------------------------------------

QUANTITY_REGEX_ERROR = ("quantities must match the regular expression "
                        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXP = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXP = {1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}
_QUANTITY_RE = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$")
_EXPONENT_RE = re.compile(r"^[eE]([+-]?[0-9]+)$")
_NANO = Fraction(1, 10**9)


@dataclass(frozen=True, order=False)
class Quantity:
    """A resource.Quantity: an exact value (rounded up to nano units) and the format it prints in."""

    value: Fraction
    format: str = "DecimalSI"  # DecimalSI | BinarySI | DecimalExponent

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= other.value

    def __gt__(self, other: Quantity) -> bool:
        return self.value > other.value

    def __ge__(self, other: Quantity) -> bool:
        return self.value >= other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.format)

    def is_integer(self) -> bool:
        return self.value.denominator == 1

    def milli_value(self) -> int:
        """Value in thousandths, rounded up (Quantity.MilliValue)."""
        return math.ceil(self.value * 1000)

    def __str__(self) -> str:
        """Quantity.String(): the canonical form ("1500m" → "1500m", "0.5" → "500m", "1024Mi" → "1Gi")."""
        value = self.value
        if value == 0:
            return "0"
        fmt = self.format
        if fmt == "BinarySI" and (-1024 < value < 1024 or value.denominator != 1):
            fmt = "DecimalSI"
        if fmt == "BinarySI":
            mantissa, exp = int(value), 0
            while mantissa % 1024 == 0 and exp < 6:
                mantissa //= 1024
                exp += 1
            return f"{mantissa}{_BINARY_BY_EXP.get(exp, '')}"
        mantissa, exp = int(value / _NANO), -9  # exact: values are kept in nano units
        while mantissa % 10 == 0:
            mantissa //= 10
            exp += 1
        if exp % 3 == 1:
            mantissa, exp = mantissa * 10, exp - 1
        elif exp % 3 == 2:
            mantissa, exp = mantissa * 100, exp - 2
        if fmt == "DecimalSI" and exp in _DECIMAL_BY_EXP:
            return f"{mantissa}{_DECIMAL_BY_EXP[exp]}"
        return f"{mantissa}e{exp}" if exp else str(mantissa)


@functools.lru_cache(maxsize=4096, typed=True)  # typed: True must not answer for 1
def parse_quantity(text: str | int | float) -> Quantity:
    """resource.ParseQuantity; raises ValueError with upstream's message when malformed. Cached:
    manifests repeat the same few quantities, and exact Fraction arithmetic is slow."""
    if isinstance(text, bool):
        raise ValueError(QUANTITY_REGEX_ERROR)
    if isinstance(text, int):
        return Quantity(Fraction(text))
    if isinstance(text, float):
        text = repr(text)
    m = _QUANTITY_RE.match(text)
    if not text or m is None:
        raise ValueError(QUANTITY_REGEX_ERROR)
    sign, whole, frac, suffix = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    if not whole and not frac:
        raise ValueError(QUANTITY_REGEX_ERROR)
    number = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    if suffix in _DECIMAL_SUFFIXES:
        fmt, number = "DecimalSI", number * Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        fmt, number = "BinarySI", number * 2 ** _BINARY_SUFFIXES[suffix]
    elif (e := _EXPONENT_RE.match(suffix)) is not None:
        fmt, number = "DecimalExponent", number * Fraction(10) ** int(e.group(1))
    else:
        raise ValueError("unable to parse quantity's suffix")
    if fmt == "BinarySI" and 0 < number < 1:
        fmt = "DecimalSI"
    if (number / _NANO).denominator != 1:
        number = math.ceil(number / _NANO) * _NANO  # rounded up (away from zero) to nano units
    return Quantity(-number if sign == "-" else number, fmt)


def validate_quantity(value: Any, field: str) -> tuple[Quantity | None, list[FieldError]]:
    """Parse a wire quantity (string or number); a malformed one is an Invalid error at `field`."""
    try:
        return parse_quantity(value), []
    except (ValueError, TypeError) as exc:
        return None, [invalid(field, value, str(exc))]


# ---------------------------------------------------------------------------------------------
# Limits on decoded request bodies (what Go's decoder refuses before any strategy sees the object).
# ---------------------------------------------------------------------------------------------

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
MAX_BODY_DEPTH = 100  # no Kubernetes object nests deeper; orjson refuses more than 254 levels
MAX_BODY_NODES = 1_000_000  # YAML aliases can make a small body expand without end ("billion laughs")


def check_body_values(value: Any) -> None:
    """Refuse what no API object may hold: integers beyond int64, NaN and infinities, nesting deeper
    than MAX_BODY_DEPTH, and YAML alias expansions beyond MAX_BODY_NODES. Raises ValueError naming
    the field. Shared subtrees (YAML aliases) are measured once, so the check itself stays linear."""
    memo: dict[int, tuple[int, int]] = {}
    _measure(value, "", 0, memo, [0])


def _measure(value: Any, path: str, depth: int, memo: dict[int, tuple[int, int]], total: list[int]) -> int:
    """The height of value (0 for a scalar); total[0] counts nodes as if aliases were expanded."""
    if isinstance(value, dict | list):
        seen = memo.get(id(value))
        if seen is not None:
            size, height = seen
        else:
            if depth >= MAX_BODY_DEPTH:
                raise ValueError(f"{path or '<root>'}: nesting depth exceeds {MAX_BODY_DEPTH}")
            before, height = total[0], 0
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, child in items:
                child_path = (f"{path}.{key}" if path else str(key)) if isinstance(value, dict) else f"{path}[{key}]"
                height = max(height, 1 + _measure(child, child_path, depth + 1, memo, total))
            size = total[0] - before
            memo[id(value)] = (size, height)
            total[0] -= size  # counted below, the same way for a first visit and a repeat
        total[0] += size + 1
        if depth + height > MAX_BODY_DEPTH:
            raise ValueError(f"{path or '<root>'}: nesting depth exceeds {MAX_BODY_DEPTH}")
        if total[0] > MAX_BODY_NODES:
            raise ValueError("document contains excessive aliasing")
        return height
    total[0] += 1
    if isinstance(value, bool):
        return 0
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{path}: the number {value} does not fit in a 64-bit integer")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{path}: {value} is not a valid JSON number")
    return 0
