"""How soon a retried job runs again once its backoff ends, on PostgreSQL (numbers, never
asserts).

    python bench/bench_retry_wake.py                   # backoff 1.08 s, poll 5 s, 3 rounds
    python bench/bench_retry_wake.py --backoff 0.5 --poll 10 --rounds 5

Each round, on a schema of its own, one pool runs one job whose first attempt fails and is
retried after ``--backoff`` seconds; it prints the time from the retry being recorded
(``on_job_retry``) to the second attempt starting. The pool that wrote the retry wakes its
claim loop when the backoff runs out (docs/usage.rst, "When a pool claims"); before, the
second attempt waited for the next poll, up to ``--poll`` seconds.
"""

from __future__ import annotations

import argparse
import os
import secrets
from collections.abc import Sequence
from typing import Any

import trio

import trioqueue
from trioqueue._backends.postgres.embedded import find_postgres


async def one_round(dsn: str, backoff: float, poll: float) -> float:
    schema = "bench_retry_" + secrets.token_hex(4)
    starts: list[float] = []
    retried: list[float] = []
    done = trio.Event()

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        starts.append(trio.current_time())
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt fails")

    async def on_retry(job: trioqueue.Job, delay: float) -> None:
        retried.append(trio.current_time())

    async def on_succeeded(job: trioqueue.Job) -> None:
        done.set()

    config = trioqueue.WorkerConfig(
        handler=handler,
        queue="retry",
        poll_interval=poll,
        max_job_duration=60,
        backoff=lambda attempt: backoff,
        on_job_retry=on_retry,
        on_job_succeeded=on_succeeded,
    )
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(trioqueue.run_worker_pool, backend, config)
                await backend.enqueue("retry", {})
                with trio.fail_after(backoff + poll + 30):
                    await done.wait()
                nursery.cancel_scope.cancel()
        finally:
            async with backend.acquire() as connection:
                await connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return starts[1] - retried[0]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", help="default: $TRIOQUEUE_DSN, the local server, or embedded")
    parser.add_argument("--backoff", type=float, default=1.08)
    parser.add_argument("--poll", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with find_postgres(args.dsn or os.environ.get("TRIOQUEUE_DSN")) as (dsn, where):
        print(f"server: {where}; backoff {args.backoff:g} s, poll_interval {args.poll:g} s")
        for _ in range(args.rounds):
            waited = trio.run(one_round, dsn, args.backoff, args.poll)
            print(f"retry recorded -> next attempt started: {waited:.3f} s")


if __name__ == "__main__":
    main()
