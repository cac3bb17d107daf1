"""The guard's trio runtime: it executes :class:`~trioqueue._core.guard_rules.GuardCore` decisions.

One guard per pool. Its nursery holds the renewal tasks: the current one and, at most, one
abandoned one still stuck in its driver call. The guard loop sleeps in a cancel scope whose
deadline is the core's next wake time; anything that changes the core's plans (a new batch,
an answer, a cancel notice) cancels that nap with :meth:`Guard.poke`.

Every batch's cancel scope is owned here too, so a renewal answer moves the scope's deadline
in the same step it is processed: the fence never needs the database to fire.

The guard also beats for its pool (docs/api.rst, "Worker pools"): every renewal carries the
pool's :class:`~trioqueue._types.PoolBeat`, and when no renewal went out for a heartbeat
interval (the pool holds no job) a beat goes alone. A lone beat is sent only while no
renewal holds a connection, one at a time, and gives up after one heartbeat interval; while
it is out the core counts it as the abandoned slot, so a beat that ignores its timeout never
lets the guard hold a third connection (I5). A failed beat is logged and changes nothing
else.

The pool's jobs in flight are what operators read in the registry (the dashboard's workers
page): a count left from a beat a heartbeat ago reads as a stuck job. So while the count may
move (jobs are in flight, or were at the last beat) the guard looks at it every
:data:`IN_FLIGHT_LOOK` seconds, and a count that moved goes out in a lone beat, at most one
per :data:`IN_FLIGHT_DEBOUNCE`: the registry is right to within about 1.5 s, for one beat a
second at most while jobs come and go (a job ends without telling the guard, so it looks).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import trio

from trioqueue._backends.interface import Backend
from trioqueue._core.guard_rules import Effects, GuardCore, JobLease, Renewal
from trioqueue._core.rules import StopReason
from trioqueue._runtime.clock import ClockWatch
from trioqueue._runtime.logfields import job_fields, pool_fields
from trioqueue._runtime.observer import PoolObserver
from trioqueue._types import Claimed, Job, PoolBeat, PoolRegistration

log = logging.getLogger("trioqueue.guard")


#: The job scopes of every batch of one: none (a plain dict, so that ``scope_of`` is one
#: C call; typed read-only, and never written).
_NO_SCOPES: Mapping[int, trio.CancelScope] = {}
#: Scheduler passes the guard lets a new batch run before its first beat: one for the
#: batch task to start its job tasks, one for them to run.
FIRST_STEPS = 2
#: How often (seconds) the guard looks at the pool's jobs in flight while they may move.
IN_FLIGHT_LOOK = 0.5
#: The shortest time (seconds) from one beat to a lone beat for a count that moved.
IN_FLIGHT_DEBOUNCE = 1.0


@dataclass(eq=False, slots=True)
class BatchHandle:
    """The runtime side of one registered batch: its scope, one scope per job, and its
    jobs' leases (the core's own records, which the runtime tells when a job's work ends
    and when its outcome is settled)."""

    batch_id: int
    jobs: tuple[Job, ...]
    scope: trio.CancelScope
    leases: Mapping[int, JobLease]
    #: Empty for a batch of one job (shared, never written: a dict less per such batch).
    job_scopes: Mapping[int, trio.CancelScope] = field(default_factory=lambda: _NO_SCOPES)
    #: When the claim's answer registered the batch (trio's clock): attempt timings count
    #: from here (docs/protocol.rst §14, "Timings").
    registered_at: float = 0.0
    #: When the claim that took it was sent (trio's clock): where its attempts' spans begin.
    claim_sent: float = 0.0
    #: Its jobs run in one batch handler call (docs/protocol.rst §20), under the batch scope
    #: alone (no job scopes): the call is cancelled only once every job of it is stopped.
    one_call: bool = False

    def scope_of(self, job_id: int) -> trio.CancelScope:
        """The job's own scope; a batch of one job uses the batch scope (saves memory)."""
        return self.job_scopes.get(job_id, self.scope)

    def stop_effect(self, verb: str) -> str:
        """What a stop of one of its jobs does to its work, as the log says it (``verb``:
        "cancelling", "stopping"; the core has recorded the stop already). In batch mode
        the call is cancelled only once every job of it is stopped (docs/protocol.rst §20,
        "A job's own stop"): before, saying the handler is cancelled would be untrue."""
        if not self.one_call:
            return f"{verb} its handler"
        if all(lease.stop is not None for lease in self.leases.values()):
            return f"{verb} the batch handler's call (every job of it is stopped)"
        return "the batch handler's call goes on for the other jobs (ctx.stop_requested tells it)"

    def stop_job(self, job_id: int) -> None:
        if not self.one_call:
            self.scope_of(job_id).cancel()
        elif all(lease.stop is not None for lease in self.leases.values()):
            # The core has recorded the stop; once every job has one, nothing the call does
            # can matter any more. Before, the call goes on for the others.
            self.scope.cancel()


class Guard:
    """Renews every due lease of the pool in one statement, and keeps the fences."""

    def __init__(
        self,
        core: GuardCore,
        backend: Backend,
        observer: PoolObserver | None = None,
        pool: PoolRegistration | None = None,
        clock: ClockWatch | None = None,
    ) -> None:
        self.core = core
        self._clock = clock  # the pool's clock verdict, which its beats report
        self._backend = backend
        self._observer = observer
        self._batches: dict[int, BatchHandle] = {}
        self._nap = trio.CancelScope()
        self._fresh = False  # a batch registered since the loop last looked
        self._next_batch_id = 1
        self._pool = pool  # None: no beats
        self._last_beat = -math.inf  # when the last beat was sent (local time)
        self._beat_in_flight = 0  # the jobs in flight the last beat reported
        # Jobs of registered batches not yet settled: kept, not summed, as the guard looks
        # at it every IN_FLIGHT_LOOK seconds while jobs are in flight.
        self._in_flight = 0
        self._beat_failing = False  # the last beat failed (logged once per outage)
        #: Renewals abandoned since the guard started (reported by every beat).
        self.abandoned_renewals = 0

    @property
    def in_flight(self) -> int:
        """Jobs of registered batches whose outcome is not settled yet. One int read, so
        any thread may ask (an observer's in-flight gauge, read by a metrics scrape)."""
        return self._in_flight

    # -- called by the pool -------------------------------------------------------------

    def register(
        self, claimed: Sequence[Claimed], claim_sent: float, *, one_call: bool = False
    ) -> BatchHandle | None:
        """Register a claimed batch before anything runs for it; None if already expired.
        ``one_call``: its jobs run in one batch handler call, under the batch scope alone."""
        batch_id = self._next_batch_id
        self._next_batch_id += 1
        # A row's lease counts from when the claim locked it, which the backend measured
        # from the statement's start on its own clock: the local send time plus that wait
        # is still no later than the lock (docs/protocol.rst, "The lease fence").
        locked = claim_sent + min((c.locked_after for c in claimed), default=0.0)
        now = trio.current_time()
        accepted = self.core.register(
            batch_id,
            [(c.job.id, c.job.claim_seq) for c in claimed],
            claim_sent=locked,
            now=now,
            wall_now=self._backend.wall_time(),
            row_deadlines=[c.lease_until for c in claimed],
        )
        if not accepted:
            return None
        handle = BatchHandle(
            batch_id=batch_id,
            jobs=tuple(c.job for c in claimed),
            scope=trio.CancelScope(deadline=self.core.scope_deadline(batch_id)),
            leases=self.core.batch(batch_id).jobs,
            job_scopes={c.job.id: trio.CancelScope() for c in claimed}
            if len(claimed) > 1 and not one_call
            else _NO_SCOPES,
            registered_at=now,
            claim_sent=claim_sent,
            one_call=one_call,
        )
        self._batches[batch_id] = handle
        self._in_flight += len(claimed)
        self._fresh = True
        self.poke()  # the first beat is immediate
        return handle

    def unregister(self, batch_id: int) -> None:
        handle = self._batches.pop(batch_id, None)
        if handle is not None:
            self._in_flight -= sum(lease.pending for lease in handle.leases.values())
        self.core.unregister(batch_id)

    def settle(self, lease: JobLease) -> None:
        """The job's outcome is settled, after its claim hook and handler exited: renewed
        no more (:meth:`JobLease.settle`), and no longer in flight."""
        if lease.pending:
            lease.settle()
            self._in_flight -= 1

    def batch_stop(self, batch_id: int) -> StopReason | None:
        return self.core.batch_stop(batch_id, trio.current_time())

    def fence_passed(self, batch_id: int) -> bool:
        """True once the batch's lease fence (not its other deadlines) has passed.

        A batch stopped by its duration, a cancel or shutdown is still renewed while its
        handlers unwind, so its fence may pass long after its scope was stopped, or never.
        """
        core = self.core
        return core.fence_time(core.batch(batch_id)) <= trio.current_time()

    def cancel_notice(self, job_id: int) -> None:
        """A cancel notice arrived: renew the job's batch now to fetch the directive."""
        if self.core.request_renewal(job_id, trio.current_time()):
            self.poke()

    def begin_shutdown(self, grace: float) -> None:
        self.apply(self.core.begin_shutdown(trio.current_time(), grace))

    def poke(self) -> None:
        """Wake the guard loop: its plans may have changed."""
        self._nap.cancel()

    # -- the guard task -----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # The current renewal, the abandoned one, and a lone beat.
        async with trio.open_nursery() as renewals:
            self._last_beat = trio.current_time()  # the pool registered just before
            task_status.started()
            while True:
                if self._fresh:
                    await self._let_fresh_batches_start()
                now = trio.current_time()
                self.apply(self.core.poll(now))
                renewal = self.core.next_renewal(now)
                if renewal is not None:
                    self.apply(Effects(moved=set(renewal.batch_ids)))
                    beat = self._beat(now)
                    renewals.start_soon(self._renew, renewal, beat, name="trioqueue.renewal")
                elif self._lone_beat_due(now) and self.core.begin_beat():
                    renewals.start_soon(self._beat_alone, self._beat(now), name="trioqueue.beat")
                deadline = min(self.core.next_wake(now), self._next_lone_beat(now))
                with trio.CancelScope(deadline=deadline) as self._nap:
                    await trio.sleep_forever()

    async def _let_fresh_batches_start(self) -> None:
        """Let the batches registered since the last look take their first steps before
        their first beat goes out, at the same instant: the batch task starts its job tasks
        in one scheduler pass and they run in the next. A job whose work ends within those
        steps (a handler with no checkpoint) is owed no first beat (docs/protocol.rst §10,
        refinement 12), which spares short jobs a statement each."""
        self._fresh = False
        for _ in range(FIRST_STEPS):
            await trio.lowlevel.checkpoint()

    # -- beats ----------------------------------------------------------------------------

    def _beat(self, now: float) -> PoolBeat | None:
        """The pool's beat as of now (None when the guard has no pool), counted as sent."""
        if self._pool is None:
            return None
        self._last_beat = now
        in_flight = self._beat_in_flight = self._in_flight
        clock = self._clock
        if clock is None or clock.bound is None:
            return PoolBeat(self._pool, in_flight, self.abandoned_renewals)
        return PoolBeat(
            self._pool, in_flight, self.abandoned_renewals, clock.skew, clock.verdict.label
        )

    def _lone_beat_due(self, now: float) -> bool:
        """Whether a beat should go alone now: a heartbeat interval after the last beat, or
        a debounce after it when the jobs in flight moved since."""
        if self._pool is None:
            return False
        if now >= self._last_beat + self.core.timing.heartbeat_interval:
            return True
        return (
            now >= self._last_beat + IN_FLIGHT_DEBOUNCE and self._in_flight != self._beat_in_flight
        )

    def _next_lone_beat(self, now: float) -> float:
        """When to look for a lone beat next: a heartbeat interval after the last beat, and
        every :data:`IN_FLIGHT_LOOK` while the jobs in flight may move; never while one is
        in flight or a renewal holds a connection (its beat, or its retry's, comes first)."""
        if self._pool is None or self.core.connections_held():
            return math.inf
        due = self._last_beat + self.core.timing.heartbeat_interval
        if self._batches or self._beat_in_flight:
            due = min(due, max(now + IN_FLIGHT_LOOK, self._last_beat + IN_FLIGHT_DEBOUNCE))
        return due

    async def _beat_alone(self, beat: PoolBeat | None) -> None:
        try:
            with trio.move_on_after(self.core.timing.heartbeat_interval) as scope:
                await self._backend.renew(
                    (), visibility_timeout=self.core.timing.visibility_timeout, beat=beat
                )
            self._beat_done(None if not scope.cancelled_caught else "it timed out")
        except Exception as exc:  # a failed beat never stops the pool
            self._beat_done(repr(exc))
        finally:
            self.apply(self.core.end_beat(trio.current_time()))
            self.poke()

    def _beat_done(self, failure: str | None) -> None:
        """Log the first failed beat of an outage and the recovery, not every beat."""
        queue = "" if self._pool is None else self._pool.queue
        if failure is not None and not self._beat_failing:
            log.warning(
                "worker pool beat failed (it shows as stale if this lasts): %s",
                failure,
                extra=pool_fields(queue, "beat_failed"),
            )
        elif failure is None and self._beat_failing:
            log.info("worker pool beats again", extra=pool_fields(queue, "beating"))
        self._beat_failing = failure is not None

    # -- renewals -------------------------------------------------------------------------

    async def _renew(self, renewal: Renewal, beat: PoolBeat | None = None) -> None:
        verdicts = None
        with trio.move_on_at(renewal.give_up_at):  # an interruptible call stops here
            try:
                verdicts = await self._backend.renew(
                    renewal.items,
                    visibility_timeout=self.core.timing.visibility_timeout,
                    beat=beat,
                )
            except Exception as exc:  # a failed heartbeat never stops a job by itself
                log.warning("renewal of %d job(s) failed: %r", len(renewal.items), exc)
        now = trio.current_time()
        if self._observer is not None:
            self._observer.renewal_finished(now - renewal.sent_at)
        if verdicts is None:
            self.apply(self.core.failed(renewal.token, now))
        else:
            self.apply(self.core.answered(renewal.token, now, verdicts))
        self.poke()

    def apply(self, effects: Effects) -> None:
        """Carry out the core's decisions on the batches' cancel scopes."""
        for batch_id in effects.moved:
            handle = self._batches.get(batch_id)
            if handle is not None:
                deadline = self.core.scope_deadline(batch_id)
                if handle.scope.deadline != deadline:  # setting it costs trio a heap update
                    handle.scope.deadline = deadline
        for batch_id, job_id in effects.cancels:
            log.info(
                "job %d: cancel requested, %s",
                job_id,
                self._stop_effect(batch_id, "cancelling"),
                extra=job_fields(self._job(batch_id, job_id), "cancel_requested"),
            )
            self._stop_job(batch_id, job_id)
        for batch_id, job_id, reason in effects.stops:
            log.warning(
                "job %d: %s; %s",
                job_id,
                reason.value,
                self._stop_effect(batch_id, "stopping"),
                extra=job_fields(self._job(batch_id, job_id), f"stopped_{reason.name.lower()}"),
            )
            self._stop_job(batch_id, job_id)
        if effects.abandoned is not None:
            log.warning(
                "renewal %d is stuck past its timeout: abandoned (it keeps its connection "
                "until the driver call exits); renewing on another connection",
                effects.abandoned,
            )
            self.abandoned_renewals += 1
            if self._observer is not None:
                self._observer.renewal_abandoned()

    def _job(self, batch_id: int, job_id: int) -> Job | int:
        """The job, for its log fields; its id alone once its batch is gone."""
        handle = self._batches.get(batch_id)
        jobs = [] if handle is None else [job for job in handle.jobs if job.id == job_id]
        return jobs[0] if jobs else job_id

    def _stop_effect(self, batch_id: int, verb: str) -> str:
        handle = self._batches.get(batch_id)
        return f"{verb} its handler" if handle is None else handle.stop_effect(verb)

    def _stop_job(self, batch_id: int, job_id: int) -> None:
        handle = self._batches.get(batch_id)
        if handle is not None:
            handle.stop_job(job_id)
