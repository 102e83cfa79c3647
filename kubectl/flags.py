"""Flag value types shared by mkubectl's commands (upstream kubectl takes Go durations through pflag's
DurationVar, time.ParseDuration): one module the commands and the CLI both import, so they never
import each other. Numbers given inside a flag's text are parsed as Go's strconv does, and fail with
its words, since kubectl prints those errors as they are."""

from __future__ import annotations

import re

from kubectl.errors import CommandError
from machinery.timeutil import duration_flag as duration  # Go durations (`30s`, `1m30s`) or seconds

__all__ = ["DRY_RUN_VALUES", "atoi", "dry_run", "duration", "parse_port"]

DRY_RUN_VALUES = ("none", "client", "server")
_DIGITS = re.compile(r"[+-]?[0-9]+")


def dry_run(value: str) -> str:
    """cmdutil.GetDryRunStrategy: none, client or server (true/false as kubectl's deprecated forms); checked
    when the command runs, so the error reads as kubectl's (`error: Invalid dry-run value (x). ...`)."""
    legacy = {"true": "client", "false": "none"}
    value = legacy.get(value, value)
    if value not in DRY_RUN_VALUES:
        raise CommandError(f'Invalid dry-run value ({value}). Must be "none", "server", or "client".')
    return value


def atoi(text: str) -> int:
    """strconv.Atoi, with its error text."""
    if _DIGITS.fullmatch(text) is None:
        raise ValueError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    value = int(text)
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f'strconv.Atoi: parsing "{text}": value out of range')
    return value


def parse_port(text: str) -> int:
    """k8s.io/utils/net.ParsePort(text, allowZero=true): strconv.ParseUint(text, 10, 16)."""
    if re.fullmatch(r"[0-9]+", text) is None:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    value = int(text)
    if value > 0xFFFF:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value
