"""The pure helpers of the apiserver benchmark: percentiles, rates, ratios, verdicts and the table."""

from __future__ import annotations

import math

import pytest

from bench.apiserver_bench import (
    Figure,
    _package_of,
    format_ratio,
    format_target,
    format_value,
    percentile,
    rate,
    ratio,
    render_table,
    shorten_path,
    summarize,
    summarize_profile,
    verdict,
)


def test_percentile_interpolates_between_closest_ranks() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 25) == pytest.approx(1.75)
    assert percentile(list(range(1, 101)), 99) == pytest.approx(99.01)


def test_percentile_ignores_input_order_and_leaves_input_alone() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 50) == 3.0
    assert values == [5.0, 1.0, 4.0, 2.0, 3.0]


def test_percentile_of_one_value_is_that_value() -> None:
    assert percentile([7.5], 0) == percentile([7.5], 99) == 7.5


@pytest.mark.parametrize("p", [-1, 100.5, math.nan])
def test_percentile_refuses_out_of_range(p: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0], p)


def test_percentile_refuses_no_values() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)


def test_summarize_scales_and_orders() -> None:
    s = summarize([0.003, 0.001, 0.002], scale=1000)
    assert s["n"] == 3
    assert s["min"] == pytest.approx(1.0)
    assert s["p50"] == pytest.approx(2.0)
    assert s["max"] == pytest.approx(3.0)
    assert s["mean"] == pytest.approx(2.0)
    assert s["p99"] == pytest.approx(2.98)


def test_summarize_of_nothing_says_so() -> None:
    assert summarize([]) == {"n": 0}


def test_rate() -> None:
    assert rate(1000, 2.0) == 500.0
    assert rate(0, 1.0) == 0.0
    for seconds in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError):
            rate(10, seconds)


def test_ratio_and_missing_baselines() -> None:
    assert ratio(250.0, 1000.0) == 0.25
    assert ratio(None, 1000.0) is None
    assert ratio(1.0, None) is None
    assert ratio(1.0, 0.0) is None
    assert ratio(math.nan, 1.0) is None


def test_format_ratio() -> None:
    assert format_ratio(0.3721) == "37.2%"
    assert format_ratio(1.0) == "100.0%"
    assert format_ratio(None) == "—"
    assert format_ratio(4.6444, as_percent=False) == "4.64x"
    assert format_ratio(12.34, as_percent=False) == "12.3x"


def test_format_value_per_unit() -> None:
    assert format_value(1234.56, "/s") == "1,235/s"
    assert format_value(4.921, "ms") == "4.92 ms"
    assert format_value(44.84, "ms") == "44.8 ms"
    assert format_value(90.94, "MB") == "90.9 MB"
    assert format_value(0.2, "ratio") == "20.0%"
    assert format_value(None, "ms") == "error"
    assert format_value(math.nan, "/s") == "error"


def test_verdict_in_both_directions() -> None:
    assert verdict(1200, 1000, higher_is_better=True) == "met"
    assert verdict(1000, 1000, higher_is_better=True) == "met"
    assert verdict(999, 1000, higher_is_better=True) == "NOT MET"
    assert verdict(49.9, 50, higher_is_better=False) == "met"
    assert verdict(50.1, 50, higher_is_better=False) == "NOT MET"
    assert verdict(10, None, higher_is_better=True) == "—"
    assert verdict(None, 50, higher_is_better=False) == "error"
    assert verdict(math.nan, 50, higher_is_better=False) == "error"


def test_format_target() -> None:
    assert format_target(1000, "/s", True) == "≥ 1,000/s"
    assert format_target(50, "ms", False) == "≤ 50.0 ms"
    assert format_target(None, "ms", False) == "—"


def test_figure_row_and_json_carry_verdict_and_ratio() -> None:
    f = Figure("creates", 1218.0, "/s", target=1000, baseline=5226.0)
    assert f.row() == ["creates", "1,218/s", "≥ 1,000/s", "met", "23.3%", ""]
    data = f.as_json()
    assert data["verdict"] == "met"
    assert data["vs_raw_etcd"] == pytest.approx(1218 / 5226)
    slow = Figure("list", 3.27, "ms", baseline=1.78, baseline_as_percent=False)
    assert slow.row()[4] == "1.84x"


def test_render_table_aligns_columns() -> None:
    out = render_table(["a", "bb"], [["xxx", "y"], ["z", "wwww"]]).splitlines()
    assert out[0] == "a    bb"
    assert out[1] == "---  ----"
    assert out[2] == "xxx  y"
    assert out[3] == "z    wwww"


def test_summarize_profile_counts_self_packages_and_project_inclusive() -> None:
    root = "/repo"
    lib = "/venv/lib/python3.11/site-packages"
    std = "/usr/lib/python3.11"
    folded = "\n".join([
        f"process 1:\"python\";thread (0x1);run ({std}/asyncio/runners.py);"
        f"create ({root}/apiserver/registry/generic.py);dumps ({lib}/orjson/__init__.py) 30",
        f"run ({std}/asyncio/runners.py);create ({root}/apiserver/registry/generic.py) 10",
        f"run ({std}/asyncio/runners.py);validate ({lib}/pydantic/main.py) 60",
        "garbage line",
    ])
    p = summarize_profile(folded, root=root)
    assert p["samples"] == 100
    assert dict(p["self"]) == {"validate (pydantic/main.py)": 0.6, "dumps (orjson/__init__.py)": 0.3,
                               "create (apiserver/registry/generic.py)": 0.1}
    assert dict(p["inclusive_project"]) == {"create (apiserver/registry/generic.py)": 0.4}
    assert dict(p["self_by_package"]) == {"pydantic": 0.6, "orjson": 0.3, "apiserver/registry/generic.py": 0.1}
    assert "run (asyncio/runners.py)" not in dict(p["inclusive_branches"])  # the trunk: in every sample
    assert dict(p["inclusive_branches"])["validate (pydantic/main.py)"] == 0.6


def test_summarize_profile_of_nothing() -> None:
    assert summarize_profile("")["samples"] == 0


def test_shorten_path() -> None:
    assert shorten_path("/repo/apiserver/request.py", "/repo") == "apiserver/request.py"
    assert shorten_path("/v/lib/python3.11/site-packages/fastapi/routing.py", "/repo") == "fastapi/routing.py"
    assert shorten_path("/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", "/repo") == "threading.py"
    assert shorten_path("<frozen runpy>", "/repo") == "<frozen runpy>"
    assert shorten_path("/repo/.venv/lib/python3.11/site-packages/grpc/aio/_call.py", "/repo") == "grpc/aio/_call.py"


def test_package_of_frame() -> None:
    assert _package_of("create (apiserver/registry/generic.py)") == "apiserver/registry/generic.py"
    assert _package_of("loads (json/decoder.py)") == "json"
    assert _package_of("run (threading.py)") == "threading"
