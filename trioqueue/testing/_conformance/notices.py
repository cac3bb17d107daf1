"""Notices and statistics: LISTEN/NOTIFY hints, statements counted per call."""

from __future__ import annotations

import pytest
import trio

from trioqueue._backends.interface import Backend
from trioqueue._types import Ack, NoticeKind
from trioqueue.testing._conformance._base import WORKER, ConformanceBase, Q

__all__ = ["NoticeConformance"]


class NoticeConformance(ConformanceBase):
    """Notices and statistics: LISTEN/NOTIFY hints, statements counted per call."""

    async def test_enqueue_notifies_listeners_of_the_queue(
        self, backend: Backend, clock: object
    ) -> None:
        async with backend.listen(Q, WORKER) as notices:
            await backend.enqueue(Q, "x")
            notice = await self._next_notice(notices, NoticeKind.AVAILABLE)
        assert (notice.kind, notice.queue) == (NoticeKind.AVAILABLE, Q)

    async def test_a_watcher_hears_every_queue_and_every_cancel(
        self, backend: Backend, clock: object
    ) -> None:
        """``watch()``: the notices of every queue and every worker, for the dashboard."""
        other = "other:queue"  # a colon in a queue name must survive the payload
        async with backend.watch() as notices:
            job_id = await backend.enqueue(Q, "x")
            first = await self._next_notice(notices, NoticeKind.AVAILABLE)
            await backend.enqueue(other, "y")
            second = await self._next_notice(notices, NoticeKind.AVAILABLE)
            await self._claim_one(backend)
            assert await backend.cancel(job_id) is True
            cancel = await self._next_notice(notices, NoticeKind.CANCEL)
        assert (first.queue, second.queue) == (Q, other)
        assert (cancel.queue, cancel.job_id) == (Q, job_id)

    async def test_only_finishes_of_awaited_jobs_are_heard(
        self, backend: Backend, clock: object
    ) -> None:
        """A finish sends FINISHED only for a job a ``wait_for`` marked (its read marks it),
        to watchers, not to the queue's listeners; a deletion of one sends it too."""
        quiet, waited, doomed = await backend.enqueue_many(Q, ["quiet", "waited", "doomed"])
        claimed = {c.job.id: c.job for c in await self._claim(backend, limit=2)}
        for job_id in (waited, doomed):
            with pytest.raises(TimeoutError):  # marks it, then gives up
                await backend.wait_for(job_id, timeout=self.short_timeout)
        async with backend.watch() as watched, backend.listen(Q, WORKER) as listened:
            await backend.ack([Ack(quiet, claimed[quiet].claim_seq)])
            await backend.ack([Ack(waited, claimed[waited].claim_seq)])
            finished = await self._next_notice(watched, NoticeKind.FINISHED)
            assert await backend.delete_job(doomed) is True
            deleted = await self._next_notice(watched, NoticeKind.FINISHED)
            await backend.enqueue(Q, "after")
            with trio.fail_after(self.notice_timeout):
                heard = await listened.receive()  # the first: no FINISHED came before it
        assert (finished.queue, finished.job_id) == (Q, waited)
        assert (deleted.queue, deleted.job_id) == (Q, doomed)
        assert heard.kind is NoticeKind.AVAILABLE

    async def test_statistics_count_statements(self, backend: Backend, clock: object) -> None:
        stats = backend.statistics()
        assert {"connections_in_use", "peak_connections_in_use", "calls"} <= set(stats)
        before = dict(stats["calls"])
        await backend.enqueue(Q, 1)
        await backend.enqueue_many(Q, [2, 3])
        claimed = await self._claim(backend)
        await self._renew(backend, *map(self._item, claimed))
        await backend.ack([Ack(c.job.id, c.job.claim_seq) for c in claimed])
        after = backend.statistics()
        ops = ("enqueue", "claim", "renew", "ack")
        counted = {op: after["calls"][op] - before.get(op, 0) for op in ops}
        # enqueue_many is one statement; so is a renewal or an ack of many jobs (I10).
        assert counted == {"enqueue": 2, "claim": 1, "renew": 1, "ack": 1}
        assert after["connections_in_use"] == 0
        assert after["peak_connections_in_use"] >= 1
