"""Attempt history: one fenced row per attempt, cancellations told apart (docs/protocol.rst
§14, invariant I15).

Each outcome statement whose fence matches leaves exactly one attempt (an ack: the job's row),
with the outcome it recorded; a claim that takes over (or dead-letters) a lapsed attempt
leaves a ``lost`` row for it; a stale write leaves none. ``JobInfo.cancelled`` marks the
jobs that failed for good with a cancel asked, and ``list_jobs``/``count_jobs`` filter on it.
"""

from __future__ import annotations

import math

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._core.tracebacks import MAX_TRACEBACK_CHARS
from trioqueue._errors import UnknownJobError
from trioqueue._types import (
    Ack,
    AttemptTiming,
    Claimed,
    Failure,
    PoolRegistration,
    Recorded,
    Release,
)
from trioqueue.testing._conformance._base import WORKER, ConformanceBase, Q

__all__ = ["AttemptConformance"]


class AttemptConformance(ConformanceBase):
    """The attempts table and the cancelled flag (§14, I15)."""

    async def _outcomes(self, backend: Backend, job_id: int) -> list[tuple[int, str]]:
        return [(a.claim_seq, a.outcome) for a in await backend.list_attempts(job_id)]

    async def _lapse(self, backend: Backend) -> Claimed:
        """Claim the one claimable job on a short lease and let the lease run out."""
        claimed = await self._claim_one(backend, visibility_timeout=self.short_timeout)
        await self._wait_out()
        return claimed

    async def test_the_enqueues_trace_context_is_handed_to_the_claim(
        self, backend: Backend, clock: object, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        context = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
        monkeypatch.setattr("trioqueue._telemetry.enqueue_context", lambda: context)
        await backend.enqueue(Q, "one")
        await backend.enqueue_many(Q, ["two", "three"])
        monkeypatch.setattr("trioqueue._telemetry.enqueue_context", lambda: None)
        await backend.enqueue(Q, "untraced")
        claimed = await self._claim(backend, limit=4)
        assert [c.job.trace_context for c in claimed] == [context, context, context, None]

    async def test_a_job_not_yet_claimed_has_no_attempts(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        assert await backend.list_attempts(job_id) == []

    async def test_list_attempts_of_an_unknown_job_raises(
        self, backend: Backend, clock: object
    ) -> None:
        with pytest.raises(UnknownJobError):
            await backend.list_attempts(987_654)

    async def test_an_ack_records_one_succeeded_attempt_with_its_timing(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        timing = AttemptTiming(started_after=0.25, run_seconds=1.5)
        assert await backend.ack([Ack(job_id, claimed.job.claim_seq, timing=timing)]) == [True]
        [attempt] = await backend.list_attempts(job_id)
        assert (attempt.job_id, attempt.attempt, attempt.claim_seq) == (job_id, 1, 1)
        assert attempt.outcome == "succeeded"
        assert attempt.worker_id == WORKER
        assert attempt.run_seconds == pytest.approx(1.5)
        assert attempt.started_at is not None
        started_after = (attempt.started_at - attempt.claimed_at).total_seconds()
        assert started_after == pytest.approx(0.25, abs=1e-5)
        assert attempt.finished_at >= attempt.claimed_at
        assert attempt.error is None
        assert attempt.traceback is None
        info = await backend.get_job(job_id)
        assert info.finished_by == WORKER
        assert not info.cancelled

    async def test_odd_timings_are_stored_as_unknown_or_clamped_and_the_outcomes_apply(
        self, backend: Backend, clock: object
    ) -> None:
        """A worker's odd measurement never keeps an outcome from being written (§14):
        NaN, infinity and a bool are unknown, a negative time is 0, an int is a float."""
        ids = [await backend.enqueue(Q, n) for n in range(4)]
        claimed = await self._claim(backend, limit=4)
        timings = [
            AttemptTiming(math.nan, 1.0),
            AttemptTiming(-1.0, math.inf),
            AttemptTiming(2, True),  # an int, and a bool
            None,
        ]
        items = [
            Ack(c.job.id, c.job.claim_seq, timing=t) for c, t in zip(claimed, timings, strict=True)
        ]
        assert await backend.ack(items) == [True] * 4
        seen = []
        for job_id in ids:
            [attempt] = await backend.list_attempts(job_id)
            started = attempt.started_at
            after = None if started is None else (started - attempt.claimed_at).total_seconds()
            seen.append((after, attempt.run_seconds))
        assert seen == [(None, 1.0), (0.0, None), (pytest.approx(2.0), None), (None, None)]

    async def test_an_attempt_names_the_host_of_the_pool_that_claimed_it(
        self, backend: Backend, clock: object
    ) -> None:
        """The host is the claim's (§14): kept when the pool unregisters before the outcome,
        and none for an attempt whose pool never registered."""
        await backend.register_pool(PoolRegistration(WORKER, "host-a", 1, Q, 1, 30.0))
        job_id = await backend.enqueue(Q, "x")
        first = await self._claim_one(backend)
        assert await backend.unregister_pool(WORKER)
        assert await backend.fail([Failure(job_id, first.job.claim_seq, "E: x", 0.0)]) == [
            Recorded.RETRY
        ]
        second = await self._claim_one(backend)
        assert await backend.ack([Ack(job_id, second.job.claim_seq)]) == [True]
        attempts = await backend.list_attempts(job_id)
        assert [(a.outcome, a.host) for a in attempts] == [("retry", "host-a"), ("succeeded", None)]

    async def test_the_claim_hands_out_the_wait(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        await self._wait_out()
        claimed = await self._claim_one(backend)
        assert claimed.job.waited is not None
        assert claimed.job.waited >= self.short_timeout
        await backend.ack([Ack(job_id, claimed.job.claim_seq)])
        [attempt] = await backend.list_attempts(job_id)
        assert attempt.wait_seconds == pytest.approx(claimed.job.waited)
        assert attempt.run_seconds is None
        assert attempt.started_at is None

    async def test_a_retried_failure_and_a_final_one_record_their_outcomes(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=2)
        first = await self._claim_one(backend)
        failure = Failure(
            job_id,
            first.job.claim_seq,
            "ValueError: bad",
            0.0,
            error_type="builtins.ValueError",
            traceback="Traceback (most recent call last):\nValueError: bad\n",
        )
        assert await backend.fail([failure]) == [Recorded.RETRY]
        second = await self._claim_one(backend)
        assert await backend.fail([Failure(job_id, second.job.claim_seq, "E: again", 0.0)]) == [
            Recorded.FINAL
        ]
        attempts = await backend.list_attempts(job_id)
        assert [(a.attempt, a.outcome) for a in attempts] == [(1, "retry"), (2, "failed")]
        assert attempts[0].error == "ValueError: bad"
        assert attempts[0].error_type == "builtins.ValueError"
        assert attempts[0].traceback == failure.traceback
        assert attempts[1].error == "E: again"
        assert attempts[1].error_type is None
        info = await backend.get_job(job_id)
        assert info.status == "failed"
        assert not info.cancelled

    async def test_a_stale_write_records_no_attempt(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        seq = claimed.job.claim_seq
        assert await backend.ack([Ack(job_id, seq + 1)]) == [False]
        assert await backend.fail([Failure(job_id, seq + 1, "E: x", 0.0)]) == [None]
        assert await backend.release([Release(job_id, seq + 1)]) == [False]
        assert await backend.list_attempts(job_id) == []
        assert await backend.ack([Ack(job_id, seq)]) == [True]
        assert await backend.ack([Ack(job_id, seq)]) == [False]  # a replay: no second row
        assert await self._outcomes(backend, job_id) == [(seq, "succeeded")]

    async def test_a_release_records_an_uncharged_attempt(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert await backend.release([Release(job_id, claimed.job.claim_seq)]) == [True]
        again = await self._claim_one(backend)
        assert again.job.attempt == 1  # the released attempt was not charged
        await backend.ack([Ack(job_id, again.job.claim_seq)])
        attempts = await backend.list_attempts(job_id)
        assert [(a.claim_seq, a.attempt, a.outcome) for a in attempts] == [
            (1, 1, "released"),
            (2, 1, "succeeded"),
        ]

    async def test_a_lapsed_attempt_taken_over_leaves_a_lost_row_and_its_late_write_none(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        lapsed = await self._lapse(backend)
        taken = await self._claim_one(backend)
        assert await backend.ack([Ack(job_id, lapsed.job.claim_seq)]) == [False]  # too late
        assert await backend.ack([Ack(job_id, taken.job.claim_seq)]) == [True]
        attempts = await backend.list_attempts(job_id)
        assert [(a.claim_seq, a.attempt, a.outcome) for a in attempts] == [
            (1, 1, "lost"),
            (2, 2, "succeeded"),
        ]
        lost = attempts[0]
        assert lost.error == ("the worker running attempt 1 stopped without recording an outcome")
        assert lost.worker_id == WORKER
        assert lost.started_at is None
        assert lost.run_seconds is None

    async def test_a_lapsed_final_attempt_dead_lettered_leaves_a_lost_row(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=1)
        await self._lapse(backend)
        assert await self._claim(backend) == []  # the claim dead-letters it
        info = await backend.get_job(job_id)
        assert info.status == "failed"
        assert not info.cancelled
        assert await self._outcomes(backend, job_id) == [(1, "lost")]

    async def test_a_failure_with_a_cancel_asked_is_a_cancellation(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert await backend.cancel(job_id)
        failure = Failure(job_id, claimed.job.claim_seq, "cancelled: cancel requested", 1.0)
        assert await backend.fail([failure]) == [Recorded.FINAL]
        info = await backend.get_job(job_id)
        assert info.status == "failed"
        assert info.cancelled
        assert info.finished_by == WORKER
        assert await self._outcomes(backend, job_id) == [(1, "cancelled")]

    async def test_a_release_with_a_cancel_asked_is_a_cancellation(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        await backend.cancel(job_id)
        await backend.release([Release(job_id, claimed.job.claim_seq)])
        assert (await backend.get_job(job_id)).cancelled
        assert await self._outcomes(backend, job_id) == [(1, "cancelled")]

    async def test_a_lapsed_attempt_with_a_cancel_asked_is_dead_lettered_as_a_cancellation(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        await self._claim_one(backend, visibility_timeout=self.short_timeout)
        assert await backend.cancel(job_id)  # flagged: its lease is live
        await self._wait_out()
        assert await self._claim(backend) == []
        info = await backend.get_job(job_id)
        assert info.status == "failed"
        assert info.cancelled
        assert await self._outcomes(backend, job_id) == [(1, "lost")]

    async def test_cancelling_a_waiting_job_is_a_cancellation_without_an_attempt(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        assert await backend.cancel(job_id)
        info = await backend.get_job(job_id)
        assert info.status == "failed"
        assert info.cancelled
        assert info.finished_by is None  # no pool ran it
        assert await backend.list_attempts(job_id) == []

    async def test_retry_clears_the_cancellation(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        await backend.cancel(job_id)
        assert await backend.retry(job_id)
        info = await backend.get_job(job_id)
        assert not info.cancelled
        assert info.finished_by is None

    async def test_the_cancelled_filter_tells_cancellations_from_failures(
        self, backend: Backend, clock: object
    ) -> None:
        cancelled = await backend.enqueue(Q, "c")
        await backend.cancel(cancelled)
        failed = await backend.enqueue(Q, "f", max_attempts=1)
        claimed = await self._claim_one(backend)
        await backend.fail([Failure(failed, claimed.job.claim_seq, "E: x", None)])
        waiting = await backend.enqueue(Q, "w")

        async def ids(**filters: object) -> list[int]:
            jobs = await backend.list_jobs(**filters)  # type: ignore[arg-type]
            count = await backend.count_jobs(**filters)  # type: ignore[arg-type]
            assert count == len(jobs)
            return [job.id for job in jobs]

        assert await ids(status="failed") == [cancelled, failed]
        assert await ids(status="failed", cancelled=True) == [cancelled]
        assert await ids(status="failed", cancelled=False) == [failed]
        assert await ids(cancelled=False) == [failed, waiting]
        assert await ids(cancelled=True) == [cancelled]

    @pytest.mark.parametrize("cancelled", ["yes", 1])
    async def test_a_cancelled_filter_that_is_not_a_bool_is_refused(
        self, backend: Backend, clock: object, cancelled: object
    ) -> None:
        with pytest.raises(TypeError, match="cancelled"):
            await backend.list_jobs(cancelled=cancelled)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="cancelled"):
            await backend.count_jobs(cancelled=cancelled)  # type: ignore[arg-type]

    async def test_a_cancelled_filter_with_a_status_other_than_failed_is_refused(
        self, backend: Backend, clock: object
    ) -> None:
        with pytest.raises(ValueError, match="cancelled"):
            await backend.list_jobs(status="ready", cancelled=True)
        with pytest.raises(ValueError, match="cancelled"):
            await backend.count_jobs(status="succeeded", cancelled=False)

    async def test_a_retrying_job_says_when_it_runs_next(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        await backend.fail([Failure(job_id, claimed.job.claim_seq, "E: x", 30.0)])
        info = await backend.get_job(job_id)
        assert info.status == "scheduled"
        assert info.next_attempt_at is not None
        assert info.finished_by is None
        assert (info.next_attempt_at - info.created_at).total_seconds() >= 29.0  # the backoff
        [listed] = await backend.list_jobs(status="scheduled")
        assert listed.next_attempt_at == info.next_attempt_at
        ready = await backend.enqueue(Q, "now")
        assert (await backend.get_job(ready)).next_attempt_at is None

    async def test_a_long_traceback_is_stored_bounded(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        text = "frame\n" * 10_000  # 60,000 characters, as a client that did not cut it
        failure = Failure(job_id, claimed.job.claim_seq, "E: x", None, traceback=text)
        await backend.fail([failure])
        [attempt] = await backend.list_attempts(job_id)
        assert attempt.traceback is not None
        assert len(attempt.traceback) <= MAX_TRACEBACK_CHARS
        assert "characters cut]" in attempt.traceback
        assert attempt.traceback.startswith("frame\n")
        assert attempt.traceback.endswith("frame\n")

    async def test_attempts_are_deleted_with_their_job(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        await backend.ack([Ack(job_id, claimed.job.claim_seq)])
        assert await backend.delete_job(job_id)
        with pytest.raises(UnknownJobError):
            await backend.list_attempts(job_id)
        assert await backend.queue_timings() == {}

    async def test_queue_timings_are_the_interpolated_percentiles_of_the_window(
        self, backend: Backend, clock: object
    ) -> None:
        runs = [1.0, 2.0, 3.0, 4.0]
        for run in runs:
            job_id = await backend.enqueue(Q, run)
            claimed = await self._claim_one(backend)
            timing = AttemptTiming(started_after=0.0, run_seconds=run)
            await backend.ack([Ack(job_id, claimed.job.claim_seq, timing=timing)])
        other = await backend.enqueue("other-queue", "x")
        [claimed] = await backend.claim(
            "other-queue", limit=1, worker_id=WORKER, visibility_timeout=self.long_timeout
        )
        await backend.fail([Failure(other, claimed.job.claim_seq, "E: x", None)])
        timings = await backend.queue_timings(window=3600.0)
        assert sorted(timings) == [Q, "other-queue"]
        mine = timings[Q]
        assert mine.attempts == 4
        # percentile_cont: rank p * (n - 1), interpolated between its neighbours.
        assert mine.run_p50 == pytest.approx(2.5)
        assert mine.run_p95 == pytest.approx(3.85)
        assert mine.run_p99 == pytest.approx(3.97)
        assert mine.wait_p50 is not None
        assert mine.wait_p50 >= 0
        assert timings["other-queue"].attempts == 1
        assert timings["other-queue"].run_p50 is None  # no timing was sent
        only = await backend.queue_timings(queue="other-queue")
        assert list(only) == ["other-queue"]

    async def test_attempt_history_buckets_attempts_by_outcome(
        self, backend: Backend, clock: object
    ) -> None:
        ok = await backend.enqueue(Q, "ok")
        claimed = await self._claim_one(backend)
        timing = AttemptTiming(started_after=0.0, run_seconds=2.0)
        await backend.ack([Ack(ok, claimed.job.claim_seq, timing=timing)])
        bad = await backend.enqueue(Q, "bad", max_attempts=2)
        claimed = await self._claim_one(backend)
        await backend.fail([Failure(bad, claimed.job.claim_seq, "E: x", 0.0)])
        claimed = await self._claim_one(backend)
        await backend.cancel(bad)
        await backend.fail([Failure(bad, claimed.job.claim_seq, "E: x", 0.0)])
        history = await backend.attempt_history(window=3600.0, buckets=4)
        assert len(history) == 4
        assert [b.start for b in history] == sorted(b.start for b in history)
        last = history[-1]
        assert (last.succeeded, last.failed, last.cancelled) == (1, 1, 1)
        assert last.run_p50 == pytest.approx(2.0)
        assert all(b.succeeded == b.failed == b.cancelled == 0 for b in history[:-1])
        assert (await backend.attempt_history(queue="elsewhere", buckets=2))[-1].succeeded == 0

    @pytest.mark.parametrize("window", [0, -1.0])
    async def test_timings_refuse_a_window_that_is_not_positive(
        self, backend: Backend, clock: object, window: float
    ) -> None:
        with pytest.raises(ValueError, match="window"):
            await backend.queue_timings(window=window)
        with pytest.raises(ValueError, match="window"):
            await backend.attempt_history(window=window)

    async def test_attempt_history_refuses_a_bucket_count_out_of_range(
        self, backend: Backend, clock: object
    ) -> None:
        for buckets in (0, 1001):
            with pytest.raises(ValueError, match="buckets"):
                await backend.attempt_history(buckets=buckets)
