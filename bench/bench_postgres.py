"""Benchmarks of the PostgreSQL backend (numbers, never asserts).

    python bench/bench_postgres.py                          # everything, full sizes (minutes)
    python bench/bench_postgres.py drain --jobs 50000       # drain: pools vs the raw bound
    python bench/bench_postgres.py drain-features --jobs 5000   # drain: flow control on vs off
    python bench/bench_postgres.py heartbeat --inflight 1000 10000 --beats 5
    python bench/bench_postgres.py renewals --inflight 1000 10000 --rounds 6
    python bench/bench_postgres.py latency --samples 200
    python bench/bench_postgres.py beat --renewed 10 --samples 500
    python bench/bench_postgres.py schedule --schedules 10 1000 --samples 200
    python bench/bench_postgres.py waits --samples 500 --acked 1 10
    python bench/bench_postgres.py --jobs 2000 --inflight 1000 --beats 3 --samples 50
                                                            # a quick run, under a minute

drain:     N pre-enqueued no-op jobs drained by ``--consumers`` worker pools (one backend,
           each pool ``--concurrency`` batches), at batch 1, 10 and 50 -> jobs/s, and the
           statements the pools issued per 1,000 jobs (a pool fills all its free slots with
           one claim statement, and batches that start together share their first renewal
           and, finishing together, their ack; each batch is still ``batch`` jobs). In the
           same run, the bound: a minimal hand-written asyncpg claim+ack loop through
           trio-asyncio with the same SQL shape (claim a batch with FOR UPDATE SKIP LOCKED;
           a fenced batch update to 'succeeded' by unnest(ids, claim_seqs), as the backend's
           ack), the same batch and ``--consumers`` loops, one bridge crossing per claim and
           per ack. Printed: both rates and pool/bound.
drain-features: (not part of ``all``) the pools' drain, without the bound, once per flow
           control feature switched on, at batch 1, 10 and 50 -> jobs/s, and each vs
           ``none``: ``none`` (no ``queues`` row), ``resumed`` (the queue paused then resumed:
           a row, not paused), ``max_running`` (1e6: the claim takes the queue's lock and
           counts live leases, but never limits), ``max_per_second`` (1e6: the lock and the
           token bucket), ``groups`` (every job in one of 100 groups, round-robin by id; at
           most 100 jobs run at once).
heartbeat: N sleeping jobs in flight (batches of 50): renewal statements started per
           heartbeat, the time of each (the backend's ``renew`` call, timed, waited for up to
           2 minutes after the window), the jobs it named and the rows it wrote (its
           ``extended`` verdicts: one row UPDATE each). The write cost: WAL bytes per row
           renewed and per job in flight per beat (``pg_current_wal_insert_lsn()`` before
           and after the window: the whole server's WAL, so other sessions on it count
           too), and the HOT share of the jobs table's updates in the window
           (``n_tup_hot_upd / n_tup_upd`` of ``pg_stat_user_tables``; once every job runs,
           every update is a renewal). Backends flush those counters lazily (within 10 s
           when idle), so each reading waits 11 s first: the run is ~25 s longer per size.
           Then 50 claims of the queue, timed, with every job still leased: nothing to
           take, but each looks for expired leases among those in flight -> p50, p95.
renewals:  the renewal statement alone, in the worst case for HOT updates: N jobs claimed
           at once (every row of every page in flight), then renewed ``--rounds`` times
           by the backend's ``renew`` on one connection -> time per statement p50 and max,
           WAL bytes per row renewed (``pg_current_wal_insert_lsn()``: the whole
           server's), and the HOT share of those updates (``n_tup_hot_upd / n_tup_upd``
           of the jobs table, the connection's counters flushed first with
           ``pg_stat_force_next_flush()``, so exact). ``--fillfactor`` sets the jobs
           table's before the jobs are enqueued (default: the migrations').
beat:      the worker registry's cost: one renewal of ``--renewed`` leased jobs, alone and
           carrying the pool's beat (the same statement), and a lone beat, each timed
           ``--samples`` times -> p50 and p95.
schedule:  the scheduling pass (``enqueue_due``) with N schedules stored: a pass with
           nothing due (what every pool does every ``schedule_interval``), timed
           ``--samples`` times -> p50 and p95; and one pass with all N due (N jobs
           enqueued, N schedules advanced; each schedule's next tick computed in Python).
waits:     wait_for's costs. The ack statement of ``--acked`` leased jobs, nobody waiting vs
           every job awaited (its row marked: the ack sends one NOTIFY per job), each timed
           ``--samples`` times -> p50 and p95; ``--ackers`` tasks acking one job per
           statement as fast as they can, nobody waiting vs all awaited -> acks/s (the
           notify lock at commit is what could serialise them); and the wake latency of a
           wait_for, ack call -> wait_for returning (it includes the ack itself) -> p50, p95.
latency:   with an idle pool (poll interval 30 s, so NOTIFY does the work): enqueue ->
           handler start, and cancel -> handler cancelled; p50 and p95.

The server: ``--dsn``, else ``$TRIOQUEUE_DSN``, else the local one at 127.0.0.1:5432 if it
answers, else an embedded one (pgserver). Connections run with ``synchronous_commit=off``
(as the test suite), unless ``--durable``: on a small machine's disk a flushed commit costs
milliseconds and then dominates every number (pools and bound alike).
Each measurement runs in a fresh schema ``trioqueue_bench_<hex>``, dropped afterwards.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import secrets
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import asyncpg
import trio
import trio_asyncio
from _jobs import Countdown, noop

import trioqueue
from trioqueue._backends.postgres.embedded import fast_commits, find_postgres
from trioqueue._backends.postgres.loop_passes import run_ready_callbacks_together
from trioqueue._core.wire import RenewItem

QUEUE = "bench"
ENQUEUE_CHUNK = 5000


# -- the server and the schemas -----------------------------------------------------------


#: Set (bench_history.py does), the benches run on this existing, migrated schema instead of
#: a fresh one: its history stays, and the jobs a bench added are deleted at the end unless
#: KEEP_ADDED is set too.
ON_SCHEMA: ContextVar[str | None] = ContextVar("ON_SCHEMA", default=None)
KEEP_ADDED: ContextVar[bool] = ContextVar("KEEP_ADDED", default=False)


@asynccontextmanager
async def fresh_backend(
    dsn: str, *, max_connections: int = 10
) -> AsyncIterator[trioqueue.PostgresBackend]:
    """A backend on a new, migrated schema, dropped at the end (or on ON_SCHEMA)."""
    if (existing := ON_SCHEMA.get()) is not None:
        async with _existing_backend(dsn, existing, max_connections) as backend:
            yield backend
        return
    schema = f"trioqueue_bench_{secrets.token_hex(4)}"
    async with trioqueue.open_postgres(
        dsn, schema=schema, max_connections=max_connections
    ) as backend:
        await backend.migrate()
        try:
            yield backend
        finally:
            with trio.CancelScope(shield=True):
                async with backend.acquire() as connection:
                    await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@asynccontextmanager
async def _existing_backend(
    dsn: str, schema: str, max_connections: int
) -> AsyncIterator[trioqueue.PostgresBackend]:
    """A backend on ``schema``; the jobs added meanwhile deleted at the end (not KEEP_ADDED)."""
    async with trioqueue.open_postgres(
        dsn, schema=schema, max_connections=max_connections
    ) as backend:
        async with backend.acquire() as connection:
            last = await connection.fetchval(f'SELECT coalesce(max(id), 0) FROM "{schema}".jobs')
        try:
            yield backend
        finally:
            if not KEEP_ADDED.get():
                with trio.CancelScope(shield=True):
                    async with backend.acquire() as connection:
                        await connection.execute(f'DELETE FROM "{schema}".jobs WHERE id > $1', last)


async def fill(backend: trioqueue.PostgresBackend, jobs: int) -> None:
    """Enqueue ``jobs`` empty payloads."""
    for start in range(0, jobs, ENQUEUE_CHUNK):
        await backend.enqueue_many(QUEUE, [{}] * min(ENQUEUE_CHUNK, jobs - start))


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


# -- drain: the pools ---------------------------------------------------------------------


#: drain-features: the flow control features, each switched on alone.
FEATURES = ("none", "resumed", "max_running", "max_per_second", "groups")
GROUPS = 100


async def switch_on(backend: trioqueue.PostgresBackend, feature: str) -> None:
    """Switch ``feature`` (one of FEATURES) on for QUEUE, its jobs already enqueued."""
    if feature == "resumed":
        await backend.pause_queue(QUEUE)
        await backend.resume_queue(QUEUE)
    elif feature == "max_running":
        await backend.set_queue_limits(QUEUE, max_running=1_000_000)
    elif feature == "max_per_second":
        await backend.set_queue_limits(QUEUE, max_per_second=1e6)
    elif feature == "groups":
        # As enqueue(..., group=...) would have stored them, without one statement per job.
        async with backend.acquire() as connection:
            await connection.execute(
                f"UPDATE \"{backend.schema}\".jobs SET group_key = 'g' || (id % {GROUPS})"
            )
            await connection.execute(f'ANALYZE "{backend.schema}".jobs')
    elif feature != "none":
        raise ValueError(f"unknown feature {feature!r}")


@dataclass(frozen=True)
class Drain:
    """A pools' drain: jobs/s, the statements the pools issued (claims, renewals, acks) and
    the CPU this process spent per job meanwhile (µs; the database server's is not in it)."""

    rate: float
    calls: dict[str, int]
    cpu_us: float


async def drain_pools(
    dsn: str,
    jobs: int,
    batch: int,
    consumers: int,
    concurrency: int,
    feature: str = "none",
    *,
    handler: Mapping[str, Any] | None = None,
) -> Drain:
    """``consumers`` pools draining ``jobs`` pre-enqueued no-op jobs; ``feature`` switched
    on first. ``handler``: the WorkerConfig's handler keywords (a per-job no-op unless
    given; bench_batch_handler.py passes a batch handler)."""
    finished = Countdown(jobs)
    config = trioqueue.WorkerConfig(
        **(handler or {"handler": noop}),
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
        await switch_on(backend, feature)
        async with trio.open_nursery() as nursery:
            began, cpu = time.perf_counter(), time.process_time()
            for _ in range(consumers):
                nursery.start_soon(trioqueue.run_worker_pool, backend, config)
            await finished.done.wait()
            elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
            nursery.cancel_scope.cancel()
        calls = backend.statistics()["calls"]
    counts = {op: calls[op] for op in ("claim", "renew", "ack")}
    return Drain(jobs / elapsed, counts, cpu / jobs * 1e6)


# -- drain: the raw bound -----------------------------------------------------------------

CLAIM = """
WITH picked AS (
    SELECT id FROM {schema}.jobs
    WHERE queue = $1 AND status = 'queued' AND not_visible_until <= now()
    ORDER BY priority DESC, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE {schema}.jobs AS j
SET status = 'running', attempts = j.attempts + 1, claim_seq = j.claim_seq + 1,
    worker_id = $3, not_visible_until = now() + interval '60 seconds'
FROM picked AS p
WHERE j.id = p.id
RETURNING j.id, j.claim_seq, j.payload
"""

ACK = """
UPDATE {schema}.jobs AS j
SET status = 'succeeded', finished_at = now()
FROM unnest($1::bigint[], $2::bigint[]) AS i (id, claim_seq)
WHERE j.id = i.id AND j.claim_seq = i.claim_seq AND j.status = 'running'
"""


async def drain_raw(dsn: str, jobs: int, batch: int, consumers: int) -> float:
    """Jobs/s of ``consumers`` hand-written claim+ack loops (asyncpg through trio-asyncio).

    Each loop owns one connection (no pool, so no reset on release): the least a loop can
    do per batch is one crossing and one round trip for the claim, and one for the ack.
    The trio-asyncio loop runs its ready callbacks in one pass, as trioqueue's does.
    """
    async with fresh_backend(dsn, max_connections=2) as backend:
        await fill(backend, jobs)
        claim = CLAIM.format(schema=f'"{backend.schema}"')
        ack = ACK.format(schema=f'"{backend.schema}"')
        async with trio_asyncio.open_loop() as loop:
            # The bridge as trioqueue's driver sets it up: ready callbacks in one pass.
            run_ready_callbacks_together(loop)
            connect = trio_asyncio.aio_as_trio(asyncpg.connect)
            connections = [await connect(dsn) for _ in range(consumers)]
            try:
                began = time.perf_counter()
                async with trio.open_nursery() as nursery:
                    for n, connection in enumerate(connections):
                        nursery.start_soon(_raw_consumer, connection, claim, ack, batch, f"raw-{n}")
                elapsed = time.perf_counter() - began
            finally:
                for connection in connections:
                    await trio_asyncio.aio_as_trio(connection.close)()
    return jobs / elapsed


async def _raw_consumer(connection: Any, claim: str, ack: str, batch: int, worker: str) -> None:
    """Claim a batch, 'run' it, ack it; until the queue is empty. One crossing per step."""
    fetch = trio_asyncio.aio_as_trio(connection.fetch)
    execute = trio_asyncio.aio_as_trio(connection.execute)
    while rows := await fetch(claim, QUEUE, batch, worker):
        await trio.lowlevel.checkpoint()  # the "handler"
        await execute(ack, [row["id"] for row in rows], [row["claim_seq"] for row in rows])


# -- heartbeat ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Renewal:
    """One renewal statement: when it began (perf_counter), how long it took, its rows
    (``extended`` is -1 when the call did not answer: given up by the guard, or failed)."""

    began: float
    seconds: float
    items: int
    extended: int


def timed_renewals(backend: trioqueue.PostgresBackend, record: list[Renewal]) -> None:
    """Wrap ``backend.renew`` to append a :class:`Renewal` to ``record`` per call."""
    renew = backend.renew

    async def timed(items: Any, *, visibility_timeout: float, beat: Any = None) -> Any:
        items = tuple(items)
        began = time.perf_counter()
        extended = -1  # the guard gave up on the call (cancelled), or it failed
        try:
            verdicts = await renew(items, visibility_timeout=visibility_timeout, beat=beat)
            extended = sum(1 for v in verdicts.values() if v is trioqueue.Verdict.EXTENDED)
            return verdicts
        finally:
            record.append(Renewal(began, time.perf_counter() - began, len(items), extended))

    backend.renew = timed  # type: ignore[method-assign]


async def heartbeat(dsn: str, jobs: int, beats: int, interval: float) -> dict[str, float]:
    """Renewal cost with ``jobs`` sleeping jobs in flight.

    Statements per beat count the renewals *started* in a window of ``beats`` heartbeats
    (after three to settle); times, jobs and rows are those of every renewal still running
    or begun once all jobs ran (slow ones waited for up to two minutes after the window).
    """
    running = Countdown(jobs)
    batch = min(50, jobs)
    config = trioqueue.WorkerConfig(
        handler=running.sleeper,
        queue=QUEUE,
        concurrency=math.ceil(jobs / batch),
        batch_size=batch,
        visibility_timeout=interval * 30,
        heartbeat_interval=interval,
        shutdown_grace=0,
        max_job_duration=3600,
    )
    record: list[Renewal] = []
    async with fresh_backend(dsn, max_connections=10) as backend:
        await fill(backend, jobs)
        timed_renewals(backend, record)
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await running.done.wait()
            since = time.perf_counter()
            await trio.sleep(interval * 3)  # let the first beats settle into the pool beat
            await trio.sleep(FLUSHED)  # the claims' counters, flushed
            before = await write_counters(backend)
            started = backend.statistics().calls["renew"]
            began = time.perf_counter()
            await trio.sleep(interval * beats)
            issued = backend.statistics().calls["renew"]
            ended = time.perf_counter()
            wal = await write_counters(backend)
            await trio.sleep(FLUSHED)  # the window's counters, flushed (and a few more)
            after = await write_counters(backend)
            claims = await empty_claims(backend, CLAIM_SAMPLES)
            with trio.move_on_after(120):  # let slow statements finish, to time them
                while len(record) < issued:  # noqa: ASYNC110 - a bench, polling is fine
                    await trio.sleep(0.05)
            renewals = [r for r in record if r.began + r.seconds >= since]  # ran after "since"
            nursery.cancel_scope.cancel()
    statements = issued - started
    summary = _renewal_summary(renewals, statements / beats)
    # Rows renewed in the window: those of the statements begun in it.
    rows = sum(r.extended for r in renewals if began <= r.began < ended and r.extended > 0)
    wal_bytes = wal.wal_lsn - before.wal_lsn
    updates = after.updates - before.updates
    summary["wal_bytes_per_row"] = wal_bytes / rows if rows else math.nan
    summary["wal_bytes_per_job_beat"] = wal_bytes / (jobs * beats)
    summary["hot_share"] = (
        (after.hot_updates - before.hot_updates) / updates if updates else math.nan
    )
    summary["updates_counted"] = updates
    summary["claim_ms_p50"] = percentile(claims, 0.5) * 1000
    summary["claim_ms_p95"] = percentile(claims, 0.95) * 1000
    return summary


#: Claims timed with the jobs in flight.
CLAIM_SAMPLES = 50


async def empty_claims(backend: trioqueue.PostgresBackend, samples: int) -> list[float]:
    """Seconds per claim of the queue while every job of it is leased: nothing to take,
    but the claim still looks for expired leases among those in flight."""
    times = []
    for _ in range(samples):
        began = time.perf_counter()
        claimed = await backend.claim(
            QUEUE, limit=50, worker_id="bench-probe", visibility_timeout=30
        )
        times.append(time.perf_counter() - began)
        assert not claimed, "a lease expired during the heartbeat bench"
    return times


#: Seconds to wait for the table counters of every backend to be flushed (PostgreSQL flushes
#: a busy backend's at most once a second, an idle one's within 10 seconds).
FLUSHED = 11.0


@dataclass(frozen=True)
class Counters:
    """The server's WAL insert position, and the jobs table's row update counters."""

    wal_lsn: int
    updates: int
    hot_updates: int


async def write_counters(backend: trioqueue.PostgresBackend) -> Counters:
    async with backend.acquire() as connection:
        row = await connection.fetchrow(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint AS lsn, "
            "t.n_tup_upd, t.n_tup_hot_upd FROM pg_stat_user_tables AS t "
            "WHERE t.schemaname = $1 AND t.relname = 'jobs'",
            backend.schema,
        )
    return Counters(row["lsn"], row["n_tup_upd"], row["n_tup_hot_upd"])


def _renewal_summary(renewals: Sequence[Renewal], per_beat: float) -> dict[str, float]:
    times = [renewal.seconds for renewal in renewals] or [math.nan]
    answered = [renewal for renewal in renewals if renewal.extended >= 0]
    return {
        "statements_per_beat": per_beat,
        "statements_timed": len(renewals),
        "statements_given_up": len(renewals) - len(answered),
        "items_per_statement": statistics.fmean(r.items for r in renewals) if renewals else 0,
        "rows_per_statement": statistics.fmean(r.extended for r in answered) if answered else 0,
        "ms_p50": percentile(times, 0.5) * 1000,
        "ms_max": max(times) * 1000,
    }


# -- renewals ----------------------------------------------------------------------------


async def renewal_rounds(
    dsn: str, jobs: int, rounds: int, fillfactor: int | None
) -> dict[str, float]:
    """The renewal of ``jobs`` jobs claimed at once, ``rounds`` times, on one connection."""
    async with fresh_backend(dsn, max_connections=1) as backend:
        if fillfactor is not None:
            async with backend.acquire() as connection:
                await connection.execute(
                    f'ALTER TABLE "{backend.schema}".jobs SET (fillfactor = {int(fillfactor)})'
                )
        await fill(backend, jobs)
        claimed: list[Any] = []
        while len(claimed) < jobs:
            claimed += await backend.claim(
                QUEUE, limit=jobs, worker_id="bench", visibility_timeout=3600
            )
        items = [RenewItem(c.job.id, c.job.claim_seq, None) for c in claimed]
        before = await flushed_counters(backend)
        times = []
        for _ in range(rounds):
            began = time.perf_counter()
            await backend.renew(items, visibility_timeout=3600)
            times.append(time.perf_counter() - began)
        after = await flushed_counters(backend)
    updates = after.updates - before.updates
    return {
        "ms_p50": percentile(times, 0.5) * 1000,
        "ms_max": max(times) * 1000,
        "wal_bytes_per_row": (after.wal_lsn - before.wal_lsn) / (jobs * rounds),
        "hot_share": (after.hot_updates - before.hot_updates) / updates if updates else math.nan,
        "updates": updates,
    }


async def flushed_counters(backend: trioqueue.PostgresBackend) -> Counters:
    """``write_counters`` with the (one) connection's table counters flushed first."""
    async with backend.acquire() as connection:
        await connection.execute("SELECT pg_stat_force_next_flush()")
    return await write_counters(backend)


# -- latency ------------------------------------------------------------------------------


async def start_latency(dsn: str, samples: int) -> list[float]:
    """Seconds from calling ``enqueue`` to the handler starting, with an idle pool."""
    started: dict[int, float] = {}
    arrived = trio.Event()

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        nonlocal arrived
        started[payload["n"]] = time.perf_counter()
        arrived.set()

    config = trioqueue.WorkerConfig(handler=handler, queue=QUEUE, concurrency=4, poll_interval=30)
    latencies = []
    async with fresh_backend(dsn) as backend, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config)
        await trio.sleep(0.2)
        for n in range(samples):
            arrived = trio.Event()
            began = time.perf_counter()
            await backend.enqueue(QUEUE, {"n": n})
            with trio.fail_after(30):
                await arrived.wait()
            latencies.append(started[n] - began)
            await trio.sleep(0.02)  # idle again
        nursery.cancel_scope.cancel()
    return latencies


async def cancel_latency(dsn: str, samples: int) -> list[float]:
    """Seconds from calling ``cancel`` on a running job to its handler being cancelled."""
    running = trio.Event()
    stopped = trio.Event()
    stopped_at = 0.0

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        nonlocal stopped_at
        running.set()
        try:
            await trio.sleep_forever()
        finally:
            stopped_at = time.perf_counter()
            stopped.set()

    config = trioqueue.WorkerConfig(
        handler=handler,
        queue=QUEUE,
        concurrency=1,
        poll_interval=30,
        visibility_timeout=60,
        heartbeat_interval=20,  # no scheduled beat during a sample: only the notice acts
    )
    latencies = []
    async with fresh_backend(dsn) as backend, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config)
        for n in range(samples):
            running, stopped = trio.Event(), trio.Event()
            job_id = await backend.enqueue(QUEUE, {"n": n}, max_attempts=1)
            with trio.fail_after(30):
                await running.wait()
                await trio.sleep(0.02)
                began = time.perf_counter()
                await backend.cancel(job_id)
                await stopped.wait()
            latencies.append(stopped_at - began)
        nursery.cancel_scope.cancel()
    return latencies


# -- beat ---------------------------------------------------------------------------------


async def beat_cost(dsn: str, renewed: int, samples: int) -> dict[str, list[float]]:
    """Seconds per ``renew`` call: ``renewed`` jobs without and with the beat, a lone beat."""
    from trioqueue._core import RenewItem  # the backend's own wire types: a white-box bench
    from trioqueue._types import PoolBeat, PoolRegistration

    async with fresh_backend(dsn) as backend:
        await fill(backend, renewed)
        claimed = await backend.claim(
            QUEUE, limit=renewed, worker_id="bench", visibility_timeout=3600
        )
        items = [RenewItem(c.job.id, c.job.claim_seq, None) for c in claimed]
        pool = PoolRegistration("bench", "host", os.getpid(), QUEUE, 1, 1.0)
        await backend.register_pool(pool)
        beat = PoolBeat(pool, len(items), 0)
        cases = {"renewal": (items, None), "renewal+beat": (items, beat), "lone beat": ([], beat)}
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(samples):
            for name, (renew_items, with_beat) in cases.items():
                started = time.perf_counter()
                await backend.renew(renew_items, visibility_timeout=3600, beat=with_beat)
                times[name].append(time.perf_counter() - started)
        return times


# -- schedule -----------------------------------------------------------------------------


async def schedule_cost(dsn: str, schedules: int, samples: int) -> dict[str, list[float]]:
    """Seconds per ``enqueue_due``: idle passes, then passes with every schedule due."""
    async with fresh_backend(dsn) as backend:
        for n in range(schedules):
            await backend.set_schedule(f"s{n}", QUEUE, "0 0 1 1 *", {"n": n})
        times: dict[str, list[float]] = {"idle pass": [], "all due": []}
        for _ in range(samples):
            started = time.perf_counter()
            assert await backend.enqueue_due() == []
            times["idle pass"].append(time.perf_counter() - started)
        for round_ in range(max(1, samples // 50)):
            async with backend.acquire() as connection:
                await connection.execute(
                    f'UPDATE "{backend.schema}".schedules '
                    "SET next_run_at = now() - make_interval(secs => $1::integer + 1)",
                    round_,
                )
            started = time.perf_counter()
            assert len(await backend.enqueue_due()) == schedules
            times["all due"].append(time.perf_counter() - started)
        return times


# -- waits --------------------------------------------------------------------------------


async def mark_awaited(backend: trioqueue.PostgresBackend, ids: Sequence[int]) -> None:
    """Mark rows as wait_for's ``await_job`` does, without a waiter (an ack then notifies)."""
    async with backend.acquire() as connection:
        await connection.execute(
            f'UPDATE "{backend.schema}".jobs SET awaited = true WHERE id = ANY($1::bigint[])',
            list(ids),
        )


async def ack_cost(dsn: str, acked: int, samples: int) -> dict[str, list[float]]:
    """Seconds per ``ack`` call of ``acked`` jobs: nobody waiting, and every job awaited."""
    from trioqueue._types import Ack

    cases = ("nobody waits", "all awaited")
    times: dict[str, list[float]] = {name: [] for name in cases}
    async with fresh_backend(dsn) as backend:
        for _ in range(samples):
            for name in cases:
                await fill(backend, acked)
                claimed = await backend.claim(
                    QUEUE, limit=acked, worker_id="bench", visibility_timeout=3600
                )
                acks = [Ack(c.job.id, c.job.claim_seq) for c in claimed]
                if name == "all awaited":
                    await mark_awaited(backend, [a.job_id for a in acks])
                started = time.perf_counter()
                await backend.ack(acks)
                times[name].append(time.perf_counter() - started)
    return times


async def ack_throughput(dsn: str, ackers: int, jobs: int, awaited: bool) -> float:
    """Acks per second of ``ackers`` tasks acking one job per statement."""
    from trioqueue._types import Ack

    async with fresh_backend(dsn, max_connections=ackers + 2) as backend:
        await fill(backend, jobs)
        claimed = await backend.claim(QUEUE, limit=jobs, worker_id="bench", visibility_timeout=3600)
        if awaited:
            await mark_awaited(backend, [c.job.id for c in claimed])
        acks = [Ack(c.job.id, c.job.claim_seq) for c in claimed]

        async def acker(mine: list[Ack]) -> None:
            for ack in mine:
                await backend.ack([ack])

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for n in range(ackers):
                nursery.start_soon(acker, acks[n::ackers])
        return jobs / (time.perf_counter() - started)


async def wake_latency(dsn: str, samples: int) -> list[float]:
    """Seconds from calling ``ack`` on an awaited job to its ``wait_for`` returning."""
    from trioqueue._types import Ack

    latencies = []
    async with fresh_backend(dsn) as backend:
        for _ in range(samples):
            job_id = await backend.enqueue(QUEUE, "x")
            [claimed] = await backend.claim(
                QUEUE, limit=1, worker_id="bench", visibility_timeout=3600
            )
            returned: list[float] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_timed_wait, backend, job_id, returned)
                await _until_marked(backend, job_id)  # from now on its ack notifies
                began = time.perf_counter()
                await backend.ack([Ack(job_id, claimed.job.claim_seq)])
            latencies.append(returned[0] - began)
    return latencies


async def _timed_wait(backend: trioqueue.PostgresBackend, job_id: int, into: list[float]) -> None:
    await backend.wait_for(job_id, timeout=30)
    into.append(time.perf_counter())


async def _until_marked(backend: trioqueue.PostgresBackend, job_id: int) -> None:
    sql = f'SELECT awaited FROM "{backend.schema}".jobs WHERE id = $1'
    async with backend.acquire() as connection:
        while True:
            if await connection.fetchval(sql, job_id):
                return
            await trio.sleep(0.001)


# -- main ---------------------------------------------------------------------------------


def _ms(values: Sequence[float]) -> str:
    return f"p50 {percentile(values, 0.5) * 1000:7.2f} ms   p95 {percentile(values, 0.95) * 1000:7.2f} ms"


def run_drain(dsn: str, args: argparse.Namespace) -> None:
    jobs = args.jobs
    print(
        f"drain: {jobs:,} no-op jobs, {args.consumers} consumers (pool concurrency {args.concurrency})"
    )
    for batch in (1, 10, 50):
        drained = trio.run(drain_pools, dsn, jobs, batch, args.consumers, args.concurrency)
        pools, calls = drained.rate, drained.calls
        bound = trio.run(drain_raw, dsn, jobs, batch, args.consumers)
        per_1000 = ", ".join(f"{op} {n * 1000 / jobs:.0f}" for op, n in calls.items())
        print(
            f"  batch {batch:<3} pools {pools:>9,.0f} jobs/s   raw bound {bound:>9,.0f} jobs/s   "
            f"ratio {pools / bound:5.0%}\n"
            f"            pool statements per 1,000 jobs: {per_1000} "
            f"(raw: claim {1000 / batch:.0f}, ack {1000 / batch:.0f})"
        )


def run_drain_features(dsn: str, args: argparse.Namespace) -> None:
    jobs = args.jobs
    print(
        f"drain-features: {jobs:,} no-op jobs, {args.consumers} consumers "
        f"(pool concurrency {args.concurrency}), one flow control feature on at a time"
    )
    for batch in (1, 10, 50):
        rates: dict[str, float] = {}
        for feature in FEATURES:
            drained = trio.run(
                drain_pools, dsn, jobs, batch, args.consumers, args.concurrency, feature
            )
            rates[feature] = drained.rate
        print(
            f"  batch {batch:<3} "
            + "   ".join(
                f"{feature} {rate:,.0f}"
                + ("" if feature == "none" else f" ({rate / rates['none']:.0%})")
                for feature, rate in rates.items()
            )
            + "  jobs/s"
        )


def run_heartbeat(dsn: str, args: argparse.Namespace) -> None:
    for jobs in args.inflight:
        result = trio.run(heartbeat, dsn, jobs, args.beats, args.heartbeat)
        print(f"heartbeat: {jobs:,} sleeping jobs in flight, heartbeat {args.heartbeat:g}s")
        print(f"  renewal statements per beat    {result['statements_per_beat']:.2f}")
        print(
            f"  renewal statements timed       {result['statements_timed']:.0f} "
            f"({result['statements_given_up']:.0f} given up or failed)"
        )
        print(f"  jobs per renewal statement     {result['items_per_statement']:,.0f}")
        print(f"  rows written per statement     {result['rows_per_statement']:,.0f}")
        print(
            f"  time per renewal statement     p50 {result['ms_p50']:.1f} ms, "
            f"max {result['ms_max']:.1f} ms"
        )
        print(
            f"  WAL per row renewed            {result['wal_bytes_per_row']:,.0f} bytes "
            f"({result['wal_bytes_per_job_beat']:,.0f} per job in flight per beat)"
        )
        print(
            f"  claim, nothing claimable       p50 {result['claim_ms_p50']:.2f} ms, "
            f"p95 {result['claim_ms_p95']:.2f} ms ({CLAIM_SAMPLES} claims)"
        )
        print(
            f"  HOT share of the renewals      {result['hot_share']:.1%} "
            f"(of {result['updates_counted']:,.0f} row updates counted)"
        )


def run_renewals(dsn: str, args: argparse.Namespace) -> None:
    fillfactor = "the migrations'" if args.fillfactor is None else str(args.fillfactor)
    for jobs in args.inflight:
        result = trio.run(renewal_rounds, dsn, jobs, args.rounds, args.fillfactor)
        print(
            f"renewals: {jobs:,} jobs claimed at once, renewed {args.rounds} times "
            f"(fillfactor {fillfactor})"
        )
        print(
            f"  time per renewal statement     p50 {result['ms_p50']:.1f} ms, "
            f"max {result['ms_max']:.1f} ms"
        )
        print(f"  WAL per row renewed            {result['wal_bytes_per_row']:,.0f} bytes")
        print(
            f"  HOT share                      {result['hot_share']:.1%} "
            f"(of {result['updates']:,.0f} row updates)"
        )


def run_latency(dsn: str, args: argparse.Namespace) -> None:
    starts = trio.run(start_latency, dsn, args.samples)
    print(f"latency: enqueue -> handler start (idle pool, {len(starts)} jobs)   {_ms(starts)}")
    cancels = trio.run(cancel_latency, dsn, max(10, args.samples // 4))
    print(f"latency: cancel -> handler cancelled (NOTIFY, {len(cancels)} jobs)  {_ms(cancels)}")


def run_beat(dsn: str, args: argparse.Namespace) -> None:
    times = trio.run(beat_cost, dsn, args.renewed, args.samples)
    print(f"beat: {args.renewed} leased jobs, {args.samples} samples each")
    for name, values in times.items():
        print(f"  {name:<14} {_ms(values)}")


def run_schedule(dsn: str, args: argparse.Namespace) -> None:
    for schedules in args.schedules:
        times = trio.run(schedule_cost, dsn, schedules, args.samples)
        print(f"schedule: {schedules:,} schedules stored")
        for name, values in times.items():
            print(f"  {name:<10} {_ms(values)}   ({len(values)} passes)")


def run_waits(dsn: str, args: argparse.Namespace) -> None:
    for acked in args.acked:
        times = trio.run(ack_cost, dsn, acked, args.samples)
        print(f"waits: the ack statement of {acked} leased job(s), {args.samples} samples each")
        for name, values in times.items():
            print(f"  {name:<14} {_ms(values)}")
    jobs = max(1000, args.samples * 10)
    for awaited in (False, True):
        rate = trio.run(ack_throughput, dsn, args.ackers, jobs, awaited)
        what = "all awaited" if awaited else "nobody waits"
        print(
            f"waits: {args.ackers} ackers, one job per ack, {jobs:,} jobs, {what:<12} "
            f"{rate:>9,.0f} acks/s"
        )
    wakes = trio.run(wake_latency, dsn, args.samples)
    print(f"waits: ack -> wait_for returns (NOTIFY, {len(wakes)} jobs)   {_ms(wakes)}")


BENCHES: dict[str, Callable[[str, argparse.Namespace], None]] = {
    "drain": run_drain,
    "drain-features": run_drain_features,
    "beat": run_beat,
    "waits": run_waits,
    "heartbeat": run_heartbeat,
    "renewals": run_renewals,
    "latency": run_latency,
    "schedule": run_schedule,
}

#: Run only when named.
NOT_IN_ALL = {"drain-features"}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("which", nargs="?", default="all", choices=["all", *BENCHES])
    parser.add_argument("--dsn", help="default: $TRIOQUEUE_DSN, the local server, or embedded")
    parser.add_argument("--durable", action="store_true", help="keep synchronous_commit on")
    parser.add_argument("--jobs", type=int, default=50_000, help="drain: jobs per run")
    parser.add_argument("--consumers", type=int, default=5, help="drain: pools / raw loops")
    parser.add_argument("--concurrency", type=int, default=2, help="drain: batches per pool")
    parser.add_argument("--inflight", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--beats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=6, help="renewals: renewals of each job")
    parser.add_argument(
        "--fillfactor", type=int, help="renewals: the jobs table's (default: the migrations')"
    )
    parser.add_argument("--heartbeat", type=float, default=1.0, help="heartbeat interval (s)")
    parser.add_argument("--samples", type=int, default=200, help="latency, beat: samples")
    parser.add_argument("--renewed", type=int, default=10, help="beat: jobs per renewal")
    parser.add_argument("--schedules", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--acked", type=int, nargs="+", default=[1, 10], help="waits: jobs per ack")
    parser.add_argument("--ackers", type=int, default=8, help="waits: concurrent ackers")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    with find_postgres(args.dsn or os.environ.get("TRIOQUEUE_DSN")) as (server, where):
        dsn = server if args.durable else fast_commits(server)
        commits = "durable commits" if args.durable else "synchronous_commit=off"
        print(
            f"server: {where}; {commits}; {os.cpu_count()} CPUs; "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        sys.stdout.flush()
        for name, bench in BENCHES.items():
            if args.which == name or (args.which == "all" and name not in NOT_IN_ALL):
                bench(dsn, args)
                sys.stdout.flush()


if __name__ == "__main__":
    main()
