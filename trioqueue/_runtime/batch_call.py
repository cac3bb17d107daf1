"""Batch mode: a whole batch in one batch handler call (docs/protocol.rst §20).

The nursery tree of a batch in batch mode::

    batch task
    └── batch CancelScope         deadline = min(lease fence, registration + D, shutdown)
            on_job_claimed(job) for each job, then batch_handler(jobs, ctx): one call
    └── shielded settling         one outcome per job, in one hand-over to the writer

There is no job task and no job scope: one job's stop (a cancel, its row reclaimed or gone)
cannot cancel a call that works for its siblings too. The guard records the stop on the
job's lease, which the handler reads through ``ctx.stop_requested(job_id)``, and the stop
decides the job's outcome whatever the answer says (I8); once every job of the batch is
stopped, the batch scope is cancelled (``BatchHandle.one_call``). A stop of the batch
(fence, duration, shutdown) cancels the call; the answer it did not give is then decided by
that stop for every job, as for the handlers of a per-job batch.

Everything after the call is the per-job runtime's own (:class:`BatchRunner`): each job's
outcome is decided by ``_finished`` from the job's stop, the batch's stop and what the
answer says of it, and written by ``_settle``, fenced by ``(job_id, claim_seq)``.
"""

from __future__ import annotations

import logging
from types import FrameType
from typing import TYPE_CHECKING, Any

import trio

from trioqueue._backends.validation import encode_result
from trioqueue._core.batch_outcome import (
    BatchOutcome,
    JobFailed,
    JobRetry,
    JobSucceeded,
    missing_message,
    read_answer,
)
from trioqueue._core.outcome import SUCCEEDED
from trioqueue._core.snooze import Snooze
from trioqueue._core.timing import Timing
from trioqueue._runtime.batch import BatchRunner, _Finished
from trioqueue._runtime.batch_context import BatchContext
from trioqueue._runtime.config import WorkerConfig
from trioqueue._runtime.failures import Raised, from_exception
from trioqueue._runtime.guard import BatchHandle, Guard
from trioqueue._runtime.logfields import job_fields
from trioqueue._runtime.monitor import BlockingMonitor
from trioqueue._runtime.writer import OutcomeWriter
from trioqueue._types import AttemptTiming, Job

if TYPE_CHECKING:
    from trioqueue._otel import AttemptTrace

log = logging.getLogger("trioqueue.worker")

#: The name of a batch's task in batch mode.
_BATCH_CALL = "trioqueue.batch_call"


class _Said:
    """What the call came to for one job: the error it failed with (its text, and the
    exception when one is the failure), or the success's result as JSON text; and the
    retry delay it asked for, or the seconds of its snooze (docs/protocol.rst §17)."""

    __slots__ = ("delay", "error", "result", "snooze")

    def __init__(
        self,
        error: Raised | None = None,
        result: str | None = None,
        delay: float | None = None,
        snooze: float | None = None,
    ) -> None:
        self.error = error
        self.result = result
        self.delay = delay
        self.snooze = snooze


#: What the call answered before it returned: nothing.
_NO_ANSWER = object()
#: A success without a result.
_NOTHING_TO_STORE = _Said()


class BatchCallRunner(BatchRunner):
    """Runs each batch of the pool in one call of ``config.batch_handler``."""

    def __init__(
        self,
        guard: Guard,
        writer: OutcomeWriter,
        slots: trio.Semaphore,
        config: WorkerConfig,
        timing: Timing,
        monitor: BlockingMonitor,
        *rest: Any,
        **options: Any,
    ) -> None:
        super().__init__(guard, writer, slots, config, timing, monitor, *rest, **options)
        # A call that blocks the event loop is logged with its batch's first job.
        monitor.recognise(BatchCallRunner._call.__code__, _call_job)
        # The retry delays batch handlers asked for, by (job id, claim_seq), until their
        # write takes them (``_retry_delay``).
        self._delays: dict[tuple[int, int], float] = {}

    def start(self, batches: trio.Nursery, handle: BatchHandle) -> None:
        batches.start_soon(self._call, handle, name=_BATCH_CALL)

    async def _call(self, handle: BatchHandle) -> None:
        """Run the batch in one call, then decide and settle one outcome per job."""
        answer: object = _NO_ANSWER  # until the call returns
        error: Raised | None = None  # what the call (or a claim hook) raised
        began: float | None = None  # when the call started (None: it never did)
        exiting = False
        started = trio.current_time() if self._observer is not None else 0.0
        traces = self._traces(handle)
        try:
            try:
                with handle.scope:
                    try:
                        await self._claim_hooks(handle.jobs)  # under the scope: count for D
                        began = trio.current_time()
                        for trace in traces:
                            if trace is not None:
                                trace.handler_started(began)
                        assert self._config.batch_handler is not None
                        answer = await self._config.batch_handler(
                            handle.jobs, BatchContext(handle, self._share)
                        )
                    except* Exception as group:
                        error = self._raised(handle.jobs[0], group)
            except BaseException as escaped:
                error, exiting = self._escaped(handle, handle.jobs[0], escaped, error)
                raise
            finally:
                said = self._said(handle, answer, error)
                plain = self._plain_success_timing(handle, began, exiting)
                with trio.CancelScope(shield=True):
                    finished = [
                        self._decided(
                            handle, job, said[job.id], started, exiting, began, trace, plain
                        )
                        for job, trace in zip(handle.jobs, traces, strict=True)
                    ]
                    await self._settle(handle, finished)
        finally:
            self._end_batch(handle)

    async def _claim_hooks(self, jobs: tuple[Job, ...]) -> None:
        hook = self._config.on_job_claimed
        if hook is not None:
            for job in jobs:
                await hook(job)

    def _traces(self, handle: BatchHandle) -> list[AttemptTrace | None]:
        if self._tracer is None:
            return [None] * len(handle.jobs)
        return self._tracer.start_all(handle.jobs, handle.claim_sent, handle.registered_at)

    def _said(self, handle: BatchHandle, answer: object, error: Raised | None) -> dict[int, _Said]:
        """What the call came to for each job: the call's error for all, or each job's own
        outcome from the answer (a job left out, or an unusable answer, is a failure).
        Without either (the call never ran, or was cancelled), the stop decides."""
        jobs = handle.jobs
        if error is not None or answer is _NO_ANSWER:
            return {job.id: _Said(_copy(error)) for job in jobs}
        outcomes, unusable = read_answer(answer, [job.id for job in jobs])
        if unusable is not None:
            log.warning(
                "batch of %d job(s): %s", len(jobs), unusable, extra=job_fields(jobs[0], "unusable")
            )
            return {job.id: _Said(_plain(unusable)) for job in jobs}
        return {job.id: self._said_of(job, outcomes.get(job.id)) for job in jobs}

    def _said_of(self, job: Job, outcome: BatchOutcome | None) -> _Said:
        if outcome is None:
            return _Said(_plain(missing_message(job.id)))
        if isinstance(outcome, JobSucceeded):
            if outcome.result is None:
                return _NOTHING_TO_STORE  # never written to: one will do
            try:
                return _Said(result=encode_result(outcome.result))
            except TypeError as exc:  # no JSON form: the attempt fails, as for a handler
                return _Said(from_exception(exc, f"TypeError: {exc}"))
        if isinstance(outcome, Snooze):
            return _Said(snooze=outcome.seconds)
        failure = _failure(outcome.error)
        if isinstance(outcome, JobRetry):
            return _Said(failure, delay=float(outcome.delay))
        assert isinstance(outcome, JobFailed)
        return _Said(failure)

    def _plain_success_timing(
        self, handle: BatchHandle, began: float | None, exiting: bool
    ) -> AttemptTiming | None:
        """The timing every job of the batch shares, when nothing stopped the batch and
        nothing watches its jobs one by one (no observer): then a job the call answered
        with a success, and that has no stop of its own, succeeded (as ``decide_attempt``
        says of work nothing stopped), without deciding it job by job (the common case,
        and the cost per job is a bench goal: docs/performance.rst). None otherwise."""
        if began is None or exiting or handle.scope.cancel_called or self._observer is not None:
            return None
        return AttemptTiming(began - handle.registered_at, trio.current_time() - began)

    def _decided(
        self,
        handle: BatchHandle,
        job: Job,
        said: _Said,
        started: float,
        exiting: bool,
        began: float | None,
        trace: AttemptTrace | None,
        plain: AttemptTiming | None,
    ) -> _Finished:
        """The job's outcome, decided now (I8) by the per-job rules, from what was said."""
        if plain is not None and said.error is None and said.snooze is None and trace is None:
            lease = handle.leases[job.id]
            if lease.stop is None:
                lease.end_work()
                done = _Finished(job, SUCCEEDED, None, said.result)
                done.timing = plain
                return done
        done = self._finished(
            handle, job, said.error, said.result, None, started, exiting, began, snooze=said.snooze
        )
        error = said.error
        if error is not None and not error.error_type:
            done.raised = None  # a failure the handler named in words: no exception to store
        if said.delay is not None:
            self._delays[(job.id, job.claim_seq)] = said.delay
        if trace is not None:
            done.trace = trace
            raised = done.raised
            now = trio.current_time()
            if raised is None:
                trace.work_ended(now, None, None, None)
            else:
                trace.work_ended(now, raised.error_type, raised.text, raised.traceback)
        return done

    def _retry_delay(self, job: Job) -> float:
        """The delay the batch handler asked for, else the pool's backoff."""
        delay = self._delays.pop((job.id, job.claim_seq), None)
        return super()._retry_delay(job) if delay is None else delay

    async def _settle(self, handle: BatchHandle, finished: list[_Finished]) -> None:
        try:
            await super()._settle(handle, finished)
        finally:
            if self._delays:  # the delays of jobs that were not retried after all
                for done in finished:
                    self._delays.pop((done.job.id, done.job.claim_seq), None)


def _copy(error: Raised | None) -> Raised | None:
    """One job's own copy of the call's error: each job's outcome logs it once."""
    if error is None:
        return None
    return Raised(error.text, error.error_type, error.traceback, error.exception)


def _plain(text: str) -> Raised:
    """A failure named in words only: no exception type nor traceback."""
    return Raised(text, "", "", None)


def _failure(error: str | Exception) -> Raised:
    if isinstance(error, str):
        return _plain(error)
    return from_exception(error, f"{type(error).__name__}: {error}")


def _call_job(frame: FrameType) -> tuple[int, float] | None:
    """The blocking monitor's reader of a frame of :meth:`BatchCallRunner._call`: the
    batch's first job, held to its pool's threshold."""
    local = frame.f_locals
    runner, handle = local.get("self"), local.get("handle")
    if isinstance(runner, BatchCallRunner) and isinstance(handle, BatchHandle):
        return handle.jobs[0].id, runner._config.blocking_threshold
    return None
