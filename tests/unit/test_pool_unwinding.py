"""A handler unwinding past its stop keeps its lease (docs/protocol.rst §4).

Whatever stopped a batch's scope (``max_job_duration``, a cancel directive, shutdown), its
handler may still run: a ``finally`` that awaits under a shield. It still owns its job, so
the guard renews the lease until the handler has exited; only a lost lease ends renewals
early. Otherwise the row becomes claimable while the handler runs, another attempt starts
beside it, and the first attempt's outcome is fenced out (I13).

Whole pools on the memory backend under trio's MockClock: times are exact.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

import trioqueue
from tests._pool_harness import Recorder, config

DURATION_1S = "claim hooks and handler ran past max_job_duration of 1s"


def unwinding_handler(rec: Recorder, cleanup: float) -> Callable[[Any, Any], Awaitable[None]]:
    """Runs until stopped, then spends ``cleanup`` seconds in a shielded ``finally``."""

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        rec.add("started", ctx.job_id, None, ctx.attempt)
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(cleanup)
            rec.add("unwound", ctx.job_id, None, ctx.attempt)

    return handler


def unwinding_config(rec: Recorder, cleanup: float, **overrides: Any) -> trioqueue.WorkerConfig:
    """A pool whose handler unwinds for ``cleanup`` seconds past its stop; V = 3, H = 1."""
    return config(
        rec,
        handler=unwinding_handler(rec, cleanup=cleanup),
        visibility_timeout=3,
        heartbeat_interval=1,
        **overrides,
    )


def renewals(backend: trioqueue.MemoryBackend) -> int:
    return backend.statistics().calls.get("renew", 0)


async def test_handler_unwinding_past_max_job_duration_keeps_its_lease(
    autojump_clock: object,
) -> None:
    """The reported case: D = 1, V = 3, H = 1, a 4 s shielded cleanup, two slots, three
    attempts. The lease is renewed through the cleanup, no second attempt starts while the
    first runs, and the first attempt's duration failure is recorded and retried."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = [await backend.enqueue("q", {}, max_attempts=3)]
        cfg = unwinding_config(
            rec, cleanup=4, concurrency=2, max_job_duration=1, backoff=lambda attempt: 0.5
        )
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await trio.sleep(1.5)
        at_stop = renewals(backend)
        await trio.sleep(3)  # t = 4.5: past the lease the last beat before the stop gave
        running = await backend.get_job(job_id)
        assert renewals(backend) - at_stop >= 3  # the beats at t = 2, 3 and 4
        with trio.fail_after(30):  # virtual seconds: a lost outcome never says retry
            retry = await rec.wait_for("retry", job_id)
            after_first = await backend.get_job(job_id)
            await rec.wait_for("started", job_id, count=2)
        nursery.cancel_scope.cancel()
    assert (running.status, running.attempts) == ("running", 1)
    [unwound] = [e for e in rec.of("unwound", job_id) if e.attempt == 1]
    assert unwound.at == 5.0
    starts = rec.of("started", job_id)
    assert [e.attempt for e in starts] == [1, 2]
    assert starts[1].at >= unwound.at + 0.5  # after the first attempt and its backoff
    assert (retry.at, retry.attempt, retry.detail) == (5.0, 1, 0.5)
    assert after_first.last_error == DURATION_1S
    assert after_first.attempts == 1 and after_first.status != "failed"
    assert rec.of("unavailable") == []  # never "outcome not recorded"


async def test_handler_unwinding_past_shutdown_keeps_its_lease(autojump_clock: object) -> None:
    """Shutdown with a 1 s grace; the handler unwinds until t = 5 (V = 3). The pool keeps its
    guard running until the batch is done, so the row stays leased and another pool waiting
    for work claims it only once it was released."""
    first, second = Recorder(), Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = [await backend.enqueue("q", {})]
        shutting_down = trio.CancelScope()
        stopped_at: list[float] = []
        first_stopped = trio.Event()

        async def first_pool(*, task_status: trio.TaskStatus[None]) -> None:
            cfg = unwinding_config(first, cleanup=4, shutdown_grace=1)
            with shutting_down:
                await trioqueue.run_worker_pool(backend, cfg, task_status=task_status)
            stopped_at.append(trio.current_time())
            first_stopped.set()

        await nursery.start(first_pool)
        await first.wait_for("started", job_id)
        cfg = config(second, visibility_timeout=3, heartbeat_interval=1, poll_interval=0.5)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        shutting_down.cancel()  # t = 0: the first pool's batch stops at t = 1, unwinds to 5
        await trio.sleep(4.5)
        running = await backend.get_job(job_id)
        with trio.fail_after(30):  # virtual seconds
            await second.wait_for("succeeded", job_id)
            await first_stopped.wait()
        nursery.cancel_scope.cancel()
    assert (running.status, running.attempts) == ("running", 1)
    assert [e.at for e in first.of("unwound", job_id)] == [5.0]
    assert [e.detail for e in first.of("unavailable", job_id)] == ["released at worker shutdown"]
    assert stopped_at == [5.0]  # the pool outlived its grace for as long as the batch ran
    assert second.of("started", job_id)[0].at >= 5.0  # never beside the first attempt


async def test_handler_unwinding_after_a_cancel_keeps_its_lease_and_ends_cancelled(
    autojump_clock: object,
) -> None:
    """A cancel directive at t = 0.5, then the duration (D = 2) passes while the handler
    still unwinds (until t = 5.5, V = 3): the lease is kept, and the cancel, which came
    first, is the outcome the worker records."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = [await backend.enqueue("q", {}, max_attempts=3)]
        cfg = unwinding_config(rec, cleanup=5, concurrency=2, max_job_duration=2)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await trio.sleep(0.5)
        assert await backend.cancel(job_id)
        await trio.sleep(4.5)  # t = 5: the lease the last beat before t = 2 gave is over
        running = await backend.get_job(job_id)
        with trio.fail_after(30):  # virtual seconds: a lost outcome never says failed
            failed = await rec.wait_for("failed", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert (running.status, running.attempts) == ("running", 1)
    assert (failed.at, failed.detail) == (5.5, "cancelled: cancel requested")
    assert (info.status, info.last_error) == ("failed", failed.detail)
    assert len(rec.of("started", job_id)) == 1
    assert rec.of("unavailable") == []
