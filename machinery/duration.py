"""Go durations as Kubernetes flags and query parameters spell them (Go's time.ParseDuration:
"30s", "1m30s", "250ms", "0"): one parser for every component, as upstream has one in Go's standard
library."""

from __future__ import annotations

import argparse
import re

_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float:
    """Go's time.ParseDuration, in seconds; ValueError with Go's message."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if body == "0":
        return 0.0
    pos, total = 0, 0.0
    for m in _GO_DURATION.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if not body or pos != len(body):
        raise ValueError(f'time: invalid duration "{text}"')
    return -total if text.startswith("-") else total


def duration_flag(text: str) -> float:
    """An argparse type: a Go duration ("40s", "5m0s") or plain seconds, in seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_go_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}") from None
