"""Attempts that end without an outcome: the claim's records and quarantine (I14).

docs/protocol.rst §13. A worker that dies mid-job writes nothing; the claim that takes the
row again says so, runs a job whose attempts keep ending that way alone, and parks it when
its run alone ends so too. Three kinds of test here:

- whole pools on the memory backend under the mock clock: a quarantined job runs with
  nothing beside it in its pool (claimed by an idle pool; a busy pool drains first);
- the pool's setting, ``quarantine_after``, checked with the rest of the config (I1);
- a stateful property test of the reference model (``MemoryModel``): random claims (alone
  or not), crashes (leases left to lapse), outcomes and time, with an oracle that counts
  each job's attempts without an outcome; after every claim, I14 holds.

A crash of a real process is in tests/postgres/test_worker_crash.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
import trio
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.validation import EnqueueRequest
from trioqueue._runtime.config import check
from trioqueue._types import Ack, Claimed, Failure, Recorded, Release
from trioqueue.testing._conformance.crashes import parked, runs_alone, stopped

Q = "q"


async def _crash_twice(backend: trioqueue.MemoryBackend, *, lease: float) -> list[int]:
    """Claim what is claimable twice and leave each lease to lapse (a worker that died each
    time): what was claimed is quarantined for a pool whose ``quarantine_after`` is 2 once
    the second lease has run out, ``lease - 1`` seconds after this returns."""
    claimed: list[Claimed] = []
    for v in (1.0, lease):
        claimed = await backend.claim(Q, limit=10, worker_id="dead", visibility_timeout=v)
        await trio.sleep(1.0)
    return [c.job.id for c in claimed]


def _runs(rec: Recorder) -> list[tuple[int, float, float]]:
    """(job, start, end) of every handler run that returned."""
    ends = {(e.job_id, e.attempt): e.at for e in rec.of("returned")}
    return [
        (e.job_id, e.at, ends[(e.job_id, e.attempt)])
        for e in rec.of("started")
        if (e.job_id, e.attempt) in ends
    ]


def _beside(rec: Recorder, job_id: int) -> list[int]:
    """The jobs whose handler ran while ``job_id``'s did (an overlap of their runs)."""
    [(_, start, end)] = [r for r in _runs(rec) if r[0] == job_id]
    return [j for j, s, e in _runs(rec) if j != job_id and s < end and e > start]


async def _run_after_two_crashes(
    rec: Recorder, *, others: int, **settings: object
) -> tuple[int, list[int], trioqueue.JobInfo]:
    """A 3 s job crashed twice (its second lease lapsed), then ``others`` jobs of 1 s, all
    run to success by one pool of ``config(rec, **settings)``: the first job's id, the
    others' ids, and the first job as it ended."""
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [poison] = await backend.enqueue_many(Q, [{"sleep": 3}])
        await _crash_twice(backend, lease=1.0)
        ids = await backend.enqueue_many(Q, [{"sleep": 1}] * others)
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, **settings))
        with trio.fail_after(60):
            for job_id in [poison, *ids]:
                await rec.wait_for("succeeded", job_id)
        info = await backend.get_job(poison)
        nursery.cancel_scope.cancel()
    return poison, ids, info


async def test_I14_an_idle_pool_runs_a_quarantined_job_with_nothing_beside_it(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    poison, others, info = await _run_after_two_crashes(rec, others=4, concurrency=4)
    assert _beside(rec, poison) == []
    assert rec.of("started", poison)[0].attempt == 3
    # The others ran together once it was done (all four slots).
    end = rec.of("returned", poison)[0].at
    assert {e.at for e in rec.of("started") if e.job_id in others} == {end}
    assert (info.status, info.last_error) == ("succeeded", runs_alone(1, 2))


async def test_I14_a_busy_pool_drains_before_it_claims_a_quarantined_job(
    autojump_clock: object,
) -> None:
    """The quarantined job becomes claimable while the pool runs two jobs: the pool's next
    claim (when the shorter one ends) leaves it, takes one job, and says one waits; the pool
    then claims nothing until every batch has ended, and runs the job alone."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [poison] = await backend.enqueue_many(Q, [{"sleep": 1}])
        await _crash_twice(backend, lease=3.0)  # lapses 2 s from now
        short, long, third, fourth = await backend.enqueue_many(
            Q, [{"sleep": 5}, {"sleep": 10}, {"sleep": 5}, {"sleep": 1}]
        )
        cfg = config(rec, concurrency=2)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        with trio.fail_after(60):
            for job_id in [poison, short, long, third, fourth]:
                await rec.wait_for("succeeded", job_id)
        nursery.cancel_scope.cancel()
    starts = {e.job_id: e.at for e in rec.of("started")}
    t0 = starts[short]
    assert starts[long] == t0 and starts[third] == t0 + 5  # the claim that saw it waiting
    # Nothing new until both batches ended (at t0 + 10), then the poison job alone.
    assert starts[poison] == t0 + 10
    assert _beside(rec, poison) == []
    assert starts[fourth] == t0 + 11


async def test_I14_a_pool_with_quarantine_off_runs_it_beside_the_others(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    poison, others, info = await _run_after_two_crashes(
        rec, others=3, concurrency=4, quarantine_after=None
    )
    assert sorted(_beside(rec, poison)) == others
    assert info.last_error == stopped(2)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2", 2**31])
def test_I1_a_bad_quarantine_after_is_refused_with_the_other_problems(value: object) -> None:
    cfg = replace(config(Recorder()), quarantine_after=value, concurrency=0)  # type: ignore[arg-type]
    with pytest.raises(trioqueue.ConfigError) as caught:
        check(cfg)  # what run_worker_pool runs before it touches the backend
    problems = caught.value.problems
    assert any(p.startswith("quarantine_after must be a whole number from 1") for p in problems)
    assert any(p.startswith("concurrency") for p in problems)


@pytest.mark.parametrize("value", [None, 1, 2, 5])
def test_good_quarantine_after_values_are_accepted(value: int | None) -> None:
    check(replace(config(Recorder()), quarantine_after=value))


# -- the reference model, stateful ----------------------------------------------------------

V = 10.0


@dataclass
class Attempt:
    """One attempt the machine holds: its claim, and whether it was claimed to run alone."""

    claimed: Claimed
    alone: bool


@dataclass
class Oracle:
    """What the machine knows of one job, counted on its own."""

    lapses: int = 0  # attempts in a row that ended without an outcome, the current one aside
    attempt: Attempt | None = None  # the attempt in flight (no outcome written yet)
    finished: bool = False


class CrashMachine(RuleBasedStateMachine):
    """Claims alone or not, crashes, outcomes and time, on the reference model (I14)."""

    @initialize(k=st.integers(min_value=1, max_value=3))
    def setup(self, k: int) -> None:
        self.model = MemoryModel()
        self.now = 0.0
        self.k = k
        self.jobs: dict[int, Oracle] = {}
        self.max_attempts: dict[int, int] = {}

    @rule(n=st.integers(min_value=1, max_value=3), max_attempts=st.integers(2, 8))
    def enqueue(self, n: int, max_attempts: int) -> None:
        request = EnqueueRequest(Q, tuple(["{}"] * n), 0, 0.0, max_attempts, None, None)
        ids, _ = self.model.enqueue(self.now, request)
        for job_id in ids:
            self.jobs[job_id] = Oracle()
            self.max_attempts[job_id] = max_attempts

    @rule(alone=st.booleans(), limit=st.integers(min_value=1, max_value=5))
    def claim(self, alone: bool, limit: int) -> None:
        expired = self._expired()
        claims = self.model.claim(self.now, Q, limit, "w", V, quarantine_after=self.k, alone=alone)
        # I14: a row run alone comes alone, to a claim made alone.
        if any(c.alone for c in claims):
            assert alone and len(claims) == 1, claims
        taken = {c.job.id: c for c in claims}
        for job_id, oracle in expired.items():
            self._settle(job_id, oracle, taken.get(job_id))
        for job_id, claimed in taken.items():
            oracle = self.jobs[job_id]
            if job_id not in expired:
                assert oracle.attempt is None  # a queued row: its last attempt had one
                assert not claimed.alone
                oracle.lapses = 0
            oracle.attempt = Attempt(claimed, claimed.alone)

    def _expired(self) -> dict[int, Oracle]:
        """The jobs whose attempt in flight has lapsed: no outcome, lease run out."""
        return {
            job_id: oracle
            for job_id, oracle in self.jobs.items()
            if oracle.attempt is not None and oracle.attempt.claimed.lease_until <= self.now
        }

    def _settle(self, job_id: int, oracle: Oracle, claimed: Claimed | None) -> None:
        """After a claim: what it did to a row whose attempt lapsed."""
        assert oracle.attempt is not None
        was = oracle.attempt
        n = was.claimed.job.attempt
        info = self.model.get_job(self.now, job_id)
        assert info is not None
        if was.alone:  # parked, never run again
            event("parked")
            assert claimed is None
            assert (info.status, info.last_error) == ("failed", parked(n - oracle.lapses, n))
            oracle.finished, oracle.attempt = True, None
            return
        if n >= self.max_attempts[job_id]:
            assert claimed is None and info.status == "failed"
            assert info.last_error is not None and info.last_error.startswith("lease expired")
            oracle.finished, oracle.attempt = True, None
            return
        if claimed is None:  # left for a claim made alone, or beyond the limit
            assert info.status == "ready"
            return
        if claimed.alone:
            event("claimed alone")
        oracle.lapses += 1
        first = n - oracle.lapses + 1
        expected = runs_alone(first, n) if claimed.alone else stopped(n)
        assert info.last_error == expected
        # A quarantined row is never taken by a claim that is not alone.
        assert claimed.alone == (oracle.lapses >= self.k)

    @rule()
    def crash(self) -> None:
        """The worker holding every attempt in flight dies: nothing is written, and every
        lease runs out."""
        self.now += V + 1

    @rule(dt=st.sampled_from([0.5, 2.0, 5.0]))
    def wait(self, dt: float) -> None:
        self.now += dt

    @precondition(lambda self: self._live())
    @rule(pick=st.integers(min_value=0), kind=st.sampled_from(["ack", "fail", "release"]))
    def outcome(self, pick: int, kind: str) -> None:
        live = self._live()
        job_id = live[pick % len(live)]
        oracle = self.jobs[job_id]
        assert oracle.attempt is not None
        seq = oracle.attempt.claimed.job.claim_seq
        if kind == "ack":
            assert self.model.ack(self.now, [Ack(job_id, seq)]) == [True]
            oracle.finished = True
        elif kind == "fail":
            [recorded] = self.model.fail(self.now, [Failure(job_id, seq, "boom", 0.0)])
            assert recorded is not None
            oracle.finished = recorded is Recorded.FINAL
        else:
            assert self.model.release(self.now, [Release(job_id, seq)]) == [True]
        oracle.attempt = None

    def _live(self) -> list[int]:
        return sorted(
            job_id
            for job_id, oracle in self.jobs.items()
            if oracle.attempt is not None and oracle.attempt.claimed.lease_until > self.now
        )

    @invariant()
    def finished_jobs_are_finished_rows(self) -> None:
        for job_id, oracle in self.jobs.items():
            info = self.model.get_job(self.now, job_id)
            assert info is not None
            assert (info.status in ("succeeded", "failed")) == oracle.finished, (job_id, info)


CrashMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_I14_the_reference_model_quarantines_by_the_rule = CrashMachine.TestCase
