"""Dependencies on PostgreSQL (docs/protocol.rst §21, I23 and I24): the races the
conformance suite cannot stage through the Backend protocol. A dependency finishing while
its dependent is being enqueued, in either order of their row locks, never strands the
dependent; nor does a retry of the dependent racing its dependency's ack."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from trioqueue._backends.postgres import PostgresBackend
from trioqueue._backends.postgres.driver import PgConnection
from trioqueue._backends.postgres.sql import QUERIES, render
from trioqueue._types import Ack, Claimed

from .._postgres_harness import jobs_table

pytestmark = pytest.mark.postgres

Q = "pg-deps"
AFTER = "pg-deps-after"
V = 60.0


async def claim(backend: PostgresBackend, queue: str = Q, limit: int = 10) -> list[Claimed]:
    return await backend.claim(queue, limit=limit, worker_id="w", visibility_timeout=V)


async def waiting(backend: PostgresBackend, job_id: int) -> Any:
    async with backend.acquire() as connection:
        return await connection.fetchrow(
            f"SELECT status, waiting, not_visible_until <= now() AS visible "
            f"FROM {jobs_table(backend)} WHERE id = $1",
            job_id,
        )


async def blocked_on_a_lock(backend: PostgresBackend) -> None:
    """Return once some statement of this schema's backend waits for a row lock (what the
    test set up to happen), polling pg_stat_activity: the condition, not a fixed sleep."""
    with trio.fail_after(10):
        while True:
            async with backend.acquire() as connection:
                found = await connection.fetchval(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND application_name = $1",
                    f"trioqueue:{backend.schema}",
                )
            if found:
                return
            await trio.sleep(0.01)


async def hold_in_transaction(
    backend: PostgresBackend,
    write: Callable[[PgConnection], Awaitable[object]],
    written: trio.Event,
    commit: trio.Event,
) -> None:
    """Run ``write`` in a transaction and commit it only once ``commit`` is set."""
    async with backend.acquire() as connection, connection.transaction():
        await write(connection)
        written.set()
        await commit.wait()


async def race(
    backend: PostgresBackend,
    first: Callable[[PgConnection], Awaitable[object]],
    second: Callable[[], Awaitable[object]],
) -> None:
    """``first`` writes and holds its locks; ``second`` starts, and must wait for them;
    then ``first`` commits and ``second`` goes on."""
    written, commit = trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold_in_transaction, backend, first, written, commit)
        await written.wait()
        done = trio.Event()

        async def run_second() -> None:
            await second()
            done.set()

        nursery.start_soon(run_second)
        await blocked_on_a_lock(backend)
        assert not done.is_set()  # it waits for first's lock
        commit.set()


async def test_an_ack_waiting_for_an_enqueues_lock_sees_its_edge(
    backend: PostgresBackend,
) -> None:
    """The enqueue locks the dependency first, the ack waits for it: once the enqueue
    commits, the ack's trigger reads the edge (a snapshot after the lock) and wakes the
    dependent; a CTE of the ack would have missed it."""
    dependency = await backend.enqueue(Q, "dep")
    [claimed] = await claim(backend)
    dependents: list[int] = []
    acked: list[list[bool]] = []

    async def enqueue(connection: PgConnection) -> None:
        dependents.append(
            await backend.enqueue(AFTER, "after", depends_on=[dependency], connection=connection)
        )

    async def ack() -> None:
        acked.append(await backend.ack([Ack(claimed.job.id, claimed.job.claim_seq)]))

    await race(backend, enqueue, ack)
    assert acked == [[True]]
    row = await waiting(backend, dependents[0])
    assert (row["status"], row["waiting"], row["visible"]) == ("queued", 0, True)
    assert [c.job.id for c in await claim(backend, AFTER)] == dependents


async def test_an_enqueue_waiting_for_an_acks_lock_reads_the_success(
    backend: PostgresBackend,
) -> None:
    """The ack locks first (inside a transaction, its trigger finds no edge yet); the
    enqueue waits for that lock, then reads the dependency's new version: met."""
    dependency = await backend.enqueue(Q, "dep")
    [claimed] = await claim(backend)
    ack_sql = render(QUERIES["ack"], backend.schema)
    dependents: list[int] = []

    async def ack(connection: PgConnection) -> None:
        args = ([str(dependency)], [str(claimed.job.claim_seq)], None, None, None, None, None)
        assert len(await connection.fetch(ack_sql, *args)) == 1

    async def enqueue() -> None:
        dependents.append(await backend.enqueue(AFTER, "after", depends_on=[dependency]))

    await race(backend, ack, enqueue)
    row = await waiting(backend, dependents[0])
    assert (row["status"], row["waiting"], row["visible"]) == ("queued", 0, True)


async def test_an_ack_waiting_for_a_retried_dependents_lock_wakes_it(
    backend: PostgresBackend,
) -> None:
    """A retry of a dependent locks its dependencies (FOR SHARE) while it counts them; the
    dependency's ack waits, and its trigger then sees the dependent waiting again."""
    dependency = await backend.enqueue(Q, "dep")
    dependent = await backend.enqueue(AFTER, "after", depends_on=[dependency])
    assert await backend.cancel(dependent)  # failed at once: it was waiting
    [claimed] = await claim(backend)
    retry_sql = render(QUERIES["retry"], backend.schema)

    async def retry(connection: PgConnection) -> None:
        assert await connection.fetchval(retry_sql, dependent) == 1

    async def ack() -> None:
        assert await backend.ack([Ack(claimed.job.id, claimed.job.claim_seq)]) == [True]

    await race(backend, retry, ack)
    row = await waiting(backend, dependent)
    assert (row["status"], row["waiting"], row["visible"]) == ("queued", 0, True)


async def test_acks_and_enqueues_at_the_same_moment_never_strand_a_dependent(
    backend: PostgresBackend,
) -> None:
    """Many rounds of a dependency's ack and its dependent's enqueue started together, in
    whatever order the server runs them: every dependent ends claimable (I23, I24)."""
    rounds = 60
    dependencies = await backend.enqueue_many(Q, list(range(rounds)))
    claimed = {c.job.id: c for c in await claim(backend, limit=rounds)}
    dependents: list[int] = []

    async def one_round(job_id: int) -> None:
        async def ack() -> None:
            c = claimed[job_id]
            assert await backend.ack([Ack(c.job.id, c.job.claim_seq)]) == [True]

        async def enqueue() -> None:
            dependents.append(await backend.enqueue(AFTER, job_id, depends_on=[job_id]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ack)
            nursery.start_soon(enqueue)

    async with trio.open_nursery() as nursery:
        for job_id in dependencies:
            nursery.start_soon(one_round, job_id)
    async with backend.acquire() as connection:
        stranded = await connection.fetchval(
            f"SELECT count(*) FROM {jobs_table(backend)} "
            "WHERE queue = $1 AND (waiting > 0 OR not_visible_until > now())",
            AFTER,
        )
    assert (len(dependents), stranded) == (rounds, 0)
    assert len(await claim(backend, AFTER, limit=rounds)) == rounds
