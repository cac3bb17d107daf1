"""A property test of the bulk controls on the reference model (``MemoryModel``): retrying or
deleting every matching job in batches, the cursor moving on by id as both backends loop
(``retry_matching``, ``delete_matching``), does what ``retry`` or ``delete_job`` of each
matching, unlocked job in id order does, whatever the batch size and with or without the
cancelled filter: the same rows end up in the same states, and the same count is
answered. Jobs share dedup keys (only the first
failed one of a key can come back), some run under a live lease (never deleted), some are
locked by another transaction (skipped)."""

from __future__ import annotations

from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.validation import check_enqueue
from trioqueue._types import Failure, JobStatus, Release

NOW = 1.0
Outcome = Literal["ready", "running", "failed", "cancelled"]

jobs = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.sampled_from([None, "k1", "k2"]),
        st.sampled_from(["ready", "running", "failed", "failed", "cancelled"]),
    ),
    max_size=25,
)


def build(plan: list[tuple[str, str | None, Outcome]]) -> tuple[MemoryModel, list[int]]:
    """A model holding the plan's jobs: each enqueued, claimed, then failed for good,
    released (ready again), released and cancelled (failed, cancelled) or left running;
    and their ids. A job whose dedup key an
    unfinished job holds is not enqueued (deduplicated)."""
    model = MemoryModel()
    ids: list[int] = []
    for i, (queue, key, outcome) in enumerate(plan):
        # Each job outranks the ones before it, so the claim takes it, not an older one.
        request = check_enqueue(
            queue, [i], priority=i + 1, delay=0.0, max_attempts=1, dedup_key=key
        )
        new, inserted = model.enqueue(NOW, request)
        if not inserted:
            continue
        [claimed] = model.claim(NOW, queue, 1, "w", 60.0)
        job = claimed.job
        assert job.id == new[0]
        if outcome == "failed":
            model.fail(NOW, [Failure(job.id, job.claim_seq, "boom", None)])
        elif outcome in ("ready", "cancelled"):
            model.release(NOW, [Release(job.id, job.claim_seq)])
            if outcome == "cancelled":
                assert model.cancel(NOW, job.id)
        ids.append(job.id)
    return model, ids


def batched(
    model: MemoryModel,
    op: Literal["retry", "delete"],
    queue: str | None,
    status: JobStatus | None,
    batch: int,
    cancelled: bool | None,
) -> int:
    """The backends' loop: one batch per statement, until one picks fewer than it may."""
    run = model.retry_matching if op == "retry" else model.delete_matching
    cursor, done = 0, 0
    while True:
        picked, last_id, count = run(NOW, cursor, queue, status, None, batch, cancelled)
        done += count
        if picked < batch or last_id is None:
            return done
        cursor = last_id


def states(model: MemoryModel, ids: list[int]) -> list[tuple[str, int, bool] | None]:
    infos = model.get_jobs(NOW, ids)
    return [
        (infos[i].status, infos[i].max_attempts, infos[i].cancelled) if i in infos else None
        for i in ids
    ]


@settings(max_examples=300, deadline=None)
@given(
    plan=jobs,
    queue=st.sampled_from([None, "a", "b"]),
    batch=st.integers(1, 6),
    locked=st.sets(st.integers(1, 25), max_size=5),
    cancelled=st.sampled_from([None, True, False]),
)
def test_batched_retry_is_retry_of_each_match_in_id_order(
    plan: list[tuple[str, str | None, Outcome]],
    queue: str | None,
    batch: int,
    locked: set[int],
    cancelled: bool | None,
) -> None:
    bulk, ids = build(plan)
    one_by_one, _ = build(plan)
    for model in (bulk, one_by_one):
        model.lock_rows(locked)
    done = batched(bulk, "retry", queue, "failed", batch, cancelled)
    matching = [
        info.id
        for info in one_by_one.list_jobs(NOW, queue, "failed", 10_000, 0, cancelled=cancelled)
        if info.id not in locked
    ]
    expected = sum(one_by_one.retry(NOW, job_id) for job_id in matching)
    assert done == expected
    assert states(bulk, ids) == states(one_by_one, ids)


@settings(max_examples=300, deadline=None)
@given(
    plan=jobs,
    queue=st.sampled_from([None, "a", "b"]),
    status=st.sampled_from([None, "ready", "running", "failed"]),
    batch=st.integers(1, 6),
    locked=st.sets(st.integers(1, 25), max_size=5),
    cancelled=st.sampled_from([None, True, False]),
)
def test_batched_delete_is_delete_job_of_each_match_in_id_order(
    plan: list[tuple[str, str | None, Outcome]],
    queue: str | None,
    status: JobStatus | None,
    batch: int,
    locked: set[int],
    cancelled: bool | None,
) -> None:
    bulk, ids = build(plan)
    one_by_one, _ = build(plan)
    for model in (bulk, one_by_one):
        model.lock_rows(locked)
    running = [info.id for info in bulk.list_jobs(NOW, None, "running", 10_000, 0)]
    done = batched(bulk, "delete", queue, status, batch, cancelled)
    matching = [
        info.id
        for info in one_by_one.list_jobs(NOW, queue, status, 10_000, 0, cancelled=cancelled)
        if info.id not in locked
    ]
    expected = sum(one_by_one.delete_job(NOW, job_id) for job_id in matching)
    assert done == expected
    assert states(bulk, ids) == states(one_by_one, ids)
    # A job under a live lease is never deleted.
    assert all(bulk.get_job(NOW, i) is not None for i in running)
