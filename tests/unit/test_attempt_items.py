"""The outcome items a pool writes carry their attempt: the handler's timing, and for a
failure an exception raised, its type and bounded traceback (docs/protocol.rst §14,
"Timings" and "Errors and tracebacks"). Whole pools on the memory backend, the backend's
outcome calls recorded; driven by trio's MockClock."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue import JobContext
from trioqueue._core.tracebacks import MAX_TRACEBACK_CHARS
from trioqueue._types import Ack, Failure, Recorded, Release

Item = Ack | Failure | Release


class ReportFailed(Exception):
    """A handler's own exception class, named with its module."""


def record_items(backend: trioqueue.MemoryBackend) -> list[Item]:
    """Every outcome item the pool hands to ``backend``, in order (the calls go on to it)."""
    items: list[Item] = []
    ack, fail, release = backend.ack, backend.fail, backend.release

    async def acked(batch: Sequence[Ack]) -> list[bool]:
        items.extend(batch)
        return await ack(batch)

    async def failed(batch: Sequence[Failure]) -> list[Recorded | None]:
        items.extend(batch)
        return await fail(batch)

    async def released(batch: Sequence[Release]) -> list[bool]:
        items.extend(batch)
        return await release(batch)

    backend.ack = acked  # type: ignore[method-assign,assignment]
    backend.fail = failed  # type: ignore[method-assign,assignment]
    backend.release = released  # type: ignore[method-assign,assignment]
    return items


async def run_until_finished(
    cfg: trioqueue.WorkerConfig, payloads: list[Any], *, max_attempts: int = 1
) -> tuple[list[Item], list[trioqueue.JobInfo]]:
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        items = record_items(backend)
        ids = [await backend.enqueue(cfg.queue, p, max_attempts=max_attempts) for p in payloads]
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        infos = [await backend.wait_for(i) for i in ids]
        nursery.cancel_scope.cancel()
    return items, infos


async def test_an_ack_carries_the_wait_before_the_handler_and_its_run_time(
    autojump_clock: object,
) -> None:
    async def slow_hook(job: trioqueue.Job) -> None:
        await trio.sleep(2)  # a claim hook counts before the handler starts

    async def handler(payload: Any, ctx: JobContext) -> None:
        await trio.sleep(3)

    cfg = config(Recorder(), handler=handler, on_job_claimed=slow_hook)
    items, _ = await run_until_finished(cfg, [None])
    [ack] = items
    assert isinstance(ack, Ack) and ack.timing is not None
    assert ack.timing.started_after == pytest.approx(2, abs=1e-6)
    assert ack.timing.run_seconds == pytest.approx(3, abs=1e-6)


async def test_a_failure_carries_its_exceptions_qualified_type_and_traceback(
    autojump_clock: object,
) -> None:
    async def handler(payload: Any, ctx: JobContext) -> None:
        await trio.sleep(1)
        raise_report_failed(payload)

    items, infos = await run_until_finished(config(Recorder(), handler=handler), ["disk full"])
    [failure] = items
    assert isinstance(failure, Failure)
    assert failure.error == "ReportFailed: disk full" == infos[0].last_error
    assert failure.error_type == f"{__name__}.ReportFailed"
    assert failure.traceback is not None
    assert failure.traceback.startswith("Traceback (most recent call last):\n")
    assert "in raise_report_failed\n" in failure.traceback  # the frame that raised
    assert failure.traceback.endswith(f"{__name__}.ReportFailed: disk full\n")
    assert "ExceptionGroup" not in failure.traceback  # except*'s own wrapper is left out
    assert failure.timing is not None
    assert failure.timing.run_seconds == pytest.approx(1, abs=1e-6)


def raise_report_failed(why: str) -> None:
    raise ReportFailed(why)


async def test_a_builtin_exception_is_named_bare_and_a_retry_carries_it_too(
    autojump_clock: object,
) -> None:
    async def handler(payload: Any, ctx: JobContext) -> None:
        raise KeyError(ctx.attempt)

    cfg = config(Recorder(), handler=handler, backoff=lambda attempt: 1.0)
    items, _ = await run_until_finished(cfg, [None], max_attempts=2)
    assert [(type(i), i.error_type) for i in items if isinstance(i, Failure)] == [
        (Failure, "KeyError"),
        (Failure, "KeyError"),
    ]
    retry, final = items
    assert isinstance(retry, Failure) and retry.retry_delay == 1.0
    assert isinstance(final, Failure) and final.retry_delay is None
    assert "KeyError: 1" in (retry.traceback or "") and "KeyError: 2" in (final.traceback or "")


async def test_a_group_the_handler_raised_is_named_and_formatted_whole(
    autojump_clock: object,
) -> None:
    async def handler(payload: Any, ctx: JobContext) -> None:
        async def fail(why: str) -> None:
            raise_report_failed(why)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail, "first")
            nursery.start_soon(fail, "second")

    items, _ = await run_until_finished(config(Recorder(), handler=handler), [None])
    [failure] = items
    assert isinstance(failure, Failure)
    assert failure.error_type == "ExceptionGroup"
    traceback = failure.traceback or ""
    assert "ReportFailed: first" in traceback and "ReportFailed: second" in traceback
    assert "| ExceptionGroup: " in traceback  # the group's own box


async def test_a_sync_handlers_failure_carries_its_traceback_from_its_thread(
    autojump_clock: object,
) -> None:
    def handler(payload: Any, ctx: JobContext) -> None:
        raise_report_failed("in a thread")

    cfg = config(Recorder(), handler=handler)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        items = record_items(backend)
        job_id = await backend.enqueue("q", None, max_attempts=1)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await backend.wait_for(job_id)  # no timeout: the autojump clock runs on meanwhile
        nursery.cancel_scope.cancel()
    [failure] = items
    assert isinstance(failure, Failure) and failure.error_type == f"{__name__}.ReportFailed"
    assert "in raise_report_failed\n" in (failure.traceback or "")
    assert failure.timing is not None


async def test_a_failure_no_exception_raised_has_no_type_but_its_timing(
    autojump_clock: object,
) -> None:
    """max_job_duration cut the handler short: trio's Cancelled is no error of the job's."""

    async def handler(payload: Any, ctx: JobContext) -> None:
        await trio.sleep(100)

    cfg = config(Recorder(), handler=handler, max_job_duration=5)
    items, _ = await run_until_finished(cfg, [None])
    [failure] = items
    assert isinstance(failure, Failure)
    assert "max_job_duration" in failure.error
    assert (failure.error_type, failure.traceback) == (None, None)
    assert failure.timing is not None
    assert failure.timing.run_seconds == pytest.approx(5, abs=1e-6)


async def test_a_claim_hook_that_raises_sends_no_timing_but_its_exception(
    autojump_clock: object,
) -> None:
    async def hook(job: trioqueue.Job) -> None:
        raise ReportFailed("hook")

    cfg = config(Recorder(), on_job_claimed=hook)
    items, _ = await run_until_finished(cfg, [None])
    [failure] = items
    assert isinstance(failure, Failure)
    assert failure.timing is None  # the handler never started
    assert failure.error_type == f"{__name__}.ReportFailed"
    assert "in hook\n" in (failure.traceback or "")


async def test_a_traceback_too_long_is_cut_to_the_bound_keeping_the_raising_frame(
    autojump_clock: object,
) -> None:
    # Two functions in turn: Python's traceback folds a frame repeated in a row.
    def ping(depth: int) -> None:
        if depth == 0:
            raise ReportFailed("at the bottom")
        pong(depth - 1)

    def pong(depth: int) -> None:
        ping(depth - 1)

    async def handler(payload: Any, ctx: JobContext) -> None:
        ping(600)

    items, _ = await run_until_finished(config(Recorder(), handler=handler), [None])
    [failure] = items
    assert isinstance(failure, Failure) and failure.traceback is not None
    assert len(failure.traceback) == MAX_TRACEBACK_CHARS
    assert " characters cut] ...\n" in failure.traceback
    assert failure.traceback.startswith("Traceback (most recent call last):\n")
    assert failure.traceback.endswith(
        'in ping\n    raise ReportFailed("at the bottom")\n'
        f"{__name__}.ReportFailed: at the bottom\n"
    )


async def test_a_cancel_answered_by_raising_keeps_the_handlers_exception(
    autojump_clock: object,
) -> None:
    async def handler(payload: Any, ctx: JobContext) -> None:
        try:
            await trio.sleep(100)
        finally:
            raise_report_failed("stopped")

    cfg = config(Recorder(), handler=handler)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        items = record_items(backend)
        job_id = await backend.enqueue("q", None, max_attempts=3)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await trio.sleep(1)
        await backend.cancel(job_id)
        info = await backend.wait_for(job_id)
        nursery.cancel_scope.cancel()
    [failure] = items
    assert isinstance(failure, Failure) and info.status == "failed"
    assert failure.error == "cancelled: cancel requested (ReportFailed: stopped)"
    assert failure.error_type == f"{__name__}.ReportFailed"


async def test_a_release_at_shutdown_carries_its_timing(autojump_clock: object) -> None:
    async def handler(payload: Any, ctx: JobContext) -> None:
        await trio.sleep(100)

    cfg = config(Recorder(), handler=handler, shutdown_grace=4)
    async with trioqueue.open_memory() as backend:
        items = record_items(backend)
        await backend.enqueue("q", None)
        with trio.move_on_after(10):
            await trioqueue.run_worker_pool(backend, cfg)
    [release] = items
    assert isinstance(release, Release) and release.timing is not None
    # From the start, through 10 s of running and the 4 s grace after the pool was told
    # to stop, to the cancel that ended it.
    assert release.timing.run_seconds == pytest.approx(14, abs=1e-6)


async def test_each_job_of_a_batch_carries_its_own_timing(autojump_clock: object) -> None:
    async def handler(payload: Any, ctx: JobContext) -> None:
        await trio.sleep(payload)

    cfg = dataclasses.replace(config(Recorder(), handler=handler), batch_size=3)
    items, _ = await run_until_finished(cfg, [1, 2, 3])
    timings = sorted(
        (i.job_id, i.timing.run_seconds) for i in items if isinstance(i, Ack) and i.timing
    )
    assert [seconds for _, seconds in timings] == pytest.approx([1, 2, 3], abs=1e-6)


async def test_the_backend_stores_what_the_items_carry_as_the_jobs_attempts(
    autojump_clock: object,
) -> None:
    """End to end on the memory backend: the attempt rows have the handler's start and
    run time, and the failure's type and traceback."""

    async def handler(payload: Any, ctx: JobContext) -> None:
        await trio.sleep(2)
        if ctx.attempt == 1:
            raise_report_failed("first try")

    cfg = config(Recorder(), handler=handler, backoff=lambda attempt: 1.0)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", None, max_attempts=2)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await backend.wait_for(job_id)
        attempts = await backend.list_attempts(job_id)
        nursery.cancel_scope.cancel()
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "retry"), (2, "succeeded")]
    failed, succeeded = attempts
    assert failed.error_type == f"{__name__}.ReportFailed"
    assert failed.error == "ReportFailed: first try"
    assert "in raise_report_failed\n" in (failed.traceback or "")
    assert (succeeded.error_type, succeeded.traceback) == (None, None)
    for attempt in attempts:
        assert attempt.run_seconds == pytest.approx(2, abs=1e-3)
        assert attempt.started_at is not None
        assert attempt.started_at >= attempt.claimed_at
