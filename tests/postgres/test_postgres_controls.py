"""The operator's controls on PostgreSQL: what the conformance suite cannot see from outside.

Bulk retry and delete pick their batches ``FOR UPDATE SKIP LOCKED``: a row another
transaction holds is passed over at once, not waited for (a worker's statement is never
queued behind an operator's). Table health reads PostgreSQL's catalogs: real sizes.
"""

from __future__ import annotations

import pytest
import trio

from trioqueue._backends.postgres import PostgresBackend
from trioqueue._types import Failure

pytestmark = pytest.mark.postgres

Q = "controls"


async def _failed(backend: PostgresBackend, n: int) -> list[int]:
    ids = await backend.enqueue_many(Q, list(range(n)), max_attempts=1)
    claimed = await backend.claim(Q, limit=n, worker_id="w", visibility_timeout=60)
    await backend.fail([Failure(c.job.id, c.job.claim_seq, "boom", None) for c in claimed])
    return ids


@pytest.mark.parametrize("op", ["retry_matching", "delete_matching"])
async def test_a_row_another_transaction_holds_is_skipped_not_waited_for(
    backend: PostgresBackend, op: str
) -> None:
    ids = await _failed(backend, 3)
    held = ids[1]
    async with backend.acquire() as connection:
        await connection.execute("BEGIN")
        await connection.execute(
            f'SELECT 1 FROM "{backend.schema}".jobs WHERE id = $1 FOR UPDATE', held
        )
        # A lock wait would hang the call: the bound turns that into a failure.
        with trio.fail_after(10):
            done = await getattr(backend, op)(Q, batch_size=2)
        await connection.execute("ROLLBACK")
    assert done == 2
    infos = await backend.get_jobs(ids)
    assert infos[held].status == "failed"  # untouched, and the others done
    if op == "retry_matching":
        assert [infos[i].status for i in ids if i != held] == ["ready", "ready"]
    else:
        assert set(infos) == {held}


async def test_table_health_reads_sizes_from_the_catalogs(backend: PostgresBackend) -> None:
    await backend.enqueue_many(Q, ["x"] * 10)
    await backend.record_audit("test", "t", "s", {})
    health = await backend.table_health()
    tables = {t.name: t for t in health.tables}
    indexes = {i.name: i for i in health.indexes}
    assert set(tables) == {
        "attempts",
        "audit_log",
        "job_edges",  # 0018
        "jobs",
        "maintainer",  # 0011
        "queues",
        "retention",  # 0011
        "retention_settings",  # 0011
        "schedules",
        "schema_migrations",
        "workers",
    }
    assert tables["jobs"].total_bytes > 0  # its heap and indexes
    assert {"jobs_pkey", "jobs_claim_queued_idx", "audit_log_pkey"} <= set(indexes)
    assert indexes["jobs_pkey"].total_bytes > 0
    assert indexes["jobs_pkey"].live_rows is None
    assert all(t.live_rows is not None and t.dead_rows is not None for t in tables.values())
