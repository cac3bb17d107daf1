"""Property tests: whole worker pools on the memory backend under random faults.

Each example runs one pool inside ``trio.run(..., clock=MockClock(autojump_threshold=0))``,
so minutes of fake time pass in milliseconds and every timing is exact. Hypothesis draws the
timings, the workload, the faults and the cancellations; the assertions are the protocol's (docs/protocol.rst)
invariants, observed from the outside (hooks and handler milestones).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from functools import partial
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trioqueue
from tests._pool_harness import Recorder, config, finish_all, inject_faults
from trioqueue import testing as faults

SLACK = 0.25  # the in-flight renewal slack of the fence (docs/protocol.rst §3)
OUTCOMES = ("succeeded", "failed", "retry", "unavailable")
FAULT_OPS = ("claim", "renew", "ack", "fail")
HEAL_AT = 100.0  # every fault is lifted then, so every job must finish (I13)
GIVE_UP = 5000.0  # fake seconds; an example that needs longer has lost a job

pool_settings = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def timings(draw: st.DrawFn) -> dict[str, Any]:
    v = draw(st.sampled_from([2.0, 5.0, 10.0]))
    h = v * draw(st.sampled_from([0.2, 0.25, 0.5, 0.8]))
    d = draw(st.none() | st.sampled_from([1.0, 4.0, 15.0]))
    return {"visibility_timeout": v, "heartbeat_interval": h, "max_job_duration": d}


def fault(op: str) -> st.SearchStrategy[object]:
    times = st.integers(1, 4)
    kinds = [
        st.builds(faults.error, times=times),
        st.builds(faults.delay, st.sampled_from([0.1, 1.0, 6.0]), after=st.booleans(), times=times),
        st.builds(
            faults.hang,
            seconds=st.sampled_from([3.0, 30.0]),
            interruptible=st.booleans(),
            after=st.booleans(),
            times=times,
        ),
    ]
    if op == "renew":
        kinds.append(st.builds(faults.omit, st.just(list(range(1, 20))), times=times))
    return st.one_of(kinds)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    jobs = draw(
        st.lists(
            st.fixed_dictionaries(
                {"sleep": st.sampled_from([0, 0.5, 3, 12, 40]), "fail_attempts": st.integers(0, 2)}
            ),
            min_size=1,
            max_size=8,
        )
    )
    injections = []
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(FAULT_OPS))
        injections.append((draw(st.floats(0, 60)), op, draw(fault(op))))
    cancels = draw(st.lists(st.tuples(st.floats(0, 60), st.integers(0, len(jobs) - 1)), max_size=2))
    return {
        "timings": draw(timings()),
        "concurrency": draw(st.integers(1, 4)),
        "batch_size": draw(st.integers(1, 3)),
        "max_attempts": draw(st.integers(1, 3)),
        "jobs": jobs,
        "injections": sorted(injections, key=lambda i: i[0]),
        "cancels": sorted(cancels),
    }


def run_scenario(scenario: dict[str, Any]) -> tuple[Recorder, dict[int, Any], dict[int, int]]:
    rec = Recorder()
    finals: dict[int, Any] = {}
    claimed_when_cancelled: dict[int, int] = {}  # job id -> its attempts claimed by then

    async def cancel_some(backend: trioqueue.MemoryBackend, ids: list[int]) -> None:
        for at, index in scenario["cancels"]:
            await trio.sleep_until(at)
            if await backend.cancel(ids[index]):
                # The attempts claimed by then: a claim already made may still start its
                # handler after the cancel (its answer was slow), but no new one may come.
                claimed = (await backend.get_job(ids[index])).attempts
                claimed_when_cancelled.setdefault(ids[index], claimed)

    async def main() -> None:
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            ids = [
                await backend.enqueue("q", job, max_attempts=scenario["max_attempts"])
                for job in scenario["jobs"]
            ]
            cfg = config(
                rec,
                concurrency=scenario["concurrency"],
                batch_size=scenario["batch_size"],
                backoff=trioqueue.ExponentialBackoff(initial=1, cap=8),
                **scenario["timings"],
            )
            nursery.start_soon(
                partial(inject_faults, heal_at=HEAL_AT, ops=FAULT_OPS),
                backend,
                scenario["injections"],
            )
            nursery.start_soon(cancel_some, backend, ids)
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            finals.update(await finish_all(backend, ids, give_up=GIVE_UP, ops=FAULT_OPS))
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return rec, finals, claimed_when_cancelled


def attempt_spans(rec: Recorder, job_id: int) -> dict[int, tuple[float, float]]:
    """When each attempt's handler started and stopped running."""
    starts = {e.attempt: e.at for e in rec.of("started", job_id)}
    spans = {}
    for attempt, start in starts.items():
        ends = [
            e.at
            for e in rec.events
            if e.job_id == job_id
            and e.attempt == attempt
            and e.kind in ("stopped", "returned", "raised")
        ]
        spans[attempt] = (start, min(ends, default=math.inf))
    return spans


@pool_settings
@given(scenarios())
def test_pool_invariants_under_random_faults(scenario: dict[str, Any]) -> None:
    rec, finals, claimed_when_cancelled = run_scenario(scenario)
    d = scenario["timings"]["max_job_duration"]

    # I13: nothing lost; every job ends succeeded or failed once faults are lifted.
    assert {info.status for info in finals.values()} <= {"succeeded", "failed"}, finals

    for job_id in finals:
        claimed = {e.attempt: e.at for e in rec.of("claimed", job_id)}
        # I8: exactly one outcome per claimed attempt.
        outcomes = Counter(
            e.attempt for e in rec.events if e.job_id == job_id and e.kind in OUTCOMES
        )
        assert outcomes == Counter(list(claimed)), (job_id, rec.kinds(job_id))
        spans = attempt_spans(rec, job_id)
        # I2, end to end: two attempts of one job never run at once (beyond the slack).
        ordered = sorted(spans.values())
        for (_, end), (next_start, _) in itertools.pairwise(ordered):
            assert next_start >= end - SLACK, (job_id, ordered)
        # I4: claim hooks plus handler stop at registration + D.
        if d is not None:
            for attempt, (_, end) in spans.items():
                assert end <= claimed[attempt] + d + 1e-9, (job_id, attempt)
        # I12: a cancelled job is never claimed again: every attempt that ran was claimed
        # before the cancel (one claimed just before may start after it, if the claim's
        # answer came late, and is then stopped by the directive its first renewal brings).
        if job_id in claimed_when_cancelled:
            later = [attempt for attempt in spans if attempt > claimed_when_cancelled[job_id]]
            assert later == [], (job_id, claimed_when_cancelled[job_id], spans)
            if finals[job_id].status == "failed" and rec.of("stopped", job_id):
                assert finals[job_id].last_error is not None


@settings(max_examples=40, deadline=None)
@given(
    timings=timings(),
    lost_at=st.floats(1, 30),
    hang=st.booleans(),
)
def test_I3_after_database_loss_handler_stops_within_window(
    timings: dict[str, Any], lost_at: float, hang: bool
) -> None:
    """The database goes away at ``lost_at``: the handler stops in [V - H, V + slack]."""
    v, h = timings["visibility_timeout"], timings["heartbeat_interval"]
    rec = Recorder()

    async def main() -> None:
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            await backend.enqueue("q", {"sleep": 10_000}, max_attempts=1)
            cfg = config(rec, visibility_timeout=v, heartbeat_interval=h)
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            await trio.sleep_until(lost_at)
            lost = faults.hang(interruptible=True) if hang else faults.error()
            for op in FAULT_OPS:
                backend.inject(op, lost)
            await rec.wait_for("unavailable")
            for op in FAULT_OPS:
                backend.inject(op, None)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    [stop] = rec.of("stopped")
    assert v - h - 1e-9 <= stop.at - lost_at <= v + SLACK + 1e-9, (stop.at, lost_at)
