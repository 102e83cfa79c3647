"""The CronJob controller's pure decisions (upstream cronjob/utils_test.go): the most recent unmet scheduled
time with a fake clock, the missed-times rule, startingDeadlineSeconds, Job names, history pruning; and
machinery/cron.py's schedules."""

from __future__ import annotations

import datetime as dt

import pytest

from controllers.cronjob import (
    MAX_MISSED_SCHEDULES,
    ScheduleDecision,
    job_name_for,
    jobs_to_prune,
    most_recent_schedule_time,
)
from machinery.api.batch_v1 import Job
from machinery.cron import ScheduleError, parse_standard

T0 = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def test_most_recent_schedule_time() -> None:
    every_5 = parse_standard("*/5 * * * *")
    decision = most_recent_schedule_time(every_5, T0, at(3), None)
    assert (decision.most_recent, decision.missed) == (None, 0)  # nothing due yet
    decision = most_recent_schedule_time(every_5, T0, at(12), None)
    assert (decision.most_recent, decision.missed) == (at(10), 2)  # 10:05 and 10:10: only the latest runs
    # startingDeadlineSeconds narrows the window: 10:10 is 120 s ago, out of a 60 s deadline
    assert most_recent_schedule_time(every_5, T0, at(12), 60).most_recent is None
    assert most_recent_schedule_time(every_5, T0, at(12), 180).most_recent == at(10)
    never = parse_standard("0 0 31 2 *")  # valid, but February has no 31st: robfig's zero time
    assert never.next(T0) is None
    assert most_recent_schedule_time(never, T0, at(60 * 24 * 400), None) == ScheduleDecision(None, 0)


def test_more_than_100_missed_is_counted_not_replayed() -> None:
    every_minute = parse_standard("* * * * *")
    decision = most_recent_schedule_time(every_minute, T0, at(60 * 24 * 30), None)  # a month of minutes
    assert decision.missed == MAX_MISSED_SCHEDULES + 1
    assert decision.most_recent == at(60 * 24 * 30)


def test_descriptors_and_time_zones() -> None:
    assert parse_standard("@hourly").next(at(1)) == at(60)
    berlin = parse_standard("0 9 * * *", "Europe/Berlin")
    assert berlin.next(T0) == dt.datetime(2026, 1, 2, 8, 0, tzinfo=dt.UTC)  # 09:00 CET is 08:00 UTC
    for bad, message in [("* * *", "expected exactly 5 fields, found 3: * * *"),
                         ("61 * * * *", r"end of range \(61\) above maximum \(59\): 61"),
                         ("0 0 L * *", "failed to parse schedule: 0 0 L \\* \\*"),
                         ("1-0 * * * *", r"beginning of range \(1\) beyond end of range \(0\): 1-0"),
                         ("@fortnightly", "unrecognized descriptor: @fortnightly")]:
        with pytest.raises(ScheduleError, match=message):
            parse_standard(bad)
    with pytest.raises(ScheduleError, match="unknown time zone Mars/Base"):
        parse_standard("* * * * *", "Mars/Base")
    with pytest.raises(ScheduleError, match="unknown time zone"):
        parse_standard("* * * * *", "x" * 300)  # longer than a file name may be: still only a bad zone


def test_job_names_are_minutes_since_the_epoch() -> None:
    assert job_name_for("tick", dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)) == "tick-29454360"


def _finished(name: str, kind: str, start: str) -> Job:
    return Job.model_validate({"metadata": {"name": name}, "status": {
        "startTime": start, "conditions": [{"type": kind, "status": "True"}]}})


def test_history_limits_prune_the_oldest() -> None:
    jobs = [_finished("a", "Complete", "2026-01-01T00:00:00Z"), _finished("b", "Complete", "2026-01-03T00:00:00Z"),
            _finished("c", "Complete", "2026-01-02T00:00:00Z"), _finished("d", "Failed", "2026-01-01T00:00:00Z"),
            _finished("e", "Failed", "2026-01-02T00:00:00Z"), Job.model_validate({"metadata": {"name": "running"}})]
    assert [j.metadata.name for j in jobs_to_prune(jobs, 1, 1)] == ["a", "c", "d"]
    assert [j.metadata.name for j in jobs_to_prune(jobs, 3, 0)] == ["d", "e"]
    assert jobs_to_prune(jobs, None, None) == []
