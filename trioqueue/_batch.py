"""One batch: its claim hooks and handlers in one cancel scope, then one outcome per job.

The nursery tree of a batch::

    batch task
    └── settle nursery            outcomes are written here, outside the batch scope
        └── batch CancelScope     deadline = min(lease fence, registration + D, shutdown)
            └── work nursery
                └── one task per job: job CancelScope (cancel, reclaimed, gone)
                        on_job_claimed(job), then handler(payload, ctx)

When a job's work ends, for whatever reason, its outcome is decided at once (so nothing that
happens later can change it) and written by a task in the settle nursery, so a fence that
fires meanwhile cannot interrupt the write of a job that finished in time.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from trioqueue._config import WorkerConfig, is_async_callable
from trioqueue._context import JobContext
from trioqueue._core.guard import StopReason
from trioqueue._core.outcome import Outcome, OutcomeKind, decide
from trioqueue._core.timing import Timing, retry_delay
from trioqueue._guard import BatchHandle, Guard
from trioqueue._monitor import BlockingMonitor
from trioqueue._types import Ack, Claimed, Failure, Job, Release
from trioqueue._writer import OutcomeWriter

log = logging.getLogger("trioqueue.worker")

NOT_RECORDED = "outcome not recorded: the attempt was reclaimed or the job finished elsewhere"
EXPIRED_ON_ARRIVAL = "lease expired before the handler started"


class BatchRunner:
    """Runs batches for one pool; holds what every batch shares."""

    def __init__(
        self,
        guard: Guard,
        writer: OutcomeWriter,
        config: WorkerConfig,
        timing: Timing,
        monitor: BlockingMonitor,
    ) -> None:
        self._guard = guard
        self._writer = writer
        self._config = config
        self._timing = timing
        self._monitor = monitor
        self._handler_is_async = is_async_callable(config.handler)
        # Sync handlers get threads of their own, so they never queue behind other code's.
        self._threads = trio.CapacityLimiter(config.concurrency * config.batch_size)

    async def run(self, handle: BatchHandle) -> None:
        try:
            async with trio.open_nursery() as settle:
                with handle.scope:
                    async with trio.open_nursery() as work:
                        for job in handle.jobs:
                            work.start_soon(
                                self._attempt, handle, job, settle, name=f"trioqueue.job:{job.id}"
                            )
        finally:
            self._guard.unregister(handle.batch_id)

    async def reject(self, claimed: list[Claimed]) -> None:
        """A batch that arrived expired: hooks say claimed then unavailable; no handler."""
        for job in (c.job for c in claimed):
            log.warning("job %d: %s; not running it", job.id, EXPIRED_ON_ARRIVAL)
            await self._hook(self._config.on_job_claimed, job)
            await self._hook(self._config.on_job_unavailable, job, EXPIRED_ON_ARRIVAL)

    # -- one job ------------------------------------------------------------------------

    async def _attempt(self, handle: BatchHandle, job: Job, settle: trio.Nursery) -> None:
        job_scope = handle.job_scopes[job.id]
        ctx = JobContext(job, self._guard.lease(handle.batch_id, job.id), handle.scope, job_scope)
        error: str | None = None
        self._monitor.watch(job.id)
        try:
            with job_scope:
                try:
                    await self._run_hook_and_handler(job, ctx)
                except* Exception as group:
                    error = describe(group)
                    log.info("job %d attempt %d raised: %s", job.id, job.attempt, error)
        finally:
            self._monitor.unwatch()
            outcome = self._decide(handle, job, error)
            settle.start_soon(self._settle, handle, job, outcome)

    async def _run_hook_and_handler(self, job: Job, ctx: JobContext) -> None:
        if self._config.on_job_claimed is not None:
            await self._config.on_job_claimed(job)  # a claim hook: under the scope, counts for D
        if self._handler_is_async:
            await self._config.handler(job.payload, ctx)
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_tell_thread_when_stopped, ctx)
            await trio.to_thread.run_sync(
                self._config.handler, job.payload, ctx, limiter=self._threads
            )
            nursery.cancel_scope.cancel()

    def _decide(self, handle: BatchHandle, job: Job, error: str | None) -> Outcome:
        lease = self._guard.lease(handle.batch_id, job.id)
        batch_stop = None
        if handle.scope.cancel_called:
            # The scope only ever fires by its deadline, which mirrors the core's deadlines;
            # should they ever disagree, writing nothing is the safe reading.
            batch_stop = self._guard.batch_stop(handle.batch_id) or StopReason.LEASE_EXPIRED
        return decide(
            job_stop=lease.stop,
            batch_stop=batch_stop,
            error=error,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            max_job_duration=self._timing.max_job_duration,
        )

    async def _settle(self, handle: BatchHandle, job: Job, outcome: Outcome) -> None:
        delay = self._config.backoff(job.attempt) if outcome.kind is OutcomeKind.RETRY else 0.0
        try:
            applied = await self._write(handle, job, outcome, delay)
        finally:
            self._guard.job_done(handle.batch_id, job.id)
        await self._report(job, outcome, applied, delay)

    async def _write(
        self, handle: BatchHandle, job: Job, outcome: Outcome, delay: float
    ) -> bool | None:
        """Write the outcome, fenced by claim_seq; retried while the lease holds."""
        if outcome.kind is OutcomeKind.UNAVAILABLE:
            return None
        progress = self._guard.lease(handle.batch_id, job.id).progress
        while True:
            try:
                return await self._write_once(job, outcome, delay, progress)
            except Exception as exc:
                if self._guard.fence_passed(handle.batch_id):
                    log.error("job %d: could not record %s: %r", job.id, outcome.kind.value, exc)
                    return False
                log.warning(
                    "job %d: recording %s failed, retrying: %r", job.id, outcome.kind.value, exc
                )
                remaining = handle.scope.deadline - trio.current_time()
                await trio.sleep(retry_delay(self._timing.heartbeat_interval, remaining))

    async def _write_once(
        self, job: Job, outcome: Outcome, delay: float, progress: float | None
    ) -> bool:
        kind = outcome.kind
        if kind is OutcomeKind.SUCCEEDED:
            return await self._writer.write(Ack(job.id, job.claim_seq, progress))
        if kind is OutcomeKind.RELEASE:
            return await self._writer.write(Release(job.id, job.claim_seq, progress))
        retry = delay if kind is OutcomeKind.RETRY else None
        message = outcome.message or ""
        return await self._writer.write(Failure(job.id, job.claim_seq, message, retry, progress))

    async def _report(self, job: Job, outcome: Outcome, applied: bool | None, delay: float) -> None:
        config, kind = self._config, outcome.kind
        if applied is False:
            log.warning("job %d: %s", job.id, NOT_RECORDED)
            await self._hook(config.on_job_unavailable, job, NOT_RECORDED)
        elif kind is OutcomeKind.SUCCEEDED:
            log.info("job %d succeeded (attempt %d)", job.id, job.attempt)
            await self._hook(config.on_job_succeeded, job)
        elif kind is OutcomeKind.RETRY:
            log.info(
                "job %d attempt %d failed, retry in %.2fs: %s",
                job.id,
                job.attempt,
                delay,
                outcome.message,
            )
            await self._hook(config.on_job_retry, job, delay)
        elif kind is OutcomeKind.FAILED:
            log.warning("job %d failed: %s", job.id, outcome.message)
            await self._hook(config.on_job_failed, job, outcome.message or "")
        else:
            level = logging.INFO if kind is OutcomeKind.RELEASE else logging.WARNING
            log.log(level, "job %d: %s", job.id, outcome.message)
            await self._hook(config.on_job_unavailable, job, outcome.message or "")

    async def _hook(self, hook: Callable[..., Awaitable[None]] | None, *args: Any) -> None:
        if hook is None:
            return
        try:
            await hook(*args)
        except Exception:
            log.exception("hook %s raised; carrying on", getattr(hook, "__name__", hook))


async def _tell_thread_when_stopped(ctx: JobContext) -> None:
    """A thread cannot be cancelled: flag ``ctx.cancel_requested`` when the scope is."""
    try:
        await trio.sleep_forever()
    finally:
        ctx._mark_stop_seen()


def describe(group: BaseExceptionGroup[Exception]) -> str:
    """``last_error`` text for what a handler raised."""
    parts = [f"{type(exc).__name__}: {exc}" for exc in group.exceptions]
    return "; ".join(parts)
