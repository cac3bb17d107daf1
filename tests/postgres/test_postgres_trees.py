"""Job trees on PostgreSQL (docs/protocol.rst §22, I25): the races the conformance suite
cannot stage through the Backend protocol. A child finishing while its parent's wait
(``await_children``) is written, in either order of their row locks, never strands the
parent: either the child commits first and is not counted, or its ack waits for the wait
and then settles the parent through the edge the wait wrote."""

from __future__ import annotations

import pytest
import trio

from trioqueue._backends.postgres import PostgresBackend
from trioqueue._backends.postgres.driver import PgConnection
from trioqueue._backends.postgres.sql import QUERIES, render
from trioqueue._types import Ack, ChildWait, ChildWaitWrite, Claimed

from .._postgres_harness import jobs_table
from .test_postgres_dependencies import claim, race, waiting

pytestmark = pytest.mark.postgres

Q = "pg-trees"
CHILDREN = "pg-trees-children"


async def parent_and_child(backend: PostgresBackend) -> tuple[Claimed, Claimed]:
    await backend.enqueue(Q, "parent")
    [parent] = await claim(backend, Q)
    await backend.enqueue(CHILDREN, "child", parent_id=parent.job.id)
    [child] = await claim(backend, CHILDREN)
    return parent, child


def wait_args(parent: Claimed) -> tuple[object, ...]:
    """``await_children``'s parameters for one parent, policy ``fail``, no progress."""
    return ([str(parent.job.id)], [str(parent.job.claim_seq)], ["fail"], [None], None, None, None)


async def test_a_childs_ack_waiting_for_the_waits_lock_settles_the_parent(
    backend: PostgresBackend,
) -> None:
    """The wait locks the child first and writes the edge; the child's ack waits for that
    lock, then reads the edge (its settle function's own snapshot) and wakes the parent."""
    parent, child = await parent_and_child(backend)
    wait_sql = render(QUERIES["await_children"], backend.schema)

    async def wait(connection: PgConnection) -> None:
        [row] = await connection.fetch(wait_sql, *wait_args(parent))
        assert row["became"] == "waiting"

    async def ack() -> None:
        assert await backend.ack([Ack(child.job.id, child.job.claim_seq)]) == [True]

    await race(backend, wait, ack)
    row = await waiting(backend, parent.job.id)
    assert (row["status"], row["waiting"], row["visible"]) == ("queued", 0, True)
    assert [c.job.id for c in await claim(backend, Q)] == [parent.job.id]


async def test_a_wait_waiting_for_a_childs_ack_does_not_count_it(
    backend: PostgresBackend,
) -> None:
    """The ack locks the child first; the wait waits for that lock, then reads the child's
    new version (succeeded): nothing to wait for, the parent is claimable at once."""
    parent, child = await parent_and_child(backend)
    ack_sql = render(QUERIES["ack"], backend.schema)
    answers: list[list[ChildWait | None]] = []

    async def ack(connection: PgConnection) -> None:
        args = ([str(child.job.id)], [str(child.job.claim_seq)], None, None, None, None, None)
        assert len(await connection.fetch(ack_sql, *args)) == 1

    async def wait() -> None:
        write = ChildWaitWrite(parent.job.id, parent.job.claim_seq)
        answers.append(await backend.await_children([write]))

    await race(backend, ack, wait)
    assert answers == [[ChildWait.WAITING]]
    row = await waiting(backend, parent.job.id)
    assert (row["status"], row["waiting"], row["visible"]) == ("queued", 0, True)


async def test_waits_and_child_acks_at_the_same_moment_never_strand_a_parent(
    backend: PostgresBackend,
) -> None:
    """Many rounds of a parent's wait and its child's ack started together, in whatever
    order the server runs them: every parent ends claimable (I25)."""
    rounds = 40
    pairs = [await parent_and_child(backend) for _ in range(rounds)]

    async def one_round(parent: Claimed, child: Claimed) -> None:
        async def ack() -> None:
            assert await backend.ack([Ack(child.job.id, child.job.claim_seq)]) == [True]

        async def wait() -> None:
            write = ChildWaitWrite(parent.job.id, parent.job.claim_seq)
            assert await backend.await_children([write]) == [ChildWait.WAITING]

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ack)
            nursery.start_soon(wait)

    async with trio.open_nursery() as nursery:
        for parent, child in pairs:
            nursery.start_soon(one_round, parent, child)
    async with backend.acquire() as connection:
        stranded = await connection.fetchval(
            f"SELECT count(*) FROM {jobs_table(backend)} "
            "WHERE queue = $1 AND (waiting > 0 OR not_visible_until > now())",
            Q,
        )
    assert stranded == 0
    assert len(await claim(backend, Q, limit=rounds)) == rounds
