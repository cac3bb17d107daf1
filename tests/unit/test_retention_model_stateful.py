"""A stateful property test of retention and the maintainer lease in the reference model
(``MemoryModel``; docs/protocol.rst §15).

The machine enqueues, finishes (acks, fails for good, cancels), leaves jobs running, lets
time pass, sets and clears policies (queue ones, the default, keep-for-ever, the audit
log's), locks rows as another transaction would, appends audit entries, and has two
candidates claim, renew and release the maintainer lease and run prune batches under fences
current and stale. A dry run (``retention_preview``, by the policies or by age) must count
exactly the rows due and change nothing. After every step it checks:

- I16: a batch deleted only finished jobs, each past the policy its queue had then
  (finished before ``now - keep``; never one kept for ever), never a locked row, at most
  ``limit`` jobs and ``limit`` audit entries, oldest first; only entries past the audit
  log's keep-time went;
- I17: a batch deleted anything only under the live lease's fence; every other fence's
  batch answered None and changed nothing; at most one lease is live, its fence is the
  number of claims so far, a claim while it is live is refused, and renewals and releases
  apply only to the live lease's holder and fence.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.validation import EnqueueRequest
from trioqueue._types import Ack, Failure

QUEUES = ("a", "b", "c")
HOLDERS = ("m1", "m2")
WORKER = "w"

queues = st.sampled_from(QUEUES)
keeps = st.sampled_from([None, 0.5, 1.0, 5.0, 30.0])
steps = st.sampled_from([0.0, 0.5, 1.0, 2.0, 6.0, 31.0])
leases = st.sampled_from([1.0, 5.0, 20.0])
picks = st.integers(min_value=0, max_value=10_000)


class RetentionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000.0
        self.model = MemoryModel()
        self.model.set_retention(self.now, None, 1.0, 5.0)  # short defaults: things happen
        self.model.set_audit_retention(self.now, 1.0)
        self.claims = 0  # successful maintainer claims so far: the live fence
        self.fences: list[tuple[str, int]] = []  # (holder, seq) of every claim, in order
        self.enqueued: list[int] = []
        self.pruned: set[int] = set()

    # -- helpers -------------------------------------------------------------------------

    def rows(self) -> dict[int, Any]:
        return {row.id: row for row in self.model.rows()}

    def live(self) -> tuple[str, int] | None:
        info = self.model.maintainer(self.now)
        if info is None or info.expires_at <= self.model.to_datetime(self.now):
            return None
        return info.holder, info.seq

    def fence(self, pick: int) -> tuple[str, int]:
        """Mostly the latest claim's fence (likely current), else any (likely stale)."""
        if not self.fences:
            return HOLDERS[pick % 2], pick % 3
        if pick % 3:
            return self.fences[-1]
        return self.fences[pick % len(self.fences)]

    # -- jobs ----------------------------------------------------------------------------

    @initialize()
    def first_lease(self) -> None:
        self.claim_lease(HOLDERS[0], 20.0)

    @rule(queue=queues, n=st.integers(min_value=1, max_value=4), how=st.integers(0, 3))
    def enqueue(self, queue: str, n: int, how: int) -> None:
        """Enqueue ``n`` jobs, and with ``how`` < 3 have them worked at once."""
        request = EnqueueRequest(queue, ("1",) * n, 0, 0.0, 3, None)
        ids, _ = self.model.enqueue(self.now, request)
        self.enqueued.extend(ids)
        if how < 3:
            self.work(queue, n, how)

    @rule(queue=queues, n=st.integers(min_value=1, max_value=3), how=st.integers(0, 2))
    def work(self, queue: str, n: int, how: int) -> None:
        """Claim up to ``n``: ack them, fail them for good, or leave them running."""
        claimed = list(self.model.claim(self.now, queue, n, WORKER, 10.0))
        if how == 0:
            self.model.ack(self.now, [Ack(c.job.id, c.job.claim_seq) for c in claimed])
        elif how == 1:
            self.model.fail(
                self.now, [Failure(c.job.id, c.job.claim_seq, "E: x", None) for c in claimed]
            )

    @rule(pick=picks)
    def cancel(self, pick: int) -> None:
        rows = sorted(self.rows())
        if rows:
            self.model.cancel(self.now, rows[pick % len(rows)])

    @rule(pick=picks)
    def retry(self, pick: int) -> None:
        rows = sorted(self.rows())
        if rows:
            self.model.retry(self.now, rows[pick % len(rows)])

    @rule(pick=picks, lock=st.booleans())
    def lock(self, pick: int, lock: bool) -> None:
        rows = sorted(self.rows())
        if not rows:
            return
        job_id = rows[pick % len(rows)]
        if lock:
            self.model.lock_rows([job_id])
        else:
            self.model.unlock_rows([job_id])

    @rule(step=steps)
    def tick(self, step: float) -> None:
        self.now += step

    @rule(step=steps)
    def tick_again(self, step: float) -> None:
        """Time passes twice as often as anything else happens."""
        self.now += step

    # -- policies and the audit log ------------------------------------------------------

    @rule(queue=st.none() | queues, succeeded=keeps, failed=keeps)
    def set_policy(self, queue: str | None, succeeded: float | None, failed: float | None) -> None:
        policy = self.model.set_retention(self.now, queue, succeeded, failed)
        assert (policy.queue, policy.succeeded, policy.failed) == (queue, succeeded, failed)
        retention = self.model.get_retention(self.now)
        assert (retention.default if queue is None else retention.for_queue(queue)) == policy

    @rule(queue=queues)
    def clear_policy(self, queue: str) -> None:
        had = any(p.queue == queue for p in self.model.get_retention(self.now).queues)
        assert self.model.clear_retention(self.now, queue) is had

    @rule(keep=keeps)
    def audit_keep(self, keep: float | None) -> None:
        self.model.set_audit_retention(self.now, keep)

    @rule()
    def audit(self) -> None:
        self.model.record_audit(self.now, "pause", "a", "s", "{}")

    # -- the lease (I17) -----------------------------------------------------------------

    @rule(holder=st.sampled_from(HOLDERS), lease=leases)
    def claim_lease(self, holder: str, lease: float) -> None:
        was_live = self.live()
        seq = self.model.claim_maintainer(self.now, holder, lease)
        if was_live is not None:
            assert seq is None
            return
        self.claims += 1
        assert seq == self.claims
        self.fences.append((holder, seq))
        assert self.live() == (holder, seq)

    @rule(pick=picks, lease=leases)
    def renew_lease(self, pick: int, lease: float) -> None:
        holder, seq = self.fence(pick)
        live = self.live()
        before = self.model.maintainer(self.now)
        renewed = self.model.renew_maintainer(self.now, holder, seq, lease)
        assert renewed is (live == (holder, seq))
        after = self.model.maintainer(self.now)
        if not renewed:
            assert after == before
        else:
            assert before is not None and after is not None
            assert after.expires_at >= before.expires_at  # never shortened
            assert after.expires_at >= self.model.to_datetime(self.now + lease)

    @rule(pick=picks)
    def release_lease(self, pick: int) -> None:
        holder, seq = self.fence(pick)
        live = self.live()
        released = self.model.release_maintainer(self.now, holder, seq)
        assert released is (live == (holder, seq))
        if released:
            assert self.live() is None

    # -- prune batches (I16, I17) --------------------------------------------------------

    @rule(pick=picks, limit=st.integers(min_value=1, max_value=5))
    def prune(self, pick: int, limit: int) -> None:
        _, seq = self.fence(pick)
        live = self.live()
        retention = self.model.get_retention(self.now)
        before = self.rows()
        audit_before = self.model.list_audit(self.now, 10_000, 0, None)
        locked = self.model.locked_rows()
        batch = self.model.prune_retained(self.now, seq, limit)
        after = self.rows()
        audit_after = self.model.list_audit(self.now, 10_000, 0, None)
        if live is None or live[1] != seq:  # I17: a stale or lapsed fence changes nothing
            event("stale fence" if live is not None else "no live lease")
            assert batch is None
            assert after.keys() == before.keys()
            assert audit_after == audit_before
            return
        assert batch is not None
        gone = [before[job_id] for job_id in before.keys() - after.keys()]
        assert len(gone) == batch.jobs_deleted <= limit
        self.pruned.update(row.id for row in gone)
        past = []
        for row in before.values():
            keep = getattr(retention.for_queue(row.queue), row.status, None)
            if row.finished and keep is not None and row.finished_at < self.now - keep:
                past.append(row)
        for row in gone:  # I16
            assert row.finished
            assert row in past
            assert row.id not in locked
        # Oldest first: every candidate older than a deleted row was deleted unless locked.
        if gone:
            newest_gone = max(row.finished_at for row in gone)
            for row in past:
                if row.finished_at < newest_gone:
                    assert row in gone or row.id in locked
        if not batch.more:  # room to spare: every unlocked row past its policy went
            assert {row.id for row in past} - locked == {row.id for row in gone}
        counted: dict[tuple[str, str], int] = {}
        for row in gone:
            counted[(row.queue, row.status)] = counted.get((row.queue, row.status), 0) + 1
        assert batch.deleted == counted
        audit_gone = {e.id for e in audit_before} - {e.id for e in audit_after}
        assert len(audit_gone) == batch.audit_deleted <= limit
        if retention.audit is None:
            assert not audit_gone
        event(f"batch deleted {'nothing' if not gone else 'jobs'}")
        cutoff = (
            None if retention.audit is None else self.model.to_datetime(self.now - retention.audit)
        )
        for entry in audit_before:
            if entry.id in audit_gone:
                assert cutoff is not None and entry.at < cutoff
        finished = [r.finished_at for r in after.values() if r.finished_at is not None]
        expected_age = None if not finished else self.now - min(finished)
        assert batch.oldest_finished_age == expected_age

    @rule(by_age=st.none() | steps)
    def preview(self, by_age: float | None) -> None:
        """A dry run counts every row the policies (or the age) make due, locked ones too,
        and changes nothing."""
        retention = self.model.get_retention(self.now)
        before = self.rows()
        audit = self.model.list_audit(self.now, 10_000, 0, None)
        found = self.model.retention_preview(self.now, by_age)
        due: dict[tuple[str, str], int] = {}
        for row in before.values():
            if not row.finished:
                continue
            policy = retention.for_queue(row.queue)
            keep = by_age if by_age is not None else getattr(policy, row.status)
            if keep is not None and row.finished_at < self.now - keep:
                due[(row.queue, row.status)] = due.get((row.queue, row.status), 0) + 1
        assert found.due == due
        if by_age is not None or retention.audit is None:
            assert found.audit_due == 0
        else:
            cutoff = self.model.to_datetime(self.now - retention.audit)
            assert found.audit_due == sum(1 for e in audit if e.at < cutoff)
        assert self.rows() == before
        event(f"preview found {'nothing' if not due else 'jobs'}")

    # -- after every step ----------------------------------------------------------------

    @invariant()
    def one_lease_at_most(self) -> None:
        info = self.model.maintainer(self.now)
        if info is None:
            assert self.claims == 0
        else:
            assert info.seq == self.claims
            assert (info.holder, info.seq) == self.fences[-1]

    @invariant()
    def only_prune_batches_delete(self) -> None:
        # Every job is a row until a batch deleted it (and the batch checked it was
        # finished and past its policy): nothing else here deletes.
        rows = self.rows()
        for job_id in self.enqueued:
            assert (job_id in rows) is (job_id not in self.pruned)


RetentionMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestRetentionModel = RetentionMachine.TestCase
