"""Field errors as upstream's apimachinery/pkg/util/validation/field reports them, and the common
checks every strategy uses, as field errors: names, labels and annotations (the rules themselves are
machinery/validation.py, apimachinery util/validation), ports, percents, IPs, label selectors,
quantities (parsed by machinery/quantity.py), and the limits on decoded bodies."""

from __future__ import annotations

import ipaddress
import json
import math
from dataclasses import dataclass
from typing import Any

from machinery.quantity import Quantity, parse_quantity
from machinery.validation import (
    byte_len,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_valid_ip,
    is_valid_label_value,
    is_valid_percent,
    is_valid_port_name,
    is_valid_port_num,
)

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
# Names, labels, annotations (the checks: machinery/validation.py), as field errors.
# ---------------------------------------------------------------------------------------------

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * (1 << 10)  # 256 KiB


def validate_dns1123_label(value: str, field: str) -> list[FieldError]:
    return [invalid(field, value, m) for m in is_dns1123_label(value)]


def validate_dns1123_subdomain(value: str, field: str) -> list[FieldError]:
    return [invalid(field, value, m) for m in is_dns1123_subdomain(value)]


def validate_qualified_name(value: str, field: str) -> list[FieldError]:
    return [invalid(field, value, m) for m in is_label_key(value)]


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
        errs += [invalid(field, key, m) for m in is_label_key(key.lower())]
        total += byte_len(key) + byte_len(value)
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


def validate_port_num_or_name(port: int | str | None, field: str) -> list[FieldError]:
    """An IntOrString port (probes, services): a number 1-65535 or a named port."""
    if isinstance(port, bool) or port is None:
        return [invalid(field, port, "must be an integer or a port name")]
    if isinstance(port, int):
        return [invalid(field, port, m) for m in is_valid_port_num(port)]
    return [invalid(field, port, m) for m in is_valid_port_name(port)]


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
# Quantities (machinery/quantity.py), as field errors.
# ---------------------------------------------------------------------------------------------

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
