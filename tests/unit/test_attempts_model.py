"""A property test of the reference model's attempts table (docs/protocol.rst §14, I15).

The machine drives ``MemoryModel`` on a float clock: it enqueues, claims on short and long
leases, lets time pass (so leases lapse and claims take them over or dead-letter them),
acks, fails, releases and snoozes (docs/protocol.rst §17) with the current attempt's handle
or a stale one, cancels and retries. The test keeps, beside the model, what the attempts table must hold, and after
every step checks invariant I15:

- at most one attempt row per ``(job, claim_seq)``, and no row for a claim not made;
- every write whose fence matched left exactly one row, with the outcome it recorded
  (``retry``, ``failed``, ``cancelled``, ``succeeded``, ``released``, ``snoozed``), and
  every write whose fence did not match left none;
- every lapsed attempt a claim took over or dead-lettered left one ``lost`` row;
- ``cancelled`` is set exactly on the failed jobs that failed for good with a cancel asked.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from trioqueue._backends.memory.model import MemoryModel, Row
from trioqueue._backends.validation import EnqueueRequest
from trioqueue._types import Ack, AttemptTiming, Failure, Recorded, Release, Snoozed, SnoozeWrite

Q = "q"
WORKER = "w"

steps = st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0])
leases = st.sampled_from([1.0, 5.0, 60.0])
picks = st.integers(min_value=0, max_value=10_000)
# Mostly one of the latest claims (likely current), sometimes any (likely stale).
handle_picks = st.integers(min_value=0, max_value=2) | st.integers(min_value=0, max_value=10_000)
delays = st.sampled_from([None, 0.0, 2.0])


class AttemptsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000.0
        self.model = MemoryModel()
        self.jobs: list[int] = []
        self.handles: list[tuple[int, int]] = []
        #: What the attempts table must hold: (job, claim_seq) -> outcome.
        self.expected: dict[tuple[int, int], str] = {}
        #: Failed jobs the test made fail for good with a cancel asked.
        self.cancellations: set[int] = set()

    # -- helpers -------------------------------------------------------------------------

    def row(self, job_id: int) -> Row:
        return next(r for r in self.model.rows() if r.id == job_id)

    def handle(self, pick: int) -> tuple[int, int]:
        return (
            self.handles[-1 - pick]
            if pick < len(self.handles)
            else self.handles[pick % len(self.handles)]
        )

    def lapsed(self) -> dict[int, int]:
        """The running rows whose lease has run out now: their claim_seq, by id."""
        return {
            r.id: r.claim_seq
            for r in self.model.rows()
            if r.status == "running" and r.not_visible_until <= self.now
        }

    # -- rules ---------------------------------------------------------------------------

    @rule(count=st.integers(min_value=1, max_value=3), max_attempts=st.sampled_from([1, 2, 5]))
    def enqueue(self, count: int, max_attempts: int) -> None:
        request = EnqueueRequest(Q, ('"x"',) * count, 0, 0.0, max_attempts, None)
        ids, _ = self.model.enqueue(self.now, request)
        self.jobs.extend(ids)

    @rule(step=steps)
    def wait(self, step: float) -> None:
        self.now += step

    @rule(limit=st.integers(min_value=1, max_value=3), lease=leases)
    def claim(self, limit: int, lease: float) -> None:
        lapsed = self.lapsed()
        cancel_asked = {r.id for r in self.model.rows() if r.cancel_requested_at is not None}
        claims = self.model.claim(self.now, Q, limit, WORKER, lease)
        for claimed in claims:
            self.handles.append((claimed.job.id, claimed.job.claim_seq))
        for job_id, seq in lapsed.items():
            row = self.row(job_id)
            if row.claim_seq != seq or row.status == "failed":  # taken over, or dead-lettered
                self.expected[(job_id, seq)] = "lost"
                if row.status == "failed" and job_id in cancel_asked:
                    self.cancellations.add(job_id)

    @rule(pick=handle_picks, run=st.sampled_from([0.0, 0.5]))
    @precondition(lambda self: self.handles)
    def ack(self, pick: int, run: float) -> None:
        job_id, seq = self.handle(pick)
        timing = AttemptTiming(started_after=0.0, run_seconds=run)
        if self.model.ack(self.now, [Ack(job_id, seq, timing=timing)]) == [True]:
            self.expected[(job_id, seq)] = "succeeded"

    @rule(pick=handle_picks, delay=delays)
    @precondition(lambda self: self.handles)
    def fail(self, pick: int, delay: float | None) -> None:
        job_id, seq = self.handle(pick)
        cancel_asked = self.row(job_id).cancel_requested_at is not None
        failure = Failure(job_id, seq, "E: x", delay, error_type="E", traceback="tb")
        [recorded] = self.model.fail(self.now, [failure])
        if recorded is Recorded.RETRY:
            self.expected[(job_id, seq)] = "retry"
        elif recorded is Recorded.FINAL:
            self.expected[(job_id, seq)] = "cancelled" if cancel_asked else "failed"
            if cancel_asked:
                self.cancellations.add(job_id)

    @rule(pick=handle_picks)
    @precondition(lambda self: self.handles)
    def release(self, pick: int) -> None:
        job_id, seq = self.handle(pick)
        cancel_asked = self.row(job_id).cancel_requested_at is not None
        if self.model.release(self.now, [Release(job_id, seq)]) == [True]:
            self.expected[(job_id, seq)] = "cancelled" if cancel_asked else "released"
            if cancel_asked:
                self.cancellations.add(job_id)

    @rule(pick=handle_picks, seconds=st.sampled_from([0.0, 2.0]), bound=st.sampled_from([0, 1, 3]))
    @precondition(lambda self: self.handles)
    def snooze(self, pick: int, seconds: float, bound: int) -> None:
        """I19 beside I15: a snooze that applied gave its attempt back and counted one more,
        its run time now + seconds; past the bound it failed the job, charged; a stale one
        changed nothing."""
        job_id, seq = self.handle(pick)
        row = self.row(job_id)
        before = (row.status, row.attempts, row.snoozes, row.not_visible_until)
        cancel_asked = row.cancel_requested_at is not None
        [became] = self.model.snooze(self.now, [SnoozeWrite(job_id, seq, seconds)], bound)
        after = (row.status, row.attempts, row.snoozes)
        if became is None:
            assert (*after, row.not_visible_until) == before
        elif became is Snoozed.SNOOZED:
            self.expected[(job_id, seq)] = "snoozed"
            assert after == ("queued", before[1] - 1, before[2] + 1)
            assert row.not_visible_until == self.now + seconds
        elif became is Snoozed.LIMIT:
            self.expected[(job_id, seq)] = "failed"
            assert before[2] >= bound
            assert after == ("failed", before[1], before[2])
        else:
            assert cancel_asked
            self.expected[(job_id, seq)] = "cancelled"
            self.cancellations.add(job_id)

    @rule(pick=picks)
    @precondition(lambda self: self.jobs)
    def cancel(self, pick: int) -> None:
        job_id = self.jobs[pick % len(self.jobs)]
        row = self.row(job_id)
        fails_now = not row.finished and not row.leased(self.now)
        if self.model.cancel(self.now, job_id) and fails_now:
            self.cancellations.add(job_id)  # no attempt row: it was not running (§14)

    @rule(pick=picks)
    @precondition(lambda self: self.jobs)
    def retry(self, pick: int) -> None:
        job_id = self.jobs[pick % len(self.jobs)]
        if self.model.retry(self.now, job_id):
            self.cancellations.discard(job_id)

    # -- invariants (I15) ----------------------------------------------------------------

    @invariant()
    def one_row_per_claim_with_the_recorded_outcome(self) -> None:
        recorded: dict[tuple[int, int], str] = {}
        for job_id in self.jobs:
            rows = self.model.attempt_rows(job_id)
            seqs = [r.claim_seq for r in rows]
            assert len(seqs) == len(set(seqs)), (job_id, seqs)
            assert all(1 <= s <= self.row(job_id).claim_seq for s in seqs)
            recorded.update(((job_id, r.claim_seq), r.outcome) for r in rows)
        assert recorded == self.expected

    @invariant()
    def cancelled_marks_exactly_the_cancellations(self) -> None:
        for job_id in self.jobs:
            row = self.row(job_id)
            assert row.cancelled == (job_id in self.cancellations and row.status == "failed")
            if row.cancelled:
                assert row.last_error is not None
                assert row.last_error.startswith("cancelled")


TestAttemptsModel = AttemptsMachine.TestCase
TestAttemptsModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
