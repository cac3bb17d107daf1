"""Clock skew on PostgreSQL (docs/protocol.rst §8): the claim's clock reading, the probe, the
registry's columns, and whole pools whose wall clock (the backend's ``wall_clock`` seam)
runs 60 s ahead of the database's, or behind it."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue import JobContext
from trioqueue._backends.postgres import PostgresBackend
from trioqueue._types import Claims, PoolBeat, PoolRegistration

from .._postgres_harness import wait_until_finished

pytestmark = pytest.mark.postgres

Q = "skew"
#: The test and the server share this host's clock: a reading is this close to ours.
SAME_HOST = 1.0


async def claim(backend: PostgresBackend, limit: int = 10) -> Claims:
    claimed = await backend.claim(Q, limit=limit, worker_id="w", visibility_timeout=30)
    assert isinstance(claimed, Claims)
    return claimed


async def test_a_claim_carries_the_database_clock_with_rows_and_without(
    backend: PostgresBackend,
) -> None:
    await backend.enqueue_many(Q, [1, 2])
    before = time.time()
    taken = await claim(backend)
    empty = await claim(backend)
    after = time.time()
    assert [len(taken), len(empty)] == [2, 0]
    for claimed in (taken, empty):
        assert claimed.database_clock is not None
        assert before - SAME_HOST <= claimed.database_clock <= after + SAME_HOST
    assert taken.database_clock is not None and empty.database_clock is not None
    assert taken.database_clock <= empty.database_clock


async def test_a_limited_claim_carries_both_its_retry_after_and_the_clock(
    backend: PostgresBackend,
) -> None:
    await backend.set_queue_limits(Q, max_running=1)
    await backend.enqueue_many(Q, [1, 2])
    claimed = await claim(backend)
    assert len(claimed) == 1
    assert claimed.retry_after == 0.5  # max_running reached: the poll of a full queue
    assert claimed.database_clock is not None


async def test_the_clock_probe_reads_the_database_clock(backend: PostgresBackend) -> None:
    before = time.time()
    reading = await backend.database_clock()
    after = time.time()
    assert before - SAME_HOST <= reading <= after + SAME_HOST
    assert backend.statistics().calls["clock"] == 1


async def test_a_beat_stores_the_clock_and_a_registration_clears_it(
    backend: PostgresBackend,
) -> None:
    pool = PoolRegistration("w1", "host", 1, Q, 2, 1.0)
    await backend.register_pool(pool)
    [fresh] = await backend.list_workers()
    assert (fresh.clock_skew, fresh.clock_verdict) == (None, None)
    await backend.renew([], visibility_timeout=30, beat=PoolBeat(pool, 0, 0, 60.25, "stopped"))
    [beaten] = await backend.list_workers()
    assert (beaten.clock_skew, beaten.clock_verdict) == (60.25, "stopped")
    await backend.register_pool(pool)
    [again] = await backend.list_workers()
    assert (again.clock_skew, again.clock_verdict) == (None, None)


async def test_a_beat_with_a_bad_clock_verdict_is_refused_and_writes_nothing(
    backend: PostgresBackend,
) -> None:
    pool = PoolRegistration("w1", "host", 1, Q, 2, 1.0)
    with pytest.raises(ValueError, match="clock_verdict must be one of"):
        await backend.renew([], visibility_timeout=30, beat=PoolBeat(pool, 0, 0, 1.0, "late"))
    with pytest.raises(ValueError, match="clock_skew must be a finite"):
        await backend.renew(
            [], visibility_timeout=30, beat=PoolBeat(pool, 0, 0, float("nan"), "ahead")
        )
    assert await backend.list_workers() == []


def config(handler: Any) -> trioqueue.WorkerConfig:
    return trioqueue.WorkerConfig(
        handler=handler,
        queue=Q,
        visibility_timeout=10,
        heartbeat_interval=0.5,  # stop past V - H = 9.5 s
        poll_interval=0.2,
        shutdown_grace=1,
    )


async def wait_for_verdict(backend: PostgresBackend, verdict: str) -> trioqueue.WorkerInfo:
    """The pool's registry row once a beat reports ``verdict`` (one look per 50 ms)."""
    with trio.fail_after(20):
        while True:
            workers = await backend.list_workers()
            if workers and workers[0].clock_verdict == verdict:
                return workers[0]
            await trio.sleep(0.05)


async def test_a_pool_60s_ahead_stops_claiming_without_burning_attempts_then_resumes(
    backend: PostgresBackend,
) -> None:
    ran: list[int] = []

    async def handler(payload: Any, ctx: JobContext) -> None:
        ran.append(ctx.attempt)

    skew = [60.0]
    backend.wall_clock = lambda: time.time() + skew[0]
    ids = await backend.enqueue_many(Q, [1, 2, 3], max_attempts=2)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config(handler))
        stopped = await wait_for_verdict(backend, "stopped")
        probes = backend.statistics().calls["clock"]
        await wait_for_verdict(backend, "stopped")  # beats go on; claims do not
        jobs = [await backend.get_job(job_id) for job_id in ids]
        claims = backend.statistics().calls["claim"]
        skew[0] = 0.0
        infos = await wait_until_finished(backend, ids)
        nursery.cancel_scope.cancel()
    assert stopped.clock_skew is not None and abs(stopped.clock_skew - 60) < SAME_HOST
    assert [(j.status, j.attempts) for j in jobs] == [("ready", 0)] * 3
    assert claims == 1  # the one that proved the skew; its rows went back uncharged
    assert probes >= 1
    assert [(i.status, i.attempts) for i in infos] == [("succeeded", 1)] * 3
    assert ran == [1, 1, 1]


async def test_a_pool_60s_behind_runs_its_jobs(backend: PostgresBackend) -> None:
    async def handler(payload: Any, ctx: JobContext) -> None:
        await trio.lowlevel.checkpoint()

    backend.wall_clock = lambda: time.time() - 60
    ids = await backend.enqueue_many(Q, [1, 2, 3], max_attempts=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config(handler))
        infos = await wait_until_finished(backend, ids)
        worker = await wait_for_verdict(backend, "in_sync")
        nursery.cancel_scope.cancel()
    assert [(i.status, i.attempts) for i in infos] == [("succeeded", 1)] * 3
    assert worker.clock_skew is not None and abs(worker.clock_skew + 60) < SAME_HOST
    assert backend.statistics().calls["clock"] == 0
