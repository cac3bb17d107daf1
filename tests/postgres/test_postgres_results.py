"""Results on PostgreSQL: a pool stores its handlers' return values, ``wait_for`` returns
them, in plain and transactional mode; migration 0003 upgrades a schema holding jobs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue import JobContext
from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._backends.postgres.sql import MIGRATIONS, QUERIES, render

pytestmark = pytest.mark.trio

Q = "results"


@pytest.fixture
async def backend(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[PostgresBackend]:
    async with open_postgres(postgres_dsn, schema=postgres_schema, max_connections=8) as backend:
        await backend.migrate()
        yield backend


async def handler(payload: Any, ctx: JobContext) -> Any:
    return {"echo": payload, "attempt": ctx.attempt}


OPTIONS: dict[str, Any] = {"queue": Q, "visibility_timeout": 5, "heartbeat_interval": 1}


@pytest.mark.parametrize("transactional", [False, True])
async def test_a_pools_result_is_stored_and_wait_for_returns_it(
    backend: PostgresBackend, transactional: bool
) -> None:
    if transactional:
        cfg = trioqueue.transactional_worker_config(2, handler, **OPTIONS)
    else:
        cfg = trioqueue.WorkerConfig(handler=handler, concurrency=2, **OPTIONS)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        job_id = await backend.enqueue(Q, {"city": "Zürich"})
        with trio.fail_after(30):
            info = await backend.wait_for(job_id)
        nursery.cancel_scope.cancel()
    assert (info.status, info.result) == ("succeeded", {"echo": {"city": "Zürich"}, "attempt": 1})
    async with backend.acquire() as connection:
        stored = await connection.fetchval(
            f'SELECT result::text FROM "{backend.schema}".jobs WHERE id = $1', job_id
        )
    assert json.loads(stored) == info.result


async def test_migration_0003_upgrades_a_schema_that_holds_finished_jobs(
    postgres_dsn: str, postgres_schema: str
) -> None:
    async with open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        async with backend.acquire() as connection, connection.transaction():
            await connection.execute(render(QUERIES["migrate_prepare"], postgres_schema))
            for migration in MIGRATIONS[:2]:
                await connection.execute(render(migration.sql, postgres_schema))
                await connection.execute(
                    render(QUERIES["record_migration"], postgres_schema),
                    migration.version,
                    migration.name,
                    migration.checksum,
                )
            await connection.execute(
                f'INSERT INTO "{postgres_schema}".jobs (queue, payload, max_attempts, status, '
                "finished_at) VALUES ($1, '1'::jsonb, 3, 'succeeded', now())",
                Q,
            )
        assert await backend.migrate() == [f"{m.version:04d}_{m.name}" for m in MIGRATIONS[2:]]
        [old] = await backend.list_jobs()
        assert (old.status, old.result) == ("succeeded", None)
        assert (await backend.wait_for(old.id, timeout=0)).result is None
