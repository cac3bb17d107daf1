"""Retention and the maintainer lease (docs/protocol.rst §15, I16, I17): policies, their
checks, bounded fenced batches that delete only finished jobs past their policy, and the
lease's claim, renewal and release by the store's clock."""

from __future__ import annotations

from typing import Any

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._errors import UnknownJobError
from trioqueue._operator_types import (
    DEFAULT_KEEP_AUDIT,
    DEFAULT_KEEP_FAILED,
    DEFAULT_KEEP_SUCCEEDED,
    Retention,
    RetentionPolicy,
)
from trioqueue._types import Ack
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["RetentionConformance"]

OTHER = "retention-other"
HOLDER = "maintainer-1"
RIVAL = "maintainer-2"


class RetentionConformance(ConformanceBase):
    """Retention policies, prune batches and the maintainer lease."""

    # -- helpers -------------------------------------------------------------------------

    async def _succeed(self, backend: Backend, n: int, queue: str = Q) -> list[int]:
        """Enqueue ``n`` jobs on ``queue`` and ack them; their ids."""
        ids = await backend.enqueue_many(queue, list(range(n)))
        claimed = await self._claim(backend, limit=n, queue=queue)
        assert sorted(self._ids(claimed)) == ids
        await backend.ack([Ack(c.job.id, c.job.claim_seq) for c in claimed])
        return ids

    async def _cancelled(self, backend: Backend, queue: str = Q) -> int:
        """A job failed for good (cancelled before it ran)."""
        job_id = await backend.enqueue(queue, "doomed")
        assert await backend.cancel(job_id)
        return job_id

    async def _lease(self, backend: Backend) -> int:
        seq = await backend.claim_maintainer(HOLDER, self.long_timeout)
        assert seq is not None
        return seq

    async def _kept(self, backend: Backend, ids: list[int]) -> list[int]:
        """Which of ``ids`` are still stored, in their order."""
        found = await backend.get_jobs(ids)
        return [job_id for job_id in ids if job_id in found]

    # -- policies ------------------------------------------------------------------------

    async def test_defaults_keep_a_week_a_month_and_a_quarter(
        self, backend: Backend, clock: object
    ) -> None:
        assert await backend.get_retention() == Retention(
            default=RetentionPolicy(None, DEFAULT_KEEP_SUCCEEDED, DEFAULT_KEEP_FAILED),
            queues=(),
            audit=DEFAULT_KEEP_AUDIT,
        )
        assert await backend.maintainer() is None

    async def test_set_and_clear_policies(self, backend: Backend, clock: object) -> None:
        own = await backend.set_retention(Q, succeeded=60, failed=None)
        assert own == RetentionPolicy(Q, 60.0, None)
        # A queue no job was ever enqueued on may have a policy: queues exist by name.
        await backend.set_retention(OTHER, succeeded=None, failed=1.5)
        fallback = await backend.set_retention(None, succeeded=3600, failed=7200)
        assert fallback == RetentionPolicy(None, 3600.0, 7200.0)
        await backend.set_audit_retention(None)
        retention = await backend.get_retention()
        assert retention == Retention(
            default=fallback,
            queues=(own, RetentionPolicy(OTHER, None, 1.5)),  # by name
            audit=None,
        )
        assert retention.for_queue("unknown") == fallback
        assert await backend.clear_retention(Q) is True
        assert await backend.clear_retention(Q) is False
        assert await backend.clear_retention("never-had-one") is False
        assert (await backend.get_retention()).queues == (RetentionPolicy(OTHER, None, 1.5),)

    async def test_set_retention_names_every_violation_and_writes_nothing(
        self, backend: Backend, clock: object
    ) -> None:
        before = await backend.get_retention()
        with pytest.raises(ValueError, match="queue") as caught:
            await backend.set_retention("", succeeded=-1, failed="a week")  # type: ignore[arg-type]
        message = str(caught.value)
        assert "queue" in message
        assert "succeeded" in message
        assert "failed" in message
        for bad in (0, -5, float("nan"), float("inf"), 1e12, True):
            with pytest.raises((TypeError, ValueError), match="failed"):
                await backend.set_retention(Q, succeeded=None, failed=bad)
        with pytest.raises(TypeError, match="queue"):
            await backend.set_retention(7, succeeded=1, failed=1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="default"):
            await backend.clear_retention(None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="seconds"):
            await backend.set_audit_retention(0)
        assert await backend.get_retention() == before

    async def test_lease_and_batch_arguments_are_checked(
        self, backend: Backend, clock: object
    ) -> None:
        with pytest.raises(ValueError, match="worker_id") as caught:
            await backend.claim_maintainer("", -1)
        assert "worker_id" in str(caught.value)
        assert "lease" in str(caught.value)
        with pytest.raises(TypeError, match="seq"):
            await backend.renew_maintainer(HOLDER, "1", 10)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="seq"):
            await backend.release_maintainer(HOLDER, -1)
        for limit in (0, 100_001):
            with pytest.raises(ValueError, match="limit"):
                await backend.prune_retained(1, limit=limit)
        assert await backend.maintainer() is None

    # -- prune batches (I16) -------------------------------------------------------------

    async def test_never_an_unfinished_job(self, backend: Backend, clock: object) -> None:
        await backend.set_retention(None, succeeded=self.short_timeout, failed=self.short_timeout)
        running = await backend.enqueue(Q, "running")
        assert (await self._claim_one(backend)).job.id == running
        expired = await backend.enqueue(Q, "lease runs out")
        assert (await self._claim_one(backend, visibility_timeout=self.short_timeout)).job.id == (
            expired
        )
        ready = await backend.enqueue(Q, "ready")
        scheduled = await backend.enqueue(Q, "scheduled", delay=self.long_timeout)
        done = await self._succeed(backend, 1, queue=OTHER)
        await self._wait_out()
        batch = await backend.prune_retained(await self._lease(backend))
        assert batch is not None
        assert batch.deleted == {(OTHER, "succeeded"): 1}
        unfinished = [running, expired, ready, scheduled]
        assert await self._kept(backend, [*unfinished, *done]) == unfinished

    async def test_each_queue_by_its_own_policy_else_the_default(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_retention(None, succeeded=self.short_timeout, failed=self.long_timeout)
        await backend.set_retention(OTHER, succeeded=self.long_timeout, failed=self.short_timeout)
        default_done = await self._succeed(backend, 2)
        default_failed = await self._cancelled(backend)
        own_done = await self._succeed(backend, 1, queue=OTHER)
        own_failed = await self._cancelled(backend, queue=OTHER)
        await self._wait_out()
        batch = await backend.prune_retained(await self._lease(backend))
        assert batch is not None
        assert batch.deleted == {(Q, "succeeded"): 2, (OTHER, "failed"): 1}
        assert batch.jobs_deleted == 3
        assert batch.more is False
        kept = [default_failed, *own_done]
        assert await self._kept(
            backend, [*default_done, default_failed, *own_done, own_failed]
        ) == (kept)
        assert batch.oldest_finished_age is not None
        assert batch.oldest_finished_age >= self.short_timeout

    async def test_keep_for_ever(self, backend: Backend, clock: object) -> None:
        await backend.set_retention(Q, succeeded=None, failed=self.short_timeout)
        await backend.set_retention(None, succeeded=None, failed=None)
        done = await self._succeed(backend, 1)
        failed = await self._cancelled(backend)
        elsewhere = await self._cancelled(backend, queue=OTHER)
        await self._wait_out()
        batch = await backend.prune_retained(await self._lease(backend))
        assert batch is not None
        assert batch.deleted == {(Q, "failed"): 1}
        assert await self._kept(backend, [*done, failed, elsewhere]) == [*done, elsewhere]

    async def test_batches_are_bounded_and_oldest_first(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_retention(None, succeeded=self.short_timeout, failed=self.short_timeout)
        first = await self._succeed(backend, 2)
        await self._wait_out()
        later = await self._succeed(backend, 3)
        await self._wait_out()
        seq = await self._lease(backend)
        batch = await backend.prune_retained(seq, limit=2)
        assert batch is not None
        assert (batch.jobs_deleted, batch.more) == (2, True)
        assert await self._kept(backend, [*first, *later]) == later
        batch = await backend.prune_retained(seq, limit=2)
        assert batch is not None
        assert (batch.jobs_deleted, batch.more) == (2, True)
        batch = await backend.prune_retained(seq, limit=2)
        assert batch is not None
        assert (batch.jobs_deleted, batch.more, batch.oldest_finished_age) == (1, False, None)
        batch = await backend.prune_retained(seq, limit=2)
        assert batch is not None
        assert (batch.jobs_deleted, batch.more) == (0, False)

    async def test_attempts_and_results_go_with_their_job(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_retention(None, succeeded=self.short_timeout, failed=None)
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        await backend.ack([Ack(job_id, claimed.job.claim_seq, result='{"answer": 42}')])
        assert len(await backend.list_attempts(job_id)) == 1
        await self._wait_out()
        batch = await backend.prune_retained(await self._lease(backend))
        assert batch is not None
        assert batch.jobs_deleted == 1
        assert await self._kept(backend, [job_id]) == []
        with pytest.raises(UnknownJobError):
            await backend.list_attempts(job_id)

    async def test_audit_entries_have_their_own_retention(
        self, backend: Backend, clock: object
    ) -> None:
        detail: dict[str, Any] = {"n": 1}
        await backend.set_retention(None, succeeded=None, failed=None)
        await backend.record_audit("pause", Q, "session-1", detail)
        await self._wait_out()
        seq = await self._lease(backend)
        batch = await backend.prune_retained(seq)
        assert batch is not None
        assert batch.audit_deleted == 0
        await backend.set_audit_retention(self.short_timeout)
        fresh = await backend.record_audit("resume", Q, "session-1", detail)
        batch = await backend.prune_retained(seq)
        assert batch is not None
        assert (batch.audit_deleted, batch.jobs_deleted) == (1, 0)
        assert [entry.id for entry in await backend.list_audit()] == [fresh]

    # -- the preview (trioqueue prune --dry-run) -----------------------------------------

    async def test_the_preview_counts_what_a_pass_then_deletes(
        self, backend: Backend, clock: object
    ) -> None:
        detail: dict[str, Any] = {"n": 1}
        await backend.set_retention(None, succeeded=self.short_timeout, failed=self.long_timeout)
        await backend.set_retention(OTHER, succeeded=None, failed=self.short_timeout)
        await backend.set_audit_retention(self.short_timeout)
        await self._succeed(backend, 3)
        await self._cancelled(backend)  # the default keeps failed jobs long
        await self._succeed(backend, 1, queue=OTHER)  # kept for ever
        await self._cancelled(backend, queue=OTHER)
        await backend.record_audit("pause", Q, "session-1", detail)
        await backend.enqueue(Q, "unfinished")
        await self._wait_out()
        preview = await backend.retention_preview()
        assert preview.due == {(Q, "succeeded"): 3, (OTHER, "failed"): 1}
        assert (preview.jobs_due, preview.audit_due) == (4, 1)
        assert await backend.retention_preview() == preview  # it deleted nothing
        assert await backend.maintainer() is None  # and took no lease
        seq = await self._lease(backend)
        first = await backend.prune_retained(seq, limit=3)
        second = await backend.prune_retained(seq, limit=3)
        assert first is not None
        assert second is not None
        assert (first.jobs_deleted, second.jobs_deleted, second.more) == (3, 1, False)
        after = await backend.retention_preview()
        assert (after.due, after.audit_due) == ({}, 0)

    async def test_the_age_preview_ignores_the_policies(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_retention(None, succeeded=None, failed=None)
        await backend.set_audit_retention(self.short_timeout)
        await backend.record_audit("pause", Q, "session-1", {"n": 1})
        await self._succeed(backend, 2)
        await self._cancelled(backend, queue=OTHER)
        await self._wait_out()
        recent = await self._succeed(backend, 1)
        preview = await backend.retention_preview(older_than=self.short_timeout)
        assert preview.due == {(Q, "succeeded"): 2, (OTHER, "failed"): 1}
        assert preview.audit_due == 0  # the age prune keeps the audit log
        assert (await backend.retention_preview()).jobs_due == 0  # kept for ever
        assert await self._kept(backend, recent) == recent
        await self._wait_out()
        everything = await backend.retention_preview(older_than=self.short_timeout)
        assert everything.due == {(Q, "succeeded"): 3, (OTHER, "failed"): 1}

    @pytest.mark.parametrize("bad", [-1, float("nan"), "1d", True])
    async def test_a_bad_preview_age_is_refused(
        self, backend: Backend, clock: object, bad: object
    ) -> None:
        with pytest.raises((TypeError, ValueError), match="older_than"):
            await backend.retention_preview(older_than=bad)  # type: ignore[arg-type]
        assert backend.statistics().calls["retention_preview"] == 0

    # -- the fence (I17) -----------------------------------------------------------------

    async def test_a_stale_or_lapsed_fence_deletes_nothing(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_retention(None, succeeded=self.short_timeout, failed=None)
        done = await self._succeed(backend, 2)
        assert await backend.prune_retained(1) is None  # never taken
        stale = await backend.claim_maintainer(HOLDER, self.short_timeout)
        assert stale is not None
        await self._wait_out()
        assert await backend.prune_retained(stale) is None  # lapsed
        live = await backend.claim_maintainer(RIVAL, self.long_timeout)
        assert live == stale + 1
        assert await backend.prune_retained(stale) is None  # moved on
        assert await backend.prune_retained(live + 1) is None
        assert await self._kept(backend, done) == done
        batch = await backend.prune_retained(live)
        assert batch is not None
        assert batch.jobs_deleted == 2

    # -- the lease -----------------------------------------------------------------------

    async def test_one_holder_at_a_time(self, backend: Backend, clock: object) -> None:
        seq = await self._lease(backend)
        assert await backend.claim_maintainer(RIVAL, self.long_timeout) is None
        assert await backend.claim_maintainer(HOLDER, self.long_timeout) is None  # renew
        info = await backend.maintainer()
        assert info is not None
        assert (info.holder, info.seq) == (HOLDER, seq)
        assert info.acquired_at < info.expires_at

    async def test_renewal_is_fenced_and_never_shortens(
        self, backend: Backend, clock: object
    ) -> None:
        seq = await self._lease(backend)
        before = await backend.maintainer()
        assert await backend.renew_maintainer(RIVAL, seq, self.long_timeout) is False
        assert await backend.renew_maintainer(HOLDER, seq + 1, self.long_timeout) is False
        assert await backend.renew_maintainer(HOLDER, seq, self.short_timeout) is True
        assert await backend.maintainer() == before  # a shorter renewal keeps the lease
        assert await backend.renew_maintainer(HOLDER, seq, 2 * self.long_timeout) is True
        after = await backend.maintainer()
        assert before is not None
        assert after is not None
        assert after.expires_at > before.expires_at
        assert (after.seq, after.acquired_at) == (seq, before.acquired_at)

    async def test_a_lapsed_lease_is_taken_over(self, backend: Backend, clock: object) -> None:
        seq = await backend.claim_maintainer(HOLDER, self.short_timeout)
        assert seq is not None
        await self._wait_out()
        assert await backend.renew_maintainer(HOLDER, seq, self.long_timeout) is False
        taken = await backend.claim_maintainer(RIVAL, self.long_timeout)
        assert taken == seq + 1
        assert await backend.release_maintainer(HOLDER, seq) is False
        info = await backend.maintainer()
        assert info is not None
        assert (info.holder, info.seq) == (RIVAL, taken)

    async def test_release_frees_the_lease_at_once(self, backend: Backend, clock: object) -> None:
        seq = await self._lease(backend)
        assert await backend.release_maintainer(RIVAL, seq) is False
        assert await backend.release_maintainer(HOLDER, seq) is True
        assert await backend.release_maintainer(HOLDER, seq) is False  # already free
        assert await backend.prune_retained(seq) is None
        assert await backend.renew_maintainer(HOLDER, seq, self.long_timeout) is False
        assert await backend.claim_maintainer(RIVAL, self.long_timeout) == seq + 1

    async def test_calls_are_counted(self, backend: Backend, clock: object) -> None:
        seq = await self._lease(backend)
        await backend.renew_maintainer(HOLDER, seq, self.long_timeout)
        await backend.prune_retained(seq)
        await backend.prune_retained(seq)
        await backend.release_maintainer(HOLDER, seq)
        await backend.get_retention()
        calls = backend.statistics().calls
        assert calls["claim_maintainer"] == 1
        assert calls["renew_maintainer"] == 1
        assert calls["prune_retained"] == 2
        assert calls["release_maintainer"] == 1
        assert calls["get_retention"] == 1
        assert calls["set_retention"] == 0
