"""Results: the fenced ack stores the handler's return value; ``wait_for`` waits for a job
to finish (docs/usage.rst, "Results")."""

from __future__ import annotations

import pytest
import trio

from trioqueue._backends.interface import Backend
from trioqueue._errors import UnknownJobError
from trioqueue._types import Ack, Failure, JobInfo, Release
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["ResultConformance"]

RESULT = '{"total": 3, "items": ["a", "é"], "ok": true}'
DECODED = {"total": 3, "items": ["a", "é"], "ok": True}


class ResultConformance(ConformanceBase):
    """Results: stored by the fenced ack; ``wait_for`` until a job is finished."""

    # -- storage -------------------------------------------------------------------------

    async def test_ack_stores_the_result(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert (await backend.get_job(job_id)).result is None  # running: nothing yet
        assert await backend.ack([Ack(job_id, claimed.job.claim_seq, result=RESULT)]) == [True]
        assert (await backend.get_job(job_id)).result == DECODED
        assert [info.result for info in await backend.list_jobs(Q)] == [DECODED]

    async def test_ack_without_result_stores_none(self, backend: Backend, clock: object) -> None:
        ids = await backend.enqueue_many(Q, ["a", "b"])
        first, second = await self._claim(backend, limit=2)
        acks = [
            Ack(first.job.id, first.job.claim_seq),
            Ack(second.job.id, second.job.claim_seq, result="0"),
        ]
        assert await backend.ack(acks) == [True, True]
        assert [(await backend.get_job(i)).result for i in ids] == [None, 0]

    async def test_a_stale_ack_stores_no_result(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        old = await self._claim_one(backend)
        assert await backend.release([Release(job_id, old.job.claim_seq)]) == [True]
        new = await self._claim_one(backend)
        assert await backend.ack([Ack(job_id, old.job.claim_seq, result='"stale"')]) == [False]
        assert (await backend.get_job(job_id)).result is None
        assert await backend.ack([Ack(job_id, new.job.claim_seq, result='"fresh"')]) == [True]
        assert (await backend.get_job(job_id)).result == "fresh"

    async def test_a_failed_job_retried_stores_the_result_of_its_success(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=1)
        first = await self._claim_one(backend)
        assert await backend.fail([Failure(job_id, first.job.claim_seq, "boom", None)]) != [None]
        assert (await backend.get_job(job_id)).result is None
        assert await backend.retry(job_id) is True
        second = await self._claim_one(backend)
        assert await backend.ack([Ack(job_id, second.job.claim_seq, result="[1, 2]")]) == [True]
        info = await backend.get_job(job_id)
        assert (info.status, info.result, info.last_error) == ("succeeded", [1, 2], "boom")

    # -- wait_for ------------------------------------------------------------------------

    async def test_wait_for_a_finished_job_returns_it(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        await backend.ack([Ack(job_id, claimed.job.claim_seq, result=RESULT)])
        info = await backend.wait_for(job_id, timeout=0)
        assert (info.id, info.status, info.result) == (job_id, "succeeded", DECODED)

    async def test_wait_for_returns_once_the_job_finishes(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        got: list[JobInfo] = []

        async def waiter() -> None:
            got.append(await backend.wait_for(job_id, timeout=self.notice_timeout))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await self._wait_out()
            assert got == []  # still running: the waiter waits
            await backend.ack([Ack(job_id, claimed.job.claim_seq, result="42")])
        assert [(info.status, info.result) for info in got] == [("succeeded", 42)]

    async def test_wait_for_returns_a_failed_job(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=1)
        claimed = await self._claim_one(backend)
        got: list[JobInfo] = []

        async def waiter() -> None:
            got.append(await backend.wait_for(job_id, timeout=self.notice_timeout))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await self._wait_out()
            assert got == []
            await backend.fail([Failure(job_id, claimed.job.claim_seq, "boom", None)])
        assert [(info.status, info.last_error, info.result) for info in got] == [
            ("failed", "boom", None)
        ]

    async def test_wait_for_an_unknown_job_raises(self, backend: Backend, clock: object) -> None:
        with pytest.raises(UnknownJobError):
            await backend.wait_for(987654321)

    async def test_wait_for_a_job_deleted_meanwhile_raises(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", delay=self.long_timeout)
        raised: list[BaseException] = []

        async def waiter() -> None:
            try:
                await backend.wait_for(job_id, timeout=self.notice_timeout)
            except UnknownJobError as exc:
                raised.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await self._wait_out()
            assert raised == []
            assert await backend.delete_job(job_id) is True
        assert len(raised) == 1

    async def test_wait_for_times_out(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        start = trio.current_time()
        with pytest.raises(TimeoutError, match=f"job {job_id} did not finish"):
            await backend.wait_for(job_id, timeout=self.short_timeout)
        assert trio.current_time() - start >= self.short_timeout
        assert (await backend.get_job(job_id)).status == "ready"

    async def test_wait_for_refuses_bad_arguments(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        with pytest.raises(TypeError, match="job_id"):
            await backend.wait_for("1")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout"):
            await backend.wait_for(job_id, timeout=-1)
        with pytest.raises(TypeError, match="timeout"):
            await backend.wait_for(job_id, timeout="1")  # type: ignore[arg-type]
