"""Cron schedules for CronJobs (upstream: github.com/robfig/cron/v3 as pkg/controller/cronjob uses it).

The standard five fields and the `@hourly`-style descriptors, parsed by croniter; the time zone of
`spec.timeZone` (or a `TZ=`/`CRON_TZ=` prefix, which upstream's validation refuses) through zoneinfo.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo

# croniter (and the dateutil it pulls in, ~4 MB of RSS) is imported on the first schedule parsed, not with every
# process that can validate a CronJob: the apiserver holds no CronJob until one is written.

_MONTHS = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
_DAYS = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
_ATOM = re.compile(r"[0-9]+|\*|\?|[A-Za-z]{3}")
# the five fields' bounds, as robfig's minutes, hours, dom, months, dow
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))

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

    def next(self, after: dt.datetime) -> dt.datetime | None:
        """None for a schedule that never fires (`0 0 31 2 *`: robfig's zero time)."""
        from croniter import CroniterBadDateError, croniter

        it = croniter(self.expression, after.astimezone(self.zone))
        try:
            result: dt.datetime = it.get_next(dt.datetime)
        except CroniterBadDateError:
            return None
        return result.astimezone(dt.UTC)

    def previous(self, at: dt.datetime) -> dt.datetime:
        """The last activation at or before `at`."""
        from croniter import croniter

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
    for index, field in enumerate(fields):
        _check_field(field, index, text)
    from croniter import croniter

    if not croniter.is_valid(expression):
        raise ScheduleError(f"failed to parse schedule: {text}")
    return Schedule(expression, load_zone(time_zone))


def _check_field(field: str, index: int, text: str) -> None:
    """robfig's standard syntax only: numbers, `*`, `?`, ranges, lists, steps and month or day names (croniter's
    own extensions, `L`, `W`, `#`, are not cron as Kubernetes reads it)."""
    low, high = _BOUNDS[index]
    for part in field.split(","):
        base, _, step = part.partition("/")
        if step and not step.isdigit():
            raise ScheduleError(f"failed to parse int from {step}: {text}")
        ends = base.split("-")
        if len(ends) > 2 or not all(_ATOM.fullmatch(e) for e in ends):
            raise ScheduleError(f"failed to parse schedule: {text}")
        numbers = []
        for end in ends:
            if end.isalpha() and len(end) == 3:
                if end.upper() not in (_MONTHS if index == 3 else _DAYS if index == 4 else set()):
                    raise ScheduleError(f"failed to parse int from {end}: {text}")
            elif end.isdigit():
                value = int(end)
                if not low <= value <= high:
                    raise ScheduleError(f"end of range ({value}) above maximum ({high}): {base}" if value > high
                                        else f"beginning of range ({value}) below minimum ({low}): {base}")
                numbers.append(value)
        if len(numbers) == 2 and numbers[0] > numbers[1]:
            raise ScheduleError(f"beginning of range ({numbers[0]}) beyond end of range ({numbers[1]}): {base}")


def load_zone(name: str | None) -> dt.tzinfo:
    if not name:
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as e:  # OSError: a name too long for a path
        raise ScheduleError(f"unknown time zone {name}") from e
