"""machinery.leaderelection without a server: the pure decisions (when an observed lease has expired,
what record acquiring / renewing / taking over / releasing writes, when a leader must stop, which
timings are refused), the --leader-elect* flags of both components and the bootstrap RBAC they
need, and the elector's loops on an in-memory Lease with the apiserver's compare-and-swap (the real
apiserver and processes are tests/integration/test_leader_election.py's)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import random
import time
from collections.abc import Callable
from typing import Any

import pytest

from machinery.api.coordination_v1 import Lease, LeaseSpec
from machinery.api.meta import ObjectMeta, Status
from machinery.client import ApiError, ApiUnavailable
from machinery.leaderelection import (
    JITTER_FACTOR,
    LeaderElectionRecord,
    LeaderElector,
    add_flags,
    check_flags,
    jittered,
    lease_valid,
    new_identity,
    next_record,
    released_record,
    renew_overdue,
    validate_timings,
)

ME, OTHER = "host_me", "host_other"
T0, T1 = "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:09.000000Z"


def held_by(holder: str, duration: int = 15, transitions: int = 3) -> LeaderElectionRecord:
    return LeaderElectionRecord(holder, duration, T0, T0, transitions)


def test_a_lease_is_valid_for_its_duration_from_when_it_was_seen_to_change() -> None:
    record = held_by(OTHER, duration=15)
    assert lease_valid(record, observed_at=100.0, now=100.0)
    assert lease_valid(record, observed_at=100.0, now=114.9)
    assert not lease_valid(record, observed_at=100.0, now=115.0)
    # the holder's own renewTime plays no part: only the local observation time
    assert lease_valid(LeaderElectionRecord(OTHER, 15, T0, "1970-01-01T00:00:00.000000Z", 0), 100.0, 101.0)


def test_no_lease_yet_creates_one_held_by_me() -> None:
    record = next_record(None, 0.0, 5.0, ME, 15, T1)
    assert record == LeaderElectionRecord(ME, 15, T1, T1, 0)


def test_a_valid_lease_of_someone_else_is_left_alone() -> None:
    assert next_record(held_by(OTHER), observed_at=100.0, now=110.0, identity=ME,
                       lease_duration_seconds=15, wall_now=T1) is None


def test_an_expired_lease_is_taken_over_counting_one_more_transition() -> None:
    record = next_record(held_by(OTHER, transitions=3), observed_at=100.0, now=115.0, identity=ME,
                         lease_duration_seconds=15, wall_now=T1)
    assert record == LeaderElectionRecord(ME, 15, T1, T1, 4)


def test_a_released_lease_is_taken_at_once() -> None:
    released = released_record(held_by(OTHER, transitions=3), T0)
    assert released == LeaderElectionRecord("", 1, T0, T0, 3)
    # observed just now, still "valid" for its 1 s: an empty holder is free regardless
    record = next_record(released, observed_at=100.0, now=100.0, identity=ME, lease_duration_seconds=15, wall_now=T1)
    assert record == LeaderElectionRecord(ME, 15, T1, T1, 4)


def test_the_holder_renews_keeping_acquire_time_and_transitions() -> None:
    mine = LeaderElectionRecord(ME, 15, T0, T0, 7)
    record = next_record(mine, observed_at=100.0, now=108.0, identity=ME, lease_duration_seconds=15, wall_now=T1)
    assert record == LeaderElectionRecord(ME, 15, T0, T1, 7)
    # even past its lease (a slow renewal): still the holder's to renew, no new transition
    late = next_record(mine, observed_at=100.0, now=130.0, identity=ME, lease_duration_seconds=15, wall_now=T1)
    assert late is not None and late.leader_transitions == 7 and late.acquire_time == T0


def test_the_renew_deadline_decision() -> None:
    assert not renew_overdue(last_renew=100.0, now=109.9, renew_deadline=10.0)
    assert renew_overdue(last_renew=100.0, now=110.0, renew_deadline=10.0)


def test_the_record_round_trips_through_a_lease_spec() -> None:
    record = LeaderElectionRecord(ME, 15, T0, T1, 2)
    lease = Lease(metadata=ObjectMeta(name="kube-scheduler", namespace="kube-system"), spec=record.to_spec())
    assert LeaderElectionRecord.from_lease(lease) == record
    wire = lease.model_dump(by_alias=True, exclude_none=True)["spec"]
    assert wire == {"holderIdentity": ME, "leaseDurationSeconds": 15, "acquireTime": T0, "renewTime": T1,
                    "leaseTransitions": 2}
    # a released lease keeps an explicit empty holder, as upstream writes it
    assert released_record(record, T1).to_spec().holder_identity == ""
    assert LeaderElectionRecord.from_lease(Lease(spec=LeaseSpec())) == LeaderElectionRecord()


def test_jitter_stays_within_upstream_bounds() -> None:
    rng = random.Random(7)
    values = [jittered(2.0, rng) for _ in range(500)]
    assert all(2.0 <= v < 2.0 * (1 + JITTER_FACTOR) for v in values)
    assert max(values) - min(values) > 1.0  # it does spread


def test_identity_is_hostname_underscore_uuid() -> None:
    a, b = new_identity(), new_identity()
    host, _, suffix = a.rpartition("_")
    assert host and len(suffix) == 36 and a != b


@pytest.mark.parametrize(("lease", "renew", "retry", "message"), [
    (10.0, 10.0, 2.0, "leaseDuration must be greater than renewDeadline"),
    (10.9, 10.0, 2.0, "leaseDuration must be greater than renewDeadline"),  # the Lease carries whole seconds
    (15.0, 2.4, 2.0, "renewDeadline must be greater than retryPeriod*JitterFactor"),
    (15.0, 10.0, 0.0, "retryPeriod must be greater than zero"),
    (15.0, 0.0, 2.0, "renewDeadline must be greater than zero"),
    (0.5, 0.3, 0.1, "leaseDuration must be at least 1s"),
])
def test_unsafe_timings_are_refused(lease: float, renew: float, retry: float, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        validate_timings(lease, renew, retry)


def test_safe_timings_pass() -> None:
    validate_timings(15.0, 10.0, 2.0)
    validate_timings(4.0, 3.0, 0.5)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="component", exit_on_error=False)
    add_flags(p, "kube-thing")
    return p


def test_flags_default_as_upstream() -> None:
    args = _parser().parse_args([])
    assert args.leader_elect is True
    assert (args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
            args.leader_elect_retry_period) == (15.0, 10.0, 2.0)
    assert (args.leader_elect_resource_namespace, args.leader_elect_resource_name) == ("kube-system", "kube-thing")
    args = _parser().parse_args(["--leader-elect=false", "--leader-elect-lease-duration", "4s",
                                 "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"])
    assert args.leader_elect is False
    assert (args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
            args.leader_elect_retry_period) == (4.0, 3.0, 0.5)


def test_bad_timing_flags_are_one_readable_line(capsys: pytest.CaptureFixture[str]) -> None:
    p = _parser()
    args = p.parse_args(["--leader-elect-lease-duration", "5s", "--leader-elect-renew-deadline", "6s"])
    with pytest.raises(SystemExit) as exit_:
        check_flags(p, args)
    assert exit_.value.code == 2
    assert "leaseDuration must be greater than renewDeadline" in capsys.readouterr().err
    # with election off the timings are not looked at
    check_flags(p, p.parse_args(["--leader-elect=false", "--leader-elect-lease-duration", "1s"]))


def test_both_components_take_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from controllers.manager import parse_args as cm_args
    from scheduler.__main__ import parse_args as scheduler_args

    cm = cm_args(["--master", "http://127.0.0.1:1"])
    assert cm.leader_elect and cm.leader_elect_resource_name == "kube-controller-manager"
    sched = scheduler_args(["--master", "http://127.0.0.1:1", "--leader-elect-resource-name", "mine"])
    assert sched.leader_elect and sched.leader_elect_resource_name == "mine"
    assert scheduler_args(["--master", "http://127.0.0.1:1"]).leader_elect_resource_name == "kube-scheduler"
    with pytest.raises(SystemExit):
        scheduler_args(["--master", "http://127.0.0.1:1", "--leader-elect-retry-period", "9s"])
    assert "renewDeadline must be greater than retryPeriod*JitterFactor" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cm_args(["--master", "http://127.0.0.1:1", "--leader-elect-resource-lock", "endpoints"])


@pytest.mark.parametrize("who", ["system:kube-controller-manager", "system:kube-scheduler"])
def test_the_bootstrap_policy_lets_both_components_hold_their_lease(who: str) -> None:
    """They write the Lease as the kubeconfig's identity (not a controller's service account), and
    record the LeaderElection event on it."""
    from apiserver.auth import bootstrap
    from apiserver.auth.authz import ALLOW, Attributes, RBACAuthorizer, StaticRbac
    from machinery.authn.user import UserInfo

    roles, bindings = bootstrap.policy_objects()
    rbac = RBACAuthorizer(StaticRbac(roles, [], bindings, []))
    user = UserInfo(who, ("system:authenticated",))
    lease = who.removeprefix("system:")
    for verb, name in (("get", lease), ("create", ""), ("update", lease)):
        attrs = Attributes(user, verb, True, "", "coordination.k8s.io", "v1", "leases", "", "kube-system", name, "")
        assert rbac.authorize(attrs)[0] == ALLOW, (who, verb)
    event = Attributes(user, "create", True, "", "", "v1", "events", "", "kube-system", "", "")
    assert rbac.authorize(event)[0] == ALLOW
    nobody = UserInfo("alice", ("system:authenticated",))
    denied = Attributes(nobody, "update", True, "", "coordination.k8s.io", "v1", "leases", "", "kube-system", lease, "")
    assert rbac.authorize(denied)[0] != ALLOW


# -- the elector's loops, on an in-memory Lease ---------------------------------------------------------------


class LeaseStore:
    """The three calls a LeaderElector makes, on one in-memory Lease with resourceVersion compare-and-swap
    (the apiserver's semantics for them); `down` makes every call fail as an unreachable apiserver does."""

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.version = 0
        self.down = False
        self.calls: list[tuple[str, str]] = []  # (verb, outcome)

    def _answer(self, verb: str, outcome: str) -> None:
        self.calls.append((verb, outcome))
        if outcome == "unavailable":
            raise ApiUnavailable(f"{verb}: connection refused")
        if outcome != "ok":
            raise ApiError(Status(status="Failure", reason=outcome, code=409 if outcome != "NotFound" else 404),
                           409 if outcome != "NotFound" else 404)

    def _store(self, lease: Lease) -> Lease:
        self.version += 1
        self.lease = lease.model_copy(deep=True, update={"metadata": lease.metadata.model_copy(
            update={"resource_version": str(self.version)})})
        return self.lease.model_copy(deep=True)

    async def get(self, model: type[Lease], name: str, namespace: str | None = None) -> Lease:
        self._answer("get", "unavailable" if self.down else "ok" if self.lease is not None else "NotFound")
        assert self.lease is not None
        return self.lease.model_copy(deep=True)

    async def create(self, lease: Lease) -> Lease:
        self._answer("create", "unavailable" if self.down else "ok" if self.lease is None else "AlreadyExists")
        return self._store(lease)

    async def update(self, lease: Lease) -> Lease:
        current = self.lease.metadata.resource_version if self.lease is not None else None
        self._answer("update", "unavailable" if self.down
                     else "ok" if lease.metadata.resource_version == current else "Conflict")
        return self._store(lease)

    def holder(self) -> str | None:
        return self.lease.spec.holder_identity if self.lease is not None and self.lease.spec else None


class Leading:
    """on_started_leading / on_stopped_leading that record what happened to the work."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False
        self.stopped_calls = 0
        self.stopped_at = 0.0
        self.cleanup_seconds = 0.0
        self.holder_after_cleanup: str | None = None
        self.renewals_during_cleanup = 0
        self.store: LeaseStore | None = None

    async def work(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            renewed = self.store.calls.count(("update", "ok")) if self.store is not None else 0
            await asyncio.sleep(self.cleanup_seconds)  # winding down (in-flight writes, flushes)
            if self.store is not None:
                self.holder_after_cleanup = self.store.holder()
                self.renewals_during_cleanup = self.store.calls.count(("update", "ok")) - renewed
            raise

    def stopped(self) -> None:
        self.stopped_calls += 1
        self.stopped_at = time.monotonic()


def elector_on(store: LeaseStore, leading: Leading, identity: str = ME) -> LeaderElector:
    return LeaderElector(store, name="kube-thing", identity=identity, lease_duration=2.0,  # type: ignore[arg-type]
                         renew_deadline=1.0, retry_period=0.2, on_started_leading=leading.work,
                         on_stopped_leading=leading.stopped)


async def _lead_then(store: LeaseStore, leading: Leading, elector: LeaderElector,
                     act: Callable[[], None]) -> asyncio.Event:
    stop = asyncio.Event()
    task = asyncio.create_task(elector.run(stop))
    await asyncio.wait_for(leading.started.wait(), 10)
    assert store.holder() == ME and store.calls[:2] == [("get", "NotFound"), ("create", "ok")]
    # at least one renewal first, so the loop is in its steady state
    await asyncio.wait_for(_until(lambda: ("update", "ok") in store.calls), 10)
    act()
    await asyncio.wait_for(task, 10)  # ends by itself: the lease is lost
    return stop


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)


def test_a_renewal_that_finds_another_holder_stops_at_once_without_writing_back() -> None:
    store, leading = LeaseStore(), Leading()
    elector = elector_on(store, leading)
    mark: list[int] = []

    def steal() -> None:
        assert store.lease is not None and store.lease.spec is not None
        store._store(store.lease.model_copy(update={"spec": store.lease.spec.model_copy(
            update={"holder_identity": OTHER, "lease_duration_seconds": 60})}))
        mark.append(len(store.calls))

    asyncio.run(_lead_then(store, leading, elector, steal))
    assert elector.lost and leading.cancelled and leading.stopped_calls == 1
    # one optimistic write refused, one read that shows the thief: no retries until the deadline, no write-back
    assert store.calls[mark[0]:] == [("update", "Conflict"), ("get", "ok")]
    assert store.holder() == OTHER


def test_a_leader_that_cannot_renew_stops_once_the_renew_deadline_has_passed() -> None:
    store, leading = LeaseStore(), Leading()
    elector = elector_on(store, leading)
    marks: dict[str, float] = {}

    def cut_off() -> None:
        marks["last_renewal_seen"] = elector._last_renew
        store.down = True

    asyncio.run(_lead_then(store, leading, elector, cut_off))
    assert elector.lost and leading.cancelled and leading.stopped_calls == 1
    failed = [c for c in store.calls if c[1] == "unavailable"]
    assert len(failed) >= 2, store.calls  # it kept trying until the deadline, not giving up at the first error
    # ... and stopped only then (the elector's clock is time.monotonic)
    assert leading.stopped_at - marks["last_renewal_seen"] >= elector.renew_deadline


def test_stopping_winds_the_work_down_while_holding_the_lease_then_releases_it() -> None:
    store, leading = LeaseStore(), Leading()
    leading.store, leading.cleanup_seconds = store, 0.6  # longer than a retry period: renewals go on meanwhile
    elector = elector_on(store, leading)
    holder: dict[str, Any] = {}

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(elector.run(stop))
        await asyncio.wait_for(leading.started.wait(), 10)
        assert store.lease is not None and store.lease.spec is not None
        holder["transitions"] = store.lease.spec.lease_transitions
        stop.set()
        await asyncio.wait_for(task, 10)

    asyncio.run(scenario())
    assert leading.cancelled and leading.holder_after_cleanup == ME and not elector.lost
    assert leading.renewals_during_cleanup >= 1  # the lease stays renewed while the work may still write
    assert leading.stopped_calls == 1
    assert store.lease is not None and store.lease.spec is not None
    spec = store.lease.spec
    assert (spec.holder_identity, spec.lease_duration_seconds, spec.lease_transitions) == ("", 1, holder["transitions"])
    assert spec.acquire_time == spec.renew_time


def test_a_candidate_leaves_a_renewed_lease_alone_and_takes_it_once_it_expires() -> None:
    store = LeaseStore()
    first, second = Leading(), Leading()
    a, b = elector_on(store, first, ME), elector_on(store, second, OTHER)

    async def scenario() -> tuple[str, str]:
        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        task_a = asyncio.create_task(a.run(stop_a))
        await asyncio.wait_for(first.started.wait(), 10)
        task_b = asyncio.create_task(b.run(stop_b))
        # A renews several times while B campaigns: B never leads
        renewals = store.calls.count(("update", "ok"))
        await asyncio.wait_for(_until(lambda: store.calls.count(("update", "ok")) >= renewals + 5), 10)
        assert not second.started.is_set() and store.holder() == ME
        assert store.lease is not None and store.lease.spec is not None
        # A dies (no release): its last renewal stands until B's clock says it ran out
        task_a.cancel()
        await asyncio.gather(task_a, return_exceptions=True)
        last_renew = store.lease.spec.renew_time
        await asyncio.wait_for(second.started.wait(), 10)
        acquired = store.lease.spec.acquire_time
        stop_b.set()
        await asyncio.wait_for(task_b, 10)
        assert last_renew is not None and acquired is not None
        return last_renew, acquired

    last_renew, acquired = asyncio.run(scenario())
    gap = (dt.datetime.strptime(acquired, "%Y-%m-%dT%H:%M:%S.%fZ")
           - dt.datetime.strptime(last_renew, "%Y-%m-%dT%H:%M:%S.%fZ"))
    assert gap >= dt.timedelta(seconds=2), gap  # never while A's 2 s lease could still be valid
