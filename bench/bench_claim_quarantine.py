"""What the claim's quarantine paths cost the claim statement (numbers, never asserts).

    python bench/bench_claim_quarantine.py                      # 5,000 queued, 2,000 leased
    python bench/bench_claim_quarantine.py --queued 50000 --leased 10000 --samples 500

The claim statement (queries.sql, ``claim``) on a schema of its own, taking 10 of
``--queued`` waiting rows while ``--leased`` rows of the queue are under a live lease, in
three forms, taken in turn ``--samples`` times: quarantine off (``quarantine_after`` NULL:
the statement's quarantine CTEs are cut by one-time filters), on and not alone (the pool has
work in flight: the statement also looks for a quarantined row, to answer
``alone_waiting``), and on and alone (it looks for one to take alone first). Each run is an
``EXPLAIN (ANALYZE)`` in a transaction rolled back, so every sample claims the same rows:
the database's own planning and execution times, p50 and p95, with no client in them
(docs/protocol.rst §13).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
from collections.abc import Sequence

import asyncpg
import trio
import trio_asyncio

from trioqueue._backends.postgres.embedded import find_postgres
from trioqueue._backends.postgres.sql import MIGRATIONS, QUERIES, render

FORMS = {
    "quarantine off": (None, False),
    "on, not alone": (2, False),
    "on, alone": (2, True),
}


async def measure(dsn: str, args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    schema = "bench_quarantine_" + secrets.token_hex(4)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(render(QUERIES["migrate_prepare"], schema))
        for migration in MIGRATIONS:
            await connection.execute(render(migration.sql, schema))
        jobs = f'"{schema}".jobs'
        await connection.execute(
            f"INSERT INTO {jobs} (queue, payload, max_attempts) "
            "SELECT 'q', '1', 10 FROM generate_series(1, $1::integer)",
            args.queued,
        )
        await connection.execute(
            f"INSERT INTO {jobs} (queue, payload, status, max_attempts, not_visible_until, "
            "lease_floor, attempts, claim_seq) SELECT 'q', '1', 'running', 10, "
            "now() + interval '1 hour', now() + interval '1 hour', 1, 1 "
            "FROM generate_series(1, $1::integer)",
            args.leased,
        )
        await connection.execute(f"ANALYZE {jobs}")
        sql = "EXPLAIN (ANALYZE, FORMAT JSON) " + render(QUERIES["claim"], schema)
        times: dict[str, list[tuple[float, float]]] = {form: [] for form in FORMS}
        for _ in range(args.samples):
            for form, (quarantine_after, alone) in FORMS.items():
                transaction = connection.transaction()
                await transaction.start()
                try:
                    text = await connection.fetchval(
                        sql, "q", 10, "w", 60.0, False, quarantine_after, alone
                    )
                finally:
                    await transaction.rollback()
                [plan] = json.loads(text)
                times[form].append((plan["Planning Time"], plan["Execution Time"]))
        return times
    finally:
        await connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await connection.close()


def report(times: dict[str, list[tuple[float, float]]]) -> None:
    for form, samples in times.items():
        planning = sorted(p for p, _ in samples)
        execution = sorted(e for _, e in samples)
        print(
            f"  {form:15s} planning p50 {statistics.median(planning):.3f} ms, "
            f"execution p50 {statistics.median(execution):.3f} ms "
            f"p95 {execution[int(len(execution) * 0.95) - 1]:.3f} ms"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", help="default: $TRIOQUEUE_DSN, the local server, or embedded")
    parser.add_argument("--queued", type=int, default=5000)
    parser.add_argument("--leased", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args(argv)
    with find_postgres(args.dsn or os.environ.get("TRIOQUEUE_DSN")) as (dsn, where):
        print(f"server: {where}; load average {os.getloadavg()[0]:.2f}")
        print(f"claim of 10 rows: {args.queued:,} queued, {args.leased:,} leased")

        async def run() -> dict[str, list[tuple[float, float]]]:
            async with trio_asyncio.open_loop():
                times: dict[str, list[tuple[float, float]]]
                times = await trio_asyncio.aio_as_trio(measure)(dsn, args)
                return times

        report(trio.run(run))


if __name__ == "__main__":
    main()
