"""Indexed Jobs (upstream pkg/controller/job/indexed_job_utils.go): the index of a pod, the
`1,3-5` interval form of status.completedIndexes, and the indexes still to run."""

from __future__ import annotations

from collections.abc import Iterable

from machinery.api.batch_v1 import JOB_COMPLETION_INDEX_ANNOTATION
from machinery.api.core_v1 import Pod


def get_completion_index(pod: Pod) -> int | None:
    """The pod's index from its annotation (or label), None if missing or not a number."""
    for source in (pod.metadata.annotations, pod.metadata.labels):
        value = (source or {}).get(JOB_COMPLETION_INDEX_ANNOTATION)
        if value is not None and value.isdigit():
            return int(value)
    return None


def format_intervals(indexes: Iterable[int]) -> str:
    """sorted unique ints -> "1,3-5,7" (succeededIndexes.String())."""
    out: list[str] = []
    ordered = sorted(set(indexes))
    i = 0
    while i < len(ordered):
        start = end = ordered[i]
        while i + 1 < len(ordered) and ordered[i + 1] == end + 1:
            i += 1
            end = ordered[i]
        out.append(str(start) if start == end else f"{start}-{end}")
        i += 1
    return ",".join(out)


def parse_intervals(text: str | None, completions: int) -> set[int]:
    """"1,3-5" -> {1, 3, 4, 5}, dropping what is out of [0, completions) or malformed (parseIndexesFromString)."""
    out: set[int] = set()
    for part in (text or "").split(","):
        low, _, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if high else first
        except ValueError:
            continue
        out.update(i for i in range(first, last + 1) if 0 <= i < completions)
    return out


def pending_indexes(completions: int, succeeded: set[int], active: set[int], count: int) -> list[int]:
    """firstPendingIndexes: the `count` lowest indexes neither succeeded nor running."""
    out: list[int] = []
    for index in range(completions):
        if len(out) >= count:
            break
        if index not in succeeded and index not in active:
            out.append(index)
    return out
