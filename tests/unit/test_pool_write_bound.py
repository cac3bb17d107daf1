"""An outcome write that keeps failing holds its job for one lease at most (docs/protocol.rst
§4.2).

While a job's outcome is unwritten its lease is renewed (§4), so a write that fails
transiently for ever, while the renewals succeed, would hold the job for the life of the
process, and a pool told to stop would never stop. The write is retried for one lease
(``V``) from its first failure; then it is given up, logged once, the job is renewed no
more, and its lease lapses so that another worker takes it.

Whole pools on the memory backend (its fault injection) under trio's MockClock: times are
exact. V = 3, H = 1.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config, log_records
from trioqueue.testing import error

UNRECORDED_RELEASE = (
    "outcome (release) not recorded: writing it failed for one lease (3s) "
    "(BackendError('injected error in release')); the job runs again once its lease is over"
)


def quick(rec: Recorder) -> Any:
    """A handler that records its start and returns."""

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        rec.add("started", ctx.job_id, None, ctx.attempt)

    return handler


async def test_a_release_that_keeps_failing_at_shutdown_lets_the_lease_lapse(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """The reported case: a pool told to stop (grace 1 s) whose release write fails every
    time while its renewals succeed. The release is retried from t = 1 until t = 4, one
    lease; then the pool stops renewing and stops, with one warning and one error logged,
    and a second pool claims the job once its lease has lapsed and runs it."""
    caplog.set_level(logging.DEBUG, logger="trioqueue")
    first, second = Recorder(), Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = [await backend.enqueue("q", {"sleep": 1000})]
        stopped_at: list[float] = []
        stopping, stopped = trio.CancelScope(), trio.Event()

        async def first_pool(*, task_status: trio.TaskStatus[None]) -> None:
            cfg = config(first, visibility_timeout=3, heartbeat_interval=1, shutdown_grace=1)
            with stopping:
                await trioqueue.run_worker_pool(backend, cfg, task_status=task_status)
            stopped_at.append(trio.current_time())
            stopped.set()

        await nursery.start(first_pool)
        await first.wait_for("started", job_id)
        backend.inject("release", error())  # transient, every call: the pool retries it
        stopping.cancel()  # t = 0: the handler is stopped at t = 1, its release fails
        try:
            with trio.fail_after(30):  # virtual seconds: without the bound it never stops
                await stopped.wait()
        finally:
            backend.inject("release", None)  # lets a spinning write end, so the test can too
        running = await backend.get_job(job_id)
        cfg = config(second, handler=quick(second), visibility_timeout=3, heartbeat_interval=1)
        cfg = dataclasses.replace(cfg, poll_interval=0.5)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        with trio.fail_after(30):
            await second.wait_for("succeeded", job_id)
        nursery.cancel_scope.cancel()
    assert stopped_at == [4.0]
    [given_up] = first.of("unavailable", job_id)
    assert (given_up.at, given_up.detail) == (4.0, UNRECORDED_RELEASE)
    assert (running.status, running.attempts) == ("running", 1)  # its lease not yet over
    [start] = second.of("started", job_id)
    assert 6.0 <= start.at <= 7.5  # the lease the last renewal (t <= 4) gave, then a poll
    [retrying] = log_records(caplog, "record_retry")
    assert (retrying.levelno, retrying.job_id) == (logging.WARNING, job_id)  # type: ignore[attr-defined]
    [failed] = log_records(caplog, "record_failed")
    assert (failed.levelno, failed.job_id) == (logging.ERROR, job_id)  # type: ignore[attr-defined]


async def test_an_ack_that_keeps_failing_is_given_up_after_one_lease(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """Not only at shutdown: an ack that fails transiently while renewals succeed holds its
    job for one lease from the first failure, then its attempt is given up (unavailable),
    the renewals stop, and the job runs again once the lease has lapsed."""
    caplog.set_level(logging.DEBUG, logger="trioqueue")
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = [await backend.enqueue("q", {"sleep": 1})]
        backend.inject("ack", error())
        cfg = config(rec, visibility_timeout=3, heartbeat_interval=1, poll_interval=0.5)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        try:
            with trio.fail_after(30):  # virtual seconds: without the bound it is never given up
                given_up = await rec.wait_for("unavailable", job_id)
        finally:
            backend.inject("ack", None)  # lets a spinning write end, so the test can too
        with trio.fail_after(30):
            await rec.wait_for("succeeded", job_id)
        nursery.cancel_scope.cancel()
    assert given_up.at == 4.0  # the handler returned at t = 1
    assert "writing it failed for one lease (3s)" in given_up.detail
    starts = rec.of("started", job_id)
    assert [e.attempt for e in starts] == [1, 2]
    assert 6.0 <= starts[1].at <= 7.5
    assert len(log_records(caplog, "record_retry")) == 1
    assert len(log_records(caplog, "record_failed")) == 1


async def test_a_write_that_fails_a_few_times_is_still_written(autojump_clock: object) -> None:
    """The bound cuts nothing short: a release that fails three times is written by the
    fourth try, well within the lease, and the job is released uncharged."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = [await backend.enqueue("q", {"sleep": 1000})]
        stopping = trio.CancelScope()

        async def pool(*, task_status: trio.TaskStatus[None]) -> None:
            cfg = config(rec, visibility_timeout=3, heartbeat_interval=1, shutdown_grace=1)
            with stopping:
                await trioqueue.run_worker_pool(backend, cfg, task_status=task_status)

        await nursery.start(pool)
        await rec.wait_for("started", job_id)
        backend.inject("release", error(times=3))
        stopping.cancel()
        with trio.fail_after(30):
            released = await rec.wait_for("unavailable", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert (released.at, released.detail) == (1.75, "released at worker shutdown")
    assert (info.status, info.attempts) == ("ready", 0)
