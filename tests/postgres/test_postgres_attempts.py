"""The attempts table on PostgreSQL: the SQL beyond the conformance suite (docs/protocol.rst
§14, migration 0009).

An attempt's row is written by the statement that ends the attempt, in the same
transaction: one call, and the job's row and the attempt's row carry the same ``xmin`` (the
id of the transaction that wrote them). That holds for fail, release and the claim that
takes a lapsed attempt over. A succeeded attempt is the job's row itself: the ack (and the
transactional ack) writes its columns there and inserts no attempts row, and the reads
(the view ``attempt_rows``) show it as one. Migration 0009 marks existing cancellations,
the percentiles are the reference model's, and text a client sends is stored escaped and
bounded.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from trioqueue._backends.memory.attempts import percentile_cont
from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._backends.postgres.sql import MIGRATIONS, QUERIES, render
from trioqueue._core.tracebacks import MAX_TRACEBACK_CHARS
from trioqueue._types import Ack, AttemptTiming, Claimed, Failure, PoolRegistration, Release

pytestmark = pytest.mark.postgres

Q = "pg"
V = 60.0
POOL = PoolRegistration("pool-1", "host-a", 1234, Q, 2, 30.0)


async def fetchrow(backend: PostgresBackend, sql: str, *args: Any) -> Any:
    async with backend.acquire() as connection:
        return await connection.fetchrow(sql.replace("{schema}", f'"{backend.schema}"'), *args)


async def claim(backend: PostgresBackend) -> Claimed:
    [claimed] = await backend.claim(Q, limit=1, worker_id=POOL.worker_id, visibility_timeout=V)
    return claimed


async def same_transaction(backend: PostgresBackend, job_id: int, claim_seq: int) -> bool:
    """Whether the job's row and its attempt row ``claim_seq`` were written by one
    transaction."""
    row = await fetchrow(
        backend,
        "SELECT j.xmin::text AS job, a.xmin::text AS attempt FROM {schema}.jobs AS j "
        "JOIN {schema}.attempts AS a ON a.job_id = j.id WHERE j.id = $1 AND a.claim_seq = $2",
        job_id,
        claim_seq,
    )
    return row is not None and row["job"] == row["attempt"]


async def attempt_rows(backend: PostgresBackend, job_id: int) -> int:
    """How many rows the attempts table holds for the job."""
    row = await fetchrow(
        backend, "SELECT count(*) AS n FROM {schema}.attempts WHERE job_id = $1", job_id
    )
    return int(row["n"])


async def succeeded_on_its_row(backend: PostgresBackend, job_id: int) -> Any:
    """The job row's attempt columns: its start's offset from the claim, run time, host."""
    return await fetchrow(
        backend,
        "SELECT extract(epoch FROM started_at - claimed_at)::float8 AS started_after, "
        "run_seconds, host FROM {schema}.jobs WHERE id = $1 AND status = 'succeeded'",
        job_id,
    )


async def test_the_ack_writes_the_attempt_on_the_job_row_and_no_attempts_row(
    backend: PostgresBackend,
) -> None:
    await backend.register_pool(POOL)
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim(backend)
    calls = dict(backend.statistics().calls)
    item = Ack(job_id, claimed.job.claim_seq, timing=AttemptTiming(0.5, 2.0))
    assert await backend.ack([item]) == [True]
    after = backend.statistics().calls
    assert {op: after[op] - calls[op] for op in after if after[op] != calls[op]} == {"ack": 1}
    assert await attempt_rows(backend, job_id) == 0
    row = await succeeded_on_its_row(backend, job_id)
    assert (row["started_after"], row["run_seconds"], row["host"]) == (0.5, 2.0, POOL.host)
    [attempt] = await backend.list_attempts(job_id)
    assert (attempt.outcome, attempt.claim_seq, attempt.attempt) == ("succeeded", 1, 1)
    assert attempt.host == POOL.host  # the claim's, from the pool's registration
    assert attempt.run_seconds == 2.0


async def test_a_new_claim_clears_the_last_attempts_run_from_the_job_row(
    backend: PostgresBackend,
) -> None:
    """A retried job's next claim is a new attempt: the row's started_at and run_seconds
    are cleared, and its host is the new claimer's (NULL: that pool never registered)."""
    job_id = await backend.enqueue(Q, "x")
    await backend.register_pool(POOL)
    first = await claim(backend)
    await backend.fail(
        [Failure(job_id, first.job.claim_seq, "E: x", 0.0, timing=AttemptTiming(0.0, 1.0))]
    )
    async with backend.acquire() as connection:
        await connection.execute(
            f'UPDATE "{backend.schema}".jobs SET started_at = now(), run_seconds = 1 WHERE id = $1',
            job_id,
        )
    [second] = await backend.claim(Q, limit=1, worker_id="other", visibility_timeout=V)
    row = await fetchrow(
        backend, "SELECT started_at, run_seconds, host FROM {schema}.jobs WHERE id = $1", job_id
    )
    assert (row["started_at"], row["run_seconds"], row["host"]) == (None, None, None)
    assert await backend.ack([Ack(job_id, second.job.claim_seq)]) == [True]
    retry, succeeded = await backend.list_attempts(job_id)
    assert (retry.outcome, retry.host, retry.run_seconds) == ("retry", POOL.host, 1.0)
    assert (succeeded.outcome, succeeded.worker_id, succeeded.host) == ("succeeded", "other", None)
    assert (succeeded.started_at, succeeded.run_seconds) == (None, None)  # it sent no timing


@pytest.mark.parametrize("outcome", ["fail", "release"])
async def test_an_outcome_and_its_attempt_row_are_one_statement(
    backend: PostgresBackend, outcome: str
) -> None:
    await backend.register_pool(POOL)
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim(backend)
    seq, timing = claimed.job.claim_seq, AttemptTiming(0.5, 2.0)
    calls = dict(backend.statistics().calls)
    if outcome == "fail":
        assert await backend.fail([Failure(job_id, seq, "E: x", None, timing=timing)]) != [None]
    else:
        assert await backend.release([Release(job_id, seq, timing=timing)]) == [True]
    after = backend.statistics().calls
    assert {op: after[op] - calls[op] for op in after if after[op] != calls[op]} == {outcome: 1}
    assert await same_transaction(backend, job_id, seq)
    [attempt] = await backend.list_attempts(job_id)
    assert attempt.host == POOL.host  # from the pool's registration
    assert attempt.run_seconds == 2.0


async def test_a_takeover_writes_the_lost_row_in_the_claim_statement(
    backend: PostgresBackend,
) -> None:
    job_id = await backend.enqueue(Q, "x")
    first = await claim(backend)
    async with backend.acquire() as connection:  # the worker died: its lease runs out
        await connection.execute(
            f'UPDATE "{backend.schema}".jobs SET not_visible_until = now() - interval '
            "'1 second', lease_floor = now() - interval '1 second' WHERE id = $1",
            job_id,
        )
    calls = backend.statistics().calls["claim"]
    second = await claim(backend)
    assert backend.statistics().calls["claim"] == calls + 1
    assert await same_transaction(backend, job_id, first.job.claim_seq)
    lost, *_ = await backend.list_attempts(job_id)
    assert (lost.claim_seq, lost.outcome) == (first.job.claim_seq, "lost")
    assert second.job.waited is not None
    assert second.job.waited >= 1.0  # visible since its lease ran out, a second ago


async def test_the_transactional_ack_writes_the_attempt_on_the_job_row_with_the_commit(
    backend: PostgresBackend,
) -> None:
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim(backend)
    async with backend.job_transaction() as tx:
        item = Ack(job_id, claimed.job.claim_seq, timing=AttemptTiming(0.25, 1.0))
        assert await tx.commit_with_ack(item)
    assert await attempt_rows(backend, job_id) == 0
    row = await succeeded_on_its_row(backend, job_id)
    assert (row["started_after"], row["run_seconds"]) == (0.25, 1.0)
    [attempt] = await backend.list_attempts(job_id)
    assert (attempt.outcome, attempt.run_seconds) == ("succeeded", 1.0)


async def test_a_traceback_with_a_nul_is_stored_escaped_and_bounded(
    backend: PostgresBackend,
) -> None:
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim(backend)
    text = "a\x00b\ud800" + "x" * (2 * MAX_TRACEBACK_CHARS)
    failure = Failure(
        job_id, claimed.job.claim_seq, "E: x", None, error_type="E\x00", traceback=text
    )
    await backend.fail([failure])
    [attempt] = await backend.list_attempts(job_id)
    assert attempt.error_type == "E\\x00"
    assert attempt.traceback is not None
    assert attempt.traceback.startswith("a\\x00b\\ud800")
    assert len(attempt.traceback) == MAX_TRACEBACK_CHARS


async def test_the_trace_context_is_stored_and_handed_to_the_claim(
    backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    context = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    monkeypatch.setattr("trioqueue._telemetry.enqueue_context", lambda: context)
    job_id = await backend.enqueue(Q, "x")
    stored = await fetchrow(
        backend, "SELECT trace_context FROM {schema}.jobs WHERE id = $1", job_id
    )
    assert json.loads(stored["trace_context"]) == context
    assert (await claim(backend)).job.trace_context == context


async def test_percentiles_agree_with_postgresql(backend: PostgresBackend) -> None:
    """The reference model's percentile_cont is PostgreSQL's, value for value."""
    rng = random.Random(24)
    async with backend.acquire() as connection:
        for n in (1, 2, 3, 7, 100):
            values = [rng.uniform(0, 10) for _ in range(n)]
            for fraction in (0.5, 0.95, 0.99):
                ours = percentile_cont(values, fraction)
                theirs = await connection.fetchval(
                    "SELECT percentile_cont($1::float8) WITHIN GROUP (ORDER BY v) "
                    "FROM unnest($2::float8[]) AS t (v)",
                    fraction,
                    values,
                )
                assert ours == theirs, (n, fraction)


async def test_migration_0009_marks_existing_cancellations(
    postgres_dsn: str, postgres_schema: str
) -> None:
    async with open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        before = [m for m in MIGRATIONS if m.version < 9]
        async with backend.acquire() as connection, connection.transaction():
            await connection.execute(render(QUERIES["migrate_prepare"], postgres_schema))
            for migration in before:
                await connection.execute(render(migration.sql, postgres_schema))
                await connection.execute(
                    render(QUERIES["record_migration"], postgres_schema),
                    migration.version,
                    migration.name,
                    migration.checksum,
                )
            for error in ("cancelled before it ran", "ValueError: cancelled", None):
                await connection.execute(
                    f'INSERT INTO "{postgres_schema}".jobs '
                    "(queue, payload, max_attempts, status, finished_at, last_error) "
                    "VALUES ($1, '1', 3, 'failed', now(), $2)",
                    Q,
                    error,
                )
        assert "0009_attempts" in await backend.migrate()
        jobs = await backend.list_jobs()
        assert [job.cancelled for job in jobs] == [True, False, False]
        assert [await backend.list_attempts(job.id) for job in jobs] == [[], [], []]


async def test_attempts_go_with_their_job_whatever_deletes_it(backend: PostgresBackend) -> None:
    """The statement trigger of migration 0009: prune and an operator's own DELETE take
    the attempts of every job they delete, and leave the others'."""
    ids = [await backend.enqueue(Q, n) for n in range(3)]
    for job_id in ids:
        claimed = await claim(backend)
        assert await backend.fail([Failure(job_id, claimed.job.claim_seq, "E: x", None)]) != [None]
    async with backend.acquire() as connection:
        await connection.execute(
            f'UPDATE "{backend.schema}".jobs SET finished_at = now() - interval '
            "'2 hours' WHERE id = $1",
            ids[0],
        )
        assert await backend.prune(3600.0) == 1
        await connection.execute(f'DELETE FROM "{backend.schema}".jobs WHERE id = $1', ids[1])
        left = await connection.fetch(f'SELECT job_id FROM "{backend.schema}".attempts')
    assert [row["job_id"] for row in left] == [ids[2]]


async def test_the_attempt_rows_view_reads_both_sources_and_a_pruned_job_leaves_it(
    backend: PostgresBackend,
) -> None:
    """Operators' SQL sees every attempt in ``attempt_rows``: the attempts table's rows and
    one per succeeded job; pruning a succeeded job takes its attempt with its row."""
    await backend.register_pool(POOL)
    ok, bad = await backend.enqueue(Q, 1), await backend.enqueue(Q, 2)
    first = await claim(backend)
    assert await backend.ack([Ack(ok, first.job.claim_seq, timing=AttemptTiming(0.0, 3.0))])
    second = await claim(backend)
    assert await backend.fail([Failure(bad, second.job.claim_seq, "E: x", None)]) != [None]
    sql = 'SELECT job_id, outcome, host, run_seconds FROM "{}".attempt_rows ORDER BY job_id'
    async with backend.acquire() as connection:
        rows = await connection.fetch(sql.format(backend.schema))
        assert [tuple(row) for row in rows] == [
            (ok, "succeeded", POOL.host, 3.0),
            (bad, "failed", POOL.host, None),
        ]
        await connection.execute(
            f'UPDATE "{backend.schema}".jobs SET finished_at = now() - interval '
            "'2 hours' WHERE id = $1",
            ok,
        )
        assert await backend.prune(3600.0) == 1
        rows = await connection.fetch(sql.format(backend.schema))
    assert [row["job_id"] for row in rows] == [bad]
