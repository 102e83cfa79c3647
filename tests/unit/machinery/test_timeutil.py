"""machinery/timeutil.py: metav1.Time / MicroTime on the wire, duration.HumanDuration, and Go
durations (the HumanDuration table moved here from the printers' tests, the Go-duration cases are in
test_requestinfo.py)."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from machinery.timeutil import (
    GO_ZERO_TIME,
    duration_flag,
    format_go_duration,
    format_rfc3339,
    format_rfc3339_micro,
    human_duration,
    now,
    now_rfc3339,
    now_rfc3339_local,
    now_rfc3339_micro,
    parse_go_duration,
    parse_rfc3339,
    parse_rfc3339_nano,
    translate_timestamp_since,
)

T = datetime(2026, 11, 21, 10, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (-5, "<invalid>"),
        (-2, "<invalid>"),
        (-1.5, "0s"),
        (-1, "0s"),
        (0, "0s"),
        (0.9, "0s"),
        (5, "5s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (200, "3m20s"),
        (9 * 60 + 59, "9m59s"),
        (10 * 60, "10m"),
        (10 * 60 + 59, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (8 * 3600 + 59 * 60, "8h"),
        (47 * 3600 + 3599, "47h"),
        (48 * 3600, "2d"),
        (2 * 86400 + 3 * 3600, "2d3h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (731 * 86400, "2y1d"),
        (8 * 365 * 86400, "8y"),
        (20 * 365 * 86400 + 100 * 86400, "20y"),
    ],
)
def test_human_duration(seconds: float, expected: str) -> None:
    assert human_duration(seconds) == expected


def test_human_duration_of_a_timedelta_is_exact_to_the_microsecond() -> None:
    assert human_duration(timedelta(seconds=119, microseconds=999999)) == "119s"
    assert human_duration(timedelta(seconds=-1, microseconds=1)) == "0s"
    assert human_duration(timedelta(days=2, hours=3)) == "2d3h"


def test_format_whole_seconds_and_micro_time() -> None:
    assert format_rfc3339(T) == "2026-11-21T10:00:00Z"
    assert format_rfc3339_micro(T) == "2026-11-21T10:00:00.123456Z"
    assert format_rfc3339(T.timestamp()) == "2026-11-21T10:00:00Z"
    assert format_rfc3339_micro(T.timestamp()) == "2026-11-21T10:00:00.123456Z"
    assert format_rfc3339_micro(T.timestamp() + 1.5) == "2026-11-21T10:00:01.623456Z"
    assert format_rfc3339_micro(0.5) == "1970-01-01T00:00:00.500000Z"  # the audit log's stamps
    plus_two = T.astimezone(timezone(timedelta(hours=2)))
    assert format_rfc3339(plus_two) == "2026-11-21T10:00:00Z"  # always UTC
    assert format_rfc3339(T.replace(tzinfo=None)) == "2026-11-21T10:00:00Z"  # naive: taken as UTC


def test_now_is_utc_and_on_the_wire() -> None:
    before = now()
    assert before.tzinfo is UTC
    stamp = parse_rfc3339(now_rfc3339())
    assert stamp is not None and abs((stamp - before).total_seconds()) < 2
    later = parse_rfc3339(now_rfc3339(3600))
    assert later is not None and 3598 < (later - before).total_seconds() < 3602
    local = now_rfc3339_local()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)", local)
    stamp = parse_rfc3339(local)
    assert stamp is not None and abs((stamp - before).total_seconds()) < 2
    micro = now_rfc3339_micro()
    assert micro.endswith("Z") and len(micro.split(".")[1]) == 7


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-11-21T10:00:00Z", datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)),
    ("2026-11-21T10:00:00.123456Z", T),
    ("2026-11-21T10:00:00.123456789Z", T),  # Go's nanoseconds: cut to microseconds
    ("2026-11-21T10:00:00.1Z", T.replace(microsecond=100000)),
    ("2026-11-21T12:00:00+02:00", datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)),
    ("2026-11-21T10:00:00", datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)),  # no offset: UTC
])
def test_parse(text: str, expected: datetime) -> None:
    assert parse_rfc3339(text) == expected


@pytest.mark.parametrize("value", [None, "", "  ", "yesterday", "2026-13-01T00:00:00Z", 1700000000,
                                   "0001-01-01T00:00:00Z"])
def test_parse_unset_or_malformed_is_none(value: object) -> None:
    assert parse_rfc3339(value) is None


def test_go_zero_time_is_year_one() -> None:
    assert format_rfc3339(GO_ZERO_TIME) == "0001-01-01T00:00:00Z"


def test_translate_timestamp_since() -> None:
    at = T + timedelta(minutes=3, seconds=20)
    assert translate_timestamp_since("2026-11-21T10:00:00Z", at) == "3m20s"
    assert translate_timestamp_since(T, at) == "3m20s"
    assert translate_timestamp_since(None, at) == "<unknown>"
    assert translate_timestamp_since("0001-01-01T00:00:00Z", at) == "<unknown>"
    assert translate_timestamp_since(now_rfc3339()) in ("0s", "1s", "2s")


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (1e-9, "1ns"), (1.5e-6, "1.5µs"), (0.25, "250ms"), (1, "1s"), (1.5, "1.5s"), (80, "1m20s"),
    (300, "5m0s"), (3600, "1h0m0s"), (3723.5, "1h2m3.5s"), (-90, "-1m30s"),
])
def test_format_go_duration(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text
    assert parse_go_duration(text) == pytest.approx(seconds)  # and back


def test_duration_flag() -> None:
    assert duration_flag("1m30s") == 90 and duration_flag(" 2 ") == 2 and duration_flag("250ms") == 0.25
    with pytest.raises(argparse.ArgumentTypeError, match=r'^time: invalid duration "soon"$'):
        duration_flag("soon")


def test_rfc3339_nano_keeps_every_nanosecond() -> None:
    # a CRI log line's stamp: nine digits, more than a datetime (or a float of seconds) holds
    assert parse_rfc3339_nano("2016-10-06T00:17:09.669794202Z") == 1475713029_669794202
    assert parse_rfc3339_nano("2016-10-06T00:17:09.669794203Z") == 1475713029_669794203
    assert parse_rfc3339_nano("2016-10-06T00:17:09Z") == 1475713029 * 10**9
    assert parse_rfc3339_nano("2016-10-06T00:17:09.5z") == 1475713029_500000000
    assert parse_rfc3339_nano("2016-10-06T02:17:09.000000001+02:00") == 1475713029_000000001
    assert parse_rfc3339_nano("2016-10-06T00:17:09.6697942029999Z") == 1475713029_669794202  # Go truncates
    assert parse_rfc3339_nano("1969-12-31T23:59:59.25Z") == -750_000_000  # before the epoch, floored
    assert parse_rfc3339_nano(" 2016-10-06T00:17:09Z\n") == 1475713029 * 10**9


@pytest.mark.parametrize("value", [
    None, 17, "", "0001-01-01T00:00:00Z",  # missing, or Go's zero time (a Time that IsZero())
    "2016-10-06T00:17:09",  # no offset: RFC3339Nano requires one
    "2016-10-06 00:17:09Z", "2016-10-06T00:17:09.Z", "2016-13-06T00:17:09Z", "2016-10-06T25:17:09Z",
    "stdout F 2016-10-06T00:17:09Z", "2016-10-06T00:17:09Z trailing",
])
def test_rfc3339_nano_rejects_what_go_rejects(value: object) -> None:
    assert parse_rfc3339_nano(value) is None


def test_now_rfc3339_formats_each_second_once_and_follows_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from machinery import timeutil

    clock = [1_790_000_000.25]
    monkeypatch.setattr(timeutil, "time", types.SimpleNamespace(time=lambda: clock[0]))
    first = now_rfc3339()
    assert first == format_rfc3339(1_790_000_000) == "2026-09-21T14:13:20Z"
    clock[0] = 1_790_000_000.99  # the same second: the same text
    assert now_rfc3339() == first
    clock[0] = 1_790_000_001.0  # the next one: a new text, not the cached one
    assert now_rfc3339() == "2026-09-21T14:13:21Z"
