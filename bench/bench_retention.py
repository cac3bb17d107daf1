"""Benchmarks of retention on PostgreSQL (numbers, never asserts; docs/protocol.rst §15).

    python bench/bench_retention.py ack --jobs 20000 --rounds 3
    python bench/bench_retention.py batch --finished 200000 --queues 20

ack:    what migration 0011's index on (queue, status, finished_at) costs the ack: a fresh
        schema with the index, then one without it (dropped after migrating), taking turns
        for ``--rounds`` rounds, each filled with ``--jobs`` ready jobs and drained by the
        backend's own claim and ack at batch 1 and 50 ->
        the ack statement's time per job (median of rounds), with and without, and the
        ratio. The ack is where a finished row enters the index; a claim writes none.
batch:  one prune pass over ``--finished`` finished jobs (succeeded, a year old, spread over
        ``--queues`` queues, written by SQL) with the default policy, by batches of 1000
        -> time per batch p50 and max, and jobs deleted per second; then the same with
        every queue kept for ever (a batch finds nothing: the time of an empty look).

Run it against a private database or a quiet server: other sessions' load counts too.
``TRIOQUEUE_BENCH_DSN`` names the server (default: the local test database).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from contextlib import AsyncExitStack

import trio

from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._types import Ack

DSN = os.environ.get("TRIOQUEUE_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/test")
Q = "bench"


async def _fresh(stack: AsyncExitStack, schema: str) -> PostgresBackend:
    """A backend on a new schema, migrated; the schema is dropped when ``stack`` closes."""
    backend = await stack.enter_async_context(open_postgres(DSN, schema=schema))
    await _drop_schema(backend)
    stack.push_async_callback(_drop_schema, backend)
    await backend.migrate()
    return backend


async def _drop_schema(backend: PostgresBackend) -> None:
    async with backend.acquire() as connection:
        await connection.execute(f'DROP SCHEMA IF EXISTS "{backend.schema}" CASCADE')


async def _ack_seconds_per_job(backend: PostgresBackend, jobs: int, batch: int) -> float:
    """Drain ``jobs`` ready jobs by claims of ``batch``; the acks' time per job."""
    for start in range(0, jobs, 1000):
        await backend.enqueue_many(Q, list(range(min(1000, jobs - start))))
    spent = 0.0
    while True:
        claimed = await backend.claim(Q, limit=batch, worker_id="w", visibility_timeout=60)
        if not claimed:
            break
        items = [Ack(c.job.id, c.job.claim_seq) for c in claimed]
        began = time.perf_counter()
        await backend.ack(items)
        spent += time.perf_counter() - began
    async with backend.acquire() as connection:
        await connection.execute(f'TRUNCATE "{backend.schema}".jobs')
    return spent / jobs


async def _one_round(schema: str, jobs: int, batch: int, *, index: bool) -> float:
    """One drain on a fresh schema (one backend open at a time: each has its own loop)."""
    async with AsyncExitStack() as stack:
        backend = await _fresh(stack, schema)
        if not index:
            async with backend.acquire() as connection:
                await connection.execute(f'DROP INDEX "{schema}".jobs_retention_idx')
        return await _ack_seconds_per_job(backend, jobs, batch)


async def bench_ack(jobs: int, rounds: int) -> None:
    for batch in (1, 50):
        seen: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(rounds):  # the two take turns, so drift on the server hits both
            for index in (True, False):
                seen[index].append(await _one_round("bench_ret_ack", jobs, batch, index=index))
        a = statistics.median(seen[True]) * 1e6
        b = statistics.median(seen[False]) * 1e6
        print(
            f"ack batch {batch:>2}: {a:7.1f} us/job with jobs_retention_idx, "
            f"{b:7.1f} without: x{a / b:.3f}"
        )


async def bench_batch(finished: int, queues: int) -> None:
    async with AsyncExitStack() as stack:
        backend = await _fresh(stack, "bench_ret_batch")
        async with backend.acquire() as connection:
            await connection.execute(
                'INSERT INTO "bench_ret_batch".jobs (queue, payload, status, max_attempts, '
                "attempts, claim_seq, finished_at) "
                "SELECT 'q' || (n % $2::integer), '{}'::jsonb, 'succeeded', 1, 1, 1, "
                "now() - interval '365 days' + n * interval '1 millisecond' "
                "FROM generate_series(1, $1::integer) AS n",
                finished,
                queues,
            )
            await connection.execute('VACUUM ANALYZE "bench_ret_batch".jobs')
        seq = await backend.claim_maintainer("bench", 3600)
        assert seq is not None
        for label, keep in (("kept for ever", None), ("past policy", 86_400.0)):
            await backend.set_retention(None, succeeded=keep, failed=keep)
            times, deleted = [], 0
            began = time.perf_counter()
            while True:
                t = time.perf_counter()
                batch = await backend.prune_retained(seq, limit=1000)
                times.append(time.perf_counter() - t)
                assert batch is not None
                deleted += batch.jobs_deleted
                if not batch.more:
                    break
            total = time.perf_counter() - began
            rate = f", {deleted / total:,.0f} jobs/s" if deleted else ""
            print(
                f"batch ({label}, {finished:,} finished in {queues} queues): "
                f"{len(times)} batches, p50 {statistics.median(times) * 1e3:.1f} ms, "
                f"max {max(times) * 1e3:.1f} ms, {deleted:,} deleted{rate}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["ack", "batch", "all"], nargs="?", default="all")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--finished", type=int, default=200_000)
    parser.add_argument("--queues", type=int, default=20)
    args = parser.parse_args()

    async def run() -> None:
        if args.what in ("ack", "all"):
            await bench_ack(args.jobs, args.rounds)
        if args.what in ("batch", "all"):
            await bench_batch(args.finished, args.queues)

    trio.run(run)


if __name__ == "__main__":
    main()
