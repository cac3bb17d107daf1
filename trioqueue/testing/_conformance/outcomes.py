"""Outcomes: ack, fail (retried or final) and release, each fenced by claim_seq."""

from __future__ import annotations

from trioqueue._backends.interface import Backend
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import Ack, Failure, Recorded, Release
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["OutcomeConformance"]


class OutcomeConformance(ConformanceBase):
    """Outcomes: ack, fail (retried or final) and release, each fenced by claim_seq."""

    async def test_ack_succeeds_the_job(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert await backend.ack([Ack(job_id, claimed.job.claim_seq)]) == [True]
        info = await backend.get_job(job_id)
        assert info.status == "succeeded"
        assert info.finished_at is not None
        assert info.finished_at >= info.created_at
        assert await backend.ack([Ack(job_id, claimed.job.claim_seq)]) == [False]
        assert await self._claim(backend) == []

    async def test_stale_claim_seq_writes_change_nothing(
        self, backend: Backend, clock: object
    ) -> None:
        """I9: a write naming a superseded claim_seq is a no-op, whatever it is."""
        job_id = await backend.enqueue(Q, "x")
        old = await self._claim_one(backend)
        assert await backend.release([Release(job_id, old.job.claim_seq)]) == [True]
        new = await self._claim_one(backend)
        seq = old.job.claim_seq
        assert await backend.ack([Ack(job_id, seq, progress=0.5)]) == [False]
        assert await backend.fail([Failure(job_id, seq, "stale", None)]) == [None]
        assert await backend.fail([Failure(job_id, seq, "stale", 0.0)]) == [None]
        assert await backend.release([Release(job_id, seq)]) == [False]
        stale_renewal = RenewItem(job_id, seq, 0.5)
        assert await self._renew(backend, stale_renewal) == {job_id: Verdict.RECLAIMED}
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts) == ("running", 1)
        assert (info.progress, info.last_error) == (None, None)
        assert await backend.ack([Ack(job_id, new.job.claim_seq)]) == [True]

    async def test_fail_with_retry_schedules_the_job_again(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=3)
        first = await self._claim_one(backend)
        failure = Failure(job_id, first.job.claim_seq, "boom", retry_delay=self.short_timeout)
        assert await backend.fail([failure]) == [Recorded.RETRY]
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.last_error) == ("scheduled", 1, "boom")
        assert info.finished_at is None
        assert await self._claim(backend) == []
        await self._wait_out()
        second = await self._claim_one(backend)
        assert second.job.attempt == 2
        assert second.job.claim_seq > first.job.claim_seq

    async def test_final_failure_fails_the_job(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        failure = Failure(job_id, claimed.job.claim_seq, "it broke", retry_delay=None)
        assert await backend.fail([failure]) == [Recorded.FINAL]
        info = await backend.get_job(job_id)
        assert (info.status, info.last_error) == ("failed", "it broke")
        assert info.finished_at is not None
        assert await self._claim(backend) == []
        assert await backend.fail([failure]) == [None]

    async def test_retry_of_the_final_attempt_is_final(
        self, backend: Backend, clock: object
    ) -> None:
        """A job never runs past max_attempts, even if asked to retry."""
        job_id = await backend.enqueue(Q, "x", max_attempts=1)
        claimed = await self._claim_one(backend)
        assert await backend.fail([Failure(job_id, claimed.job.claim_seq, "boom", 0.0)]) == [
            Recorded.FINAL
        ]
        assert (await backend.get_job(job_id)).status == "failed"
        assert await self._claim(backend) == []

    async def test_release_gives_the_attempt_back(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        first = await self._claim_one(backend)
        release = Release(job_id, first.job.claim_seq, progress=0.5)
        assert await backend.release([release]) == [True]
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.progress) == ("ready", 0, 0.5)
        second = await self._claim_one(backend)
        assert second.job.attempt == 1
        assert second.job.claim_seq > first.job.claim_seq
