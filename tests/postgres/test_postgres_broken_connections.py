"""Connections the server ended (``pg_terminate_backend``) on PostgreSQL.

When the server terminates a session it sends a FATAL error and then closes the socket.
asyncpg reads the error while its protocol is idle and moves to an error state, and it
notices the closed socket only a moment later (longer for a session inside a
transaction, whose backend rolls back before it exits). A statement started in between
fails with ``InternalClientError: cannot switch to state 12`` (15 for a simple query such
as ``COMMIT``, 11 for a prepare), and once the close is seen, with ``InterfaceError:
connection is closed``. Either way asyncpg refused to send the statement: it never
reached the server (``sqlstate.never_sent``). Such a connection is broken: the driver
terminates it and never hands it out again, and a ``COMMIT`` refused so is not in doubt:
nothing was committed (docs/postgres.rst, "Transactional mode").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
import trio

import trioqueue
from trioqueue import JobContext
from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._backends.postgres.arguments import ints, progress_texts, result_texts
from trioqueue._backends.postgres.sqlstate import backend_error, connection_refused, never_sent
from trioqueue._backends.postgres.transactions import PgJobTransaction
from trioqueue._errors import BackendError
from trioqueue._types import Ack

from .._pool_harness import Recorder
from .._postgres_harness import intercepted_acks

pytestmark = pytest.mark.postgres

Q = "broken"


@pytest.fixture
async def backend(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[PostgresBackend]:
    async with open_postgres(postgres_dsn, schema=postgres_schema, max_connections=8) as backend:
        await backend.migrate()
        async with backend.acquire() as connection:
            await connection.execute(f'CREATE TABLE "{backend.schema}".effects (job_id bigint)')
        yield backend


async def _terminate(dsn: str, pid: int) -> None:
    """End session ``pid`` from a connection of its own (outside the backend's pool), and
    wait until the server has seen it go (one look every 10 ms): its FATAL error is sent
    by then, and the session's own loop has had the time to read it."""
    async with (
        trioqueue.open_postgres(dsn, max_connections=1) as other,
        other.acquire() as connection,
    ):
        assert await connection.fetchval("SELECT pg_terminate_backend($1)", pid)
        with trio.fail_after(10):
            while await connection.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid
            ):
                await trio.sleep(0.01)


async def test_a_statement_on_a_session_the_server_ended_is_never_sent_and_the_connection_is_dropped(
    backend: PostgresBackend, postgres_dsn: str
) -> None:
    """Inside a transaction, the session is terminated; the next statement fails with an
    error that says it was never sent, and the connection never comes back from the pool."""
    async with backend.acquire() as connection:
        await connection.execute("BEGIN")
        pid = await connection.fetchval("SELECT pg_backend_pid()")
        await _terminate(postgres_dsn, pid)
        with pytest.raises(BackendError) as raised:
            await connection.fetchval("SELECT $1::int", 1)
    cause = raised.value.__cause__
    assert isinstance(cause, asyncpg.InternalClientError | asyncpg.InterfaceError), cause
    assert not isinstance(cause, asyncpg.ConnectionDoesNotExistError)
    assert never_sent(raised.value)
    async with backend.acquire() as connection:
        assert await connection.fetchval("SELECT pg_backend_pid()") != pid
    assert backend.statistics()["connections_in_use"] == 0


def test_never_sent_reads_asyncpg_refusals_only() -> None:
    """What asyncpg raises before sending anything, and nothing that says the statement
    was out: a connection lost mid-statement, a server error, a timeout."""
    refusals = [
        asyncpg.InternalClientError(
            "cannot switch to state 12; another operation (2) is in progress"
        ),
        asyncpg.InternalClientError('cannot switch to state 15; protocol is in the "failed" state'),
        asyncpg.InternalClientError("not connected"),
        asyncpg.InterfaceError("connection is closed"),
        asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
    ]
    sent = [
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.InternalClientError("unknown error in protocol implementation"),
        asyncpg.exceptions.AdminShutdownError(
            "terminating connection due to administrator command"
        ),
        asyncpg.exceptions.SerializationError("could not serialize access"),
        TimeoutError(),
    ]
    for exc in refusals:
        wrapped = backend_error(exc)
        wrapped.__cause__ = exc
        assert never_sent(exc) and never_sent(wrapped), exc
        assert connection_refused(wrapped), exc  # a BEGIN refused so: no connection
        assert wrapped.transient
    for exc in sent:
        assert not never_sent(exc), exc


class _EndedAfterTheAck:
    """An asyncpg connection whose session the server ends right after the ack statement
    (before COMMIT): the ack ran, the COMMIT meets a session that is gone."""

    def __init__(self, connection: Any, dsn: str) -> None:
        self._connection = connection
        self._dsn = dsn

    def is_in_transaction(self) -> bool:
        return bool(self._connection.is_in_transaction())

    async def fetch(self, query: str, *args: Any) -> Any:
        rows = await self._connection.fetch(query, *args)
        other = await asyncpg.connect(self._dsn)
        try:
            await other.execute(
                "SELECT pg_terminate_backend($1)", self._connection.get_server_pid()
            )
        finally:
            await other.close()
        # Let the FATAL error arrive (the socket's close may come later): COMMIT is refused.
        for _ in range(100):
            await asyncio.sleep(0.005)
            if self._connection.is_closed():
                break
        return rows

    async def execute(self, query: str) -> Any:
        return await self._connection.execute(query)


def _ended_after_the_ack(backend: PostgresBackend, dsn: str, victims: set[int]) -> Any:
    """``backend.job_transaction`` whose commit of a victim job meets an ended session."""

    async def ending(tx: PgJobTransaction, item: Ack) -> bool:
        async def commit(connection: Any) -> bool:
            proxy = _EndedAfterTheAck(connection, dsn)
            items = (item,)
            arrays = ints(i.job_id for i in items), ints(i.claim_seq for i in items)
            return await tx._aio_commit_with_ack(
                proxy, *arrays, progress_texts(items), result_texts(items)
            )

        return await tx.connection.run("ack", commit)

    return intercepted_acks(backend, victims, ending)


async def test_a_commit_refused_by_an_ended_session_is_not_in_doubt(
    backend: PostgresBackend, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session ends between the ack and COMMIT, so asyncpg refuses to send COMMIT:
    nothing was committed, and the worker knows it. The attempt is recorded at once as a
    failure and retried (no wait for the lease, no "may or may not"), and the retry commits
    the job's one row."""
    recorder = Recorder()

    async def handler(payload: Any, ctx: JobContext) -> None:
        table = f'"{backend.schema}".effects'
        await ctx.connection.execute(f"INSERT INTO {table} VALUES ($1)", ctx.job_id)

    job_id = await backend.enqueue(Q, {}, max_attempts=3)
    monkeypatch.setattr(
        backend, "job_transaction", _ended_after_the_ack(backend, postgres_dsn, {job_id})
    )
    cfg = trioqueue.transactional_worker_config(
        1,
        handler,
        queue=Q,
        visibility_timeout=30,  # an attempt taken for in doubt would wait this long
        heartbeat_interval=5,
        poll_interval=0.1,
        backoff=lambda attempt: 0.0,
        **recorder.hooks(),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        with trio.fail_after(20):  # an attempt taken for in doubt is retried after 30 s
            await recorder.wait_for("succeeded", job_id)
        nursery.cancel_scope.cancel()
    info = await backend.get_job(job_id)
    assert rec_kinds(recorder, job_id) == ["retry", "succeeded"]
    [retry] = recorder.of("retry", job_id)
    assert retry.attempt == 1
    assert (info.status, info.attempts) == ("succeeded", 2)
    async with backend.acquire() as connection:
        rows = await connection.fetch(f'SELECT job_id FROM "{backend.schema}".effects')
    assert [row["job_id"] for row in rows] == [job_id]


def rec_kinds(recorder: Recorder, job_id: int) -> list[str]:
    return [k for k in recorder.kinds(job_id) if k in ("retry", "succeeded", "unavailable")]
