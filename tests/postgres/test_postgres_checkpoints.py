"""Checkpoints on PostgreSQL (docs/protocol.rst §16): what the conformance suite cannot
reach through the Backend protocol: a late renewal statement, HOT updates, the claim of a
checkpoint another tool wrote."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trioqueue._backends.postgres import PostgresBackend
from trioqueue._backends.postgres.sql import QUERIES, render
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import Claimed, UndecodablePayload

from .._postgres_harness import jobs_table

pytestmark = pytest.mark.postgres

Q = "pg"
V = 60.0


def at(claimed: Claimed, checkpoint: str | None) -> RenewItem:
    return RenewItem(claimed.job.id, claimed.job.claim_seq, None, checkpoint)


async def claim_one(backend: PostgresBackend) -> Claimed:
    [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=V)
    return claimed


async def stored(backend: PostgresBackend, job_id: int) -> Any:
    async with backend.acquire() as connection:
        return await connection.fetchrow(
            f"SELECT checkpoint::text AS checkpoint, checkpointed_at FROM {jobs_table(backend)} "
            "WHERE id = $1",
            job_id,
        )


async def test_a_late_renewal_never_overwrites_a_newer_checkpoint(
    backend: PostgresBackend,
) -> None:
    """I18 with I6 on the row: an older renewal statement that writes after a newer one (an
    abandoned call that came unstuck) leaves the newer renewal's checkpoint in place, as it
    leaves its lease and progress."""
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    renew_sql = render(QUERIES["renew"], backend.schema)
    ids, seqs = [str(job_id)], [str(claimed.job.claim_seq)]
    args = (ids, seqs, None, V, *(None,) * 10, ['{"page": 1}'])
    async with backend.acquire() as old, old.transaction():
        await old.fetchval("SELECT now()")  # the old statement's now() is fixed here
        assert await backend.renew([at(claimed, '{"page": 2}')], visibility_timeout=V) == {
            job_id: Verdict.EXTENDED
        }
        newer = await stored(backend, job_id)
        await old.fetch(renew_sql, *args)  # the late writer, with its earlier now()
    after = await stored(backend, job_id)
    assert (after["checkpoint"], after["checkpointed_at"]) == (
        '{"page": 2}',
        newer["checkpointed_at"],
    )


async def test_a_renewal_carrying_a_checkpoint_is_a_hot_update(backend: PostgresBackend) -> None:
    """Neither checkpoint column is indexed (migration 0014): storing one keeps the renewal
    a heap-only update (migration 0006), small or large (a large one is TOASTed)."""
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    counters = (
        "SELECT pg_stat_get_xact_tuples_updated($1::regclass) AS updated, "
        "pg_stat_get_xact_tuples_hot_updated($1::regclass) AS hot"
    )
    renew_sql = render(QUERIES["renew"], backend.schema)
    ids, seqs = [str(job_id)], [str(claimed.job.claim_seq)]
    for text in ('{"page": 1}', json.dumps(["x" * 100] * 600), None):
        async with backend.acquire() as connection, connection.transaction():
            before = await connection.fetchrow(counters, jobs_table(backend))
            checkpoints = None if text is None else [text]
            rows = await connection.fetch(renew_sql, ids, seqs, None, V, *(None,) * 10, checkpoints)
            after = await connection.fetchrow(counters, jobs_table(backend))
        assert [r["verdict"] for r in rows] == ["extended"]
        assert (after["updated"] - before["updated"], after["hot"] - before["hot"]) == (1, 1)
    assert (await backend.get_job(job_id)).checkpoint == ["x" * 100] * 600


async def test_a_checkpoint_python_cannot_decode_is_delivered_marked(
    backend: PostgresBackend,
) -> None:
    """A checkpoint another tool wrote that Python's json refuses (nesting deeper than the
    recursion limit) reaches the handler as an UndecodablePayload, the text itself: the job
    still runs, and its handler decides (docs/protocol.rst §16)."""
    job_id = await backend.enqueue(Q, "x")
    deep = "[" * 5000 + "]" * 5000
    async with backend.acquire() as connection:
        await connection.execute(
            f"UPDATE {jobs_table(backend)} SET checkpoint = $1::jsonb WHERE id = $2", deep, job_id
        )
    claimed = await claim_one(backend)
    assert isinstance(claimed.job.checkpoint, UndecodablePayload)
    assert claimed.job.checkpoint.startswith("[[[")
