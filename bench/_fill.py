"""Fill a migrated schema with finished jobs, as fast as PostgreSQL allows.

    python bench/_fill.py --schema trioqueue_hist --rows 10000000          # into a schema
    python bench/_fill.py --schema s --rows 1000000 --keep-indexes         # indexes kept
    python bench/_fill.py --schema s --rows 1000000 --migrate              # migrate it first

History as a year of production leaves it: ``--queues`` queues (round-robin by id), 95%
succeeded and 5% failed (one in five of those cancelled on its first attempt, the others
failed after their 3 attempts), one succeeded job in 20 after a retry; payloads of 200 to
350 bytes of JSON; ``finished_at`` spread evenly over the last 30 days, in id order (ids
grow with time); the claim's and the ack's columns set as they leave them (claimed_at,
started_at, run_seconds, wait_seconds, worker_id, host; claim_seq = attempts). Every
attempt that did not succeed has its ``attempts`` row (docs/protocol.rst §14): two
``retry`` rows and a ``failed`` one per failed job, one ``cancelled`` row per cancelled job,
one ``retry`` row per succeeded job that was retried.

Rows are written by ``INSERT ... SELECT ... FROM generate_series`` in chunks of
``--chunk`` rows, ``--parallel`` connections at once (one chunk each in flight), each chunk
its own transaction (so a big fill neither holds one snapshot for minutes nor needs one
huge WAL segment range). By default the non-unique indexes of both tables (those finished
rows enter: ``jobs`` by ``finished_at``, the ``attempts`` ones; and the claim path's
partial ones, which cost nothing to rebuild) are dropped first and rebuilt at the end, and
the primary keys stay (ids only grow: appending to them is cheap). Then ``VACUUM
ANALYZE`` of both tables: it sets the visibility map (so later index scans skip the heap)
and gives the planner statistics, as autovacuum would have by then.

Other benches import :func:`fill_finished`. It is blocking (it runs its own asyncio loop):
from trio, call it with ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

DEFAULT_QUEUES = ("bench", "email", "reports", "webhooks", "billing", "thumbnails")
DEFAULT_CHUNK = 250_000
#: The tables a fill writes: their indexes that are neither a primary key nor unique are
#: dropped during a fill (when asked) and rebuilt after, from the definitions PostgreSQL
#: reports for them. Those are the ones finished rows enter (jobs_finished_idx, the
#: attempts' and retention's); the claim path's partial indexes over unfinished rows get no
#: entry from a finished row and cost nothing to rebuild. Unique ones stay: they are
#: constraints (the dedup key, the schedule tick) and finished rows do not enter them.
FILL_TABLES = ("jobs", "attempts")

# The row number inside the fill (0 .. rows-1) is g; everything is a function of it, so the
# jobs and the attempts statements agree on which job failed, how often it ran, and when.
_JOB = """
INSERT INTO {s}.jobs (
    id, queue, payload, status, priority, attempts, max_attempts, claim_seq,
    not_visible_until, lease_floor, last_error, created_at, finished_at, worker_id,
    claimed_at, wait_seconds, started_at, run_seconds, host, cancelled, last_renewed_at)
SELECT $1::bigint + g,
       ($4::text[])[1 + g % array_length($4::text[], 1)],
       p.payload,
       CASE WHEN g % 20 = 0 THEN 'failed' ELSE 'succeeded' END,
       0,
       t.attempts,
       3,
       t.attempts,
       t.claimed + interval '60 seconds',
       t.claimed + interval '60 seconds',
       CASE WHEN g % 100 = 0 THEN 'cancelled: cancel requested'
            WHEN g % 20 = 0 THEN 'ValueError: upstream answered 503' END,
       t.created,
       t.finished,
       'worker-' || (g % 7),
       t.claimed,
       extract(epoch FROM t.claimed - t.created),
       t.claimed + interval '2 milliseconds',
       extract(epoch FROM t.finished - t.claimed) - 0.002,
       'host-' || (g % 3),
       g % 100 = 0,
       t.claimed
FROM generate_series($2::bigint, $3::bigint) AS g
JOIN pg_temp.fill_payloads AS p ON p.k = g % 1009
CROSS JOIN LATERAL (
    SELECT CASE WHEN g % 100 = 0 THEN 1 WHEN g % 20 = 0 THEN 3 WHEN g % 20 = 1 THEN 2
                ELSE 1 END AS attempts,
           now() - make_interval(secs => 2592000.0::float8 * ($5::bigint - g) / $5::bigint) AS finished
) AS a
CROSS JOIN LATERAL (
    SELECT a.attempts,
           a.finished,
           a.finished - make_interval(secs => 0.005 + (g % 97) / 1000.0) AS claimed,
           a.finished - make_interval(secs => 0.5 + (g % 61)) AS created
) AS t
"""

# The payloads: 1009 variants of 200 to 350 bytes (a job's is picked by its row number).
# Built once per connection: building a jsonb per row cost 20 µs, more than the rest of
# the row (a join on a small table costs 2 µs; picking from a jsonb[] detoasts the array
# on every row, 300 µs).
_PAYLOADS = """
CREATE TEMP TABLE fill_payloads AS
SELECT k, jsonb_build_object(
           'customer', 'cust-' || (k * 7919 % 100003), 'currency', 'EUR',
           'amount', (k * 31 % 9973) / 100.0, 'items', k % 9 + 1,
           'note', substr(repeat('lorem ipsum dolor sit amet, consectetur adipiscing ', 8),
                          (1 + k % 50)::int, (120 + k * 13 % 150)::int)) AS payload
FROM generate_series(0, 1008) AS k
"""

# One row per attempt that did not succeed: for a failed job every attempt (the last one
# 'failed', or 'cancelled'), for a retried succeeded one its first.
_ATTEMPTS = """
INSERT INTO {s}.attempts (
    job_id, claim_seq, attempt, queue, outcome, worker_id, host, claimed_at, started_at,
    finished_at, run_seconds, wait_seconds, error_type, error)
SELECT $1::bigint + g, n, n,
       ($4::text[])[1 + g % array_length($4::text[], 1)],
       CASE WHEN g % 100 = 0 THEN 'cancelled'
            WHEN g % 20 = 0 AND n = 3 THEN 'failed'
            ELSE 'retry' END,
       'worker-' || ((g + n) % 7), 'host-' || ((g + n) % 3),
       f.at - interval '50 milliseconds', f.at - interval '48 milliseconds', f.at,
       0.048, 0.5, 'ValueError', 'ValueError: upstream answered 503'
FROM generate_series($2::bigint, $3::bigint) AS g
CROSS JOIN LATERAL generate_series(
    1, CASE WHEN g % 100 = 0 THEN 1 WHEN g % 20 = 0 THEN 3 ELSE 1 END) AS n
CROSS JOIN LATERAL (
    SELECT now() - make_interval(secs => 2592000.0::float8 * ($5::bigint - g) / $5::bigint)
           - make_interval(secs => 60.0 * (3 - n)) AS at
) AS f
WHERE g % 20 IN (0, 1)
"""


@dataclass(frozen=True)
class FillReport:
    """What a fill did and how long each part took (seconds)."""

    rows: int
    attempt_rows: int
    insert_seconds: float
    index_seconds: float
    vacuum_seconds: float

    @property
    def seconds(self) -> float:
        return self.insert_seconds + self.index_seconds + self.vacuum_seconds

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else float("nan")

    def line(self) -> str:
        return (
            f"{self.rows:,} jobs + {self.attempt_rows:,} attempts in {self.seconds:.1f} s "
            f"({self.rows_per_second:,.0f} jobs/s): insert {self.insert_seconds:.1f} s, "
            f"indexes {self.index_seconds:.1f} s, vacuum analyze {self.vacuum_seconds:.1f} s"
        )


def fill_finished(
    dsn: str,
    schema: str,
    rows: int,
    *,
    queues: Sequence[str] = DEFAULT_QUEUES,
    chunk: int = DEFAULT_CHUNK,
    parallel: int = 2,
    drop_indexes: bool = True,
    vacuum: bool = True,
) -> FillReport:
    """Add ``rows`` finished jobs (and their attempts rows) to the migrated ``schema``.

    Blocking: runs its own event loop (call it from a thread under trio).
    """
    return asyncio.run(
        _fill(dsn, schema, rows, tuple(queues), chunk, parallel, drop_indexes, vacuum)
    )


async def _fill(
    dsn: str,
    schema: str,
    rows: int,
    queues: tuple[str, ...],
    chunk: int,
    parallel: int,
    drop_indexes: bool,
    vacuum: bool,
) -> FillReport:
    s = _quoted(schema)
    admin = await asyncpg.connect(dsn)
    try:
        # The ids come after every existing one; the sequence is moved past them at the
        # end, so jobs enqueued later never collide with the fill's.
        base = await admin.fetchval(f"SELECT coalesce(max(id), 0) + 1 FROM {s}.jobs")
        dropped = await _drop_indexes(admin, schema) if drop_indexes else []
        began = time.perf_counter()
        try:
            attempt_rows = await _insert_chunks(dsn, s, base, rows, queues, chunk, parallel)
            await admin.execute(
                f"SELECT setval(pg_get_serial_sequence('{s}.jobs', 'id'), $1)",
                max(base + rows - 1, 1),
            )
            inserted = time.perf_counter()
        finally:
            # Also after a failed fill: a schema must not be left without its indexes.
            for definition in dropped:
                await admin.execute(definition)
        indexed = time.perf_counter()
        if vacuum:
            await admin.execute(f"VACUUM (ANALYZE) {s}.jobs")
            await admin.execute(f"VACUUM (ANALYZE) {s}.attempts")
        vacuumed = time.perf_counter()
    finally:
        await admin.close()
    return FillReport(
        rows=rows,
        attempt_rows=attempt_rows,
        insert_seconds=inserted - began,
        index_seconds=indexed - inserted,
        vacuum_seconds=vacuumed - indexed,
    )


async def _drop_indexes(connection: Any, schema: str) -> list[str]:
    """Drop the non-unique indexes of FILL_TABLES; answer the statements that recreate them."""
    found = await connection.fetch(
        """
        SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition
        FROM pg_index AS i
        JOIN pg_class AS c ON c.oid = i.indexrelid
        JOIN pg_class AS t ON t.oid = i.indrelid
        JOIN pg_namespace AS n ON n.oid = t.relnamespace
        WHERE n.nspname = $1 AND t.relname = ANY($2::text[])
          AND NOT i.indisunique AND NOT i.indisprimary
        """,
        schema,
        list(FILL_TABLES),
    )
    for row in found:
        await connection.execute(f"DROP INDEX {_quoted(schema)}.{_quoted(row['name'])}")
    return [row["definition"] for row in found]


async def _insert_chunks(
    dsn: str,
    s: str,
    base: int,
    rows: int,
    queues: tuple[str, ...],
    chunk: int,
    parallel: int,
) -> int:
    """Insert the jobs and attempts, ``parallel`` chunks at a time; answer attempts rows."""
    chunks = [(lo, min(lo + chunk, rows) - 1) for lo in range(0, rows, chunk)]
    job_sql, attempts_sql = _JOB.format(s=s), _ATTEMPTS.format(s=s)
    attempt_rows = 0

    async def worker() -> None:
        nonlocal attempt_rows
        connection = await asyncpg.connect(
            dsn, server_settings={"synchronous_commit": "off", "jit": "off"}
        )
        try:
            await connection.execute(_PAYLOADS)
            await connection.execute("ANALYZE pg_temp.fill_payloads")
            while chunks:
                lo, hi = chunks.pop(0)
                async with connection.transaction():
                    await connection.execute(job_sql, base, lo, hi, list(queues), rows)
                    status = await connection.execute(
                        attempts_sql, base, lo, hi, list(queues), rows
                    )
                attempt_rows += int(status.split()[-1])
        finally:
            await connection.close()

    await asyncio.gather(*(worker() for _ in range(max(1, parallel))))
    return attempt_rows


def _quoted(name: str) -> str:
    """``name`` as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--schema", required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--chunk", type=int, default=DEFAULT_CHUNK)
    parser.add_argument("--parallel", type=int, default=2, help="connections inserting")
    parser.add_argument("--queues", nargs="+", default=list(DEFAULT_QUEUES))
    parser.add_argument(
        "--keep-indexes", action="store_true", help="keep the finished indexes during the fill"
    )
    parser.add_argument("--no-vacuum", action="store_true", help="skip VACUUM ANALYZE")
    parser.add_argument("--migrate", action="store_true", help="create/migrate the schema first")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.migrate:
        _migrate(args.dsn, args.schema)
    report = fill_finished(
        args.dsn,
        args.schema,
        args.rows,
        queues=args.queues,
        chunk=args.chunk,
        parallel=args.parallel,
        drop_indexes=not args.keep_indexes,
        vacuum=not args.no_vacuum,
    )
    print(report.line())
    sys.stdout.flush()


def _migrate(dsn: str, schema: str) -> None:
    import trio

    import trioqueue

    async def migrate() -> None:
        async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
            await backend.migrate()

    trio.run(migrate)


if __name__ == "__main__":
    main()
