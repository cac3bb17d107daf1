"""pgqueuer's side of bench_vs_pgqueuer.py: asyncio and uvloop, in an interpreter of its own.

bench_vs_pgqueuer.py starts this script as a subprocess (never while trioqueue is being
measured) and reads one JSON line from it. It runs in its own interpreter because
trio-asyncio, which trioqueue imports, changes asyncio's event loop policy for the whole
process; here asyncio runs on uvloop alone, as pgqueuer's own benchmark runs it.

pgqueuer is driven through its public API only, the way its ``tools/benchmark.py`` drives
it: one asyncpg connection per consumer (``AsyncpgDriver``), one ``PgQueuer`` per consumer,
an async entrypoint per job, ``run(batch_size=..., mode=...)``; its queue, log and
statistics tables emptied before each run (a growing log slows its drain down).

    python _pgqueuer_side.py setup    --dsn DSN          # create the database, install
    python _pgqueuer_side.py teardown --dsn DSN          # drop the database
    python _pgqueuer_side.py drain    --dsn DSN --jobs N --batch B --consumers C
    python _pgqueuer_side.py steady   --dsn DSN --rate R --seconds S --batch B --consumers C
    python _pgqueuer_side.py fill     --dsn DSN --jobs N
    python _pgqueuer_side.py worker   --dsn DSN --batch B --consumers C
        (prints "ready", waits for a line on stdin, drains, prints its JSON line)

``--dsn`` is the server's; the database used is :data:`DATABASE` on that server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import uvloop
from pgqueuer import AsyncpgDriver, PgQueuer, Queries
from pgqueuer.types import QueueExecutionMode

#: pgqueuer's tables have fixed names: a database of their own keeps them apart from ours.
DATABASE = "trioqueue_bench_pgq"
ENTRYPOINT = "noop"
ENQUEUE_CHUNK = 5000


def database_dsn(dsn: str, database: str = DATABASE) -> str:
    """``dsn`` with its database replaced by ``database``."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


async def setup(dsn: str) -> dict[str, Any]:
    """Create :data:`DATABASE` afresh and install pgqueuer's schema into it."""
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        await admin.execute(f"CREATE DATABASE {DATABASE}")
        server_version = await admin.fetchval("SHOW server_version")
    finally:
        await admin.close()
    connection = await asyncpg.connect(database_dsn(dsn))
    try:
        await Queries(AsyncpgDriver(connection)).install()
    finally:
        await connection.close()
    return {"database": DATABASE, "server_version": server_version}


async def teardown(dsn: str) -> dict[str, Any]:
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    finally:
        await admin.close()
    return {}


async def fill(dsn: str, jobs: int, payload: Callable[[], bytes | None] = lambda: None) -> None:
    """Empty the queue, log and statistics tables, then enqueue ``jobs`` jobs."""
    connection = await asyncpg.connect(database_dsn(dsn))
    try:
        queries = Queries(AsyncpgDriver(connection))
        await queries.clear_queue()
        await queries.clear_queue_log()
        await queries.clear_statistics_log()
        for start in range(0, jobs, ENQUEUE_CHUNK):
            n = min(ENQUEUE_CHUNK, jobs - start)
            await queries.enqueue([ENTRYPOINT] * n, [payload() for _ in range(n)], [0] * n)
    finally:
        await connection.close()


async def consumers(
    dsn: str, count: int, handler: Callable[[Any], Awaitable[None]]
) -> tuple[list[Any], list[Any]]:
    """``count`` PgQueuer instances, each on its own connection, ``handler`` registered."""
    connections = [await asyncpg.connect(database_dsn(dsn)) for _ in range(count)]
    queuers = []
    for connection in connections:
        pgq = PgQueuer(AsyncpgDriver(connection))
        pgq.entrypoint(ENTRYPOINT)(handler)
        queuers.append(pgq)
    return queuers, connections


class Tally:
    """Jobs run and the wall-clock time the last one ran."""

    def __init__(self) -> None:
        self.jobs = 0
        self.last = 0.0

    async def noop(self, job: Any) -> None:
        self.jobs += 1
        self.last = time.time()


async def run_drain(dsn: str, queuers: list[Any], batch: int, tally: Tally) -> float:
    """Run ``queuers`` in drain mode to the end; seconds from start to the last exit."""
    began = time.perf_counter()
    await asyncio.gather(
        *(pgq.run(batch_size=batch, mode=QueueExecutionMode.drain) for pgq in queuers)
    )
    return time.perf_counter() - began


async def drain(dsn: str, jobs: int, batch: int, count: int) -> dict[str, Any]:
    """Jobs/s of ``count`` consumers draining ``jobs`` pre-enqueued no-op jobs."""
    await fill(dsn, jobs, lambda: b"")
    tally = Tally()
    queuers, connections = await consumers(dsn, count, tally.noop)
    try:
        elapsed = await run_drain(dsn, queuers, batch, tally)
    finally:
        for connection in connections:
            await connection.close()
    if tally.jobs < jobs:
        raise RuntimeError(f"pgqueuer ran {tally.jobs} of {jobs} jobs")
    return {"rate": jobs / elapsed, "jobs": tally.jobs}


async def steady(
    dsn: str, rate: float, seconds: float, batch: int, count: int, grace: float
) -> dict[str, Any]:
    """Enqueue ``rate`` jobs/s for ``seconds`` while ``count`` consumers run continuously;
    each job's enqueue -> start latency (the enqueue time travels in its payload)."""
    await fill(dsn, 0)
    latencies: list[float] = []

    async def handler(job: Any) -> None:
        (enqueued,) = struct.unpack("!d", job.payload)
        latencies.append(time.time() - enqueued)

    queuers, connections = await consumers(dsn, count, handler)
    producer_connection = await asyncpg.connect(database_dsn(dsn))
    producer = Queries(AsyncpgDriver(producer_connection))
    runs = [asyncio.ensure_future(pgq.run(batch_size=batch)) for pgq in queuers]
    try:
        await asyncio.sleep(0.5)  # let the consumers start and LISTEN
        loop = asyncio.get_running_loop()
        sent = 0
        began = loop.time()
        total = round(rate * seconds)
        while sent < total:
            due = min(total, round((loop.time() - began) * rate) + 1)
            if due > sent:
                n = due - sent
                stamp = struct.pack("!d", time.time())
                await producer.enqueue([ENTRYPOINT] * n, [stamp] * n, [0] * n)
                sent = due
            await asyncio.sleep(max(0.0, began + (sent + 1) / rate - loop.time()))
        produced = loop.time() - began
        deadline = loop.time() + grace
        while len(latencies) < total and loop.time() < deadline:  # noqa: ASYNC110 - a bench
            await asyncio.sleep(0.01)
    finally:
        for pgq in queuers:
            pgq.shutdown.set()
        await asyncio.gather(*runs, return_exceptions=True)
        for connection in [*connections, producer_connection]:
            await connection.close()
    return {"enqueued": total, "latencies": latencies, "produced_seconds": produced}


async def worker(dsn: str, batch: int, count: int) -> dict[str, Any]:
    """One process of the many-process drain: ready, wait for the word, drain."""
    tally = Tally()
    queuers, connections = await consumers(dsn, count, tally.noop)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    cpu = time.process_time()
    try:
        await run_drain(dsn, queuers, batch, tally)
    finally:
        for connection in connections:
            await connection.close()
    return {"jobs": tally.jobs, "last": tally.last, "cpu": time.process_time() - cpu}


async def _fill(dsn: str, jobs: int) -> dict[str, Any]:
    await fill(dsn, jobs, lambda: b"")
    return {"jobs": jobs}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("which", choices=["setup", "teardown", "drain", "steady", "fill", "worker"])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--consumers", type=int, default=5)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--grace", type=float, default=10, help="steady: wait for late jobs")
    args = parser.parse_args(argv)
    calls: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
        "setup": lambda: setup(args.dsn),
        "teardown": lambda: teardown(args.dsn),
        "drain": lambda: drain(args.dsn, args.jobs, args.batch, args.consumers),
        "steady": lambda: steady(
            args.dsn, args.rate, args.seconds, args.batch, args.consumers, args.grace
        ),
        "fill": lambda: _fill(args.dsn, args.jobs),
        "worker": lambda: worker(args.dsn, args.batch, args.consumers),
    }

    async def call() -> dict[str, Any]:
        return await calls[args.which]()

    result = uvloop.run(call())
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
