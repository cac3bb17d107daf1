"""Batch handlers beside per-job handlers, pgqueuer and the raw bound (numbers, never asserts).

    python bench/bench_batch_handler.py                       # 20,000 jobs, batch 50, 1 round
    python bench/bench_batch_handler.py --jobs 50000 --repeat 3 --batch 10 50

N pre-enqueued no-op jobs drained by ``--consumers`` worker pools (``--concurrency``
batches each: the pools of bench_postgres.py's drain) at each ``--batch`` size, four ways,
one after the other, never at the same time: trioqueue with a per-job handler (one task
and one scope per job), trioqueue with a batch handler (one call per batch, answering
``JobSucceeded()`` for each job: docs/howto/batch-handler.rst), pgqueuer 1.3.0 (one
``PgQueuer`` per consumer, in drain mode, in a subprocess and a database of its own, as
bench_vs_pgqueuer.py runs it), and the raw bound (bench_postgres.py's hand-written
claim+ack loops through trio-asyncio). Prints jobs/s and each one's ratio to the bound,
with the load average. Both trioqueue sides count finished jobs with the same
``on_job_succeeded`` hook. ``synchronous_commit=off`` throughout. Needs the ``bench``
extra. The server: ``--dsn``, else ``$TRIOQUEUE_DSN``, else the local one at 127.0.0.1:5432.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import trio
from _jobs import Countdown
from bench_postgres import QUEUE, drain_pools, drain_raw, fill, fresh_backend
from bench_vs_pgqueuer import header, load, pgqueuer, pgqueuer_database

import trioqueue
from trioqueue._backends.postgres.embedded import fast_commits, find_postgres

_DONE = trioqueue.JobSucceeded()


async def noop_batch(jobs: Sequence[trioqueue.Job], ctx: trioqueue.BatchContext) -> Any:
    """A batch handler that does nothing: one success per job."""
    return [_DONE] * len(jobs)


async def drain_batch_pools(
    dsn: str, jobs: int, batch: int, consumers: int, concurrency: int
) -> float:
    """Jobs/s of ``consumers`` pools of a batch handler draining ``jobs`` no-op jobs: as
    bench_postgres.py's ``drain_pools``, the handler aside."""
    finished = Countdown(jobs)
    config = trioqueue.WorkerConfig(
        batch_handler=noop_batch,
        queue=QUEUE,
        concurrency=concurrency,
        batch_size=batch,
        on_job_succeeded=finished.on_job,
        max_job_duration=600,
        poll_interval=0.5,
    )
    connections = consumers * (concurrency + 3) + 2
    async with fresh_backend(dsn, max_connections=connections) as backend:
        await fill(backend, jobs)
        async with trio.open_nursery() as nursery:
            began = time.perf_counter()
            for _ in range(consumers):
                nursery.start_soon(trioqueue.run_worker_pool, backend, config)
            await finished.done.wait()
            elapsed = time.perf_counter() - began
            nursery.cancel_scope.cancel()
    return jobs / elapsed


def run(dsn: str, args: argparse.Namespace) -> None:
    print(
        f"drain: {args.jobs:,} pre-enqueued no-op jobs, {args.consumers} consumers "
        f"(trioqueue pools: concurrency {args.concurrency}); jobs/s, and / the raw bound"
    )
    print(
        f"  {'batch':>7} {'per-job':>9} {'batch h.':>9} {'pgqueuer':>9} {'raw bound':>10}"
        f" {'per-job/b':>10} {'batch/b':>8} {'pgq/b':>6}   load"
    )
    rounds: dict[int, list[tuple[float, float, float, float]]] = {b: [] for b in args.batch}
    for round_ in range(args.repeat):
        for batch in args.batch:
            c = (args.jobs, batch, args.consumers, args.concurrency)
            per_job, _ = trio.run(drain_pools, dsn, *c)
            batched = trio.run(drain_batch_pools, dsn, *c)
            theirs = pgqueuer("drain", dsn, jobs=args.jobs, batch=batch, consumers=args.consumers)
            bound = trio.run(drain_raw, dsn, args.jobs, batch, args.consumers)
            rounds[batch].append((per_job, batched, theirs["rate"], bound))
            label = f"{batch}" if args.repeat == 1 else f"{batch} #{round_ + 1}"
            _row(label, (per_job, batched, theirs["rate"], bound), load())
    if args.repeat > 1:
        print(f"  median of {args.repeat} rounds:")
        for batch, results in rounds.items():
            medians = tuple(statistics.median(side) for side in zip(*results, strict=True))
            _row(f"{batch}", medians, "")


def _row(label: str, rates: tuple[float, float, float, float], note: str) -> None:
    per_job, batched, theirs, bound = rates
    print(
        f"  {label:>7} {per_job:>9,.0f} {batched:>9,.0f} {theirs:>9,.0f} {bound:>10,.0f}"
        f" {per_job / bound:>10.0%} {batched / bound:>8.0%} {theirs / bound:>6.0%}   {note}"
    )
    sys.stdout.flush()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", help="default: $TRIOQUEUE_DSN or the local server")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--consumers", type=int, default=5, help="pools (pgqueuer: consumers)")
    parser.add_argument("--concurrency", type=int, default=2, help="trioqueue: batches per pool")
    parser.add_argument("--batch", type=int, nargs="+", default=[50], help="batch sizes")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; medians printed too")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    with find_postgres(args.dsn or os.environ.get("TRIOQUEUE_DSN")) as (server, where):
        dsn = fast_commits(server)
        with pgqueuer_database(dsn) as server_version:
            header(where, server_version)
            run(dsn, args)


if __name__ == "__main__":
    main()
