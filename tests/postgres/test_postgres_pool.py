"""Whole worker pools on PostgreSQL: the runtime, unchanged, on real rows and NOTIFY.

The runtime's own tests run on the memory backend with a fake clock; these check that the
same pool works end to end on the database, on trio's real clock, and that the pushes that
only PostgreSQL makes real (LISTEN/NOTIFY) arrive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue import JobContext
from trioqueue._backends.postgres import PostgresBackend

from .._postgres_harness import wait_until_finished

pytestmark = pytest.mark.postgres

Q = "pool"


def config(handler: Any, **overrides: Any) -> trioqueue.WorkerConfig:
    base: dict[str, Any] = {
        "handler": handler,
        "queue": Q,
        "visibility_timeout": 30,
        "heartbeat_interval": 10,
        "poll_interval": 5,  # long: only NOTIFY can make these tests fast
        "shutdown_grace": 1,
    }
    return trioqueue.WorkerConfig(**{**base, **overrides})


async def test_pool_drains_jobs_with_retries(backend: PostgresBackend) -> None:
    """I13 on PostgreSQL: every job ends succeeded, each handler run fenced and counted."""
    runs: dict[int, int] = {}

    async def handler(payload: dict[str, int], ctx: JobContext) -> None:
        runs[ctx.job_id] = runs.get(ctx.job_id, 0) + 1
        ctx.report_progress(0.5)
        await trio.lowlevel.checkpoint()
        if payload["fail_once"] and ctx.attempt == 1:
            raise RuntimeError("first attempt fails")

    payloads = [{"fail_once": n % 5 == 0} for n in range(40)]
    cfg = config(handler, concurrency=4, batch_size=5, backoff=lambda attempt: 0.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        ids = await backend.enqueue_many(Q, payloads)  # the NOTIFY wakes the idle pool
        infos = await wait_until_finished(backend, ids)
        nursery.cancel_scope.cancel()
    assert {i.status for i in infos} == {"succeeded"}
    assert {i.id: i.attempts for i in infos} == {
        job_id: 2 if p["fail_once"] else 1 for job_id, p in zip(ids, payloads, strict=True)
    }
    assert runs == {i.id: i.attempts for i in infos}
    assert {i.progress for i in infos} == {0.5}
    assert backend.statistics()["connections_in_use"] == 0


async def test_cancel_reaches_a_running_handler_through_notify(
    backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """I12 on PostgreSQL: with H = 10 s, only the NOTIFY can stop the handler this fast."""
    started = trio.Event()
    first_beat_back = trio.Event()
    stopped_at: list[float] = []
    renew = backend.renew

    async def renew_and_tell(*args: Any, **kwargs: Any) -> Any:
        verdicts = await renew(*args, **kwargs)
        first_beat_back.set()
        return verdicts

    monkeypatch.setattr(backend, "renew", renew_and_tell)

    async def handler(payload: Any, ctx: JobContext) -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            stopped_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config(handler))
        job_id = await backend.enqueue(Q, "forever")
        with trio.fail_after(5):
            await started.wait()
            await first_beat_back.wait()  # the cancel must not ride on the first beat
        cancelled_at = trio.current_time()
        assert await backend.cancel(job_id) is True
        [info] = await wait_until_finished(backend, [job_id])
        nursery.cancel_scope.cancel()
    assert stopped_at[0] - cancelled_at < 2.0
    assert info.status == "failed"
    assert info.last_error is not None
    assert info.last_error.startswith("cancelled")
    assert info.attempts == 1  # not retried


async def test_batch_whose_row_is_locked_elsewhere_stops_at_its_fence(
    backend: PostgresBackend,
) -> None:
    """Renewals skip the locked row (UNCHANGED), so the batch's lease runs out locally."""
    v = 1.0
    started = trio.Event()
    stops: list[tuple[float, str]] = []
    stopped = trio.Event()

    async def handler(payload: Any, ctx: JobContext) -> None:
        started.set()
        await trio.sleep_forever()

    async def on_job_unavailable(job: trioqueue.Job, reason: str) -> None:
        stops.append((trio.current_time(), reason))
        stopped.set()

    cfg = config(
        handler,
        visibility_timeout=v,
        heartbeat_interval=0.25,
        shutdown_grace=0.1,
        on_job_unavailable=on_job_unavailable,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        job_id = await backend.enqueue(Q, "x", max_attempts=1)
        with trio.fail_after(5):
            await started.wait()
        async with backend.acquire() as other, other.transaction():
            await other.execute(
                f'SELECT 1 FROM "{backend.schema}".jobs WHERE id = $1 FOR UPDATE', job_id
            )
            locked_at = trio.current_time()
            with trio.fail_after(5):
                await stopped.wait()
            row = await other.fetchrow(
                f'SELECT status, attempts, last_error FROM "{backend.schema}".jobs WHERE id = $1',
                job_id,
            )
        nursery.cancel_scope.cancel()
    [(stopped_at, reason)] = stops
    assert "lease expired" in reason
    assert stopped_at - locked_at <= v + 0.5  # the fence: at most V after the last renewal
    # Nothing was written for the fenced attempt: the row still says it is running.
    assert (row["status"], row["attempts"], row["last_error"]) == ("running", 1, None)


async def test_work_enqueued_while_the_listener_was_down_is_found_on_relisten(
    backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NOTIFY sent while the pool was not listening is lost; on LISTEN again the pool looks
    for work at once instead of waiting out its poll interval (30 s here)."""
    relistening, reopen = trio.Event(), trio.Event()
    listen = backend.listen
    calls = 0

    @asynccontextmanager
    async def gated_listen(queue: str, worker_id: str) -> AsyncIterator[Any]:
        nonlocal calls
        calls += 1
        if calls > 1:  # hold the re-LISTEN until the test has enqueued
            relistening.set()
            await reopen.wait()
        async with listen(queue, worker_id) as notices:
            yield notices

    monkeypatch.setattr(backend, "listen", gated_listen)
    started = trio.Event()

    async def handler(payload: Any, ctx: JobContext) -> None:
        started.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config(handler, poll_interval=30))
        async with backend.acquire() as connection:
            await connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN %' AND application_name = $1",
                f"trioqueue:{backend.schema}",
            )
        with trio.fail_after(5):
            await relistening.wait()  # the old LISTEN is gone
        await backend.enqueue(Q, "while deaf")  # its NOTIFY reaches nobody
        reopen.set()
        with trio.fail_after(5):
            await started.wait()
        nursery.cancel_scope.cancel()
