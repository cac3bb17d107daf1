"""What moving a finished job out of ``jobs`` would cost its ack: a prototype, not a design.

    python bench/bench_history_move.py --jobs 20000 --batch 50

The design it prices (docs/performance.rst, "History and the hot path"): the fenced outcome
statement deletes the job's row from ``jobs`` and inserts it, finished, into
``jobs_history``, a table partitioned by ``finished_at`` (a partition per day), so that the
hot table holds only unfinished rows and retention is dropping old partitions.

On a fresh schema: ``--jobs`` jobs enqueued and claimed in batches of ``--batch`` (the
backend's claim), then acknowledged batch by batch, alternately by the ack's shape today
(one ``UPDATE ... FROM unnest(ids, claim_seqs)`` to 'succeeded', fenced by claim_seq) and by
the move (``WITH moved AS (DELETE ... RETURNING *) INSERT INTO jobs_history SELECT ...``,
the same fence). Printed per shape: the statement's time per batch (p50, p95) and per job,
and its WAL bytes per job (``EXPLAIN (ANALYZE, WAL)`` of a further 20 batches each: this
statement's own WAL, not the server's). The move's DELETE also runs the attempts trigger
of migration 0009 (a real design would keep the attempts with the history).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import trio
from bench_postgres import QUEUE, fill, fresh_backend, percentile

import trioqueue
from trioqueue._backends.postgres.embedded import fast_commits, find_postgres

UPDATE_ACK = """
UPDATE {s}.jobs AS j
SET status = 'succeeded', finished_at = now()
FROM unnest($1::bigint[], $2::bigint[]) AS i (id, claim_seq)
WHERE j.id = i.id AND j.claim_seq = i.claim_seq AND j.status = 'running'
"""

MOVE_ACK = """
WITH moved AS (
    DELETE FROM {s}.jobs AS j
    USING unnest($1::bigint[], $2::bigint[]) AS i (id, claim_seq)
    WHERE j.id = i.id AND j.claim_seq = i.claim_seq AND j.status = 'running'
    RETURNING j.*
)
INSERT INTO {s}.jobs_history ({columns})
SELECT {values} FROM moved AS m
"""

HISTORY = """
CREATE TABLE {s}.jobs_history (LIKE {s}.jobs INCLUDING DEFAULTS)
    PARTITION BY RANGE (finished_at);
CREATE INDEX ON {s}.jobs_history (id);
CREATE INDEX ON {s}.jobs_history (queue, finished_at);
"""

PARTITION = """
CREATE TABLE {s}.{name} PARTITION OF {s}.jobs_history
    FOR VALUES FROM ('{lo}') TO ('{hi}')
"""


async def make_history(connection: Any, schema: str) -> str:
    """The partitioned history table (a partition for yesterday, today, tomorrow); answer
    the move's statement, its columns those of ``jobs`` in order."""
    s = f'"{schema}"'
    await connection.execute(HISTORY.format(s=s))
    for day in (-1, 0, 1):
        lo = await connection.fetchval(
            "SELECT (date_trunc('day', now()) + make_interval(days => $1))::text", day
        )
        hi = await connection.fetchval(
            "SELECT (date_trunc('day', now()) + make_interval(days => $1 + 1))::text", day
        )
        await connection.execute(
            PARTITION.format(s=s, name=f"jobs_history_d{day + 1}", lo=lo, hi=hi)
        )
    names = [
        r["column_name"]
        for r in await connection.fetch(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = $1 AND table_name = 'jobs' ORDER BY ordinal_position",
            schema,
        )
    ]
    overrides = {"status": "'succeeded'", "finished_at": "now()"}
    values = ", ".join(overrides.get(n, f'm."{n}"') for n in names)
    columns = ", ".join(f'"{n}"' for n in names)
    return MOVE_ACK.format(s=s, columns=columns, values=values)


async def claim_all(
    backend: trioqueue.PostgresBackend, batch: int
) -> list[tuple[list[int], list[int]]]:
    batches = []
    while claimed := await backend.claim(
        QUEUE, limit=batch, worker_id="bench", visibility_timeout=3600
    ):
        batches.append(([c.job.id for c in claimed], [c.job.claim_seq for c in claimed]))
    return batches


async def wal_bytes(connection: Any, sql: str, ids: list[int], seqs: list[int]) -> int:
    plan = await connection.fetchval(f"EXPLAIN (ANALYZE, WAL, FORMAT JSON) {sql}", ids, seqs)
    return int(json.loads(plan)[0]["Plan"]["WAL Bytes"])


async def run(dsn: str, jobs: int, batch: int) -> dict[str, dict[str, float]]:
    async with fresh_backend(dsn, max_connections=2) as backend:
        s = f'"{backend.schema}"'
        async with backend.acquire() as connection:
            move = await make_history(connection, backend.schema)
        update = UPDATE_ACK.format(s=s)
        await fill(backend, jobs)
        batches = await claim_all(backend, batch)
        shapes = {"update (today)": update, "move to history": move}
        times: dict[str, list[float]] = {name: [] for name in shapes}
        wal: dict[str, list[int]] = {name: [] for name in shapes}
        explained = 20
        async with backend.acquire() as connection:
            for n, (ids, seqs) in enumerate(batches):
                name = list(shapes)[n % 2]
                if n < 2 * explained:
                    wal[name].append(
                        await wal_bytes(connection, shapes[name], ids, seqs) // len(ids)
                    )
                    continue
                began = time.perf_counter()
                await connection.execute(shapes[name], ids, seqs)
                times[name].append(time.perf_counter() - began)
            moved = await connection.fetchval(f"SELECT count(*) FROM {s}.jobs_history")
    print(f"{moved:,} jobs moved to history")
    return {
        name: {
            "ms_p50": percentile(times[name], 0.5) * 1000,
            "ms_p95": percentile(times[name], 0.95) * 1000,
            "us_per_job": statistics.median(times[name]) / batch * 1e6,
            "wal_bytes_per_job": statistics.median(wal[name]),
        }
        for name in shapes
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", help="default: $TRIOQUEUE_DSN, the local server, or embedded")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    with find_postgres(args.dsn or os.environ.get("TRIOQUEUE_DSN")) as (server, where):
        print(f"server: {where}; load average {os.getloadavg()[0]:.2f}")
        result = trio.run(run, fast_commits(server), args.jobs, args.batch)
    for name, numbers in result.items():
        print(
            f"{name:<16} batch of {args.batch}: {numbers['ms_p50']:.2f} ms p50, "
            f"{numbers['ms_p95']:.2f} ms p95, {numbers['us_per_job']:.1f} µs/job, "
            f"WAL {numbers['wal_bytes_per_job']:,.0f} B/job"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
