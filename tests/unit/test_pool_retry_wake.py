"""A retried job is claimed when its retry delay ends, not at the next poll.

The pool that recorded the retry knows when the job becomes visible again, so its claim
loop wakes then (docs/configuration.rst, ``poll_interval``). Driven by trio's MockClock on
the memory backend, so the times are exact."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue._runtime.pool import RETRY_WAKE_FLOOR, _DueTimes

#: Long enough that an attempt started before it was not started by the poll.
POLL = 30.0
DELAY = 1.08


def _constant(delay: float) -> Any:
    return lambda attempt: delay


async def test_a_retry_runs_when_its_delay_ends_not_at_the_next_poll(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rec = Recorder()
    cfg = config(rec, poll_interval=POLL, backoff=_constant(DELAY))
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        job = await backend.enqueue("q", {"fail_attempts": 1})
        retry = await rec.wait_for("retry", job)
        second = await rec.wait_for("started", job, count=2)
        nursery.cancel_scope.cancel()
    assert retry.detail == DELAY
    assert second.at == pytest.approx(retry.at + DELAY)


async def test_retries_due_together_are_claimed_by_one_wake(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Several jobs retried with the same delay come back in one claim, at the delay's end."""
    rec = Recorder()
    cfg = config(rec, poll_interval=POLL, concurrency=4, backoff=_constant(DELAY))
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        jobs = [await backend.enqueue("q", {"fail_attempts": 1}) for _ in range(4)]
        for job in jobs:
            await rec.wait_for("started", job, count=2)
        nursery.cancel_scope.cancel()
    for job in jobs:
        retry, second = rec.of("retry", job)[0], rec.of("started", job)[1]
        assert second.at == pytest.approx(retry.at + DELAY)


async def test_a_flood_of_retries_wakes_the_claim_loop_at_most_once_per_floor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """50 retries due a microsecond apart: not 50 claims, one per RETRY_WAKE_FLOOR (two
    here: the first due, then every other one a floor later)."""
    claims: list[float] = []
    rec = Recorder()
    delays = iter([DELAY + i * 1e-6 for i in range(50)])
    cfg = config(rec, poll_interval=POLL, concurrency=50, backoff=lambda attempt: next(delays))
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        claim = backend.claim

        async def counted(*args: Any, **kwargs: Any) -> Any:
            claims.append(trio.current_time())
            return await claim(*args, **kwargs)

        backend.claim = counted  # type: ignore[method-assign]
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        jobs = [await backend.enqueue("q", {"fail_attempts": 1}) for _ in range(50)]
        for job in jobs:
            await rec.wait_for("started", job, count=2)
        nursery.cancel_scope.cancel()
    first_due = min(e.at + e.detail for e in rec.of("retry"))
    woken = [at for at in claims if first_due <= at < POLL]
    assert woken == pytest.approx([first_due, first_due + RETRY_WAKE_FLOOR])


def test_a_pool_keeps_the_earliest_due_times_only_and_forgets_those_a_claim_covers() -> None:
    """Memory stays bounded under a flood of long retries: the latest times go (their jobs
    are claimed at a poll), and a claim sent at ``now`` covers every time up to it."""
    due = _DueTimes(3)
    for at in (5.0, 1.0, 4.0, 2.0, 3.0):
        due.add(at)
    assert due.earliest() == 1.0
    due.drop_through(2.0)
    assert due.earliest() == 3.0
    due.drop_through(3.5)
    assert due.earliest() is None  # 4.0 and 5.0 were past the three kept
