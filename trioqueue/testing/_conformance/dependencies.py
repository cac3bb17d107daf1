"""Dependencies: a job enqueued with ``depends_on`` waits until every dependency has
succeeded, and fails by its policy when one fails for good (docs/protocol.rst §21,
invariants I23 and I24)."""

from __future__ import annotations

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._errors import UnknownDependencyError, UnknownJobError
from trioqueue._types import Ack, DependencyInfo, Failure, NoticeKind, Recorded
from trioqueue.testing._conformance._base import WORKER, ConformanceBase, Q

__all__ = ["DependencyConformance"]

OTHER = "conformance-after"

#: depends_on arguments no backend may accept: ``(overrides, exception type)``.
BAD_DEPENDENCIES = [
    pytest.param({"depends_on": "12"}, TypeError, id="str"),
    pytest.param({"depends_on": [1.0]}, TypeError, id="float-id"),
    pytest.param({"depends_on": [True]}, TypeError, id="bool-id"),
    pytest.param({"depends_on": [0]}, ValueError, id="zero-id"),
    pytest.param({"depends_on": [2**63]}, ValueError, id="past-bigint"),
    pytest.param({"on_dependency_failure": "ignore"}, ValueError, id="bad-policy"),
    pytest.param({"dedup_key": "k"}, ValueError, id="with-dedup-key"),
    pytest.param({"delay": 5.0}, ValueError, id="with-delay"),
]


class DependencyConformance(ConformanceBase):
    """Dependencies: waiting (I23), and failures reaching every dependent (I24)."""

    async def _succeed_next(self, backend: Backend, queue: str = Q) -> int:
        [claimed] = await self._claim(backend, limit=1, queue=queue)
        assert await backend.ack([Ack(claimed.job.id, claimed.job.claim_seq)]) == [True]
        return claimed.job.id

    async def _fail_next_for_good(self, backend: Backend) -> int:
        [claimed] = await self._claim(backend, limit=1)
        failure = Failure(claimed.job.id, claimed.job.claim_seq, "boom", None)
        assert await backend.fail([failure]) == [Recorded.FINAL]
        return claimed.job.id

    async def test_a_dependent_waits_until_its_dependency_succeeded(
        self, backend: Backend, clock: object
    ) -> None:
        first = await backend.enqueue(Q, "first")
        second = await backend.enqueue(OTHER, "second", depends_on=[first])
        info = await backend.get_job(second)
        assert (info.status, info.waiting_on, info.next_attempt_at) == ("scheduled", (first,), None)
        assert await self._claim(backend, queue=OTHER) == []
        async with backend.listen(OTHER, WORKER) as notices:
            assert await self._succeed_next(backend) == first
            # The ack that recorded the success woke the dependent's queue (its notice).
            notice = await self._next_notice(notices, NoticeKind.AVAILABLE)
            assert notice.queue == OTHER
        info = await backend.get_job(second)
        assert (info.status, info.waiting_on) == ("ready", ())
        assert await self._succeed_next(backend, OTHER) == second

    async def test_a_fan_in_waits_for_every_dependency(
        self, backend: Backend, clock: object
    ) -> None:
        ids = await backend.enqueue_many(Q, ["a", "b", "c"])
        joined = await backend.enqueue(OTHER, "join", depends_on=[ids[2], ids[0], ids[1], ids[0]])
        assert (await backend.get_job(joined)).waiting_on == tuple(ids)
        await self._succeed_next(backend)
        await self._succeed_next(backend)
        assert (await backend.get_job(joined)).waiting_on == (ids[2],)
        assert await self._claim(backend, queue=OTHER) == []
        await self._succeed_next(backend)
        assert await self._succeed_next(backend, OTHER) == joined

    async def test_enqueue_many_with_dependencies_and_a_met_dependency(
        self, backend: Backend, clock: object
    ) -> None:
        done = await backend.enqueue(Q, "done")
        await self._succeed_next(backend)
        # A dependency that succeeded already counts as met: claimable at once.
        ids = await backend.enqueue_many(OTHER, ["x", "y"], depends_on=[done])
        assert [(await backend.get_job(i)).status for i in ids] == ["ready", "ready"]
        assert sorted(self._ids(await self._claim(backend, queue=OTHER))) == ids

    async def test_unknown_dependency_writes_nothing(self, backend: Backend, clock: object) -> None:
        known = await backend.enqueue(Q, "known")
        with pytest.raises(UnknownDependencyError) as raised:
            await backend.enqueue(OTHER, "x", depends_on=[known, 10**9, 10**9 + 1])
        assert raised.value.job_ids == (10**9, 10**9 + 1)
        assert isinstance(raised.value, LookupError)
        assert OTHER not in await backend.counts()
        assert (await backend.dependencies(known)).dependents == ()

    @pytest.mark.parametrize(("overrides", "error"), BAD_DEPENDENCIES)
    async def test_bad_dependencies_write_nothing(
        self, backend: Backend, clock: object, overrides: dict[str, object], error: type
    ) -> None:
        known = await backend.enqueue(Q, "known")
        options: dict[str, object] = {"depends_on": [known]} | overrides
        with pytest.raises(error):
            await backend.enqueue(OTHER, "x", **options)  # type: ignore[arg-type]
        assert OTHER not in await backend.counts()

    async def test_every_problem_in_one_error(self, backend: Backend, clock: object) -> None:
        known = await backend.enqueue(Q, "known")
        with pytest.raises(ValueError, match="on_dependency_failure") as raised:
            await backend.enqueue(
                OTHER,
                "x",
                depends_on=[known],
                on_dependency_failure="x",  # type: ignore[arg-type]
                dedup_key="k",
            )
        assert "dedup_key" in str(raised.value)

    async def test_a_final_failure_fails_every_dependent_by_policy(
        self, backend: Backend, clock: object
    ) -> None:
        first = await backend.enqueue(Q, "first", max_attempts=1)
        failing = await backend.enqueue(OTHER, "b", depends_on=[first])
        cancelled = await backend.enqueue(
            OTHER, "c", depends_on=[failing], on_dependency_failure="cancel"
        )
        deeper = await backend.enqueue(OTHER, "d", depends_on=[cancelled, failing])
        assert await self._fail_next_for_good(backend) == first
        got = {i: await backend.get_job(i) for i in (failing, cancelled, deeper)}
        assert got[failing].status == "failed"
        assert not got[failing].cancelled
        assert got[failing].last_error == f"dependency {first} failed"
        assert got[cancelled].cancelled
        assert got[cancelled].last_error == f"cancelled: dependency {failing} failed"
        # Reached through the nearest dependency, the lowest id among the nearest.
        assert got[deeper].last_error == f"dependency {failing} failed"
        assert all(info.attempts == 0 and info.waiting_on == () for info in got.values())
        assert await self._claim(backend, queue=OTHER) == []

    async def test_a_cancel_or_a_delete_of_a_dependency_fails_its_dependents(
        self, backend: Backend, clock: object
    ) -> None:
        cancelled, deleted = await backend.enqueue_many(Q, ["c", "d"])
        after_cancel = await backend.enqueue(OTHER, "x", depends_on=[cancelled])
        after_delete = await backend.enqueue(
            OTHER, "y", depends_on=[deleted], on_dependency_failure="cancel"
        )
        assert await backend.cancel(cancelled)
        assert await backend.delete_job(deleted)
        info = await backend.get_job(after_cancel)
        assert (info.status, info.last_error) == ("failed", f"dependency {cancelled} failed")
        info = await backend.get_job(after_delete)
        assert (info.status, info.cancelled) == ("failed", True)
        assert info.last_error == f"cancelled: dependency {deleted} was deleted"

    async def test_a_dependency_failed_already_fails_the_new_job_at_once(
        self, backend: Backend, clock: object
    ) -> None:
        first = await backend.enqueue(Q, "first", max_attempts=1)
        await self._fail_next_for_good(backend)
        failed = await backend.enqueue(OTHER, "x", depends_on=[first])
        cancelled = await backend.enqueue(
            OTHER, "y", depends_on=[first], on_dependency_failure="cancel"
        )
        info = await backend.get_job(failed)
        assert (info.status, info.cancelled, info.attempts) == ("failed", False, 0)
        assert info.last_error == f"dependency {first} failed"
        info = await backend.get_job(cancelled)
        assert (info.status, info.cancelled) == ("failed", True)
        assert [d.id for d in (await backend.dependencies(first)).dependents] == [failed, cancelled]

    async def test_retry_of_a_dependent_rechecks_its_dependencies(
        self, backend: Backend, clock: object
    ) -> None:
        first = await backend.enqueue(Q, "first", max_attempts=1)
        dependent = await backend.enqueue(OTHER, "x", depends_on=[first])
        await self._fail_next_for_good(backend)
        assert not await backend.retry(dependent)  # refused while its dependency is failed
        assert (await backend.get_job(dependent)).status == "failed"
        assert await backend.retry(first)
        assert await backend.retry(dependent)  # its dependency waits: so does it
        info = await backend.get_job(dependent)
        assert (info.status, info.waiting_on) == ("scheduled", (first,))
        assert await self._claim(backend, queue=OTHER) == []
        await self._succeed_next(backend)
        assert await self._succeed_next(backend, OTHER) == dependent

    async def test_dependencies_read_both_directions(self, backend: Backend, clock: object) -> None:
        first, second = await backend.enqueue_many(Q, ["a", "b"])
        middle = await backend.enqueue(OTHER, "m", depends_on=[second, first])
        last = await backend.enqueue(OTHER, "z", depends_on=[middle])
        await self._succeed_next(backend)
        read = await backend.dependencies(middle)
        assert read.job_id == middle
        assert read.dependencies == (
            DependencyInfo(first, Q, "succeeded"),
            DependencyInfo(second, Q, "ready"),
        )
        assert read.dependents == (DependencyInfo(last, OTHER, "scheduled"),)
        plain = await backend.dependencies(await backend.enqueue(Q, "plain"))
        assert (plain.dependencies, plain.dependents) == ((), ())
        with pytest.raises(UnknownJobError):
            await backend.dependencies(10**9)

    async def test_a_waiting_dependent_in_a_list_and_once_cancelled(
        self, backend: Backend, clock: object
    ) -> None:
        """A list reads a waiting job as scheduled with no next attempt (PostgreSQL stores
        'infinity'); cancelled, it waits for nothing any more."""
        first = await backend.enqueue(Q, "first")
        dependent = await backend.enqueue(OTHER, "x", depends_on=[first])
        [listed] = await backend.list_jobs(queue=OTHER)
        assert (listed.status, listed.next_attempt_at) == ("scheduled", None)
        assert await backend.cancel(dependent)
        info = await backend.get_job(dependent)
        assert (info.status, info.cancelled, info.waiting_on) == ("failed", True, ())
        assert info.last_error == "cancelled before it ran"

    async def test_queue_stats_count_a_queue_whose_only_jobs_wait(
        self, backend: Backend, clock: object
    ) -> None:
        """The dashboard's counts: a queue holding only waiting dependents (PostgreSQL
        stores 'infinity', which no age can be taken from) counts them as scheduled."""
        first = await backend.enqueue(Q, "first")
        await backend.enqueue_many(OTHER, ["x", "y"], depends_on=[first])
        stats = await backend.queue_stats()
        assert stats[OTHER].counts == {"scheduled": 2}
        assert stats[OTHER].oldest_ready_age is None
        assert stats[Q].counts == {"ready": 1}

    async def test_an_ordinary_job_is_unchanged(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "plain", depends_on=[])
        info = await backend.get_job(job_id)
        assert (info.status, info.waiting_on) == ("ready", ())
        assert await self._succeed_next(backend) == job_id
