"""Checkpoints: stored by the fenced renewal and outcome writes, kept by the claim and
delivered with it (docs/protocol.rst §16, invariant I18)."""

from __future__ import annotations

import json

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._backends.validation import MAX_CHECKPOINT_BYTES
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import Ack, Claimed, Failure, Recorded, Release
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["CheckpointConformance"]

PAGE = '{"page": 3, "cursor": "é"}'
DECODED = {"page": 3, "cursor": "é"}

#: Checkpoint texts a backend must refuse: a renewal or outcome carrying one writes nothing.
BAD_TEXTS = [
    pytest.param("{not json", id="not-json"),
    pytest.param('"a\\u0000b"', id="nul-char"),
    pytest.param(json.dumps("x" * MAX_CHECKPOINT_BYTES), id="over-the-bound"),
]


class CheckpointConformance(ConformanceBase):
    """Checkpoints: stored by renewals and outcomes (fenced), delivered by the next claim."""

    @staticmethod
    def _at(claimed: Claimed, checkpoint: str | None) -> RenewItem:
        return RenewItem(claimed.job.id, claimed.job.claim_seq, None, checkpoint)

    async def test_checkpoint_stored_by_renewal_and_kept_without_one(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert claimed.job.checkpoint is None  # no earlier attempt stored one
        info = await backend.get_job(job_id)
        assert (info.checkpoint, info.checkpointed_at) == (None, None)
        assert await self._renew(backend, self._at(claimed, PAGE)) == {job_id: Verdict.EXTENDED}
        info = await backend.get_job(job_id)
        assert info.checkpoint == DECODED
        assert info.checkpointed_at is not None
        stored_at = info.checkpointed_at
        # A renewal that carries none (the database holds the latest) leaves it, and its time.
        assert await self._renew(backend, self._at(claimed, None)) == {job_id: Verdict.EXTENDED}
        info = await backend.get_job(job_id)
        assert (info.checkpoint, info.checkpointed_at) == (DECODED, stored_at)
        # The latest wins; JSON null is a value (the handler said "start over").
        await self._renew(backend, self._at(claimed, "[1, 2]"))
        assert (await backend.get_job(job_id)).checkpoint == [1, 2]
        await self._renew(backend, self._at(claimed, "null"))
        info = await backend.get_job(job_id)
        assert info.checkpoint is None
        assert info.checkpointed_at is not None

    async def test_checkpoint_delivered_by_the_next_claim(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=5)
        first = await self._claim_one(backend)
        await self._renew(backend, self._at(first, PAGE))
        assert await backend.fail([Failure(job_id, first.job.claim_seq, "boom", 0.0)]) == [
            Recorded.RETRY
        ]
        second = await self._claim_one(backend)
        assert (second.job.attempt, second.job.checkpoint) == (2, DECODED)
        # The claim keeps it (unlike progress): it is what this attempt resumes from.
        assert (await backend.get_job(job_id)).checkpoint == DECODED

    async def test_checkpoint_carried_by_fail_ack_and_release(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=5)
        first = await self._claim_one(backend)
        failure = Failure(job_id, first.job.claim_seq, "boom", 0.0, checkpoint='{"n": 1}')
        assert await backend.fail([failure]) == [Recorded.RETRY]
        second = await self._claim_one(backend)
        assert second.job.checkpoint == {"n": 1}
        released = Release(job_id, second.job.claim_seq, checkpoint='{"n": 2}')
        assert await backend.release([released]) == [True]
        third = await self._claim_one(backend)
        assert third.job.checkpoint == {"n": 2}
        assert await backend.ack([Ack(job_id, third.job.claim_seq, checkpoint='{"n": 3}')]) == [
            True
        ]
        info = await backend.get_job(job_id)
        assert (info.status, info.checkpoint) == ("succeeded", {"n": 3})
        assert info.checkpointed_at is not None

    async def test_checkpoint_kept_by_a_final_write_that_carries_none(
        self, backend: Backend, clock: object
    ) -> None:
        ids = await backend.enqueue_many(Q, ["a", "b", "c"], max_attempts=5)
        claimed = await self._claim(backend, limit=3)
        await self._renew(backend, *(self._at(c, f'{{"job": {c.job.id}}}') for c in claimed))
        a, b, c = sorted(claimed, key=lambda x: x.job.id)
        assert await backend.ack([Ack(a.job.id, a.job.claim_seq)]) == [True]
        assert await backend.fail([Failure(b.job.id, b.job.claim_seq, "boom", None)]) == [
            Recorded.FINAL
        ]
        assert await backend.release([Release(c.job.id, c.job.claim_seq)]) == [True]
        assert [(await backend.get_job(i)).checkpoint for i in ids] == [{"job": i} for i in ids]

    async def test_checkpoint_delivered_after_a_lapsed_lease(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=5)
        first = await self._claim_one(backend, visibility_timeout=self.short_timeout)
        items = [self._at(first, PAGE)]
        assert await backend.renew(items, visibility_timeout=self.short_timeout) == {
            job_id: Verdict.EXTENDED
        }
        await self._wait_out()  # the worker died: its lease lapses, the next claim takes over
        second = await self._claim_one(backend)
        assert (second.job.attempt, second.job.checkpoint) == (2, DECODED)

    async def test_a_stale_attempts_checkpoint_is_never_stored(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=5)
        old = await self._claim_one(backend, visibility_timeout=self.short_timeout)
        await self._wait_out()
        new = await self._claim_one(backend)
        await self._renew(backend, self._at(new, '"new"'))
        stored_at = (await backend.get_job(job_id)).checkpointed_at
        # I9 and I18: every write of the old attempt names its claim_seq and writes nothing.
        assert await self._renew(backend, self._at(old, '"stale"')) == {job_id: Verdict.RECLAIMED}
        assert await backend.ack([Ack(job_id, old.job.claim_seq, checkpoint='"stale"')]) == [False]
        stale = Failure(job_id, old.job.claim_seq, "late", 0.0, checkpoint='"stale"')
        assert await backend.fail([stale]) == [None]
        assert await backend.release(
            [Release(job_id, old.job.claim_seq, checkpoint='"stale"')]
        ) == [False]
        info = await backend.get_job(job_id)
        assert (info.checkpoint, info.checkpointed_at) == ("new", stored_at)
        # After the job finished, a renewal finds it gone and stores nothing either.
        assert await backend.ack([Ack(job_id, new.job.claim_seq)]) == [True]
        assert await self._renew(backend, self._at(new, '"late"')) == {job_id: Verdict.GONE}
        assert (await backend.get_job(job_id)).checkpoint == "new"

    async def test_checkpoints_ride_in_one_renewal_statement(
        self, backend: Backend, clock: object
    ) -> None:
        ids = await backend.enqueue_many(Q, list(range(5)))
        claimed = await self._claim(backend)
        renewals = backend.statistics()["calls"]["renew"]
        items = [self._at(c, None if c.job.id % 2 else f"[{c.job.id}]") for c in claimed]
        verdicts = await self._renew(backend, *items)
        assert verdicts == dict.fromkeys(ids, Verdict.EXTENDED)
        assert backend.statistics()["calls"]["renew"] == renewals + 1  # I10: still one
        stored = [(await backend.get_job(i)).checkpoint for i in ids]
        assert stored == [None if i % 2 else [i] for i in ids]

    async def test_checkpoint_at_the_bound_is_stored(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        text = json.dumps("x" * (MAX_CHECKPOINT_BYTES - 2))  # the quotes make it the bound
        assert len(text.encode()) == MAX_CHECKPOINT_BYTES
        await self._renew(backend, self._at(claimed, text))
        assert (await backend.get_job(job_id)).checkpoint == json.loads(text)

    @pytest.mark.parametrize("text", BAD_TEXTS)
    async def test_bad_checkpoint_texts_write_nothing(
        self, backend: Backend, clock: object, text: str
    ) -> None:
        ids = await backend.enqueue_many(Q, ["a", "b"], max_attempts=5)
        a, b = sorted(await self._claim(backend, limit=2), key=lambda x: x.job.id)
        good = self._at(a, '"fine"')
        with pytest.raises(ValueError, match=rf"job {b.job.id}: .*checkpoint") as caught:
            await self._renew(backend, good, self._at(b, text))
        assert f"job {a.job.id}" not in str(caught.value)  # only the bad item is named
        with pytest.raises(ValueError, match="checkpoint"):
            await backend.ack(
                [Ack(a.job.id, a.job.claim_seq), Ack(b.job.id, b.job.claim_seq, checkpoint=text)]
            )
        with pytest.raises(ValueError, match="checkpoint"):
            await backend.fail([Failure(b.job.id, b.job.claim_seq, "x", 0.0, checkpoint=text)])
        with pytest.raises(ValueError, match="checkpoint"):
            await backend.release([Release(b.job.id, b.job.claim_seq, checkpoint=text)])
        for job_id in ids:  # nothing renewed, stored or finished
            info = await backend.get_job(job_id)
            assert (info.status, info.checkpoint) == ("running", None)
