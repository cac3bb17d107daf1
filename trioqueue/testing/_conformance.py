"""The backend conformance suite (public as ``trioqueue.testing.BackendConformance``).

Every backend runs these same tests, which is what lets the worker runtime treat all
backends alike and lets a differential test compare two of them. The tests speak only the
:class:`~trioqueue._backends.interface.Backend` protocol. Time passes through ``trio.sleep``: instant
under a ``MockClock`` (the memory backend), real but short against a database, where the
few tests that must outlive a lease or a delay wait ``short_timeout + slack`` each.

pytest-trio takes the clock from the test function's own arguments, so every test here
asks for the ``clock`` fixture, even when it does not use it.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest
import trio

from trioqueue._backends.interface import Backend
from trioqueue._backends.validation import MAX_DEDUP_KEY_BYTES, MAX_QUEUE_LENGTH
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import (
    Ack,
    Claimed,
    Failure,
    JobInfo,
    Notice,
    NoticeKind,
    Recorded,
    Release,
)
from trioqueue.testing._notices import next_notice

__all__ = ["BackendConformance"]

Q = "conformance"
WORKER = "worker-1"

_cycle: list[Any] = []
_cycle.append(_cycle)

#: Payloads no backend may accept (each must raise TypeError and write nothing).
BAD_PAYLOADS = [
    pytest.param({1, 2}, id="set"),
    pytest.param(object(), id="object"),
    pytest.param(b"bytes", id="bytes"),
    pytest.param(float("nan"), id="nan"),
    pytest.param({"x": [1.0, math.inf]}, id="nested-inf"),
    pytest.param({("tuple", "key"): 1}, id="tuple-key"),
    pytest.param(_cycle, id="circular"),
    pytest.param({"text": "a\x00b"}, id="nul-char"),  # jsonb cannot store U+0000
    pytest.param(["\ud800"], id="lone-surrogate"),  # not valid Unicode
]

#: Enqueue options no backend may accept: ``(overrides, exception type)``.
BAD_OPTIONS = [
    pytest.param({"queue": ""}, ValueError, id="empty-queue"),
    pytest.param({"queue": 7}, TypeError, id="int-queue"),
    pytest.param({"queue": "x" * 129}, ValueError, id="long-queue"),
    pytest.param({"queue": "a\x00b"}, ValueError, id="nul-queue"),
    pytest.param({"priority": "1"}, TypeError, id="str-priority"),
    pytest.param({"priority": True}, TypeError, id="bool-priority"),
    pytest.param({"priority": 1.5}, TypeError, id="float-priority"),
    pytest.param({"delay": -1}, ValueError, id="negative-delay"),
    pytest.param({"delay": math.nan}, ValueError, id="nan-delay"),
    pytest.param({"delay": math.inf}, ValueError, id="inf-delay"),
    pytest.param({"delay": "1"}, TypeError, id="str-delay"),
    pytest.param({"max_attempts": 0}, ValueError, id="zero-max-attempts"),
    pytest.param({"max_attempts": 2.0}, TypeError, id="float-max-attempts"),
    pytest.param({"dedup_key": ""}, ValueError, id="empty-dedup-key"),
    pytest.param({"dedup_key": 5}, TypeError, id="int-dedup-key"),
    # What PostgreSQL's columns cannot hold is refused by every backend alike.
    pytest.param({"priority": 2**31}, ValueError, id="priority-past-int32"),
    pytest.param({"priority": -(2**31) - 1}, ValueError, id="priority-below-int32"),
    pytest.param({"max_attempts": 2**31}, ValueError, id="max-attempts-past-int32"),
    pytest.param({"delay": 1e12}, ValueError, id="delay-past-a-century"),
    pytest.param({"delay": 10**400}, ValueError, id="delay-beyond-float"),
    pytest.param({"queue": "q\udcff"}, ValueError, id="queue-not-utf8-argv"),
    # The unique index on (queue, dedup_key) holds entries of at most 2704 bytes.
    pytest.param({"dedup_key": "k" * 1025}, ValueError, id="dedup-key-past-1024-bytes"),
    pytest.param({"dedup_key": "é" * 513}, ValueError, id="dedup-key-of-513-chars-1026-bytes"),
]


class BackendConformance:
    """What every backend must do, as tests. Subclass it in a test module::

        class TestMemoryConformance(BackendConformance):
            @pytest.fixture
            async def backend(self):
                async with trioqueue.open_memory() as backend:
                    yield backend

            @pytest.fixture
            def clock(self):
                return trio.testing.MockClock(autojump_threshold=0)

    The ``backend`` fixture must yield an open, migrated, empty backend. Override ``clock``
    to run the tests on a fake clock (only for a backend whose times come from trio). The
    class attributes below tune the timings to a backend's clock resolution.
    """

    pytestmark = pytest.mark.trio

    #: A lease or delay short enough to wait out in a test (seconds).
    short_timeout: ClassVar[float] = 0.15
    #: Extra wait past ``short_timeout``, so that it has surely passed on the backend's clock.
    slack: ClassVar[float] = 0.1
    #: A lease that must not expire during a test.
    long_timeout: ClassVar[float] = 60.0
    #: How long a notice may take to arrive.
    notice_timeout: ClassVar[float] = 5.0

    @pytest.fixture
    def clock(self) -> trio.abc.Clock | None:
        """The clock for ``trio.run``: None is trio's real clock."""
        return None

    # -- helpers -------------------------------------------------------------------------

    async def _wait_out(self) -> None:
        """Let ``short_timeout`` pass on the backend's clock."""
        await trio.sleep(self.short_timeout + self.slack)

    async def _claim(
        self,
        backend: Backend,
        *,
        limit: int = 10,
        queue: str = Q,
        worker_id: str = WORKER,
        visibility_timeout: float | None = None,
    ) -> list[Claimed]:
        v = self.long_timeout if visibility_timeout is None else visibility_timeout
        return await backend.claim(queue, limit=limit, worker_id=worker_id, visibility_timeout=v)

    async def _claim_one(
        self, backend: Backend, *, visibility_timeout: float | None = None
    ) -> Claimed:
        claimed = await self._claim(backend, limit=1, visibility_timeout=visibility_timeout)
        assert len(claimed) == 1, claimed
        return claimed[0]

    async def _renew(self, backend: Backend, *items: RenewItem) -> dict[int, Verdict]:
        verdicts = await backend.renew(items, visibility_timeout=self.long_timeout)
        return dict(verdicts)

    @staticmethod
    def _item(claimed: Claimed, progress: float | None = None) -> RenewItem:
        return RenewItem(claimed.job.id, claimed.job.claim_seq, progress)

    @staticmethod
    def _ids(jobs: list[Claimed] | list[JobInfo]) -> list[int]:
        return [j.job.id if isinstance(j, Claimed) else j.id for j in jobs]

    async def _next_notice(
        self, notices: trio.MemoryReceiveChannel[Notice], kind: NoticeKind
    ) -> Notice:
        with trio.fail_after(self.notice_timeout):
            return await next_notice(notices, kind)

    # -- producing and inspecting --------------------------------------------------------

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

    async def test_list_jobs_filters_and_pages(self, backend: Backend, clock: object) -> None:
        ids = await backend.enqueue_many(Q, list(range(5)))
        others = await backend.enqueue_many("other", ["x", "y"])
        scheduled = await backend.enqueue(Q, "later", delay=self.long_timeout)
        running = await self._claim_one(backend)
        done = await self._claim_one(backend)
        await backend.ack([Ack(done.job.id, done.job.claim_seq)])

        async def listed(**filters: Any) -> list[int]:
            return self._ids(await backend.list_jobs(**filters))

        assert await listed() == [*ids, *others, scheduled]
        assert await listed(queue=Q) == [*ids, scheduled]
        assert await listed(status="running") == [running.job.id]
        assert await listed(status="succeeded") == [done.job.id]
        assert await listed(status="scheduled") == [scheduled]
        assert await listed(queue=Q, status="ready") == ids[2:]
        assert await listed(status="failed") == []
        assert await listed(limit=2, offset=1) == ids[1:3]
        assert await listed(offset=100) == []

    @pytest.mark.parametrize(
        "filters",
        [
            pytest.param({"status": "bogus"}, id="status"),
            pytest.param({"limit": 0}, id="limit-0"),
            pytest.param({"limit": 10_001}, id="limit-10001"),
            pytest.param({"offset": -1}, id="offset"),
        ],
    )
    async def test_list_jobs_rejects_bad_arguments(
        self, backend: Backend, clock: object, filters: dict[str, Any]
    ) -> None:
        [name] = filters
        with pytest.raises(ValueError, match=name):
            await backend.list_jobs(**filters)

    # -- claiming ------------------------------------------------------------------------

    async def test_claim_order_is_priority_desc_then_id(
        self, backend: Backend, clock: object
    ) -> None:
        ids = [await backend.enqueue(Q, n, priority=p) for n, p in enumerate([0, 5, 0, 5, -1])]
        claimed = await self._claim(backend, limit=10)
        assert self._ids(claimed) == [ids[1], ids[3], ids[0], ids[2], ids[4]]

    async def test_claim_respects_limit_and_queue(self, backend: Backend, clock: object) -> None:
        ids = await backend.enqueue_many(Q, list(range(5)))
        await backend.enqueue("other", "not mine")
        assert self._ids(await self._claim(backend, limit=2)) == ids[:2]
        assert self._ids(await self._claim(backend, limit=10)) == ids[2:]
        assert await self._claim(backend, limit=10) == []

    async def test_claim_bumps_attempt_and_claim_seq_and_sets_the_lease(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, {"n": 1}, max_attempts=3)
        before = backend.wall_time()
        claimed = await self._claim_one(backend, visibility_timeout=30)
        after = backend.wall_time()
        job = claimed.job
        assert (job.id, job.queue, job.payload) == (job_id, Q, {"n": 1})
        assert (job.attempt, job.max_attempts) == (1, 3)
        assert job.claim_seq >= 1
        # One second of tolerance for a database clock read over the network.
        assert before + 30 - 1 <= claimed.lease_until <= after + 30 + 1
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts) == ("running", 1)

    async def test_delayed_job_is_scheduled_until_due(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "later", delay=self.short_timeout)
        assert (await backend.get_job(job_id)).status == "scheduled"
        assert await self._claim(backend) == []
        await self._wait_out()
        assert (await backend.get_job(job_id)).status == "ready"
        assert self._ids(await self._claim(backend)) == [job_id]

    async def test_lease_expired_on_final_attempt_is_failed_at_next_claim(
        self, backend: Backend, clock: object
    ) -> None:
        last = await backend.enqueue(Q, "last", max_attempts=1)
        again = await backend.enqueue(Q, "again", max_attempts=2)
        await self._claim(backend, visibility_timeout=self.short_timeout)
        await self._wait_out()
        reclaimed = await self._claim(backend)
        assert [(c.job.id, c.job.attempt) for c in reclaimed] == [(again, 2)]
        info = await backend.get_job(last)
        assert (info.status, info.attempts) == ("failed", 1)
        assert info.last_error is not None
        assert "final attempt" in info.last_error
        assert info.finished_at is not None

    # -- renewing ------------------------------------------------------------------------

    async def test_renew_extends_every_item_in_one_statement(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue_many(Q, [1, 2, 3])
        claimed = await self._claim(backend)
        renewals = backend.statistics()["calls"]["renew"]
        verdicts = await self._renew(backend, *map(self._item, claimed))
        assert verdicts == dict.fromkeys(self._ids(claimed), Verdict.EXTENDED)
        assert backend.statistics()["calls"]["renew"] == renewals + 1
        assert {i.status for i in await backend.list_jobs()} == {"running"}

    async def test_after_reclaim_the_old_attempt_is_fenced_out(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue(Q, "x")
        old = await self._claim_one(backend, visibility_timeout=self.short_timeout)
        await self._wait_out()
        new = await self._claim_one(backend)
        assert new.job.id == old.job.id
        assert new.job.claim_seq > old.job.claim_seq
        assert new.job.attempt == 2
        assert await self._renew(backend, self._item(old)) == {old.job.id: Verdict.RECLAIMED}
        # I9, the classic case: the slow first worker reports after its job was re-claimed.
        assert await backend.ack([Ack(old.job.id, old.job.claim_seq)]) == [False]
        assert await self._renew(backend, self._item(new)) == {new.job.id: Verdict.EXTENDED}

    async def test_renew_after_ack_or_of_unknown_job_says_gone(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert await backend.ack([Ack(claimed.job.id, claimed.job.claim_seq)]) == [True]
        unknown = RenewItem(10**9, 1, None)
        verdicts = await self._renew(backend, self._item(claimed), unknown)
        assert verdicts == {claimed.job.id: Verdict.GONE, unknown.job_id: Verdict.GONE}

    async def test_renew_after_cancel_says_cancel_requested(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert await backend.cancel(claimed.job.id) is True
        info = await backend.get_job(claimed.job.id)
        assert (info.status, info.last_error) == ("running", None)  # cancel is cooperative
        verdicts = await self._renew(backend, self._item(claimed))
        assert verdicts == {claimed.job.id: Verdict.CANCEL_REQUESTED}

    async def test_renew_stores_progress(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)

        async def progress_after(value: float | None) -> float | None:
            await self._renew(backend, self._item(claimed, value))
            return (await backend.get_job(job_id)).progress

        assert (await backend.get_job(job_id)).progress is None
        assert await progress_after(0.25) == 0.25
        assert await progress_after(None) == 0.25  # no new value: the old one stays
        assert await progress_after(0.75) == 0.75
        await backend.ack([Ack(job_id, claimed.job.claim_seq, progress=1.0)])
        assert (await backend.get_job(job_id)).progress == 1.0

    async def test_a_new_attempt_starts_without_the_old_attempts_progress(
        self, backend: Backend, clock: object
    ) -> None:
        """Progress belongs to an attempt: a retried, released or reclaimed job shows none
        until its new attempt reports some."""
        job_id = await backend.enqueue(Q, "x", max_attempts=5)
        first = await self._claim_one(backend)
        await self._renew(backend, self._item(first, 0.5))
        assert await backend.fail([Failure(job_id, first.job.claim_seq, "boom", 0.0, 0.75)]) == [
            Recorded.RETRY
        ]
        assert (await backend.get_job(job_id)).progress == 0.75  # the failed attempt's
        second = await self._claim_one(backend)
        assert (await backend.get_job(job_id)).progress is None
        await self._renew(backend, self._item(second, None))
        assert (await backend.get_job(job_id)).progress is None
        await backend.release([Release(job_id, second.job.claim_seq, progress=0.25)])
        third = await self._claim_one(backend, visibility_timeout=self.short_timeout)
        assert (await backend.get_job(job_id)).progress is None
        await backend.renew([self._item(third, 0.5)], visibility_timeout=self.short_timeout)
        await self._wait_out()  # the lease runs out: the next claim takes the job again
        await self._claim_one(backend)
        assert (await backend.get_job(job_id)).progress is None

    # -- outcomes ------------------------------------------------------------------------

    async def test_ack_succeeds_the_job(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        assert await backend.ack([Ack(job_id, claimed.job.claim_seq)]) == [True]
        info = await backend.get_job(job_id)
        assert info.status == "succeeded"
        assert info.finished_at is not None
        assert info.finished_at >= info.created_at
        assert await backend.ack([Ack(job_id, claimed.job.claim_seq)]) == [False]
        assert await self._claim(backend) == []

    async def test_stale_claim_seq_writes_change_nothing(
        self, backend: Backend, clock: object
    ) -> None:
        """I9: a write naming a superseded claim_seq is a no-op, whatever it is."""
        job_id = await backend.enqueue(Q, "x")
        old = await self._claim_one(backend)
        assert await backend.release([Release(job_id, old.job.claim_seq)]) == [True]
        new = await self._claim_one(backend)
        seq = old.job.claim_seq
        assert await backend.ack([Ack(job_id, seq, progress=0.5)]) == [False]
        assert await backend.fail([Failure(job_id, seq, "stale", None)]) == [None]
        assert await backend.fail([Failure(job_id, seq, "stale", 0.0)]) == [None]
        assert await backend.release([Release(job_id, seq)]) == [False]
        stale_renewal = RenewItem(job_id, seq, 0.5)
        assert await self._renew(backend, stale_renewal) == {job_id: Verdict.RECLAIMED}
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts) == ("running", 1)
        assert (info.progress, info.last_error) == (None, None)
        assert await backend.ack([Ack(job_id, new.job.claim_seq)]) == [True]

    async def test_fail_with_retry_schedules_the_job_again(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=3)
        first = await self._claim_one(backend)
        failure = Failure(job_id, first.job.claim_seq, "boom", retry_delay=self.short_timeout)
        assert await backend.fail([failure]) == [Recorded.RETRY]
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.last_error) == ("scheduled", 1, "boom")
        assert info.finished_at is None
        assert await self._claim(backend) == []
        await self._wait_out()
        second = await self._claim_one(backend)
        assert second.job.attempt == 2
        assert second.job.claim_seq > first.job.claim_seq

    async def test_final_failure_fails_the_job(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        failure = Failure(job_id, claimed.job.claim_seq, "it broke", retry_delay=None)
        assert await backend.fail([failure]) == [Recorded.FINAL]
        info = await backend.get_job(job_id)
        assert (info.status, info.last_error) == ("failed", "it broke")
        assert info.finished_at is not None
        assert await self._claim(backend) == []
        assert await backend.fail([failure]) == [None]

    async def test_retry_of_the_final_attempt_is_final(
        self, backend: Backend, clock: object
    ) -> None:
        """A job never runs past max_attempts, even if asked to retry."""
        job_id = await backend.enqueue(Q, "x", max_attempts=1)
        claimed = await self._claim_one(backend)
        assert await backend.fail([Failure(job_id, claimed.job.claim_seq, "boom", 0.0)]) == [
            Recorded.FINAL
        ]
        assert (await backend.get_job(job_id)).status == "failed"
        assert await self._claim(backend) == []

    async def test_release_gives_the_attempt_back(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        first = await self._claim_one(backend)
        release = Release(job_id, first.job.claim_seq, progress=0.5)
        assert await backend.release([release]) == [True]
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.progress) == ("ready", 0, 0.5)
        second = await self._claim_one(backend)
        assert second.job.attempt == 1
        assert second.job.claim_seq > first.job.claim_seq

    # -- cancelling ----------------------------------------------------------------------

    async def test_cancel_of_a_queued_job_fails_it_at_once(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        later = await backend.enqueue(Q, "y", delay=self.long_timeout)
        assert await backend.cancel(job_id) is True
        assert await backend.cancel(later) is True
        for info in await backend.list_jobs():
            assert info.status == "failed"
            assert info.last_error is not None
            assert info.last_error.startswith("cancelled")
            assert info.finished_at is not None
        assert await self._claim(backend) == []
        assert await backend.cancel(job_id) is False

    async def test_cancel_of_finished_or_unknown_job_returns_false(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        await backend.ack([Ack(job_id, claimed.job.claim_seq)])
        assert await backend.cancel(job_id) is False
        assert await backend.cancel(10**9) is False
        assert (await backend.get_job(job_id)).status == "succeeded"

    async def test_renewal_naming_a_job_twice_is_refused(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        seq = (await self._claim_one(backend)).job.claim_seq
        twice = [RenewItem(job_id, seq, 0.5), RenewItem(job_id, seq, None)]
        with pytest.raises(ValueError, match="more than once"):
            await backend.renew(twice, visibility_timeout=60)
        assert (await backend.get_job(job_id)).progress is None  # nothing renewed

    @pytest.mark.parametrize(
        "seconds",
        [0, -1, math.nan, math.inf, 1e12, 10**400],
        ids=["zero", "negative", "nan", "inf", "huge", "beyond-float"],
    )
    async def test_bad_lease_lengths_and_retry_delays_are_refused(
        self, backend: Backend, clock: object, seconds: float
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        with pytest.raises(ValueError, match="visibility_timeout must be"):
            await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=seconds)
        claimed = await self._claim_one(backend)
        renewal = [RenewItem(job_id, claimed.job.claim_seq, 0.5)]
        with pytest.raises(ValueError, match="visibility_timeout must be"):
            await backend.renew(renewal, visibility_timeout=seconds)
        if seconds != 0:  # a retry may come due at once
            with pytest.raises(ValueError, match="retry_delay must be"):
                await backend.fail([Failure(job_id, claimed.job.claim_seq, "x", seconds)])
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.progress, info.last_error) == (
            "running",
            1,
            None,
            None,
        )

    async def test_counts_per_queue_and_state(self, backend: Backend, clock: object) -> None:
        assert await backend.counts() == {}
        first = await backend.enqueue(Q, "a")
        await backend.enqueue(Q, "b")
        await backend.enqueue(Q, "c", delay=3600)
        await backend.enqueue("other", "d")
        claimed = await self._claim_one(backend)
        assert claimed.job.id == first
        await backend.ack([Ack(first, claimed.job.claim_seq)])
        await backend.claim(Q, limit=1, worker_id=WORKER, visibility_timeout=60)
        assert await backend.counts() == {
            Q: {"succeeded": 1, "running": 1, "scheduled": 1},
            "other": {"ready": 1},
        }

    async def test_retry_puts_a_failed_job_back_for_one_more_attempt(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x", max_attempts=1)
        claimed = await self._claim_one(backend)
        await backend.fail([Failure(job_id, claimed.job.claim_seq, "boom", None)])
        assert await backend.retry(job_id) is True
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts, info.max_attempts) == ("ready", 1, 2)
        assert info.last_error == "boom"
        assert info.finished_at is None
        again = await self._claim_one(backend)
        assert (again.job.id, again.job.attempt) == (job_id, 2)
        assert again.job.claim_seq > claimed.job.claim_seq

    async def test_retry_refuses_unknown_and_unfinished_jobs(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        assert await backend.retry(job_id) is False  # queued
        claimed = await self._claim_one(backend)
        assert await backend.retry(job_id) is False  # running
        await backend.ack([Ack(job_id, claimed.job.claim_seq)])
        assert await backend.retry(job_id) is False  # succeeded
        assert await backend.retry(10**9) is False
        assert (await backend.get_job(job_id)).status == "succeeded"

    async def test_cancel_of_a_running_job_notifies_its_worker(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        async with backend.listen(Q, WORKER) as notices:
            await self._claim_one(backend)
            assert await backend.cancel(job_id) is True
            notice = await self._next_notice(notices, NoticeKind.CANCEL)
        assert (notice.queue, notice.job_id) == (Q, job_id)

    async def test_cancel_requested_job_is_not_retried(
        self, backend: Backend, clock: object
    ) -> None:
        """I12: a failure after a cancel request is final, even when a retry was asked."""
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        await backend.cancel(job_id)
        assert await backend.fail([Failure(job_id, claimed.job.claim_seq, "boom", 0.0)]) == [
            Recorded.FINAL
        ]
        info = await backend.get_job(job_id)
        assert info.status == "failed"
        assert info.last_error is not None
        assert info.last_error.startswith("cancelled")
        assert await self._claim(backend) == []

    async def test_cancel_after_lease_expiry(self, backend: Backend, clock: object) -> None:
        """A cancel flag outlives its lease; a cancel after the lease expired acts at once."""
        flagged, expired = await backend.enqueue_many(Q, ["flagged", "expired"])
        await self._claim(backend, visibility_timeout=self.short_timeout)
        assert await backend.cancel(flagged) is True  # lease live: only the flag is set
        await self._wait_out()
        assert await backend.cancel(expired) is True  # lease gone: failed at once
        assert (await backend.get_job(expired)).status == "failed"
        assert await self._claim(backend) == []  # the flagged job is failed, not re-run
        for job_id in (flagged, expired):
            info = await backend.get_job(job_id)
            assert info.status == "failed"
            assert info.last_error is not None
            assert info.last_error.startswith("cancelled")

    # -- notices and statistics ----------------------------------------------------------

    async def test_enqueue_notifies_listeners_of_the_queue(
        self, backend: Backend, clock: object
    ) -> None:
        async with backend.listen(Q, WORKER) as notices:
            await backend.enqueue(Q, "x")
            notice = await self._next_notice(notices, NoticeKind.AVAILABLE)
        assert (notice.kind, notice.queue) == (NoticeKind.AVAILABLE, Q)

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
