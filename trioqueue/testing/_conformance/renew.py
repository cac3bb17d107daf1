"""Renewing: one statement for many jobs, verdicts, fencing, progress, bad leases."""

from __future__ import annotations

import math

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import Ack, Failure, Recorded, Release
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["RenewConformance"]


class RenewConformance(ConformanceBase):
    """Renewing: one statement for many jobs, verdicts, fencing, progress, bad leases."""

    async def test_renew_extends_every_item_in_one_statement(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue_many(Q, [1, 2, 3])
        claimed = await self._claim(backend)
        renewals = backend.statistics()["calls"]["renew"]
        verdicts = await self._renew(backend, *map(self._item, claimed))
        assert verdicts == dict.fromkeys(self._ids(claimed), Verdict.EXTENDED)
        assert backend.statistics()["calls"]["renew"] == renewals + 1
        assert {i.status for i in await backend.list_jobs()} == {"running"}

    async def test_after_reclaim_the_old_attempt_is_fenced_out(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue(Q, "x")
        old = await self._claim_one(backend, visibility_timeout=self.short_timeout)
        await self._wait_out()
        new = await self._claim_one(backend)
        assert new.job.id == old.job.id
        assert new.job.claim_seq > old.job.claim_seq
        assert new.job.attempt == 2
        assert await self._renew(backend, self._item(old)) == {old.job.id: Verdict.RECLAIMED}
        # I9, the classic case: the slow first worker reports after its job was re-claimed.
        assert await backend.ack([Ack(old.job.id, old.job.claim_seq)]) == [False]
        assert await self._renew(backend, self._item(new)) == {new.job.id: Verdict.EXTENDED}

    async def test_renew_after_ack_or_of_unknown_job_says_gone(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert await backend.ack([Ack(claimed.job.id, claimed.job.claim_seq)]) == [True]
        unknown = RenewItem(10**9, 1, None)
        verdicts = await self._renew(backend, self._item(claimed), unknown)
        assert verdicts == {claimed.job.id: Verdict.GONE, unknown.job_id: Verdict.GONE}

    async def test_renew_after_cancel_says_cancel_requested(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert await backend.cancel(claimed.job.id) is True
        info = await backend.get_job(claimed.job.id)
        assert (info.status, info.last_error) == ("running", None)  # cancel is cooperative
        verdicts = await self._renew(backend, self._item(claimed))
        assert verdicts == {claimed.job.id: Verdict.CANCEL_REQUESTED}

    async def test_renew_stores_progress(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)

        async def progress_after(value: float | None) -> float | None:
            await self._renew(backend, self._item(claimed, value))
            return (await backend.get_job(job_id)).progress

        assert (await backend.get_job(job_id)).progress is None
        assert await progress_after(0.25) == 0.25
        assert await progress_after(None) == 0.25  # no new value: the old one stays
        assert await progress_after(0.75) == 0.75
        await backend.ack([Ack(job_id, claimed.job.claim_seq, progress=1.0)])
        assert (await backend.get_job(job_id)).progress == 1.0

    async def test_a_new_attempt_starts_without_the_old_attempts_progress(
        self, backend: Backend, clock: object
    ) -> None:
        """Progress belongs to an attempt: a retried, released or reclaimed job shows none
        until its new attempt reports some."""
        job_id = await backend.enqueue(Q, "x", max_attempts=5)
        first = await self._claim_one(backend)
        await self._renew(backend, self._item(first, 0.5))
        assert await backend.fail([Failure(job_id, first.job.claim_seq, "boom", 0.0, 0.75)]) == [
            Recorded.RETRY
        ]
        assert (await backend.get_job(job_id)).progress == 0.75  # the failed attempt's
        second = await self._claim_one(backend)
        assert (await backend.get_job(job_id)).progress is None
        await self._renew(backend, self._item(second, None))
        assert (await backend.get_job(job_id)).progress is None
        await backend.release([Release(job_id, second.job.claim_seq, progress=0.25)])
        third = await self._claim_one(backend, visibility_timeout=self.short_timeout)
        assert (await backend.get_job(job_id)).progress is None
        await backend.renew([self._item(third, 0.5)], visibility_timeout=self.short_timeout)
        await self._wait_out()  # the lease runs out: the next claim takes the job again
        await self._claim_one(backend)
        assert (await backend.get_job(job_id)).progress is None

    async def test_renewal_naming_a_job_twice_is_refused(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        seq = (await self._claim_one(backend)).job.claim_seq
        twice = [RenewItem(job_id, seq, 0.5), RenewItem(job_id, seq, None)]
        with pytest.raises(ValueError, match="more than once"):
            await backend.renew(twice, visibility_timeout=60)
        assert (await backend.get_job(job_id)).progress is None  # nothing renewed

    @pytest.mark.parametrize(
        "seconds",
        [0, -1, math.nan, math.inf, 1e12, 10**400],
        ids=["zero", "negative", "nan", "inf", "huge", "beyond-float"],
    )
    async def test_bad_lease_lengths_and_retry_delays_are_refused(
        self, backend: Backend, clock: object, seconds: float
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        with pytest.raises(ValueError, match="visibility_timeout must be"):
            await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=seconds)
        claimed = await self._claim_one(backend)
        renewal = [RenewItem(job_id, claimed.job.claim_seq, 0.5)]
        with pytest.raises(ValueError, match="visibility_timeout must be"):
            await backend.renew(renewal, visibility_timeout=seconds)
        if seconds != 0:  # a retry may come due at once
            with pytest.raises(ValueError, match="retry_delay must be"):
                await backend.fail([Failure(job_id, claimed.job.claim_seq, "x", seconds)])
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.progress, info.last_error) == (
            "running",
            1,
            None,
            None,
        )
