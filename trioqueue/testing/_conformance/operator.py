"""Operator queries: list_jobs, counts, queue_stats and retry."""

from __future__ import annotations

from typing import Any

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._types import Ack, Failure
from trioqueue.testing._conformance._base import WORKER, ConformanceBase, Q

__all__ = ["OperatorConformance"]


class OperatorConformance(ConformanceBase):
    """Operator queries: list_jobs, counts, queue_stats and retry."""

    async def test_list_jobs_filters_and_pages(self, backend: Backend, clock: object) -> None:
        ids = await backend.enqueue_many(Q, list(range(5)))
        others = await backend.enqueue_many("other", ["x", "y"])
        scheduled = await backend.enqueue(Q, "later", delay=self.long_timeout)
        running = await self._claim_one(backend)
        done = await self._claim_one(backend)
        await backend.ack([Ack(done.job.id, done.job.claim_seq)])

        async def listed(**filters: Any) -> list[int]:
            return self._ids(await backend.list_jobs(**filters))

        assert await listed() == [*ids, *others, scheduled]
        assert await listed(queue=Q) == [*ids, scheduled]
        assert await listed(status="running") == [running.job.id]
        assert await listed(status="succeeded") == [done.job.id]
        assert await listed(status="scheduled") == [scheduled]
        assert await listed(queue=Q, status="ready") == ids[2:]
        assert await listed(status="failed") == []
        assert await listed(limit=2, offset=1) == ids[1:3]
        assert await listed(offset=100) == []

    async def test_a_fresh_read_sees_what_the_last_write_did(
        self, backend: Backend, clock: object
    ) -> None:
        """``fresh=True`` (the primary's state, where a backend reads a replica) is taken by
        every backend; without a replica it reads what a plain read does."""
        job_id = await backend.enqueue(Q, "x")
        running = await self._claim_one(backend)
        assert (await backend.get_job(job_id, fresh=True)).status == "running"
        await backend.ack([Ack(running.job.id, running.job.claim_seq)])
        assert (await backend.get_job(job_id, fresh=True)).status == "succeeded"
        fresh = await backend.get_jobs([job_id], fresh=True)
        assert fresh == await backend.get_jobs([job_id])
        assert fresh[job_id].status == "succeeded"

    @pytest.mark.parametrize(
        "filters",
        [
            pytest.param({"status": "bogus"}, id="status"),
            pytest.param({"limit": 0}, id="limit-0"),
            pytest.param({"limit": 10_001}, id="limit-10001"),
            pytest.param({"offset": -1}, id="offset"),
        ],
    )
    async def test_list_jobs_rejects_bad_arguments(
        self, backend: Backend, clock: object, filters: dict[str, Any]
    ) -> None:
        [name] = filters
        with pytest.raises(ValueError, match=name):
            await backend.list_jobs(**filters)

    async def test_counts_per_queue_and_state(self, backend: Backend, clock: object) -> None:
        assert await backend.counts() == {}
        first = await backend.enqueue(Q, "a")
        await backend.enqueue(Q, "b")
        await backend.enqueue(Q, "c", delay=3600)
        await backend.enqueue("other", "d")
        claimed = await self._claim_one(backend)
        assert claimed.job.id == first
        await backend.ack([Ack(first, claimed.job.claim_seq)])
        await backend.claim(Q, limit=1, worker_id=WORKER, visibility_timeout=60)
        assert await backend.counts() == {
            Q: {"succeeded": 1, "running": 1, "scheduled": 1},
            "other": {"ready": 1},
        }

    async def test_queue_stats_counts_as_counts_does_and_none_without_ready_jobs(
        self, backend: Backend, clock: object
    ) -> None:
        assert await backend.queue_stats() == {}
        await backend.enqueue(Q, "later", delay=self.long_timeout)
        done = await backend.enqueue(Q, "done")
        claimed = await self._claim_one(backend)
        await backend.ack([Ack(done, claimed.job.claim_seq)])
        await backend.enqueue(Q, "running")
        await backend.claim(Q, limit=1, worker_id=WORKER, visibility_timeout=self.long_timeout)
        stats = await backend.queue_stats()
        # Scheduled, running and finished jobs are not ready: no age.
        assert {queue: s.counts for queue, s in stats.items()} == await backend.counts()
        assert stats[Q].counts == {"scheduled": 1, "succeeded": 1, "running": 1}
        assert stats[Q].oldest_ready_age is None

    async def test_queue_stats_ages_the_oldest_ready_job_from_when_it_became_claimable(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue(Q, "first")
        await backend.enqueue(Q, "second")
        await backend.enqueue("delayed", "x", delay=self.short_timeout)
        stats = await backend.queue_stats()
        assert stats["delayed"].oldest_ready_age is None  # not ready yet
        first_age = stats[Q].oldest_ready_age
        assert first_age is not None
        assert first_age >= 0
        await self._wait_out()
        stats = await backend.queue_stats()
        age, delayed_age = stats[Q].oldest_ready_age, stats["delayed"].oldest_ready_age
        assert age is not None
        assert delayed_age is not None
        assert age >= self.short_timeout + self.slack
        # The delayed job ages from its delay's end, not from its enqueue: at least
        # short_timeout younger than a job enqueued before it (one snapshot, one clock).
        assert delayed_age >= 0
        assert age - delayed_age >= self.short_timeout - 1e-6
        # Claiming the oldest leaves the second, enqueued later: younger, still ready.
        await backend.claim(Q, limit=1, worker_id=WORKER, visibility_timeout=self.long_timeout)
        after = (await backend.queue_stats())[Q]
        assert after.counts == {"ready": 1, "running": 1}
        assert after.oldest_ready_age is not None

    async def test_retry_puts_a_failed_job_back_for_one_more_attempt(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=1)
        claimed = await self._claim_one(backend)
        await backend.fail([Failure(job_id, claimed.job.claim_seq, "boom", None)])
        assert await backend.retry(job_id) is True
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.max_attempts) == ("ready", 1, 2)
        assert info.last_error == "boom"
        assert info.finished_at is None
        again = await self._claim_one(backend)
        assert (again.job.id, again.job.attempt) == (job_id, 2)
        assert again.job.claim_seq > claimed.job.claim_seq

    async def test_retry_refuses_unknown_and_unfinished_jobs(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        assert await backend.retry(job_id) is False  # queued
        claimed = await self._claim_one(backend)
        assert await backend.retry(job_id) is False  # running
        await backend.ack([Ack(job_id, claimed.job.claim_seq)])
        assert await backend.retry(job_id) is False  # succeeded
        assert await backend.retry(10**9) is False
        assert (await backend.get_job(job_id)).status == "succeeded"
