"""Transactional jobs while the pool's backends are killed at random (numbers, never asserts).

    python bench/soak_terminations.py                       # 3,000 jobs, a kill every 50 ms
    python bench/soak_terminations.py --jobs 1000 --every 0.02 --within 60

One pool (concurrency 8, transactional, V = 3 s, H = 1 s) works ``--jobs`` jobs, each of
which inserts its id into an effects table, while another connection terminates one of the
pool's backends (``pg_terminate_backend``) every ``--every`` seconds. It prints the jobs'
states and attempts, the jobs whose effect committed twice or not at all (both should be 0),
the kills made, and how often the log said a commit was in doubt ("may or may not"), in all
and with asyncpg's ``InternalClientError`` as its reason: a statement asyncpg refused to
send on a session the server had ended, which is never in doubt (docs/postgres.rst).
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import random
import secrets
from collections.abc import Sequence
from typing import Any

import trio

import trioqueue
from trioqueue._backends.postgres.embedded import find_postgres

Counts = collections.Counter[str]


class _Tally(logging.Handler):
    """Counts the log's in-doubt commits, by whether asyncpg's refusal was the reason."""

    def __init__(self, counts: Counts) -> None:
        super().__init__()
        self.counts = counts

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "may or may not" in message:
            self.counts["in doubt"] += 1
            if "InternalClientError" in message:
                self.counts["in doubt from InternalClientError"] += 1


async def _kill_one(killer: trioqueue.PostgresBackend, schema: str, counts: Counts) -> None:
    try:
        async with killer.acquire() as connection:
            counts["kills"] += await connection.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM "
                "pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid() "
                "ORDER BY random() LIMIT 1) AS one",
                f"trioqueue:{schema}",
            )
    except trioqueue.BackendError:
        counts["kills failed"] += 1


async def _until_finished(backend: trioqueue.PostgresBackend, within: float) -> None:
    with trio.move_on_after(within):
        while True:
            await trio.sleep(0.5)  # a bench's look, not a test's synchronisation
            try:
                infos = await backend.list_jobs(limit=10_000)
            except trioqueue.BackendError:
                continue
            if all(i.status in ("succeeded", "failed") for i in infos):
                return


async def soak(dsn: str, args: argparse.Namespace) -> None:
    schema = "bench_soak_" + secrets.token_hex(4)
    counts: Counts = collections.Counter()
    tally = _Tally(counts)
    logging.getLogger("trioqueue").addHandler(tally)
    effects = f'"{schema}".effects'

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        assert ctx.connection is not None
        await ctx.connection.execute(f"INSERT INTO {effects} VALUES ($1)", ctx.job_id)
        await trio.sleep(random.random() * 0.01)  # the job's own work

    config = trioqueue.transactional_worker_config(
        8,
        handler,
        queue="soak",
        visibility_timeout=3,
        heartbeat_interval=1,
        poll_interval=0.2,
        backoff=lambda attempt: 0.0,
    )
    async with (
        trioqueue.open_postgres(dsn, schema=schema, max_connections=20) as backend,
        trioqueue.open_postgres(dsn, schema=schema, max_connections=2) as killer,
    ):
        await backend.migrate()
        try:
            async with backend.acquire() as connection:
                await connection.execute(f"CREATE TABLE {effects} (job_id bigint)")
            await backend.enqueue_many("soak", [{}] * args.jobs, max_attempts=20)
            async with trio.open_nursery() as nursery:
                await nursery.start(trioqueue.run_worker_pool, backend, config)

                async def kill() -> None:
                    while True:
                        await trio.sleep(args.every)
                        await _kill_one(killer, schema, counts)

                nursery.start_soon(kill)
                await _until_finished(backend, args.within)
                nursery.cancel_scope.cancel()
            await _report(backend, effects, counts)
        finally:
            logging.getLogger("trioqueue").removeHandler(tally)
            async with backend.acquire() as connection:
                await connection.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def _report(backend: trioqueue.PostgresBackend, effects: str, counts: Counts) -> None:
    infos = await backend.list_jobs(limit=10_000)
    async with backend.acquire() as connection:
        rows = await connection.fetch(f"SELECT job_id, count(*) AS n FROM {effects} GROUP BY 1")
    committed = {row["job_id"]: row["n"] for row in rows}
    succeeded = {i.id for i in infos if i.status == "succeeded"}
    print("states:", dict(collections.Counter(i.status for i in infos)))
    print("attempts:", sorted(collections.Counter(i.attempts for i in infos).items()))
    print("effects committed twice:", sum(1 for n in committed.values() if n > 1))
    print("succeeded without their effect:", len(succeeded - committed.keys()))
    print("kills, in-doubt commits:", dict(counts))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", help="default: $TRIOQUEUE_DSN, the local server, or embedded")
    parser.add_argument("--jobs", type=int, default=3000, help="at most 10,000")
    parser.add_argument("--every", type=float, default=0.05, help="seconds between two kills")
    parser.add_argument("--within", type=float, default=90.0, help="give up after this long")
    args = parser.parse_args(argv)
    logging.getLogger("trioqueue").setLevel(logging.INFO)
    with find_postgres(args.dsn or os.environ.get("TRIOQUEUE_DSN")) as (dsn, where):
        print(f"server: {where}; {args.jobs:,} jobs, a kill every {args.every:g} s")
        trio.run(soak, dsn, args)


if __name__ == "__main__":
    main()
