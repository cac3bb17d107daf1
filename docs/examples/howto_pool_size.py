"""How-to: size the PostgreSQL connection pool for the worker pools of one process."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import trio

import trioqueue


def connections_needed(configs: Iterable[trioqueue.WorkerConfig]) -> int:
    """Per pool: a claim, the current renewal and one abandoned one (the two-connection
    ceiling), the outcome writer, a scheduling pass, and one of slack; plus a connection
    per running handler in transactional mode. ``trioqueue worker`` sizes it so."""
    total = 0
    for config in configs:
        total += 6
        if config.transactional:
            total += config.concurrency * config.batch_size
    return total


async def send(payload: Any, ctx: trioqueue.JobContext) -> None:
    await trio.sleep(0.01)


async def book(payload: Any, ctx: trioqueue.JobContext) -> None:
    await ctx.connection.execute("SELECT 1")  # the handler's own connection


async def main(dsn: str, schema: str = "trioqueue") -> None:
    configs = [
        # 50 handlers at once, and still 6 connections: handlers use none of their own.
        trioqueue.WorkerConfig(
            handler=send,
            queue="emails",
            concurrency=10,
            batch_size=5,
            max_job_duration=60,
        ),
        # transactional: each of the 4 running handlers holds a connection.
        trioqueue.transactional_worker_config(
            4,
            book,
            queue="bookings",
            max_job_duration=60,
        ),
    ]
    size = connections_needed(configs)
    print("max_connections =", size)  # 6 + (6 + 4) = 16, plus one LISTEN per pool
    assert size == 16
    async with trioqueue.open_postgres(
        dsn,
        schema=schema,
        max_connections=size,
    ) as backend:
        await backend.migrate()
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_workers, backend, configs)
            ids = await backend.enqueue_many("emails", [{"n": n} for n in range(100)])
            ids += await backend.enqueue_many("bookings", [{"n": n} for n in range(8)])
            for job_id in ids:
                info = await backend.wait_for(job_id, timeout=60)
                assert info.status == "succeeded"
            nursery.cancel_scope.cancel()
        stats = backend.statistics()
        print("peak connections in use:", stats.peak_connections_in_use, "of", size)
        assert stats.peak_connections_in_use <= size


if __name__ == "__main__":
    trio.run(main, os.environ["TRIOQUEUE_DSN"])
