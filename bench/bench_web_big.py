"""The dashboard and the JSON API over a big table of finished jobs (numbers, never asserts).

    python bench/_fill.py --schema reads_1m --rows 1000000 --migrate     # once per size
    python bench/bench_web_big.py --schema reads_1m --repeat 20
    python bench/bench_web_big.py --schema reads_empty --repeat 20        # a migrated, empty one

Each page and API call of the dashboard is asked ``--repeat`` times (after one warm-up
request; fewer once they took ``--budget`` seconds: column n) through the ASGI app in this process (httpx), on the schema given (filled by
``bench/_fill.py``, or empty); prints per request its status, p50 and p95 in milliseconds
and the body size. The requests are the ones an operator makes: the overview, the jobs list
(each sort, a state filter, a queue filter, a search, a deep offset, and a keyset page
after a cursor), a queue's page, a job's page, workers, schedules, table health, and the
API's equivalents. To compare with another checkout, run this file with that checkout
first on ``PYTHONPATH`` (requests it does not know answer 400, shown as such).

The server: ``--dsn``, else ``$TRIOQUEUE_DSN``, else the local one at 127.0.0.1:5432.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Sequence

import httpx
import trio

import trioqueue
from trioqueue.web import create_app

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
#: bench/_fill.py's first queue.
QUEUE = "bench"


def requests(job_id: int) -> list[str]:
    """The paths asked, in order (``job_id``: a job of the fill, for the job pages)."""
    return [
        "/",
        "/jobs",
        "/jobs?sort=id",
        "/jobs?sort=-created_at",
        "/jobs?sort=-priority",
        "/jobs?sort=-finished_at",
        "/jobs?status=succeeded",
        "/jobs?status=failed&cancelled=true",
        "/jobs?status=ready",
        f"/jobs?queue={QUEUE}",
        f"/jobs?queue={QUEUE}&status=failed",
        "/jobs?q=upstream",
        "/jobs?q=no-such-text",
        "/jobs?offset=500000",
        f"/queues/{QUEUE}",
        f"/jobs/{job_id}",
        "/workers",
        "/schedules",
        "/tables",
        "/api/queues",
        "/api/jobs?limit=50",
        "/api/jobs?limit=50&status=succeeded",
        f"/api/jobs?limit=50&queue={QUEUE}&sort=-finished_at",
        "/api/jobs?limit=50&offset=500000",
        f"/api/jobs/{job_id}",
        f"/api/jobs/{job_id}/attempts",
        f"/api/queues/{QUEUE}/timings",
        f"/api/queues/{QUEUE}/history",
        "/api/workers",
        "/api/schedules",
        "/api/tables",
        "/metrics",
    ]


async def _time(
    client: httpx.AsyncClient, path: str, repeat: int, budget: float
) -> tuple[int, list[float], int]:
    """``repeat`` timed requests after a warm-up (plans cached, pages in shared buffers),
    fewer when they have taken ``budget`` seconds already (a page of many seconds)."""
    response = await client.get(path)
    took: list[float] = []
    spent = time.perf_counter()
    for _ in range(repeat):
        start = time.perf_counter()
        response = await client.get(path)
        took.append((time.perf_counter() - start) * 1000)
        if time.perf_counter() - spent > budget:
            break
    return response.status_code, took, len(response.content)


def _p95(took: list[float]) -> float:
    return statistics.quantiles(took, n=20, method="inclusive")[-1] if len(took) > 1 else took[0]


async def _next_page(client: httpx.AsyncClient) -> str | None:
    """The jobs API's cursor path for the page after the first, when the API gives one."""
    body = (await client.get("/api/jobs?limit=50&sort=-id")).json()
    cursor = body.get("next_cursor")
    return f"/api/jobs?limit=50&sort=-id&after={cursor}" if cursor else None


async def run(dsn: str, schema: str, repeat: int, budget: float, skip: list[str]) -> None:
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        async with backend.acquire() as connection:
            rows = await connection.fetchval(
                f"SELECT reltuples::bigint FROM pg_class WHERE oid = '\"{schema}\".jobs'::regclass"
            )
            job_id = await connection.fetchval(
                f'SELECT coalesce(max(id) / 2, 1) FROM "{schema}".jobs'
            )
        print(f"schema {schema}: ~{max(rows, 0):,} rows in jobs; {repeat} requests each")
        app = create_app(backend)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", timeout=120
        ) as client:
            paths = [p for p in requests(job_id) if not any(s in p for s in skip)]
            keyset = await _next_page(client)
            if keyset is not None:
                paths.append(keyset)
            print(f"{'request':<58} {'code':>4} {'p50 ms':>9} {'p95 ms':>9} {'n':>3} {'bytes':>9}")
            for path in paths:
                code, took, size = await _time(client, path, repeat, budget)
                shown = path if len(path) <= 58 else path[:55] + "..."
                print(
                    f"{shown:<58} {code:>4} {statistics.median(took):>9.1f} "
                    f"{_p95(took):>9.1f} {len(took):>3} {size:>9,}",
                    flush=True,
                )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("TRIOQUEUE_DSN", DEFAULT_DSN))
    parser.add_argument("--schema", required=True, help="a migrated schema (bench/_fill.py)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--budget", type=float, default=20.0, help="seconds of timed requests per path at most"
    )
    parser.add_argument(
        "--skip", nargs="*", default=[], help="leave out the requests containing these texts"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    trio.run(run, args.dsn, args.schema, args.repeat, args.budget, args.skip)


if __name__ == "__main__":
    main()
