"""Claiming: order, limits, attempts and claim_seq, leases, delays, dead-lettering."""

from __future__ import annotations

from trioqueue._backends.interface import Backend
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["ClaimConformance"]


class ClaimConformance(ConformanceBase):
    """Claiming: order, limits, attempts and claim_seq, leases, delays, dead-lettering."""

    async def test_claim_order_is_priority_desc_then_id(
        self, backend: Backend, clock: object
    ) -> None:
        ids = [await backend.enqueue(Q, n, priority=p) for n, p in enumerate([0, 5, 0, 5, -1])]
        claimed = await self._claim(backend, limit=10)
        assert self._ids(claimed) == [ids[1], ids[3], ids[0], ids[2], ids[4]]

    async def test_claim_respects_limit_and_queue(self, backend: Backend, clock: object) -> None:
        ids = await backend.enqueue_many(Q, list(range(5)))
        await backend.enqueue("other", "not mine")
        assert self._ids(await self._claim(backend, limit=2)) == ids[:2]
        assert self._ids(await self._claim(backend, limit=10)) == ids[2:]
        assert await self._claim(backend, limit=10) == []

    async def test_claim_bumps_attempt_and_claim_seq_and_sets_the_lease(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, {"n": 1}, max_attempts=3)
        before = backend.wall_time()
        claimed = await self._claim_one(backend, visibility_timeout=30)
        after = backend.wall_time()
        job = claimed.job
        assert (job.id, job.queue, job.payload) == (job_id, Q, {"n": 1})
        assert (job.attempt, job.max_attempts) == (1, 3)
        assert job.claim_seq >= 1
        # One second of tolerance for a database clock read over the network.
        assert before + 30 - 1 <= claimed.lease_until <= after + 30 + 1
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts) == ("running", 1)

    async def test_delayed_job_is_scheduled_until_due(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "later", delay=self.short_timeout)
        assert (await backend.get_job(job_id)).status == "scheduled"
        assert await self._claim(backend) == []
        await self._wait_out()
        assert (await backend.get_job(job_id)).status == "ready"
        assert self._ids(await self._claim(backend)) == [job_id]

    async def test_lease_expired_on_final_attempt_is_failed_at_next_claim(
        self, backend: Backend, clock: object
    ) -> None:
        last = await backend.enqueue(Q, "last", max_attempts=1)
        again = await backend.enqueue(Q, "again", max_attempts=2)
        await self._claim(backend, visibility_timeout=self.short_timeout)
        await self._wait_out()
        reclaimed = await self._claim(backend)
        assert [(c.job.id, c.job.attempt) for c in reclaimed] == [(again, 2)]
        info = await backend.get_job(last)
        assert (info.status, info.attempts) == ("failed", 1)
        assert info.last_error is not None
        assert "final attempt" in info.last_error
        assert info.finished_at is not None
