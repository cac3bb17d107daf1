"""A handler that asks the process to exit (docs/protocol.rst §4.1).

``SystemExit``, ``KeyboardInterrupt`` or any other ``BaseException`` that is not trio's own
cancellation, raised by a claim hook or a handler, is never a success: the attempt is
recorded as the handler's charged failure, the jobs it cut short beside it are released
uncharged, and only then does the pool raise the exception, as it was raised, so that the
process exits as it asks.

Whole pools on the memory backend under trio's MockClock (one test with a thread uses the
real clock: a thread under MockClock lets the fake time jump); the transactional rollback
and the command line's exit code are checked on PostgreSQL
(tests/postgres/test_worker_exits.py).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

import trioqueue
from tests._pool_harness import Recorder, config, log_records
from trioqueue._core.outcome import EXITING, Outcome, decide, decide_attempt
from trioqueue._core.rules import OutcomeKind, StopReason
from trioqueue._errors import exit_request, leaves
from trioqueue.testing import delay, error, hang

Handler = Callable[[Any, trioqueue.JobContext], Awaitable[None]]


def exits_with(exc: BaseException, rec: Recorder) -> Handler:
    """Payload ``{"exit": true}`` raises ``exc`` after 1 s; any other sleeps 5 s."""

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        rec.add("started", ctx.job_id, None, ctx.attempt)
        if payload.get("exit"):
            await trio.sleep(1)
            raise exc
        await trio.sleep(5)
        rec.add("returned", ctx.job_id, None, ctx.attempt)

    return handler


async def run_until_exit(
    backend: trioqueue.MemoryBackend, cfg: trioqueue.WorkerConfig
) -> BaseException:
    """Run the pool until it raises; what it raised."""
    with trio.fail_after(60):  # virtual seconds: a pool that never raises fails here
        try:
            await trioqueue.run_worker_pool(backend, cfg)
        except BaseException as exc:
            return exc
    raise AssertionError("the pool returned without raising")


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt()], ids=repr)
async def test_a_handler_that_asks_to_exit_fails_its_attempt_and_the_pool_raises_it(
    autojump_clock: object, raised: BaseException
) -> None:
    """max_attempts=1: the job ends ``failed`` (never ``succeeded``), its error names the
    exception, the failure hook runs, and the pool raises that very exception, not wrapped in
    trio's exception groups, once the failure is written."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("q", {"exit": True}, max_attempts=1)
        cfg = config(rec, handler=exits_with(raised, rec))
        exc = await run_until_exit(backend, cfg)
        info = await backend.get_job(job_id)
    assert exc is raised
    name = type(raised).__name__
    expected = f"{name}: 3" if isinstance(raised, SystemExit) else name
    expected += " (raised by the handler; the worker process exits)"
    assert (info.status, info.attempts, info.last_error) == ("failed", 1, expected)
    assert [(e.at, e.detail) for e in rec.of("failed", job_id)] == [(1.0, expected)]
    assert rec.of("succeeded") == []


async def test_an_exit_on_an_early_attempt_is_retried(autojump_clock: object) -> None:
    """The failure is charged like any handler error: with attempts left, the job goes back
    to the queue after its backoff, and the next worker runs it again."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("q", {"exit": True}, max_attempts=3)
        cfg = config(rec, handler=exits_with(SystemExit(0), rec), backoff=lambda attempt: 7.0)
        exc = await run_until_exit(backend, cfg)
        info = await backend.get_job(job_id)
    assert isinstance(exc, SystemExit) and exc.code == 0
    assert (info.status, info.attempts) == ("scheduled", 1)  # waiting out its backoff
    assert info.last_error == "SystemExit: 0 (raised by the handler; the worker process exits)"
    assert [(e.at, e.detail) for e in rec.of("retry", job_id)] == [(1.0, 7.0)]


@pytest.mark.parametrize(("concurrency", "batch_size"), [(2, 1), (1, 2)])
async def test_jobs_cut_short_beside_it_are_released_uncharged(
    autojump_clock: object, concurrency: int, batch_size: int
) -> None:
    """A job running beside the one that exits, in another batch or in the same one, is
    cancelled as the pool goes down: it did nothing wrong, so it is released (its attempt
    not charged), never recorded as succeeded."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend:
        bystander = await backend.enqueue("q", {}, max_attempts=1)
        exiting = await backend.enqueue("q", {"exit": True}, max_attempts=1)
        cfg = config(
            rec,
            handler=exits_with(SystemExit(3), rec),
            concurrency=concurrency,
            batch_size=batch_size,
        )
        exc = await run_until_exit(backend, cfg)
        info = await backend.get_job(bystander)
        exited = await backend.get_job(exiting)
    assert isinstance(exc, SystemExit) and exc.code == 3
    assert [e.at for e in rec.of("started", bystander)] == [0.0]
    assert rec.of("returned") == []
    assert (info.status, info.attempts, info.last_error) == ("ready", 0, None)
    assert [(e.at, e.detail) for e in rec.of("unavailable", bystander)] == [(1.0, EXITING)]
    assert exited.status == "failed"
    assert rec.of("succeeded") == []


async def test_an_exit_raised_with_other_errors_names_them_all(autojump_clock: object) -> None:
    """A handler's own nursery may raise the exit together with an error (in one group):
    the attempt's error names both, and the pool still raises the exit."""
    rec = Recorder()

    async def two_errors(payload: Any, ctx: trioqueue.JobContext) -> None:
        await trio.sleep(1)
        raise BaseExceptionGroup("both", [ValueError("bad row"), SystemExit(4)])

    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("q", {}, max_attempts=1)
        exc = await run_until_exit(backend, config(rec, handler=two_errors))
        info = await backend.get_job(job_id)
    assert isinstance(exc, SystemExit) and exc.code == 4
    assert info.last_error == (
        "ValueError: bad row; SystemExit: 4 (raised by the handler; the worker process exits)"
    )


async def test_a_claim_hook_that_exits_fails_the_attempt(autojump_clock: object) -> None:
    """The claim hook runs in the attempt's scope: its exit is the attempt's failure."""
    rec = Recorder()

    async def on_job_claimed(job: trioqueue.Job) -> None:
        raise SystemExit(5)

    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("q", {}, max_attempts=1)
        cfg = config(rec, on_job_claimed=on_job_claimed)
        exc = await run_until_exit(backend, cfg)
        info = await backend.get_job(job_id)
    assert isinstance(exc, SystemExit) and exc.code == 5
    assert rec.of("started") == []
    assert (info.status, info.last_error) == (
        "failed",
        "SystemExit: 5 (raised by the handler; the worker process exits)",
    )


async def test_a_sync_handler_that_exits_fails_its_attempt() -> None:
    """``sys.exit()`` in a synchronous handler's thread comes back to the pool as the
    handler's exception: the same rule (real clock: the handler runs in a thread)."""

    def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        sys.exit(6)

    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("q", {}, max_attempts=1)
        cfg = trioqueue.WorkerConfig(handler=handler, queue="q", poll_interval=0.05)
        exc = await run_until_exit(backend, cfg)
        info = await backend.get_job(job_id)
    assert isinstance(exc, SystemExit) and exc.code == 6
    assert (info.status, info.last_error) == (
        "failed",
        "SystemExit: 6 (raised by the handler; the worker process exits)",
    )


@pytest.mark.parametrize(
    "batches_nursery", ["closed", "open"], ids=["nursery-closed", "nursery-open"]
)
async def test_rows_claimed_as_the_pool_goes_down_are_released_uncharged_unstarted(
    autojump_clock: object, batches_nursery: str
) -> None:
    """A claim under way when a handler exits, held shielded by a fault (as a driver
    call can be), returns once the pool is stopping: its row is released uncharged at
    once, fenced by claim_seq, and never started (no hook, no handler), rather than
    started in a stopping pool or left to lapse with its attempt spent.

    nursery-closed: the claim returns at 4, after the pool's batches are all done.
    nursery-open: it returns at 2, while the exiting job's failure is still being written.
    """
    rec = Recorder()
    late: list[int] = []
    claim_returns = 4.0 if batches_nursery == "closed" else 2.0

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        rec.add("started", ctx.job_id, None, ctx.attempt)
        if payload.get("exit"):
            # The next claim takes its row at once and answers late, shielded.
            fault = hang(claim_returns, interruptible=False, after=True, times=1)
            backend.inject("claim", fault)
            late.append(await backend.enqueue("q", {}, max_attempts=1))  # wakes the pool
            if batches_nursery == "open":
                backend.inject("fail", delay(3, times=1))  # the failure is written 1 to 4
            await trio.sleep(1)
            raise SystemExit(3)
        await trio.sleep(5)
        rec.add("returned", ctx.job_id, None, ctx.attempt)

    async with trioqueue.open_memory() as backend:
        exiting = await backend.enqueue("q", {"exit": True}, max_attempts=1)
        cfg = config(rec, handler=handler, concurrency=2, visibility_timeout=60)
        exc = await run_until_exit(backend, cfg)
        stopped_at = trio.current_time()
        [claimed] = late
        info = await backend.get_job(claimed)
        exited = await backend.get_job(exiting)
    assert isinstance(exc, SystemExit) and exc.code == 3
    assert isinstance(exc.__cause__, BaseExceptionGroup)
    assert [type(e) for e in leaves(exc.__cause__)] == [SystemExit]  # nothing beside it
    assert exited.status == "failed"
    assert rec.kinds(claimed) == []  # never handed to a hook or the handler
    assert (info.status, info.attempts, info.last_error) == ("ready", 0, None)
    assert stopped_at == max(claim_returns, 4.0 if batches_nursery == "open" else 1.0)


async def test_a_failed_release_of_rows_claimed_as_the_pool_goes_down_lets_them_lapse(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """The release of such a row fails: it is logged as not recorded, the row keeps its
    lease (to lapse, as a dead worker's would), and the pool still raises the exit alone."""
    rec = Recorder()
    late: list[int] = []

    async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
        backend.inject("claim", hang(4, interruptible=False, after=True, times=1))
        backend.inject("release", error(times=1))
        late.append(await backend.enqueue("q", {}, max_attempts=1))
        await trio.sleep(1)
        raise SystemExit(3)

    async with trioqueue.open_memory() as backend:
        await backend.enqueue("q", {}, max_attempts=1)
        cfg = config(rec, handler=handler, concurrency=2, visibility_timeout=60)
        exc = await run_until_exit(backend, cfg)
        info = await backend.get_job(late[0])
    assert isinstance(exc, SystemExit) and isinstance(exc.__cause__, BaseExceptionGroup)
    assert [type(e) for e in leaves(exc.__cause__)] == [SystemExit]
    assert (info.status, info.attempts) == ("running", 1)
    [record] = log_records(caplog, "record_failed")
    assert (record.name, getattr(record, "job_id", None)) == ("trioqueue.worker", late[0])
    assert "could not release it (BackendError('injected error in release'))" in record.message


# -- the rule in the sans-IO core -----------------------------------------------------


def test_decide_releases_work_cut_short_by_the_pool_going_down() -> None:
    """Work that nothing of its own stopped, cancelled from outside its batch, is released
    uncharged, even on its last attempt."""
    result = decide(
        job_stop=None,
        batch_stop=None,
        error=None,
        attempt=3,
        max_attempts=3,
        max_job_duration=None,
        exiting=True,
    )
    assert result == Outcome(OutcomeKind.RELEASE, EXITING)


@pytest.mark.parametrize("stop", list(StopReason))
def test_a_stop_that_came_first_still_decides_when_the_pool_goes_down(stop: StopReason) -> None:
    """I8: the first stop wins; the pool going down later changes nothing."""
    facts: dict[str, Any] = {"error": None, "attempt": 1, "max_attempts": 3}
    facts["max_job_duration"] = 300.0
    assert decide(job_stop=stop, batch_stop=None, exiting=True, **facts) == decide(
        job_stop=stop, batch_stop=None, **facts
    )
    fired = decide_attempt(
        job_stop=None, scope_fired=True, batch_stop=lambda: stop, exiting=True, **facts
    )
    assert fired == (decide(job_stop=None, batch_stop=stop, **facts), stop)


def test_decide_attempt_releases_what_the_pool_going_down_cut_short() -> None:
    got = decide_attempt(
        job_stop=None,
        scope_fired=False,
        batch_stop=lambda: pytest.fail("nothing fired: the batch's stop is not asked"),
        error=None,
        attempt=1,
        max_attempts=1,
        max_job_duration=None,
        exiting=True,
    )
    assert got == (Outcome(OutcomeKind.RELEASE, EXITING), None)


def test_exit_request_finds_the_exit_inside_trio_groups() -> None:
    asked = SystemExit(2)
    nested = BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [ValueError(), asked])])
    assert exit_request(nested) is asked
    interrupt = KeyboardInterrupt()
    assert exit_request(interrupt) is interrupt
    assert exit_request(BaseExceptionGroup("g", [ValueError(), RuntimeError()])) is None
    assert exit_request(ValueError()) is None
