"""A stateful property test of the memory backend's reference model (``MemoryModel``).

The machine drives the model synchronously on a float clock, the way a porter would drive a
port of ``queries.sql``: it enqueues (with delays, priorities and dedup keys), lets time
pass, claims, renews, acks, fails and releases, with the handle of the current attempt or a
stale one, cancels, retries, expires leases, locks rows (as another transaction would),
deletes jobs and prunes. After every step it checks the rows against docs/protocol.rst:

- I9 (fencing): a renewal, ack, failure or release naming a stale ``claim_seq`` changes
  nothing in the row, and is answered as not applied;
- I13 (no job lost): every enqueued job that was not pruned is still a row, in exactly one
  of the states ready, scheduled, running, succeeded, failed (``counts`` agrees), only
  finished rows are pruned, and at the end every job can still be driven to an ending;
- a claim leases rows that were ready, in priority then id order, leaves no ready unlocked
  row behind when it took fewer than its limit, counts the lease from ``now`` and clears
  the progress an earlier attempt reported;
- an applied write does what its query says (the lease is never shortened, a failure is
  retried only while attempts remain and no cancel was asked, a release is uncharged), and
  an unfinished job's dedup key is held by it alone;
- ``delete_job`` deletes any job but one running under a live lease, which it leaves
  untouched;
- flow control (docs/flow.rst): a paused queue's claim takes nothing; a claim never raises
  a queue's live leases past its ``max_running`` nor takes more than its bucket holds; a
  group never has two rows running; and a claim that took fewer rows than asked left only
  rows that flow control holds back (paused, limits reached, or not their group's turn).
"""

from __future__ import annotations

import json
from dataclasses import astuple
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from trioqueue._backends.memory.model import MemoryModel, Row
from trioqueue._backends.validation import EnqueueRequest
from trioqueue._core.progress import valid_progress
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import JOB_STATUSES, Ack, Failure, NoticeKind, Recorded, Release

QUEUES = ("a", "b")
WORKER = "w"

queues = st.sampled_from(QUEUES)
steps = st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0, 40.0])
results = st.sampled_from([None, "1", '{"a": [1, "x"]}', '"text"'])
progresses = st.sampled_from([None, 0.25, 0.5, 1.0, 0.0, 2.0, -1.0, float("nan")])
job_picks = st.integers(min_value=0, max_value=10_000)  # an index into what exists
# Mostly one of the latest claims (likely current), sometimes any (likely stale).
handle_picks = st.integers(min_value=0, max_value=2) | st.integers(min_value=0, max_value=10_000)


def snapshot(row: Row) -> tuple[Any, ...]:
    """Every column of the row (the claim-order bookkeeping bit left out)."""
    return astuple(row)[:-1]


class ModelMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000.0
        self.model = MemoryModel()
        self.enqueued: list[int] = []
        self.pruned: set[int] = set()
        self.handles: list[tuple[int, int]] = []  # (job_id, claim_seq) of every claim
        self.paused: set[str] = set()
        self.limits: dict[str, tuple[int | None, float | None]] = {}

    # -- helpers -------------------------------------------------------------------------

    def row(self, job_id: int) -> Row | None:
        return next((r for r in self.model.rows() if r.id == job_id), None)

    def pick_job(self, pick: int) -> int:
        return self.enqueued[pick % len(self.enqueued)]

    def pick_handle(self, pick: int) -> tuple[int, int]:
        return self.handles[-1 - pick % len(self.handles)]

    def is_current(self, job_id: int, claim_seq: int) -> bool:
        row = self.row(job_id)
        return row is not None and row.status == "running" and row.claim_seq == claim_seq

    # -- rules ---------------------------------------------------------------------------

    @initialize()
    def some_jobs(self) -> None:
        # Start with work on both queues, so that runs reach the interesting states soon.
        for queue in QUEUES:
            self.enqueue(queue, n=2, priority=0, delay=0.0, max_attempts=2, dedup_key=None)

    @rule(
        queue=queues,
        n=st.integers(min_value=1, max_value=3),
        priority=st.integers(min_value=0, max_value=2),
        delay=st.sampled_from([0.0, 5.0]),
        max_attempts=st.integers(min_value=1, max_value=3),
        dedup_key=st.none() | st.sampled_from(["k1", "k2"]),
        group=st.none() | st.sampled_from(["g1", "g2"]),
    )
    def enqueue(
        self,
        queue: str,
        n: int,
        priority: int,
        delay: float,
        max_attempts: int,
        dedup_key: str | None,
        group: str | None = None,
    ) -> None:
        payloads = (json.dumps({"n": 1}),) if dedup_key is not None else (json.dumps(0),) * n
        request = EnqueueRequest(queue, payloads, priority, delay, max_attempts, dedup_key, group)
        holder = None if dedup_key is None else self.model.find_dedup(queue, dedup_key)
        self.model.take_notices()  # what earlier steps sent
        ids, added = self.model.enqueue(self.now, request)
        notices = self.model.take_notices()
        if holder is not None:
            assert (ids, added, notices) == ([holder], False, [])
            return
        assert added and len(ids) == len(payloads) and ids == sorted(ids)
        assert not set(ids) & set(self.enqueued)  # ids are never reused, pruning or not
        assert [(s.notice.kind, s.notice.queue) for s in notices] == [(NoticeKind.AVAILABLE, queue)]
        for job_id in ids:
            row = self.row(job_id)
            assert row is not None and row.not_visible_until == self.now + delay
        self.enqueued += ids

    @rule(step=steps)
    def advance(self, step: float) -> None:
        self.now += step

    @rule(queue=queues, limit=st.integers(min_value=1, max_value=3), vt=st.sampled_from([1.0, 8.0]))
    def claim(self, queue: str, limit: int, vt: float) -> None:
        before = {r.id: (r.attempts, r.claim_seq) for r in self.model.rows()}
        was_ready = self.ready_unlocked(queue)
        leased_before = self.leased(queue)
        max_running, max_per_second = self.limits.get(queue, (None, None))
        claimed = self.model.claim(self.now, queue, limit, WORKER, vt)
        assert len(claimed) <= limit
        if queue in self.paused:
            assert claimed == []
        if max_running is not None:
            assert self.leased(queue) <= max(max_running, leased_before)
        if max_per_second is not None:
            assert len(claimed) <= max(1.0, max_per_second)
        rows = [self.row(c.job.id) for c in claimed]
        order = [(-r.priority, r.id) for r in rows if r is not None]
        assert order == sorted(order) and len(order) == len(claimed)
        for c, row in zip(claimed, rows, strict=True):
            assert row is not None and c.job.id in was_ready
            attempts, claim_seq = before[c.job.id]
            assert row.status == "running" and row.worker_id == WORKER
            assert row.claim_seq == c.job.claim_seq == claim_seq + 1
            assert row.attempts == c.job.attempt == attempts + 1 <= row.max_attempts
            assert c.lease_until == row.not_visible_until == self.now + vt  # lease from now
            assert row.progress is None  # an earlier attempt's progress is not this one's
            self.handles.append((c.job.id, c.job.claim_seq))
        if len(claimed) < limit and queue not in self.paused:
            held = getattr(claimed, "retry_after", None) is not None
            for job_id in self.ready_unlocked(queue):
                assert held or self.group_waits(job_id), job_id

    @rule(queue=queues, paused=st.booleans())
    def pause(self, queue: str, paused: bool) -> None:
        if paused:
            self.model.pause_queue(self.now, queue)
            self.paused.add(queue)
        else:
            self.model.resume_queue(self.now, queue)
            self.paused.discard(queue)

    @rule(
        queue=queues,
        max_running=st.none() | st.integers(min_value=1, max_value=3),
        max_per_second=st.none() | st.sampled_from([0.5, 1.0, 2.0]),
    )
    def set_limits(self, queue: str, max_running: int | None, max_per_second: float | None) -> None:
        self.model.set_queue_limits(self.now, queue, max_running, max_per_second)
        self.limits[queue] = (max_running, max_per_second)

    @precondition(lambda self: self.handles)
    @rule(pick=handle_picks, progress=progresses, vt=st.sampled_from([0.5, 8.0]))
    def renew(self, pick: int, progress: float | None, vt: float) -> None:
        job_id, claim_seq = self.pick_handle(pick)
        old = self.snapshot_of(job_id)
        before = self.row(job_id)
        old_lease = None if before is None else before.not_visible_until
        old_progress = None if before is None else before.progress
        current = self.is_current(job_id, claim_seq) and job_id not in self.locked()
        verdicts = self.model.renew(self.now, [RenewItem(job_id, claim_seq, progress)], vt)
        if not current:  # I9 (and a locked row is left alone)
            assert verdicts[job_id] in (Verdict.GONE, Verdict.RECLAIMED, Verdict.UNCHANGED)
            assert self.snapshot_of(job_id) == old
            return
        row = self.row(job_id)
        assert row is not None and old_lease is not None
        flagged = row.cancel_requested_at is not None
        assert verdicts[job_id] == (Verdict.CANCEL_REQUESTED if flagged else Verdict.EXTENDED)
        assert row.not_visible_until == max(old_lease, self.now + vt)  # never shortened
        expected = valid_progress(progress)
        late = self.now + vt < old_lease  # a late statement: it stores no progress either
        assert row.progress == (old_progress if expected is None or late else expected)

    @precondition(lambda self: self.handles)
    @rule(pick=handle_picks, progress=progresses, result=results)
    def ack(self, pick: int, progress: float | None, result: str | None) -> None:
        job_id, claim_seq = self.pick_handle(pick)
        current = self.is_current(job_id, claim_seq)
        old = self.snapshot_of(job_id)
        [applied] = self.model.ack(self.now, [Ack(job_id, claim_seq, progress, result)])
        assert applied is current
        if not current:
            assert self.snapshot_of(job_id) == old  # I9
        else:
            row = self.row(job_id)
            assert row is not None and row.status == "succeeded" and row.finished_at == self.now
            assert row.result == result  # the fenced ack stores it; a stale one stores none

    @precondition(lambda self: self.handles)
    @rule(pick=handle_picks, retry_delay=st.none() | st.sampled_from([0.0, 2.0]))
    def fail(self, pick: int, retry_delay: float | None) -> None:
        job_id, claim_seq = self.pick_handle(pick)
        current = self.is_current(job_id, claim_seq)
        old = self.row(job_id)
        retries = (
            old is not None
            and old.cancel_requested_at is None
            and retry_delay is not None
            and old.attempts < old.max_attempts
        )
        old_snapshot = self.snapshot_of(job_id)
        [recorded] = self.model.fail(self.now, [Failure(job_id, claim_seq, "boom", retry_delay)])
        row = self.row(job_id)
        if not current:
            assert recorded is None and self.snapshot_of(job_id) == old_snapshot  # I9
        elif retries:
            assert recorded is Recorded.RETRY and row is not None and row.status == "queued"
            assert row.not_visible_until == self.now + (retry_delay or 0.0)
        else:
            assert recorded is Recorded.FINAL and row is not None and row.status == "failed"

    @precondition(lambda self: self.handles)
    @rule(pick=handle_picks)
    def release(self, pick: int) -> None:
        job_id, claim_seq = self.pick_handle(pick)
        current = self.is_current(job_id, claim_seq)
        old = self.row(job_id)
        old_attempts = -1 if old is None else old.attempts
        flagged = old is not None and old.cancel_requested_at is not None
        old_snapshot = self.snapshot_of(job_id)
        [applied] = self.model.release(self.now, [Release(job_id, claim_seq)])
        row = self.row(job_id)
        assert applied is current
        if not current:
            assert self.snapshot_of(job_id) == old_snapshot  # I9
        elif flagged:
            assert row is not None and row.status == "failed"
        else:
            assert row is not None and row.status == "queued"
            assert row.attempts == old_attempts - 1  # a released attempt is not charged
            assert row.state(self.now) == "ready"

    @precondition(lambda self: self.enqueued)
    @rule(pick=job_picks)
    def cancel(self, pick: int) -> None:
        job_id = self.pick_job(pick)
        old = self.row(job_id)
        leased = old is not None and old.leased(self.now)
        unfinished = old is not None and not old.finished
        self.model.take_notices()  # what earlier steps sent
        assert self.model.cancel(self.now, job_id) is unfinished
        notices = self.model.take_notices()
        row = self.row(job_id)
        if leased:
            assert row is not None and row.status == "running"
            assert row.cancel_requested_at is not None
            assert [(s.notice.kind, s.notice.job_id, s.worker_id) for s in notices] == [
                (NoticeKind.CANCEL, job_id, WORKER)
            ]
        elif unfinished:
            assert row is not None and row.status == "failed" and notices == []

    @precondition(lambda self: self.enqueued)
    @rule(pick=job_picks)
    def retry(self, pick: int) -> None:
        job_id = self.pick_job(pick)
        old = self.row(job_id)
        if self.model.retry(self.now, job_id):
            row = self.row(job_id)
            assert old is not None and row is not None
            assert row.state(self.now) == "ready" and row.attempts < row.max_attempts
        else:
            assert old is None or old.status != "failed" or old.dedup_key is not None

    @precondition(lambda self: self.enqueued)
    @rule(pick=job_picks)
    def expire(self, pick: int) -> None:
        row = self.row(self.pick_job(pick))
        if row is not None and row.status == "running":
            self.model.expire(self.now, row.id)
            assert row.state(self.now) == "ready"

    @precondition(lambda self: self.enqueued)
    @rule(pick=job_picks, lock=st.booleans())
    def lock(self, pick: int, lock: bool) -> None:
        job_id = self.pick_job(pick)
        if lock:
            self.model.lock_rows([job_id])
        else:
            self.model.unlock_rows([job_id])

    @precondition(lambda self: self.enqueued)
    @rule(pick=job_picks)
    def delete(self, pick: int) -> None:
        job_id = self.pick_job(pick)
        row = self.row(job_id)
        before = self.snapshot_of(job_id)
        deletable = row is not None and not row.leased(self.now)
        assert self.model.delete_job(self.now, job_id) is deletable
        if deletable:
            assert self.row(job_id) is None
            self.pruned.add(job_id)  # gone for good, as a pruned row is
        else:
            assert self.snapshot_of(job_id) == before  # a live lease keeps its row untouched

    @rule(older_than=st.sampled_from([0.0, 5.0]), limit=st.integers(min_value=1, max_value=3))
    def prune(self, older_than: float, limit: int) -> None:
        old = {r.id: r for r in self.model.rows()}
        removed = self.model.prune(self.now, older_than, limit)
        gone = old.keys() - {r.id for r in self.model.rows()}
        assert len(gone) == removed <= limit
        for job_id in gone:
            row = old[job_id]
            assert row.finished_at is not None and row.finished_at < self.now - older_than
            assert job_id not in self.locked()
        self.pruned |= gone

    # -- invariants ----------------------------------------------------------------------

    def locked(self) -> frozenset[int]:
        return self.model.locked_rows()

    def ready_unlocked(self, queue: str) -> set[int]:
        return {
            r.id
            for r in self.model.rows()
            if r.queue == queue and r.state(self.now) == "ready" and r.id not in self.locked()
        }

    def leased(self, queue: str) -> int:
        return sum(1 for r in self.model.rows() if r.queue == queue and r.leased(self.now))

    def group_waits(self, job_id: int) -> bool:
        """Whether a ready row is held back by its group: one of the group runs, or an
        earlier row of the group (priority, then id) waits."""
        row = self.row(job_id)
        assert row is not None
        if row.group is None:
            return False
        members = [
            r
            for r in self.model.rows()
            if r.queue == row.queue and r.group == row.group and not r.finished
        ]
        head = min((-r.priority, r.id) for r in members if r.status == "queued")
        return any(r.status == "running" for r in members) or head != (-row.priority, row.id)

    def snapshot_of(self, job_id: int) -> tuple[Any, ...] | None:
        row = self.row(job_id)
        return None if row is None else snapshot(row)

    @invariant()
    def no_job_is_lost(self) -> None:  # I13
        rows = list(self.model.rows())
        assert {r.id for r in rows} == set(self.enqueued) - self.pruned
        for row in rows:
            assert row.state(self.now) in JOB_STATUSES
            assert (row.finished_at is not None) is row.finished
            assert 0 <= row.attempts <= row.max_attempts
        counted = sum(n for per in self.model.counts(self.now).values() for n in per.values())
        assert counted == len(rows)

    @invariant()
    def a_dedup_key_has_one_unfinished_holder(self) -> None:
        holders: dict[tuple[str, str], int] = {}
        for row in self.model.rows():
            if row.dedup_key is not None and not row.finished:
                key = (row.queue, row.dedup_key)
                assert key not in holders
                holders[key] = row.id
        for queue in QUEUES:
            for dedup_key in ("k1", "k2"):  # a finished job gives its key up
                assert self.model.find_dedup(queue, dedup_key) == holders.get((queue, dedup_key))

    @invariant()
    def a_group_runs_one_job_at_a_time(self) -> None:
        running = [
            (r.queue, r.group) for r in self.model.rows() if r.group and r.status == "running"
        ]
        assert len(running) == len(set(running))

    def teardown(self) -> None:
        # I13: whatever happened, every job can still be driven to an ending (once its queue
        # is resumed; limits and groups only pace it).
        self.model.unlock_rows(r.id for r in self.model.rows())
        for queue in QUEUES:
            self.model.resume_queue(self.now, queue)
        for _ in range(200):
            self.now += 1_000.0
            for queue in QUEUES:
                claimed = self.model.claim(self.now, queue, 10_000, WORKER, 10.0)
                self.model.ack(self.now, [Ack(c.job.id, c.job.claim_seq) for c in claimed])
            if all(row.finished for row in self.model.rows()):
                break
        assert all(row.finished for row in self.model.rows())


ModelMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=80, deadline=None)
TestModel = ModelMachine.TestCase
