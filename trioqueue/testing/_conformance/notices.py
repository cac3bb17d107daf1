"""Notices and statistics: LISTEN/NOTIFY hints, statements counted per call."""

from __future__ import annotations

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
