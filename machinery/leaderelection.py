"""Leader election through a coordination.k8s.io/v1 Lease (client-go's tools/leaderelection with a LeaseLock).

Replicas of a component (kube-controller-manager, kube-scheduler) each run a LeaderElector on the same
Lease (kube-system/<component>); the one whose identity (`<hostname>_<uuid>`) holds it acts, the others
stand by:

- A candidate tries every retry period (jittered up to +120 %, upstream's JitterFactor 1.2). It takes the
  Lease when there is none (create), when the holder is empty (released), or when the record has not
  changed for leaseDurationSeconds as measured by its *own* clock from the moment it saw the record
  change, never by the renewTime another host wrote (so clock skew does not matter).
- Every write is a compare-and-swap on metadata.resourceVersion (a PUT of the object as read), so of two
  candidates racing for an expired Lease exactly one wins; the other gets 409 Conflict.
- The leader renews every retry period. It stops leading at once when a renewal finds another holder
  (upstream keeps retrying until the renew deadline even then; stopping at once is the safe side), and
  when no renewal has succeeded for renew deadline (< lease duration, so it has stopped before anyone
  else may take over). The component then exits, as upstream's does ("leaderelection lost").
- Stopping on purpose (the `stop` event) winds the work down while still renewing, then releases the
  Lease as upstream's ReleaseOnCancel does: holderIdentity "", leaseDurationSeconds 1, acquire and renew
  time now, transitions kept, so a standby takes over at its next try instead of a lease duration later.
- Taking the Lease records the event "<identity> became leader" (reason LeaderElection) on it; losing or
  giving it up, "<identity> stopped leading".

The decisions (is the observed lease still valid, what record to write, is the renew deadline past) are
plain functions on LeaderElectionRecord, tested without a server; LeaderElector does the I/O.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import math
import os
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NoReturn

from machinery.api.coordination_v1 import Lease, LeaseSpec
from machinery.api.meta import ObjectMeta
from machinery.client import ApiClient, ApiError, ClientError
from machinery.events import EventRecorder
from machinery.timeutil import duration_flag, now_rfc3339_micro

log = logging.getLogger(__name__)

# upstream's defaults (component-base LeaderElectionConfiguration) and wait.Jitter factor
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
DEFAULT_NAMESPACE = "kube-system"
JITTER_FACTOR = 1.2


def new_identity() -> str:
    """`<hostname>_<uuid>`, as kube-controller-manager and kube-scheduler name themselves."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


# -- the pure decisions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderElectionRecord:
    """What a Lease's spec says about leadership (client-go's resourcelock.LeaderElectionRecord)."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    leader_transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Lease) -> LeaderElectionRecord:
        spec = lease.spec or LeaseSpec()
        return cls(spec.holder_identity or "", spec.lease_duration_seconds or 0, spec.acquire_time,
                   spec.renew_time, spec.lease_transitions or 0)

    def to_spec(self) -> LeaseSpec:
        return LeaseSpec(holder_identity=self.holder_identity, lease_duration_seconds=self.lease_duration_seconds,
                         acquire_time=self.acquire_time, renew_time=self.renew_time,
                         lease_transitions=self.leader_transitions)


def lease_valid(observed: LeaderElectionRecord, observed_at: float, now: float) -> bool:
    """Is the lease still held: less than its duration since this process saw the record change?"""
    return observed_at + observed.lease_duration_seconds > now


def next_record(current: LeaderElectionRecord | None, observed_at: float, now: float, identity: str,
                lease_duration_seconds: int, wall_now: str) -> LeaderElectionRecord | None:
    """The record to write to acquire or renew the lease, or None while someone else validly holds it.

    `current` is the record just read (None: there is no Lease yet, so create one). The holder renews
    keeping its acquireTime and transition count; anyone else taking over counts one more transition.
    """
    record = LeaderElectionRecord(identity, lease_duration_seconds, wall_now, wall_now, 0)
    if current is None:
        return record
    if current.holder_identity == identity:
        return dataclasses.replace(record, acquire_time=current.acquire_time,
                                   leader_transitions=current.leader_transitions)
    if current.holder_identity and lease_valid(current, observed_at, now):
        return None
    return dataclasses.replace(record, leader_transitions=current.leader_transitions + 1)


def released_record(current: LeaderElectionRecord, wall_now: str) -> LeaderElectionRecord:
    """What giving the lease up writes (client-go's release()): no holder, a 1 s lease, transitions kept."""
    return LeaderElectionRecord("", 1, wall_now, wall_now, current.leader_transitions)


def renew_overdue(last_renew: float, now: float, renew_deadline: float) -> bool:
    """Has the leader gone renew deadline without a successful renewal (it must stop acting)?"""
    return now - last_renew >= renew_deadline


def jittered(period: float, rng: random.Random | None = None) -> float:
    """wait.Jitter(period, 1.2): somewhere in [period, 2.2 * period), so candidates do not try in step."""
    return period * (1.0 + (rng or random).random() * JITTER_FACTOR)


def validate_timings(lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    """Upstream's NewLeaderElector checks, on the whole seconds the Lease can carry; ValueError if unsafe."""
    if retry_period <= 0:
        raise ValueError("retryPeriod must be greater than zero")
    if renew_deadline <= 0:
        raise ValueError("renewDeadline must be greater than zero")
    if math.floor(lease_duration) < 1:
        raise ValueError("leaseDuration must be at least 1s (leaseDurationSeconds is whole seconds)")
    if math.floor(lease_duration) <= renew_deadline:
        raise ValueError("leaseDuration must be greater than renewDeadline")
    if renew_deadline <= JITTER_FACTOR * retry_period:
        raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")


# -- the elector ----------------------------------------------------------------------------------


class LeaderElector:
    """Campaigns for one Lease and runs `on_started_leading()` as a task while it holds it.

    `run(stop)` returns when `stop` is set or the work ends by itself (the work is cancelled and wound
    down while the lease is still renewed, then the lease is released; a failure of the work is raised
    afterwards), or when leadership is lost (`lost` is then true, and `on_stopped_leading` is called
    right after the work is cancelled, before it has cleaned up, so a component can exit at once).
    `on_stopped_leading` is called whenever leading ends, never if this process did not lead.
    """

    def __init__(
        self,
        client: ApiClient,
        *,
        name: str,
        on_started_leading: Callable[[], Awaitable[object]],
        namespace: str = DEFAULT_NAMESPACE,
        identity: str | None = None,
        lease_duration: float = DEFAULT_LEASE_DURATION,
        renew_deadline: float = DEFAULT_RENEW_DEADLINE,
        retry_period: float = DEFAULT_RETRY_PERIOD,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        recorder: EventRecorder | None = None,
        release_on_cancel: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        validate_timings(lease_duration, renew_deadline, retry_period)
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity or new_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.recorder = recorder
        self.release_on_cancel = release_on_cancel
        self.clock = clock
        self.lost = False
        self.leading = asyncio.Event()
        self._lease: Lease | None = None  # last read or written: its resourceVersion guards the next write
        self._observed: LeaderElectionRecord | None = None
        self._observed_at = 0.0
        self._reported_leader = ""
        self._last_renew = 0.0

    @property
    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    def is_leader(self) -> bool:
        """Was this process the holder in the record last observed?"""
        return self._observed is not None and self._observed.holder_identity == self.identity

    def leader(self) -> str:
        return self._observed.holder_identity if self._observed is not None else ""

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_at = self.clock()

    # -- one try -------------------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """One attempt (client-go's tryAcquireOrRenew); True if this process holds the lease afterwards."""
        now, wall = self.clock(), now_rfc3339_micro()
        lease_seconds = math.floor(self.lease_duration)
        # fast path: the leader writes over the lease it last saw; a 409 means someone else wrote meanwhile
        if self.is_leader() and self._lease is not None and self._observed is not None \
                and lease_valid(self._observed, self._observed_at, now):
            record = next_record(self._observed, self._observed_at, now, self.identity, lease_seconds, wall)
            assert record is not None
            try:
                await self._write(record)
                return True
            except ClientError as e:
                log.info("failed to update lease %s optimistically, falling back to a read: %s", self.describe, e)
        try:
            lease = await self.client.get(Lease, self.name, self.namespace)
        except ApiError as e:
            if not e.is_not_found:
                log.warning("error retrieving lease %s: %s", self.describe, e)
                return False
            return await self._create(next_record(None, 0.0, now, self.identity, lease_seconds, wall))
        except ClientError as e:
            log.warning("error retrieving lease %s: %s", self.describe, e)
            return False
        self._lease = lease
        current = LeaderElectionRecord.from_lease(lease)
        if current != self._observed:
            self._set_observed(current)
        # times of now, after the read: a takeover's acquireTime is never before the expiry it observed
        record = next_record(current, self._observed_at, self.clock(), self.identity, lease_seconds,
                             now_rfc3339_micro())
        if record is None:
            log.debug("lease %s is held by %s and has not yet expired", self.describe, current.holder_identity)
            return False
        try:
            await self._write(record)
        except ClientError as e:
            log.info("failed to update lease %s: %s", self.describe, e)
            return False
        return True

    async def _create(self, record: LeaderElectionRecord | None) -> bool:
        assert record is not None
        lease = Lease(metadata=ObjectMeta(name=self.name, namespace=self.namespace), spec=record.to_spec())
        try:
            self._lease = await self.client.create(lease)
        except ClientError as e:
            log.warning("error initially creating lease %s: %s", self.describe, e)
            return False
        self._set_observed(record)
        return True

    async def _write(self, record: LeaderElectionRecord) -> None:
        """PUT the record onto the lease last seen: a compare-and-swap on its resourceVersion."""
        assert self._lease is not None
        self._lease = await self.client.update(self._lease.model_copy(update={"spec": record.to_spec()}))
        self._set_observed(record)

    def _maybe_report_transition(self) -> None:
        leader = self.leader()
        if leader and leader != self._reported_leader:
            self._reported_leader = leader
            if self.on_new_leader is not None:
                self.on_new_leader(leader)

    def _event(self, what: str) -> None:
        if self.recorder is not None and self._lease is not None:
            self.recorder.event(self._lease, "Normal", "LeaderElection", f"{self.identity} {what}")

    # -- the loops -----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign until leading or `stop`; lead until the lease is lost or `stop` (see the class doc)."""
        log.info("attempting to acquire leader lease %s as %s...", self.describe, self.identity)
        if not await self._acquire(stop):
            return
        log.info("successfully acquired lease %s", self.describe)
        self._event("became leader")
        await self._lead(stop)

    async def _attempt(self, timeout: float) -> bool:
        """One try, bounded in time (a hung request is a failed try)."""
        try:
            async with asyncio.timeout(timeout):
                return await self.try_acquire_or_renew()
        except TimeoutError:
            log.warning("trying lease %s timed out", self.describe)
            return False

    async def _acquire(self, stop: asyncio.Event) -> bool:
        while not stop.is_set():
            started = self.clock()
            acquired = await self._attempt(self.renew_deadline)
            self._maybe_report_transition()
            if acquired:
                self._last_renew = started
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), jittered(self.retry_period))
        return False

    async def _renew(self) -> str:
        """Renew every retry period until the lease is lost; returns why it was."""
        while True:
            await asyncio.sleep(self.retry_period)
            while True:
                started = self.clock()
                if renew_overdue(self._last_renew, started, self.renew_deadline):
                    return f"failed to renew lease {self.describe}: no renewal for {self.renew_deadline:g}s"
                # a try still in flight at the deadline is a failed one: the leader never acts past it
                renewed = await self._attempt(self._last_renew + self.renew_deadline - started)
                self._maybe_report_transition()
                if renewed:
                    # the write reached the server after `started`: the conservative end of the lease
                    self._last_renew = started
                    break
                if self._observed is not None and not self.is_leader():
                    return f"lease {self.describe} is now held by {self.leader() or 'nobody'}"
                remaining = self._last_renew + self.renew_deadline - self.clock()
                await asyncio.sleep(max(0.0, min(self.retry_period, remaining)))

    async def _lead(self, stop: asyncio.Event) -> None:
        self.leading.set()
        work = asyncio.create_task(self._work(), name=f"leading:{self.describe}")
        renew = asyncio.create_task(self._renew(), name=f"renew:{self.describe}")
        stopped = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({work, renew, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not renew.done():
                # stop asked, or the work ended by itself: let the work finish while the lease is still ours
                work.cancel()
                await asyncio.wait({work, renew}, return_when=asyncio.FIRST_COMPLETED)
            if renew.done():
                error = renew.exception()
                self._lose(work, f"renewing lease {self.describe} failed: {error!r}" if error else renew.result())
            (outcome,) = await asyncio.gather(work, return_exceptions=True)
        finally:
            for task in (work, renew, stopped):
                task.cancel()
            await asyncio.gather(work, renew, stopped, return_exceptions=True)
            self.leading.clear()
        if not self.lost:
            if self.release_on_cancel:
                await self.release()
            self._event("stopped leading")
            if self.on_stopped_leading is not None:
                self.on_stopped_leading()
            if isinstance(outcome, Exception):
                raise outcome  # the work failed on its own: the component decides what that means

    async def _work(self) -> None:
        await self.on_started_leading()

    def _lose(self, work: asyncio.Task[None], why: str) -> None:
        """Stop acting now: cancel the work, then tell the component before the work has cleaned up."""
        work.cancel()
        self.lost = True
        log.error("%s", why)
        self._event("stopped leading")
        if self.on_stopped_leading is not None:
            self.on_stopped_leading()

    async def release(self) -> bool:
        """Give the lease up if this process holds it (client-go's release); False if the write failed."""
        if not self.is_leader() or self._observed is None or self._lease is None:
            return True
        try:
            async with asyncio.timeout(self.renew_deadline):
                await self._write(released_record(self._observed, now_rfc3339_micro()))
        except (ClientError, TimeoutError) as e:
            log.error("failed to release lease %s: %s", self.describe, e)
            return False
        log.info("released lease %s", self.describe)
        return True


def exit_leadership_lost() -> NoReturn:
    """What kube-controller-manager and kube-scheduler do when the lease is lost: log, flush, exit 1 now,
    without running any cleanup that could still write."""
    log.error("leaderelection lost")
    logging.shutdown()
    os._exit(1)


async def run_leader_elected(client: ApiClient, args: argparse.Namespace, component: str,
                             work: Callable[[], Awaitable[object]], stop: asyncio.Event) -> None:
    """What kube-controller-manager and kube-scheduler do with --leader-elect: campaign with the
    --leader-elect-* flags, run `work` while leading, exit the process if the Lease is lost, release
    it once `stop` is set. `client` (its own connection) writes the Lease and its events; closed here."""
    recorder = EventRecorder(client, component)
    elector: LeaderElector

    def stopped_leading() -> None:
        if elector.lost:
            exit_leadership_lost()

    def new_leader(identity: str) -> None:
        if identity != elector.identity:
            log.info("new leader elected: %s", identity)

    elector = LeaderElector(
        client, name=args.leader_elect_resource_name, namespace=args.leader_elect_resource_namespace,
        lease_duration=args.leader_elect_lease_duration, renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period, on_started_leading=work,
        on_stopped_leading=stopped_leading, on_new_leader=new_leader, recorder=recorder)
    try:
        await elector.run(stop)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(recorder.flush(), 2.0)
        recorder.close()
        await client.close()


# -- flags ----------------------------------------------------------------------------------------

# the flags' duration type (machinery/timeutil.py), under the name the components import
parse_duration = duration_flag


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "t"):
        return True
    if value in ("false", "0", "no", "f"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r}")


def add_flags(parser: argparse.ArgumentParser, resource_name: str) -> None:
    """Upstream's --leader-elect* flags (component-base BindLeaderElectionFlags)."""
    parser.add_argument("--leader-elect", type=parse_bool, nargs="?", const=True, default=True,
                        help="start a leader election client and gain leadership before acting (run replicated "
                             "for high availability; default true)")
    parser.add_argument("--leader-elect-lease-duration", type=parse_duration, default=DEFAULT_LEASE_DURATION,
                        help="how long a standby waits after the last renewal it saw before taking over (15s)")
    parser.add_argument("--leader-elect-renew-deadline", type=parse_duration, default=DEFAULT_RENEW_DEADLINE,
                        help="how long the leader keeps trying to renew before it stops leading (10s)")
    parser.add_argument("--leader-elect-retry-period", type=parse_duration, default=DEFAULT_RETRY_PERIOD,
                        help="between tries to acquire or renew (2s)")
    parser.add_argument("--leader-elect-resource-lock", default="leases", choices=["leases"],
                        help="the kind of lock object (only leases, upstream's default)")
    parser.add_argument("--leader-elect-resource-name", default=resource_name,
                        help=f"name of the Lease (default {resource_name})")
    parser.add_argument("--leader-elect-resource-namespace", default=DEFAULT_NAMESPACE,
                        help=f"namespace of the Lease (default {DEFAULT_NAMESPACE})")


def check_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject unsafe timings (parser.error exits 2 with one readable line)."""
    if not args.leader_elect:
        return
    try:
        validate_timings(args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
                         args.leader_elect_retry_period)
    except ValueError as e:
        parser.error(f"--leader-elect-*: {e}")
    if not args.leader_elect_resource_name or not args.leader_elect_resource_namespace:
        parser.error("--leader-elect-resource-name and --leader-elect-resource-namespace must not be empty")
