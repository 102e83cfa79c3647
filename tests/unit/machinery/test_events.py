"""client-go's EventCorrelator in machinery/events.py: counting, aggregation and the spam filter, on a fake
clock (pure logic)."""

from __future__ import annotations

import asyncio
from typing import Any

from machinery.api.apps_v1 import ReplicaSet
from machinery.api.core_v1 import ObjectReference
from machinery.api.meta import ObjectMeta
from machinery.events import AGGREGATE_INTERVAL_S, COMBINED_PREFIX, SPAM_BURST, EventCorrelator, EventRecorder

SOURCE = ("replicaset-controller", None)


def ref(name: str = "web", uid: str = "u1") -> ObjectReference:
    return ObjectReference(api_version="apps/v1", kind="ReplicaSet", namespace="ns", name=name, uid=uid)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_repeated_event_is_a_count_on_the_first() -> None:
    c = EventCorrelator(Clock())
    first = c.correlate(ref(), SOURCE, "Normal", "SuccessfulCreate", "Created pod: a")
    second = c.correlate(ref(), SOURCE, "Normal", "SuccessfulCreate", "Created pod: a")
    assert first is not None and second is not None
    assert first[2] == 1 and second == (first[0], "Created pod: a", 2)


def test_the_tenth_similar_event_and_later_ones_are_one_combined_event() -> None:
    c = EventCorrelator(Clock())
    out = [c.correlate(ref(), SOURCE, "Normal", "SuccessfulCreate", f"Created pod: p{i}") for i in range(12)]
    assert all(o is not None for o in out)
    singles = [o for o in out[:9] if o]
    assert [o[1] for o in singles] == [f"Created pod: p{i}" for i in range(9)]
    assert len({o[0] for o in singles}) == 9 and all(o[2] == 1 for o in singles)
    combined = [o for o in out[9:] if o]
    assert [o[1] for o in combined] == [COMBINED_PREFIX + f"Created pod: p{i}" for i in (9, 10, 11)]
    assert len({o[0] for o in combined}) == 1 and [o[2] for o in combined] == [1, 2, 3]
    assert combined[0][0] not in {o[0] for o in singles}


def test_similar_events_further_apart_than_the_interval_are_not_combined() -> None:
    clock = Clock()
    c = EventCorrelator(clock)
    for i in range(12):
        clock.now += AGGREGATE_INTERVAL_S + 1
        got = c.correlate(ref(), SOURCE, "Normal", "SuccessfulCreate", f"Created pod: p{i}")
        assert got is not None and got[1] == f"Created pod: p{i}" and got[2] == 1


def test_another_reason_object_or_source_is_aggregated_apart() -> None:
    c = EventCorrelator(Clock())
    for i in range(9):
        c.correlate(ref(), SOURCE, "Normal", "SuccessfulCreate", f"Created pod: p{i}")
    others = [c.correlate(ref(), SOURCE, "Normal", "SuccessfulDelete", "Deleted pod: p0"),
              c.correlate(ref("db", "u2"), SOURCE, "Normal", "SuccessfulCreate", "Created pod: q"),
              c.correlate(ref(), ("other", None), "Normal", "SuccessfulCreate", "Created pod: r")]
    assert [o[1] for o in others if o] == ["Deleted pod: p0", "Created pod: q", "Created pod: r"]


def test_a_source_writes_a_burst_about_one_object_then_one_every_five_minutes() -> None:
    clock = Clock()
    c = EventCorrelator(clock)
    written = [c.correlate(ref(), SOURCE, "Normal", "SuccessfulCreate", f"Created pod: p{i}") for i in range(40)]
    assert sum(1 for w in written if w) == SPAM_BURST and all(written[:SPAM_BURST])
    # the combined event counted what was dropped: the next one written carries the full count
    assert c.correlate(ref("db", "u2"), SOURCE, "Normal", "SuccessfulCreate", "Created pod: q") is not None
    clock.now += 299
    assert c.correlate(ref(), SOURCE, "Normal", "SuccessfulCreate", "Created pod: late") is None
    clock.now += 2
    late = c.correlate(ref(), SOURCE, "Normal", "SuccessfulCreate", "Created pod: later")
    assert late is not None and late[1] == COMBINED_PREFIX + "Created pod: later" and late[2] == 42 - 9
    assert c.correlate(ref(), SOURCE, "Normal", "SuccessfulCreate", "Created pod: again") is None


class _SlowFirstClient:
    """Event writes that take less time the higher their count: written in parallel, an earlier write of one
    Event would land after a later one."""

    def __init__(self) -> None:
        self.stored: dict[str, dict[str, object]] = {}
        self.counts: dict[str, list[int]] = {}  # each Event's counts in the order they landed

    async def create(self, event: Any) -> None:
        await asyncio.sleep(0.02)
        self.stored[event.metadata.name] = {"count": event.count, "message": event.message}
        self.counts.setdefault(event.metadata.name, []).append(event.count)

    async def patch(self, kind: Any, name: str, bump: dict[str, Any], patch_type: str, namespace: str) -> None:
        await asyncio.sleep(max(0.0, 0.02 - 0.001 * bump["count"]))
        if name not in self.stored:
            raise AssertionError(f"a count of {name} was written before the Event")
        self.stored[name].update(count=bump["count"], message=bump["message"])
        self.counts[name].append(bump["count"])


async def test_one_events_writes_land_in_the_order_they_were_recorded() -> None:
    client = _SlowFirstClient()
    recorder = EventRecorder(client, "deployment-controller")  # type: ignore[arg-type]
    rs = ReplicaSet(metadata=ObjectMeta(name="web", namespace="ns", uid="u1"))
    for i in range(15):  # the 10th and later are one combined Event, its count written 6 times
        recorder.event(rs, "Normal", "ScalingReplicaSet", f"Scaled up replica set web-1 to {i}")
    async with asyncio.timeout(5):
        await recorder.flush()
    recorder.close()
    combined = [v for v in client.stored.values() if str(v["message"]).startswith(COMBINED_PREFIX)]
    assert combined == [{"count": 6, "message": COMBINED_PREFIX + "Scaled up replica set web-1 to 14"}]
    assert sorted(client.counts.values()) == [[1]] * 9 + [[1, 2, 3, 4, 5, 6]]
    assert recorder._writing == {}  # nothing kept once written
