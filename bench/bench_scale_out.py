"""Many worker processes against one database: throughput, connections and the database's
CPU for 1, 2, 4 and 8 ``trioqueue worker`` processes (numbers, never asserts; the figures
of docs/howto/beyond-one-server.rst).

    python bench/bench_scale_out.py                          # 1 2 4 8 processes, 20,000 jobs
    python bench/bench_scale_out.py --processes 1 4 --jobs 50000 --batch-size 50

Each round, on a schema of its own: the queue is paused, ``--jobs`` no-op jobs are enqueued,
N worker processes start (``--concurrency``, ``--batch-size``) and say they are claiming,
then the queue is resumed and the clock runs until every job has succeeded. Printed per
round: jobs/s over the drain; the server connections of the schema's processes (the most
seen in ``pg_stat_activity``, sampled every 0.2 s); and the CPU seconds the server spent for
them (user + system time of those server processes, from ``/proc/PID/stat``, where the
server runs on this machine), per 1,000 jobs. The workers run with ``synchronous_commit=off``
(a DSN parameter) unless ``--durable``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import trio

import trioqueue
from trioqueue._backends.postgres.embedded import fast_commits, find_postgres

ROOT = Path(__file__).resolve().parents[1]
APP = "async def noop(payload, ctx):\n    return None\n"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (None: gone, or not on this machine)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


class Sampler:
    """The schema's server processes: the most connections seen, and their CPU time."""

    def __init__(self, backend: trioqueue.PostgresBackend, schema: str) -> None:
        self.backend = backend
        self.name = f"trioqueue:{schema}"
        self.most = 0
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}

    async def sample(self) -> None:
        async with self.backend.acquire() as connection:
            rows = await connection.fetch(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> "
                "pg_backend_pid()",
                self.name,
            )
        self.most = max(self.most, len(rows))
        for row in rows:
            seconds = cpu_seconds(row["pid"])
            if seconds is not None:
                self.first.setdefault(row["pid"], seconds)
                self.last[row["pid"]] = seconds

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.sample()
        task_status.started()
        while True:
            await trio.sleep(0.2)
            await self.sample()

    def cpu(self) -> float:
        return sum(self.last[pid] - self.first[pid] for pid in self.last)


async def one_round(dsn: str, args: argparse.Namespace, processes: int, app: Path) -> str:
    schema = "bench_scale_" + secrets.token_hex(4)
    worker_dsn = dsn if args.durable else fast_commits(dsn)
    # One connection: the sampler excludes its own (pg_backend_pid), so the count is the
    # workers' alone.
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        await backend.migrate()
        try:
            await backend.pause_queue("bench")
            for start in range(0, args.jobs, 5000):
                count = min(5000, args.jobs - start)
                await backend.enqueue_many("bench", [{}] * count)
            workers = await start_workers(worker_dsn, schema, args, processes, app)
            try:
                async with trio.open_nursery() as nursery:
                    sampler = Sampler(backend, schema)
                    await nursery.start(sampler.run)
                    began = time.perf_counter()
                    await backend.resume_queue("bench")
                    await wait_drained(backend, args.jobs)
                    took = time.perf_counter() - began
                    await sampler.sample()
                    nursery.cancel_scope.cancel()
            finally:
                stop_workers(workers)
        finally:
            async with backend.acquire() as connection:
                await connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
    cpu = sampler.cpu()
    return (
        f"{processes:>9} | {args.jobs / took:>8,.0f} | {sampler.most:>11} | "
        f"{cpu:>7.1f} | {1000 * cpu / args.jobs:>12.2f}"
    )


async def start_workers(
    dsn: str, schema: str, args: argparse.Namespace, count: int, app: Path
) -> list[subprocess.Popen[bytes]]:
    workers = spawn(dsn, schema, args, count, app)
    for worker in workers:  # each says so once its pool is claiming
        assert worker.stdout is not None
        line = await trio.to_thread.run_sync(worker.stdout.readline)
        if b"Ctrl-C to stop" not in line:
            stop_workers(workers)
            raise RuntimeError(f"a worker did not start: {line!r}")
    return workers


def spawn(
    dsn: str, schema: str, args: argparse.Namespace, count: int, app: Path
) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(app.parent)])}
    command = [
        sys.executable, "-m", "trioqueue", "worker", "--dsn", dsn, "--schema", schema,
        "scale_app:noop", "--queue", "bench", "--concurrency", str(args.concurrency),
        "--batch-size", str(args.batch_size), "--max-job-duration", "60",
    ]  # fmt: skip
    workers = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        for _ in range(count)
    ]
    return workers


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        worker.wait(60)


async def wait_drained(backend: trioqueue.PostgresBackend, jobs: int) -> None:
    while True:
        async with backend.acquire() as connection:
            done = await connection.fetchval(
                f"SELECT count(*) FROM \"{backend.schema}\".jobs WHERE status = 'succeeded'"
            )
        if done >= jobs:
            return
        await trio.sleep(0.05)


async def run(dsn: str, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        app = Path(folder) / "scale_app.py"
        app.write_text(APP)
        print(
            f"{args.jobs:,} no-op jobs, concurrency {args.concurrency}, batch "
            f"{args.batch_size}, {'durable' if args.durable else 'synchronous_commit=off'}"
        )
        print("processes |   jobs/s | connections | cpu (s) | cpu s/1k job")
        for processes in args.processes:
            print(await one_round(dsn, args, processes, app), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="default: $TRIOQUEUE_DSN, else a local server")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--durable", action="store_true", help="synchronous_commit as set")
    args = parser.parse_args(argv)
    with find_postgres(args.dsn or os.environ.get("TRIOQUEUE_DSN")) as (dsn, where):
        print(f"PostgreSQL: {where}")
        trio.run(run, dsn, args)


if __name__ == "__main__":
    main()
