"""Cron schedules for CronJobs (upstream: github.com/robfig/cron/v3 as pkg/controller/cronjob uses it).

The standard five fields and the `@hourly`-style descriptors, parsed by croniter; the time zone of
`spec.timeZone` (or a `TZ=`/`CRON_TZ=` prefix, which upstream's validation refuses) through zoneinfo.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

from croniter import croniter

# robfig/cron's descriptors; @every is robfig's too but Kubernetes documents only these
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}


class ScheduleError(ValueError):
    pass


class Schedule:
    """A parsed schedule: `next(t)` is the first activation strictly after t, in the schedule's zone."""

    def __init__(self, expression: str, zone: dt.tzinfo) -> None:
        self.expression = expression
        self.zone = zone

    def next(self, after: dt.datetime) -> dt.datetime:
        it = croniter(self.expression, after.astimezone(self.zone))
        result: dt.datetime = it.get_next(dt.datetime)
        return result.astimezone(dt.UTC)

    def previous(self, at: dt.datetime) -> dt.datetime:
        """The last activation at or before `at`."""
        it = croniter(self.expression, (at + dt.timedelta(seconds=1)).astimezone(self.zone))
        result: dt.datetime = it.get_prev(dt.datetime)
        return result.astimezone(dt.UTC)


def parse_standard(schedule: str, time_zone: str | None = None) -> Schedule:
    """cron.ParseStandard with the CronJob's time zone (UTC without one, as the controller-manager
    here runs in UTC). Raises ScheduleError with robfig's kind of message."""
    text = schedule.strip()
    if not text:
        raise ScheduleError("empty spec string")
    expression = DESCRIPTORS.get(text, text)
    if expression.startswith("@"):
        raise ScheduleError(f"unrecognized descriptor: {text}")
    fields = expression.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: {text}")
    if not croniter.is_valid(expression):
        raise ScheduleError(f"failed to parse schedule: {text}")
    return Schedule(expression, load_zone(time_zone))


def load_zone(name: str | None) -> dt.tzinfo:
    if not name:
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as e:
        raise ScheduleError(f"unknown time zone {name}") from e
