"""Dead tuples and table size of ``jobs`` under a steady load, per storage setting.

    python bench/bench_bloat.py --minutes 30 --rate 250 --history 500000
    python bench/bench_bloat.py --minutes 2 --rate 50 --history 10000 --configs today tuned
                                                            # a quick run

Every configuration (``--configs``, see CONFIGS) gets its own migrated schema, filled with
``--history`` finished jobs (bench/_fill.py: a table that has history, as a production one
has, is what makes the default scale factors wait long), its storage settings applied by
``ALTER TABLE``, and then the same steady load for ``--minutes``, all configurations side
by side on the same server (so each sees the same machine, the same noise, the same
autovacuum launcher, which visits a database once per ``autovacuum_naptime``): an
enqueuer adding ``--rate`` jobs/s (a batch every 100 ms) and one worker pool draining them
(no-op handler; one job in 50 fails each of its 3 attempts, so ``attempts`` grows too).
Nothing is pruned: finished rows stay, as they do until a retention policy removes them.

Every ``--every`` seconds each schema's ``pg_stat_user_tables`` row and sizes are sampled
(the statistics are those the server has collected: other sessions flush within a second
or so, and a sample never waits for them). Printed: a line per sample and configuration,
then per configuration the jobs/s sustained, dead tuples (max, mean of the second half),
autovacuum runs, the jobs table's heap and index size at the start and the end, its growth
per 1,000 jobs done, the hot indexes' (claim path) size at the end, the attempts table's
size, and the HOT share of updates.

The server: ``--dsn`` (default: the local server's ``test`` database; use a database of
your own for long runs). Schemas ``trioqueue_bloat_<config>_<hex>`` are dropped at the
end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import logging
import secrets
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import trio
from _fill import fill_finished

import trioqueue
from trioqueue._backends.postgres.embedded import fast_commits

QUEUE = "bench"
TICK = 0.1

#: Per-table storage settings to compare: "today" is the migrations' (fillfactor 60 from
#: migration 0006, autovacuum at the server's defaults).
CONFIGS: dict[str, dict[str, str]] = {
    "today": {},
    "scale": {
        "autovacuum_vacuum_scale_factor": "0.01",
        "autovacuum_vacuum_insert_scale_factor": "0.01",
    },
    "nodelay": {
        "autovacuum_vacuum_scale_factor": "0.01",
        "autovacuum_vacuum_insert_scale_factor": "0.01",
        "autovacuum_vacuum_cost_delay": "0",
    },
    "threshold": {
        "autovacuum_vacuum_scale_factor": "0",
        "autovacuum_vacuum_threshold": "20000",
        "autovacuum_vacuum_insert_scale_factor": "0",
        "autovacuum_vacuum_insert_threshold": "100000",
        "autovacuum_vacuum_cost_delay": "0",
    },
    "ff80": {
        "fillfactor": "80",
        "autovacuum_vacuum_scale_factor": "0.01",
        "autovacuum_vacuum_insert_scale_factor": "0.01",
        "autovacuum_vacuum_cost_delay": "0",
    },
}

_SAMPLE = """
SELECT s.n_live_tup, s.n_dead_tup, s.autovacuum_count, s.n_tup_upd, s.n_tup_hot_upd,
       s.last_autovacuum,
       pg_relation_size(s.relid) AS heap,
       pg_indexes_size(s.relid) AS indexes,
       (SELECT coalesce(sum(pg_relation_size(i.indexrelid)), 0)
        FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
        WHERE i.indrelid = s.relid
          AND c.relname IN ('jobs_claim_queued_idx', 'jobs_claim_leased_floor_idx')) AS hot,
       pg_total_relation_size(format('%I.attempts', $1::text)::regclass) AS attempts
FROM pg_stat_user_tables AS s
WHERE s.schemaname = $1::text AND s.relname = 'jobs'
"""


@dataclass
class Sample:
    at: float
    done: int
    live: int
    dead: int
    autovacuums: int
    updates: int
    hot_updates: int
    heap: int
    indexes: int
    hot_indexes: int
    attempts: int


@dataclass
class Run:
    name: str
    schema: str
    settings: dict[str, str]
    done: int = 0
    samples: list[Sample] = field(default_factory=list)

    async def on_job(self, job: trioqueue.Job) -> None:
        self.done += 1


async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
    """No work; a job marked ``fail`` fails every attempt (its attempts rows are written)."""
    if payload.get("fail"):
        raise RuntimeError("bench: a failing job")


async def enqueuer(backend: trioqueue.PostgresBackend, rate: float, stop: float) -> None:
    """``rate`` jobs/s until ``stop`` (perf_counter), one batch every TICK, kept on pace
    (a late batch is followed by a bigger one, not by a drift)."""
    began = time.perf_counter()
    sent = 0
    n = 0
    while (now := time.perf_counter()) < stop:
        due = int((now - began) * rate) - sent
        if due > 0:
            payloads = [{"fail": True} if (n + k) % 50 == 0 else {} for k in range(due)]
            await backend.enqueue_many(QUEUE, payloads, max_attempts=3)
            sent += due
            n += due
        await trio.sleep(TICK)


async def sample(backend: trioqueue.PostgresBackend, run: Run, began: float) -> None:
    async with backend.acquire() as connection:
        row = await connection.fetchrow(_SAMPLE, run.schema)
    run.samples.append(
        s := Sample(
            at=time.perf_counter() - began,
            done=run.done,
            live=row["n_live_tup"],
            dead=row["n_dead_tup"],
            autovacuums=row["autovacuum_count"],
            updates=row["n_tup_upd"],
            hot_updates=row["n_tup_hot_upd"],
            heap=row["heap"],
            indexes=row["indexes"],
            hot_indexes=row["hot"],
            attempts=row["attempts"],
        )
    )
    print(
        f"{s.at:>6.0f} s {run.name:<10} done {s.done:>9,} dead {s.dead:>9,} "
        f"heap {_mb(s.heap):>8} MB idx {_mb(s.indexes):>7} MB autovac {s.autovacuums}"
    )
    sys.stdout.flush()


async def prepare(dsn: str, run: Run, history: int) -> None:
    async with trioqueue.open_postgres(dsn, schema=run.schema, max_connections=1) as backend:
        await backend.migrate()
        if run.settings:
            options = ", ".join(f"{k} = {v}" for k, v in run.settings.items())
            async with backend.acquire() as connection:
                await connection.execute(f'ALTER TABLE "{run.schema}".jobs SET ({options})')
    if history:
        report = await trio.to_thread.run_sync(
            lambda: fill_finished(dsn, run.schema, history, parallel=1)
        )
        print(f"{run.name}: {report.line()}")
        sys.stdout.flush()


async def load(dsn: str, run: Run, args: argparse.Namespace) -> None:
    config = trioqueue.WorkerConfig(
        handler=handler,
        queue=QUEUE,
        concurrency=args.concurrency,
        batch_size=args.batch,
        on_job_succeeded=run.on_job,
        backoff=lambda attempt: 0.5,
        poll_interval=0.5,
        schedule_interval=None,
    )
    async with trioqueue.open_postgres(
        dsn, schema=run.schema, max_connections=args.concurrency + 4
    ) as backend:
        began = time.perf_counter()
        stop = began + args.minutes * 60
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trioqueue.run_worker_pool, backend, config)
            nursery.start_soon(enqueuer, backend, args.rate, stop)
            while time.perf_counter() < stop:
                await sample(backend, run, began)
                await trio.sleep(args.every)
            await sample(backend, run, began)
            nursery.cancel_scope.cancel()


async def drop(dsn: str, run: Run) -> None:
    async with (
        trioqueue.open_postgres(dsn, schema=run.schema, max_connections=1) as backend,
        backend.acquire() as connection,
    ):
        await connection.execute(f'DROP SCHEMA IF EXISTS "{run.schema}" CASCADE')


def _mb(size: int) -> str:
    return f"{size / 2**20:,.1f}"


def report(runs: Sequence[Run], minutes: float) -> None:
    print(
        "\nconfig     jobs/s  dead max  dead mean(2nd half)  autovac  heap MB start→end  "
        "idx MB start→end  MB/1k jobs  hot idx MB  attempts MB  HOT%"
    )
    for run in runs:
        first, last = run.samples[0], run.samples[-1]
        later = run.samples[len(run.samples) // 2 :]
        updates = last.updates - first.updates
        growth = (last.heap + last.indexes - first.heap - first.indexes) / max(last.done, 1)
        print(
            f"{run.name:<10} {last.done / (minutes * 60):>6,.0f}  "
            f"{max(s.dead for s in run.samples):>8,}  "
            f"{statistics.fmean(s.dead for s in later):>19,.0f}  "
            f"{last.autovacuums - first.autovacuums:>7}  "
            f"{_mb(first.heap):>8}→{_mb(last.heap):<8}  "
            f"{_mb(first.indexes):>7}→{_mb(last.indexes):<7}  "
            f"{growth * 1000 / 2**20:>10.2f}  {_mb(last.hot_indexes):>10}  "
            f"{_mb(last.attempts):>11}  "
            f"{100 * (last.hot_updates - first.hot_updates) / updates if updates else 0:>4.0f}"
        )
    for run in runs:
        print(f"{run.name}: {run.settings or 'migrations defaults'}")


def print_samples(runs: Sequence[Run]) -> None:
    print("\nt(s)  " + "  ".join(f"{r.name + ' done/dead/heapMB':>28}" for r in runs))
    for i in range(max(len(r.samples) for r in runs)):
        cells = []
        for run in runs:
            if i < len(run.samples):
                s = run.samples[i]
                cells.append(f"{s.done:>10,}/{s.dead:>9,}/{_mb(s.heap):>7}")
            else:
                cells.append(" " * 28)
        at = runs[0].samples[min(i, len(runs[0].samples) - 1)].at
        print(f"{at:>5.0f}  " + "  ".join(cells))


async def main_async(args: argparse.Namespace) -> None:
    dsn = fast_commits(args.dsn)
    tag = secrets.token_hex(3)
    runs = [Run(name, f"trioqueue_bloat_{name}_{tag}", CONFIGS[name]) for name in args.configs]
    try:
        async with trio.open_nursery() as nursery:
            for run in runs:
                nursery.start_soon(prepare, dsn, run, args.history)
        async with trio.open_nursery() as nursery:
            for run in runs:
                nursery.start_soon(load, dsn, run, args)
    finally:
        if not args.keep:
            with trio.CancelScope(shield=True):
                for run in runs:
                    await drop(dsn, run)
    print_samples(runs)
    report(runs, args.minutes)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=float, default=250, help="jobs/s per configuration")
    parser.add_argument("--history", type=int, default=500_000, help="finished jobs first")
    parser.add_argument("--every", type=float, default=30, help="seconds between samples")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--keep", action="store_true", help="keep the schemas")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    trio.run(main_async, args)


if __name__ == "__main__":
    main()
