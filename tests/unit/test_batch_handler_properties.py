"""Property test of batch handlers (docs/protocol.rst §20, invariant I22): whole pools on the
memory backend, one ``trio.run(..., clock=MockClock(autojump_threshold=0))`` per example.

Hypothesis draws a batch, what the call does (answers, raises, answers nothing usable, or
runs past max_job_duration), each job's answer (succeeded, failed, retry, left out) and
which jobs are cancelled while the call runs. Each job must get exactly one outcome for its
first attempt, the one §20's rule gives (its own stop, else its batch's, else the answer's),
and the call must be cancelled exactly when the rule says: past D, or every job stopped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue import BatchContext, Job, JobFailed, JobRetry, JobSucceeded

OUTCOMES = ("succeeded", "failed", "retry", "unavailable")
CALLS = ("answers", "raises", "unusable", "overruns")
ANSWERS = ("succeeded", "failed", "retry", "missing")
D = 20.0  # max_job_duration: the call starts at once, so it is stopped at about D


@dataclasses.dataclass
class Plan:
    call: str
    answers: list[str]
    cancelled: set[int]  # positions in the batch


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    size = draw(st.integers(1, 6))
    answers = draw(st.lists(st.sampled_from(ANSWERS), min_size=size, max_size=size))
    cancelled = draw(st.sets(st.integers(0, size - 1)))
    return Plan(draw(st.sampled_from(CALLS)), answers, cancelled)


def expected(plan: Plan, position: int) -> str:
    """The outcome §20 gives the job at ``position`` (max_attempts 2: charged is retry)."""
    if position in plan.cancelled:
        return "failed"  # its own stop first: a cancellation, whatever else happens
    if plan.call != "answers":
        return "retry"  # the call's error, an unusable answer, or D: charged, for all
    return {"succeeded": "succeeded", "failed": "retry", "retry": "retry", "missing": "retry"}[
        plan.answers[position]
    ]


def answer_of(plan: Plan, jobs: Sequence[Job]) -> Any:
    if plan.call == "unusable":
        return {job.id + 1000: JobSucceeded() for job in jobs}
    made: dict[str, Any] = {
        "succeeded": JobSucceeded(),
        "failed": JobFailed("no"),
        "retry": JobRetry(3),
    }
    return {
        job.id: made[kind]
        for job, kind in zip(jobs, plan.answers, strict=True)
        if kind != "missing"
    }


async def run_plan(plan: Plan) -> tuple[dict[int, list[str]], list[int], bool]:
    """Each job's first-attempt outcomes, the job ids, and whether the call was cancelled."""
    rec = Recorder()
    calls: list[bool] = []  # one per call: was it cancelled?

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        if jobs[0].attempt > 1:
            return [JobSucceeded() for _ in jobs]
        rec.add("call", jobs[0].id)
        try:
            await rec.wait_for("cancels sent")
            wanted = [job.id for n, job in enumerate(jobs) if n in plan.cancelled]
            while not all(ctx.stop_requested(job_id) for job_id in wanted):
                await trio.sleep(0.1)  # until the directives arrive (within H, I12)
            await trio.lowlevel.checkpoint()  # where a call whose jobs all stopped is cancelled
            if plan.call == "overruns":
                await trio.sleep(1000)
        except trio.Cancelled:
            calls.append(True)
            raise
        calls.append(False)
        if plan.call == "raises":
            raise RuntimeError("the call broke")
        return answer_of(plan, jobs)

    cfg = config(
        rec,
        handler=None,
        batch_handler=handler,
        batch_size=len(plan.answers),
        max_job_duration=D,
    )
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = [await backend.enqueue("q", n, max_attempts=2) for n in range(len(plan.answers))]
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await rec.wait_for("call")
        for n in sorted(plan.cancelled):
            assert await backend.cancel(ids[n])
        rec.add("cancels sent", 0)
        for job_id in ids:
            await backend.wait_for(job_id, timeout=1000)
        nursery.cancel_scope.cancel()
    first = {
        job_id: [
            e.kind
            for e in rec.events
            if e.job_id == job_id and e.attempt == 1 and e.kind in OUTCOMES
        ]
        for job_id in ids
    }
    return first, ids, calls[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_each_job_gets_exactly_the_outcome_the_rule_gives(plan: Plan) -> None:
    outcomes, ids, cancelled = trio.run(
        run_plan, plan, clock=trio.testing.MockClock(autojump_threshold=0)
    )
    for position, job_id in enumerate(ids):
        assert outcomes[job_id] == [expected(plan, position)], (position, plan)
    every_job_stopped = len(plan.cancelled) == len(plan.answers)
    assert cancelled == (plan.call == "overruns" or every_job_stopped), plan
