"""Job trees (docs/protocol.rst §22): children enqueued under a parent, the reads of a tree,
and the parent's fenced wait for its children (``await_children``) with both policies."""

from __future__ import annotations

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._errors import UnknownJobError
from trioqueue._types import Ack, ChildWait, ChildWaitWrite, Claimed, DependencyInfo, Failure
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["ChildWaitConformance", "TreeConformance"]

CHILDREN = "conformance-children"


class TreeConformance(ConformanceBase):
    """Children under a parent: written with it, read back in enqueue order."""

    async def test_children_are_enqueued_under_a_running_parent(
        self, backend: Backend, clock: object
    ) -> None:
        parent = await backend.enqueue(Q, "parent")
        [claimed] = await self._claim(backend, limit=1)
        first = await backend.enqueue(CHILDREN, "a", parent_id=parent)
        more = await backend.enqueue_many(CHILDREN, ["b", "c"], parent_id=parent)
        children = [first, *more]
        info = await backend.get_job(first)
        assert (info.parent_id, info.status) == (parent, "ready")  # a child waits for nothing
        assert (await backend.get_job(parent)).parent_id is None
        tree = await backend.dependencies(parent)
        assert [c.id for c in tree.children] == children
        assert {c.status for c in tree.children} == {"ready"}
        assert (tree.parent, tree.dependencies, tree.dependents) == (None, (), ())
        assert (await backend.dependencies(first)).parent == DependencyInfo(parent, Q, "running")
        # A child's success changes nothing of its parent's (no wait for it yet).
        [child] = await self._claim(backend, limit=1, queue=CHILDREN)
        assert await backend.ack([Ack(child.job.id, child.job.claim_seq)]) == [True]
        assert (await backend.get_job(parent)).status == "running"
        assert await backend.ack([Ack(parent, claimed.job.claim_seq)]) == [True]

    async def test_a_child_may_have_dependencies_too(self, backend: Backend, clock: object) -> None:
        parent, before = await backend.enqueue_many(Q, ["parent", "before"])
        child = await backend.enqueue(CHILDREN, "c", parent_id=parent, depends_on=[before])
        info = await backend.get_job(child)
        assert (info.parent_id, info.status, info.waiting_on) == (parent, "scheduled", (before,))
        tree = await backend.dependencies(child)
        assert [d.id for d in tree.dependencies] == [before]
        assert tree.parent is not None
        assert tree.parent.id == parent
        assert (await backend.dependencies(parent)).dependents == ()  # no edge to a parent

    async def test_an_unknown_or_finished_parent_writes_nothing(
        self, backend: Backend, clock: object
    ) -> None:
        with pytest.raises(UnknownJobError) as raised:
            await backend.enqueue(CHILDREN, "x", parent_id=10**9)
        assert raised.value.job_id == 10**9
        finished = await backend.enqueue(Q, "done")
        [claimed] = await self._claim(backend, limit=1)
        await backend.ack([Ack(finished, claimed.job.claim_seq)])
        with pytest.raises(ValueError, match=f"parent {finished} has finished"):
            await backend.enqueue_many(CHILDREN, ["x", "y"], parent_id=finished)
        assert CHILDREN not in await backend.counts()

    @pytest.mark.parametrize(
        ("overrides", "error"),
        [
            pytest.param({"parent_id": "1"}, TypeError, id="str"),
            pytest.param({"parent_id": True}, TypeError, id="bool"),
            pytest.param({"parent_id": 0}, ValueError, id="zero"),
            pytest.param({"dedup_key": "k"}, ValueError, id="with-dedup-key"),
            pytest.param({"delay": 3.0}, ValueError, id="with-delay"),
            pytest.param({"depends_on": "parent"}, ValueError, id="parent-in-depends-on"),
        ],
    )
    async def test_bad_parents_write_nothing(
        self, backend: Backend, clock: object, overrides: dict[str, object], error: type
    ) -> None:
        parent = await backend.enqueue(Q, "parent")
        options: dict[str, object] = {"parent_id": parent} | overrides
        if options.get("depends_on") == "parent":
            options["depends_on"] = [parent]
        with pytest.raises(error):
            await backend.enqueue(CHILDREN, "x", **options)  # type: ignore[arg-type]
        assert CHILDREN not in await backend.counts()


def _wait(claimed: Claimed, policy: str = "fail") -> ChildWaitWrite:
    return ChildWaitWrite(claimed.job.id, claimed.job.claim_seq, on_child_failure=policy)


class ChildWaitConformance(ConformanceBase):
    """The parent's wait (I25, I26): fenced, uncharged, woken by its last child."""

    async def _parent_with_children(self, backend: Backend, n: int) -> tuple[Claimed, list[int]]:
        await backend.enqueue(Q, "parent")
        claimed = await self._claim_one(backend)
        children = await backend.enqueue_many(
            CHILDREN, [f"c{i}" for i in range(n)], parent_id=claimed.job.id
        )
        return claimed, children

    async def _finish_children(self, backend: Backend, *, fail: int | None = None) -> None:
        for child in await self._claim(backend, queue=CHILDREN):
            if child.job.id == fail:
                failure = Failure(child.job.id, child.job.claim_seq, "E: no", retry_delay=None)
                await backend.fail([failure])
            else:
                await backend.ack([Ack(child.job.id, child.job.claim_seq)])

    async def test_I25_a_parent_waits_uncharged_until_its_last_child_finished(
        self, backend: Backend, clock: object
    ) -> None:
        claimed, children = await self._parent_with_children(backend, 3)
        parent = claimed.job.id
        assert await backend.await_children([_wait(claimed)]) == [ChildWait.WAITING]
        info = await backend.get_job(parent)
        assert (info.status, info.attempts, info.waiting_on) == ("scheduled", 0, tuple(children))
        assert info.next_attempt_at is None
        [attempt] = await backend.list_attempts(parent)
        assert (attempt.outcome, attempt.attempt) == ("awaiting", 1)
        [first, *rest] = await self._claim(backend, queue=CHILDREN)
        await backend.ack([Ack(first.job.id, first.job.claim_seq)])
        assert await self._claim(backend) == []  # two children left
        await backend.ack([Ack(c.job.id, c.job.claim_seq) for c in rest])
        [continuation] = await self._claim(backend)
        assert (continuation.job.id, continuation.job.attempt) == (parent, 1)

    async def test_I25_a_parent_with_no_unfinished_child_is_claimable_at_once(
        self, backend: Backend, clock: object
    ) -> None:
        claimed, _ = await self._parent_with_children(backend, 2)
        await self._finish_children(backend)
        assert await backend.await_children([_wait(claimed)]) == [ChildWait.WAITING]
        [again] = await self._claim(backend)
        assert again.job.id == claimed.job.id
        await backend.enqueue(Q, "childless")
        [alone] = await self._claim(backend)
        assert await backend.await_children([_wait(alone, "continue")]) == [ChildWait.WAITING]
        assert [c.job.id for c in await self._claim(backend)] == [alone.job.id]

    async def test_a_stale_or_repeated_wait_changes_nothing(
        self, backend: Backend, clock: object
    ) -> None:
        claimed, _ = await self._parent_with_children(backend, 1)
        stale = ChildWaitWrite(claimed.job.id, claimed.job.claim_seq + 1)
        assert await backend.await_children([stale]) == [None]
        assert (await backend.get_job(claimed.job.id)).status == "running"
        assert await backend.await_children([_wait(claimed), _wait(claimed)]) == [
            ChildWait.WAITING,
            None,
        ]
        assert await backend.await_children([_wait(claimed)]) == [None]
        assert len(await backend.list_attempts(claimed.job.id)) == 1

    async def test_I26_under_fail_a_childs_failure_fails_the_waiting_parent(
        self, backend: Backend, clock: object
    ) -> None:
        claimed, children = await self._parent_with_children(backend, 2)
        assert await backend.await_children([_wait(claimed, "fail")]) == [ChildWait.WAITING]
        await self._finish_children(backend, fail=children[1])
        info = await backend.get_job(claimed.job.id)
        assert (info.status, info.last_error) == ("failed", f"dependency {children[1]} failed")

    async def test_I26_under_fail_a_child_failed_already_fails_the_parent_at_once(
        self, backend: Backend, clock: object
    ) -> None:
        claimed, children = await self._parent_with_children(backend, 2)
        await self._finish_children(backend, fail=children[0])
        assert await backend.await_children([_wait(claimed, "fail")]) == [ChildWait.FAILED]
        info = await backend.get_job(claimed.job.id)
        assert (info.status, info.attempts) == ("failed", 1)
        assert info.last_error == f"dependency {children[0]} failed"
        [attempt] = await backend.list_attempts(claimed.job.id)
        assert attempt.outcome == "failed"

    async def test_I26_under_continue_a_childs_failure_settles_the_parent(
        self, backend: Backend, clock: object
    ) -> None:
        claimed, children = await self._parent_with_children(backend, 3)
        await self._finish_children(backend, fail=children[0])  # failed before the wait
        more = await backend.enqueue_many(CHILDREN, ["d", "e"], parent_id=claimed.job.id)
        assert await backend.await_children([_wait(claimed, "continue")]) == [ChildWait.WAITING]
        assert (await backend.get_job(claimed.job.id)).waiting_on == tuple(more)
        await self._finish_children(backend, fail=more[0])
        [continuation] = await self._claim(backend)
        assert continuation.job.id == claimed.job.id

    async def test_a_wait_with_a_cancel_asked_is_a_cancellation(
        self, backend: Backend, clock: object
    ) -> None:
        claimed, _ = await self._parent_with_children(backend, 1)
        assert await backend.cancel(claimed.job.id)
        assert await backend.await_children([_wait(claimed)]) == [ChildWait.CANCELLED]
        info = await backend.get_job(claimed.job.id)
        assert (info.status, info.cancelled, info.last_error) == (
            "failed",
            True,
            "cancelled: cancel requested",
        )

    async def test_a_bad_policy_is_refused_and_writes_nothing(
        self, backend: Backend, clock: object
    ) -> None:
        claimed, _ = await self._parent_with_children(backend, 1)
        with pytest.raises(ValueError, match="on_child_failure must be 'fail' or 'continue'"):
            await backend.await_children([_wait(claimed, "later")])
        assert (await backend.get_job(claimed.job.id)).status == "running"

    async def test_I26_a_cancel_reaches_every_unfinished_descendant(
        self, backend: Backend, clock: object
    ) -> None:
        claimed, [leased, queued] = await self._parent_with_children(backend, 2)
        parent = claimed.job.id
        [child] = await self._claim(backend, limit=1, queue=CHILDREN)
        assert child.job.id == leased  # the lower id is claimed first
        grandchild = await backend.enqueue(CHILDREN, "g", parent_id=leased)
        done = await backend.enqueue("conformance-done", "d", parent_id=parent)
        [finished] = await self._claim(backend, queue="conformance-done")
        await backend.ack([Ack(done, finished.job.claim_seq)])
        assert await backend.await_children([_wait(claimed)]) == [ChildWait.WAITING]
        assert await backend.cancel(parent)
        info = await backend.get_job(parent)
        assert (info.status, info.cancelled) == ("failed", True)
        running = await backend.get_job(leased)
        assert (running.status, running.cancel_requested_at is not None) == ("running", True)
        for job_id in (queued, grandchild):
            info = await backend.get_job(job_id)
            assert (info.status, info.cancelled) == ("failed", True), job_id
            assert info.last_error == f"cancelled: parent {parent} cancelled"
        assert (await backend.get_job(done)).status == "succeeded"
        assert not await backend.cancel(parent)  # finished: nothing more
