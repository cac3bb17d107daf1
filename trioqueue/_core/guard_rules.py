"""The guard: one per worker pool, renewing every due lease in one shared statement.

Theory of operation
-------------------
Batches register here before anything runs for them. Each batch has a *local lease
deadline* (the fence) and a *next due* time. The guard owns a single renewal **slot**: at
most one renewal statement is current at a time, and it carries every pending job of every
due batch, so the statement count per beat does not grow with the number of jobs.

Healthy batches are renewed on a pool-wide beat (``anchor + k·H``), so batches claimed at
different moments still share one statement per beat. A batch's first renewal is sent as
soon as it registers, for the handlers that run: a batch whose every job's work has already
ended when its first beat would go (``work_ended``: each outcome decided, its write perhaps
still out) is owed none, and is next due on the pool's beat like any renewed batch. A
cancel directive could no longer change those outcomes (I8), and the claim's own lease
covers their writes (docs/protocol.rst §10, refinement 12). A failed renewal is retried
after ``min(H, max(0.25, remaining/2))``.

A batch's **stop** and its **lease** are two separate things. The stop says why its
cancel scope was stopped (the first deadline to pass: lease, ``max_job_duration`` or
shutdown); it is frozen at first sight and decides the attempt's outcome (invariant I8). The
lease says whether the rows are still ours. A stopped batch whose handler is still unwinding
(a ``finally`` under a shield, a synchronous handler in its thread) still owns its jobs, so
it stays in the renewals, and its verdicts still count, until every job's handler and claim
hook have exited (``job_done``). Only a lost lease ends the renewals early: the fence
passing (``lost``), or a job reclaimed or gone (that job alone). See docs/protocol.rst §4.

Every renewal carries a **token**. An answer whose token is not the current one changes
nothing (invariant I6). A renewal that has not come back ``GRACE`` after its give-up time is
**abandoned**: its slot is freed so that later batches can be renewed on another connection.
Only one renewal may be abandoned at a time; while one is, the current renewal is never
abandoned, so a wedged backend holds at most two connections (invariant I5). When the
abandoned call finally exits, a current renewal already past its own give-up time is
abandoned in its place.

A **lone beat** (the pool's heartbeat row, sent when no renewal went out for a while) holds a
connection too. It goes only while no renewal holds one, and while it is out it counts as the
abandoned slot: the current renewal is not abandoned meanwhile, so a wedged beat plus a
wedged renewal still hold two connections, not three (I5).

The trio runtime turns the :class:`Effects` of each call into cancel-scope changes; the core
itself never waits and never reads a clock.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from trioqueue._core.checkpoint import CheckpointSlot
from trioqueue._core.fence import advanced_deadline, initial_deadline
from trioqueue._core.rules import VERDICT_RULES, StopReason
from trioqueue._core.timing import GRACE, MIN_RETRY, Timing, renewal_timeout, retry_delay
from trioqueue._core.wire import RenewItem, Verdict


@dataclass(slots=True)
class JobLease:
    """The guard's view of one job of a batch."""

    job_id: int
    claim_seq: int
    # True while its claim hook or handler may still run: False only once the runtime has
    # settled its outcome (``job_done``), after both have exited.
    pending: bool = True
    progress: float | None = None  # latest valid value, sent with every renewal
    gone_seen: bool = False  # the previous renewal said GONE: one more confirms it
    stop: StopReason | None = None  # job-level stop (cancel, reclaimed, gone)
    # Carried by renewals: pending, and its row not lost (reclaimed or gone). A field, not
    # a property: renewals read it for every job in flight.
    renewed: bool = True
    # Its claim hook and handler have exited and its outcome is decided (``work_ended``),
    # though perhaps not yet written: it is still renewed, but owed no first beat.
    ended: bool = False
    # The attempt's checkpoint (docs/protocol.rst §16): None until its first one.
    checkpoint: CheckpointSlot | None = None

    # The runtime holds each job's lease (``BatchHandle.leases``) and tells it these two
    # events directly: a lookup by batch and job for each would cost more than the event.

    def end_work(self) -> None:
        """Its claim hook and handler have exited and its outcome is decided."""
        self.ended = True

    def settle(self) -> None:
        """Its outcome is settled, after its claim hook and handler exited: renewed no
        more. Not before: a stopped handler still unwinding keeps its lease."""
        self.pending = self.renewed = False


class OneJob(Mapping[int, JobLease]):
    """The jobs of a batch of one, by id: a mapping that holds its one lease and nothing
    else. A dict of one entry costs about 230 bytes; this costs 48, for every batch in
    flight at batch size 1 (memory per job is a bench goal, docs/performance.rst)."""

    __slots__ = ("_job",)

    def __init__(self, job: JobLease) -> None:
        self._job = job

    def __getitem__(self, job_id: int) -> JobLease:
        if job_id != self._job.job_id:
            raise KeyError(job_id)
        return self._job

    def __contains__(self, job_id: object) -> bool:
        return job_id == self._job.job_id

    def __iter__(self) -> Iterator[int]:
        yield self._job.job_id

    def __len__(self) -> int:
        return 1

    def values(self) -> tuple[JobLease]:  # type: ignore[override]
        return (self._job,)


@dataclass(slots=True)
class BatchLease:
    """The guard's view of one claimed batch: one lease, one deadline, one scope."""

    batch_id: int
    jobs: Mapping[int, JobLease]  # a dict, or a OneJob for a batch of one
    lease_deadline: float
    duration_deadline: float
    next_due: float
    # Why the batch's scope was stopped: frozen at first sight of a passed deadline.
    stop: StopReason | None = None
    # The fence passed: the lease is gone, so nothing of the batch is renewed any more.
    lost: bool = False
    wanted: bool = False  # a cancel notice asked for a renewal not yet sent
    beaten: bool = False  # its first beat went out (or was not owed)

    def renewed(self) -> Iterable[JobLease]:
        return (job for job in self.jobs.values() if job.renewed)


@dataclass(frozen=True, slots=True)
class Renewal:
    """One renewal statement the runtime must send."""

    token: int
    batch_ids: frozenset[int]
    items: tuple[RenewItem, ...]
    sent_at: float  # local time read before the statement is sent
    give_up_at: float  # the statement's timeout

    @property
    def abandon_at(self) -> float:
        return self.give_up_at + GRACE


@dataclass(slots=True)
class Effects:
    """What the runtime must do after a call into the core."""

    #: Batches whose scope deadline may have changed: re-read :meth:`GuardCore.scope_deadline`.
    #: Every batch a sent, answered, failed or abandoned renewal carried, lost ones too
    #: (docs/protocol.rst §10, refinement 18).
    moved: set[int] = field(default_factory=set)
    #: ``(batch_id, job_id, reason)``: stop that job's handler now; its attempt is over.
    stops: list[tuple[int, int, StopReason]] = field(default_factory=list)
    #: ``(batch_id, job_id)``: deliver a cancel directive to that job's handler.
    cancels: list[tuple[int, int]] = field(default_factory=list)
    #: The token of a renewal that was just abandoned, if any.
    abandoned: int | None = None


class GuardCore:
    """The guard's state machine. Every method takes ``now``; none waits or does I/O."""

    def __init__(self, timing: Timing) -> None:
        self.timing = timing
        self.current: Renewal | None = None
        self.abandoned: Renewal | None = None
        self.beating = False  # a lone beat holds a connection
        self.shutdown_at = math.inf
        self._batches: dict[int, BatchLease] = {}
        self._job_batch: dict[int, int] = {}
        self._next_token = 1
        # (next_due, batch_id) of every batch waiting for a renewal; entries go stale when a
        # batch is rescheduled and are skipped when they surface.
        self._due: list[tuple[float, int]] = []
        self._anchor: float | None = None
        self._last_duration = 0.0  # how long the last answered renewal took

    # -- registration -------------------------------------------------------------------

    def register(
        self,
        batch_id: int,
        jobs: Sequence[tuple[int, int]],
        *,
        claim_sent: float,
        now: float,
        wall_now: float,
        row_deadlines: Iterable[float],
    ) -> bool:
        """Register a claimed batch of ``(job_id, claim_seq)``; False if already expired.

        An expired batch is not registered: its handler must never run (invariant I7).
        """
        v = self.timing.visibility_timeout
        deadline = initial_deadline(claim_sent, v, now, wall_now, row_deadlines)
        if deadline <= now:
            return False
        if self._anchor is None:
            self._anchor = now
        d = self.timing.max_job_duration
        self._batches[batch_id] = BatchLease(
            batch_id=batch_id,
            jobs=OneJob(JobLease(*jobs[0]))
            if len(jobs) == 1
            # By job id, not claim order: the cancels and stops of an answer come out in
            # this order (docs/protocol.rst §10, refinement 13).
            else {job_id: JobLease(job_id, seq) for job_id, seq in sorted(jobs)},
            lease_deadline=deadline,
            duration_deadline=math.inf if d is None else now + d,
            next_due=now,  # the first beat is immediate
        )
        heapq.heappush(self._due, (now, batch_id))
        for job_id, _ in jobs:
            self._job_batch[job_id] = batch_id
        return True

    def unregister(self, batch_id: int) -> None:
        batch = self._batches.pop(batch_id, None)
        if batch is not None:
            for job_id in batch.jobs:
                if self._job_batch.get(job_id) == batch_id:
                    del self._job_batch[job_id]

    def job_done(self, batch_id: int, job_id: int) -> None:
        """The job's claim hook and handler have exited and its outcome is settled: it is
        renewed no more. Not before: a stopped handler still unwinding keeps its lease."""
        batch = self._batches.get(batch_id)
        if batch is not None and job_id in batch.jobs:
            batch.jobs[job_id].settle()

    def work_ended(self, batch_id: int, job_id: int) -> None:
        """The job's claim hook and handler have exited and its outcome is decided; it is
        still renewed until :meth:`job_done`, but a first beat is owed to running work only."""
        batch = self._batches.get(batch_id)
        if batch is not None and job_id in batch.jobs:
            batch.jobs[job_id].end_work()

    def job(self, batch_id: int, job_id: int) -> JobLease:
        return self._batches[batch_id].jobs[job_id]

    def batch(self, batch_id: int) -> BatchLease:
        return self._batches[batch_id]

    def batch_ids(self) -> list[int]:
        return list(self._batches)

    # -- deadlines ------------------------------------------------------------------------

    def fence_time(self, batch: BatchLease) -> float:
        """When the lease fence fires for ``batch``.

        A renewal carrying the batch that was sent before the deadline may have re-leased
        the row, so the fence waits for that renewal's give-up time (at most
        ``deadline + MIN_RETRY``, since the timeout is bounded by the earliest lease).
        """
        current = self.current
        if (
            current is not None
            and batch.batch_id in current.batch_ids
            and current.sent_at < batch.lease_deadline
        ):
            return max(batch.lease_deadline, current.give_up_at)
        return batch.lease_deadline

    def scope_deadline(self, batch_id: int) -> float:
        """The deadline of the batch's cancel scope: ``min(fence, registration + D, shutdown)``."""
        batch = self._batches[batch_id]
        return min(self.fence_time(batch), batch.duration_deadline, self.shutdown_at)

    def batch_stop(self, batch_id: int, now: float) -> StopReason | None:
        """Why the batch's scope was stopped, frozen at first sight; None while it is live."""
        batch = self._batches[batch_id]
        self._expire_if_due(batch, now)
        return batch.stop

    def _expire_if_due(self, batch: BatchLease, now: float) -> None:
        if batch.lost:
            return
        fence = self.fence_time(batch)
        first = min(fence, batch.duration_deadline, self.shutdown_at)
        if batch.stop is None and first <= now:
            # The first deadline to pass stopped the scope, however late the core looks;
            # deadlines that pass together give one reason: lease > duration > shutdown (I8).
            if fence == first:
                batch.stop = StopReason.LEASE_EXPIRED
            elif batch.duration_deadline == first:
                batch.stop = StopReason.DURATION
            else:
                batch.stop = StopReason.SHUTDOWN
        # A batch stopped earlier keeps its reason (the first stop wins), but once its fence
        # has passed it is renewed no more: its rows may be claimed by another worker.
        batch.lost = fence <= now

    def begin_shutdown(self, now: float, grace: float) -> Effects:
        """Every batch's scope deadline becomes at most ``now + grace``."""
        self.shutdown_at = min(self.shutdown_at, now + grace)
        return Effects(moved=set(self._batches))

    # -- the renewal slot -----------------------------------------------------------------

    def next_renewal(self, now: float) -> Renewal | None:
        """The renewal to send now, if the slot is free and some batch is due."""
        if self.current is not None:
            return None
        due = self._pop_due(now, until=now)
        if due:
            # Batches due before this statement is likely back ride along: they would only
            # wait for the slot, then go alone. Without this, statements longer than H / 2
            # split a pool into groups that alternate for ever (I10: one statement per beat).
            lookahead = min(self._last_duration, self.timing.heartbeat_interval / 2)
            due += self._pop_due(now, until=now + lookahead)
            due = [batch for batch in due if self._owed_a_beat(batch, now)]
        items = tuple(
            RenewItem(
                job.job_id,
                job.claim_seq,
                job.progress,
                None if job.checkpoint is None else job.checkpoint.outgoing(),
            )
            for batch in due
            for job in batch.renewed()
        )
        if not items:
            return None
        for batch in due:
            batch.wanted = False
            batch.beaten = True
        earliest = min(batch.lease_deadline for batch in due) - now
        renewal = Renewal(
            token=self._next_token,
            batch_ids=frozenset(batch.batch_id for batch in due),
            items=items,
            sent_at=now,
            give_up_at=now + renewal_timeout(self.timing.visibility_timeout, earliest),
        )
        self._next_token += 1
        self.current = renewal
        return renewal

    def answered(self, token: int, now: float, verdicts: Mapping[int, Verdict]) -> Effects:
        """A renewal came back with a verdict per job (a missing job counts as UNCHANGED)."""
        renewal = self._settle(token, now)
        if renewal is None:
            return self._after_abandoned_exit(token, now)
        self._last_duration = now - renewal.sent_at
        effects = Effects(moved=set(renewal.batch_ids))
        for batch in self._carried(renewal, by_id=True):
            if not batch.lost:  # a stopped batch's verdicts count while its handler unwinds
                self._apply_verdicts(batch, renewal, now, verdicts, effects)
        return effects

    def failed(self, token: int, now: float) -> Effects:
        """A renewal raised or timed out: every batch it carried is retried sooner."""
        renewal = self._settle(token, now)
        if renewal is None:
            return self._after_abandoned_exit(token, now)
        return self._retry_all(renewal, now)

    def poll(self, now: float) -> Effects:
        """Abandon the current renewal if it is past its give-up time plus the grace; the
        batches it carried are paced as after a failure (docs/protocol.rst §10, refinement
        22)."""
        current = self.current
        if current is None or self._slot_taken() or now < current.abandon_at:
            return Effects()
        self.abandoned, self.current = current, None
        effects = self._retry_all(current, now)
        effects.abandoned = current.token
        return effects

    def next_wake(self, now: float) -> float:
        """When the runtime should next call :meth:`poll` and :meth:`next_renewal`, asked
        at ``now`` (docs/protocol.rst §10, refinement 16).

        While a renewal is out: its abandon time, or ``inf`` while it cannot be abandoned
        (another call already is, or a lone beat is out): there is nothing to wait for but
        a call's exit. Otherwise the earliest due time of a batch that can still be renewed
        then: a job of it still renewed, its lease not lost by ``now``, and its due time
        before its fence. A batch due at or after its fence is never named: it would be
        lost by then, so a wake for it would do nothing (it may still ride along with a
        renewal that other batches are due for before its fence passes).
        """
        if self.current is not None:
            return math.inf if self._slot_taken() else self.current.abandon_at
        late: list[tuple[float, int]] = []  # due after their fence: kept for ride-alongs
        wake = math.inf
        while self._due:
            when, batch_id = self._due[0]
            batch = self._batches.get(batch_id)
            if batch is not None and batch.next_due == when:
                self._expire_if_due(batch, now)
                if self._renewable(batch):
                    if when < batch.lease_deadline:
                        wake = when
                        break
                    late.append(heapq.heappop(self._due))
                    continue
            heapq.heappop(self._due)  # stale: rescheduled, lost or settled since
        for entry in late:
            heapq.heappush(self._due, entry)
        return wake

    def connections_held(self) -> int:
        """Statements still holding a connection (current, abandoned, a lone beat)."""
        return (self.current is not None) + (self.abandoned is not None) + self.beating

    def begin_beat(self) -> bool:
        """May a lone beat go now? Only while no statement holds a connection; if so it is
        counted as out until :meth:`end_beat`."""
        if self.connections_held():
            return False
        self.beating = True
        return True

    def end_beat(self, now: float) -> Effects:
        """The lone beat's call exited: its connection is back, so a current renewal that is
        already past its abandon time may now be abandoned."""
        self.beating = False
        return self.poll(now)

    def request_renewal(self, job_id: int, now: float) -> bool:
        """A cancel notice for ``job_id`` arrived: renew its batch at once."""
        batch_id = self._job_batch.get(job_id)
        if batch_id is None:
            return False
        batch = self._batches[batch_id]
        self._set_due(batch, min(batch.next_due, now))
        batch.wanted = True  # remembered: a renewal already out does not carry the request
        return True

    # -- internals ------------------------------------------------------------------------

    def _settle(self, token: int, now: float) -> Renewal | None:
        current = self.current
        if current is None or current.token != token:
            return None
        # Judge expiry while the renewal still counts as in flight: an answer that arrives
        # before its give-up time is in time, even when the old lease ran out meanwhile
        # (docs/protocol.rst §10, refinement 17).
        for batch in self._carried(current):
            self._expire_if_due(batch, now)
        self.current = None
        return current

    def _slot_taken(self) -> bool:
        """The one connection a wedge may cost is spent: by an abandoned renewal or a beat."""
        return self.abandoned is not None or self.beating

    def _after_abandoned_exit(self, token: int, now: float) -> Effects:
        # A late or superseded answer changes nothing (I6). If it was the abandoned call
        # exiting, its connection is back, so a stuck current renewal may now be abandoned.
        if self.abandoned is None or self.abandoned.token != token:
            return Effects()
        self.abandoned = None
        return self.poll(now)

    def _carried(self, renewal: Renewal, *, by_id: bool = False) -> list[BatchLease]:
        """The batches ``renewal`` carried that are still registered; ``by_id`` for an
        answer: by batch id, never in a set's iteration order, as the cancels and stops it
        delivers come out in this order and every port must reproduce it (docs/protocol.rst
        §10, refinement 13). Expiry and retries deliver neither: any order will do."""
        ids = sorted(renewal.batch_ids) if by_id else renewal.batch_ids
        return [self._batches[bid] for bid in ids if bid in self._batches]

    def _pop_due(self, now: float, *, until: float) -> list[BatchLease]:
        """Every live batch due by ``until``. A heap keeps this O(due · log n), not O(n)."""
        due: dict[int, BatchLease] = {}
        while self._due and self._due[0][0] <= until:
            when, batch_id = heapq.heappop(self._due)
            batch = self._batches.get(batch_id)
            if batch is None or batch.next_due != when:
                continue  # a stale entry: the batch was rescheduled or unregistered
            self._expire_if_due(batch, now)
            if self._renewable(batch):
                due[batch_id] = batch
        return list(due.values())

    def _owed_a_beat(self, batch: BatchLease, now: float) -> bool:
        """False for a first beat that no running work needs: every job still renewed has
        already ended (and no cancel notice asks for the batch). Such a batch is next due on
        the pool's beat instead, as if just renewed: no later than ``V - H`` before its
        claim's lease runs out, which covers the writes of its outcomes meanwhile."""
        if batch.beaten or batch.wanted or not all(job.ended for job in batch.renewed()):
            return True
        v, h = self.timing.visibility_timeout, self.timing.heartbeat_interval
        due_at = min(self._next_beat(now), batch.lease_deadline - (v - h))
        if due_at <= now:
            return True  # a claim that arrived with little lease left: beat now after all
        batch.beaten = True
        self._set_due(batch, due_at)
        return False

    @staticmethod
    def _renewable(batch: BatchLease) -> bool:
        # Not ``batch.stop``: a stopped batch keeps its lease until its handlers exit.
        return not batch.lost and any(job.renewed for job in batch.jobs.values())

    def _set_due(self, batch: BatchLease, when: float) -> None:
        batch.next_due = when
        heapq.heappush(self._due, (when, batch.batch_id))

    def _retry_all(self, renewal: Renewal, now: float) -> Effects:
        for batch in self._carried(renewal):
            _unsure_checkpoints(batch)
            self._expire_if_due(batch, now)
            if not batch.lost:
                self._schedule_retry(batch, now)
                if batch.wanted:
                    self._set_due(batch, min(batch.next_due, now))
        return Effects(moved=set(renewal.batch_ids))

    def _schedule_retry(self, batch: BatchLease, now: float) -> None:
        remaining = batch.lease_deadline - now
        self._set_due(batch, now + retry_delay(self.timing.heartbeat_interval, remaining))

    def _next_beat(self, after: float) -> float:
        """The pool's first beat strictly after ``after`` (docs/protocol.rst §10, refinement
        21): the anchor is the first accepted registration's ``now``."""
        h = self.timing.heartbeat_interval
        anchor = after if self._anchor is None else self._anchor
        beat = anchor + (math.floor((after - anchor) / h) + 1) * h
        # Rounding can land the beat on ``after`` itself (4.3 / 0.1 floors to 42): then the
        # batch would be due again at once, and the guard would spin without time passing.
        return beat if beat > after else beat + h

    def _apply_verdicts(
        self,
        batch: BatchLease,
        renewal: Renewal,
        now: float,
        verdicts: Mapping[int, Verdict],
        effects: Effects,
    ) -> None:
        renewed_all = True
        confirm_gone = False
        # A job renewed now was renewed when the renewal was built, so it was carried.
        for job in batch.jobs.values():
            if not job.renewed:
                continue  # settled, possibly while the renewal was out; or lost before
            verdict = verdicts.get(job.job_id, Verdict.UNCHANGED)
            rule = VERDICT_RULES[verdict]
            if rule.believed_after > 1 and not job.gone_seen:
                # Maybe our own ack raced the renewal: trust GONE only when seen twice.
                if job.checkpoint is not None:
                    job.checkpoint.unsure()
                job.gone_seen = confirm_gone = True
                renewed_all = False
                continue
            job.gone_seen = False
            if job.checkpoint is not None:
                _settle_checkpoint(job.checkpoint, rule.renews)
            if rule.stops is not None:
                self._stop_job(batch, job, rule.stops, effects)
            elif rule.cancels and job.stop is None and batch.stop is None:
                # On a stopped batch the handler is already cancelled and its stop came
                # first: the directive only renews (I8: one cancellation, one outcome).
                job.stop = StopReason.CANCELLED
                effects.cancels.append((batch.batch_id, job.job_id))
            renewed_all = renewed_all and (rule.renews or not job.renewed)
        if renewed_all:
            v, h = self.timing.visibility_timeout, self.timing.heartbeat_interval
            batch.lease_deadline = advanced_deadline(batch.lease_deadline, renewal.sent_at, v)
            self._set_due(batch, min(self._next_beat(now), renewal.sent_at + h))
        else:
            self._schedule_retry(batch, now)
            if confirm_gone:
                self._set_due(batch, min(batch.next_due, now + MIN_RETRY))
        if batch.wanted:  # a cancel notice came in while the renewal was out
            self._set_due(batch, min(batch.next_due, now))

    @staticmethod
    def _stop_job(batch: BatchLease, job: JobLease, reason: StopReason, effects: Effects) -> None:
        """The job's row is no longer ours: renewed no more, and nothing may be written.

        Its handler may still be running (it stays pending until it exits). A job-level
        stop for a stopped batch is recorded, but not delivered: the batch's scope already
        cancelled its handler (I8: one cancellation). It replaces a cancel: the row is no
        longer this attempt's, so the cancel's failure could never be written
        (docs/protocol.rst §10, refinement 19).
        """
        job.renewed = False
        if job.stop is None or job.stop is StopReason.CANCELLED:
            job.stop = reason
        if batch.stop is None:
            effects.stops.append((batch.batch_id, job.job_id, reason))


def _settle_checkpoint(slot: CheckpointSlot, renews: bool) -> None:
    """A verdict on a job with a checkpoint: one that renewed the row stored what the
    renewal carried (docs/protocol.rst §16); any other wrote nothing."""
    if renews:
        slot.renewed()
    else:
        slot.unsure()


def _unsure_checkpoints(batch: BatchLease) -> None:
    """A renewal carrying ``batch`` failed or was abandoned: what it carried may or may not
    be stored, so the next renewal sends each job's latest checkpoint again."""
    for job in batch.jobs.values():
        if job.checkpoint is not None:
            job.checkpoint.unsure()
