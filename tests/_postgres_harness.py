"""Helpers for tests that run whole worker pools on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from trioqueue import BackendError, JobInfo
from trioqueue._backends.postgres import PostgresBackend
from trioqueue._types import Ack


async def wait_until_finished(
    backend: PostgresBackend, ids: list[int], *, within: float = 20.0
) -> list[JobInfo]:
    """Snapshots of ``ids`` (in that order) once every one is succeeded or failed.

    One query per look, every 50 ms (the database says nothing when a job finishes). A look
    that meets a killed connection fails the one call that finds it dead, and is repeated.
    Fails (``trio.TooSlowError``) after ``within`` seconds.
    """
    with trio.fail_after(within):
        while True:
            try:
                jobs = {info.id: info for info in await backend.list_jobs(limit=10_000)}
            except BackendError:
                jobs = {}
            infos = [jobs[job_id] for job_id in ids if job_id in jobs]
            if len(infos) == len(ids) and all(i.status in ("succeeded", "failed") for i in infos):
                return infos
            await trio.sleep(0.05)


async def wait_for_lock_wait(backend: PostgresBackend, *, longer_than: float) -> None:
    """Return once a statement of ``backend`` has waited on a lock for ``longer_than``
    seconds, by the server's clock (one query per look, every 20 ms, at most 20 s)."""
    with trio.fail_after(20):
        while True:
            async with backend.acquire() as connection:
                waiting = await connection.fetchval(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE application_name = $1 AND wait_event_type = 'Lock' "
                    "  AND clock_timestamp() - xact_start > make_interval(secs => $2)",
                    f"trioqueue:{backend.schema}",
                    longer_than,
                )
            if waiting:
                return
            await trio.sleep(0.02)


async def read_until(stream: trio.abc.ReceiveStream, marker: bytes) -> None:
    """Read a child process's output until it has said ``marker``."""
    seen = b""
    while marker not in seen:
        chunk = await stream.receive_some()
        if not chunk:
            raise AssertionError(f"child ended before saying {marker!r}: {seen!r}")
        seen += chunk


def jobs_table(backend: PostgresBackend) -> str:
    """The backend's jobs table, schema-qualified, for tests' own SQL."""
    return f'"{backend.schema}".jobs'


def intercepted_acks(
    backend: PostgresBackend,
    victims: set[int],
    on_victim: Callable[[Any, Ack], Awaitable[bool]],
) -> Any:  # a replacement for backend.job_transaction
    """Transactions whose first ack of each victim job is made by ``on_victim(tx, item)``
    instead of ``tx.commit_with_ack(item)``; every other ack goes through as usual."""
    real = backend.job_transaction

    class Intercepting:
        def __init__(self, tx: Any) -> None:
            self._tx = tx

        @property
        def connection(self) -> Any:
            return self._tx.connection

        @property
        def commit_sent(self) -> bool:
            sent: bool = self._tx.commit_sent
            return sent

        async def commit_with_ack(self, item: Ack) -> bool:
            if item.job_id not in victims:
                done: bool = await self._tx.commit_with_ack(item)
                return done
            victims.discard(item.job_id)
            return await on_victim(self._tx, item)

    @asynccontextmanager
    async def job_transaction() -> AsyncIterator[Intercepting]:
        async with real() as tx:
            yield Intercepting(tx)

    return job_transaction
