"""One batch: its claim hooks and handlers in one cancel scope, then one outcome per job.

The nursery tree of a batch of several jobs::

    batch task
    └── batch CancelScope         deadline = min(lease fence, registration + D, shutdown)
        └── work nursery
            ├── one task per job
            │   └── job CancelScope      cancel directive, reclaimed, gone
            │           on_job_claimed(job), handler(payload, ctx); decides its outcome
            │           and leaves it in the batch's inbox
            └── shielded settling        (the batch task itself) the fenced writes of
                                         every outcome left since its last write, in one
                                         hand-over to the writer; then their hooks

A batch of one job has no nursery, no job task and no job scope: the batch task runs the
job under the batch scope and settles it itself, shielded. So does each job of a
transactional batch, since its ack commits its own transaction (below).

When a job's work ends, for whatever reason, its outcome is decided at once, so nothing that
happens later can change it (invariant I8). The write runs shielded from the batch scope: a
fence that fires meanwhile must not interrupt the ack of a job that finished in time, and
the write is fenced by ``claim_seq`` anyway. A job is renewed until its outcome is written
(docs/protocol.rst §4). Writing per batch rather than per job is what keeps the runtime's
cost per job low (docs/performance.rst): one wait for the writer, not a shielded scope, an
event and a wait per job. The hooks of a batch's finished jobs then run one after the other.

Transactional mode: after the claim hook, still inside the job's scope (so the lease fence
bounds the wait for a connection), the job opens a transaction through the backend's
:meth:`~trioqueue._backends.interface.TransactionalBackend.job_transaction`, and the handler gets its
connection as ``ctx.connection``. A success is settled by ``commit_with_ack``: the fenced ack
commits with the handler's writes, or, when the fence no longer matches, neither does. Every
other outcome rolls the transaction back *first* and is then written outside it as usual, so
a failure is recorded even though the handler's writes are gone. One case writes nothing: a
failure after COMMIT was sent leaves the commit in doubt, and only the row knows; its lease
then settles it (a committed ack finished the row, a lost commit lets it be claimed again).
Falling back to a plain ack there would acknowledge a job whose writes may be lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from types import FrameType
from typing import TYPE_CHECKING, Any, cast

import trio

from trioqueue._backends.interface import (
    ConnectionUnavailable,
    JobTransaction,
    TransactionalBackend,
    transactions_of,
)
from trioqueue._backends.validation import check_seconds, encode_result
from trioqueue._core.backoff import ExponentialBackoff
from trioqueue._core.checkpoint import latest_checkpoint
from trioqueue._core.outcome import Outcome, decide, decide_attempt
from trioqueue._core.rules import OutcomeKind, StopReason
from trioqueue._core.snooze import Snooze, first_snooze, snooze_limit_message
from trioqueue._core.timing import Timing, retry_delay, write_retries_spent
from trioqueue._errors import is_transient, leaves
from trioqueue._runtime.attempt_log import NOT_RECORDED as NOT_RECORDED
from trioqueue._runtime.attempt_log import log_outcome
from trioqueue._runtime.config import Handler, WorkerConfig, is_async_callable
from trioqueue._runtime.context import JobContext, PoolShare
from trioqueue._runtime.failures import Raised, from_exception, from_exit, from_group
from trioqueue._runtime.guard import BatchHandle, Guard
from trioqueue._runtime.logfields import job_fields
from trioqueue._runtime.monitor import BlockingMonitor
from trioqueue._runtime.observer import LEASE_LOSSES, OUTCOME_LABELS, PoolObserver
from trioqueue._runtime.sync_handlers import call_sync_handler, tell_thread_when_stopped
from trioqueue._runtime.writer import OutcomeWriter
from trioqueue._types import (
    Ack,
    AttemptTiming,
    Claimed,
    Failure,
    Job,
    Recorded,
    Release,
    Snoozed,
    SnoozeWrite,
)

if TYPE_CHECKING:
    from trioqueue._otel import AttemptTrace, AttemptTracer

log = logging.getLogger("trioqueue.worker")

#: Stands in for a custom backoff that gave no usable delay (see BatchRunner._retry_delay).
_DEFAULT_BACKOFF = ExponentialBackoff()

EXPIRED_ON_ARRIVAL = "lease expired before the handler started"
UNRECORDED = (
    "outcome ({kind}) not recorded: writing it failed {why} ({error!r}); "
    "the job runs again once its lease is over"
)
#: The first pause after a refused connection; each later one doubles, up to H.
CONNECT_RETRY_FIRST = 0.05
#: A hook of WorkerConfig: the job first, then what the hook's kind adds.
Hook = Callable[..., Awaitable[None]]
#: The name of a batch's task.
_BATCH = "trioqueue.batch"
#: The stops after which a failure is still the handler's exception (its type and
#: traceback stored with it): none, or a cancel the handler answered by raising. A
#: duration's or a lost lease's failure raised nothing of the handler's own
#: (docs/protocol.rst §14).
_STOPS_KEEPING_ERROR = frozenset({None, StopReason.CANCELLED})
COMMIT_IN_DOUBT = (
    "the transaction's commit may or may not have happened ({error}); nothing else is "
    "written: the row's lease settles it"
)


class BatchRunner:
    """Runs batches for one pool; holds what every batch shares."""

    def __init__(
        self,
        guard: Guard,
        writer: OutcomeWriter,
        slots: trio.Semaphore,
        config: WorkerConfig,
        timing: Timing,
        monitor: BlockingMonitor,
        observer: PoolObserver | None = None,
        resources: Any = None,
        claiming: trio.CancelScope | None = None,
        tracer: AttemptTracer | None = None,
    ) -> None:
        self._guard = guard
        # Spans of each attempt (docs/telemetry.rst); None without OpenTelemetry, and then
        # an attempt spends one check of it at each of its steps.
        self._tracer = tracer
        # The pool's claim loop, cancelled as soon as an exception gets out of a job: the
        # pool is going down, and a job claimed now could not run (docs/protocol.rst §4.1).
        self._claiming = claiming
        # ctx.resources of every job; made in the trio thread, by the pool.
        self._share = PoolShare(resources, threading.get_ident())
        self._observer = observer
        self._writer = writer
        self._slots = slots
        self._config = config
        self._timing = timing
        # A step of this frame (the claim hook, the handler) that blocks the event loop is
        # logged with the frame's job; nothing is registered per job.
        monitor.recognise(BatchRunner._attempt.__code__, _attempt_job)
        self._handler_is_async = is_async_callable(config.handler)
        # None in batch mode (batch_call.py), where no per-job handler runs.
        self._handler = cast(Handler, config.handler)
        # Sync handlers get threads of their own, so they never queue behind other code's.
        self._threads = trio.CapacityLimiter(config.concurrency * config.batch_size)
        self._transactions: TransactionalBackend | None = (
            transactions_of(writer.backend) if config.transactional else None
        )

    def start(self, batches: trio.Nursery, handle: BatchHandle) -> None:
        """Start the task of one registered batch, which frees its slot of the pool at its
        end."""
        if len(handle.jobs) == 1:
            # The common case: the batch task is the attempt itself, its scope the batch
            # scope: no nursery, no extra task, coroutine or scope per job.
            job = handle.jobs[0]
            batches.start_soon(self._attempt, handle, job, None, name=_BATCH)
        else:
            batches.start_soon(self.run, handle, name=_BATCH)

    async def run(self, handle: BatchHandle) -> None:
        """Run one registered batch of several jobs to its end."""
        try:
            inbox = None if self._transactions is not None else _Inbox(len(handle.jobs))
            with handle.scope:
                async with trio.open_nursery() as work:
                    for job in handle.jobs:
                        work.start_soon(self._attempt, handle, job, inbox, name="trioqueue.job")
                    if inbox is not None:
                        # Shielded from the batch scope, as each job's settling is: a fence
                        # firing meanwhile must not interrupt the write of an outcome that
                        # was decided in time.
                        with trio.CancelScope(shield=True):
                            await self._settle_from(handle, inbox)
        finally:
            self._end_batch(handle)

    def _end_batch(self, handle: BatchHandle) -> None:
        self._guard.unregister(handle.batch_id)
        self._slots.release()

    async def reject(self, claimed: list[Claimed]) -> None:
        """A batch that arrived expired: hooks say claimed then unavailable; no handler."""
        for job in (c.job for c in claimed):
            log.warning(
                "job %d: %s; not running it",
                job.id,
                EXPIRED_ON_ARRIVAL,
                extra=job_fields(job, "expired_on_arrival"),
            )
            if self._observer is not None:
                self._observer.job_finished(self._config.queue, "unavailable")
            await self._hook(self._config.on_job_claimed, job)
            await self._hook(self._config.on_job_unavailable, job, EXPIRED_ON_ARRIVAL)

    # -- one job ------------------------------------------------------------------------

    async def _attempt(self, handle: BatchHandle, job: Job, inbox: _Inbox | None) -> None:
        """One job, in its own scope, or in the batch scope itself in a batch of one.

        Its outcome is decided as soon as its work ends (I8). With an ``inbox`` (a batch of
        several jobs, not transactional) the batch task writes it, with those of the jobs
        that finished meanwhile; else the job settles it itself. A batch of one also ends
        its batch here: this coroutine is the batch task's.

        In transactional mode the handler's transaction is entered inside the scope but left
        only in :meth:`_settle_alone`, after the outcome is decided: committed with the ack,
        or rolled back before anything else is written.
        """
        # Few locals here: this frame lives as long as the handler runs, twice over (the
        # coroutine, and the frame object trio makes of a task's first frame). Hence no
        # local for the scope either.
        error: Raised | None = None
        result: str | None = None  # the handler's return value as JSON text
        snooze: float | None = None  # the seconds of a Snooze it raised or returned (§17)
        began: float | None = None  # when the handler started (None: it never did)
        exiting = False  # cancelled from outside the batch: the pool is going down
        txs = _TxState() if self._transactions is not None else None
        started = trio.current_time() if self._observer is not None else 0.0
        trace = None if self._tracer is None else self._start_trace(handle, job)
        try:
            with handle.scope_of(job.id):
                try:
                    if self._config.on_job_claimed is not None:
                        await self._config.on_job_claimed(job)  # under the scope; counts for D
                    if txs is not None:
                        await self._open_transaction(job, txs)
                    # Called here rather than through a helper: a coroutine frame less for
                    # every job in flight (memory per job is a bench goal).
                    began = trio.current_time()
                    if trace is not None:
                        trace.handler_started(began)
                    if self._handler_is_async:
                        # Encoded here, so a value with no JSON form fails the attempt
                        # like any handler error (docs/usage.rst, "Results").
                        result = await self._handler(job.payload, self._context(handle, job, txs))
                        # None (most jobs) needs no encoding: no call for it.
                        result = None if result is None else _encoded(result)
                    else:
                        result = await self._run_in_thread(job, self._context(handle, job, txs))
                except* _NoConnection:
                    pass  # not the handler's failure: `txs.refused` says why
                except* Snooze as snoozes:
                    # Raised or returned (``_encoded``); beside another error it is that
                    # error's failure (the clause below), docs/protocol.rst §17.
                    snooze = first_snooze(snoozes).seconds
                except* Exception as group:
                    error = self._raised(job, group)
        except BaseException as escaped:
            # What the job's scope let through is never a success (docs/protocol.rst §4.1):
            # a BaseException of the hook's or handler's own (SystemExit, say) is its
            # charged failure; trio's cancellation alone, from a scope outside the batch,
            # means the pool is going down on an exception raised elsewhere. The outcome
            # is written (below) before the exception goes on up.
            error, exiting = self._escaped(handle, job, escaped, error)
            raise
        finally:
            try:
                if inbox is not None:
                    inbox.put(
                        self._finished(
                            handle, job, error, result, txs, started, exiting, began, trace, snooze
                        )
                    )
                else:
                    with trio.CancelScope(shield=True):
                        await self._settle_alone(
                            handle, job, error, result, txs, started, exiting, began, trace, snooze
                        )
            finally:
                if trace is not None:
                    trace.leave()
                if inbox is not None:
                    inbox.leave()
                elif len(handle.jobs) == 1:
                    self._end_batch(handle)

    def _start_trace(self, handle: BatchHandle, job: Job) -> AttemptTrace | None:
        assert self._tracer is not None
        return self._tracer.start(job, handle.claim_sent, handle.registered_at, len(handle.jobs))

    def _context(self, handle: BatchHandle, job: Job, txs: _TxState | None) -> JobContext:
        connection = None if txs is None or txs.tx is None else txs.tx.connection
        return JobContext(job, handle, self._share, connection)

    def _raised(self, job: Job, group: BaseExceptionGroup[Exception]) -> Raised:
        """Log what the handler (or claim hook) raised; its ``last_error`` text, type and
        traceback (formatted now, the only time an attempt pays for it)."""
        error = describe(group)
        log.debug(  # its outcome's line follows, with the traceback
            "job %d attempt %d raised: %s",
            job.id,
            job.attempt,
            error,
            extra=job_fields(job, "raised"),
        )
        return from_group(group, error)

    def _escaped(
        self, handle: BatchHandle, job: Job, escaped: BaseException, error: Raised | None
    ) -> tuple[Raised | None, bool]:
        """What got out of a job's scope: the attempt's error (with any the handler raised
        beside it), and whether it was only trio's cancellation from outside the batch.

        In a batch of several jobs the batch scope encloses the job's: its own firing (a
        deadline) gets out of the job's scope too, and is no sign of the pool going down.
        """
        own: BaseException | None = escaped
        if isinstance(escaped, BaseExceptionGroup):
            _, own = escaped.split(trio.Cancelled)
        elif isinstance(escaped, trio.Cancelled):
            own = None
        if own is None:
            return error, not handle.scope.cancel_called
        if self._claiming is not None:
            self._claiming.cancel()  # before any await: a slot freed now is not refilled
        text = f"{describe_exit(own)} (raised by the handler; the worker process exits)"
        log.error(
            "job %d attempt %d raised %s: recording it as failed, then exiting",
            job.id,
            job.attempt,
            describe_exit(own),
            extra=job_fields(job, "raised_exit"),
        )
        text = text if error is None else f"{error.text}; {text}"
        return from_exit(own, text, error), False

    def _finished(
        self,
        handle: BatchHandle,
        job: Job,
        error: Raised | None,
        result: str | None,
        txs: _TxState | None,
        started: float,
        exiting: bool = False,
        began: float | None = None,
        trace: AttemptTrace | None = None,
        snooze: float | None = None,
    ) -> _Finished:
        """The job's work has ended: its outcome, decided now (I8), and the stop that
        decided it if any (as ``decide`` picks it: the job's own before its batch's); with
        the handler's timing if it started (``began``)."""
        lease = handle.leases[job.id]
        lease.end_work()
        now = trio.current_time()
        if self._observer is not None:
            self._observer.handler_finished(self._config.queue, now - started)
        refused = None if txs is None or txs.tx is not None else txs.refused
        outcome, stop = decide_attempt(
            job_stop=lease.stop,
            scope_fired=handle.scope.cancel_called,
            batch_stop=lambda: self._guard.batch_stop(handle.batch_id),
            error=None if error is None else error.text,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            max_job_duration=self._timing.max_job_duration,
            no_connection=refused[-1] if refused else None,
            exiting=exiting,
            snooze=snooze,
        )
        done = _Finished(job, outcome, stop, result)
        if outcome.kind is OutcomeKind.SNOOZE:
            done.delay = snooze or 0.0
        if began is not None:
            done.timing = AttemptTiming(began - handle.registered_at, now - began)
        if error is not None and stop in _STOPS_KEEPING_ERROR:
            done.raised = error  # the failure is the exception's, so is its type
        if trace is not None:
            done.trace = trace
            raised = done.raised
            if raised is None:
                trace.work_ended(now, None, None, None)
            else:
                trace.work_ended(now, raised.error_type, raised.text, raised.traceback)
        return done

    async def _open_transaction(self, job: Job, txs: _TxState) -> None:
        """Enter the job's transaction, waiting out connections the server refuses.

        A refused connection (too many clients, a role's connection limit) is not the
        handler's failure (docs/protocol.rst §4): try again with backoff, within the job's
        scope, for up to V; then raise ``_NoConnection``, and the job is released without
        charging the attempt. Each refusal is recorded in ``refused``, so that a scope
        deadline passing meanwhile releases the job too.
        """
        assert self._transactions is not None
        timing = self._timing
        give_up = trio.current_time() + timing.visibility_timeout
        pause = CONNECT_RETRY_FIRST
        while True:
            try:
                transaction = self._transactions.job_transaction()
                txs.tx = await txs.held.enter_async_context(transaction)
                return
            except ConnectionUnavailable as exc:
                txs.refused.append(str(exc))
                if trio.current_time() + pause > give_up:
                    log.warning(
                        "job %d: no database connection for its handler: %s",
                        job.id,
                        exc,
                        extra=job_fields(job, "no_connection"),
                    )
                    raise _NoConnection from exc
                log.info(
                    "job %d: database connection refused, retry in %.2fs: %s",
                    job.id,
                    pause,
                    exc,
                    extra=job_fields(job, "connection_refused"),
                )
            await trio.sleep(pause)
            pause = min(2 * pause, timing.heartbeat_interval)

    async def _run_in_thread(self, job: Job, ctx: JobContext) -> str | None:
        """Run a sync handler in a thread; its return value as JSON text.

        What the handler raised is raised here, after the nursery: raised inside it, it
        would come out wrapped in the nursery's group, a group of the runtime's own that
        the attempt's traceback would show around the handler's error.
        """
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tell_thread_when_stopped, ctx)
            result, error = await trio.to_thread.run_sync(
                call_sync_handler, self._handler, job.payload, ctx, limiter=self._threads
            )
            nursery.cancel_scope.cancel()
        if error is not None:
            try:
                raise error
            finally:
                del error  # no cycle through this frame
        return result

    async def _settle_from(self, handle: BatchHandle, inbox: _Inbox) -> None:
        """Write the outcomes of the batch's jobs as they finish, all that finished
        meanwhile at once, until every job has left."""
        while finished := await inbox.take():
            await self._settle(handle, finished)

    async def _settle_alone(
        self,
        handle: BatchHandle,
        job: Job,
        error: Raised | None,
        result: str | None,
        txs: _TxState | None,
        started: float,
        exiting: bool,
        began: float | None,
        trace: AttemptTrace | None,
        snooze: float | None,
    ) -> None:
        """Decide and settle one job by itself: in transactional mode, its transaction
        first."""
        try:
            done = self._finished(
                handle, job, error, result, txs, started, exiting, began, trace, snooze
            )
            if txs is not None:
                done.outcome, done.applied = await self._end_transaction(
                    handle, done, txs.tx, txs.held
                )
            await self._settle(handle, [done])
        finally:
            if txs is not None:
                await txs.held.aclose()  # a no-op once _end_transaction closed it

    async def _settle(self, handle: BatchHandle, finished: list[_Finished]) -> None:
        """Write the outcomes of jobs whose work has ended, in one hand-over to the writer;
        those whose write failed are written again after a pause while the lease holds.
        As soon as a job's outcome is written (or given up), it is renewed no more and its
        hook runs."""
        todo: list[_Finished] = []
        ready: list[_Finished] = []  # committed with its transaction, or nothing to write
        for done in finished:
            if done.applied is not None or done.outcome.kind is OutcomeKind.UNAVAILABLE:
                ready.append(done)
            else:
                if done.outcome.kind is OutcomeKind.RETRY:
                    done.delay = self._retry_delay(done.job)
                todo.append(done)
        try:
            await self._settled(handle, ready)
            while todo:
                written, todo = await self._write(handle, todo)
                await self._settled(handle, written)
                if todo:
                    remaining = handle.scope.deadline - trio.current_time()
                    await trio.sleep(retry_delay(self._timing.heartbeat_interval, remaining))
        finally:
            # Whatever happened: the jobs left unwritten are renewed no more either
            # (``_settled`` has already said so of every other one, before any await).
            for done in todo:
                self._guard.settle(handle.leases[done.job.id])

    async def _settled(self, handle: BatchHandle, settled: list[_Finished]) -> None:
        """Jobs whose outcome is written or given up: renewed no more, then their hooks."""
        for done in settled:
            # Only now, with its claim hook and handler exited and its outcome written, is
            # a job renewed no more: a stopped handler still unwinding keeps its lease
            # (docs/protocol.rst §4).
            self._guard.settle(handle.leases[done.job.id])
        for done in settled:
            if self._observer is not None:
                self._observe(done.outcome, done.applied, done.stop)
            hook, args = self._report(done)
            if done.trace is not None:
                done.trace.finish(_attempt_outcome(done), done.outcome.message, trio.current_time())
            if hook is not None:  # awaited here, not through _hook: a coroutine less per job
                try:
                    await hook(done.job, *args)
                except Exception:
                    self._hook_raised(hook, done.job)

    def _observe(
        self,
        outcome: Outcome,
        applied: bool | Recorded | Snoozed | None,
        stop: StopReason | None,
    ) -> None:
        """Tell the observer how the attempt ended, and whether it lost its lease."""
        assert self._observer is not None
        queue = self._config.queue
        if applied is False:  # the fence kept the write out: as on_job_unavailable says
            self._observer.job_finished(queue, "unavailable")
            return
        label = OUTCOME_LABELS[outcome.kind]
        if outcome.kind is OutcomeKind.FAILED and stop is StopReason.CANCELLED:
            label = "cancelled"  # as _cancelled says
        self._observer.job_finished(queue, label)
        if outcome.kind is OutcomeKind.UNAVAILABLE and stop is not None and stop in LEASE_LOSSES:
            self._observer.lease_lost(LEASE_LOSSES[stop])

    async def _end_transaction(
        self,
        handle: BatchHandle,
        done: _Finished,
        tx: JobTransaction | None,
        held: AsyncExitStack,
    ) -> tuple[Outcome, bool | None]:
        """Commit a success with its ack, or roll back; then close the transaction.

        Returns:
            The outcome still to write outside the transaction (with None), or the ack's
            outcome and whether its fence let the commit through.
        """
        job, outcome = done.job, done.outcome
        try:
            if tx is None or outcome.kind is not OutcomeKind.SUCCEEDED:
                return outcome, None
            lease = handle.leases[job.id]
            try:
                with trio.fail_after(self._timing.visibility_timeout):
                    ack = Ack(
                        job.id,
                        job.claim_seq,
                        lease.progress,
                        done.result,
                        done.timing,
                        latest_checkpoint(lease.checkpoint),
                    )
                    return outcome, await tx.commit_with_ack(ack)
            except Exception as exc:
                if tx.commit_sent:
                    message = COMMIT_IN_DOUBT.format(error=repr(exc))
                    return Outcome(OutcomeKind.UNAVAILABLE, message), None
                # Nothing was committed: as if the handler had raised this.
                failure = f"transaction failed before commit: {type(exc).__name__}: {exc}"
                log.info(
                    "job %d attempt %d: %s",
                    job.id,
                    job.attempt,
                    failure,
                    extra=job_fields(job, "transaction_failed"),
                )
                done.raised = from_exception(exc, failure)
                return self._failed(job, failure), None
        finally:
            await held.aclose()

    def _failed(self, job: Job, error: str) -> Outcome:
        return decide(
            job_stop=None,
            batch_stop=None,
            error=error,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            max_job_duration=self._timing.max_job_duration,
        )

    def _retry_delay(self, job: Job) -> float:
        """The backoff's delay before ``job`` is retried. A custom backoff that raises or
        answers what no backend stores (NaN, negative, past a century) is logged, and the
        default policy stands in: the failure must still be recorded, not refused until
        the lease runs out."""
        try:
            return check_seconds("backoff(attempt)", self._config.backoff(job.attempt))
        except Exception as exc:
            log.error(
                "job %d: backoff(%d) gave no usable delay (%s); using the default backoff",
                job.id,
                job.attempt,
                exc,
                extra=job_fields(job, "backoff_invalid"),
            )
            return _DEFAULT_BACKOFF(job.attempt)

    async def _write(
        self, handle: BatchHandle, todo: list[_Finished]
    ) -> tuple[list[_Finished], list[_Finished]]:
        """Write the outcomes once, fenced by claim_seq. Sets each one's ``applied``: False
        if the fence kept it out; for a failure, what the backend recorded; else True. An
        outcome whose write failed and is given up becomes unavailable (``applied`` None).

        Returns:
            The outcomes settled (written or given up), and those to write again.
        """
        answers = await self._writer.write([self._item(handle, done) for done in todo])
        settled: list[_Finished] = []
        retry: list[_Finished] = []
        for done, answer in zip(todo, answers, strict=True):
            if not isinstance(answer, Exception):
                done.applied = False if answer is None else answer
                if isinstance(answer, Snoozed):
                    self._snooze_answered(done, answer)
                elif done.outcome.kind is OutcomeKind.RETRY and answer is Recorded.FINAL:
                    # The backend knew better: the job was asked to cancel before this
                    # worker heard (a cancelled job is never retried), and stored the error
                    # so.
                    message = f"cancelled: cancel requested ({done.outcome.message})"
                    done.outcome = Outcome(OutcomeKind.FAILED, message)
                    done.stop = StopReason.CANCELLED
                settled.append(done)
            elif self._gives_up(handle, done, answer):
                done.outcome = Outcome(OutcomeKind.UNAVAILABLE, done.unrecorded)
                done.stop = StopReason.LEASE_EXPIRED  # its fence passed while writing
                settled.append(done)
            else:
                retry.append(done)
        return settled, retry

    def _snooze_answered(self, done: _Finished, answer: Snoozed) -> None:
        """What the backend made of a snooze (docs/protocol.rst §17): snoozed as asked, or
        failed for good, by the bound (charged) or by a cancel asked meanwhile."""
        if answer is Snoozed.LIMIT:
            done.outcome = Outcome(
                OutcomeKind.FAILED, snooze_limit_message(self._config.max_snoozes)
            )
        elif answer is Snoozed.CANCELLED:
            done.outcome = Outcome(OutcomeKind.FAILED, "cancelled: cancel requested")
            done.stop = StopReason.CANCELLED

    def _gives_up(self, handle: BatchHandle, done: _Finished, exc: Exception) -> bool:
        """Whether a failed write of ``done`` is given up (and why, in ``done.unrecorded``),
        or tried again."""
        job, kind = done.job, done.outcome.kind.value
        # While the handler's outcome is unwritten its lease is still renewed
        # (docs/protocol.rst §4), so an error that retrying cannot fix would spin here for
        # ever: give the attempt up at once; and one that keeps failing, once it has been
        # retried for one lease (§4.2). Its lease then lapses: another worker takes the job.
        now, v = trio.current_time(), self._timing.visibility_timeout
        first = done.failing_since is None
        since = now if done.failing_since is None else done.failing_since
        done.failing_since = since
        lost = self._guard.fence_passed(handle.batch_id)
        spent = write_retries_spent(since, now, v)
        if lost or spent or not is_transient(exc):
            if lost:
                why = "until the lease expired"
            elif spent:
                why = f"for one lease ({v:g}s)"
            else:
                why = "in a way retrying cannot fix"
            log.error(
                "job %d: could not record %s (%s), giving it up; the job runs again once "
                "its lease is over: %r",
                job.id,
                kind,
                why,
                exc,
                extra=job_fields(job, "record_failed"),
            )
            done.unrecorded = UNRECORDED.format(kind=kind, why=why, error=exc)
            return True
        if first:  # once per job: retries come every 0.25 s at shutdown
            log.warning(
                "job %d: recording %s failed, retrying for up to %gs: %r",
                job.id,
                kind,
                v,
                exc,
                extra=job_fields(job, "record_retry"),
            )
        return False

    def _item(self, handle: BatchHandle, done: _Finished) -> Ack | Release | Failure | SnoozeWrite:
        """The fenced write of ``done``'s outcome, with the job's latest progress and
        checkpoint (docs/protocol.rst §10, refinement 7; §16)."""
        job, kind = done.job, done.outcome.kind
        lease = handle.leases[job.id]
        progress, checkpoint = lease.progress, latest_checkpoint(lease.checkpoint)
        if kind is OutcomeKind.SUCCEEDED:
            return Ack(job.id, job.claim_seq, progress, done.result, done.timing, checkpoint)
        if kind is OutcomeKind.RELEASE:
            return Release(job.id, job.claim_seq, progress, done.timing, checkpoint)
        if kind is OutcomeKind.SNOOZE:
            return SnoozeWrite(job.id, job.claim_seq, done.delay, progress, done.timing, checkpoint)
        retry = done.delay if kind is OutcomeKind.RETRY else None
        message, raised = done.outcome.message or "", done.raised
        if raised is None:
            return Failure(
                job.id, job.claim_seq, message, retry, progress, done.timing, checkpoint=checkpoint
            )
        return Failure(
            job.id,
            job.claim_seq,
            message,
            retry,
            progress,
            done.timing,
            raised.error_type,
            raised.traceback,
            checkpoint,
        )

    def _report(self, done: _Finished) -> tuple[Hook | None, tuple[Any, ...]]:
        """Log how the attempt ended; the hook to call for it, and its arguments after the
        job."""
        config, outcome, raised = self._config, done.outcome, done.raised
        fenced_out = done.applied is False
        log_outcome(
            done.job,
            outcome,
            fenced_out=fenced_out,
            cancelled=_cancelled(done),
            delay=done.delay,
            raised=raised,
        )
        if raised is not None:
            raised.logged()
        kind = outcome.kind
        if fenced_out:
            return config.on_job_unavailable, (NOT_RECORDED,)
        if kind is OutcomeKind.SUCCEEDED:
            return config.on_job_succeeded, ()
        if kind is OutcomeKind.RETRY:
            return config.on_job_retry, (done.delay,)
        if kind is OutcomeKind.SNOOZE:
            return None, ()  # neither a success, a retry nor a failure (§17)
        if kind is OutcomeKind.FAILED:
            return config.on_job_failed, (outcome.message or "",)
        return config.on_job_unavailable, (outcome.message or "",)

    async def _hook(self, hook: Hook | None, job: Job, *args: Any) -> None:
        if hook is None:
            return
        try:
            await hook(job, *args)
        except Exception:
            self._hook_raised(hook, job)

    def _hook_raised(self, hook: Hook, job: Job) -> None:
        log.exception(
            "hook %s raised; carrying on",
            getattr(hook, "__name__", hook),
            extra=job_fields(job, "hook_raised"),
        )


def _attempt_job(frame: FrameType) -> tuple[int, float] | None:
    """The blocking monitor's reader of a frame of :meth:`BatchRunner._attempt` (from its
    watchdog thread): the job the attempt runs, held to its own pool's threshold."""
    local = frame.f_locals
    runner, job = local.get("self"), local.get("job")
    if isinstance(runner, BatchRunner) and isinstance(job, Job):
        return job.id, runner._config.blocking_threshold
    return None


class _NoConnection(Exception):
    """The handler's database connection was refused for as long as the runtime waits."""


class _TxState:
    """A transactional attempt's transaction: held open from the handler's start until
    its outcome is decided and settled."""

    __slots__ = ("held", "refused", "tx")

    def __init__(self) -> None:
        self.held = AsyncExitStack()
        self.tx: JobTransaction | None = None  # None until entered
        self.refused: list[str] = []  # why connections were refused, latest last


class _Finished:
    """A job whose work has ended: its outcome, decided then (I8), and what its write did."""

    __slots__ = (
        "applied",
        "delay",
        "failing_since",
        "job",
        "outcome",
        "raised",
        "result",
        "stop",
        "timing",
        "trace",
        "unrecorded",
    )

    def __init__(
        self, job: Job, outcome: Outcome, stop: StopReason | None, result: str | None
    ) -> None:
        self.job = job
        self.outcome = outcome
        self.stop = stop  # the stop that decided the outcome, if any
        self.result = result  # the handler's return value as JSON text
        #: None until written (and when there is nothing to write); False: fenced out;
        #: for a failure or a snooze, what the backend recorded; else True.
        self.applied: bool | Recorded | Snoozed | None = None
        self.delay = 0.0  # before a retry
        self.unrecorded = ""  # why the write was given up, if it was
        self.failing_since: float | None = None  # when its write first failed
        self.timing: AttemptTiming | None = None  # None: the handler never started
        #: The exception the failure is, when one is (not a timeout's, nor a lost lease's).
        self.raised: Raised | None = None
        self.trace: AttemptTrace | None = None  # its spans, when traced


class _Inbox:
    """Where the jobs of a batch leave their decided outcomes for the batch task to write.

    One per batch of several jobs: the batch task waits here once for every job that
    finished meanwhile, rather than each job waiting for its own write.
    """

    __slots__ = ("_finished", "_running", "_wake")

    def __init__(self, running: int) -> None:
        self._finished: list[_Finished] = []
        self._running = running  # jobs whose task has not left yet
        self._wake = trio.Event()

    def put(self, done: _Finished) -> None:
        self._finished.append(done)
        self._wake.set()

    def leave(self) -> None:
        """A job's task is ending (called even if deciding its outcome failed)."""
        self._running -= 1
        self._wake.set()

    async def take(self) -> list[_Finished]:
        """Every outcome left since the last take, once there is one; empty once every job
        has left and nothing is left to take."""
        while not self._finished and self._running:
            await self._wake.wait()
            self._wake = trio.Event()
        taken, self._finished = self._finished, []
        return taken


#: The attempts table's word for each outcome (docs/protocol.rst §14); an attempt whose
#: write was given up or fenced out is ``lost``: another claim takes its job over.
_ATTEMPT_OUTCOMES = {
    OutcomeKind.SUCCEEDED: "succeeded",
    OutcomeKind.RETRY: "retry",
    OutcomeKind.FAILED: "failed",
    OutcomeKind.RELEASE: "released",
    OutcomeKind.SNOOZE: "snoozed",
    OutcomeKind.UNAVAILABLE: "lost",
}


def _attempt_outcome(done: _Finished) -> str:
    """How the attempt ended, as its attempt row says it."""
    if done.applied is False:
        return "lost"
    return "cancelled" if _cancelled(done) else _ATTEMPT_OUTCOMES[done.outcome.kind]


def _cancelled(done: _Finished) -> bool:
    """Whether the attempt failed for good because a cancel was asked."""
    return done.outcome.kind is OutcomeKind.FAILED and done.stop is StopReason.CANCELLED


def _encoded(value: object) -> str | None:
    """An async handler's return value as JSON text; a returned ``Snooze`` is raised, so
    that returning one and raising one are the same answer (docs/protocol.rst §17)."""
    if isinstance(value, Snooze):
        raise value
    return encode_result(value)


def describe(group: BaseExceptionGroup[Exception]) -> str:
    """``last_error`` text for what a handler raised."""
    parts = [f"{type(exc).__name__}: {exc}" for exc in group.exceptions]
    return "; ".join(parts)


def describe_exit(escaped: BaseException) -> str:
    """What a hook or handler raised that is no ``Exception`` (a group's leaves, but for
    trio's cancellations), named as :func:`describe` names errors: ``SystemExit: 3``, or
    just ``KeyboardInterrupt`` when it says nothing more."""
    found = leaves(escaped) if isinstance(escaped, BaseExceptionGroup) else [escaped]
    return "; ".join(
        f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        for exc in found
        if not isinstance(exc, trio.Cancelled)
    )
