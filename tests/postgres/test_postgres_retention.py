"""Retention and the maintainer lease on PostgreSQL (docs/protocol.rst §15): what the
conformance suite cannot see from outside.

A batch is one short statement: bounded, reaching its rows by ``jobs_retention_idx``,
holding only finished rows, so a claim, a renewal or an ack never waits for it; its fence
holds the lease row ``FOR SHARE``, so a claim of the lease waits for it instead. The lease
is judged by the database's clock, not the caller's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from trioqueue._backends.postgres import PostgresBackend
from trioqueue._backends.postgres.retention import BATCH_SETTINGS
from trioqueue._backends.postgres.sql import QUERIES, render
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import Ack, Failure

from .._postgres_harness import jobs_table, wait_for_lock_wait

pytestmark = pytest.mark.postgres

Q = "retention"


async def _old_finished(backend: PostgresBackend, n: int, *, queue: str = Q) -> None:
    """``n`` succeeded jobs that finished a year ago, written by SQL (fast)."""
    async with backend.acquire() as connection:
        await connection.execute(
            f"INSERT INTO {jobs_table(backend)} (queue, payload, status, max_attempts, "
            "attempts, claim_seq, finished_at) "
            "SELECT $1, '{}'::jsonb, 'succeeded', 1, 1, 1, now() - interval '365 days' "
            "FROM generate_series(1, $2::integer)",
            queue,
            n,
        )


async def _lease(backend: PostgresBackend, holder: str = "m1", lease: float = 60.0) -> int:
    seq = await backend.claim_maintainer(holder, lease)
    assert seq is not None
    return seq


async def test_batches_are_bounded(backend: PostgresBackend) -> None:
    await _old_finished(backend, 2500)
    seq = await _lease(backend)
    sizes = []
    while True:
        batch = await backend.prune_retained(seq, limit=1000)
        assert batch is not None
        sizes.append(batch.jobs_deleted)
        if not batch.more:
            break
    assert sizes == [1000, 1000, 500]
    async with backend.acquire() as connection:
        assert await connection.fetchval(f"SELECT count(*) FROM {jobs_table(backend)}") == 0


async def test_a_claim_renewal_and_ack_are_not_blocked_by_an_open_batch(
    backend: PostgresBackend,
) -> None:
    """A batch's transaction left open (the worst case: a statement that stalls before its
    commit) holds only finished rows and the lease row: the hot path goes on."""
    await _old_finished(backend, 500)
    running = await backend.enqueue(Q, "running")
    [held] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
    assert held.job.id == running
    waiting = await backend.enqueue(Q, "waiting")
    seq = await _lease(backend)
    async with backend.acquire() as connection:
        await connection.execute("BEGIN")
        row = await connection.fetchrow(
            render(QUERIES["prune_retained"], backend.schema), seq, 1000
        )
        assert row["fenced"]
        with trio.fail_after(10):  # a lock wait would hang these calls
            [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
            verdicts = await backend.renew(
                [RenewItem(running, held.job.claim_seq, None)], visibility_timeout=60
            )
            acked = await backend.ack([Ack(running, held.job.claim_seq)])
            await backend.enqueue(Q, "new")
        await connection.execute("COMMIT")
    assert claimed.job.id == waiting
    assert dict(verdicts) == {running: Verdict.EXTENDED}
    assert acked == [True]


async def test_a_claim_of_the_lease_waits_for_a_batch_under_the_old_fence(
    backend: PostgresBackend,
) -> None:
    """I17 on PostgreSQL: the batch holds the lease row FOR SHARE, so a new holder's claim
    (an UPDATE of that row) commits only after the old fence's batch did, even when the
    lease ran out while the batch ran."""
    await _old_finished(backend, 10)
    lease = 1.0
    seq = await _lease(backend, lease=lease)
    async with backend.acquire() as connection:
        await connection.execute("BEGIN")
        row = await connection.fetchrow(
            render(QUERIES["prune_retained"], backend.schema), seq, 1000
        )
        assert row["fenced"]
        assert row["counts"] == [10]
        # The lease running out while the batch's transaction is open is the case under
        # test: let it run out on the database's clock.
        await trio.sleep(lease + 0.2)
        taken: list[int | None] = []
        async with trio.open_nursery() as nursery:

            async def claim() -> None:
                taken.append(await backend.claim_maintainer("m2", 60.0))

            nursery.start_soon(claim)
            await wait_for_lock_wait(backend, longer_than=0.0)
            assert taken == []  # waiting for the batch's transaction
            await connection.execute("COMMIT")
    assert taken == [seq + 1]
    assert await backend.prune_retained(seq) is None


async def test_the_batch_reaches_its_rows_by_the_retention_index(
    backend: PostgresBackend,
) -> None:
    for n in range(20):
        await _old_finished(backend, 500, queue=f"q{n}")
    await backend.set_retention(None, succeeded=None, failed=86_400)  # nothing to delete
    seq = await _lease(backend)
    async with backend.acquire() as connection:
        await connection.execute(f"ANALYZE {jobs_table(backend)}")
        explained = await connection.fetchval(
            "EXPLAIN (FORMAT JSON) " + render(QUERIES["prune_retained"], backend.schema),
            seq,
            1000,
        )
    [plan] = json.loads(explained)
    scans = list(_scans(plan["Plan"]))
    on_jobs = [(kind, index) for kind, relation, index in scans if relation == "jobs"]
    assert ("Index Only Scan", "jobs_retention_idx") in on_jobs or (
        "Index Scan",
        "jobs_retention_idx",
    ) in on_jobs, on_jobs
    assert all(kind != "Seq Scan" for kind, _ in on_jobs), on_jobs
    on_audit = [kind for kind, relation, _ in scans if relation == "audit_log"]
    assert "Seq Scan" not in on_audit, scans


async def test_the_rows_a_batch_chooses_from_are_read_from_the_index_alone(
    backend: PostgresBackend,
) -> None:
    """To delete the oldest ``limit`` rows across queues a batch reads up to ``limit`` rows
    of each queue past its policy; since migration 0014 they are index-only scans (the id
    is in jobs_retention_idx), which read no heap page where vacuum has marked the pages
    all-visible (how many it marks depends on the server's other transactions: not
    asserted)."""
    for n in range(10):
        await _old_finished(backend, 3000, queue=f"q{n}")
    seq = await _lease(backend)
    async with backend.acquire() as connection:
        await connection.execute(f"VACUUM ANALYZE {jobs_table(backend)}")  # all-visible pages
        explained = await _explained_and_rolled_back(
            connection, render(QUERIES["prune_retained"], backend.schema), seq, 1000
        )
    [plan] = json.loads(explained)
    choosing = [
        node for node in _nodes(plan["Plan"]) if node.get("Index Name") == "jobs_retention_idx"
    ]
    # The per-queue scans: 1000 rows from each of the 10 queues (rows are per loop).
    per_queue = [node for node in choosing if node["Actual Rows"] * node["Actual Loops"] >= 10_000]
    assert per_queue, choosing
    assert all(node["Node Type"] == "Index Only Scan" for node in per_queue), per_queue


class _RolledBack(Exception):
    pass


async def _explained_and_rolled_back(connection: Any, sql: str, *arguments: Any) -> str:
    """``EXPLAIN ANALYZE`` of ``sql`` (with the settings retention.py runs a batch with), in a
    transaction rolled back: only the plan is wanted."""
    explained = ""
    try:
        async with connection.transaction():
            await connection.execute(BATCH_SETTINGS)
            explained = await connection.fetchval(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + sql, *arguments
            )
            raise _RolledBack
    except _RolledBack:
        pass
    return explained


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _scans(node: dict[str, Any]) -> Iterator[tuple[str, str | None, str | None]]:
    if "Relation Name" in node or "Index Name" in node:
        yield node["Node Type"], node.get("Relation Name"), node.get("Index Name")
    for child in node.get("Plans", []):
        yield from _scans(child)


async def test_attempt_rows_go_with_their_job(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x", max_attempts=3)
    [first] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
    await backend.fail([Failure(job_id, first.job.claim_seq, "E: once", 0.0)])
    [second] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
    await backend.ack([Ack(job_id, second.job.claim_seq, result="42")])
    attempts = f'"{backend.schema}".attempts'
    async with backend.acquire() as connection:
        assert await connection.fetchval(f"SELECT count(*) FROM {attempts}") == 1
        await connection.execute(
            f"UPDATE {jobs_table(backend)} SET finished_at = now() - interval '8 days'"
        )
    batch = await backend.prune_retained(await _lease(backend))
    assert batch is not None
    assert batch.deleted == {(Q, "succeeded"): 1}
    async with backend.acquire() as connection:
        assert await connection.fetchval(f"SELECT count(*) FROM {attempts}") == 0


async def test_the_lease_is_the_databases_clock(backend: PostgresBackend) -> None:
    seq = await _lease(backend, lease=600.0)
    async with backend.acquire() as connection:
        row = await connection.fetchrow(
            f'SELECT now() AS now, acquired_at, not_visible_until FROM "{backend.schema}".maintainer'
        )
        lease = (row["not_visible_until"] - row["acquired_at"]).total_seconds()
        assert lease == pytest.approx(600.0, abs=0.01)
        assert abs((row["acquired_at"] - row["now"]).total_seconds()) < 5
        # Run the lease out on the database's clock only: the caller's has not moved.
        await connection.execute(
            f'UPDATE "{backend.schema}".maintainer SET not_visible_until = now()'
        )
    assert await backend.renew_maintainer("m1", seq, 600.0) is False
    assert await backend.claim_maintainer("m2", 600.0) == seq + 1
