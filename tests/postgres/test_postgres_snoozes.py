"""Snoozes on PostgreSQL (docs/protocol.rst §17, I19): what the conformance suite cannot
reach through the Backend protocol alone: a late snooze after its lease lapsed and another
worker took the job over, the attempt rows the statement writes, and a transactional
handler's writes rolled back when it snoozes."""

from __future__ import annotations

import pytest

from trioqueue._backends.postgres import PostgresBackend
from trioqueue._types import Claimed, Snoozed, SnoozeWrite

from .._postgres_harness import jobs_table

pytestmark = pytest.mark.postgres

Q = "pg"
V = 60.0


async def claim_one(backend: PostgresBackend, worker: str = "w") -> Claimed:
    [claimed] = await backend.claim(Q, limit=1, worker_id=worker, visibility_timeout=V)
    return claimed


async def lapse(backend: PostgresBackend, job_id: int) -> None:
    """The lease runs out, as if its worker had stopped renewing (migration 0006's floor)."""
    async with backend.acquire() as connection:
        await connection.execute(
            f"UPDATE {jobs_table(backend)} SET not_visible_until = now() - interval '1 second', "
            "lease_floor = now() - interval '1 second' WHERE id = $1",
            job_id,
        )


async def test_I19_a_late_snooze_after_a_lapse_and_reclaim_changes_nothing(
    backend: PostgresBackend,
) -> None:
    """The first worker's lease lapses and a second worker's claim takes the job over
    (writing the lapsed attempt's ``lost`` row); the first worker's snooze then arrives:
    it misses (I9), writes no attempt row, and the second attempt's own snooze applies."""
    job_id = await backend.enqueue(Q, "x", max_attempts=3)
    first = await claim_one(backend, "w1")
    await lapse(backend, job_id)
    second = await claim_one(backend, "w2")
    assert second.job.attempt == 2
    late = SnoozeWrite(job_id, first.job.claim_seq, 0.0, 0.5, checkpoint='"late"')
    assert await backend.snooze([late], max_snoozes=10) == [None]
    async with backend.acquire() as connection:
        row = await connection.fetchrow(
            f"SELECT status, attempts, snoozes, claim_seq, progress, checkpoint "
            f"FROM {jobs_table(backend)} WHERE id = $1",
            job_id,
        )
    assert dict(row) == {
        "status": "running",
        "attempts": 2,
        "snoozes": 0,
        "claim_seq": second.job.claim_seq,
        "progress": None,
        "checkpoint": None,
    }
    own = SnoozeWrite(job_id, second.job.claim_seq, 0.0)
    assert await backend.snooze([own], max_snoozes=10) == [Snoozed.SNOOZED]
    info = await backend.get_job(job_id)
    assert (info.status, info.attempts, info.snoozes) == ("ready", 1, 1)
    attempts = await backend.list_attempts(job_id)
    assert [(a.attempt, a.claim_seq, a.outcome, a.worker_id) for a in attempts] == [
        (1, first.job.claim_seq, "lost", "w1"),
        (2, second.job.claim_seq, "snoozed", "w2"),
    ]


async def test_a_replayed_snooze_statement_writes_one_attempt_row(
    backend: PostgresBackend,
) -> None:
    """The same item twice in one statement, and the statement again: one row per claim."""
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    write = SnoozeWrite(job_id, claimed.job.claim_seq, 0.0)
    assert await backend.snooze([write, write], max_snoozes=10) == [Snoozed.SNOOZED, None]
    assert await backend.snooze([write], max_snoozes=10) == [None]
    info = await backend.get_job(job_id)
    assert (info.attempts, info.snoozes) == (0, 1)
    assert [a.outcome for a in await backend.list_attempts(job_id)] == ["snoozed"]
