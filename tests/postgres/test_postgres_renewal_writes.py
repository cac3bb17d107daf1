"""What a renewal writes (migration 0006, docs/postgres.rst): a HOT update that changes no
indexed column, and a lease floor that stays below the lease and is lifted only when it
nears passing, so that claims still find every expired lease."""

from __future__ import annotations

from typing import Any

import pytest

from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._backends.postgres.sql import MIGRATIONS, QUERIES, render
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import Claimed

from .._postgres_harness import jobs_table

pytestmark = pytest.mark.postgres

Q = "pg"


async def lease_rows(backend: PostgresBackend) -> dict[int, Any]:
    async with backend.acquire() as connection:
        rows = await connection.fetch(
            "SELECT id, not_visible_until, lease_floor, "
            "extract(epoch FROM not_visible_until - lease_floor)::float8 AS margin "
            f"FROM {jobs_table(backend)} ORDER BY id"
        )
    return {r["id"]: r for r in rows}


async def renew_in_transaction(
    backend: PostgresBackend, ids: list[int], seqs: list[int], lease: float
) -> tuple[list[str], int, int]:
    """The renew statement of these jobs in a transaction of its own; its verdicts, and the
    rows of the jobs table it updated, all of them and HOT only. (The connection's pending
    counters, read before and after it in the transaction: nothing flushes them meanwhile.)"""
    counters = (
        "SELECT pg_stat_get_xact_tuples_updated($1::regclass) AS updated, "
        "pg_stat_get_xact_tuples_hot_updated($1::regclass) AS hot"
    )
    async with backend.acquire() as connection, connection.transaction():
        before = await connection.fetchrow(counters, jobs_table(backend))
        rows = await connection.fetch(
            render(QUERIES["renew"], backend.schema),
            [str(i) for i in ids],
            [str(s) for s in seqs],
            [None] * len(ids),
            lease,
            *(None,) * 11,  # no beat, no checkpoints
        )
        after = await connection.fetchrow(counters, jobs_table(backend))
    updated = after["updated"] - before["updated"]
    return [r["verdict"] for r in rows], updated, after["hot"] - before["hot"]


async def test_a_renewal_is_a_hot_update(backend: PostgresBackend) -> None:
    """Renewed leases change no indexed column: every row update is heap-only.

    Five jobs, so that every version of their rows (inserted, claimed, renewed three times)
    fits on their one page without pruning: a HOT update needs room on the row's page, and
    another session's open snapshot (other tests on the same server) keeps pruning from
    freeing any. With 20 jobs, 12 of 20 updates were HOT under such a snapshot."""
    await backend.enqueue_many(Q, list(range(5)))
    claimed = await backend.claim(Q, limit=5, worker_id="w", visibility_timeout=60)
    ids = [c.job.id for c in claimed]
    seqs = [c.job.claim_seq for c in claimed]
    for _ in range(3):
        verdicts, updated, hot = await renew_in_transaction(backend, ids, seqs, 60)
        assert verdicts == ["extended"] * 5
        assert (updated, hot) == (5, 5)


async def test_the_floor_stays_below_the_lease_and_moves_only_near_passing(
    backend: PostgresBackend,
) -> None:
    """A claim sets the floor to its lease; a renewal far from the floor leaves it (only the
    lease moves), one within a quarter of a lease of it lifts it to the new lease."""
    [job_id] = await backend.enqueue_many(Q, ["x"])
    [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
    claimed_row = (await lease_rows(backend))[job_id]
    assert 0 <= claimed_row["margin"] < 1  # the floor: the lease, from the statement's start

    verdicts = await backend.renew([_item(claimed)], visibility_timeout=100)
    assert verdicts == {job_id: Verdict.EXTENDED}
    renewed = (await lease_rows(backend))[job_id]
    assert renewed["not_visible_until"] > claimed_row["not_visible_until"]
    assert renewed["lease_floor"] == claimed_row["lease_floor"]  # 60 s ahead: left alone

    # A renewal whose quarter lease reaches the floor lifts it (60 s away <= 400 s / 4).
    await backend.renew([_item(claimed)], visibility_timeout=400)
    lifted = (await lease_rows(backend))[job_id]
    assert lifted["lease_floor"] == lifted["not_visible_until"]
    assert lifted["lease_floor"] > renewed["lease_floor"]


async def test_a_stale_renewal_moves_no_floor(backend: PostgresBackend) -> None:
    """The floor is fenced like the lease: a renewal naming an old claim_seq writes nothing."""
    [job_id] = await backend.enqueue_many(Q, ["x"])
    [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
    before = (await lease_rows(backend))[job_id]
    verdicts, updated, _ = await renew_in_transaction(
        backend, [job_id], [claimed.job.claim_seq - 1], 1000
    )
    assert verdicts == ["reclaimed"]
    assert updated == 0
    assert (await lease_rows(backend))[job_id]["lease_floor"] == before["lease_floor"]


async def test_an_expired_renewed_lease_is_claimed_again(backend: PostgresBackend) -> None:
    """Renewals that left the floor alone do not hide the lease from a claim once it ran out
    (here: its lease and floor set to the past, as a dead worker's would be in time)."""
    [job_id] = await backend.enqueue_many(Q, ["x"])
    [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
    await backend.renew([_item(claimed)], visibility_timeout=60)
    async with backend.acquire() as connection:
        await connection.execute(
            f"UPDATE {jobs_table(backend)} SET not_visible_until = now() - interval '1 second', "
            "lease_floor = now() - interval '1 second' WHERE id = $1",
            job_id,
        )
    [again] = await backend.claim(Q, limit=1, worker_id="w2", visibility_timeout=60)
    assert (again.job.id, again.job.claim_seq) == (job_id, claimed.job.claim_seq + 1)


async def test_the_migration_gives_running_rows_their_floor(
    postgres_dsn: str, postgres_schema: str
) -> None:
    """Upgrading a schema with leases in flight: each running row gets its lease as its
    floor, so a claim after 0006 finds the ones that expire."""
    async with open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        async with backend.acquire() as connection, connection.transaction():
            await connection.execute(render(QUERIES["migrate_prepare"], backend.schema))
            for migration in MIGRATIONS[:5]:
                await connection.execute(render(migration.sql, backend.schema))
                await connection.execute(
                    render(QUERIES["record_migration"], backend.schema),
                    migration.version,
                    migration.name,
                    migration.checksum,
                )
            await connection.execute(
                f"INSERT INTO {jobs_table(backend)} (queue, payload, status, max_attempts, "
                "not_visible_until, attempts, claim_seq, worker_id) VALUES "
                "($1, '1', 'running', 3, now() + interval '1 hour', 1, 1, 'w'), "
                "($1, '2', 'running', 3, now() - interval '1 second', 1, 1, 'w')",
                Q,
            )
        assert (await backend.migrate())[0] == "0006_hot_renewals"  # (and any newer ones)
        rows = await lease_rows(backend)
        assert all(r["lease_floor"] == r["not_visible_until"] for r in rows.values())
        [again] = await backend.claim(Q, limit=5, worker_id="w2", visibility_timeout=60)
        assert again.job.id == max(rows)  # the expired one, and only it


def _item(claimed: Claimed) -> RenewItem:
    return RenewItem(claimed.job.id, claimed.job.claim_seq, None)
