"""The worker pool: claim loop, guard, batches, and a graceful shutdown.

The nursery tree of a pool::

    run_worker_pool
    ├── claim loop                      cancelled by the caller: stops claiming
    └── serve (shielded)                outlives the caller's cancel by up to shutdown_grace
        └── services nursery
            ├── guard                   └── guard nursery: current + abandoned renewal
            ├── outcome writer          batches the fenced acks, failures and releases
            ├── listener                notices: new work, cancel requests
            ├── scheduler               scheduling passes (scheduler.py), until stopping
            ├── maintainer              the maintainer lease and retention passes
            │                           (maintainer.py), until stopping
            └── batches nursery         one task per batch (see batch.py)

Shutdown: when the caller cancels, the claim loop stops, every batch's scope deadline
becomes at most ``now + shutdown_grace`` (never later than its own deadlines), the guard keeps
renewing meanwhile, and jobs still running at the end are released without charging the
attempt. When the last batch is done the services are cancelled: not before, since a handler
still unwinding past the grace (a shielded ``finally``, a thread) keeps its lease until it
exits (docs/protocol.rst §4). The batches nursery sits inside the services nursery for that.
Setting ``stop_now`` ends the grace at once (a service task waits for it), as a second Ctrl-C
does in the command line.

A claim still under way when a batch raises (a handler's ``SystemExit``, docs/protocol.rst
§4.1) may return after the batches nursery has closed: the rows it took are never started,
and go back at once, released uncharged (fenced by ``claim_seq``), not left to lapse.

A quarantined job, one whose last attempts each ended without an outcome (its worker died),
runs alone (docs/protocol.rst §13): the claim loop asks for one only when nothing is in
flight, and claims nothing more until it has ended; told that one waits, a busy pool drains.

The pool registers itself with the backend before it claims (``register_pool``), its guard
beats for it, and it unregisters once it is down (docs/api.rst, "Worker pools"). Both calls
are bounded by ``POOL_ROW_TIMEOUT`` and a failure is only logged: the list of pools is for
operators, and a pool must run (and stop) whether or not the database takes note.
"""

from __future__ import annotations

import bisect
import logging
import os
import socket
import uuid
from collections.abc import Callable, Sequence

import trio

from trioqueue._backends.interface import Backend
from trioqueue._core.guard_rules import GuardCore
from trioqueue._core.timing import Timing
from trioqueue._errors import BackendError, ConfigError, exit_request, is_transient
from trioqueue._runtime.batch import NOT_RECORDED, BatchRunner
from trioqueue._runtime.batch_call import BatchCallRunner
from trioqueue._runtime.clock import ClockWatch
from trioqueue._runtime.config import WorkerConfig, check
from trioqueue._runtime.guard import Guard
from trioqueue._runtime.logfields import job_fields, pool_fields
from trioqueue._runtime.maintainer import run_maintainer
from trioqueue._runtime.monitor import shared_monitor
from trioqueue._runtime.observer import PoolObserver, ShieldedObserver
from trioqueue._runtime.scheduler import run_scheduler
from trioqueue._runtime.siblings import Siblings, siblings_of
from trioqueue._runtime.writer import OutcomeWriter, Result, Write
from trioqueue._telemetry import attempt_tracer
from trioqueue._types import (
    Claimed,
    Claims,
    Failure,
    Job,
    NoticeKind,
    PoolRegistration,
    Recorded,
    Release,
    Snoozed,
    SnoozeWrite,
)

log = logging.getLogger("trioqueue.pool")
#: Records about one job, as the batches' (docs/usage.rst, "Logging").
job_log = logging.getLogger("trioqueue.worker")

NO_DURATION_WARNING = (
    "max_job_duration is not set: a hung handler holds its job and renews its lease "
    "for the life of the process"
)


async def run_worker_pool(
    backend: Backend,
    config: WorkerConfig,
    *,
    stop_now: trio.Event | None = None,
    observer: PoolObserver | None = None,
    resources: object = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a worker pool until cancelled, then shut it down gracefully.

    Args:
        backend: where the jobs live (``open_postgres`` or ``open_memory``).
        config: the pool's settings; validated before the backend is touched.
        stop_now: once this event is set, the shutdown (under way or to come) has no grace
            left: running handlers are cancelled at once and their jobs released without
            charging the attempt, as at the end of ``shutdown_grace``. The command line
            sets it on a second Ctrl-C.
        observer: told of the pool's events (jobs finished, durations, lease losses), e.g.
            a :class:`trioqueue.metrics.PrometheusObserver`; see docs/metrics.rst. What its
            methods raise is logged (once per method) and never stops the pool.
        resources: handed as is to every handler as ``ctx.resources`` (an HTTP client,
            say). The value, not a context manager: a single pool runs inside your own
            ``async with``, which already opens it before and closes it after the pool.
            :func:`trioqueue.run_workers` takes the context manager itself, to hold it
            open around several pools (docs/usage.rst, "Shared resources").
        task_status: for ``nursery.start``, which returns once the pool is claiming.

    Raises:
        ConfigError: listing every problem of ``config``.
        BackendError: a claim failed in a way trying again cannot fix (a missing table, a
            permission, a refused value: ``BackendError.transient`` is false). The pool
            stops as on shutdown first; the message says what failed, with the backend's
            hint (``trioqueue migrate`` for a schema that was never migrated).
        SystemExit: a claim hook or handler raised it (``KeyboardInterrupt`` likewise);
            its attempt was recorded as a failure and the jobs beside it released first.
            Raised as it was raised, not inside exception groups, so that the process
            exits as it asks (docs/protocol.rst §4.1).
    """
    timing = check(config)
    if config.transactional and not backend.supports_transactions:
        raise ConfigError(
            [f"transactional mode needs a backend with transactions, not {type(backend).__name__}"]
        )
    if observer is not None:
        observer = ShieldedObserver(observer)
    pool = _Pool(backend, config, timing, stop_now, observer)
    pool.resources = resources  # only the batches read it: no __init__ argument of its own
    try:
        await pool.run(task_status)
    except BaseExceptionGroup as group:
        # A handler's SystemExit or KeyboardInterrupt, once its attempt is recorded
        # (docs/protocol.rst §4.1): raised as it was raised, so the process exits as asked.
        asked = exit_request(group)
        if asked is None:
            raise
        raise asked from group


#: How long registering or unregistering the pool may take (seconds) before it is given up.
POOL_ROW_TIMEOUT = 5.0

#: The shortest wait before claiming again from a queue whose limits held rows back: a
#: bucket of a high rate refills in microseconds, and claims must not spin on it.
MIN_RETRY_AFTER = 0.01

#: Rows one claim statement takes at most when it fills several free slots (a single batch
#: larger than this is still claimed whole).
CLAIM_ROWS = 1000

#: The shortest time between a claim and the next one woken by a retry coming due: a flood
#: of retries due moments apart is claimed a floor's worth at a time, not one claim each.
RETRY_WAKE_FLOOR = 0.05

#: How many due times of its retries a pool keeps (the earliest); a retry beyond them is
#: claimed at the poll, as without a wake.
RETRY_WAKES_KEPT = 1024


class _Serving:
    """The batches' nursery, handed from a pool's services (``serve``) to its claim loop
    once the services run."""

    def __init__(self) -> None:
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()

    def ready(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._ready.set()

    async def batches(self) -> trio.Nursery:
        await self._ready.wait()
        assert self._nursery is not None
        return self._nursery


class _Pool:
    runner: BatchRunner  # made in run(), with the run's shared blocking monitor
    siblings: Siblings  # joined in run(): this run's pools on the same backend and queue
    resources: object = None  # ctx.resources of every job

    def __init__(
        self,
        backend: Backend,
        config: WorkerConfig,
        timing: Timing,
        stop_now: trio.Event | None,
        observer: PoolObserver | None,
    ) -> None:
        self.backend = backend
        self.config = config
        self.timing = timing
        host = socket.gethostname()
        self.worker_id = f"{host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.registration = PoolRegistration(
            worker_id=self.worker_id,
            host=host,
            pid=os.getpid(),
            queue=config.queue,
            concurrency=config.concurrency,
            heartbeat_interval=timing.heartbeat_interval,
        )
        self.observer = observer
        self.clock = ClockWatch(backend, timing, config.queue, config.poll_interval)
        self.guard = Guard(GuardCore(timing), backend, observer, self.registration, self.clock)
        self.writer = _RetryNotingWriter(
            backend, timing.visibility_timeout, self._retry_due, config.max_snoozes
        )
        self.slots = trio.Semaphore(config.concurrency)
        self.work_available = trio.Event()
        # The sibling claims begun when the latest work notice arrived: a sibling claim
        # begun since took its jobs (siblings.py). None: woken for another reason, claim.
        self._notice_mark: int | None = None
        # When jobs this pool retried become claimable again; the idle wait's scope, whose
        # deadline a retry recorded meanwhile moves; when the latest claim was sent.
        self._retries = _DueTimes(RETRY_WAKES_KEPT)
        self._idle: trio.CancelScope | None = None
        self._last_claim = -float("inf")
        self.stopping = trio.Event()
        self.stop_now = stop_now
        self.claiming = trio.CancelScope()  # the claim loop's
        self._stopped = False  # run() has ended

    async def run(self, task_status: trio.TaskStatus[None]) -> None:
        self._log_start()
        await self._register()
        if self.observer is not None:
            self.observer.pool_started(self.config.queue, self.worker_id, self._in_flight)
        try:
            with (
                shared_monitor(self.config.blocking_threshold) as monitor,
                siblings_of(self.backend, self.config.queue, self.wake) as self.siblings,
            ):
                # Batch mode (docs/protocol.rst §20): one batch handler call per batch.
                runner = BatchRunner if self.config.batch_handler is None else BatchCallRunner
                self.runner = runner(
                    self.guard,
                    self.writer,
                    self.slots,
                    self.config,
                    self.timing,
                    monitor,
                    self.observer,
                    self.resources,
                    self.claiming,
                    attempt_tracer(self.worker_id, self.config.queue, trio.current_time()),
                )
                await self._run(task_status)
        finally:
            self._stopped = True
            if self.observer is not None:
                self.observer.pool_stopped(self.config.queue, self.worker_id)
            await self._unregister()
            log.info("worker pool %s stopped", self.worker_id, extra=self._fields("stopped"))

    def _in_flight(self) -> int:
        """The observer's count of this pool's jobs in flight (any thread may call it)."""
        return 0 if self._stopped else self.guard.in_flight

    async def _register(self) -> None:
        """Add the pool to the backend's list of pools; a failure is logged (the first
        beat that gets through adds it then)."""
        with trio.move_on_after(POOL_ROW_TIMEOUT) as scope:
            try:
                await self.backend.register_pool(self.registration)
            except Exception as exc:
                log.warning(
                    "registering worker pool %s failed: %r",
                    self.worker_id,
                    exc,
                    extra=self._fields("register_failed"),
                )
        if scope.cancelled_caught:
            log.warning(
                "registering worker pool %s timed out",
                self.worker_id,
                extra=self._fields("register_failed"),
            )

    async def _unregister(self) -> None:
        """Remove the pool from the list, however the pool ended (shielded: it runs while
        the caller's cancel unwinds), never waiting long for a database that is gone.

        A pool ending in an error is unregistered too: it is not running any more.
        """
        with trio.CancelScope(shield=True), trio.move_on_after(POOL_ROW_TIMEOUT) as scope:
            try:
                await self.backend.unregister_pool(self.worker_id)
            except Exception as exc:
                log.warning(
                    "unregistering worker pool %s failed: %r",
                    self.worker_id,
                    exc,
                    extra=self._fields("unregister_failed"),
                )
        if scope.cancelled_caught:
            log.warning(
                "unregistering worker pool %s timed out",
                self.worker_id,
                extra=self._fields("unregister_failed"),
            )

    async def _run(self, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            # Not nursery.start(self.serve): a pool cancelled while its services start would
            # wait for ever. serve runs shielded until the pool stops, and trio's start, when
            # cancelled first, neither moves it nor returns until it ends, so stop() below
            # would never run. Waiting for the batches' nursery here is cancellable instead.
            serving = _Serving()
            nursery.start_soon(self.serve, serving)
            stopped_by = None  # stays None when a batch's exception cancels the claims
            try:
                batches = await serving.batches()
                with self.claiming:
                    stopped_by = await self.claim_loop(batches, task_status)
            finally:
                self.stop()
        if stopped_by is not None:
            raise stopped_by  # after the graceful shutdown, and outside the nursery's group

    def stop(self) -> None:
        if not self.stopping.is_set():
            log.info(
                "worker pool %s stopping: grace %gs",
                self.worker_id,
                self.config.shutdown_grace,
                extra=self._fields("stopping"),
            )
            self.guard.begin_shutdown(self.config.shutdown_grace)
            self.stopping.set()

    async def serve(self, serving: _Serving) -> None:
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as services:
                await services.start(self.guard.run)
                await services.start(self.writer.run)
                await services.start(self.listen)
                if self.config.schedule_interval is not None:
                    services.start_soon(
                        run_scheduler,
                        self.backend,
                        self.config.schedule_interval,
                        self.config.queue,
                        self.stopping,
                        name="trioqueue.scheduler",
                    )
                if self.config.maintenance_interval is not None:
                    services.start_soon(
                        run_maintainer,
                        self.backend,
                        self.timing,
                        self.config.maintenance_interval,
                        self.worker_id,
                        self.config.queue,
                        self.stopping,
                        self.observer,
                        name="trioqueue.maintainer",
                    )
                if self.stop_now is not None:
                    services.start_soon(self._end_grace, self.stop_now)
                async with trio.open_nursery() as batches:
                    serving.ready(batches)
                    try:
                        await self.stopping.wait()
                    finally:
                        # Cancelled here by a batch that raised (docs/protocol.rst §4.1):
                        # claim no more, for no batch could start now.
                        self.claiming.cancel()
                services.cancel_scope.cancel()  # every batch is done: no lease left to guard

    async def _end_grace(self, stop_now: trio.Event) -> None:
        """When ``stop_now`` is set and the pool is stopping, end the shutdown grace now."""
        await stop_now.wait()
        await self.stopping.wait()
        log.info(
            "worker pool %s stopping at once: cancelling running handlers",
            self.worker_id,
            extra=self._fields("stopping_at_once"),
        )
        self.guard.begin_shutdown(0.0)

    # -- claiming -----------------------------------------------------------------------

    async def claim_loop(
        self, batches: trio.Nursery, task_status: trio.TaskStatus[None]
    ) -> BackendError:
        """Claim work until cancelled. Returns only when a claim failed in a way retrying
        cannot fix (``BackendError.transient``): the error to raise once the pool is down."""
        task_status.started()
        try:
            return await self._claim_until_failed(batches)
        finally:
            # Siblings may have passed a notice over for a claim this pool will not send.
            self.siblings.wake_others(self.wake)

    async def _claim_until_failed(self, batches: trio.Nursery) -> BackendError:
        failures = 0
        drain = False
        while True:
            await self.clock.wait_until_claiming()  # clock skew past V - H (§8): probes
            if drain:
                await self._wait_until_idle()  # then claim alone (docs/protocol.rst §13)
            free = await self._take_free_slots()
            # Nothing in flight: a quarantined job may be claimed, to run alone.
            alone = free + self.slots.value == self.config.concurrency
            self.work_available = trio.Event()  # before claiming, so no notice is missed
            limit = self.config.batch_size * free
            try:
                wall_sent = self.backend.wall_time()
                claim_sent = self._claim_sent()
                claimed = await self.backend.claim(
                    self.config.queue,
                    limit=limit,
                    worker_id=self.worker_id,
                    visibility_timeout=self.timing.visibility_timeout,
                    quarantine_after=self.config.quarantine_after,
                    alone=alone,
                )
                self.clock.observe_claim(wall_sent, claimed, self.backend.wall_time())
            except Exception as exc:
                self.siblings.wake_others(self.wake)  # they passed notices over for it
                self._release_slots(free)
                if not is_transient(exc):
                    return self._claim_failed_for_good(exc)
                failures += 1
                log.warning(
                    "claim failed (%d in a row): %r",
                    failures,
                    exc,
                    extra=self._fields("claim_failed"),
                )
                await trio.sleep(self._pause_after(failures))
                continue
            failures = 0
            if self.claiming.cancel_called:  # a batch raised as this claim was under way
                self._release_slots(free)
                await self._release_unstarted(claimed)
                continue  # to the next checkpoint, which ends the loop
            if self.clock.stopped:  # this claim proved the skew: its rows go back uncharged
                self._release_slots(free)
                if claimed:
                    batches.start_soon(self._give_back, claimed)
                continue
            if claimed and claimed[0].alone:
                await self._run_alone(batches, claimed[0], claim_sent, free)
                drain = False
                continue
            drain = not alone and isinstance(claimed, Claims) and claimed.alone_waiting
            if drain:
                log.info(
                    "a quarantined job waits: claiming nothing more until this pool's "
                    "batches have ended, then claiming it alone",
                    extra=self._fields("draining"),
                )
            if len(claimed) >= limit:
                self.siblings.wake_others(self.wake)  # there may be more: share it out
            size = self.config.batch_size
            chunks = [claimed[start : start + size] for start in range(0, len(claimed), size)]
            self._release_slots(free - len(chunks))
            for chunk in chunks:
                self._start_batch(batches, chunk, claim_sent)
            if len(claimed) < limit and not drain:
                # The claim saw every claimable row and took them: wait for a notice (or
                # the poll interval) rather than asking again at once for nothing.
                await self._wait_for_work(claimed)

    async def _give_back(self, claimed: list[Claimed]) -> None:
        """Release rows a claim took that proved the clock past V - H (docs/protocol.rst §8):
        none of them would keep its lease. A failed release lets their leases lapse."""
        releases = [Release(c.job.id, c.job.claim_seq) for c in claimed]
        await self.writer.write(releases)

    async def _release_unstarted(self, claimed: list[Claimed]) -> None:
        """Release rows a claim took once the pool began going down on a batch's exception
        (docs/protocol.rst §4.1): none of them may start now (the batches nursery may be
        closed already), and each is released uncharged, fenced by claim_seq, rather than
        left to lapse with its attempt spent. Written directly, not through the outcome
        writer, which may have stopped; shielded, and bounded by one lease, past which
        the rows are claimable again anyway. A failed release lets their leases lapse."""
        if not claimed:
            return
        v = self.timing.visibility_timeout
        releases = [Release(c.job.id, c.job.claim_seq) for c in claimed]
        answer: list[bool] | str = f"timed out after {v:g}s"  # or why it failed
        with trio.CancelScope(shield=True), trio.move_on_after(v):
            try:
                answer = await self.backend.release(releases)
            except Exception as exc:
                answer = repr(exc)
        for index, claim in enumerate(claimed):
            _log_unstarted(claim.job, answer if isinstance(answer, str) else answer[index])

    async def _run_alone(
        self, batches: trio.Nursery, claimed: Claimed, claim_sent: float, free: int
    ) -> None:
        """A quarantined job, the only one of its claim: start it, and claim nothing more
        until it has ended, so that if it takes the process down it takes nothing else
        (docs/protocol.rst §13)."""
        job = claimed.job
        log.warning(
            "job %d runs alone: its last attempts each ended without an outcome (the "
            "worker running it stopped); if this attempt ends so too, it is failed",
            job.id,
            extra=job_fields(job, "runs_alone"),
        )
        self._release_slots(free - 1)
        self._start_batch(batches, [claimed], claim_sent)
        await self._wait_until_idle()

    async def _wait_until_idle(self) -> None:
        """Until every batch of the pool has ended: the claim loop is the only taker of
        slots, so holding all of them means nothing runs."""
        held = 0
        try:
            for _ in range(self.config.concurrency):
                await self.slots.acquire()
                held += 1
        finally:
            self._release_slots(held)

    async def _wait_for_work(self, claimed: list[Claimed]) -> None:
        """Until a notice or a sibling wakes the pool, a job this pool retried comes due
        (its end sends no notice), or the idle wait passes. A work notice is passed over
        when a sibling pool began a claim after it arrived: that claim saw the notice's
        jobs (siblings.py)."""
        with trio.move_on_after(self._idle_wait(claimed)) as self._idle:
            self._wake_for_retry(self._retries.earliest())
            try:
                while True:
                    await self.work_available.wait()
                    mark = self._notice_mark
                    if mark is None or not self.siblings.claimed_since(mark):
                        break
                    self.work_available = trio.Event()
            finally:
                self._idle = None
        # Counted now, in the step that decided, so that siblings woken by the same notice
        # pass it over; an idle pool has a free slot, so its claim goes out at once.
        self.siblings.begin_claim()

    def _claim_sent(self) -> float:
        """A claim goes out now: it sees every job whose retry was due by now."""
        now = self._last_claim = trio.current_time()
        self._retries.drop_through(now)
        return now

    def _retry_due(self, at: float) -> None:
        """A job this pool retried becomes claimable at ``at`` (trio's clock)."""
        self._retries.add(at)
        self._wake_for_retry(at)

    def _wake_for_retry(self, at: float | None) -> None:
        """End the idle wait (if the pool is in one) at ``at``, or ``RETRY_WAKE_FLOOR`` after
        the latest claim if that is later: a retry is claimed when it comes due, not at the
        poll, and retries due moments apart share a claim."""
        if self._idle is not None and at is not None:
            wake_at = max(at, self._last_claim + RETRY_WAKE_FLOOR)
            self._idle.deadline = min(self._idle.deadline, wake_at)

    def wake(self) -> None:
        """Claim again now, whatever the notices say (a sibling's full or failed claim,
        a listener back after a lost connection)."""
        self._notice_mark = None
        self.work_available.set()

    def _work_notice(self) -> None:
        """A work notice arrived: claim, unless a sibling begins a claim first."""
        if not self.work_available.is_set() or self._notice_mark is not None:
            self._notice_mark = self.siblings.claims_begun
        self.work_available.set()

    def _idle_wait(self, claimed: list[Claimed]) -> float:
        """How long to wait for a notice after a claim that came back short: the poll interval,
        or less when the queue's limits held rows back and say when to ask again (a job
        finishing elsewhere or a refilled rate bucket sends no notice; docs/flow.rst)."""
        retry_after = claimed.retry_after if isinstance(claimed, Claims) else None
        if retry_after is None:
            return self.config.poll_interval
        return min(self.config.poll_interval, max(retry_after, MIN_RETRY_AFTER))

    def _claim_failed_for_good(self, exc: Exception) -> BackendError:
        """The error that stops the pool: what failed, and the backend's hint if any."""
        hint = exc.hint if isinstance(exc, BackendError) else None
        message = (
            f"worker pool {self.worker_id} stopped: claiming from queue {self.config.queue!r} "
            f"failed, and trying again cannot help: {exc}" + (f" ({hint})" if hint else "")
        )
        log.error("%s", message, extra=self._fields("stopped_claims_fail"))
        error = BackendError(message, transient=False, hint=hint)
        error.__cause__ = exc
        return error

    async def _take_free_slots(self) -> int:
        """Wait for a free slot of the pool, then take every other one free now.

        One claim statement then fills them all, each ``batch_size`` rows its own batch:
        their first beats share one renewal statement, and, as they tend to finish
        together, their acks share one too. Slots left over are given back.
        """
        await self.slots.acquire()
        free = 1
        most = max(1, CLAIM_ROWS // self.config.batch_size)
        while free < most and self.slots.value > 0:
            self.slots.acquire_nowait()
            free += 1
        return free

    def _release_slots(self, count: int) -> None:
        for _ in range(count):
            self.slots.release()

    def _start_batch(
        self, batches: trio.Nursery, claimed: list[Claimed], claim_sent: float
    ) -> None:
        if self.observer is not None:
            for claim in claimed:
                self.observer.job_claimed(self.config.queue, claim.job.waited)
        handle = self.guard.register(
            claimed, claim_sent, one_call=self.config.batch_handler is not None
        )
        if handle is None:
            self.slots.release()
            batches.start_soon(self.runner.reject, claimed)
        else:
            self.runner.start(batches, handle)

    # -- notices ------------------------------------------------------------------------

    async def listen(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        failures = 0
        listened = False
        while True:
            try:
                async with self.backend.listen(self.config.queue, self.worker_id) as notices:
                    if task_status is not trio.TASK_STATUS_IGNORED:
                        task_status.started()
                        task_status = trio.TASK_STATUS_IGNORED
                    if listened:
                        # Back after a lost connection: work notices sent meanwhile are
                        # gone, so look for work once now rather than at the next poll.
                        # (Cancel notices lost meanwhile arrive with the next heartbeat.)
                        log.info("listening for notices again", extra=self._fields("listening"))
                        self.wake()
                    listened = True
                    failures = 0
                    async for notice in notices:
                        if notice.kind is NoticeKind.AVAILABLE:
                            self._work_notice()
                        elif notice.kind is NoticeKind.CANCEL and notice.job_id is not None:
                            self.guard.cancel_notice(notice.job_id)
            except Exception as exc:
                failures += 1
                log.warning(
                    "listening for notices failed, polling meanwhile: %r",
                    exc,
                    extra=self._fields("listen_failed"),
                )
            if task_status is not trio.TASK_STATUS_IGNORED:
                task_status.started()  # polling still works without notices
                task_status = trio.TASK_STATUS_IGNORED
            await trio.sleep(self._pause_after(failures))

    def _pause_after(self, failures: int) -> float:
        """Back off after consecutive failures: 0.2 s, 0.4 s, ... up to ``poll_interval``."""
        return min(self.config.poll_interval, 0.1 * 2.0 ** min(failures, 30))

    def _log_start(self) -> None:
        t, c = self.timing, self.config
        log.info(
            "worker pool %s on queue %r: concurrency %d, batch %d, V=%gs, H=%gs, D=%s",
            self.worker_id, c.queue, c.concurrency, c.batch_size,
            t.visibility_timeout, t.heartbeat_interval,
            "none" if t.max_job_duration is None else f"{t.max_job_duration:g}s",
            extra=self._fields("started"),
        )  # fmt: skip
        if t.max_job_duration is None:
            log.warning(NO_DURATION_WARNING, extra=self._fields("no_max_job_duration"))

    def _fields(self, event: str) -> dict[str, object]:
        """``extra=`` of a record about this pool (docs/usage.rst, "Logging")."""
        return pool_fields(self.config.queue, event)


def _log_unstarted(job: Job, released: bool | str) -> None:
    """How the release of a job claimed as its pool went down ended: True, released;
    False, fenced out; else why it failed."""
    if released is True:
        job_log.info(
            "job %d: claimed as the worker pool went down, so not started: released uncharged",
            job.id,
            extra=job_fields(job, "release"),
        )
    elif released is False:  # another worker holds the job now
        job_log.warning("job %d: %s", job.id, NOT_RECORDED, extra=job_fields(job, "fenced_out"))
    else:
        job_log.error(
            "job %d: claimed as the worker pool went down, so not started; could not "
            "release it (%s): it runs again once its lease is over",
            job.id,
            released,
            extra=job_fields(job, "record_failed"),
        )


class _RetryNotingWriter(OutcomeWriter):
    """The pool's outcome writer, which also tells the pool when each retry or snooze it
    recorded makes its job claimable again: the end of a retry's delay (or a snooze's)
    sends no notice (docs/usage.rst, "When a pool claims")."""

    def __init__(
        self,
        backend: Backend,
        statement_timeout: float,
        retry_due: Callable[[float], None],
        max_snoozes: int,
    ) -> None:
        super().__init__(backend, statement_timeout, max_snoozes)
        self._retry_due = retry_due

    def _recorded(self, items: Sequence[Write], results: Sequence[Result]) -> None:
        # Failures, releases and snoozes only (rare): no acks, so no loop over them.
        # Read after the answer: the backend's clock started the delay no later.
        now = trio.current_time()
        for item, result in zip(items, results, strict=True):
            if result is Recorded.RETRY and isinstance(item, Failure):
                self._retry_due(now + (item.retry_delay or 0.0))
            elif result is Snoozed.SNOOZED and isinstance(item, SnoozeWrite):
                self._retry_due(now + item.seconds)


class _DueTimes:
    """The earliest ``most`` times at which retried jobs become claimable, in order."""

    def __init__(self, most: int) -> None:
        self._times: list[float] = []
        self._most = most

    def add(self, at: float) -> None:
        bisect.insort(self._times, at)
        if len(self._times) > self._most:
            self._times.pop()  # the latest: its job is claimed at a poll instead

    def earliest(self) -> float | None:
        return self._times[0] if self._times else None

    def drop_through(self, now: float) -> None:
        """Forget the times a claim sent at ``now`` covers."""
        del self._times[: bisect.bisect_right(self._times, now)]
