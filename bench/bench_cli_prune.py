"""Benchmark of ``trioqueue prune`` over PostgreSQL (numbers, never asserts).

    python bench/bench_cli_prune.py --jobs 20000 --batch 1000 5000 10000

For each batch size: ``--jobs`` succeeded jobs of one queue, finished eight days ago (past
the default policy's seven), then one ``trioqueue prune --dry-run`` (its seconds: one
counting read) and one ``trioqueue prune --batch-size N`` run as an operator runs it
(through the command line's ``main``, its lease and its batches) -> its seconds and jobs
per second. The jobs are written through the backend (enqueue, claim, ack, a thousand
at a time), their ``finished_at`` moved back by one UPDATE, and the table vacuumed and
analysed before each timed run, so each batch size starts from the same table.

The server: ``--dsn``, else ``$TRIOQUEUE_DSN``, else the local one at 127.0.0.1:5432.
Each run uses a fresh schema ``trioqueue_bench_<hex>``, dropped afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import secrets
import time

import trio

import trioqueue
from trioqueue._types import Ack
from trioqueue.cli import main

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
QUEUE = "mail"


async def fill(dsn: str, schema: str, jobs: int) -> None:
    """A migrated ``schema`` holding ``jobs`` jobs that succeeded eight days ago."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=2) as backend:
        await backend.migrate()
        for start in range(0, jobs, 1000):
            await backend.enqueue_many(QUEUE, list(range(min(1000, jobs - start))))
            got = await backend.claim(QUEUE, limit=1000, worker_id="bench", visibility_timeout=60)
            await backend.ack([Ack(c.job.id, c.job.claim_seq) for c in got])
        async with backend.acquire() as conn:
            await conn.execute(
                f"UPDATE \"{schema}\".jobs SET finished_at = now() - interval '8 days'"
            )
            await conn.execute(f'VACUUM ANALYZE "{schema}".jobs')


async def drop(dsn: str, schema: str) -> None:
    async with (
        trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend,
        backend.acquire() as conn,
    ):
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def timed_prune(dsn: str, schema: str, *options: str) -> tuple[float, str]:
    """One ``trioqueue prune`` with ``options``: its seconds, and its summary line."""
    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = main(["--dsn", dsn, "--schema", schema, "prune", *options])
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"trioqueue prune exited {code}")
    lines = out.getvalue().splitlines()
    summary = next(line for line in lines if line.startswith(("pruned", "would prune")))
    return seconds, summary


def run(dsn: str, jobs: int, batches: list[int]) -> None:
    for batch in batches:
        schema = f"trioqueue_bench_{secrets.token_hex(4)}"
        try:
            trio.run(fill, dsn, schema, jobs)
            counted, preview = timed_prune(dsn, schema, "--dry-run")
            seconds, summary = timed_prune(dsn, schema, "--batch-size", str(batch))
        finally:
            trio.run(drop, dsn, schema)
        print(f"dry run     : {counted * 1000:6.0f} ms ({preview})")
        print(f"batch {batch:>6}: {seconds:6.2f} s, {jobs / seconds:8.0f} jobs/s ({summary})")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("TRIOQUEUE_DSN", DEFAULT_DSN))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[1000, 5000, 10_000])
    return parser.parse_args()


if __name__ == "__main__":
    args = parse()
    run(args.dsn, args.jobs, args.batch)
