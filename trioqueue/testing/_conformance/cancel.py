"""Cancelling: queued, running, finished and expired jobs; a cancelled job never retries."""

from __future__ import annotations

from trioqueue._backends.interface import Backend
from trioqueue._types import Ack, Failure, NoticeKind, Recorded
from trioqueue.testing._conformance._base import WORKER, ConformanceBase, Q

__all__ = ["CancelConformance"]


class CancelConformance(ConformanceBase):
    """Cancelling: queued, running, finished and expired jobs; a cancelled job never retries."""

    async def test_cancel_of_a_queued_job_fails_it_at_once(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        later = await backend.enqueue(Q, "y", delay=self.long_timeout)
        assert await backend.cancel(job_id) is True
        assert await backend.cancel(later) is True
        for info in await backend.list_jobs():
            assert info.status == "failed"
            assert info.last_error is not None
            assert info.last_error.startswith("cancelled")
            assert info.finished_at is not None
        assert await self._claim(backend) == []
        assert await backend.cancel(job_id) is False

    async def test_cancel_of_finished_or_unknown_job_returns_false(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        await backend.ack([Ack(job_id, claimed.job.claim_seq)])
        assert await backend.cancel(job_id) is False
        assert await backend.cancel(10**9) is False
        assert (await backend.get_job(job_id)).status == "succeeded"

    async def test_cancel_of_a_running_job_notifies_its_worker(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        async with backend.listen(Q, WORKER) as notices:
            await self._claim_one(backend)
            assert await backend.cancel(job_id) is True
            notice = await self._next_notice(notices, NoticeKind.CANCEL)
        assert (notice.queue, notice.job_id) == (Q, job_id)

    async def test_cancel_requested_job_is_not_retried(
        self, backend: Backend, clock: object
    ) -> None:
        """I12: a failure after a cancel request is final, even when a retry was asked."""
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        await backend.cancel(job_id)
        assert await backend.fail([Failure(job_id, claimed.job.claim_seq, "boom", 0.0)]) == [
            Recorded.FINAL
        ]
        info = await backend.get_job(job_id)
        assert info.status == "failed"
        assert info.last_error is not None
        assert info.last_error.startswith("cancelled")
        assert await self._claim(backend) == []

    async def test_cancel_after_lease_expiry(self, backend: Backend, clock: object) -> None:
        """A cancel flag outlives its lease; a cancel after the lease expired acts at once."""
        flagged, expired = await backend.enqueue_many(Q, ["flagged", "expired"])
        await self._claim(backend, visibility_timeout=self.short_timeout)
        assert await backend.cancel(flagged) is True  # lease live: only the flag is set
        await self._wait_out()
        assert await backend.cancel(expired) is True  # lease gone: failed at once
        assert (await backend.get_job(expired)).status == "failed"
        assert await self._claim(backend) == []  # the flagged job is failed, not re-run
        for job_id in (flagged, expired):
            info = await backend.get_job(job_id)
            assert info.status == "failed"
            assert info.last_error is not None
            assert info.last_error.startswith("cancelled")
