"""machinery/quantity.py: resource.Quantity's parsing, canonical form, arithmetic and errors (the
canonical-form cases moved here from the apiserver's tests with the code)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from machinery.quantity import QUANTITY_REGEX_ERROR, QUANTITY_SUFFIX_ERROR, Quantity, parse_quantity


class TestQuantities:
    @pytest.mark.parametrize(("text", "canonical"), [
        ("500m", "500m"), ("0.5", "500m"), ("1.5", "1500m"), ("1500", "1500"), ("2000", "2k"),
        ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1536Mi", "1536Mi"), ("1.5Gi", "1536Mi"), ("512", "512"),
        ("1e3", "1e3"), ("12e-3", "12e-3"), ("0", "0"), ("-1", "-1"), ("0.0000000001", "1n"), ("100M", "100M"),
        ("0.5Ki", "512"),
    ])
    def test_canonical_form(self, text: str, canonical: str) -> None:
        assert str(parse_quantity(text)) == canonical

    def test_values_and_comparison(self) -> None:
        assert parse_quantity("1Ki").value == 1024
        assert parse_quantity("250m").value == Fraction(1, 4)
        assert parse_quantity("1") == parse_quantity("1000m")
        assert parse_quantity("1Gi") > parse_quantity("1G")
        assert parse_quantity("1.5").milli_value() == 1500
        assert parse_quantity(2) == Quantity(Fraction(2))

    @pytest.mark.parametrize("text", ["", "abc", ".", "1.2.3", "1x", "1Kb"])
    def test_malformed(self, text: str) -> None:
        with pytest.raises(ValueError):
            parse_quantity(text)

    @pytest.mark.parametrize(("text", "value"), [
        ("64Mi", 64 * 2**20), ("1Gi", 2**30), ("250m", Fraction(1, 4)), ("2", 2), ("1.5", Fraction(3, 2)),
        ("1k", 1000), ("1e3", 1000), ("100M", 10**8), (3, 3), (0.25, Fraction(1, 4)),
    ])
    def test_values(self, text: str | int | float, value: Fraction) -> None:
        """The kubelet's cases (memory and CPU limits), moved here with its parser."""
        assert parse_quantity(text).value == value

    def test_upstream_error_messages(self) -> None:
        with pytest.raises(ValueError, match=r"^quantities must match the regular expression"):
            parse_quantity("abc")
        with pytest.raises(ValueError) as info:
            parse_quantity("1Kb")
        assert str(info.value) == QUANTITY_SUFFIX_ERROR
        for bad in (True, float("inf"), float("nan"), None, {"a": 1}, ["1"]):
            with pytest.raises(ValueError) as info:
                parse_quantity(bad)
            assert str(info.value) == QUANTITY_REGEX_ERROR

    def test_value_and_milli_value_round_up(self) -> None:
        assert parse_quantity("1500m").int_value() == 2
        assert parse_quantity("64Mi").int_value() == 64 * 2**20
        assert parse_quantity("1n").milli_value() == 1
        assert parse_quantity("250m").milli_value() == 250
        assert parse_quantity(0.5).milli_value() == 500

    def test_rounded_up_to_nano_units(self) -> None:
        assert parse_quantity("0.0000000001").value == Fraction(1, 10**9)
        assert parse_quantity("-0.0000000001").value == Fraction(-1, 10**9)

    def test_a_sum_keeps_the_first_format_and_zero_takes_the_other(self) -> None:
        zero = Quantity(Fraction(0))
        assert str(zero + parse_quantity("64Mi") + parse_quantity("64Mi")) == "128Mi"
        assert str(parse_quantity("100M") + parse_quantity("100M")) == "200M"
        assert str(parse_quantity("500m") + parse_quantity("500m")) == "1"
        assert str(parse_quantity("64Mi") + parse_quantity("100M")) == "167108864"
