"""Duplicates: keep, replace, debounce (docs/protocol.rst §18, I20).

A dedup key held by an unfinished job is answered by the enqueue's ``on_duplicate``
policy. Only a waiting holder (ready, scheduled, or waiting to retry) is changed; a running
one, leased or with an expired lease, is left exactly as it is and the caller is told
``running``; a finished one holds no key, so the enqueue adds a new job.
"""

from __future__ import annotations

from typing import Any

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._types import Ack, Enqueued, Failure, Recorded
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["DuplicateConformance"]

K = "dup-key"

#: ``on_duplicate`` inputs no backend may accept: ``(options, exception, every part of the
#: one message)``. Each is refused whole before anything is written.
BAD_POLICIES = [
    pytest.param(
        {"on_duplicate": "overwrite", "dedup_key": K},
        ValueError,
        ["on_duplicate must be one of 'keep', 'replace', 'debounce', not 'overwrite'"],
        id="unknown-policy",
    ),
    pytest.param(
        {"on_duplicate": 1, "dedup_key": K},
        TypeError,
        ["on_duplicate must be a str, not int"],
        id="int-policy",
    ),
    pytest.param(
        {"on_duplicate": "replace"},
        ValueError,
        ["on_duplicate='replace' needs a dedup_key"],
        id="replace-without-key",
    ),
    pytest.param(
        {"on_duplicate": "debounce", "dedup_key": K},
        ValueError,
        ["on_duplicate='debounce' needs a delay > 0"],
        id="debounce-without-delay",
    ),
    pytest.param(
        {"on_duplicate": "debounce", "dedup_key": K, "delay": 0},
        ValueError,
        ["on_duplicate='debounce' needs a delay > 0"],
        id="debounce-with-zero-delay",
    ),
    pytest.param(
        {"on_duplicate": "debounce"},
        ValueError,
        ["on_duplicate='debounce' needs a dedup_key", "needs a delay > 0"],
        id="debounce-without-key-or-delay",
    ),
    pytest.param(
        {"on_duplicate": "later"},
        ValueError,
        ["must be one of", "on_duplicate='later' needs a dedup_key"],
        id="unknown-policy-without-key",
    ),
]


class DuplicateConformance(ConformanceBase):
    """Duplicates: keep, replace, debounce (docs/protocol.rst §18, I20)."""

    async def _dedup(self, backend: Backend, payload: Any, **options: Any) -> Enqueued:
        return await backend.enqueue_deduplicated(Q, payload, dedup_key=K, **options)

    async def test_keep_is_the_default_and_changes_nothing(
        self, backend: Backend, clock: object
    ) -> None:
        first = await self._dedup(backend, "a", priority=1)
        assert (first.outcome, first.added) == ("added", True)
        again = await self._dedup(backend, "b", priority=9)
        kept = await self._dedup(backend, "c", on_duplicate="keep")
        assert (again.outcome, kept.outcome) == ("kept", "kept")
        assert again == kept == (first.id, False)  # (id, added), as it always was
        info = await backend.get_job(first.id)
        assert (info.payload, info.priority, info.status) == ("a", 1, "ready")

    async def test_replace_gives_a_waiting_duplicate_the_new_payload_priority_and_run_time(
        self, backend: Backend, clock: object
    ) -> None:
        first = await self._dedup(backend, "a", delay=self.long_timeout)
        assert (await backend.get_job(first.id)).status == "scheduled"
        replaced = await self._dedup(backend, {"v": 2}, priority=7, on_duplicate="replace")
        assert replaced == (first.id, False)
        assert replaced.outcome == "replaced"
        info = await backend.get_job(first.id)
        assert (info.payload, info.priority, info.status) == ({"v": 2}, 7, "ready")
        assert [j.id for j in await backend.list_jobs(queue=Q)] == [first.id]
        claimed = await self._claim_one(backend)
        assert (claimed.job.id, claimed.job.payload) == (first.id, {"v": 2})

    async def test_replace_with_a_delay_schedules_the_duplicate(
        self, backend: Backend, clock: object
    ) -> None:
        first = await self._dedup(backend, "a")
        replaced = await self._dedup(backend, "b", delay=self.long_timeout, on_duplicate="replace")
        assert replaced.outcome == "replaced"
        info = await backend.get_job(first.id)
        assert (info.payload, info.status) == ("b", "scheduled")
        assert await self._claim(backend) == []

    async def test_replace_reorders_the_claims(self, backend: Backend, clock: object) -> None:
        """A new priority takes effect in claim order at once (priority DESC, then id)."""
        low = await self._dedup(backend, "low")
        other = await backend.enqueue(Q, "other", priority=5)
        await self._dedup(backend, "high", priority=9, on_duplicate="replace")
        claimed = await self._claim(backend)
        assert [(c.job.id, c.job.payload) for c in claimed] == [(low.id, "high"), (other, "other")]

    async def test_debounce_pushes_the_run_time_back_and_keeps_the_payload(
        self, backend: Backend, clock: object
    ) -> None:
        first = await self._dedup(backend, "a", priority=2)
        debounced = await self._dedup(
            backend, "b", priority=8, delay=self.long_timeout, on_duplicate="debounce"
        )
        assert (debounced.id, debounced.outcome) == (first.id, "debounced")
        info = await backend.get_job(first.id)
        assert (info.payload, info.priority, info.status) == ("a", 2, "scheduled")
        assert await self._claim(backend) == []
        # The run time is now + delay, whatever it was: a shorter delay brings it nearer.
        again = await self._dedup(backend, "c", delay=self.short_timeout, on_duplicate="debounce")
        assert again.outcome == "debounced"
        await self._wait_out()
        claimed = await self._claim_one(backend)
        assert (claimed.job.id, claimed.job.payload) == (first.id, "a")

    async def test_a_running_duplicate_is_left_unchanged(
        self, backend: Backend, clock: object
    ) -> None:
        first = await self._dedup(backend, "a", priority=3)
        claimed = await self._claim_one(backend)
        before = await backend.get_job(first.id)
        for policy, delay in (("replace", None), ("debounce", self.long_timeout)):
            answer = await self._dedup(backend, "b", priority=9, delay=delay, on_duplicate=policy)
            assert answer == (first.id, False)
            assert answer.outcome == "running"
        after = await backend.get_job(first.id)
        assert after == before  # payload, priority, lease: nothing written
        assert await backend.ack([Ack(first.id, claimed.job.claim_seq)]) == [True]
        assert (await backend.get_job(first.id)).payload == "a"

    async def test_a_duplicate_whose_lease_expired_still_counts_as_running(
        self, backend: Backend, clock: object
    ) -> None:
        """Its worker may still renew it (and may still be running the old payload), so
        it is not changed until a claim or an outcome settles it."""
        first = await self._dedup(backend, "a")
        claimed = await self._claim_one(backend, visibility_timeout=self.short_timeout)
        await self._wait_out()
        answer = await self._dedup(backend, "b", on_duplicate="replace")
        assert (answer.id, answer.outcome) == (first.id, "running")
        again = await self._claim_one(backend)
        assert again.job.payload == "a"
        assert again.job.claim_seq > claimed.job.claim_seq

    async def test_a_duplicate_waiting_to_retry_is_replaced(
        self, backend: Backend, clock: object
    ) -> None:
        first = await self._dedup(backend, "a")
        claimed = await self._claim_one(backend)
        failure = Failure(first.id, claimed.job.claim_seq, "boom", retry_delay=self.long_timeout)
        assert await backend.fail([failure]) == [Recorded.RETRY]
        assert (await backend.get_job(first.id)).status == "scheduled"
        replaced = await self._dedup(backend, "b", on_duplicate="replace")
        assert (replaced.id, replaced.outcome) == (first.id, "replaced")
        again = await self._claim_one(backend)  # due now: the new run time replaced the backoff
        assert (again.job.id, again.job.payload, again.job.attempt) == (first.id, "b", 2)

    async def test_a_finished_duplicate_means_a_new_job(
        self, backend: Backend, clock: object
    ) -> None:
        first = await self._dedup(backend, "a")
        claimed = await self._claim_one(backend)
        assert await backend.ack([Ack(first.id, claimed.job.claim_seq)]) == [True]
        replaced = await self._dedup(backend, "b", on_duplicate="replace")
        assert replaced.outcome == "added"
        assert (replaced.added, replaced.id == first.id) == (True, False)
        assert await backend.cancel(replaced.id)  # failed at once: the key is free again
        debounced = await self._dedup(backend, "c", delay=1.0, on_duplicate="debounce")
        assert debounced.outcome == "added"
        assert debounced.id not in (first.id, replaced.id)
        assert (await backend.get_job(first.id)).payload == "a"
        assert (await backend.get_job(replaced.id)).payload == "b"

    async def test_enqueue_and_enqueue_many_take_the_policy_and_answer_the_holder(
        self, backend: Backend, clock: object
    ) -> None:
        first = await backend.enqueue(Q, "a", dedup_key=K)
        assert await backend.enqueue(Q, "b", dedup_key=K, on_duplicate="replace") == first
        assert await backend.enqueue_many(Q, ["c"], dedup_key=K, on_duplicate="replace") == [first]
        assert (await backend.get_job(first)).payload == "c"
        with pytest.raises(ValueError, match="dedup_key"):
            await backend.enqueue_many(Q, ["d", "e"], dedup_key=K, on_duplicate="replace")

    async def test_the_policy_is_per_queue_and_key(self, backend: Backend, clock: object) -> None:
        first = await self._dedup(backend, "a")
        other_key = await backend.enqueue_deduplicated(
            Q, "b", dedup_key="other", on_duplicate="replace"
        )
        other_queue = await backend.enqueue_deduplicated(
            "elsewhere", "c", dedup_key=K, on_duplicate="replace"
        )
        assert (other_key.outcome, other_queue.outcome) == ("added", "added")
        assert (await backend.get_job(first.id)).payload == "a"

    @pytest.mark.parametrize(("options", "error", "parts"), BAD_POLICIES)
    async def test_bad_policies_are_refused_with_one_error_and_nothing_written(
        self,
        backend: Backend,
        clock: object,
        options: dict[str, Any],
        error: type[Exception],
        parts: list[str],
    ) -> None:
        held = await backend.enqueue(Q, "a", dedup_key=K, delay=self.long_timeout)
        for call in (backend.enqueue, backend.enqueue_many):
            payload: Any = ["b"] if call is backend.enqueue_many else "b"
            with pytest.raises(error) as caught:
                await call(Q, payload, **options)
            for part in parts:
                assert part in str(caught.value)
        jobs = await backend.list_jobs()
        assert [(j.id, j.payload, j.status) for j in jobs] == [(held, "a", "scheduled")]
