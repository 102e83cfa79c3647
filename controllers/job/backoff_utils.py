"""Pod re-creation back-off of a Job (upstream pkg/controller/job/backoff_utils.go): after n
consecutive failures a new pod waits base * 2^(n-1), capped at six minutes (DefaultJobPodFailureBackOff
10 s, MaxJobPodFailureBackOff 360 s)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_JOB_POD_FAILURE_BACKOFF = 10.0
MAX_JOB_POD_FAILURE_BACKOFF = 360.0


@dataclass
class BackoffRecord:
    """One Job's consecutive failures and when the last one was counted (monotonic seconds)."""

    failures_after_last_success: int = 0
    last_failure_time: float | None = None


def backoff_delay(failures: int, base: float = DEFAULT_JOB_POD_FAILURE_BACKOFF,
                  cap: float = MAX_JOB_POD_FAILURE_BACKOFF) -> float:
    """The wait after `failures` consecutive failures (0 for none)."""
    if failures <= 0:
        return 0.0
    return float(min(cap, base * 2 ** min(failures - 1, 32)))


def remaining_backoff(record: BackoffRecord, now: float, base: float = DEFAULT_JOB_POD_FAILURE_BACKOFF,
                      cap: float = MAX_JOB_POD_FAILURE_BACKOFF) -> float:
    """Seconds until a new pod may be created (getRemainingTimePerIndex / getRemainingTime)."""
    if record.last_failure_time is None or record.failures_after_last_success == 0:
        return 0.0
    return max(0.0, record.last_failure_time + backoff_delay(record.failures_after_last_success, base, cap) - now)


def update_record(record: BackoffRecord, new_succeeded: int, new_failed: int, now: float) -> BackoffRecord:
    """newBackoffRecord: a success resets the count, failures add to it."""
    if new_succeeded > 0:
        record = BackoffRecord()
    if new_failed > 0:
        record = BackoffRecord(record.failures_after_last_success + new_failed, now)
    return record
