"""On PostgreSQL: a synchronous handler that cannot be interrupted keeps its lease.

A sync handler runs in a worker thread, which no cancel scope can stop: past its
``max_job_duration`` it goes on until it returns. It still owns its job, so the guard keeps
renewing the row until then (docs/protocol.rst §4), and the job is never claimed beside it.
Real clock (a thread under MockClock lets the fake time jump), real rows.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue import JobContext
from trioqueue._backends.postgres import PostgresBackend

from .._postgres_harness import wait_until_finished

pytestmark = pytest.mark.postgres

Q = "unwinding"
DURATION_1S = "claim hooks and handler ran past max_job_duration of 1s"


async def lease_of(backend: PostgresBackend, job_id: int) -> datetime:
    async with backend.acquire() as connection:
        lease = await connection.fetchval(
            f'SELECT not_visible_until FROM "{backend.schema}".jobs WHERE id = $1', job_id
        )
    assert isinstance(lease, datetime)
    return lease


async def test_uninterruptible_sync_handler_keeps_its_lease_past_its_duration(
    backend: PostgresBackend,
) -> None:
    """D = 1, V = 6, H = 1: the first attempt blocks in its thread until the test has seen
    the row's lease renewed well past the stop (at least 2.5 s beyond the claim's lease);
    its duration failure is then recorded and retried, and the two attempts never overlap."""
    started, release = threading.Event(), threading.Event()
    lock = threading.Lock()
    running: list[int] = []
    overlaps: list[list[int]] = []

    def handler(payload: Any, ctx: JobContext) -> None:
        with lock:
            running.append(ctx.attempt)
            if len(running) > 1:
                overlaps.append(list(running))
        try:
            if ctx.attempt == 1:
                started.set()
                release.wait(30)  # no checkpoint: nothing but the event ends this
        finally:
            with lock:
                running.remove(ctx.attempt)

    cfg = trioqueue.WorkerConfig(
        handler=handler,
        queue=Q,
        concurrency=2,
        visibility_timeout=6,
        heartbeat_interval=1,
        max_job_duration=1,
        poll_interval=0.2,  # a lapsed lease would be claimed again at once
        shutdown_grace=1,
        backoff=lambda attempt: 0.0,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        job_id = await backend.enqueue(Q, "blocks", max_attempts=2)
        try:
            assert await trio.to_thread.run_sync(started.wait, 5)
            claimed_lease = await lease_of(backend, job_id)
            renewed_at_start = backend.statistics().calls["renew"]
            # Bounded: without renewals past the stop (at t = 1) the lease never moves
            # more than 1 s beyond the claim's, and this gives up before it lapses (t = 6).
            with trio.fail_after(4.5):
                while (await lease_of(backend, job_id) - claimed_lease).total_seconds() < 2.5:
                    await trio.sleep(0.1)
            renewals = backend.statistics().calls["renew"] - renewed_at_start
        finally:
            release.set()
        [info] = await wait_until_finished(backend, [job_id])
        nursery.cancel_scope.cancel()
    assert renewals >= 2  # beats at t = 2 and 3 at least, after the stop at t = 1
    assert overlaps == []
    assert (info.status, info.attempts) == ("succeeded", 2)
    assert info.last_error == DURATION_1S  # attempt 1's outcome was recorded, then retried
