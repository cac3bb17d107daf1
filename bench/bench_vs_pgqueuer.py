"""trioqueue side by side with pgqueuer (numbers, never asserts). Each figure in one run.

    python bench/bench_vs_pgqueuer.py drain --jobs 20000        # trioqueue, pgqueuer, raw bound
    python bench/bench_vs_pgqueuer.py steady --seconds 10        # fixed-rate producer: latency
    python bench/bench_vs_pgqueuer.py processes --jobs 20000     # 1, 2, 4 worker processes
    python bench/bench_vs_pgqueuer.py drain --jobs 2000 --batches 10    # a quick look
    python bench/bench_vs_pgqueuer.py drain --repeat 3           # each round, then medians

drain:     N pre-enqueued no-op jobs drained by ``--consumers`` consumers, at batch 1, 10
           and 50 -> jobs/s of trioqueue (worker pools, ``--concurrency`` batches each: the
           pools of bench_postgres.py's drain), pgqueuer (one ``PgQueuer`` per consumer,
           ``QueueExecutionMode.drain``, as its own ``tools/benchmark.py -s drain``) and the
           raw bound of bench_postgres.py (hand-written claim+ack loops through
           trio-asyncio), with the ratios.
steady:    a producer enqueues at a fixed rate (``--rates``, each for ``--seconds``) while
           ``--consumers`` consumers run (pgqueuer's peer: its ``throughput`` strategy);
           every job carries its enqueue time (taken just before the enqueue call) and its
           handler notes the delay to its start -> p50, p99, and the highest rate whose p99
           stayed under ``--p99-ms`` with every job started. A side stops at its first
           rate that misses. Jobs not started 10 s after the last enqueue count as late.
processes: 1, 2 and 4 OS processes, each with ``--consumers`` consumers, drain one shared
           queue of N jobs (batch ``--batch``) -> jobs/s overall, from the word "go" to
           the last job run: trioqueue direct, trioqueue through PgBouncer in transaction
           mode (LISTEN on a direct connection, docs/pgbouncer.rst), pgqueuer direct.

pgqueuer runs in a subprocess of its own (_pgqueuer_side.py: asyncio on uvloop, asyncpg),
never at the same time as trioqueue, in a database of its own (its tables have fixed
names), created for the run and dropped afterwards; its queue, log and statistics tables
are emptied before every run. Both sides run with ``synchronous_commit=off``.
Needs the ``bench`` extra (``pip install -e .[bench]``: pgqueuer 1.3.0, uvloop).
The server: ``--dsn``, else ``$TRIOQUEUE_DSN``, else the local one at 127.0.0.1:5432.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import trio
from _jobs import noop
from bench_postgres import QUEUE, drain_pools, drain_raw, fill, fresh_backend, percentile

import trioqueue
from trioqueue._backends.postgres.embedded import fast_commits, find_postgres

SIDE = str(Path(__file__).with_name("_pgqueuer_side.py"))
#: Jobs not started this long after the last enqueue count as late (steady).
GRACE = 10.0
#: Direct connections the trioqueue worker processes may open together (the server's
#: max_connections is often 100, and the lead process and others need some).
DIRECT_CONNECTIONS = 60


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (5 min {five:.2f})"


# -- pgqueuer's side: a subprocess ----------------------------------------------------------


def pgqueuer(which: str, dsn: str, **options: float) -> dict[str, Any]:
    """Run ``_pgqueuer_side.py which`` and return the JSON it prints last."""
    command = [sys.executable, SIDE, which, "--dsn", dsn]
    for name, value in options.items():
        command += [f"--{name}", str(value)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pgqueuer {which} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@contextmanager
def pgqueuer_database(dsn: str) -> Iterator[str]:
    """pgqueuer installed in a database of its own for the block, dropped afterwards;
    yields the server's version."""
    installed = pgqueuer("setup", dsn)
    try:
        yield str(installed["server_version"])
    finally:
        pgqueuer("teardown", dsn)


def header(where: str, server_version: str) -> None:
    print(
        f"server: {where}, PostgreSQL {server_version}; synchronous_commit=off; "
        f"{os.cpu_count()} CPUs; {load()}\n"
        f"versions: trioqueue {trioqueue.__version__}, pgqueuer {version('pgqueuer')}, "
        f"asyncpg {version('asyncpg')}, trio {version('trio')}, "
        f"trio-asyncio {version('trio-asyncio')}, uvloop {version('uvloop')}, "
        f"Python {sys.version.split()[0]}"
    )
    sys.stdout.flush()


# -- drain ----------------------------------------------------------------------------------


def run_drain(dsn: str, args: argparse.Namespace) -> None:
    print(
        f"drain: {args.jobs:,} pre-enqueued no-op jobs, {args.consumers} consumers "
        f"(trioqueue pools: concurrency {args.concurrency}); jobs/s"
    )
    print(
        f"  {'batch':>7} {'trioqueue':>10} {'pgqueuer':>10} {'raw bound':>10} "
        f"{'tq/pgq':>7} {'tq/bound':>9} {'pgq/bound':>10}   load"
    )
    rounds: dict[int, list[tuple[float, float, float]]] = {b: [] for b in args.batches}
    for round_ in range(args.repeat):
        for batch in args.batches:
            drain = (dsn, args.jobs, batch, args.consumers, args.concurrency)
            ours = trio.run(drain_pools, *drain).rate
            theirs = pgqueuer("drain", dsn, jobs=args.jobs, batch=batch, consumers=args.consumers)
            bound = trio.run(drain_raw, dsn, args.jobs, batch, args.consumers)
            rounds[batch].append((ours, theirs["rate"], bound))
            label = f"{batch}" if args.repeat == 1 else f"{batch} #{round_ + 1}"
            _drain_row(label, ours, theirs["rate"], bound, load())
    if args.repeat > 1:
        # Each side's median over the rounds: one slow round (a vacuum, a busy neighbour)
        # moves it less than it moves a single run.
        print(f"  median of {args.repeat} rounds:")
        for batch, results in rounds.items():
            ours, theirs, bound = (statistics.median(side) for side in zip(*results, strict=True))
            _drain_row(f"{batch}", ours, theirs, bound, "")


def _drain_row(label: str, ours: float, theirs: float, bound: float, note: str) -> None:
    print(
        f"  {label:>7} {ours:>10,.0f} {theirs:>10,.0f} {bound:>10,.0f} "
        f"{ours / theirs:>7.2f} {ours / bound:>9.0%} {theirs / bound:>10.0%}   {note}"
    )
    sys.stdout.flush()


# -- steady ---------------------------------------------------------------------------------


async def steady_trioqueue(
    dsn: str, rate: float, seconds: float, batch: int, consumers: int, concurrency: int
) -> tuple[list[float], int, float]:
    """Enqueue-to-start delays of the jobs a fixed-rate producer enqueued, their count, and
    the seconds the producer took to enqueue them (more than ``seconds``: it fell behind)."""
    delays: list[float] = []

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        delays.append(time.time() - payload["t"])

    config = trioqueue.WorkerConfig(
        handler=handler, queue=QUEUE, concurrency=concurrency, batch_size=batch
    )
    total = round(rate * seconds)
    connections = consumers * (concurrency + 3) + 2
    async with fresh_backend(dsn, max_connections=connections) as backend:
        producer_backend = trioqueue.open_postgres(dsn, schema=backend.schema, max_connections=2)
        async with producer_backend as producer, trio.open_nursery() as nursery:
            for _ in range(consumers):
                await nursery.start(trioqueue.run_worker_pool, backend, config)
            await trio.sleep(0.5)
            sent = 0
            began = trio.current_time()
            while sent < total:
                due = min(total, round((trio.current_time() - began) * rate) + 1)
                if due > sent:
                    await producer.enqueue_many(QUEUE, [{"t": time.time()}] * (due - sent))
                    sent = due
                await trio.sleep_until(began + (sent + 1) / rate)
            produced = trio.current_time() - began
            with trio.move_on_after(GRACE):
                while len(delays) < total:  # noqa: ASYNC110 - a bench, polling is fine
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    return delays, total, produced


def _summary(
    delays: list[float], total: int, produced: float, rate: float, limit: float
) -> tuple[str, bool]:
    """One side's cells at one rate, and whether it kept up: its producer sent at least
    95 % of ``rate`` (a producer falls behind when its process is saturated), every job
    started within the grace, p99 under ``limit``."""
    sent = total / produced if produced else float("inf")
    late = total - len(delays)
    ordered = [*delays, *[float("inf")] * late]  # the late ones sort last: in the p99 tail
    p50, p99 = percentile(ordered, 0.5), percentile(ordered, 0.99)
    p50_text = "late" if p50 == float("inf") else f"{p50 * 1000:.1f}"
    p99_text = "late" if p99 == float("inf") else f"{p99 * 1000:.1f}"
    kept_up = p99 < limit and sent >= 0.95 * rate
    return f"{sent:>7,.0f} {p50_text:>6} {p99_text:>6} {late:>5}", kept_up


def run_steady(dsn: str, args: argparse.Namespace) -> None:
    limit = args.p99_ms / 1000
    print(
        f"steady: a producer at a fixed rate for {args.seconds:g} s per rate, "
        f"{args.consumers} consumers, batch {args.batch} (trioqueue pools: concurrency "
        f"{args.concurrency}); enqueue -> start in ms; late: not started {GRACE:g} s "
        f"after the last enqueue; sent/s: the rate the producer kept"
    )
    print(f"  {'':>7}   {'trioqueue':<27}   {'pgqueuer':<27}")
    columns = f"{'sent/s':>7} {'p50':>6} {'p99':>6} {'late':>5}"
    print(f"  {'jobs/s':>7}   {columns}   {columns}   load")
    best = {"trioqueue": 0.0, "pgqueuer": 0.0}
    going = dict.fromkeys(best, True)
    for rate in args.rates:
        cells = {}
        for side in best:
            if not going[side]:
                cells[side] = f"{'-':>7} {'-':>6} {'-':>6} {'-':>5}"
                continue
            if side == "trioqueue":
                delays, total, produced = trio.run(
                    steady_trioqueue,
                    dsn,
                    rate,
                    args.seconds,
                    args.batch,
                    args.consumers,
                    args.concurrency,
                )
            else:
                result = pgqueuer(
                    "steady",
                    dsn,
                    rate=rate,
                    seconds=args.seconds,
                    batch=args.batch,
                    consumers=args.consumers,
                    grace=GRACE,
                )
                delays, total = result["latencies"], result["enqueued"]
                produced = result["produced_seconds"]
            cells[side], kept_up = _summary(delays, total, produced, rate, limit)
            if kept_up:
                best[side] = rate
            else:
                going[side] = False
        print(f"  {rate:>7,.0f}   {cells['trioqueue']}   {cells['pgqueuer']}   {load()}")
        sys.stdout.flush()
        if not any(going.values()):
            break
    lowest = f"below {min(args.rates):,.0f}/s (the lowest rate tried)"
    said = {side: f"{rate:,.0f}/s" if rate else lowest for side, rate in best.items()}
    ratio = (
        f"ratio {best['trioqueue'] / best['pgqueuer']:.2f}; "
        if best["trioqueue"] and best["pgqueuer"]
        else ""
    )
    print(
        f"  highest rate with p99 < {args.p99_ms:g} ms: trioqueue {said['trioqueue']}, "
        f"pgqueuer {said['pgqueuer']} ({ratio}the ramp's steps bound both)"
    )


# -- processes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drained:
    """A many-process drain: jobs/s overall, and CPU microseconds per job spent by the
    worker processes and by the whole machine (the server's share is the difference,
    less whatever else ran meanwhile: compare with the load)."""

    rate: float
    client_us: float
    machine_us: float

    def cells(self) -> str:
        return f"{self.rate:>7,.0f} {self.client_us:>5,.0f} {self.machine_us:>5,.0f}"


def busy_seconds() -> float:
    """CPU seconds the machine has spent busy since boot (Linux /proc/stat), else nan."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def start_workers(command: list[str], count: int) -> list[subprocess.Popen[str]]:
    """``count`` worker processes, each having printed "ready"."""
    workers = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"a worker process said {line!r} instead of 'ready'")
    return workers


def go(workers: list[subprocess.Popen[str]]) -> tuple[float, float]:
    """Tell every worker to start: the wall-clock time it was told, the machine's CPU."""
    began, busy = time.time(), busy_seconds()
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    return began, busy


def finish(workers: list[subprocess.Popen[str]], began: tuple[float, float], jobs: int) -> Drained:
    """Close the workers' stdin (trioqueue's stop there), read their JSON lines."""
    results = []
    for worker in workers:
        assert worker.stdin is not None
        assert worker.stdout is not None
        worker.stdin.close()
        results.append(json.loads(worker.stdout.read().strip().splitlines()[-1]))
        worker.wait()
    busy = busy_seconds() - began[1]
    ran = sum(result["jobs"] for result in results)
    if ran < jobs:
        raise RuntimeError(f"the worker processes ran {ran} of {jobs} jobs")
    last: float = max(result["last"] for result in results)
    cpu = sum(result["cpu"] for result in results)
    return Drained(jobs / (last - began[0]), cpu / jobs * 1e6, busy / jobs * 1e6)


def per_process_connections(args: argparse.Namespace, direct_processes: int | None) -> int:
    """A trioqueue worker process's pool size: as bench_postgres.py's drain gives its pools,
    capped when ``direct_processes`` processes share the server's connection limit."""
    wanted: int = args.consumers * (args.concurrency + 3) + 2
    if direct_processes is None:
        return wanted
    return min(wanted, DIRECT_CONNECTIONS // direct_processes - 1)


async def processes_trioqueue(
    dsn: str, args: argparse.Namespace, count: int, worker_dsn: str, listen_dsn: str | None
) -> Drained:
    """``count`` trioqueue worker processes draining one queue."""
    per_process = per_process_connections(args, None if listen_dsn else count)
    async with fresh_backend(dsn) as backend:
        await fill(backend, args.jobs)
        command = [sys.executable, __file__, "worker", "--dsn", worker_dsn]
        command += ["--schema", backend.schema, "--max-connections", str(per_process)]
        command += ["--batch", str(args.batch), "--consumers", str(args.consumers)]
        command += ["--concurrency", str(args.concurrency)]
        if listen_dsn is not None:
            command += ["--listen-dsn", listen_dsn]
        workers = await trio.to_thread.run_sync(start_workers, command, count)
        began = go(workers)
        left = f"SELECT count(*) FROM \"{backend.schema}\".jobs WHERE status <> 'succeeded'"
        async with backend.acquire() as connection:
            while await connection.fetchval(left):  # noqa: ASYNC110 - a bench, polling is fine
                await trio.sleep(0.1)
        drained = await trio.to_thread.run_sync(finish, workers, began, args.jobs)
    return drained


def processes_pgqueuer(dsn: str, args: argparse.Namespace, count: int) -> Drained:
    pgqueuer("fill", dsn, jobs=args.jobs)
    command = [sys.executable, SIDE, "worker", "--dsn", dsn]
    command += ["--batch", str(args.batch), "--consumers", str(args.consumers)]
    workers = start_workers(command, count)
    return finish(workers, go(workers), args.jobs)


def run_processes(dsn: str, args: argparse.Namespace) -> None:
    # The tests' PgBouncer harness: one way to start PgBouncer in the repository.
    sys.path.append(str(Path(__file__).resolve().parents[1]))
    from tests._pgbouncer_harness import pgbouncer_binary, run_pgbouncer

    print(
        f"processes: {args.jobs:,} pre-enqueued no-op jobs, one queue, batch {args.batch}; "
        f"each process {args.consumers} consumers (trioqueue pools: concurrency "
        f"{args.concurrency}); jobs/s overall"
    )
    print(f"  {'':>9}   {'trioqueue':<19}   {'via PgBouncer':<19}   {'pgqueuer':<19}")
    columns = f"{'jobs/s':>7} {'CPU/job':>11}"
    print(f"  {'processes':>9}   {columns}   {columns}   {columns}   tq/pgq   load")
    bouncing = pgbouncer_binary() is not None
    if not bouncing:
        print("  (PgBouncer is not installed: its column is left empty)")
    pgbouncer = run_pgbouncer(dsn, "transaction", pool_size=args.pgbouncer_pool)
    with pgbouncer if bouncing else nullcontext("") as bouncer:
        for count in args.processes:
            direct = trio.run(processes_trioqueue, dsn, args, count, dsn, None)
            pooled = (
                trio.run(processes_trioqueue, dsn, args, count, bouncer, dsn).cells()
                if bouncing
                else f"{'-':>19}"
            )
            theirs = processes_pgqueuer(dsn, args, count)
            print(
                f"  {count:>9}   {direct.cells()}   {pooled}   {theirs.cells()}   "
                f"{direct.rate / theirs.rate:>6.2f}   {load()}"
            )
            sys.stdout.flush()
    print(
        "  CPU/job: microseconds of CPU per job in the worker processes, then on the whole\n"
        "  machine (server, workers, anything else): the server's share is about the difference.\n"
        "  Connections per trioqueue process, direct: "
        + ", ".join(f"{per_process_connections(args, n)} with {n}" for n in args.processes)
        + f" (the server's limit is shared); through PgBouncer "
        f"{per_process_connections(args, None)} client connections each, "
        f"{args.pgbouncer_pool} server connections in all; pgqueuer: one per consumer."
    )


# -- a trioqueue worker process (processes) -------------------------------------------------


async def trioqueue_worker(args: argparse.Namespace) -> dict[str, Any]:
    """Print "ready", wait for a line, run the pools until stdin closes; jobs run, last."""
    tally = {"jobs": 0, "last": 0.0}

    async def ran(job: trioqueue.Job) -> None:
        tally["jobs"] += 1
        tally["last"] = time.time()

    config = trioqueue.WorkerConfig(
        handler=noop,
        queue=QUEUE,
        concurrency=args.concurrency,
        batch_size=args.batch,
        on_job_succeeded=ran,
        max_job_duration=600,
        poll_interval=0.5,
    )
    async with trioqueue.open_postgres(
        args.dsn,
        schema=args.schema,
        max_connections=args.max_connections,
        pooling="session" if args.listen_dsn is None else "transaction",
        listen_dsn=args.listen_dsn,
    ) as backend:
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        cpu = time.process_time()
        async with trio.open_nursery() as nursery:
            for _ in range(args.consumers):
                nursery.start_soon(trioqueue.run_worker_pool, backend, config)
            await trio.to_thread.run_sync(sys.stdin.readline)  # "" once stdin closes
            nursery.cancel_scope.cancel()
    return {**tally, "cpu": time.process_time() - cpu}


def run_worker(args: argparse.Namespace) -> None:
    print(json.dumps(trio.run(trioqueue_worker, args)), flush=True)


# -- main -----------------------------------------------------------------------------------


FIGURES: dict[str, Callable[[str, argparse.Namespace], None]] = {
    "drain": run_drain,
    "steady": run_steady,
    "processes": run_processes,
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("which", choices=[*FIGURES, "worker"], help="worker: internal")
    parser.add_argument("--dsn", help="default: $TRIOQUEUE_DSN or the local server")
    parser.add_argument("--jobs", type=int, default=20_000, help="drain, processes: jobs")
    parser.add_argument("--consumers", type=int, default=5, help="consumers (per process)")
    parser.add_argument("--concurrency", type=int, default=2, help="trioqueue: batches per pool")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 10, 50], help="drain")
    parser.add_argument(
        "--repeat", type=int, default=1, help="drain: rounds, each side's median printed too"
    )
    parser.add_argument("--batch", type=int, default=10, help="steady, processes: batch size")
    parser.add_argument(
        "--rates", type=float, nargs="+", default=[500, 1000, 2000, 3000, 4000, 6000, 8000]
    )
    parser.add_argument("--seconds", type=float, default=10, help="steady: seconds per rate")
    parser.add_argument("--p99-ms", type=float, default=100, help="steady: the p99 limit")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--pgbouncer-pool", type=int, default=20, help="server connections")
    # worker (internal): one process of the processes figure
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    parser.add_argument("--max-connections", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--listen-dsn", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    if args.which == "worker":
        run_worker(args)
        return
    with find_postgres(args.dsn or os.environ.get("TRIOQUEUE_DSN")) as (server, where):
        dsn = fast_commits(server)
        with pgqueuer_database(dsn) as server_version:
            header(where, server_version)
            FIGURES[args.which](dsn, args)


if __name__ == "__main__":
    main()
