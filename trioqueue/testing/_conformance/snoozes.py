"""Snoozes: a fenced outcome that puts the job back after a delay without charging the
attempt, counted on the row and bounded by ``max_snoozes`` (docs/protocol.rst §17, I19)."""

from __future__ import annotations

import math

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._core.snooze import snooze_limit_message
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import Ack, AttemptTiming, Claimed, Failure, Recorded, Snoozed, SnoozeWrite
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["SnoozeConformance"]

#: The bound the tests send unless they test it.
BOUND = 100


class SnoozeConformance(ConformanceBase):
    """Snoozes: fenced, uncharged, counted, run after their delay, bounded."""

    @staticmethod
    def _snooze(
        claimed: Claimed,
        seconds: float = 0.0,
        *,
        progress: float | None = None,
        timing: AttemptTiming | None = None,
        checkpoint: str | None = None,
    ) -> SnoozeWrite:
        job = claimed.job
        return SnoozeWrite(job.id, job.claim_seq, seconds, progress, timing, checkpoint)

    async def test_snooze_gives_the_attempt_back_and_counts(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=2)
        assert (await backend.get_job(job_id)).snoozes == 0
        for expected in (1, 2, 3):  # more snoozes than max_attempts: none is charged
            claimed = await self._claim_one(backend)
            assert claimed.job.attempt == 1
            write = self._snooze(claimed, progress=0.25)
            assert await backend.snooze([write], max_snoozes=BOUND) == [Snoozed.SNOOZED]
            info = await backend.get_job(job_id)
            assert (info.status, info.attempts, info.snoozes) == ("ready", 0, expected)
            assert (info.progress, info.finished_at, info.last_error) == (0.25, None, None)
        # The count is kept by an ordinary outcome, and shown by every read.
        claimed = await self._claim_one(backend)
        assert await backend.ack([Ack(job_id, claimed.job.claim_seq)]) == [True]
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.snoozes) == ("succeeded", 1, 3)
        assert (await backend.get_jobs([job_id]))[job_id].snoozes == 3
        assert [j.snoozes for j in await backend.list_jobs(queue=Q)] == [3]

    async def test_snooze_keeps_the_last_error_of_a_charged_attempt(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=3)
        first = await self._claim_one(backend)
        assert await backend.fail([Failure(job_id, first.job.claim_seq, "boom", 0.0)]) == [
            Recorded.RETRY
        ]
        second = await self._claim_one(backend)
        assert second.job.attempt == 2
        assert await backend.snooze([self._snooze(second)], max_snoozes=BOUND) == [Snoozed.SNOOZED]
        info = await backend.get_job(job_id)
        assert (info.attempts, info.snoozes, info.last_error) == (1, 1, "boom")
        assert (await self._claim_one(backend)).job.attempt == 2

    async def test_snooze_waits_its_seconds_on_the_backends_clock(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        write = self._snooze(claimed, self.short_timeout)
        assert await backend.snooze([write], max_snoozes=BOUND) == [Snoozed.SNOOZED]
        info = await backend.get_job(job_id)
        assert info.status == "scheduled"
        assert info.next_attempt_at is not None
        # now() + seconds, now() being the statement's moment on the backend's clock: the
        # moment its attempt row says the attempt finished.
        [attempt] = await backend.list_attempts(job_id)
        waited = (info.next_attempt_at - attempt.finished_at).total_seconds()
        assert waited == pytest.approx(self.short_timeout, abs=1e-6)
        assert await self._claim(backend) == []
        await self._wait_out()
        again = await self._claim_one(backend)
        assert (again.job.id, again.job.attempt) == (job_id, 1)
        assert again.job.claim_seq > claimed.job.claim_seq

    async def test_a_stale_snooze_changes_nothing(self, backend: Backend, clock: object) -> None:
        """I9, I19: a snooze naming a superseded claim_seq, or a finished job, is a no-op."""
        job_id = await backend.enqueue(Q, "x")
        old = await self._claim_one(backend)
        assert await backend.snooze([self._snooze(old)], max_snoozes=BOUND) == [Snoozed.SNOOZED]
        new = await self._claim_one(backend)
        stale = self._snooze(old, 3600.0, progress=0.5, checkpoint='"late"')
        assert await backend.snooze([stale], max_snoozes=BOUND) == [None]
        assert await backend.snooze([stale], max_snoozes=0) == [None]
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.snoozes) == ("running", 1, 1)
        assert (info.progress, info.checkpoint) == (None, None)
        assert await self._renew(backend, RenewItem(job_id, new.job.claim_seq, None)) == {
            job_id: Verdict.EXTENDED
        }
        assert await backend.ack([Ack(job_id, new.job.claim_seq)]) == [True]
        # Not running any more: the current claim_seq misses too.
        assert await backend.snooze([self._snooze(new)], max_snoozes=BOUND) == [None]
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.snoozes) == ("succeeded", 1, 1)
        assert [(a.claim_seq, a.outcome) for a in await backend.list_attempts(job_id)] == [
            (old.job.claim_seq, "snoozed"),
            (new.job.claim_seq, "succeeded"),
        ]

    async def test_a_snooze_past_the_bound_fails_the_job_for_good(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=5)
        for _ in range(2):
            claimed = await self._claim_one(backend)
            assert await backend.snooze([self._snooze(claimed)], max_snoozes=2) == [Snoozed.SNOOZED]
        claimed = await self._claim_one(backend)
        write = self._snooze(claimed, timing=AttemptTiming(0.0, 0.5))
        assert await backend.snooze([write], max_snoozes=2) == [Snoozed.LIMIT]
        info = await backend.get_job(job_id)
        # Charged (attempts kept), not counted, not retried though attempts remain.
        assert (info.status, info.attempts, info.snoozes) == ("failed", 1, 2)
        assert info.last_error == snooze_limit_message(2)
        assert "max_snoozes=2" in info.last_error
        assert (info.cancelled, info.finished_at is not None) == (False, True)
        assert await self._claim(backend) == []
        attempts = await backend.list_attempts(job_id)
        assert [(a.attempt, a.outcome) for a in attempts] == [
            (1, "snoozed"),
            (1, "snoozed"),
            (1, "failed"),
        ]
        last = attempts[-1]
        assert (last.error, last.error_type) == (info.last_error, "SnoozeLimitExceeded")
        assert last.run_seconds == 0.5

    async def test_max_snoozes_zero_refuses_every_snooze(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert await backend.snooze([self._snooze(claimed)], max_snoozes=0) == [Snoozed.LIMIT]
        assert (await backend.get_job(job_id)).status == "failed"

    async def test_a_snooze_with_a_cancel_asked_is_a_cancellation(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert await backend.cancel(job_id)
        assert await backend.snooze([self._snooze(claimed)], max_snoozes=BOUND) == [
            Snoozed.CANCELLED
        ]
        info = await backend.get_job(job_id)
        assert (info.status, info.cancelled, info.snoozes, info.attempts) == (
            "failed",
            True,
            0,
            1,
        )
        assert info.last_error == "cancelled: cancel requested"
        [attempt] = await backend.list_attempts(job_id)
        assert attempt.outcome == "cancelled"

    async def test_snooze_records_a_snoozed_attempt_with_its_timing_and_checkpoint(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        write = self._snooze(claimed, timing=AttemptTiming(0.25, 1.5), checkpoint='{"at": 7}')
        assert await backend.snooze([write], max_snoozes=BOUND) == [Snoozed.SNOOZED]
        [attempt] = await backend.list_attempts(job_id)
        assert (attempt.attempt, attempt.claim_seq, attempt.outcome) == (
            1,
            claimed.job.claim_seq,
            "snoozed",
        )
        assert (attempt.error, attempt.error_type, attempt.run_seconds) == (None, None, 1.5)
        assert attempt.started_at is not None
        assert (await backend.get_job(job_id)).checkpoint == {"at": 7}
        again = await self._claim_one(backend)
        assert again.job.checkpoint == {"at": 7}

    async def test_one_snooze_statement_for_many_jobs(
        self, backend: Backend, clock: object
    ) -> None:
        ids = [await backend.enqueue(Q, n) for n in range(3)]
        claimed = await self._claim(backend, limit=3)
        before = backend.statistics().calls["snooze"]
        stale = SnoozeWrite(ids[0], claimed[0].job.claim_seq + 1, 0.0)
        answers = await backend.snooze(
            [self._snooze(c, 60.0) for c in claimed] + [stale], max_snoozes=BOUND
        )
        assert answers == [Snoozed.SNOOZED] * 3 + [None]
        assert backend.statistics().calls["snooze"] == before + 1
        for job_id in ids:
            assert (await backend.get_job(job_id)).status == "scheduled"
        assert await backend.snooze([], max_snoozes=BOUND) == []

    @pytest.mark.parametrize(
        ("seconds", "max_snoozes", "kind"),
        [
            pytest.param(-1.0, BOUND, ValueError, id="negative-seconds"),
            pytest.param(math.nan, BOUND, ValueError, id="nan-seconds"),
            pytest.param(math.inf, BOUND, ValueError, id="inf-seconds"),
            pytest.param(1e12, BOUND, ValueError, id="seconds-past-a-century"),
            pytest.param("1", BOUND, TypeError, id="str-seconds"),
            pytest.param(0.0, -1, ValueError, id="negative-bound"),
            pytest.param(0.0, True, TypeError, id="bool-bound"),
            pytest.param(0.0, 2**31, ValueError, id="bound-past-int32"),
        ],
    )
    async def test_bad_snoozes_are_refused_and_write_nothing(
        self, backend: Backend, clock: object, seconds: object, max_snoozes: object, kind: type
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        write = SnoozeWrite(job_id, claimed.job.claim_seq, seconds)  # type: ignore[arg-type]
        with pytest.raises(kind, match="bad snooze"):
            await backend.snooze([write], max_snoozes=max_snoozes)  # type: ignore[arg-type]
        info = await backend.get_job(job_id)
        assert (info.status, info.snoozes) == ("running", 0)

    async def test_every_problem_of_a_bad_snooze_is_named(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        writes = [
            SnoozeWrite(job_id, claimed.job.claim_seq, -1.0),
            SnoozeWrite(job_id + 1, 1, math.nan),
        ]
        with pytest.raises(ValueError, match="bad snooze") as raised:
            await backend.snooze(writes, max_snoozes=-5)
        message = str(raised.value)
        assert f"job {job_id}: seconds" in message
        assert f"job {job_id + 1}: seconds" in message
        assert "max_snoozes" in message
        assert (await backend.get_job(job_id)).status == "running"
