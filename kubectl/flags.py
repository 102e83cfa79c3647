"""Flag value types shared by mkubectl's commands (upstream kubectl takes Go durations through pflag's
DurationVar, time.ParseDuration)."""

from __future__ import annotations

import argparse


def duration(value: str) -> float:
    """Go durations as kubectl flags take them: `30s`, `2m`, `1h`, `1m30s`, `0` (and plain seconds)."""
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    total, number = 0.0, ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = "ms" if text.startswith("ms", i) else ch
        if unit not in units or not number:
            raise argparse.ArgumentTypeError(f'invalid duration "{value}"')
        total += float(number) * units[unit]
        number = ""
        i += len(unit)
    if number:
        raise argparse.ArgumentTypeError(f'invalid duration "{value}": missing unit')
    return total
