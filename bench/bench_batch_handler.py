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
with the load average, and the CPU this process spent per job on each trioqueue side and
the bound's (steadier than the rates on a busy machine). Both trioqueue sides count
finished jobs with the same ``on_job_succeeded`` hook. ``synchronous_commit=off`` throughout. Needs the ``bench``
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
from dataclasses import dataclass
from typing import Any

import asyncpg
import bench_postgres
import trio
import trio_asyncio
from _jobs import noop
from bench_postgres import ACK, CLAIM, _raw_consumer, fill, fresh_backend
from bench_vs_pgqueuer import header, load, pgqueuer, pgqueuer_database

import trioqueue
from trioqueue._backends.postgres.embedded import fast_commits, find_postgres
from trioqueue._backends.postgres.loop_passes import run_ready_callbacks_together

_DONE = trioqueue.JobSucceeded()


async def noop_batch(jobs: Sequence[trioqueue.Job], ctx: trioqueue.BatchContext) -> Any:
    """A batch handler that does nothing: one success per job."""
    return [_DONE] * len(jobs)


@dataclass(frozen=True)
class Drained:
    """A drain's jobs/s, and the CPU this process spent per job meanwhile (µs; the
    database server's is not in it)."""

    rate: float
    cpu_us: float


async def drain_pools(
    dsn: str, jobs: int, batch: int, consumers: int, concurrency: int, batched: bool
) -> Drained:
    """bench_postgres.py's drain: a per-job handler, or (``batched``) a batch handler."""
    handler = {"batch_handler": noop_batch} if batched else {"handler": noop}
    drained = await bench_postgres.drain_pools(
        dsn, jobs, batch, consumers, concurrency, handler=handler
    )
    return Drained(drained.rate, drained.cpu_us)


async def drain_raw(dsn: str, jobs: int, batch: int, consumers: int) -> Drained:
    """bench_postgres.py's raw bound (hand-written claim+ack loops through trio-asyncio,
    one connection each), with its CPU per job."""
    async with fresh_backend(dsn, max_connections=2) as backend:
        await fill(backend, jobs)
        claim = CLAIM.format(schema=f'"{backend.schema}"')
        ack = ACK.format(schema=f'"{backend.schema}"')
        async with trio_asyncio.open_loop() as loop:
            run_ready_callbacks_together(loop)
            connect = trio_asyncio.aio_as_trio(asyncpg.connect)
            connections = [await connect(dsn) for _ in range(consumers)]
            try:
                began, cpu = time.perf_counter(), time.process_time()
                async with trio.open_nursery() as nursery:
                    for n, connection in enumerate(connections):
                        nursery.start_soon(_raw_consumer, connection, claim, ack, batch, f"raw-{n}")
                elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
            finally:
                for connection in connections:
                    await trio_asyncio.aio_as_trio(connection.close)()
    return Drained(jobs / elapsed, cpu / jobs * 1e6)


#: One round at one batch size: per-job handler, batch handler, pgqueuer (jobs/s), bound.
Round = tuple[Drained, Drained, float, Drained]


def run(dsn: str, args: argparse.Namespace) -> None:
    print(
        f"drain: {args.jobs:,} pre-enqueued no-op jobs, {args.consumers} consumers "
        f"(trioqueue pools: concurrency {args.concurrency}); jobs/s, / the raw bound, and "
        "this process's CPU µs per job (pgqueuer's runs in its own process: not measured)"
    )
    print(
        f"  {'batch':>7} {'per-job':>9} {'batch h.':>9} {'pgqueuer':>9} {'raw bound':>10}"
        f" {'per-job/b':>10} {'batch/b':>8} {'pgq/b':>6}"
        f" {'CPU per-job':>12} {'batch':>6} {'bound':>6}   load"
    )
    rounds: dict[int, list[Round]] = {b: [] for b in args.batch}
    for round_ in range(args.repeat):
        for batch in args.batch:
            pools = (dsn, args.jobs, batch, args.consumers, args.concurrency)
            per_job = trio.run(drain_pools, *pools, False)
            batched = trio.run(drain_pools, *pools, True)
            theirs = pgqueuer("drain", dsn, jobs=args.jobs, batch=batch, consumers=args.consumers)
            bound = trio.run(drain_raw, dsn, args.jobs, batch, args.consumers)
            rounds[batch].append((per_job, batched, theirs["rate"], bound))
            label = f"{batch}" if args.repeat == 1 else f"{batch} #{round_ + 1}"
            _row(label, (per_job, batched, theirs["rate"], bound), load())
    if args.repeat > 1:
        print(f"  median of {args.repeat} rounds:")
        for batch, results in rounds.items():
            _row(f"{batch}", _medians(results), "")


def _medians(results: list[Round]) -> Round:
    """Each side's median rate and CPU over the rounds (each median taken alone)."""

    def median(sides: list[Drained]) -> Drained:
        return Drained(
            statistics.median(d.rate for d in sides), statistics.median(d.cpu_us for d in sides)
        )

    per_job, batched, theirs, bound = zip(*results, strict=True)
    return (
        median(list(per_job)),
        median(list(batched)),
        statistics.median(theirs),
        median(list(bound)),
    )


def _row(label: str, sides: Round, note: str) -> None:
    per_job, batched, theirs, bound = sides
    print(
        f"  {label:>7} {per_job.rate:>9,.0f} {batched.rate:>9,.0f} {theirs:>9,.0f}"
        f" {bound.rate:>10,.0f} {per_job.rate / bound.rate:>10.0%}"
        f" {batched.rate / bound.rate:>8.0%} {theirs / bound.rate:>6.0%}"
        f" {per_job.cpu_us:>12.1f} {batched.cpu_us:>6.1f} {bound.cpu_us:>6.1f}   {note}"
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
