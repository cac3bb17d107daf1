"""Benchmarks of the dashboard over PostgreSQL (numbers, never asserts).

    python bench/bench_web.py events --streams 1 10 100 --watched 200 --seconds 10
    python bench/bench_web.py lists --jobs 20 --megabytes 5

events: N clients of ``/api/events``, each following ``--watched`` jobs of its own
        (``?jobs=``), driven as raw ASGI calls on the app (each client from its own
        address, as N browsers), for ``--seconds`` after a warm-up of 8 s -> the
        statements per second the streams made the backend run (``statistics().calls``:
        one per statement), the bytes the streams received, and how long a ``GET /api/queues``
        took meanwhile (median of one every 0.5 s).
lists:  ``--jobs`` jobs of ``--megabytes`` MB of payload each, then one ``GET /jobs`` and
        one ``GET /api/jobs?limit=20`` through the app in this process -> the process's
        peak RSS growth over each request (``ru_maxrss``, so run each in a fresh process:
        ``lists`` does the page first), and each response's body size.

The server: ``--dsn``, else ``$TRIOQUEUE_DSN``, else the local one at 127.0.0.1:5432.
Each run uses a fresh schema ``trioqueue_bench_<hex>``, dropped afterwards. To compare
with another checkout, run this file with that checkout first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio

import trioqueue
from trioqueue.web import create_app

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
QUEUE = "bench"
#: Seconds before counting: 200 followed jobs take four ticks of 50 events to send.
WARM_UP = 8.0


@asynccontextmanager
async def fresh_backend(dsn: str) -> AsyncIterator[trioqueue.PostgresBackend]:
    """A backend on a new, migrated schema, dropped at the end."""
    schema = f"trioqueue_bench_{secrets.token_hex(4)}"
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()
        try:
            yield backend
        finally:
            with trio.CancelScope(shield=True):
                async with backend.acquire() as connection:
                    await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- events -------------------------------------------------------------------------------


def _scope(query: str, client: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/events",
        "raw_path": b"/api/events",
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": (client, 40000),
        "server": ("127.0.0.1", 80),
    }


async def _stream(app: Any, query: str, client: str, hang_up: trio.Event, got: list[int]) -> None:
    async def receive() -> dict[str, Any]:
        await hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        got[0] += len(message.get("body", b""))
        if message["type"] == "http.response.start" and message["status"] != 200:
            raise SystemExit(f"the stream was refused: {message['status']}")

    await app(_scope(query, client), receive, send)


def _statements(backend: trioqueue.PostgresBackend) -> int:
    return sum(backend.statistics().calls.values())


async def events(dsn: str, streams: int, watched: int, seconds: float) -> tuple[float, int, float]:
    async with fresh_backend(dsn) as backend:
        ids = []
        for _ in range(streams):
            ids.append(await backend.enqueue_many(QUEUE, [{"n": 1}] * watched))
        app = create_app(backend)
        hang_up = trio.Event()
        got = [0]
        async with trio.open_nursery() as nursery:
            for n, own in enumerate(ids):
                query = "jobs=" + ",".join(map(str, own))
                client = f"10.0.{n // 250}.{n % 250 + 1}"
                nursery.start_soon(_stream, app, query, client, hang_up, got)
            await trio.sleep(WARM_UP)  # every stream connected and its first events sent
            before, received = _statements(backend), got[0]
            waits = await _request_times(app, seconds)
            # Less the requests' own statements (one queue_stats each).
            after, received = _statements(backend) - len(waits), got[0] - received
            hang_up.set()
        return (after - before) / seconds, received, statistics.median(waits)


async def _request_times(app: Any, seconds: float) -> list[float]:
    """``GET /api/queues`` once every 0.5 s for ``seconds``: how long each took (what
    another page waits while the streams run)."""
    waits = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        end = trio.current_time() + seconds
        while trio.current_time() < end:
            start = time.perf_counter()
            (await c.get("/api/queues")).raise_for_status()
            waits.append(time.perf_counter() - start)
            await trio.sleep_until(min(end, trio.current_time() + 0.5))
    return waits


# -- lists --------------------------------------------------------------------------------


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def lists(dsn: str, jobs: int, megabytes: float) -> None:
    async with fresh_backend(dsn) as backend:
        await backend.enqueue_many(QUEUE, [{}] * jobs)
        # The big payloads are made by the server, so this process never holds one.
        async with backend.acquire() as connection:
            await connection.execute(
                f'UPDATE "{backend.schema}".jobs'
                " SET payload = jsonb_build_object('n', id, 'blob', repeat('x', $1::int))",
                int(megabytes * 1024 * 1024),
            )
        app = create_app(backend)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            for path in ("/jobs", "/api/jobs?limit=20"):
                peak = _peak_rss()
                r = await c.get(path)
                grown = _peak_rss() - peak
                print(
                    f"GET {path}: {r.status_code}, body {len(r.content) / 1e6:.2f} MB,"
                    f" peak RSS +{grown / 1e6:.1f} MB"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("TRIOQUEUE_DSN", DEFAULT_DSN))
    commands = parser.add_subparsers(dest="command", required=True)
    ev = commands.add_parser("events")
    ev.add_argument("--streams", type=int, nargs="+", default=[1, 10, 100])
    ev.add_argument("--watched", type=int, default=200)
    ev.add_argument("--seconds", type=float, default=10.0)
    ls = commands.add_parser("lists")
    ls.add_argument("--jobs", type=int, default=20)
    ls.add_argument("--megabytes", type=float, default=5.0)
    args = parser.parse_args()
    if args.command == "events":
        for n in args.streams:
            rate, received, wait = trio.run(events, args.dsn, n, args.watched, args.seconds)
            print(
                f"{n:4d} streams x {args.watched} watched ids: {rate:8.1f} statements/s,"
                f" {received / args.seconds / 1e3:.1f} kB/s to the clients,"
                f" GET /api/queues meanwhile {wait * 1e3:.0f} ms (median)"
            )
    else:
        trio.run(lists, args.dsn, args.jobs, args.megabytes)


if __name__ == "__main__":
    main()
