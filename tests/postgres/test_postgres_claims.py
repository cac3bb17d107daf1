"""Trouble around a job on PostgreSQL that must not cost it (or its siblings) an attempt
(issue 7).

* A claim that waited on a lock longer than V leases its rows from when it locked them, and
  the pool runs them (item 2).
* A row whose payload this process cannot decode fails on its own; its batch siblings run,
  and listings show it (item 3).
* A transactional handler whose connection the server refuses (a role's connection limit)
  is not charged for it (item 4).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import trio

import trioqueue
from trioqueue import JobContext, UndecodablePayload
from trioqueue._backends.postgres import PostgresBackend, open_postgres

from .._postgres_harness import jobs_table, wait_for_lock_wait, wait_until_finished

pytestmark = pytest.mark.postgres

Q = "claims"


async def test_claim_that_waited_on_a_table_lock_leases_from_the_lock(
    backend: PostgresBackend,
) -> None:
    """Item 2: held up by LOCK TABLE for longer than V, the claim still delivers live
    leases: V counted from when it locked the rows, not from the statement's start."""
    v = 1.0
    await backend.enqueue_many(Q, [{"n": n} for n in range(3)])
    claimed: list[Any] = []
    done = trio.Event()

    async def claim() -> None:
        claimed.extend(await backend.claim(Q, limit=10, worker_id="w", visibility_timeout=v))
        claimed.append(time.time())
        done.set()

    async with trio.open_nursery() as nursery:
        async with backend.acquire() as locker, locker.transaction():
            await locker.execute(f"LOCK TABLE {jobs_table(backend)} IN ACCESS EXCLUSIVE MODE")
            nursery.start_soon(claim)
            await wait_for_lock_wait(backend, longer_than=1.5 * v)
        await done.wait()
    *jobs, returned_at = claimed
    assert len(jobs) == 3
    for job in jobs:
        assert job.lease_until > returned_at
        assert job.locked_after >= 1.5 * v
    async with backend.acquire() as connection:
        stored = await connection.fetchval(
            f"SELECT min(extract(epoch FROM not_visible_until))::float8 FROM {jobs_table(backend)}"
        )
    assert stored > returned_at


async def test_pool_runs_the_jobs_of_a_claim_held_up_past_the_lease(
    backend: PostgresBackend,
) -> None:
    """Item 2, the reported case: a table lock held longer than V while the pool's claim
    waits; with max_attempts = 1 every job must still run once and succeed."""
    v = 1.0
    ran: list[int] = []

    async def handler(payload: Any, ctx: JobContext) -> None:
        ran.append(ctx.job_id)
        await trio.lowlevel.checkpoint()

    cfg = trioqueue.WorkerConfig(
        handler=handler,
        queue=Q,
        batch_size=8,
        visibility_timeout=v,
        heartbeat_interval=0.3,
        poll_interval=0.2,
        shutdown_grace=0.5,
    )
    ids = await backend.enqueue_many(Q, [{"n": n} for n in range(8)], max_attempts=1)
    async with trio.open_nursery() as nursery:
        async with backend.acquire() as locker, locker.transaction():
            await locker.execute(f"LOCK TABLE {jobs_table(backend)} IN ACCESS EXCLUSIVE MODE")
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            await wait_for_lock_wait(backend, longer_than=1.5 * v)
        infos = await wait_until_finished(backend, ids)
        nursery.cancel_scope.cancel()
    assert [(i.status, i.attempts, i.last_error) for i in infos] == [("succeeded", 1, None)] * 8
    assert sorted(ran) == ids


#: Payloads another tool can store in jsonb that Python's json module refuses: more digits
#: than int() takes from a string (4300 by default), nesting deeper than the recursion limit.
HUGE_NUMBER = "'[' || repeat('9', 5000) || ']'"
DEEP_NESTING = "repeat('[', 5000) || repeat(']', 5000)"
POISONS = [
    pytest.param(HUGE_NUMBER, "ValueError", id="5000-digit-number"),
    pytest.param(DEEP_NESTING, "RecursionError", id="5000-deep"),
]


async def insert_raw(backend: PostgresBackend, payload_sql: str, *, max_attempts: int) -> int:
    """A job row written as another tool would, its payload built by ``payload_sql``."""
    async with backend.acquire() as connection:
        job_id: int = await connection.fetchval(
            f"INSERT INTO {jobs_table(backend)} (queue, payload, max_attempts) "
            f"VALUES ($1, ({payload_sql})::jsonb, $2) RETURNING id",
            Q,
            max_attempts,
        )
    return job_id


async def enqueue_around_poison(
    backend: PostgresBackend, payload_sql: str, *, max_attempts: int
) -> tuple[list[int], int]:
    """Ten good jobs, the poison row in their middle (by id, so by claim order)."""
    good = await backend.enqueue_many(Q, [{"n": n} for n in range(5)], max_attempts=max_attempts)
    poison = await insert_raw(backend, payload_sql, max_attempts=max_attempts)
    good += await backend.enqueue_many(
        Q, [{"n": n} for n in range(5, 10)], max_attempts=max_attempts
    )
    return good, poison


@pytest.mark.parametrize(("payload_sql", "error"), POISONS)
async def test_claim_fails_an_undecodable_row_alone_and_delivers_the_rest(
    backend: PostgresBackend, payload_sql: str, error: str
) -> None:
    good, poison = await enqueue_around_poison(backend, payload_sql, max_attempts=3)
    claimed = await backend.claim(Q, limit=11, worker_id="w", visibility_timeout=60)
    assert [c.job.id for c in claimed] == good
    assert [c.job.payload for c in claimed] == [{"n": n} for n in range(10)]
    info = await backend.get_job(poison)
    assert (info.status, info.attempts) == ("failed", 1)  # final although attempts are left
    assert info.last_error is not None
    assert info.last_error.startswith(f"payload cannot be decoded ({error}: ")
    assert isinstance(info.payload, UndecodablePayload)
    assert info.payload.startswith("[")
    assert info.payload.error.startswith(f"{error}: ")
    listed = await backend.list_jobs(queue=Q)
    assert [i.id for i in listed] == sorted([*good, poison])
    assert [i.payload for i in listed if i.id != poison] == [{"n": n} for n in range(10)]
    assert await backend.claim(Q, limit=11, worker_id="w", visibility_timeout=60) == []


async def test_claim_delivers_the_rest_even_when_failing_the_undecodable_row_fails(
    backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failing the undecodable row is the claim's second statement: if it errors, the
    claim still delivers its siblings, and the row keeps its lease until it runs out."""
    failing = (
        "SELECT int4('not a number'), $1::text[], $2::text[], $3::text[], $4::text[], $5::text[]"
    )
    monkeypatch.setitem(backend._sql, "fail", failing)
    good, poison = await enqueue_around_poison(backend, HUGE_NUMBER, max_attempts=3)
    claimed = await backend.claim(Q, limit=11, worker_id="w", visibility_timeout=60)
    assert [c.job.id for c in claimed] == good
    info = await backend.get_job(poison)
    assert (info.status, info.attempts, info.last_error) == ("running", 1, None)
    assert backend.statistics()["connections_in_use"] == 0


async def test_pool_runs_the_batch_siblings_of_an_undecodable_row(
    backend: PostgresBackend,
) -> None:
    """Item 3, the reported case: batch_size 11, max_attempts 1, one poison row among ten
    good ones: the ten run and succeed, the poison row fails with a clear last_error."""
    ran: list[int] = []

    async def handler(payload: Any, ctx: JobContext) -> None:
        ran.append(ctx.job_id)
        await trio.lowlevel.checkpoint()

    cfg = trioqueue.WorkerConfig(
        handler=handler,
        queue=Q,
        batch_size=11,
        visibility_timeout=5,
        heartbeat_interval=1,
        poll_interval=0.2,
        shutdown_grace=0.5,
    )
    good, poison = await enqueue_around_poison(backend, HUGE_NUMBER, max_attempts=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        infos = await wait_until_finished(backend, [*good, poison])
        nursery.cancel_scope.cancel()
    *good_infos, poison_info = infos
    assert [(i.status, i.attempts) for i in good_infos] == [("succeeded", 1)] * 10
    assert sorted(ran) == good
    assert poison_info.status == "failed"
    assert poison_info.last_error is not None
    assert poison_info.last_error.startswith("payload cannot be decoded (ValueError: ")


# -- refused connections (item 4) -----------------------------------------------------------

#: Connections the test role may hold: its pool's LISTEN connection leaves three for the
#: claims, renewals, outcome writes and twelve transactional handlers.
ROLE_LIMIT = 4


def dsn_for_role(dsn: str, role: str) -> str:
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


@pytest.fixture
async def limited_dsn(backend: PostgresBackend, postgres_dsn: str) -> AsyncIterator[str]:
    """The DSN of a role of its own (made here, dropped after) allowed ``ROLE_LIMIT``
    connections, with the rights a worker needs on the test schema and its effects table."""
    role = f"tq_limited_{secrets.token_hex(6)}"
    schema = f'"{backend.schema}"'
    async with backend.acquire() as connection:
        await connection.execute(f"CREATE TABLE {schema}.effects (job_id bigint NOT NULL)")
        await connection.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT {ROLE_LIMIT}")
        await connection.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        await connection.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role}")
        await connection.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")
    try:
        yield dsn_for_role(postgres_dsn, role)
    finally:
        async with backend.acquire() as connection:
            await connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role
            )
            await connection.execute(f"DROP OWNED BY {role}")
            await connection.execute(f"DROP ROLE {role}")


async def test_refused_handler_connections_are_not_charged(
    backend: PostgresBackend, limited_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Item 4, the reported case: a role allowed four connections, a transactional pool
    wanting twelve for its handlers; with max_attempts = 1 every job must still succeed,
    on its first attempt, its effect committed once."""
    caplog.set_level(logging.INFO, logger="trioqueue.worker")
    effects = f'"{backend.schema}".effects'

    async def handler(payload: Any, ctx: JobContext) -> None:
        # Hold the connection a moment, as real work would, so the handlers contend.
        await ctx.connection.execute(
            f"INSERT INTO {effects} (job_id) SELECT $1::bigint FROM pg_sleep(0.02)", ctx.job_id
        )

    cfg = trioqueue.transactional_worker_config(
        12,
        handler,
        queue=Q,
        visibility_timeout=10,
        heartbeat_interval=2,
        poll_interval=0.2,
        shutdown_grace=0.5,
    )
    ids = await backend.enqueue_many(Q, [{"n": n} for n in range(60)], max_attempts=1)
    limited_backend = open_postgres(limited_dsn, schema=backend.schema, max_connections=16)
    async with limited_backend as limited, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, limited, cfg)
        infos = await wait_until_finished(backend, ids, within=60)
        nursery.cancel_scope.cancel()
    assert [(i.status, i.attempts) for i in infos] == [("succeeded", 1)] * 60
    async with backend.acquire() as connection:
        counts = await connection.fetch(f"SELECT job_id, count(*) AS n FROM {effects} GROUP BY 1")
    assert sorted((r["job_id"], r["n"]) for r in counts) == [(i, 1) for i in ids]
    refused = [r for r in caplog.records if "database connection refused" in r.getMessage()]
    assert refused, "the role's limit never refused a handler's connection"
