"""Flag value types shared by mkubectl's commands (upstream kubectl takes Go durations through pflag's
DurationVar, time.ParseDuration): one module the commands and the CLI both import, so they never
import each other."""

from __future__ import annotations

from machinery.timeutil import duration_flag as duration  # Go durations (`30s`, `1m30s`) or seconds

__all__ = ["duration"]
