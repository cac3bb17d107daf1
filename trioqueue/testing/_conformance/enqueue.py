"""Enqueueing and reading a job back: payloads, options, ids, dedup keys."""

from __future__ import annotations

from typing import Any

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._backends.validation import MAX_DEDUP_KEY_BYTES, MAX_QUEUE_LENGTH
from trioqueue._types import Ack
from trioqueue.testing._conformance._base import BAD_OPTIONS, BAD_PAYLOADS, ConformanceBase, Q

__all__ = ["EnqueueConformance"]


class EnqueueConformance(ConformanceBase):
    """Enqueueing and reading a job back: payloads, options, ids, dedup keys."""

    async def test_enqueue_and_get_job_round_trip(self, backend: Backend, clock: object) -> None:
        payload = {"name": "report", "sizes": [1, 2.5], "flag": True, "none": None}
        job_id = await backend.enqueue(Q, payload, priority=3, max_attempts=4)
        info = await backend.get_job(job_id)
        assert isinstance(job_id, int)
        assert (info.id, info.queue, info.payload) == (job_id, Q, payload)
        assert info.status == "ready"
        assert (info.attempts, info.max_attempts, info.priority) == (0, 4, 3)
        assert (info.progress, info.last_error, info.finished_at) == (None, None, None)
        assert info.created_at.tzinfo is not None

    async def test_payload_is_stored_as_a_copy(self, backend: Backend, clock: object) -> None:
        payload: dict[str, Any] = {"items": [1, 2]}
        job_id = await backend.enqueue(Q, payload)
        payload["items"].append(3)
        claimed = await self._claim_one(backend)
        claimed.job.payload["items"].append(4)
        assert (await backend.get_job(job_id)).payload == {"items": [1, 2]}

    async def test_enqueue_many_returns_ids_in_order(self, backend: Backend, clock: object) -> None:
        ids = await backend.enqueue_many(Q, [{"n": 0}, {"n": 1}, {"n": 2}], priority=1)
        assert ids == sorted(ids)
        assert len(set(ids)) == 3
        infos = await backend.list_jobs(queue=Q)
        assert [(i.id, i.payload, i.priority) for i in infos] == [
            (job_id, {"n": n}, 1) for n, job_id in enumerate(ids)
        ]
        assert await backend.enqueue_many(Q, []) == []

    @pytest.mark.parametrize("payload", BAD_PAYLOADS)
    async def test_non_json_payload_raises_type_error_and_writes_nothing(
        self, backend: Backend, clock: object, payload: Any
    ) -> None:
        with pytest.raises(TypeError):
            await backend.enqueue(Q, payload)
        with pytest.raises(TypeError):
            await backend.enqueue_many(Q, [{"fine": 1}, payload])
        assert await backend.list_jobs() == []

    @pytest.mark.parametrize(("overrides", "exc_type"), BAD_OPTIONS)
    async def test_bad_enqueue_options_raise_and_write_nothing(
        self,
        backend: Backend,
        clock: object,
        overrides: dict[str, Any],
        exc_type: type[Exception],
    ) -> None:
        options = {"queue": Q, **overrides}
        queue = options.pop("queue")
        with pytest.raises(exc_type):
            await backend.enqueue(queue, {"fine": 1}, **options)
        with pytest.raises(exc_type):
            await backend.enqueue_many(queue, [{"fine": 1}], **options)
        assert await backend.list_jobs() == []

    async def test_get_job_of_unknown_id_raises_lookup_error(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue(Q, 1)
        with pytest.raises(LookupError):
            await backend.get_job(10**9)

    async def test_dedup_key_returns_the_unfinished_duplicate(
        self, backend: Backend, clock: object
    ) -> None:
        first = await backend.enqueue(Q, "a", dedup_key="k")
        assert await backend.enqueue(Q, "b", dedup_key="k") == first
        assert await backend.enqueue_many(Q, ["c"], dedup_key="k") == [first]
        other_queue = await backend.enqueue("other", "a", dedup_key="k")
        assert other_queue != first
        assert [i.payload for i in await backend.list_jobs(queue=Q)] == ["a"]
        claimed = await self._claim_one(backend)  # running is still unfinished
        assert await backend.enqueue(Q, "d", dedup_key="k") == first
        assert await backend.ack([Ack(first, claimed.job.claim_seq)]) == [True]
        assert await backend.enqueue(Q, "e", dedup_key="k") != first
        with pytest.raises(ValueError, match="dedup_key"):
            await backend.enqueue_many(Q, ["f", "g"], dedup_key="k2")

    async def test_dedup_key_of_the_documented_limit_is_stored(
        self, backend: Backend, clock: object
    ) -> None:
        """1024 bytes of UTF-8 (MAX_DEDUP_KEY_BYTES) with the longest queue name, both of
        four-byte characters, fit the unique index with room to spare."""
        queue, key = "\U0001f600" * MAX_QUEUE_LENGTH, "\U0001f4e6" * (MAX_DEDUP_KEY_BYTES // 4)
        assert len(queue.encode()) == 512
        assert len(key.encode()) == MAX_DEDUP_KEY_BYTES
        first = await backend.enqueue(queue, "a", dedup_key=key)
        assert await backend.enqueue(queue, "b", dedup_key=key) == first
