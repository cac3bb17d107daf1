"""Worker pools of one process on one backend and queue share their work notices
(trioqueue/_runtime/siblings.py): one claim per notice, not one per pool; a full claim
shares the rest out; and a claim that saw every row is not followed by another at once.
Memory backend, MockClock: times are exact."""

from __future__ import annotations

import trio
import trio.testing

import trioqueue
from tests._pool_harness import Recorder, config

POLL = 30.0  # long: every claim below is one a notice or a sibling asked for


async def _start_pools(
    nursery: trio.Nursery, backend: trioqueue.MemoryBackend, cfg: trioqueue.WorkerConfig, n: int
) -> None:
    for _ in range(n):
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
    await trio.testing.wait_all_tasks_blocked()  # every pool's first claim found nothing


async def test_one_notice_sends_one_claim_not_one_per_pool(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await _start_pools(nursery, backend, config(rec, poll_interval=POLL, batch_size=10), 5)
        before = backend.statistics()["calls"]["claim"]
        job_id = await backend.enqueue("q", {})
        await rec.wait_for("succeeded", job_id)
        await trio.testing.wait_all_tasks_blocked()
        claims = backend.statistics()["calls"]["claim"] - before
        nursery.cancel_scope.cancel()
    assert claims == 1


async def test_a_full_claim_wakes_the_siblings_so_a_large_enqueue_spreads(
    autojump_clock: object,
) -> None:
    """Three pools of one slot and batches of two; six jobs in one enqueue (one notice):
    the claim that comes back full wakes its siblings, and all six start at once."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        cfg = config(rec, poll_interval=POLL, concurrency=1, batch_size=2)
        await _start_pools(nursery, backend, cfg, 3)
        enqueued_at = trio.current_time()
        ids = await backend.enqueue_many("q", [{"sleep": 5}] * 6)
        await rec.wait_for("started", count=6)
        nursery.cancel_scope.cancel()
    assert [rec.of("started", job_id)[0].at for job_id in ids] == [enqueued_at] * 6


async def test_a_claim_that_saw_every_row_is_not_followed_by_another_at_once(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await _start_pools(nursery, backend, config(rec, poll_interval=POLL, batch_size=10), 1)
        before = backend.statistics()["calls"]["claim"]
        ids = await backend.enqueue_many("q", [{}, {}])
        for job_id in ids:
            await rec.wait_for("succeeded", job_id)
        await trio.testing.wait_all_tasks_blocked()
        claims = backend.statistics()["calls"]["claim"] - before
        nursery.cancel_scope.cancel()
    assert claims == 1  # two rows asked for ten: the next claim waits for a notice


async def test_pools_on_different_queues_are_not_siblings(autojump_clock: object) -> None:
    """A claim from another queue took nothing of this one: its notice is claimed for."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await _start_pools(nursery, backend, config(rec, poll_interval=POLL, queue="other"), 2)
        await _start_pools(nursery, backend, config(rec, poll_interval=POLL, batch_size=10), 1)
        enqueued_at = trio.current_time()
        other = await backend.enqueue("other", {"sleep": 1})
        job_id = await backend.enqueue("q", {"sleep": 1})
        await rec.wait_for("started", job_id)
        await rec.wait_for("started", other)
        nursery.cancel_scope.cancel()
    assert rec.of("started", job_id)[0].at == enqueued_at
