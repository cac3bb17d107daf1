"""Dependencies on PostgreSQL (docs/protocol.rst §21): numbers, never asserts.

    python bench/bench_dependencies.py chain --jobs 1000     # ms per link of a chain
    python bench/bench_dependencies.py fan-in --jobs 10000   # one job after 10,000
    python bench/bench_dependencies.py ack --rounds 200      # ordinary acks, with/without
    python bench/bench_dependencies.py tree --jobs 10000     # fan-out and fan-in (§22)

``chain``: job k depends on job k-1; one pool (concurrency 1, ``poll_interval`` 60 s, so
a link that waited for a poll would show) runs them; prints the time from the first job's
start to the last one's success, per link, and the statements per job.

``fan-in``: ``--jobs`` jobs in one ``enqueue_many``, then one job depending on all of them
(one statement, which locks every dependency's row); a pool of 4 x 50 drains them and the
join runs last. Prints the join's enqueue, and the time to drain and join.

``ack``: the ack of a batch of 50 ordinary jobs (no dependents) on two schemas, in
alternating rounds: one migrated as shipped, acked by the ``ack`` statement; the other
as before dependencies, with migration 0018's triggers dropped and acked by the ``ack``
statement without its ``settled`` CTE. The median and p90 ms per ack statement of each.

``tree`` (docs/protocol.rst §22): a running parent enqueues ``--jobs`` children under it
(fan-out, one ``enqueue_many``), then waits for them (one ``await_children`` statement,
which locks every child's row and writes an edge per child); a pool of 4 x 50 drains the
children and the parent's continuation is claimed once the last one succeeded (fan-in).
Prints each step's time and the statements per child (every statement the backend sent,
by name, divided by the children).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

import trioqueue
from trioqueue._backends.postgres.embedded import find_postgres
from trioqueue._backends.postgres.sql import QUERIES, render
from trioqueue._types import ChildWaitWrite


@asynccontextmanager
async def fresh_schema(dsn: str, prefix: str, **options: Any) -> AsyncIterator[Any]:
    schema = f"bench_{prefix}_" + secrets.token_hex(4)
    async with trioqueue.open_postgres(dsn, schema=schema, **options) as backend:
        await backend.migrate()
        try:
            yield backend
        finally:
            async with backend.acquire() as connection:
                await connection.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def run_until(
    backend: Any, config: trioqueue.WorkerConfig, done: trio.Event, limit: float
) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config)
        with trio.fail_after(limit):
            await done.wait()
        nursery.cancel_scope.cancel()


async def chain(dsn: str, jobs: int) -> None:
    async with fresh_schema(dsn, "chain") as backend:
        ids = [await backend.enqueue("chain", 0)]
        for n in range(1, jobs):
            ids.append(await backend.enqueue("chain", n, depends_on=[ids[-1]]))
        starts: list[float] = []
        done = trio.Event()
        last = ids[-1]

        async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
            starts.append(trio.current_time())

        async def on_succeeded(job: trioqueue.Job) -> None:
            if job.id == last:
                done.set()

        config = trioqueue.WorkerConfig(
            handler=handler, queue="chain", poll_interval=60, max_job_duration=60,
            on_job_succeeded=on_succeeded,
        )  # fmt: skip
        before = dict(backend.statistics()["calls"])
        await run_until(backend, config, done, limit=jobs * 1.0 + 60)
        elapsed = trio.current_time() - starts[0]
        calls = backend.statistics()["calls"]
        spent = sum(calls[k] - before.get(k, 0) for k in calls if k not in ("beat", "renew"))
        print(
            f"chain of {jobs}: {elapsed:.2f} s from the first start to the last success, "
            f"{elapsed / (jobs - 1) * 1000:.2f} ms per link; "
            f"{spent / jobs:.2f} statements per job (beats and renewals left out)"
        )


async def drain_until_joined(
    backend: trioqueue.PostgresBackend, many: str, joining: str, payload: str
) -> float:
    """Run a pool on queue ``many`` (4 batches of 50) and one on ``joining`` until the job
    with ``payload`` runs there (woken by NOTIFY: that pool never polls): the seconds."""
    done = trio.Event()

    async def handler(given: Any, ctx: trioqueue.JobContext) -> None:
        if given == payload:
            done.set()

    wide = trioqueue.WorkerConfig(
        handler=handler, queue=many, concurrency=4, batch_size=50, max_job_duration=60
    )
    join = trioqueue.WorkerConfig(
        handler=handler, queue=joining, poll_interval=60, max_job_duration=60
    )
    began = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, wide)
        await nursery.start(trioqueue.run_worker_pool, backend, join)
        with trio.fail_after(600):
            await done.wait()
        nursery.cancel_scope.cancel()
    return trio.current_time() - began


async def fan_in(dsn: str, jobs: int) -> None:
    async with fresh_schema(dsn, "fanin", max_connections=12) as backend:
        ids = await backend.enqueue_many("fan", list(range(jobs)))
        t0 = time.perf_counter()
        join = await backend.enqueue("join", "join", depends_on=ids)
        enqueued = time.perf_counter() - t0
        drained = await drain_until_joined(backend, "fan", "join", "join")
        info = await backend.get_job(join)
        print(
            f"fan-in of {jobs}: the join's enqueue (one statement, {jobs} row locks and "
            f"edges) {enqueued * 1000:.0f} ms; drained and joined in {drained:.2f} s "
            f"(join {info.status})"
        )


async def ack_rounds(dsn: str, rounds: int, batch: int) -> None:
    async with (
        fresh_schema(dsn, "ack_new") as new,
        fresh_schema(dsn, "ack_old") as old,
    ):
        async with old.acquire() as connection:
            for trigger in ("settle_dependents", "forget_dependents", "recheck_dependencies"):
                await connection.execute(f'DROP TRIGGER jobs_{trigger} ON "{old.schema}".jobs')
        # The ack as it was: without the settled CTE (and its cross join).
        before = re.sub(r",\n-- Dependents.*?\n\)\n", "\n", QUERIES["ack"], flags=re.S)
        before = render(before.replace("FROM acked AS a, settled;", "FROM acked AS a;"), old.schema)
        assert "settle" not in before
        statements = {"with 0018": render(QUERIES["ack"], new.schema), "as before 0018": before}
        times: dict[str, list[float]] = {"with 0018": [], "as before 0018": []}
        for _ in range(rounds):
            for name, backend in (("with 0018", new), ("as before 0018", old)):
                await backend.enqueue_many("ack", list(range(batch)))
                claimed = await backend.claim(
                    "ack", limit=batch, worker_id="bench", visibility_timeout=60
                )
                ids = [str(c.job.id) for c in claimed]
                seqs = [str(c.job.claim_seq) for c in claimed]
                async with backend.acquire() as connection:
                    t0 = time.perf_counter()
                    await connection.fetch(statements[name], ids, seqs, *(None,) * 5)
                    times[name].append(time.perf_counter() - t0)
        for name, spent in times.items():
            print(
                f"ack of {batch} ordinary jobs, {name}: median {statistics.median(spent) * 1000:.3f}"
                f" ms, p90 {statistics.quantiles(spent, n=10)[-1] * 1000:.3f} ms ({rounds} rounds)"
            )


async def tree(dsn: str, jobs: int) -> None:
    async with fresh_schema(dsn, "tree", max_connections=12) as backend:
        await backend.enqueue("parent", "parent")
        [parent] = await backend.claim("parent", limit=1, worker_id="bench", visibility_timeout=600)
        t0 = time.perf_counter()
        await backend.enqueue_many("child", list(range(jobs)), parent_id=parent.job.id)
        fanned = time.perf_counter() - t0
        wait = ChildWaitWrite(parent.job.id, parent.job.claim_seq)
        t0 = time.perf_counter()
        [became] = await backend.await_children([wait])
        waited = time.perf_counter() - t0
        before = dict(backend.statistics().calls)
        drained = await drain_until_joined(backend, "child", "parent", "parent")
        calls = {k: v - before.get(k, 0) for k, v in backend.statistics().calls.items()}
        spent = {k: round(v / jobs, 3) for k, v in sorted(calls.items()) if v > 0}
        print(
            f"tree of {jobs} children: fan-out (one enqueue_many) {fanned * 1000:.0f} ms; "
            f"the parent's wait (one await_children, {jobs} row locks and edges: "
            f"{became.value}) {waited * 1000:.0f} ms; children drained and the "
            f"continuation claimed in {drained:.2f} s; statements per child while draining "
            f"{sum(calls.values()) / jobs:.3f} {spent}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["chain", "fan-in", "ack", "tree"])
    parser.add_argument("--dsn", help="default: $TRIOQUEUE_DSN, the local server, or embedded")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args(argv)
    with find_postgres(args.dsn or os.environ.get("TRIOQUEUE_DSN")) as (dsn, where):
        print(f"server: {where}")
        if args.what == "chain":
            trio.run(chain, dsn, args.jobs or 1000)
        elif args.what == "fan-in":
            trio.run(fan_in, dsn, args.jobs or 10_000)
        elif args.what == "tree":
            trio.run(tree, dsn, args.jobs or 10_000)
        else:
            trio.run(ack_rounds, dsn, args.rounds, args.batch)


if __name__ == "__main__":
    main()
