"""Does history slow the hot path? The hot path's numbers with 0, 1M and 10M finished jobs.

    python bench/bench_history.py --dsn postgresql://postgres@127.0.0.1:5432/mydb \\
        --fills 0 1000000 10000000 --rounds 3 --churn-minutes 15 --churn-rate 200
    python bench/bench_history.py --fills 0 100000 --rounds 1 --churn-minutes 1 \\
        --jobs 1000 --samples 50                      # a quick run, a few minutes

Each fill has a schema of its own, ``<--prefix>_<rows>``, migrated and filled with that many
finished jobs by bench/_fill.py (a schema that exists already is used as it is: filling 10M
rows takes a while; ``--refill`` drops and refills it). On each, the measurements of
bench/bench_postgres.py, run there (``ON_SCHEMA``) rather than on a fresh schema:

- latency: enqueue -> handler start with one idle pool (``--samples``): p50, p99;
- drain: ``--jobs`` no-op jobs drained by one pool (``--concurrency`` batches) at batch 1, 10
  and 50: jobs/s; and the jobs table's buffer accesses per job over the three drains
  (``pg_statio_user_tables``: heap and index blocks hit or read; enqueue, claim, renewals,
  ack), a number the machine's noise does not change;
- renewal: 10,000 jobs claimed at once, renewed 3 times by one statement each: ms (p50);
- status: ``queue_stats()`` (what ``trioqueue status`` shows), ``--status-calls`` calls: s
  (median);
- sizes: the jobs table's heap and indexes, the attempts table's (MB), and n_dead_tup.

Rounds interleave the fills (0, 1M, 10M, 0, 1M, 10M, ...): the machine's noise (other
processes, checkpoints) then falls on every fill alike. Printed: the median over rounds and
the spread (min-max) of each number, and each fill's median against the empty table's.

Phase "clean": after each fill's measurement the jobs it added are deleted and the table
vacuumed (not timed), so every round sees the same table. Then churn: on every schema at
once, ``--churn-rate`` jobs/s enqueued and drained by a pool for ``--churn-minutes``
(one job in 50 fails its 3 attempts), with autovacuum at its defaults (and nothing
else vacuuming). Phase "churned": the same rounds, the measurements' own jobs kept
(they are churn too), nothing vacuumed by the bench.

Every schema's default retention keeps finished jobs for ever (``keep_for_ever``): the
history is what is measured, and the pools' maintainer would otherwise prune it meanwhile.
Schemas are kept for reuse unless ``--drop``. Connections run with synchronous_commit=off.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio
from _fill import fill_finished
from bench_bloat import enqueuer, handler
from bench_postgres import (
    KEEP_ADDED,
    ON_SCHEMA,
    drain_pools,
    percentile,
    renewal_rounds,
    start_latency,
)

import trioqueue
from trioqueue._backends.postgres.embedded import fast_commits

QUEUE = "bench"
BATCHES = (1, 10, 50)
RENEWED = 10_000

#: Buffer accesses of the jobs table and its indexes (hits and reads), from the statistics:
#: unlike a time, the same on a busy machine as on an idle one.
_BUFFERS = """
SELECT coalesce(heap_blks_read, 0) + coalesce(heap_blks_hit, 0)
       + coalesce(idx_blks_read, 0) + coalesce(idx_blks_hit, 0)
FROM pg_statio_user_tables WHERE schemaname = $1::text AND relname = 'jobs'
"""

_SIZES = """
SELECT pg_relation_size(s.relid) AS heap, pg_indexes_size(s.relid) AS indexes,
       pg_total_relation_size(format('%I.attempts', $1::text)::regclass) AS attempts,
       s.n_dead_tup AS dead, s.n_live_tup AS live, s.autovacuum_count AS autovacuums
FROM pg_stat_user_tables AS s
WHERE s.schemaname = $1::text AND s.relname = 'jobs'
"""


@dataclass
class Measure:
    """One round's numbers for one fill."""

    p50_ms: float
    p99_ms: float
    drain: dict[int, float]
    drain_buffers: float
    renewal_ms: float
    status_s: float
    heap_mb: float
    index_mb: float
    attempts_mb: float
    dead: int
    live: int

    def values(self) -> dict[str, float]:
        out = {
            "p50 ms": self.p50_ms,
            "p99 ms": self.p99_ms,
            **{f"drain b{b} /s": rate for b, rate in self.drain.items()},
            "buffers/job": self.drain_buffers,
            "renew 10k ms": self.renewal_ms,
            "status s": self.status_s,
            "heap MB": self.heap_mb,
            "index MB": self.index_mb,
            "attempts MB": self.attempts_mb,
            "dead tuples": float(self.dead),
        }
        return out


@dataclass
class Fill:
    rows: int
    schema: str
    rounds: dict[str, list[Measure]] = field(default_factory=dict)


def label(rows: int) -> str:
    if rows >= 1_000_000 and rows % 1_000_000 == 0:
        return f"{rows // 1_000_000}M"
    if rows >= 1000 and rows % 1000 == 0:
        return f"{rows // 1000}k"
    return str(rows)


async def prepare(dsn: str, fill: Fill, refill: bool) -> None:
    """The fill's schema, migrated and filled (unless it exists and ``refill`` is off)."""
    async with trioqueue.open_postgres(dsn, schema=fill.schema, max_connections=1) as backend:
        async with backend.acquire() as connection:
            exists = await connection.fetchval(
                "SELECT to_regclass(format('%I.jobs', $1::text)) IS NOT NULL", fill.schema
            )
            if not exists or refill:
                await connection.execute(f'DROP SCHEMA IF EXISTS "{fill.schema}" CASCADE')
        if exists and not refill:
            print(f"{label(fill.rows)}: schema {fill.schema} exists, used as it is")
            await keep_for_ever(backend)  # (the connection above is back: there is one)
            return
        await backend.migrate()
        await keep_for_ever(backend)
    report = await trio.to_thread.run_sync(lambda: fill_finished(dsn, fill.schema, fill.rows))
    print(f"{label(fill.rows)}: {report.line()}")
    sys.stdout.flush()


async def keep_for_ever(backend: trioqueue.PostgresBackend) -> None:
    """History is kept: the default retention keeps every finished job, so that the pools'
    maintainer (docs/protocol.rst §15) does not prune the fill during the measurement.
    With the defaults it would: the fill's finished_at spans 30 days, the default keeps
    succeeded jobs 7 days, and a pool's first maintenance pass deleted about 750,000 of
    the 1M fill while its drains were being measured (185 buffers per job against 36)."""
    await backend.set_retention(None, succeeded=None, failed=None)


async def sizes(backend: trioqueue.PostgresBackend) -> dict[str, int]:
    async with backend.acquire() as connection:
        await connection.execute("SELECT pg_stat_force_next_flush()")
        row = await connection.fetchrow(_SIZES, backend.schema)
    return dict(row)


async def buffers(dsn: str, schema: str) -> int:
    """The jobs table's buffer accesses so far. The sessions that drained have closed,
    and a closing session flushes its statistics; a moment later they are counted."""
    await trio.sleep(1)
    async with (
        trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend,
        backend.acquire() as connection,
    ):
        return int(await connection.fetchval(_BUFFERS, schema))


async def status_time(backend: trioqueue.PostgresBackend, calls: int) -> float:
    if calls <= 0:
        return float("nan")
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        await backend.queue_stats()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


async def measure(dsn: str, fill: Fill, args: argparse.Namespace, clean: bool) -> Measure:
    """The hot path's numbers on ``fill``'s schema (bench_postgres's benches, run there)."""
    ON_SCHEMA.set(fill.schema)
    KEEP_ADDED.set(not clean)
    latencies = await start_latency(dsn, args.samples)
    drain = {}
    before = await buffers(dsn, fill.schema)
    for batch in BATCHES:
        drain[batch] = (await drain_pools(dsn, args.jobs, batch, 1, args.concurrency)).rate
    drain_buffers = (await buffers(dsn, fill.schema) - before) / (args.jobs * len(BATCHES))
    renewal = await renewal_rounds(dsn, RENEWED, 3, None)
    async with trioqueue.open_postgres(dsn, schema=fill.schema, max_connections=2) as backend:
        status = await status_time(backend, args.status_calls)
        if clean:
            async with backend.acquire() as connection:
                await connection.execute(f'VACUUM "{fill.schema}".jobs')
        size = await sizes(backend)
    return Measure(
        p50_ms=percentile(latencies, 0.5) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        drain=drain,
        drain_buffers=drain_buffers,
        renewal_ms=renewal["ms_p50"],
        status_s=status,
        heap_mb=size["heap"] / 2**20,
        index_mb=size["indexes"] / 2**20,
        attempts_mb=size["attempts"] / 2**20,
        dead=size["dead"],
        live=size["live"],
    )


async def run_rounds(dsn: str, fills: Sequence[Fill], args: argparse.Namespace, phase: str) -> None:
    for n in range(args.rounds):
        for fill in fills:
            result = await measure(dsn, fill, args, clean=phase == "clean")
            fill.rounds.setdefault(phase, []).append(result)
            print(
                f"{phase} round {n + 1} {label(fill.rows):>4}: "
                + ", ".join(f"{k} {v:,.1f}" for k, v in result.values().items())
            )
            sys.stdout.flush()


async def churn_one(dsn: str, fill: Fill, rate: float, seconds: float) -> int:
    """``rate`` jobs/s into ``fill``'s schema, drained by one pool, for ``seconds``."""
    done = 0

    async def count(job: trioqueue.Job) -> None:
        nonlocal done
        done += 1

    config = trioqueue.WorkerConfig(
        handler=handler,
        queue=QUEUE,
        concurrency=2,
        batch_size=10,
        on_job_succeeded=count,
        backoff=lambda attempt: 0.5,
        poll_interval=0.5,
        schedule_interval=None,
    )
    async with (
        trioqueue.open_postgres(dsn, schema=fill.schema, max_connections=6) as backend,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(trioqueue.run_worker_pool, backend, config)
        await enqueuer(backend, rate, time.perf_counter() + seconds)
        # The measurements after churn must find the queue empty (their handlers would
        # take what is left): wait for the backlog and the retries to finish.
        await until_idle(backend)
        nursery.cancel_scope.cancel()
    return done


async def until_idle(backend: trioqueue.PostgresBackend, limit: float = 600) -> None:
    """Return once QUEUE has no unfinished job (polled each second), or after ``limit`` s."""
    with trio.move_on_after(limit):
        while True:
            async with backend.acquire() as connection:
                left = await connection.fetchval(
                    f'SELECT count(*) FROM "{backend.schema}".jobs'
                    " WHERE queue = $1 AND status IN ('queued', 'running')",
                    QUEUE,
                )
            if not left:
                return
            await trio.sleep(1)


async def churn(dsn: str, fills: Sequence[Fill], args: argparse.Namespace) -> None:
    seconds = args.churn_minutes * 60
    done: dict[int, int] = {}

    async def one(fill: Fill) -> None:
        done[fill.rows] = await churn_one(dsn, fill, args.churn_rate, seconds)

    print(f"churn: {args.churn_rate:g} jobs/s into each schema for {args.churn_minutes:g} min")
    sys.stdout.flush()
    async with trio.open_nursery() as nursery:
        for fill in fills:
            nursery.start_soon(one, fill)
    for fill in fills:
        print(f"churn {label(fill.rows)}: {done[fill.rows]:,} jobs succeeded")


def report(fills: Sequence[Fill], phase: str) -> None:
    """Per fill: median (min-max) of each number, and the median against the empty fill's."""
    base = fills[0]
    print(f"\n{phase}: median over {len(base.rounds[phase])} rounds (min-max), vs {base.rows:,}")
    keys = list(base.rounds[phase][0].values())
    for fill in fills:
        print(f"  {label(fill.rows)} finished rows ({fill.schema})")
        for key in keys:
            values = [m.values()[key] for m in fill.rounds[phase]]
            mid = statistics.median(values)
            ref = statistics.median(m.values()[key] for m in base.rounds[phase])
            versus = f"{100 * (mid / ref - 1):+.0f}%" if ref and fill is not base else ""
            print(
                f"    {key:<14} {mid:>12,.1f}   ({min(values):,.1f}-{max(values):,.1f})   {versus}"
            )
    sys.stdout.flush()


async def main_async(args: argparse.Namespace) -> None:
    dsn = fast_commits(args.dsn)
    fills = [Fill(rows, f"{args.prefix}_{label(rows).lower()}") for rows in args.fills]
    for fill in fills:
        await prepare(dsn, fill, args.refill)
    try:
        await run_rounds(dsn, fills, args, "clean")
        report(fills, "clean")
        if args.churn_minutes > 0:
            await churn(dsn, fills, args)
            await run_rounds(dsn, fills, args, "churned")
            report(fills, "clean")
            report(fills, "churned")
    finally:
        if args.drop:
            with trio.CancelScope(shield=True):
                for fill in fills:
                    await drop(dsn, fill.schema)


async def drop(dsn: str, schema: str) -> None:
    async with (
        trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend,
        backend.acquire() as connection,
    ):
        await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--fills", type=int, nargs="+", default=[0, 1_000_000, 10_000_000])
    parser.add_argument("--prefix", default="hist", help="schemas: <prefix>_<rows>")
    parser.add_argument("--refill", action="store_true", help="refill existing schemas")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=200, help="latency samples")
    parser.add_argument("--jobs", type=int, default=5000, help="drain: jobs per batch size")
    parser.add_argument("--concurrency", type=int, default=4, help="drain: batches at once")
    parser.add_argument("--status-calls", type=int, default=3, help="queue_stats calls")
    parser.add_argument("--churn-minutes", type=float, default=10)
    parser.add_argument("--churn-rate", type=float, default=200, help="jobs/s per schema")
    parser.add_argument("--drop", action="store_true", help="drop the schemas at the end")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    trio.run(main_async, args)


if __name__ == "__main__":
    main()
