"""Whole pools on the memory backend under flow control (docs/flow.rst): a queue paused
mid-run, limits and groups held by several pools at once. Driven by trio's MockClock, so
times are exact and nothing sleeps for real."""

from __future__ import annotations

import itertools
from typing import Any

import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue import JobContext

#: Long enough that a claim answered within it was woken by a notice, not by the poll.
POLL = 30.0


async def test_pausing_mid_run_lets_running_jobs_finish_and_claims_nothing_until_resumed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started: dict[int, float] = {}
    first_started, release = trio.Event(), trio.Event()

    async def handler(payload: Any, ctx: JobContext) -> None:
        started[ctx.job_id] = trio.current_time()
        if payload == "first":
            first_started.set()
            await release.wait()

    cfg = config(Recorder(), handler=handler, poll_interval=POLL)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        first = await backend.enqueue("q", "first")
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await first_started.wait()
        await backend.pause_queue("q")
        later = await backend.enqueue("q", "later")  # its notice wakes the pool: it claims nothing
        release.set()
        running = await backend.wait_for(first, timeout=5)  # the running job went on
        await trio.sleep(600)  # twenty polls of a paused queue
        assert (await backend.get_job(later)).status == "ready"
        assert later not in started
        resumed_at = trio.current_time()
        await backend.resume_queue("q")
        done = await backend.wait_for(later, timeout=5)
        nursery.cancel_scope.cancel()
    assert (running.status, done.status) == ("succeeded", "succeeded")
    assert started[later] - resumed_at < 1.0  # the resume's notice, not the 30 s poll


async def test_max_running_holds_across_pools(autojump_clock: trio.testing.MockClock) -> None:
    """Three pools with room for 12 jobs between them; never more than 2 run at once."""
    running: list[int] = []
    most = 0

    async def handler(payload: Any, ctx: JobContext) -> None:
        nonlocal most
        running.append(ctx.job_id)
        most = max(most, len(running))
        await trio.sleep(1.0)
        running.remove(ctx.job_id)

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await backend.set_queue_limits("q", max_running=2)
        ids = await backend.enqueue_many("q", list(range(12)))
        for _ in range(3):
            cfg = config(Recorder(), handler=handler, concurrency=4, poll_interval=POLL)
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        began = trio.current_time()
        infos = [await backend.wait_for(i, timeout=60) for i in ids]
        took = trio.current_time() - began
        nursery.cancel_scope.cancel()
    assert {i.status for i in infos} == {"succeeded"}
    assert most == 2
    # Six rounds of two: the pools asked again when a slot freed (retry_after), not per poll.
    assert 6.0 <= took < 12.0


async def test_max_per_second_spreads_the_starts(autojump_clock: trio.testing.MockClock) -> None:
    starts: list[float] = []

    async def handler(payload: Any, ctx: JobContext) -> None:
        starts.append(trio.current_time())

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await backend.set_queue_limits("q", max_per_second=5)
        ids = await backend.enqueue_many("q", list(range(30)))
        for _ in range(2):
            cfg = config(Recorder(), handler=handler, concurrency=10, poll_interval=POLL)
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        for job_id in ids:
            await backend.wait_for(job_id, timeout=60)
        nursery.cancel_scope.cancel()
    starts.sort()
    # A full bucket (5) at once, then 5 a second: 30 jobs in about 5 s, never faster.
    for n, t in enumerate(starts):
        for m in range(n, len(starts)):
            assert m - n + 1 <= 5 * (starts[m] - t) + 5 + 1e-9
    assert 4.5 <= starts[-1] - starts[0] < 7.0


async def test_a_group_runs_one_job_at_a_time_in_order_beside_other_work(
    autojump_clock: trio.testing.MockClock,
) -> None:
    spans: dict[int, tuple[float, float]] = {}

    async def handler(payload: Any, ctx: JobContext) -> None:
        began = trio.current_time()
        await trio.sleep(0.5)
        spans[ctx.job_id] = (began, trio.current_time())

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        grouped = [await backend.enqueue("q", n, group="customer-42") for n in range(8)]
        urgent = await backend.enqueue("q", "urgent", group="customer-42", priority=5)
        others = await backend.enqueue_many("q", list(range(8)))
        for _ in range(2):
            cfg = config(Recorder(), handler=handler, concurrency=4, poll_interval=POLL)
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        for job_id in [*grouped, urgent, *others]:
            await backend.wait_for(job_id, timeout=60)
        urgent_info = await backend.get_job(urgent)
        nursery.cancel_scope.cancel()
    order = sorted([urgent, *grouped], key=lambda i: spans[i][0])
    assert order == [urgent, *grouped]  # priority first, then enqueue order
    for before, after in itertools.pairwise(order):
        assert spans[after][0] >= spans[before][1]  # one at a time
    group_end = spans[order[-1]][1]
    assert all(spans[i][1] < group_end for i in others)  # the others did not wait for it
    assert urgent_info.group == "customer-42"
