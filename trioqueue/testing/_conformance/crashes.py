"""Attempts that end without an outcome: the claim's records, quarantine and parking.

A worker that dies mid-job (a segfault, ``os._exit``, a kill) writes nothing: its jobs'
leases lapse and the next claim takes them again. The claim says so in ``last_error``,
runs a job whose attempts keep ending that way alone, and parks it when it ends that way
while alone too (docs/protocol.rst §13, invariant I14). A crash is played here by letting
a short lease run out without writing anything.
"""

from __future__ import annotations

from typing import Any

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._types import Ack, Claimed, Claims, Failure, Recorded, Release
from trioqueue.testing._conformance._base import WORKER, ConformanceBase, Q

__all__ = ["CrashConformance"]


def stopped(attempt: int) -> str:
    """The ``last_error`` a claim writes for an attempt that ended without an outcome."""
    return f"the worker running attempt {attempt} stopped without recording an outcome"


def runs_alone(first: int, last: int) -> str:
    """The ``last_error`` of the claim that takes a quarantined job to run alone."""
    return f"{stopped(last)} (attempts {first}..{last} in a row): attempt {last + 1} runs alone"


def parked(first: int, last: int) -> str:
    """The ``last_error`` of a job parked because its run alone ended without an outcome."""
    return (
        f"quarantined: attempts {first}..{last} each ended without an outcome "
        "(the last one run alone)"
    )


class CrashConformance(ConformanceBase):
    """Attempts that end without an outcome: records, quarantine and parking (§13, I14)."""

    async def _claim_q(
        self,
        backend: Backend,
        *,
        alone: bool,
        quarantine_after: int | None = 2,
        limit: int = 10,
        short: bool = True,
    ) -> list[Claimed]:
        """A claim as a pool makes it: with its quarantine threshold, alone or not."""
        return await backend.claim(
            Q,
            limit=limit,
            worker_id=WORKER,
            visibility_timeout=self.short_timeout if short else self.long_timeout,
            quarantine_after=quarantine_after,
            alone=alone,
        )

    async def _crash(self, backend: Backend, *, times: int, limit: int = 10) -> list[int]:
        """Claim everything claimable ``times`` times, each time on a short lease that is
        left to run out with nothing written (a worker that died): the ids claimed last."""
        ids: list[int] = []
        for _ in range(times):
            ids = self._ids(await self._claim_q(backend, alone=False, quarantine_after=None))
            await self._wait_out()
        return ids

    @staticmethod
    def _waiting(claimed: list[Claimed]) -> bool:
        return isinstance(claimed, Claims) and claimed.alone_waiting

    async def test_an_attempt_that_lapsed_is_recorded_by_the_next_claim(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        await self._crash(backend, times=1)
        [again] = await self._claim(backend)
        assert (again.job.id, again.job.attempt, again.alone) == (job_id, 2, False)
        assert (await backend.get_job(job_id)).last_error == stopped(1)

    async def test_an_outcome_overwrites_the_record_and_a_success_keeps_it(
        self, backend: Backend, clock: object
    ) -> None:
        failing, succeeding = await backend.enqueue_many(Q, ["f", "s"])
        await self._crash(backend, times=1)
        claimed = {c.job.id: c for c in await self._claim(backend)}
        seq = claimed[failing].job.claim_seq
        assert await backend.fail([Failure(failing, seq, "boom", 0.0)]) == [Recorded.RETRY]
        assert await backend.ack([Ack(succeeding, claimed[succeeding].job.claim_seq)]) == [True]
        assert (await backend.get_job(failing)).last_error == "boom"
        done = await backend.get_job(succeeding)
        assert (done.status, done.last_error) == ("succeeded", stopped(1))
        # Claimed from the queue (its last attempt recorded a failure): nothing written.
        await self._wait_out()
        await self._claim(backend)
        assert (await backend.get_job(failing)).last_error == "boom"

    async def test_the_final_attempt_s_message_says_the_worker_stopped(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=2)
        await self._crash(backend, times=2)
        assert await self._claim(backend) == []
        info = await backend.get_job(job_id)
        assert info.status == "failed"
        assert info.last_error == (
            "lease expired on the final attempt (2 of 2): "
            "the worker running it stopped without recording an outcome"
        )

    async def test_a_quarantined_job_is_left_by_a_claim_that_is_not_alone(
        self, backend: Backend, clock: object
    ) -> None:
        poison = await backend.enqueue(Q, "poison")
        await self._crash(backend, times=2)
        fresh = await backend.enqueue(Q, "fresh")
        claimed = await self._claim_q(backend, alone=False)
        assert self._ids(claimed) == [fresh]
        assert self._waiting(claimed)
        info = await backend.get_job(poison)
        assert (info.status, info.attempts, info.last_error) == ("ready", 2, stopped(1))

    async def test_a_quarantined_job_is_claimed_alone_by_an_idle_claim(
        self, backend: Backend, clock: object
    ) -> None:
        high, low = await backend.enqueue(Q, "high", priority=5), await backend.enqueue(Q, "low")
        await self._crash(backend, times=2)
        fresh = await backend.enqueue(Q, "fresh")
        claimed = await self._claim_q(backend, alone=True)
        assert [(c.job.id, c.job.attempt, c.alone) for c in claimed] == [(high, 3, True)]
        assert not self._waiting(claimed)
        assert (await backend.get_job(high)).last_error == runs_alone(1, 2)
        # The other quarantined job waits for the next claim alone; fresh work is claimed.
        claimed = await self._claim_q(backend, alone=False, short=False)
        assert self._ids(claimed) == [fresh]
        assert self._waiting(claimed)
        [second] = await self._claim_q(backend, alone=True, short=False)
        assert (second.job.id, second.alone) == (low, True)

    async def test_a_job_that_lapses_again_while_alone_is_parked(
        self, backend: Backend, clock: object
    ) -> None:
        poison = await backend.enqueue(Q, "poison")
        await self._crash(backend, times=2)
        [alone] = await self._claim_q(backend, alone=True)
        assert alone.alone
        await self._wait_out()
        # Any claim parks it, whatever its own threshold.
        assert await self._claim_q(backend, alone=False, quarantine_after=None) == []
        info = await backend.get_job(poison)
        assert (info.status, info.attempts) == ("failed", 3)
        assert info.last_error == parked(1, 3)
        assert info.finished_at is not None
        assert await self._claim_q(backend, alone=True) == []

    async def test_an_outcome_between_lapses_starts_the_count_again(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        await self._crash(backend, times=1)
        [claimed] = await self._claim(backend)
        assert await backend.release([Release(job_id, claimed.job.claim_seq)]) == [True]
        await self._crash(backend, times=1)
        [again] = await self._claim_q(backend, alone=False)
        assert (again.job.id, again.alone) == (job_id, False)

    async def test_a_retried_parked_job_starts_afresh(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "poison")
        await self._crash(backend, times=2)
        await self._claim_q(backend, alone=True)
        await self._wait_out()
        await self._claim(backend)
        assert await backend.retry(job_id)
        [again] = await self._claim_q(backend, alone=False)
        assert (again.job.id, again.job.attempt, again.alone) == (job_id, 4, False)

    async def test_quarantine_after_one_runs_alone_after_a_single_lapse(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        await self._crash(backend, times=1)
        claimed = await self._claim_q(backend, alone=False, quarantine_after=1)
        assert claimed == []
        assert self._waiting(claimed)
        [alone] = await self._claim_q(backend, alone=True, quarantine_after=1)
        assert (alone.job.id, alone.alone) == (job_id, True)
        assert (await backend.get_job(job_id)).last_error == runs_alone(1, 1)

    async def test_without_a_threshold_nothing_is_quarantined(
        self, backend: Backend, clock: object
    ) -> None:
        ids = await backend.enqueue_many(Q, ["a", "b"])
        await self._crash(backend, times=3)
        claimed = await self._claim_q(backend, alone=False, quarantine_after=None)
        assert self._ids(claimed) == ids
        assert not any(c.alone for c in claimed)
        assert not self._waiting(claimed)
        assert (await backend.get_job(ids[0])).last_error == stopped(3)

    @pytest.mark.parametrize(
        ("options", "error"),
        [
            pytest.param({"quarantine_after": 0}, ValueError, id="zero-threshold"),
            pytest.param({"quarantine_after": -1}, ValueError, id="negative-threshold"),
            pytest.param({"quarantine_after": "2"}, TypeError, id="str-threshold"),
            pytest.param({"quarantine_after": True}, TypeError, id="bool-threshold"),
            pytest.param({"quarantine_after": 2**31}, ValueError, id="threshold-past-int32"),
            pytest.param({"alone": 1}, TypeError, id="int-alone"),
        ],
    )
    async def test_bad_quarantine_arguments_are_refused_and_write_nothing(
        self, backend: Backend, clock: object, options: dict[str, Any], error: type[Exception]
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        with pytest.raises(error):
            await backend.claim(
                Q, limit=1, worker_id=WORKER, visibility_timeout=self.long_timeout, **options
            )
        assert (await backend.get_job(job_id)).status == "ready"
