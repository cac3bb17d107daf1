"""Job trees, as far as this build goes: children enqueued under a parent, and the reads of
a tree (docs/protocol.rst §22). The parent's wait for its children is not built yet."""

from __future__ import annotations

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._errors import UnknownJobError
from trioqueue._types import Ack, DependencyInfo
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["TreeConformance"]

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
