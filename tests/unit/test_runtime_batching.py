"""The runtime's per-batch settling and the memory backend's waiting heap.

A batch of several jobs writes the outcomes of its jobs itself, every outcome left since its
last write in one hand-over to the outcome writer (docs/architecture.rst, "The nursery
tree"); a job stays renewed until its outcome is written (docs/protocol.rst §4).
"""

from __future__ import annotations

import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.validation import EnqueueRequest
from trioqueue._core.wire import RenewItem
from trioqueue.testing import error


async def test_jobs_finishing_together_share_one_write_and_a_late_one_stays_renewed(
    autojump_clock: object,
) -> None:
    """Batch of four: three end at t=1 (two succeed, one fails), one at t=7. One ack and one
    fail statement at t=1 carry the three; the late job is renewed until its own ack."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        payloads = [{"sleep": 1}, {"sleep": 1, "fail_attempts": 1}, {"sleep": 1}, {"sleep": 7}]
        ids = [await backend.enqueue("q", p, max_attempts=1) for p in payloads]
        cfg = config(rec, batch_size=4, visibility_timeout=4, heartbeat_interval=1)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        with trio.fail_after(30):
            await rec.wait_for("failed", ids[1])
            await trio.sleep(1)  # t=2
            at_two = backend.statistics()["calls"]
            await rec.wait_for("succeeded", ids[3])
        calls = backend.statistics()["calls"]
        late = await backend.get_job(ids[3])
        nursery.cancel_scope.cancel()
    assert (at_two["ack"], at_two["fail"]) == (1, 1)  # the three of t=1, in one hand-over
    assert calls["ack"] == 2  # and the late one alone
    assert [e.at for e in rec.of("succeeded")] == [1, 1, 7]
    assert rec.of("unavailable") == []  # the late job outlived V=4: it was renewed
    assert late.status == "succeeded"


async def test_batch_of_one_settles_itself(autojump_clock: object) -> None:
    """A batch of one job (no job task, no job scope) still writes one outcome, fenced."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        job_id = await backend.enqueue("q", {"sleep": 3})
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        with trio.fail_after(30):
            await rec.wait_for("succeeded", job_id)
        calls = backend.statistics()["calls"]
        nursery.cancel_scope.cancel()
    assert calls["ack"] == 1
    assert [e.at for e in rec.of("succeeded")] == [3]


def test_a_renewed_row_keeps_one_waiting_entry_and_still_expires() -> None:
    """However often a running row is renewed, its queue's waiting heap holds one live entry
    for it; once renewals stop, it is claimable again when its last lease runs out."""
    model = MemoryModel()
    [job_id], _ = model.enqueue(0.0, EnqueueRequest("q", ("{}",), 0, 0.0, 3, None))
    [claimed] = model.claim(0.0, "q", 1, "w", 10.0)
    for t in range(1, 101):
        model.renew(float(t), [RenewItem(job_id, claimed.job.claim_seq, None)], 10.0, None)
    assert len(model._queues["q"].waiting) <= 2  # its claim's entry, pushed again once
    assert model.claim(109.0, "q", 1, "w2", 10.0) == []  # leased until 110
    [again] = model.claim(110.5, "q", 1, "w2", 10.0)
    assert again.job.id == job_id and again.job.attempt == 2


async def test_a_failed_batch_write_is_retried_for_the_batch_and_the_other_kind_stands(
    autojump_clock: object,
) -> None:
    """Batch of three ending together: two successes and one failure. The ack statement
    fails once (transiently): both acks are written again, together, after a pause; the
    failure, sent in its own statement, was recorded the first time."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("ack", error(times=1))
        payloads = [{"sleep": 1}, {"sleep": 1, "fail_attempts": 1}, {"sleep": 1}]
        ids = [await backend.enqueue("q", p, max_attempts=1) for p in payloads]
        cfg = config(rec, batch_size=3, visibility_timeout=4, heartbeat_interval=1)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        with trio.fail_after(30):
            await rec.wait_for("succeeded", count=2)
        calls = backend.statistics()["calls"]
        jobs = [await backend.get_job(job_id) for job_id in ids]
        nursery.cancel_scope.cancel()
    assert (calls["ack"], calls["fail"]) == (2, 1)
    assert [job.status for job in jobs] == ["succeeded", "failed", "succeeded"]
    assert rec.of("failed")[0].at == 1
    assert all(e.at > 1 for e in rec.of("succeeded"))
    assert rec.of("unavailable") == []
