"""Invariant I21 (docs/protocol.rst §19) as a property test of the reference model
(``MemoryModel``): for random jobs (queues, dedup keys, error texts and types, failure
times, cancellations, some running, some ready, some locked by another transaction) and
random dead-letter filters,

- the dead letters listed are exactly the failed rows the filters match, highest id first,
  and the summary counts exactly the newest ``sample`` of them (``capped`` when more match);
- a redrive in batches, the cursor moving on by id as both backends loop, does what
  ``retry`` of each matching, unlocked, failed job in id order does (the same rows end in
  the same states, every other row is unchanged, the same count is answered), and no batch
  picks more than its size."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from trioqueue._backends.dead_letter_checks import DeadFilter
from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.validation import check_enqueue
from trioqueue._types import Failure, Release

LATER = 100.0
Outcome = Literal["ready", "running", "failed", "cancelled"]
ERRORS = {
    "value": ("ValueError: disk full", "builtins.ValueError"),
    "key": ("KeyError: 'user'", "builtins.KeyError"),
    "none": ("claim hooks and handler ran past max_job_duration of 5s", None),
}

jobs = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.sampled_from([None, "k1", "k2"]),
        st.sampled_from(["ready", "running", "failed", "failed", "failed", "cancelled"]),
        st.sampled_from(sorted(ERRORS)),
    ),
    max_size=25,
)
filters = st.builds(
    lambda queue, error, error_type, since, before, cancelled: (
        queue, error, error_type, since, before, cancelled
    ),
    st.sampled_from([None, "a", "b"]),
    st.sampled_from([None, "DISK", "user", "nothing"]),
    st.sampled_from([None, "builtins.ValueError", "builtins.KeyError", ""]),  # "": none recorded
    st.one_of(st.none(), st.integers(0, 30)),
    st.one_of(st.none(), st.integers(0, 30)),
    st.sampled_from([None, True, False]),
)  # fmt: skip
Given = tuple[str | None, str | None, str | None, int | None, int | None, bool | None]


def build(plan: list[tuple[str, str | None, Outcome, str]]) -> tuple[MemoryModel, list[int]]:
    """A model holding the plan's jobs, job ``i`` handled at time ``1 + i`` (so their
    failures have distinct times): enqueued, claimed, then failed for good with its error,
    released (ready again), released and cancelled (failed, cancelled) or left running. A
    job whose dedup key an unfinished job holds is not enqueued (deduplicated)."""
    model = MemoryModel()
    ids: list[int] = []
    for i, (queue, key, outcome, kind) in enumerate(plan):
        now = 1.0 + i
        request = check_enqueue(
            queue, [i], priority=i + 1, delay=0.0, max_attempts=1, dedup_key=key
        )
        new, inserted = model.enqueue(now, request)
        if not inserted:
            continue
        [claimed] = model.claim(now, queue, 1, "w", 600.0)
        job = claimed.job
        assert job.id == new[0]
        error, error_type = ERRORS[kind]
        if outcome == "failed":
            model.fail(now, [Failure(job.id, job.claim_seq, error, None, error_type=error_type)])
        elif outcome in ("ready", "cancelled"):
            model.release(now, [Release(job.id, job.claim_seq)])
            if outcome == "cancelled":
                assert model.cancel(now, job.id)
        ids.append(job.id)
    return model, ids


def dead_filter(model: MemoryModel, given: Given) -> DeadFilter:
    queue, error, error_type, since, before, cancelled = given

    def moment(t: int | None) -> datetime | None:
        return None if t is None else model.to_datetime(float(t))

    return DeadFilter(queue, error, error_type, moment(since), moment(before), cancelled)


def matches(model: MemoryModel, found: DeadFilter, job_id: int) -> bool:
    """The filters, read from the job as ``get_job`` and ``list_attempts`` show it."""
    info = model.get_job(LATER, job_id)
    assert info is not None
    attempts = model.list_attempts(LATER, job_id) or []
    error_type = attempts[-1].error_type if attempts else None
    finished: datetime | None = info.finished_at
    error = (info.last_error or "").lower()
    return (
        info.status == "failed"
        and (found.queue is None or info.queue == found.queue)
        and (found.error is None or found.error.lower() in error)
        and (found.error_type is None or (error_type or "") == found.error_type)
        and (found.failed_since is None or (finished is not None and finished >= found.failed_since))
        and (found.failed_before is None or (finished is not None and finished < found.failed_before))
        and (found.cancelled is None or info.cancelled == found.cancelled)
    )  # fmt: skip


def states(model: MemoryModel, ids: list[int]) -> list[tuple[object, ...]]:
    infos = model.get_jobs(LATER, ids)
    return [
        (i.status, i.attempts, i.max_attempts, i.cancelled, i.last_error, i.finished_at)
        for i in (infos[job_id] for job_id in ids)
    ]


@settings(max_examples=300, deadline=None)
@given(plan=jobs, given=filters, sample=st.one_of(st.none(), st.integers(1, 8)))
def test_the_view_is_the_failed_rows_that_match_and_the_summary_counts_a_bounded_sample(
    plan: list[tuple[str, str | None, Outcome, str]], given: Given, sample: int | None
) -> None:
    model, ids = build(plan)
    found = dead_filter(model, given)
    expected = sorted((i for i in ids if matches(model, found, i)), reverse=True)
    listed = model.list_dead_letters(LATER, found, 10_000, None, 1000)
    assert [d.id for d in listed] == expected
    rows = model.dead_letter_summary(LATER, found, sample)
    counted = expected if sample is None else expected[:sample]
    [total] = [n for kind, _, n in rows if kind == "total"]
    assert total == (len(expected) if sample is None else min(len(expected), sample + 1))
    by_queue = Counter({name: n for kind, name, n in rows if kind == "queue"})
    by_type = Counter({name: n for kind, name, n in rows if kind == "error_type"})
    assert by_queue == Counter(d.queue for d in listed if d.id in counted)
    assert by_type == Counter(d.error_type for d in listed if d.id in counted)


@settings(max_examples=300, deadline=None)
@given(
    plan=jobs,
    given=filters,
    batch=st.integers(1, 6),
    locked=st.sets(st.integers(1, 25), max_size=5),
)
def test_a_batched_redrive_is_retry_of_each_matching_dead_letter_in_id_order(
    plan: list[tuple[str, str | None, Outcome, str]],
    given: Given,
    batch: int,
    locked: set[int],
) -> None:
    bulk, ids = build(plan)
    one_by_one, _ = build(plan)
    for model in (bulk, one_by_one):
        model.lock_rows(locked)
    found = dead_filter(bulk, given)
    queue = found.queue
    cursor, done = 0, 0
    while True:  # the backends' loop: one statement per batch
        picked, last_id, count = bulk.retry_matching(
            LATER, cursor, queue, "failed", None, batch, found.cancelled, dead=found
        )
        assert count <= picked <= batch
        done += count
        if picked < batch or last_id is None:
            break
        cursor = last_id
    matching = [i for i in ids if i not in locked and matches(one_by_one, found, i)]
    expected = sum(one_by_one.retry(LATER, job_id) for job_id in matching)
    assert done == expected
    assert states(bulk, ids) == states(one_by_one, ids)
