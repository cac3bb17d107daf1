"""A stateful property test of duplicates in the reference model (docs/protocol.rst §18, I20).

The machine enqueues with dedup keys under every ``on_duplicate`` policy, as both backends
do (``enqueue``, then ``revise_duplicate`` when a policy other than keep meets a held key),
lets time pass, claims, acks, fails (retried or final), cancels and expires leases. After
every step it checks:

- I20: a revision changes only a waiting holder (status queued), and exactly as its policy
  says (replace: payload, priority and run time; debounce: the run time); a running holder,
  leased or expired, is left column for column as it was, and answered as running; a
  finished job holds no key, so the enqueue adds;
- a dedup key is held by at most one unfinished job of its queue, and ``find_dedup`` names it;
- claim order after revisions: a claim takes the claimable rows of best priority then id,
  and leaves no claimable row behind that ranks before one it took (the model's claim
  heaps are kept in step with a changed priority or run time);
- a running attempt's payload is the one its claim handed out.
"""

from __future__ import annotations

import json
from dataclasses import astuple
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from trioqueue._backends.memory.model import MemoryModel, Row
from trioqueue._backends.validation import EnqueueRequest, revision_outcome
from trioqueue._types import Ack, EnqueueOutcome, Failure, OnDuplicate

Q = "q"
KEYS = ("k1", "k2", "k3")
V = 10.0
WORKER = "w"

keys = st.sampled_from(KEYS)
policies = st.sampled_from(("keep", "replace", "debounce"))
delays = st.sampled_from([0.0, 0.0, 0.0, 1.0, 5.0, 30.0])
steps = st.sampled_from([0.0, 0.5, 2.0, 6.0, 15.0])
picks = st.integers(min_value=0, max_value=1000)


def snapshot(row: Row) -> tuple[Any, ...]:
    """Every column of the row (the claim-order bookkeeping left out)."""
    return astuple(row)[:-2]


class DuplicateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000.0
        self.model = MemoryModel()
        self.next_payload = 0
        self.handed_out: dict[tuple[int, int], str] = {}  # (id, claim_seq) -> payload

    def rows(self) -> list[Row]:
        return list(self.model.rows())

    def running(self) -> list[Row]:
        return [r for r in self.rows() if r.status == "running"]

    # -- rules ---------------------------------------------------------------------------

    @rule(
        key=keys,
        policy=policies,
        priority=st.integers(min_value=0, max_value=3),
        delay=delays,
        group=st.sampled_from([None, None, None, "g"]),
    )
    def enqueue(
        self, key: str, policy: OnDuplicate, priority: int, delay: float, group: str | None
    ) -> None:
        if policy == "debounce" and delay == 0.0:
            delay = 1.0  # (refused by validation: debounce needs a delay)
        self.next_payload += 1
        payload = json.dumps(self.next_payload)
        request = EnqueueRequest(Q, (payload,), priority, delay, 3, key, group)
        holder_id = self.model.find_dedup(Q, key)
        holder = None if holder_id is None else next(r for r in self.rows() if r.id == holder_id)
        before = None if holder is None else snapshot(holder)
        waiting = holder is not None and holder.status == "queued"

        ids, added = self.model.enqueue(self.now, request)
        outcome: EnqueueOutcome = "added" if added else "kept"
        if not added and policy != "keep":
            answer = self.model.revise_duplicate(self.now, request, policy)
            assert answer is not None
            assert answer[0] == ids[0]
            outcome = revision_outcome(policy, answer[1])

        if holder is None:
            assert outcome == "added"
            assert self.model.find_dedup(Q, key) == ids[0]
            return
        assert ids == [holder.id]
        if policy == "keep":
            assert outcome == "kept"
            assert snapshot(holder) == before
        elif not waiting:
            assert outcome == "running"
            assert snapshot(holder) == before  # I20: a running holder is not touched
        else:
            assert outcome == ("replaced" if policy == "replace" else "debounced")
            assert holder.not_visible_until == self.now + delay
            if policy == "replace":
                assert (holder.payload, holder.priority) == (payload, priority)
            else:
                assert before is not None
                assert (holder.payload, holder.priority) == (before[2], before[3])

    @rule(priority=st.integers(min_value=0, max_value=3), delay=delays)
    def enqueue_plain(self, priority: int, delay: float) -> None:
        """A job without a key: others for the revised rows to be ordered among."""
        self.next_payload += 1
        request = EnqueueRequest(Q, (json.dumps(self.next_payload),), priority, delay, 3, None)
        ids, added = self.model.enqueue(self.now, request)
        assert added
        assert len(ids) == 1

    @rule(limit=st.sampled_from([1, 1, 2]))
    def claim(self, limit: int) -> None:
        claimable = [
            r
            for r in self.rows()
            if r.status in ("queued", "running") and r.not_visible_until <= self.now
        ]
        claims = self.model.claim(self.now, Q, limit, WORKER, V)
        taken = {c.job.id for c in claims}
        for claimed in claims:
            self.handed_out[(claimed.job.id, claimed.job.claim_seq)] = json.dumps(
                claimed.job.payload
            )
        rank = {r.id: (-r.priority, r.id) for r in claimable}
        # Grouped rows wait for their group's turn, and lapsed leases may be dead-lettered:
        # only ungrouped waiting rows are certain to be claimable, so only they are compared.
        left = [r for r in claimable if r.id not in taken and r.group is None]
        left = [r for r in left if r.status == "queued"]
        if taken:
            worst = max(rank[i] for i in taken if i in rank)
            assert all(rank[r.id] > worst for r in left), (taken, left)
        if len(taken) < limit:
            assert not left, (taken, left)

    @rule(pick=picks)
    def ack(self, pick: int) -> None:
        running = self.running()
        if running:
            row = running[pick % len(running)]
            self.model.ack(self.now, [Ack(row.id, row.claim_seq)])

    @rule(pick=picks, retry=st.none() | st.sampled_from([0.0, 3.0]))
    def fail(self, pick: int, retry: float | None) -> None:
        running = self.running()
        if running:
            row = running[pick % len(running)]
            self.model.fail(self.now, [Failure(row.id, row.claim_seq, "boom", retry)])

    @rule(pick=picks)
    def cancel(self, pick: int) -> None:
        rows = self.rows()
        if rows:
            self.model.cancel(self.now, rows[pick % len(rows)].id)

    @rule(step=steps)
    def wait(self, step: float) -> None:
        self.now += step

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def a_key_has_one_unfinished_holder(self) -> None:
        for key in KEYS:
            holders = [r.id for r in self.rows() if r.dedup_key == key and not r.finished]
            assert len(holders) <= 1
            assert self.model.find_dedup(Q, key) == (holders[0] if holders else None)

    @invariant()
    def a_running_attempt_has_the_payload_its_claim_handed_out(self) -> None:
        for row in self.running():
            handed = self.handed_out[(row.id, row.claim_seq)]
            assert json.loads(row.payload) == json.loads(handed)


DuplicateMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=30, deadline=None
)
test_duplicates_model = DuplicateMachine.TestCase
