"""Whole pools in batch mode on the memory backend (docs/protocol.rst §20, invariant I22):
one batch handler call per claimed batch, exactly one outcome per job, the batch's scope
(fence, max_job_duration) over the call, and a job's own stop deciding its outcome whatever
the answer says. Driven by trio's MockClock."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue import BatchContext, Job, JobFailed, JobRetry, JobSucceeded, WorkerConfig
from trioqueue._runtime.config import check
from trioqueue.testing import hang

BatchHandler = Callable[[Sequence[Job], BatchContext], Awaitable[Any]]


def batch_config(rec: Recorder, handler: BatchHandler, **overrides: Any) -> WorkerConfig:
    """One slot, batches of up to 10: jobs enqueued before the pool starts share a call."""
    return config(rec, handler=None, batch_handler=handler, batch_size=10, **overrides)


async def run_until_finished(
    cfg: WorkerConfig, payloads: Sequence[Any], *, max_attempts: int = 3
) -> list[trioqueue.JobInfo]:
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = [await backend.enqueue("q", p, max_attempts=max_attempts) for p in payloads]
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        infos = [await backend.wait_for(i, timeout=1000) for i in ids]
        nursery.cancel_scope.cancel()
    return infos


async def test_each_job_gets_the_outcome_the_answer_gives_it(autojump_clock: object) -> None:
    rec = Recorder()
    calls: list[list[Any]] = []

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        calls.append([job.payload for job in jobs])
        answer: dict[int, Any] = {}
        for job in jobs:
            if job.payload == "ok" or job.attempt > 1:
                answer[job.id] = JobSucceeded({"attempt": job.attempt})
            elif job.payload == "failed":
                answer[job.id] = JobFailed("not this time")
            elif job.payload == "raised":
                answer[job.id] = JobFailed(ValueError("bad value"))
            else:
                answer[job.id] = JobRetry(7.5, "later, please")
        return answer

    cfg = batch_config(rec, handler, backoff=lambda attempt: 2.0)
    infos = await run_until_finished(cfg, ["ok", "failed", "raised", "retry"])
    assert calls[0] == ["ok", "failed", "raised", "retry"]  # the whole batch in one call
    assert [(i.status, i.attempts, i.result) for i in infos] == [
        ("succeeded", 1, {"attempt": 1}),
        ("succeeded", 2, {"attempt": 2}),
        ("succeeded", 2, {"attempt": 2}),
        ("succeeded", 2, {"attempt": 2}),
    ]
    failed, raised, retry = (i.id for i in infos[1:])
    assert [e.detail for e in rec.of("retry", retry)] == [7.5]  # its own delay, not backoff
    assert [e.detail for e in rec.of("retry", failed)] == [2.0]  # the pool's backoff
    again = rec.of("claimed", retry)[1].at - rec.of("claimed", retry)[0].at
    assert again >= 7.5
    assert rec.of("retry", raised) and rec.of("failed") == []


async def test_a_sequence_answers_in_the_jobs_order(autojump_clock: object) -> None:
    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        return [JobSucceeded(job.payload * 2) for job in jobs]

    infos = await run_until_finished(batch_config(Recorder(), handler), [1, 2, 3])
    assert [(i.status, i.result) for i in infos] == [
        ("succeeded", 2),
        ("succeeded", 4),
        ("succeeded", 6),
    ]


async def test_a_failure_on_the_last_attempt_is_final_and_keeps_its_exception(
    autojump_clock: object,
) -> None:
    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        return {jobs[0].id: JobFailed(KeyError("k")), jobs[1].id: JobRetry(1, "words")}

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        a = await backend.enqueue("q", "a", max_attempts=1)
        b = await backend.enqueue("q", "b", max_attempts=1)
        await nursery.start(trioqueue.run_worker_pool, backend, batch_config(Recorder(), handler))
        infos = [await backend.wait_for(i, timeout=100) for i in (a, b)]
        attempts = await backend.list_attempts(a)
        nursery.cancel_scope.cancel()
    assert [(i.status, i.last_error) for i in infos] == [
        ("failed", "KeyError: 'k'"),
        ("failed", "words"),
    ]
    assert attempts[-1].error_type == "KeyError"


async def test_an_exception_from_the_call_fails_every_job(autojump_clock: object) -> None:
    rec = Recorder()

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        raise RuntimeError("the batch broke")

    infos = await run_until_finished(batch_config(rec, handler), ["a", "b"], max_attempts=2)
    assert [(i.status, i.attempts, i.last_error) for i in infos] == [
        ("failed", 2, "RuntimeError: the batch broke"),
        ("failed", 2, "RuntimeError: the batch broke"),
    ]
    assert len(rec.of("retry")) == 2  # charged and retried, as a raised exception is


async def test_a_claim_hook_that_raises_fails_every_job_and_the_call_never_runs(
    autojump_clock: object,
) -> None:
    calls: list[int] = []

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        calls.append(len(jobs))
        return [JobSucceeded() for _ in jobs]

    async def on_job_claimed(job: Job) -> None:
        if job.payload == "bad":
            raise LookupError("hook broke")

    cfg = batch_config(Recorder(), handler, on_job_claimed=on_job_claimed)
    infos = await run_until_finished(cfg, ["a", "bad", "c"], max_attempts=1)
    assert calls == []
    assert [(i.status, i.last_error) for i in infos] == [("failed", "LookupError: hook broke")] * 3


async def test_a_call_that_asks_to_exit_fails_every_job_and_the_pool_raises_it(
    autojump_clock: object,
) -> None:
    """As a handler's SystemExit (docs/protocol.rst §4.1): every job of the batch is recorded
    failed, charged, then the pool raises the very exception."""
    raised = SystemExit(3)

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        await trio.sleep(1)
        raise raised

    async with trioqueue.open_memory() as backend:
        ids = [await backend.enqueue("q", n, max_attempts=1) for n in range(2)]
        with pytest.raises(SystemExit) as caught:
            await trioqueue.run_worker_pool(backend, batch_config(Recorder(), handler))
        infos = [await backend.get_job(i) for i in ids]
    assert caught.value is raised
    expected = "SystemExit: 3 (raised by the handler; the worker process exits)"
    assert [(i.status, i.last_error) for i in infos] == [("failed", expected)] * 2


async def test_a_job_left_out_of_the_answer_fails_on_its_own(autojump_clock: object) -> None:
    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        return {job.id: JobSucceeded() for job in jobs if job.payload != "forgotten"}

    infos = await run_until_finished(
        batch_config(Recorder(), handler), ["x", "forgotten"], max_attempts=1
    )
    assert infos[0].status == "succeeded"
    assert (infos[1].status, infos[1].last_error) == (
        "failed",
        f"the batch handler returned no outcome for job {infos[1].id}",
    )


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (None, "it is NoneType"),
        ("done", "it is str"),
        ([JobSucceeded()], "1 outcome(s) for 2 job(s)"),
        ({999: JobSucceeded()}, "999 is not a job id of this batch"),
        ([JobSucceeded(), "yes"], "the outcome for job {b} is str"),
    ],
)
async def test_an_unusable_answer_fails_every_job_naming_every_problem(
    autojump_clock: object, answer: Any, problem: str
) -> None:
    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        return answer

    infos = await run_until_finished(batch_config(Recorder(), handler), ["a", "b"], max_attempts=1)
    expected = problem.format(b=infos[1].id)
    for info in infos:
        assert info.status == "failed"
        assert info.last_error is not None
        assert info.last_error.startswith("the batch handler's answer is unusable: ")
        assert expected in info.last_error


async def test_a_result_with_no_json_form_fails_only_its_job(autojump_clock: object) -> None:
    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        return [JobSucceeded({1, 2}), JobSucceeded("fine")]

    infos = await run_until_finished(batch_config(Recorder(), handler), ["a", "b"], max_attempts=1)
    assert [i.status for i in infos] == ["failed", "succeeded"]
    assert "result is not JSON-serialisable" in (infos[0].last_error or "")


async def test_lease_loss_mid_batch_stops_the_call_and_writes_nothing(
    autojump_clock: object,
) -> None:
    """Renewals wedge: the fence (V = 10) cancels the call; no job's row is written (I9), and
    each job is reported unavailable. Its lease runs out and another attempt takes it: the
    first attempt is on record as lost, taken over by the claim (docs/protocol.rst §14)."""
    rec = Recorder()
    stopped: list[float] = []

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        if jobs[0].attempt > 1:
            return [JobSucceeded() for _ in jobs]
        try:
            await trio.sleep_forever()
        finally:
            stopped.append(trio.current_time())

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = [await backend.enqueue("q", n) for n in range(3)]
        start = trio.current_time()
        backend.inject("renew", hang())  # every renewal wedges until it is given up
        await nursery.start(trioqueue.run_worker_pool, backend, batch_config(rec, handler))
        await rec.wait_for("unavailable", count=3)
        backend.inject("renew", None)
        finished = [await backend.wait_for(i, timeout=100) for i in ids]
        attempts = [await backend.list_attempts(i) for i in ids]
        nursery.cancel_scope.cancel()
    assert len(stopped) == 1 and stopped[0] - start <= 10  # one call, stopped by its fence
    assert [e.detail for e in rec.of("unavailable")] == ["lease expired without renewal"] * 3
    assert [(i.status, i.attempts) for i in finished] == [("succeeded", 2)] * 3
    assert [[a.outcome for a in rows if a.attempt == 1] for rows in attempts] == [["lost"]] * 3


async def test_max_job_duration_stops_the_call_and_retries_every_job(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    stopped: list[float] = []

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        if jobs[0].attempt > 1:
            return [JobSucceeded() for _ in jobs]
        try:
            await trio.sleep(1000)
        finally:
            stopped.append(trio.current_time())
        return [JobSucceeded() for _ in jobs]  # never reached: the scope stops the sleep

    cfg = batch_config(rec, handler, max_job_duration=3)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = [await backend.enqueue("q", n) for n in range(2)]
        start = trio.current_time()
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        infos = [await backend.wait_for(i, timeout=1000) for i in ids]
        attempts = [(await backend.list_attempts(i))[0] for i in ids]
        nursery.cancel_scope.cancel()
    assert len(stopped) == 1 and stopped[0] - start == pytest.approx(3, abs=0.1)
    assert len(rec.of("retry")) == 2  # charged, retried
    assert [(i.status, i.attempts) for i in infos] == [("succeeded", 2)] * 2
    assert [a.error for a in attempts] == [
        "claim hooks and handler ran past max_job_duration of 3s"
    ] * 2


def guard_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "trioqueue.guard"]


async def test_a_cancel_of_one_job_does_not_stop_the_call(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """The cancelled job ends failed as a cancellation whatever the answer says; the call
    sees it through ``ctx.stop_requested`` and goes on for its siblings (and the log says
    so: the call is not cancelled)."""
    caplog.set_level(logging.INFO, "trioqueue.guard")
    rec = Recorder()
    seen: dict[int, bool] = {}
    cancelled_flag: list[bool] = []

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        await rec.wait_for("cancel sent")
        while not ctx.stop_requested(jobs[0].id):
            await trio.sleep(0.5)
        for job in jobs:
            seen[job.id] = ctx.stop_requested(job.id)
        cancelled_flag.append(ctx.cancel_requested)
        await trio.sleep(1)  # still running: the batch was not stopped
        return [JobSucceeded("done") for _ in jobs]

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = [await backend.enqueue("q", n) for n in range(3)]
        await nursery.start(trioqueue.run_worker_pool, backend, batch_config(rec, handler))
        await rec.wait_for("claimed", count=3)
        await trio.sleep(0.1)
        assert await backend.cancel(ids[0])
        rec.add("cancel sent", ids[0])
        infos = [await backend.wait_for(i, timeout=100) for i in ids]
        nursery.cancel_scope.cancel()
    assert seen == {ids[0]: True, ids[1]: False, ids[2]: False}
    assert cancelled_flag == [False]
    assert guard_lines(caplog) == [
        f"job {ids[0]}: cancel requested, the batch handler's call goes on for the other "
        "jobs (ctx.stop_requested tells it)"
    ]
    assert (infos[0].status, infos[0].result) == ("failed", None)
    assert (infos[0].last_error or "").startswith("cancelled: cancel requested")
    assert [(i.status, i.result) for i in infos[1:]] == [("succeeded", "done")] * 2


async def test_a_cancel_of_every_job_stops_the_call(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "trioqueue.guard")
    rec = Recorder()
    stopped: list[bool] = []

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        try:
            await trio.sleep_forever()
        finally:
            stopped.append(ctx.cancel_requested)

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = [await backend.enqueue("q", n) for n in range(2)]
        await nursery.start(trioqueue.run_worker_pool, backend, batch_config(rec, handler))
        await rec.wait_for("claimed", count=2)
        await trio.sleep(0.1)
        for job_id in ids:
            assert await backend.cancel(job_id)
        infos = [await backend.wait_for(i, timeout=100) for i in ids]
        nursery.cancel_scope.cancel()
    assert stopped == [True]
    # Both cancels come back in one renewal's answer: every job is stopped by then.
    assert guard_lines(caplog) == [
        f"job {job_id}: cancel requested, cancelling the batch handler's call (every job "
        "of it is stopped)"
        for job_id in ids
    ]
    assert [i.status for i in infos] == ["failed", "failed"]
    assert all((i.last_error or "").startswith("cancelled: cancel requested") for i in infos)


async def test_progress_per_job_rides_the_renewal(autojump_clock: object) -> None:
    rec = Recorder()

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        for n, job in enumerate(jobs):
            ctx.report_progress(job.id, n / 4)
        ctx.report_progress(jobs[0].id, float("nan"))  # ignored, as for a handler
        assert ctx.progress(jobs[0].id) == 0.0
        rec.add("reported", jobs[0].id)
        await trio.sleep(5)  # two heartbeats (H = 2)
        return [JobSucceeded() for _ in jobs]

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = [await backend.enqueue("q", n) for n in range(3)]
        await nursery.start(trioqueue.run_worker_pool, backend, batch_config(rec, handler))
        await rec.wait_for("reported")
        await trio.sleep(3)
        running = [(await backend.get_job(i)).progress for i in ids]
        finished = [await backend.wait_for(i, timeout=100) for i in ids]
        nursery.cancel_scope.cancel()
    assert running == [0.0, 0.25, 0.5]
    assert [i.progress for i in finished] == [0.0, 0.25, 0.5]


async def test_a_batch_of_one_job_is_one_call_too(autojump_clock: object) -> None:
    calls: list[int] = []

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        calls.append(len(jobs))
        return {jobs[0].id: JobSucceeded(ctx.queue)}

    cfg = batch_config(Recorder(), handler)
    cfg = dataclasses.replace(cfg, batch_size=1)
    infos = await run_until_finished(cfg, ["a", "b"])
    assert calls == [1, 1]
    assert [(i.status, i.result) for i in infos] == [("succeeded", "q")] * 2


def test_the_config_names_every_problem_of_a_batch_handler() -> None:
    def sync_batch(jobs: Any, ctx: Any) -> Any:
        return []

    async def handler(payload: Any, ctx: Any) -> None:
        return None

    with pytest.raises(trioqueue.ConfigError) as caught:
        check(WorkerConfig(handler=handler, batch_handler=sync_batch, transactional=True))
    problems = caught.value.problems
    assert "handler and batch_handler are mutually exclusive: give one of them" in problems
    assert any(p.startswith("batch_handler must be an async function") for p in problems)
    assert any(p.startswith("batch_handler does not run in transactional mode") for p in problems)
    with pytest.raises(trioqueue.ConfigError) as neither:
        check(WorkerConfig())
    assert neither.value.problems == ("a handler is required: give handler (or batch_handler)",)


def test_outcomes_refuse_what_no_backend_stores() -> None:
    for delay in (-1, float("nan"), float("inf"), 1e12):
        with pytest.raises(ValueError, match=r"JobRetry\.delay must be a number"):
            JobRetry(delay)
    with pytest.raises(TypeError):
        JobRetry(True)
    with pytest.raises(TypeError, match=r"JobFailed\.error must be a str or an Exception"):
        JobFailed(42)  # type: ignore[arg-type]
