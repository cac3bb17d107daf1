"""Flow control: pausing a queue, its limits (running jobs, claims per second), job groups.

Every backend must agree on these because a worker pool only asks ``claim`` and trusts
its answer: a paused queue, a limit or a group that one backend enforces and another does
not would make the same program behave differently per backend.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio

from trioqueue._backends.interface import Backend
from trioqueue._backends.validation import MAX_DEDUP_KEY_BYTES
from trioqueue._types import Ack, Claimed, Claims, Failure, NoticeKind, Recorded
from trioqueue.testing._conformance._base import WORKER, ConformanceBase, Q

__all__ = ["FlowConformance"]

#: Limits no backend may accept: ``(overrides, exception type, the argument named)``.
BAD_LIMITS = [
    pytest.param({"max_running": 0}, ValueError, "max_running", id="zero-running"),
    pytest.param({"max_running": -1}, ValueError, "max_running", id="negative-running"),
    pytest.param({"max_running": 1.5}, TypeError, "max_running", id="float-running"),
    pytest.param({"max_running": "3"}, TypeError, "max_running", id="str-running"),
    pytest.param({"max_running": True}, TypeError, "max_running", id="bool-running"),
    pytest.param({"max_per_second": 0}, ValueError, "max_per_second", id="zero-rate"),
    pytest.param({"max_per_second": math.nan}, ValueError, "max_per_second", id="nan-rate"),
    pytest.param({"max_per_second": math.inf}, ValueError, "max_per_second", id="inf-rate"),
    pytest.param({"max_per_second": -1}, ValueError, "max_per_second", id="negative-rate"),
    pytest.param({"max_per_second": "x"}, TypeError, "max_per_second", id="str-rate"),
    pytest.param(
        {"max_running": 0, "max_per_second": "x"},
        ValueError,
        r"(?s)max_running.*max_per_second",
        id="both-wrong",
    ),
]

#: Group keys no backend may accept (the same rules as a dedup key: they share an index).
BAD_GROUPS = [
    pytest.param("", ValueError, id="empty"),
    pytest.param(5, TypeError, id="int"),
    pytest.param(b"g", TypeError, id="bytes"),
    pytest.param("a\x00b", ValueError, id="nul"),
    pytest.param("g" * (MAX_DEDUP_KEY_BYTES + 1), ValueError, id="too-long"),
]


class FlowConformance(ConformanceBase):
    """Flow control: pause and resume, ``max_running``, ``max_per_second``, groups."""

    async def _ack(self, backend: Backend, *claimed: Claimed) -> None:
        acks = [Ack(c.job.id, c.job.claim_seq) for c in claimed]
        assert await backend.ack(acks) == [True] * len(acks)

    # -- pause and resume ----------------------------------------------------------------

    async def test_a_paused_queue_gives_nothing_but_its_running_jobs_finish(
        self, backend: Backend, clock: object
    ) -> None:
        first, _, _ = await backend.enqueue_many(Q, [1, 2, 3])
        running = await self._claim_one(backend)
        await backend.pause_queue(Q)
        assert await self._claim(backend) == []
        stats = (await backend.queue_stats())[Q]
        assert stats.paused is True
        assert stats.counts.get("ready") == 2
        # Pausing stops claims only: the job already running is acked as usual.
        await self._ack(backend, running)
        assert (await backend.get_job(first)).status == "succeeded"
        assert await self._claim(backend) == []

    async def test_a_paused_queue_dead_letters_nothing(
        self, backend: Backend, clock: object
    ) -> None:
        """The claim of a paused queue is not run at all, so its dead-letter step is not
        either: a lease that ran out on the final attempt waits for the resume."""
        job_id = await backend.enqueue(Q, "x", max_attempts=1)
        await self._claim(backend, visibility_timeout=self.short_timeout)
        await backend.pause_queue(Q)
        await self._wait_out()
        assert await self._claim(backend) == []
        assert (await backend.get_job(job_id)).status != "failed"
        await backend.resume_queue(Q)
        assert await self._claim(backend) == []  # now it is dead-lettered
        assert (await backend.get_job(job_id)).status == "failed"

    async def test_resume_makes_jobs_claimable_and_wakes_listeners(
        self, backend: Backend, clock: object
    ) -> None:
        ids = await backend.enqueue_many(Q, [1, 2])
        await backend.pause_queue(Q)
        assert await self._claim(backend) == []
        async with backend.listen(Q, WORKER) as notices:
            await backend.resume_queue(Q)
            notice = await self._next_notice(notices, NoticeKind.AVAILABLE)
        assert notice.queue == Q
        assert (await backend.queue_stats())[Q].paused is False
        assert self._ids(await self._claim(backend)) == ids

    async def test_pausing_a_queue_without_jobs_shows_in_its_stats(
        self, backend: Backend, clock: object
    ) -> None:
        """queue_stats leaves out queues without jobs, but not one under flow control: an
        operator who paused it must see that it is paused before jobs arrive."""
        assert Q not in await backend.queue_stats()
        await backend.pause_queue(Q)
        stats = (await backend.queue_stats())[Q]
        assert stats.paused is True
        assert sum(stats.counts.values()) == 0
        assert stats.oldest_ready_age is None
        await backend.enqueue(Q, "x")
        assert await self._claim(backend) == []
        await backend.resume_queue(Q)
        assert len(await self._claim(backend)) == 1

    async def test_pause_and_resume_are_per_queue_and_repeatable(
        self, backend: Backend, clock: object
    ) -> None:
        mine = await backend.enqueue(Q, "x")
        other = await backend.enqueue("other", "y")
        await backend.pause_queue(Q)
        await backend.pause_queue(Q)
        assert self._ids(await self._claim(backend, queue="other")) == [other]
        assert await self._claim(backend) == []
        await backend.resume_queue(Q)
        await backend.resume_queue(Q)
        await backend.resume_queue("never-paused")
        assert self._ids(await self._claim(backend)) == [mine]

    # -- limits --------------------------------------------------------------------------

    async def test_limits_show_in_stats_and_none_lifts_them(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_queue_limits(Q, max_running=4, max_per_second=2.5)
        stats = (await backend.queue_stats())[Q]
        assert (stats.paused, stats.max_running, stats.max_per_second) == (False, 4, 2.5)
        # Each call sets both: one left out is lifted.
        await backend.set_queue_limits(Q, max_running=7)
        stats = (await backend.queue_stats())[Q]
        assert (stats.max_running, stats.max_per_second) == (7, None)
        await backend.set_queue_limits(Q, max_running=None, max_per_second=None)
        stats = (await backend.queue_stats())[Q]
        assert (stats.max_running, stats.max_per_second) == (None, None)
        await backend.enqueue_many(Q, list(range(5)))
        claimed = await self._claim(backend, limit=10)
        assert len(claimed) == 5
        assert getattr(claimed, "retry_after", None) is None

    async def test_limits_and_pause_are_independent(self, backend: Backend, clock: object) -> None:
        await backend.pause_queue(Q)
        await backend.set_queue_limits(Q, max_running=3)
        stats = (await backend.queue_stats())[Q]
        assert (stats.paused, stats.max_running) == (True, 3)
        await backend.resume_queue(Q)
        stats = (await backend.queue_stats())[Q]
        assert (stats.paused, stats.max_running) == (False, 3)

    async def test_max_running_caps_the_jobs_under_a_lease(
        self, backend: Backend, clock: object
    ) -> None:
        ids = await backend.enqueue_many(Q, list(range(5)))
        await backend.set_queue_limits(Q, max_running=2)
        first = await self._claim(backend, limit=5)
        assert isinstance(first, Claims)
        assert self._ids(first) == ids[:2]
        assert first.retry_after is not None
        assert first.retry_after > 0
        again = await self._claim(backend, limit=5)
        assert again == []
        await self._ack(backend, first[0])
        second = await self._claim(backend, limit=5)
        assert self._ids(second) == ids[2:3]
        assert await self._claim(backend, limit=5) == []

    async def test_max_running_without_anything_held_back_says_no_retry(
        self, backend: Backend, clock: object
    ) -> None:
        """retry_after is only for rows the limit held back: a claim that got all the
        claimable rows has nothing to come back for."""
        await backend.enqueue_many(Q, [1, 2])
        await backend.set_queue_limits(Q, max_running=5)
        claimed = await self._claim(backend, limit=10)
        assert len(claimed) == 2
        assert getattr(claimed, "retry_after", None) is None

    async def test_an_expired_lease_stops_counting_against_max_running(
        self, backend: Backend, clock: object
    ) -> None:
        ids = await backend.enqueue_many(Q, list(range(5)))
        await backend.set_queue_limits(Q, max_running=2)
        lost = await self._claim(backend, limit=5, visibility_timeout=self.short_timeout)
        assert self._ids(lost) == ids[:2]
        await self._wait_out()
        # Both leases ran out: the queue runs nothing now, so two may be taken again (the
        # expired ones first, as claim order puts them).
        retaken = await self._claim(backend, limit=5)
        assert self._ids(retaken) == ids[:2]
        assert [c.job.attempt for c in retaken] == [2, 2]

    async def test_max_per_second_spends_a_bucket_of_one_second(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.enqueue_many(Q, list(range(10)))
        await backend.set_queue_limits(Q, max_per_second=3)
        first = await self._claim(backend, limit=10)
        assert isinstance(first, Claims)
        assert len(first) == 3  # the full bucket: one second's worth, no more
        assert first.retry_after is not None
        second = await self._claim(backend, limit=10)
        assert second == []
        assert isinstance(second, Claims)
        assert second.retry_after is not None
        assert second.retry_after > 0

    async def test_max_per_second_refills_over_time(self, backend: Backend, clock: object) -> None:
        await backend.enqueue_many(Q, list(range(10)))
        await backend.set_queue_limits(Q, max_per_second=10)
        first = await self._claim(backend, limit=20)
        assert len(first) == 10  # the full bucket: one second's worth
        await backend.enqueue_many(Q, list(range(10)))
        await self._wait_out()  # at least 2.5 tokens come back
        assert len(await self._claim(backend, limit=20)) >= 2

    async def test_a_rate_below_one_still_lets_one_claim_through(
        self, backend: Backend, clock: object
    ) -> None:
        """The bucket holds max(1, rate) tokens, so a slow rate is not a stopped queue."""
        await backend.enqueue_many(Q, [1, 2])
        await backend.set_queue_limits(Q, max_per_second=0.01)
        assert len(await self._claim(backend)) == 1
        held = await self._claim(backend)
        assert held == []
        assert isinstance(held, Claims)
        assert held.retry_after is not None
        assert held.retry_after > 1

    @pytest.mark.parametrize(("overrides", "exc_type", "names"), BAD_LIMITS)
    async def test_bad_limits_are_refused_and_nothing_is_written(
        self,
        backend: Backend,
        clock: object,
        overrides: dict[str, Any],
        exc_type: type[Exception],
        names: str,
    ) -> None:
        with pytest.raises(exc_type, match=names):
            await backend.set_queue_limits(Q, **overrides)
        assert Q not in await backend.queue_stats()
        await backend.set_queue_limits(Q, max_running=2, max_per_second=5)
        with pytest.raises(exc_type, match=names):
            await backend.set_queue_limits(Q, **overrides)
        stats = (await backend.queue_stats())[Q]
        assert (stats.max_running, stats.max_per_second) == (2, 5)

    # -- groups --------------------------------------------------------------------------

    async def test_a_group_runs_one_job_at_a_time_in_claim_order(
        self, backend: Backend, clock: object
    ) -> None:
        a1 = await backend.enqueue(Q, "a1", group="A")
        b1, b2 = await backend.enqueue_many(Q, ["b1", "b2"], group="B")
        a2 = await backend.enqueue(Q, "a2", group="A")
        loose = await backend.enqueue(Q, "loose")
        a_top = await backend.enqueue(Q, "a-top", group="A", priority=5)
        first = await self._claim(backend, limit=10)
        assert sorted(self._ids(first)) == sorted([a_top, b1, loose])
        assert self._ids(first)[0] == a_top  # priority first, across groups too
        assert await self._claim(backend, limit=10) == []
        await self._ack(backend, *first)
        second = await self._claim(backend, limit=10)
        assert self._ids(second) == [a1, b2]
        await self._ack(backend, *second)
        third = await self._claim(backend, limit=10)
        assert self._ids(third) == [a2]
        await self._ack(backend, *third)
        assert await self._claim(backend, limit=10) == []
        assert {j.status for j in await backend.list_jobs()} == {"succeeded"}

    async def test_group_is_kept_on_the_job(self, backend: Backend, clock: object) -> None:
        grouped = await backend.enqueue(Q, "x", group="tenant-7")
        many = await backend.enqueue_many(Q, ["y", "z"], group="tenant-8")
        loose = await backend.enqueue(Q, "w")
        assert (await backend.get_job(grouped)).group == "tenant-7"
        assert [(await backend.get_job(i)).group for i in many] == ["tenant-8"] * 2
        assert (await backend.get_job(loose)).group is None
        claimed = await self._claim_one(backend)
        assert claimed.job.id == grouped
        assert (await backend.get_job(grouped)).group == "tenant-7"

    async def test_groups_are_per_queue(self, backend: Backend, clock: object) -> None:
        mine = await backend.enqueue(Q, "x", group="G")
        other = await backend.enqueue("other", "y", group="G")
        assert self._ids(await self._claim(backend)) == [mine]
        assert self._ids(await self._claim(backend, queue="other")) == [other]

    async def test_a_final_failure_lets_the_groups_next_job_go(
        self, backend: Backend, clock: object
    ) -> None:
        first, second = await backend.enqueue_many(Q, ["1", "2"], group="G")
        claimed = await self._claim_one(backend)
        assert claimed.job.id == first
        assert await self._claim(backend) == []
        failure = Failure(first, claimed.job.claim_seq, "broke", retry_delay=None)
        assert await backend.fail([failure]) == [Recorded.FINAL]
        assert self._ids(await self._claim(backend)) == [second]

    async def test_a_retried_job_stays_its_groups_next_job(
        self, backend: Backend, clock: object
    ) -> None:
        """A job waiting for its retry is still the group's next job (delayed ones count):
        the group waits for it rather than running the job behind it first."""
        first, _ = await backend.enqueue_many(Q, ["1", "2"], group="G", max_attempts=3)
        claimed = await self._claim_one(backend)
        failure = Failure(first, claimed.job.claim_seq, "again", retry_delay=self.short_timeout)
        assert await backend.fail([failure]) == [Recorded.RETRY]
        assert await self._claim(backend) == []
        await self._wait_out()
        assert self._ids(await self._claim(backend)) == [first]

    async def test_a_delayed_head_holds_its_group(self, backend: Backend, clock: object) -> None:
        later = await backend.enqueue(Q, "later", group="G", priority=1, delay=self.short_timeout)
        await backend.enqueue(Q, "now", group="G")
        assert await self._claim(backend) == []
        await self._wait_out()
        assert self._ids(await self._claim(backend)) == [later]

    async def test_cancelling_the_groups_next_job_lets_the_one_after_go(
        self, backend: Backend, clock: object
    ) -> None:
        first, second, third = await backend.enqueue_many(Q, ["1", "2", "3"], group="G")
        assert await backend.cancel(first) is True  # waiting: failed at once
        assert (await backend.get_job(first)).status == "failed"
        claimed = await self._claim_one(backend)
        assert claimed.job.id == second
        assert await backend.cancel(second) is True  # running: cooperative
        assert await self._claim(backend) == []  # still the group's job in flight
        failure = Failure(second, claimed.job.claim_seq, "cancelled", retry_delay=None)
        assert await backend.fail([failure]) == [Recorded.FINAL]
        assert self._ids(await self._claim(backend)) == [third]

    async def test_an_expired_lease_is_its_groups_job_in_flight(
        self, backend: Backend, clock: object
    ) -> None:
        first, _ = await backend.enqueue_many(Q, ["1", "2"], group="G")
        lost = await self._claim_one(backend, visibility_timeout=self.short_timeout)
        await self._wait_out()
        retaken = await self._claim(backend)
        assert self._ids(retaken) == [first]
        assert retaken[0].job.attempt == 2
        assert retaken[0].job.claim_seq > lost.job.claim_seq

    async def test_a_dead_lettered_lease_lets_the_groups_next_job_go_at_once(
        self, backend: Backend, clock: object
    ) -> None:
        """The claim that dead-letters a group's expired final attempt sees the group
        running nothing any more, and takes its next job in the same call."""
        lost_id = await backend.enqueue(Q, "lost", group="G", max_attempts=1)
        after = await backend.enqueue(Q, "after", group="G")
        await self._claim(backend, visibility_timeout=self.short_timeout)
        await self._wait_out()
        assert self._ids(await self._claim(backend)) == [after]
        assert (await backend.get_job(lost_id)).status == "failed"

    async def test_a_deleted_or_retried_job_leaves_and_rejoins_its_group(
        self, backend: Backend, clock: object
    ) -> None:
        first, second, third = await backend.enqueue_many(Q, ["1", "2", "3"], group="G")
        claimed = await self._claim_one(backend)
        failure = Failure(first, claimed.job.claim_seq, "broke", retry_delay=None)
        assert await backend.fail([failure]) == [Recorded.FINAL]
        assert await backend.delete_job(second) is True  # the group's next, waiting
        # Retried, the failed job is its group's next again (the lowest id, same priority).
        assert await backend.retry(first) is True
        retried = await self._claim(backend)
        assert self._ids(retried) == [first]
        assert await self._claim(backend) == []
        await self._ack(backend, *retried)
        assert self._ids(await self._claim(backend)) == [third]

    async def test_groups_and_max_running_together(self, backend: Backend, clock: object) -> None:
        a1, _ = await backend.enqueue_many(Q, ["a1", "a2"], group="A")
        b1 = await backend.enqueue(Q, "b1", group="B")
        await backend.set_queue_limits(Q, max_running=3)
        claimed = await self._claim(backend)
        assert self._ids(claimed) == [a1, b1]
        assert getattr(claimed, "retry_after", None) is None  # the group held it, not a limit

    async def test_concurrent_claims_keep_to_the_limits_and_the_groups(
        self, backend: Backend, clock: object
    ) -> None:
        """Limits and groups hold across pools, not per call: claims racing each other
        (each on its own connection) together take no more than one claim would."""
        await backend.enqueue_many(Q, list(range(6)))
        await backend.enqueue_many("grouped", list(range(4)), group="G")
        await backend.set_queue_limits(Q, max_running=3)
        taken: dict[str, list[Claimed]] = {Q: [], "grouped": []}

        async def claim(queue: str) -> None:
            taken[queue].extend(await self._claim(backend, queue=queue, limit=2))

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(claim, Q)
                nursery.start_soon(claim, "grouped")
        assert len(taken[Q]) == 3
        assert len(taken["grouped"]) == 1

    @pytest.mark.parametrize(("group", "exc_type"), BAD_GROUPS)
    async def test_bad_groups_are_refused_and_nothing_is_written(
        self, backend: Backend, clock: object, group: Any, exc_type: type[Exception]
    ) -> None:
        with pytest.raises(exc_type, match="group"):
            await backend.enqueue(Q, "x", group=group)
        with pytest.raises(exc_type, match="group"):
            await backend.enqueue_many(Q, ["x", "y"], group=group)
        assert await backend.list_jobs() == []
