"""Benchmark of the bulk controls over PostgreSQL (numbers, never asserts).

    python bench/bench_bulk.py --jobs 100000 --batch 100 500 5000

For each batch size: ``--jobs`` failed jobs (written by one INSERT), then one
``retry_matching`` of them all and one ``delete_matching`` of them all -> each call's
seconds, jobs per second and statements (one per batch), and meanwhile the latency of a
claim-and-ack on another queue every 20 ms (median and worst): what a worker pool feels
while an operator clicks "retry all". Batches keep each statement's row locks and run time
bounded, so the worst latency should stay near one batch's time, not the whole call's.

The server: ``--dsn``, else ``$TRIOQUEUE_DSN``, else the local one at 127.0.0.1:5432.
Each run uses a fresh schema ``trioqueue_bench_<hex>``, dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import trio

import trioqueue
from trioqueue._types import Ack

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
BULK_QUEUE = "bulk"
WORK_QUEUE = "work"


@asynccontextmanager
async def fresh_backend(dsn: str) -> AsyncIterator[trioqueue.PostgresBackend]:
    """A backend on a new, migrated schema, dropped at the end."""
    schema = f"trioqueue_bench_{secrets.token_hex(4)}"
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()
        try:
            yield backend
        finally:
            with trio.CancelScope(shield=True):
                async with backend.acquire() as connection:
                    await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _fill_failed(backend: trioqueue.PostgresBackend, jobs: int) -> None:
    async with backend.acquire() as connection:
        await connection.execute(
            f'INSERT INTO "{backend.schema}".jobs (queue, payload, status, attempts, '
            "max_attempts, claim_seq, finished_at, last_error) "
            "SELECT $1, jsonb_build_object('n', n), 'failed', 1, 1, 1, now(), 'boom' "
            "FROM generate_series(1, $2::int) AS n",
            BULK_QUEUE,
            jobs,
        )
        await connection.execute(f'ANALYZE "{backend.schema}".jobs')


async def _worker_latencies(
    backend: trioqueue.PostgresBackend, done: trio.Event, latencies: list[float]
) -> None:
    """A claim and an ack on another queue every 20 ms until ``done``, timed."""
    while not done.is_set():
        await backend.enqueue(WORK_QUEUE, 1)
        start = time.perf_counter()
        claimed = await backend.claim(WORK_QUEUE, limit=1, worker_id="bench", visibility_timeout=60)
        await backend.ack([Ack(c.job.id, c.job.claim_seq) for c in claimed])
        latencies.append(time.perf_counter() - start)
        await trio.sleep(0.02)


async def _timed(
    backend: trioqueue.PostgresBackend, op: str, call: Callable[[], Awaitable[int]]
) -> tuple[int, float, int, list[float]]:
    before = backend.statistics().calls[op]
    latencies: list[float] = []
    done = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_worker_latencies, backend, done, latencies)
        start = time.perf_counter()
        count = await call()
        seconds = time.perf_counter() - start
        done.set()
    return count, seconds, backend.statistics().calls[op] - before, latencies


async def run(dsn: str, jobs: int, batch: int) -> None:
    async with fresh_backend(dsn) as backend:
        await _fill_failed(backend, jobs)
        for op in ("retry_matching", "delete_matching"):
            if op == "retry_matching":
                call = lambda: backend.retry_matching(BULK_QUEUE, batch_size=batch)  # noqa: E731
            else:
                call = lambda: backend.delete_matching(BULK_QUEUE, batch_size=batch)  # noqa: E731
            count, seconds, statements, latencies = await _timed(backend, op, call)
            worst = max(latencies, default=0.0)
            median = statistics.median(latencies) if latencies else 0.0
            print(
                f"batch {batch:5d} {op:15s}: {count} jobs in {seconds:6.2f} s"
                f" ({count / seconds:8.0f} jobs/s, {statements} statements);"
                f" a worker's claim+ack meanwhile: median {median * 1e3:.1f} ms,"
                f" worst {worst * 1e3:.1f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("TRIOQUEUE_DSN", DEFAULT_DSN))
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[100, 500, 5000])
    args = parser.parse_args()
    for batch in args.batch:
        trio.run(run, args.dsn, args.jobs, batch)


if __name__ == "__main__":
    main()
