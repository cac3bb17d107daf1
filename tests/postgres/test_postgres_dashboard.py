"""What the dashboard needs, on PostgreSQL: the SQL beyond the conformance suite.

The beat rides in the renewal's own statement, never waits on a lock, and a late one changes
nothing; migration 0002 upgrades a schema holding jobs; the status function is inlined.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._backends.postgres.sql import MIGRATIONS, QUERIES, render
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import Claimed, PoolBeat, PoolRegistration

pytestmark = pytest.mark.postgres

Q = "pg"
V = 60.0
POOL = PoolRegistration("pool-1", "host", 1234, Q, 2, 30.0)


def item(claimed: Claimed) -> RenewItem:
    return RenewItem(claimed.job.id, claimed.job.claim_seq, None)


async def fetchrow(backend: PostgresBackend, sql: str, *args: Any) -> Any:
    async with backend.acquire() as connection:
        return await connection.fetchrow(sql.replace("{schema}", f'"{backend.schema}"'), *args)


async def test_a_beat_rides_in_the_renewal_statement(backend: PostgresBackend) -> None:
    """One statement, one transaction: the job's row and the pool's row carry the same xmin
    (the id of the transaction that last wrote them), and one renew call was counted."""
    await backend.register_pool(POOL)
    job_id = await backend.enqueue(Q, "x")
    [claimed] = await backend.claim(Q, limit=1, worker_id=POOL.worker_id, visibility_timeout=V)
    calls = dict(backend.statistics().calls)
    verdicts = await backend.renew([item(claimed)], visibility_timeout=V, beat=PoolBeat(POOL, 1, 0))
    assert verdicts == {job_id: Verdict.EXTENDED}
    after = backend.statistics().calls
    assert (after["renew"] - calls["renew"], after["beat"] - calls["beat"]) == (1, 0)
    job = await fetchrow(backend, "SELECT xmin::text AS x FROM {schema}.jobs WHERE id = $1", job_id)
    pool = await fetchrow(
        backend,
        "SELECT xmin::text AS x, in_flight FROM {schema}.workers WHERE worker_id = $1",
        POOL.worker_id,
    )
    assert pool["in_flight"] == 1
    assert job["x"] == pool["x"]


async def test_a_lone_beat_is_one_statement_of_its_own(backend: PostgresBackend) -> None:
    calls = dict(backend.statistics().calls)
    assert await backend.renew([], visibility_timeout=V, beat=PoolBeat(POOL, 0, 5)) == {}
    assert await backend.renew([], visibility_timeout=V) == {}  # no beat: no statement
    after = backend.statistics().calls
    assert (after["renew"] - calls["renew"], after["beat"] - calls["beat"]) == (0, 1)
    [worker] = await backend.list_workers()
    assert (worker.worker_id, worker.abandoned_renewals) == (POOL.worker_id, 5)


async def test_a_beat_never_waits_for_the_pools_row_lock(backend: PostgresBackend) -> None:
    """A stuck, abandoned renewal may hold the pool's row: the next renewal skips the beat
    rather than wait, and still renews its jobs."""
    await backend.register_pool(POOL)
    job_id = await backend.enqueue(Q, "x")
    [claimed] = await backend.claim(Q, limit=1, worker_id=POOL.worker_id, visibility_timeout=V)
    before = await fetchrow(
        backend, "SELECT last_beat_at FROM {schema}.workers WHERE worker_id = $1", POOL.worker_id
    )
    async with backend.acquire() as holder, holder.transaction():
        await holder.execute(
            f'SELECT FROM "{backend.schema}".workers WHERE worker_id = $1 FOR UPDATE',
            POOL.worker_id,
        )
        with trio.fail_after(5):
            verdicts = await backend.renew(
                [item(claimed)], visibility_timeout=V, beat=PoolBeat(POOL, 1, 0)
            )
            assert await backend.renew([], visibility_timeout=V, beat=PoolBeat(POOL, 1, 0)) == {}
    assert verdicts == {job_id: Verdict.EXTENDED}
    after = await fetchrow(
        backend,
        "SELECT last_beat_at, in_flight FROM {schema}.workers WHERE worker_id = $1",
        POOL.worker_id,
    )
    assert (after["last_beat_at"], after["in_flight"]) == (before["last_beat_at"], 0)


async def test_a_late_beat_changes_nothing(backend: PostgresBackend) -> None:
    """An abandoned renewal that comes unstuck carries an older now(): its beat must not
    put back an older in_flight or last_beat_at over a newer beat's."""
    await backend.register_pool(POOL)
    renew_sql = render(QUERIES["renew"], backend.schema)
    old_beat = (POOL.worker_id, POOL.host, POOL.pid, Q, POOL.concurrency, 30.0, 7, 0, 9.0, "ahead")
    async with backend.acquire() as old, old.transaction():
        await old.fetchval("SELECT now()")  # the old statement's now() is fixed here
        await trio.sleep(0.01)
        await backend.renew([], visibility_timeout=V, beat=PoolBeat(POOL, 2, 0))
        [newer] = await backend.list_workers()
        await old.fetch(renew_sql, [], [], [], V, *old_beat, None)
    [after] = await backend.list_workers()
    assert (after.in_flight, after.last_beat_at) == (2, newer.last_beat_at)
    assert (after.clock_skew, after.clock_verdict) == (None, None)


async def test_search_is_case_insensitive_on_non_ascii_text(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, {"city": "Zürich"})
    assert [j.id for j in await backend.list_jobs(search="zürich")] == [job_id]
    assert [j.id for j in await backend.list_jobs(search='"city": "zü')] == [job_id]


async def test_migration_0002_upgrades_a_schema_that_holds_jobs(
    postgres_dsn: str, postgres_schema: str
) -> None:
    async with open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        first = MIGRATIONS[0]
        async with backend.acquire() as connection, connection.transaction():
            await connection.execute(render(QUERIES["migrate_prepare"], postgres_schema))
            await connection.execute(render(first.sql, postgres_schema))
            await connection.execute(
                render(QUERIES["record_migration"], postgres_schema),
                first.version,
                first.name,
                first.checksum,
            )
            await connection.execute(
                f'INSERT INTO "{postgres_schema}".jobs (queue, payload, max_attempts) '
                "VALUES ($1, $2::jsonb, 3)",
                Q,
                json.dumps({"old": True}),
            )
        assert await backend.migrate() == [f"{m.version:04d}_{m.name}" for m in MIGRATIONS[1:]]
        [old] = await backend.list_jobs()
        assert (old.payload, old.status, old.last_renewed_at) == ({"old": True}, "ready", None)
        [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=V)
        running = await backend.get_job(claimed.job.id)
        assert (running.status, running.worker_id) == ("running", "w")
        assert running.last_renewed_at is not None


async def test_the_state_function_is_inlined(backend: PostgresBackend) -> None:
    """job_state() is plain SQL the planner folds into the query: EXPLAIN VERBOSE shows the
    CASE expression, not a call of the function."""
    await backend.enqueue(Q, "x")
    async with backend.acquire() as connection:
        plan = await connection.fetchval(
            f'EXPLAIN (VERBOSE, FORMAT JSON) SELECT "{backend.schema}".job_state('
            f'j.status, j.not_visible_until, now()) FROM "{backend.schema}".jobs AS j'
        )
    text = json.dumps(plan) if not isinstance(plan, str) else plan
    assert "CASE" in text
    assert "job_state" not in text


async def test_a_pool_on_postgres_registers_beats_and_unregisters(
    backend: PostgresBackend,
) -> None:
    """End to end on the database: listed while it runs (its job in flight, the cancel
    acknowledged by its renewal), gone after a graceful shutdown."""
    started = trio.Event()

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        started.set()
        await trio.sleep_forever()

    cfg = trioqueue.WorkerConfig(
        handler=handler, queue=Q, visibility_timeout=3, heartbeat_interval=0.2, shutdown_grace=1
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        [registered] = await backend.list_workers()
        job_id = await backend.enqueue(Q, "x")
        with trio.fail_after(10):
            await started.wait()
            while (await backend.list_workers())[0].in_flight != 1:
                await trio.sleep(0.05)
        running = await backend.get_job(job_id)
        assert running.worker_id == registered.worker_id
        await backend.cancel(job_id)
        with trio.fail_after(10):
            while (info := await backend.get_job(job_id)).status == "running":
                await trio.sleep(0.05)
        assert info.cancel_acknowledged_at is not None
        [worker] = await backend.list_workers()
        assert worker.stale is False
        nursery.cancel_scope.cancel()
    assert await backend.list_workers() == []


async def test_registering_deletes_pools_stale_for_over_an_hour(backend: PostgresBackend) -> None:
    for worker_id in ("long-gone", "recently-gone"):
        await backend.register_pool(PoolRegistration(worker_id, "h", 1, Q, 1, 30.0))
    async with backend.acquire() as connection:
        # 3 x 30 s + one hour is the limit: one is past it, one is just inside.
        for worker_id, ago in (("long-gone", 3691.0), ("recently-gone", 3680.0)):
            await connection.execute(
                f'UPDATE "{backend.schema}".workers '
                "SET last_beat_at = now() - make_interval(secs => $2) WHERE worker_id = $1",
                worker_id,
                ago,
            )
    await backend.register_pool(POOL)
    workers = await backend.list_workers()  # by start: the stale one started first
    assert [(w.worker_id, w.stale) for w in workers] == [
        ("recently-gone", True),
        (POOL.worker_id, False),
    ]
