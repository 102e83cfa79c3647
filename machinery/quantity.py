"""Resource quantities, as k8s.io/apimachinery/pkg/api/resource/quantity.go parses, compares, adds
and prints them: "250m", "64Mi", "1e3", "1.5". One parser for every component: the apiserver
validates and canonicalizes with it, the scheduler sums requests, the kubelet turns limits into
cgroup numbers, kubectl describe totals a node's allocations.

Values are exact (a `Fraction`), rounded up to nano units as upstream's inf.Dec scale-9 limit does;
the format (DecimalSI, BinarySI, DecimalExponent) is the one the text was written in, and
`str()` is upstream's canonical String() ("1024Mi" → "1Gi", "0.5" → "500m")."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "QUANTITY_REGEX_ERROR",
    "QUANTITY_SUFFIX_ERROR",
    "Quantity",
    "parse_quantity",
]

DECIMAL_SI: Final = "DecimalSI"
BINARY_SI: Final = "BinarySI"
DECIMAL_EXPONENT: Final = "DecimalExponent"

# upstream ErrFormatWrong / ErrSuffix
QUANTITY_REGEX_ERROR: Final = ("quantities must match the regular expression "
                               "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
QUANTITY_SUFFIX_ERROR: Final = "unable to parse quantity's suffix"

_DECIMAL_SUFFIXES: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXP: Final = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXP: Final = {1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}
_QUANTITY_RE: Final = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$")
_EXPONENT_RE: Final = re.compile(r"^[eE]([+-]?[0-9]+)$")
_NANO: Final = Fraction(1, 10**9)


@dataclass(frozen=True)
class Quantity:
    """A resource.Quantity: an exact value (rounded up to nano units) and the format it prints in.
    Equality and order compare values only ("1" == "1000m"), as Quantity.Cmp does."""

    value: Fraction
    format: str = DECIMAL_SI  # DecimalSI | BinarySI | DecimalExponent

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
        """Quantity.Add: the sum keeps this quantity's format, unless this one is zero (then the
        other's, so totals started from zero print in the units of what they add up)."""
        return Quantity(self.value + other.value, other.format if self.value == 0 else self.format)

    def is_zero(self) -> bool:
        return self.value == 0

    def is_integer(self) -> bool:
        return self.value.denominator == 1

    def int_value(self) -> int:
        """Quantity.Value(): whole units, rounded up ("1500m" → 2, "64Mi" → 67108864)."""
        return math.ceil(self.value)

    def milli_value(self) -> int:
        """Quantity.MilliValue(): thousandths, rounded up ("250m" → 250, "1.5" → 1500)."""
        return math.ceil(self.value * 1000)

    def __str__(self) -> str:
        """Quantity.String(): the canonical form ("1500m" → "1500m", "0.5" → "500m", "1024Mi" → "1Gi")."""
        value = self.value
        if value == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
            fmt = DECIMAL_SI
        if fmt == BINARY_SI:
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
        if fmt == DECIMAL_SI and exp in _DECIMAL_BY_EXP:
            return f"{mantissa}{_DECIMAL_BY_EXP[exp]}"
        return f"{mantissa}e{exp}" if exp else str(mantissa)


def parse_quantity(text: object) -> Quantity:
    """resource.ParseQuantity (numbers as the JSON decoder hands them over, too); raises
    ValueError with upstream's message when malformed, whatever the value (a list, a dict, true)."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(QUANTITY_REGEX_ERROR)
    return _parse(text)


@functools.lru_cache(maxsize=4096, typed=True)  # typed: 1.0 must not answer for 1
def _parse(text: str | int | float) -> Quantity:
    """Cached: manifests repeat the same few quantities, and exact Fraction arithmetic is slow."""
    if isinstance(text, int):
        return Quantity(Fraction(text))
    if isinstance(text, float):
        if not math.isfinite(text):
            raise ValueError(QUANTITY_REGEX_ERROR)
        text = repr(text)
    m = _QUANTITY_RE.match(text)
    if not text or m is None:
        raise ValueError(QUANTITY_REGEX_ERROR)
    sign, whole, frac, suffix = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    if not whole and not frac:
        raise ValueError(QUANTITY_REGEX_ERROR)
    number = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    if suffix in _DECIMAL_SUFFIXES:
        fmt, number = DECIMAL_SI, number * Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        fmt, number = BINARY_SI, number * 2 ** _BINARY_SUFFIXES[suffix]
    elif (e := _EXPONENT_RE.match(suffix)) is not None:
        fmt, number = DECIMAL_EXPONENT, number * Fraction(10) ** int(e.group(1))
    else:
        raise ValueError(QUANTITY_SUFFIX_ERROR)
    if fmt == BINARY_SI and 0 < number < 1:
        fmt = DECIMAL_SI
    if (number / _NANO).denominator != 1:
        number = math.ceil(number / _NANO) * _NANO  # rounded up (away from zero) to nano units
    return Quantity(-number if sign == "-" else number, fmt)
