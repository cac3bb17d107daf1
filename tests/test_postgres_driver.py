"""The driver's connection pool (``trioqueue/_postgres/pool.py``) on a real server.

What the pool promises: the driver's own statements cost no extra round trip (no session
reset after a claim, a renewal or an ack); connections lent to callers come back clean (their
session settings and open transactions do not leak to the next user); callers beyond the
pool's size wait their turn; a connection the server closed is replaced (test_postgres_backend.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from trioqueue._postgres import PostgresBackend, open_postgres
from trioqueue._postgres.sql import QUERIES, render

pytestmark = pytest.mark.postgres

Q = "drv"

LAST_QUERIES = (
    "SELECT query FROM pg_stat_activity "
    "WHERE application_name = $1 AND pid <> pg_backend_pid() AND state = 'idle'"
)


@pytest.fixture
async def backend(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[PostgresBackend]:
    async with open_postgres(postgres_dsn, schema=postgres_schema, max_connections=2) as backend:
        await backend.migrate()
        yield backend


async def test_driver_statements_leave_no_session_reset_behind(backend: PostgresBackend) -> None:
    """A claim's connection goes back to the pool as it is: its last statement is the claim."""
    await backend.enqueue(Q, "x")
    async with backend.acquire() as watcher:  # holds one connection: the claim gets the other
        [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=60)
        rows = await watcher.fetch(LAST_QUERIES, f"trioqueue:{backend.schema}")
    [query] = [row["query"] for row in rows]
    assert query[:200] == render(QUERIES["claim"], backend.schema)[:200]  # (cut at 1 KiB)
    assert "RESET ALL" not in query
    assert claimed.job.payload == "x"


async def test_lent_connection_is_reset_when_it_comes_back(backend: PostgresBackend) -> None:
    async with backend.acquire() as watcher:  # so that the other connection is the lent one
        async with backend.acquire() as lent:
            await lent.execute("SET statement_timeout = '4321ms'")
            await lent.execute("BEGIN")  # left open on purpose
            await lent.execute("SELECT 1")
        [query] = [
            row["query"] for row in await watcher.fetch(LAST_QUERIES, f"trioqueue:{backend.schema}")
        ]
        assert "RESET ALL" in query
        async with backend.acquire() as again:  # the only idle connection: the lent one
            assert await again.fetchval("SHOW statement_timeout") == "0"
            assert not again.is_in_transaction()


async def test_callers_beyond_the_pool_size_wait_their_turn(backend: PostgresBackend) -> None:
    """Two connections, eight concurrent operations, one of them held a while: all succeed."""
    released = trio.Event()

    async def hold_one() -> None:
        async with backend.acquire() as connection:
            await connection.execute("SELECT 1")
            await released.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold_one)
        async with trio.open_nursery() as producers:
            for n in range(8):
                producers.start_soon(backend.enqueue, Q, n)
        assert backend.statistics()["peak_connections_in_use"] == 2
        released.set()
    assert (await backend.counts())[Q] == {"ready": 8}
    assert backend.statistics()["connections_in_use"] == 0


async def test_a_caller_cancelled_while_waiting_for_a_connection_takes_no_place(
    backend: PostgresBackend,
) -> None:
    async with backend.acquire(), backend.acquire():  # both connections out
        with trio.move_on_after(0.2) as waited:
            await backend.enqueue(Q, "never")
        assert waited.cancelled_caught
        assert backend.statistics()["connections_in_use"] == 2
    # The places are all free again: two callers at once get one each.
    async with trio.open_nursery() as nursery:
        for n in range(2):
            nursery.start_soon(backend.enqueue, Q, n)
    assert (await backend.counts())[Q] == {"ready": 2}
    assert backend.statistics()["connections_in_use"] == 0
