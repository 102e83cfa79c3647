"""Time on the wire and for people, one module for every component:

- metav1.Time and metav1.MicroTime (k8s.io/apimachinery/pkg/apis/meta/v1/time.go, micro_time.go):
  RFC 3339 in UTC, whole seconds ("2026-11-21T10:00:00Z") or microseconds
  ("2026-11-21T10:00:00.123456Z"); parsing takes any fraction (Go writes up to nanoseconds) and
  any offset, and reads Go's zero time as unset;
- Go's time.RFC3339Nano as the CRI writes it (log lines' "2016-10-06T00:17:09.669794202Z", Docker's
  container times) read exactly, to Unix nanoseconds (CRI's timestamps);
- duration.HumanDuration (k8s.io/apimachinery/pkg/util/duration): the AGE column's "5s", "3m20s",
  "2d3h", and translateTimestampSince's "<unknown>";
- Go durations as flags and query parameters spell them (Go's time.ParseDuration: "30s",
  "1m30s", "250ms", "0")."""

from __future__ import annotations

import argparse
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Final

__all__ = [
    "GO_ZERO_TIME",
    "duration_flag",
    "format_go_duration",
    "format_rfc3339",
    "format_rfc3339_micro",
    "human_duration",
    "now",
    "now_rfc3339",
    "now_rfc3339_local",
    "now_rfc3339_micro",
    "parse_go_duration",
    "parse_rfc3339",
    "parse_rfc3339_nano",
    "translate_timestamp_since",
]

GO_ZERO_TIME: Final = datetime(1, 1, 1, tzinfo=UTC)  # time.Time{}: what IsZero() catches
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

_FRACTION: Final = re.compile(r"\.(\d+)")
_RFC3339_NANO: Final = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?([Zz]|[+-]\d\d:\d\d)")
_NANOS_PER_SECOND: Final = 1_000_000_000


# -- metav1.Time / MicroTime ------------------------------------------------------------------


def now() -> datetime:
    """metav1.Now(): an aware UTC datetime."""
    return datetime.now(UTC)


def _utc(t: datetime | float) -> datetime:
    if isinstance(t, datetime):
        return t.astimezone(UTC) if t.tzinfo is not None else t.replace(tzinfo=UTC)
    return datetime.fromtimestamp(t, UTC)


def format_rfc3339(t: datetime | float) -> str:
    """metav1.Time on the wire: UTC, whole seconds (truncated), `Z`. A float is a Unix time; a
    naive datetime is taken as UTC."""
    return _utc(t).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"  # strftime drops year 1's zeros


_second_cache: list[Any] = [None, ""]  # the last whole second formatted, and its text


def format_rfc3339_micro(t: datetime | float) -> str:
    """metav1.MicroTime on the wire: UTC, six fraction digits (truncated), `Z`. For a Unix time
    the seconds part is formatted once per second: the audit log stamps two per request."""
    if isinstance(t, datetime):
        return _utc(t).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    second = int(t // 1)
    if _second_cache[0] != second:
        _second_cache[0], _second_cache[1] = second, format_rfc3339(second)[:-1]
    return f"{_second_cache[1]}.{int((t - second) * 1_000_000):06d}Z"


_now_cache: tuple[int, str] = (0, "")  # the last whole second now_rfc3339 formatted, and its text (one object:
# a thread reading it never sees one second's number with another's text)


def now_rfc3339(offset_seconds: float = 0) -> str:
    """metav1.Now() (plus an offset, as a deletionTimestamp's grace period), on the wire. Whole seconds:
    the text is formatted once per second (every create stamps one, at thousands a second)."""
    global _now_cache
    if offset_seconds:
        return format_rfc3339(now() + timedelta(seconds=offset_seconds))
    second = int(time.time())
    cached = _now_cache
    if cached[0] != second:
        cached = _now_cache = (second, format_rfc3339(second))
    return cached[1]


def now_rfc3339_local() -> str:
    """Go's time.Now().Format(time.RFC3339): local time with its offset, "Z" in UTC (kubectl stamps
    `kubectl.kubernetes.io/restartedAt` so; API objects' own times are UTC)."""
    text = datetime.now().astimezone().replace(microsecond=0).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def now_rfc3339_micro() -> str:
    """metav1.NowMicro(), on the wire (leases' renewTime, events' eventTime)."""
    return format_rfc3339_micro(now())


def parse_rfc3339(value: Any) -> datetime | None:
    """An RFC 3339 metav1.Time or MicroTime (any number of fraction digits, `Z` or an offset) as an
    aware datetime; None when missing, unparsable, or Go's zero time (a Time that IsZero()). A
    time without an offset is read as UTC."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    m = _FRACTION.search(text)
    if m:  # fromisoformat wants at most microseconds; Go writes up to nanoseconds
        text = f"{text[: m.start()]}.{m.group(1)[:6].ljust(6, '0')}{text[m.end():]}"
    if text[-1] in "Zz":
        text = text[:-1] + "+00:00"
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return None if t == GO_ZERO_TIME else t


def parse_rfc3339_nano(value: Any) -> int | None:
    """Go's time.Parse(time.RFC3339Nano, value) as Unix nanoseconds, every fraction digit kept (a
    datetime holds only microseconds; beyond nine digits Go truncates too). None when missing,
    not RFC 3339 (an offset is required, as Go's layout has it), or Go's zero time."""
    if not isinstance(value, str):
        return None
    m = _RFC3339_NANO.fullmatch(value.strip())
    if m is None:
        return None
    head, fraction, zone = m.groups()
    try:
        whole = datetime.fromisoformat(head + ("+00:00" if zone in "Zz" else zone))
    except ValueError:  # the shape of a time, not a time (month 13, hour 25)
        return None
    nanos = int((fraction or "")[:9].ljust(9, "0"))
    if whole == GO_ZERO_TIME and not nanos:
        return None
    return (whole - _EPOCH) // timedelta(seconds=1) * _NANOS_PER_SECOND + nanos


# -- duration.HumanDuration -------------------------------------------------------------------

_NS: Final = 1_000_000_000
_MINUTE: Final = 60 * _NS
_HOUR: Final = 60 * _MINUTE


def _trunc_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // b
    return q if a >= 0 else -q


def _human_duration_ns(d: int) -> str:
    # Allow deviation no more than 2 seconds (excluded) to tolerate machine time inconsistence.
    seconds = _trunc_div(d, _NS)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = d // _MINUTE
    if minutes < 10:
        s = (d // _NS) % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = d // _HOUR
    if hours < 8:
        m = (d // _MINUTE) % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def human_duration(d: float | timedelta) -> str:
    """duration.HumanDuration: a succinct duration with ~2-3 significant figures, "5s", "119s",
    "3m20s", "15m", "5h3m", "2d3h", "400d", "3y20d"; seconds or a timedelta (exact to the
    microsecond)."""
    if isinstance(d, timedelta):
        return _human_duration_ns((d // timedelta(microseconds=1)) * 1000)
    return _human_duration_ns(int(d * _NS))


def translate_timestamp_since(value: Any, at: datetime | None = None) -> str:
    """The printers' translateTimestampSince: how long ago an RFC 3339 time was (at `at`, default
    now); "<unknown>" for a missing or zero one."""
    t = value if isinstance(value, datetime) else parse_rfc3339(value)
    if t is None:
        return "<unknown>"
    return human_duration((at or now()) - t)


# -- Go durations -----------------------------------------------------------------------------

_GO_DURATION: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


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


def _decimal(value: int, places: int) -> str:
    """value / 10**places with no trailing zeros: 1500, 3 → "1.5"."""
    whole, frac = divmod(value, 10**places)
    digits = str(frac).rjust(places, "0").rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)


def format_go_duration(seconds: float) -> str:
    """Go's time.Duration.String() (to the nanosecond): "0s", "250ms", "1.5s", "1m20s", "5m0s",
    "1h0m0s", as back-off messages and flags' defaults print durations."""
    ns = round(seconds * _NS)
    sign, u = ("-", -ns) if ns < 0 else ("", ns)
    if u == 0:
        return "0s"
    if u < 1_000:
        text = f"{u}ns"
    elif u < 1_000_000:
        text = _decimal(u, 3) + "µs"
    elif u < _NS:
        text = _decimal(u, 6) + "ms"
    else:
        hours, rest = divmod(u, _HOUR)
        minutes, rest = divmod(rest, _MINUTE)
        text = _decimal(rest, 9) + "s"
        if hours:
            text = f"{hours}h{minutes}m{text}"
        elif minutes:
            text = f"{minutes}m{text}"
    return sign + text


def duration_flag(text: str) -> float:
    """An argparse type: a Go duration ("40s", "5m0s") or plain seconds, in seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_go_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
