"""What a read replica costs and gives, on a real streaming pair (numbers, never asserts).

    python bench/bench_replica.py                    # a private primary and replica
    python bench/bench_replica.py --jobs 50000 --reads 500
    python bench/bench_replica.py --primary DSN --replica DSN

Without DSNs it starts a private primary and its ``pg_basebackup -R`` replica on free ports
(tests/_replica_harness.py; PostgreSQL's server binaries needed). It fills a schema with
``--jobs`` jobs, then times ``--reads`` dashboard-like reads (``list_jobs(limit=50)``,
``count_jobs``, ``queue_stats``) through a backend opened four ways: without a replica,
reading the replica, reading it with ``max_read_lag`` (one more statement per read), and
with the replica's DSN pointing nowhere (every read falls back to the primary). Then the
staleness: how long after an enqueue commits on the primary the replica lists the job.
"""

from __future__ import annotations

import argparse
import secrets
import socket
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import trio

import trioqueue

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ (the harness)
from tests._replica_harness import Replicated, run_replicated

Q = "bench"


def _nowhere() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"  # closed again: nobody listens


async def _fill(dsn: str, schema: str, jobs: int) -> None:
    """``jobs`` ready jobs, then VACUUM ANALYZE (hint bits set, statistics fresh), so that
    the first way timed does not pay for the fill."""
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()
        for start in range(0, jobs, 1000):
            await backend.enqueue_many(Q, [{"n": n} for n in range(start, min(jobs, start + 1000))])
        async with backend.acquire() as connection:
            await connection.execute(f"VACUUM ANALYZE {schema}.jobs")


async def _time_reads(dsn: str, schema: str, reads: int, **options: Any) -> dict[str, Any]:
    async with trioqueue.open_postgres(dsn, schema=schema, **options) as backend:
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("list_jobs", lambda: backend.list_jobs(queue=Q, limit=50, sort="-id")),
            ("count_jobs", lambda: backend.count_jobs(queue=Q)),
            ("queue_stats", backend.queue_stats),
        ]
        for _, call in calls * 10:  # warm: connections opened, statements prepared, cached
            await call()
        times: dict[str, list[float]] = {name: [] for name, _ in calls}
        for _ in range(reads):
            for name, call in calls:
                start = time.perf_counter()
                await call()
                times[name].append(time.perf_counter() - start)
        stats = backend.statistics()
    return {"times": times, "replica_reads": stats.get("replica_reads")}


async def _staleness(primary: str, replica: str, schema: str, rounds: int) -> list[float]:
    """Seconds from an enqueue's commit on the primary until the replica lists the job
    (polled every millisecond: a measurement, not a test). The enqueues commit with
    ``synchronous_commit = on``: the private primary's default (off, for the tests) leaves
    a commit to the WAL writer, up to 200 ms later, before it can be sent."""
    seen: list[float] = []
    flushed = primary + ("&" if "?" in primary else "?") + "synchronous_commit=on"
    async with trioqueue.open_postgres(flushed, schema=schema, read_dsn=replica) as backend:
        for _ in range(rounds):
            job_id = await backend.enqueue(Q + "_stale", None)
            start = time.perf_counter()
            # Another server's replay sends no event to wait for: poll.
            while [  # noqa: ASYNC110
                j.id for j in await backend.list_jobs(queue=Q + "_stale", limit=1, sort="-id")
            ] != [job_id]:
                await trio.sleep(0.001)
            seen.append(time.perf_counter() - start)
    return seen


def _ms(values: Sequence[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:6.2f} ms  p99 {p99 * 1000:6.2f} ms"


async def main(primary: str, replica: str, jobs: int, reads: int) -> None:
    schema = "bench_replica_" + secrets.token_hex(4)
    await _fill(primary, schema, jobs)
    # Let the replica catch up with the fill before anything is timed on it.
    async with trioqueue.open_postgres(
        primary, schema=schema, read_dsn=replica, max_read_lag=0
    ) as backend:
        with trio.fail_after(60):
            while backend.statistics()["replica_reads"] == 0:
                await backend.count_jobs()
                await trio.sleep(0.05)
    ways: list[tuple[str, dict[str, Any]]] = [
        ("primary only", {}),
        ("replica", {"read_dsn": replica}),
        ("replica, max_read_lag=5", {"read_dsn": replica, "max_read_lag": 5}),
        ("replica down: fallback", {"read_dsn": _nowhere()}),
    ]
    print(f"{jobs} jobs, {reads} reads of each call per way")
    for label, options in ways:
        result = await _time_reads(primary, schema, reads, **options)
        print(f"{label}  (replica answered {result['replica_reads']})")
        for name, values in result["times"].items():
            print(f"    {name:<12} {_ms(values)}")
    stale = await _staleness(primary, replica, schema, 50)
    print(f"staleness (enqueue committed -> listed on the replica): {_ms(stale)}")


def _pair(args: argparse.Namespace) -> AbstractContextManager[Replicated | None]:
    if args.primary and args.replica:
        return nullcontext(None)
    return run_replicated()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--primary", help="the primary's DSN (default: start a private pair)")
    parser.add_argument("--replica", help="its streaming replica's DSN")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()
    with _pair(args) as pair:
        primary = args.primary if pair is None else pair.primary_dsn
        replica = args.replica if pair is None else pair.replica_dsn
        trio.run(main, primary, replica, args.jobs, args.reads)
