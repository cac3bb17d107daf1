"""Snoozes in whole worker pools on the memory backend, under trio's MockClock
(docs/protocol.rst §17, invariant I19): a handler raises or returns ``Snooze``, its job runs
again after the delay with its attempt given back, and the pool's ``max_snoozes`` bounds
how often."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config, log_records
from trioqueue._core.snooze import snooze_limit_message
from trioqueue._runtime.config import check


async def _until(backend: trioqueue.MemoryBackend, job_id: int, status: str) -> trioqueue.JobInfo:
    while (info := await backend.get_job(job_id)).status != status:
        await trio.sleep(0.5)
    return info


async def test_I19_a_raised_and_a_returned_snooze_run_the_job_again_uncharged(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """Attempt 1 raises Snooze(5), attempt 1 again returns Snooze(10), then it succeeds:
    each run starts once its snooze is over, none is charged, and the row counts two."""
    caplog.set_level(logging.INFO, logger="trioqueue.worker")
    rec = Recorder()
    runs: list[tuple[float, int]] = []

    async def handler(payload: object, ctx: trioqueue.JobContext) -> object:
        runs.append((trio.current_time(), ctx.attempt))
        if len(runs) == 1:
            raise trioqueue.Snooze(5)
        if len(runs) == 2:
            return trioqueue.Snooze(10.0)
        return "done"

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {}, max_attempts=1)
        start = trio.current_time()
        cfg = config(rec, handler=handler, poll_interval=60)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        final = await _until(backend, job_id, "succeeded")
        attempts = await backend.list_attempts(job_id)
        nursery.cancel_scope.cancel()
    # No poll came in between (poll_interval 60): the pool woke when each snooze ended.
    assert [(round(t - start, 3), attempt) for t, attempt in runs] == [
        (0.0, 1),
        (5.0, 1),
        (15.0, 1),
    ]
    assert (final.attempts, final.max_attempts, final.snoozes) == (1, 1, 2)
    assert [(a.attempt, a.outcome) for a in attempts] == [
        (1, "snoozed"),
        (1, "snoozed"),
        (1, "succeeded"),
    ]
    # A snooze calls no hook: the job's hooks say claimed three times, succeeded once.
    assert rec.kinds(job_id) == ["claimed", "claimed", "claimed", "succeeded"]
    lines = log_records(caplog, "snoozed")
    assert [r.levelno for r in lines] == [logging.INFO, logging.INFO]
    assert [r.getMessage() for r in lines] == [
        f"job {job_id} snoozed for 5s (attempt 1 not charged)",
        f"job {job_id} snoozed for 10s (attempt 1 not charged)",
    ]


async def test_I19_a_job_past_max_snoozes_fails_for_good(autojump_clock: object) -> None:
    """max_snoozes=2: the third snooze fails the job, charged, not retried although attempts
    remain, and on_job_failed hears the bound's message."""
    rec = Recorder()
    runs = 0

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        nonlocal runs
        runs += 1
        raise trioqueue.Snooze(1)

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {}, max_attempts=5)
        cfg = config(rec, handler=handler, max_snoozes=2)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        failed = await rec.wait_for("failed", job_id)
        await trio.sleep(30)  # nothing runs it again
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert runs == 3
    assert failed.detail == snooze_limit_message(2)
    assert (info.status, info.attempts, info.snoozes) == ("failed", 1, 2)
    assert info.last_error == snooze_limit_message(2)
    assert rec.kinds(job_id) == ["claimed", "claimed", "claimed", "failed"]


async def test_I19_a_cancel_asked_decides_before_the_snooze(autojump_clock: object) -> None:
    """A cancel asked while the handler runs is a stop: the handler's snooze after it does
    not put the job back (I8: the first stop wins)."""
    rec = Recorder()
    running = trio.Event()

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        running.set()
        with trio.CancelScope(shield=True):  # it does not hear the cancel in time
            await trio.sleep(3)
        raise trioqueue.Snooze(1)

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {})
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, handler=handler))
        await running.wait()
        assert await backend.cancel(job_id)
        failed = await rec.wait_for("failed", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert failed.detail.startswith("cancelled: cancel requested")
    assert (info.status, info.cancelled, info.snoozes) == ("failed", True, 0)


async def test_a_snooze_beside_another_error_is_that_errors_failure(
    autojump_clock: object,
) -> None:
    """A Snooze in an exception group with another error: the error's charged failure."""
    rec = Recorder()

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        raise ExceptionGroup("both", [trioqueue.Snooze(1), ValueError("boom")])

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {}, max_attempts=1)
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, handler=handler))
        failed = await rec.wait_for("failed", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert failed.detail == "ValueError: boom"
    assert (info.status, info.snoozes) == ("failed", 0)


async def test_a_group_of_snoozes_alone_snoozes_by_the_first(autojump_clock: object) -> None:
    """A nursery in the handler raises its Snooze in a group: still a snooze."""
    rec = Recorder()
    runs: list[float] = []

    async def snooze_in_a_task(seconds: float) -> None:
        raise trioqueue.Snooze(seconds)

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        runs.append(trio.current_time())
        if len(runs) == 1:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(snooze_in_a_task, 4)

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {})
        start = trio.current_time()
        cfg = config(rec, handler=handler, poll_interval=60)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        info = await _until(backend, job_id, "succeeded")
        nursery.cancel_scope.cancel()
    assert [round(t - start, 3) for t in runs] == [0.0, 4.0]
    assert info.snoozes == 1


async def test_a_sync_handler_may_return_or_raise_a_snooze() -> None:
    """On trio's real clock (a thread under MockClock lets the clock jump): short snoozes."""
    runs: list[int] = []

    def handler(payload: object, ctx: trioqueue.JobContext) -> object:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            return trioqueue.Snooze(0.01)
        if len(runs) == 2:
            raise trioqueue.Snooze(0.01)
        return "done"

    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {}, max_attempts=1)
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, handler=handler))
        with trio.fail_after(10):
            info = await _until(backend, job_id, "succeeded")
        nursery.cancel_scope.cancel()
    assert runs == [1, 1, 1]
    assert (info.attempts, info.snoozes, info.result) == (1, 2, "done")


@pytest.mark.parametrize(
    ("seconds", "kind"),
    [
        pytest.param(-1, ValueError, id="negative"),
        pytest.param(math.nan, ValueError, id="nan"),
        pytest.param(math.inf, ValueError, id="inf"),
        pytest.param(1e12, ValueError, id="past-a-century"),
        pytest.param("5", TypeError, id="str"),
        pytest.param(True, TypeError, id="bool"),
        pytest.param(None, TypeError, id="none"),
    ],
)
def test_a_bad_snooze_is_refused_at_construction(seconds: object, kind: type) -> None:
    with pytest.raises(kind, match=r"Snooze\(seconds\) must be"):
        trioqueue.Snooze(seconds)  # type: ignore[arg-type]


def test_a_snooze_says_its_seconds() -> None:
    snooze = trioqueue.Snooze(0)
    assert (snooze.seconds, repr(snooze), str(trioqueue.Snooze(2.5))) == (
        0.0,
        "Snooze(0.0)",
        "snooze for 2.5s",
    )
    assert isinstance(snooze, Exception)


def test_max_snoozes_is_checked_with_every_other_problem() -> None:
    """I1: a bad max_snoozes is listed with the configuration's other problems."""

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        return None

    for bad in (-1, True, 1.5, "100", 2**31):
        cfg = trioqueue.WorkerConfig(handler=handler, max_snoozes=bad, concurrency=0)  # type: ignore[arg-type]
        with pytest.raises(trioqueue.ConfigError) as raised:
            check(cfg)
        problems = raised.value.problems
        assert any(p.startswith("max_snoozes must be a whole number from 0 to") for p in problems)
        assert any(p.startswith("concurrency") for p in problems)
    check(trioqueue.WorkerConfig(handler=handler, max_snoozes=0))


async def test_I19_a_batch_handler_may_answer_a_snooze_for_one_job(
    autojump_clock: object,
) -> None:
    """In batch mode (docs/protocol.rst §20) ``Snooze(seconds)`` is one job's answer: that
    job snoozes, uncharged, while its batch siblings get their own outcomes."""
    rec = Recorder()
    calls: list[tuple[float, list[str]]] = []

    async def handler(jobs: Sequence[trioqueue.Job], ctx: trioqueue.BatchContext) -> Any:
        calls.append((trio.current_time(), [job.payload for job in jobs]))
        return [
            trioqueue.Snooze(3) if job.payload == "later" and len(calls) == 1 else
            trioqueue.JobSucceeded(job.payload)
            for job in jobs
        ]  # fmt: skip

    cfg = config(rec, handler=None, batch_handler=handler, batch_size=10, poll_interval=60)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        later = await backend.enqueue("q", "later", max_attempts=1)
        now = await backend.enqueue("q", "now")
        start = trio.current_time()
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        info = await _until(backend, later, "succeeded")
        sibling = await backend.get_job(now)
        attempts = await backend.list_attempts(later)
        nursery.cancel_scope.cancel()
    assert [(round(t - start, 3), payloads) for t, payloads in calls] == [
        (0.0, ["later", "now"]),
        (3.0, ["later"]),
    ]
    assert (info.attempts, info.snoozes, info.result) == (1, 1, "later")
    assert (sibling.status, sibling.snoozes) == ("succeeded", 0)
    assert [a.outcome for a in attempts] == ["snoozed", "succeeded"]


async def test_a_claim_hook_may_snooze_its_job(autojump_clock: object) -> None:
    """on_job_claimed counts with the handler: its Snooze snoozes the job, and the
    handler does not run that attempt."""
    rec = Recorder()
    hooked: list[float] = []
    handled: list[float] = []

    async def on_job_claimed(job: trioqueue.Job) -> None:
        hooked.append(trio.current_time())
        if len(hooked) == 1:
            raise trioqueue.Snooze(2)

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        handled.append(trio.current_time())

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {})
        start = trio.current_time()
        cfg = config(rec, handler=handler, on_job_claimed=on_job_claimed, poll_interval=60)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        info = await _until(backend, job_id, "succeeded")
        nursery.cancel_scope.cancel()
    assert [round(t - start, 3) for t in hooked] == [0.0, 2.0]
    assert [round(t - start, 3) for t in handled] == [2.0]
    assert (info.attempts, info.snoozes) == (1, 1)
