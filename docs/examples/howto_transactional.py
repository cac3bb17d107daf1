"""How-to: enqueue in your transaction; commit a handler's writes with its job."""

from __future__ import annotations

import os
from typing import Any

import trio

import trioqueue


async def place_order(
    backend: trioqueue.PostgresBackend,
    table: str,
    order: int,
) -> int:
    """Your transaction: the order and its job commit together, or neither does."""
    async with backend.acquire() as conn, conn.transaction():
        await conn.execute(f"INSERT INTO {table} (order_id) VALUES ($1)", order)
        return await backend.enqueue("invoices", {"order": order}, connection=conn)


class RecordInvoice:
    """A transactional handler: its writes commit with the job's success, exactly once.

    An object whose ``__call__`` is ``async def`` is an async handler; this one carries
    the backend (to enqueue follow-up jobs) and the table it writes.
    """

    def __init__(self, backend: trioqueue.PostgresBackend, table: str) -> None:
        self.backend = backend
        self.table = table

    async def __call__(self, payload: Any, ctx: trioqueue.JobContext) -> None:
        order = payload["order"]
        await ctx.connection.execute(
            f"UPDATE {self.table} SET invoiced = invoiced + 1 WHERE order_id = $1",
            order,
        )
        if ctx.attempt == 1:
            raise RuntimeError("mail server down")  # rolls the UPDATE back; retried
        # A follow-up job that exists only if this attempt commits.
        follow_up = {"order": order}
        await self.backend.enqueue("emails", follow_up, connection=ctx.connection)


async def main(dsn: str, schema: str = "trioqueue") -> None:
    table = f'"{schema}".orders'  # the example keeps its table in trioqueue's schema
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()
        async with backend.acquire() as conn:
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table} "
                "(order_id int PRIMARY KEY, invoiced int NOT NULL DEFAULT 0)"
            )
        job_id = await place_order(backend, table, 1)

        config = trioqueue.transactional_worker_config(
            4,  # concurrency: up to 4 handlers, each holding a connection
            RecordInvoice(backend, table),
            queue="invoices",
            max_job_duration=60,
            backoff=trioqueue.ExponentialBackoff(initial=0.2),
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            info = await backend.wait_for(job_id, timeout=60)
            nursery.cancel_scope.cancel()

        async with backend.acquire() as conn:
            invoiced = await conn.fetchval(f"SELECT invoiced FROM {table}")
        emails = await backend.list_jobs(queue="emails")
        print(f"{info.status} after {info.attempts} attempts; invoiced {invoiced} time")
        assert info.status == "succeeded"
        assert info.attempts == 2
        assert invoiced == 1
        assert len(emails) == 1


if __name__ == "__main__":
    trio.run(main, os.environ["TRIOQUEUE_DSN"])
