"""A replace or debounce racing a claim for the same row, on two connections (docs/protocol.rst
§18, I20): whichever locks the row first wins, and the other sees what it did.

- A claim that holds the row first: the revision waits for its lock, then reads the row's
  new version (running) and changes nothing; the caller is told ``running``.
- A revision that holds the row first (here inside a caller's transaction): a claim skips
  the row (SKIP LOCKED) until it commits, then takes it with the new payload.
- Both at once, many times over, with the real statements: a ``replaced`` answer never
  meets a claim of the old payload, a ``running`` answer always does.
"""

from __future__ import annotations

import pytest
import trio

from trioqueue._backends.postgres import PostgresBackend
from trioqueue._types import Claimed, Enqueued

from .._postgres_harness import jobs_table, wait_for_lock_wait

pytestmark = pytest.mark.postgres

Q = "dup"
K = "key"
V = 60.0


async def claim(backend: PostgresBackend) -> list[Claimed]:
    return await backend.claim(Q, limit=10, worker_id="w", visibility_timeout=V)


async def test_a_claim_that_holds_the_row_first_wins(backend: PostgresBackend) -> None:
    """The claimer's transaction locks the row and makes the write a claim makes (status
    running, a new claim_seq, a lease); the replace waits on that lock, then finds the row
    running: it answers ``running`` and writes nothing."""
    first = await backend.enqueue_deduplicated(Q, "old", dedup_key=K)
    answers: list[Enqueued] = []

    async def replace() -> None:
        answers.append(
            await backend.enqueue_deduplicated(
                Q, "new", dedup_key=K, priority=9, on_duplicate="replace"
            )
        )

    # (The transaction commits as the block ends, before the nursery waits for the replace.)
    async with (
        trio.open_nursery() as nursery,
        backend.acquire() as claimer,
        claimer.transaction(),
    ):
        await claimer.execute(
            f"UPDATE {jobs_table(backend)} SET status = 'running', claim_seq = claim_seq + 1, "
            f"attempts = attempts + 1, worker_id = 'w', "
            f"not_visible_until = now() + interval '60 seconds' WHERE id = $1",
            first.id,
        )
        nursery.start_soon(replace)
        await wait_for_lock_wait(backend, longer_than=0.2)  # the replace waits on the row
    [answer] = answers
    assert (answer.id, answer.outcome) == (first.id, "running")
    info = await backend.get_job(first.id)
    assert (info.payload, info.priority, info.status) == ("old", 0, "running")


async def test_a_revision_that_holds_the_row_first_makes_claims_skip_it(
    backend: PostgresBackend,
) -> None:
    """A replace inside a caller's transaction holds the row's lock until it commits: a
    claim meanwhile passes the row over (it neither waits nor takes the old payload), and
    the next claim takes the replaced job."""
    first = await backend.enqueue_deduplicated(Q, "old", dedup_key=K)
    async with backend.acquire() as producer, producer.transaction():
        answer = await backend.enqueue_deduplicated(
            Q, "new", dedup_key=K, on_duplicate="replace", connection=producer
        )
        assert (answer.id, answer.outcome) == (first.id, "replaced")
        with trio.fail_after(10):
            assert await claim(backend) == []  # SKIP LOCKED: not blocked, nothing taken
    [claimed] = await claim(backend)
    assert (claimed.job.id, claimed.job.payload) == (first.id, "new")


async def test_a_revision_rolled_back_changes_nothing(backend: PostgresBackend) -> None:
    first = await backend.enqueue_deduplicated(Q, "old", dedup_key=K)

    async def debounce_then_fail() -> None:
        async with backend.acquire() as producer, producer.transaction():
            await backend.enqueue_deduplicated(
                Q, "new", dedup_key=K, delay=V, on_duplicate="debounce", connection=producer
            )
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        await debounce_then_fail()
    [claimed] = await claim(backend)
    assert (claimed.job.id, claimed.job.payload) == (first.id, "old")


async def test_replace_racing_claims_never_loses_or_splits_a_job(backend: PostgresBackend) -> None:
    """Rounds of one replace against one claim, started together on two connections, with
    the real statements. Whatever the interleaving, the answers agree with the claim:
    ``replaced`` means the claim took the new payload or nothing (it came after, or skipped
    the locked row); ``running`` means it took the old payload, which the row still holds."""
    seen: set[str] = set()
    for n in range(40):
        key = f"{K}-{n}"
        first = await backend.enqueue_deduplicated(Q, "old", dedup_key=key)
        answer, taken = await race(backend, key)
        assert answer.id == first.id
        payloads = [c.job.payload for c in taken if c.job.id == first.id]
        info = await backend.get_job(first.id)
        if answer.outcome == "replaced":
            assert payloads in ([], ["new"])
            assert info.payload == "new"
        else:
            assert answer.outcome == "running"
            assert (payloads, info.payload, info.status) == (["old"], "old", "running")
        seen.add(answer.outcome)
        for c in taken:  # done with it: the next round's key is another one anyway
            await backend.cancel(c.job.id)
        if not payloads:
            await backend.cancel(first.id)
    assert seen <= {"replaced", "running"}


async def race(backend: PostgresBackend, key: str) -> tuple[Enqueued, list[Claimed]]:
    """One replace of ``key``'s holder and one claim, started together."""
    answers: list[Enqueued] = []
    claims: list[list[Claimed]] = []

    async def replace() -> None:
        answers.append(
            await backend.enqueue_deduplicated(Q, "new", dedup_key=key, on_duplicate="replace")
        )

    async def take() -> None:
        claims.append(await claim(backend))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(replace)
        nursery.start_soon(take)
    [answer], [taken] = answers, claims
    return answer, taken
