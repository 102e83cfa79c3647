"""The summary of closed-loop create benchmarks that compare apiserver set-ups round by round (encryption at
rest off vs on, PodSecurity off vs enforcing, ...): the medians of each set-up's rounds and each set-up's
ratio to the first one, as one table."""

from __future__ import annotations

import statistics
from typing import Any

# (label, path into a closed_loop() result, format)
FIGURES = (("creates/s, 64 clients", ("rate",), "{:,.0f}"),
           ("apiserver CPU ms per create", ("cpu_ms_per_create",), "{:.3f}"),
           ("create p50 ms, 64 clients", ("latency_ms", "p50"), "{:.1f}"),
           ("create p99 ms, 64 clients", ("latency_ms", "p99"), "{:.1f}"))


def _dig(row: dict[str, Any], key: tuple[str, ...]) -> Any:
    value: Any = row
    for k in key:
        value = value[k]
    return value


def medians_and_rows(results: dict[str, list[dict[str, Any]]],
                     modes: tuple[str, ...]) -> tuple[dict[str, dict[str, float]], list[tuple[str, ...]]]:
    """Per figure, each mode's median over its rounds, and the table's rows: the figure, the medians, then
    each later mode ÷ the first (the baseline)."""
    summary: dict[str, dict[str, float]] = {}
    rows = []
    base_mode = modes[0]
    for label, key, fmt in FIGURES:
        medians = {mode: statistics.median(float(_dig(row, key)) for row in results[mode]) for mode in modes}
        summary[label] = medians
        base = medians[base_mode]
        rows.append((label, *(fmt.format(medians[m]) for m in modes),
                     *(f"{medians[m] / base:.3f}x" if base else "—" for m in modes[1:])))
    return summary, rows


def busy_caution(results: dict[str, list[dict[str, Any]]]) -> str | None:
    """A warning when other processes took CPU during the closed loops (the figures are then unfair)."""
    others = [row["others_cores"] for rounds in results.values() for row in rounds]
    if others and max(others) > 0.3:
        return f"CAUTION: other processes were busy (up to {max(others):.2f} cores) during the closed loops"
    return None
