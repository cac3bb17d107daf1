"""trioqueue.testing.run_handler: a user's handler under a real pool, with scheduled faults.

Every run is on the autojump clock (pytest-trio's ``autojump_clock``), so the times in a
record are exact: the job is claimed at 0, and a fault at ``at`` acts at ``at``. The
expected outcomes are the protocol's (docs/protocol.rst): a lost lease writes nothing and
the row decides what happens next; a cancel is a final failure; ``max_job_duration`` is a
charged failure.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue.testing import (
    HandlerRun,
    cancel_job,
    hang,
    lose_lease,
    run_handler,
    run_handler_sync,
    stuck_renewals,
)


async def steps(payload: Any, ctx: Any) -> str:
    """Ten steps of ten seconds, reporting progress before each."""
    for step in range(10):
        ctx.report_progress(step / 10)
        await trio.sleep(10)
    return "done"


def kinds(run: HandlerRun) -> list[str]:
    return [e.kind for e in run.events if e.kind not in ("renewal", "progress")]


async def test_a_handler_that_returns_succeeds_with_its_result(autojump_clock: object) -> None:
    run = await run_handler(steps, {"n": 1})
    assert run.finished and run.outcome == "succeeded"
    assert run.job.status == "succeeded" and run.job.result == "done"
    assert run.job.attempts == 1 and run.job.last_error is None
    [attempt] = run.attempts
    assert (attempt.started_at, attempt.ended_at) == (0.0, 100.0)
    assert attempt.result == "done" and attempt.cancelled_at is None and attempt.error is None
    assert kinds(run) == ["claimed", "started", "returned", "succeeded"]


async def test_progress_is_recorded_with_its_times(autojump_clock: object) -> None:
    async def reports(payload: Any, ctx: Any) -> None:
        ctx.report_progress(0.25)
        await trio.sleep(5)
        ctx.report_progress(2.0)  # out of range: ignored by the context, so not recorded
        ctx.report_progress(math.nan)
        ctx.report_progress(0.75)

    run = await run_handler(reports)
    assert run.progress == ((0.0, 0.25), (5.0, 0.75))
    assert run.job.progress == 0.75  # the ack stored the latest value


async def test_renewals_are_counted_one_per_heartbeat(autojump_clock: object) -> None:
    async def sleeps(payload: Any, ctx: Any) -> None:
        await trio.sleep(95)

    run = await run_handler(sleeps, visibility_timeout=30, heartbeat_interval=10)
    # The first beat goes out at the claim, then one every H while the handler runs.
    assert [e.at for e in run.of("renewal")] == [10.0 * n for n in range(10)]
    assert run.renewals == 10


async def test_the_handler_sees_the_payload_and_resources(autojump_clock: object) -> None:
    seen: list[object] = []

    async def handler(payload: Any, ctx: Any) -> None:
        seen.extend([payload, ctx.resources, ctx.attempt, ctx.queue])

    await run_handler(handler, {"k": "v"}, resources="client", queue="emails")
    assert seen == [{"k": "v"}, "client", 1, "emails"]


async def test_a_raising_handler_fails_and_its_exception_is_kept(autojump_clock: object) -> None:
    async def broken(payload: Any, ctx: Any) -> None:
        raise KeyError("missing")

    run = await run_handler(broken)
    assert run.outcome == "failed" and isinstance(run.error, KeyError)
    assert run.job.status == "failed" and run.job.last_error == "KeyError: 'missing'"
    assert kinds(run) == ["claimed", "started", "raised", "failed"]


async def test_a_raising_handler_with_attempts_left_is_retried(autojump_clock: object) -> None:
    async def fails_once(payload: Any, ctx: Any) -> str:
        if ctx.attempt == 1:
            raise RuntimeError("flaky")
        return "ok"

    run = await run_handler(fails_once, max_attempts=3, backoff=lambda attempt: 7.0)
    assert [a.outcome for a in run.attempts] == ["retried", "succeeded"]
    assert run.of("retried")[0].detail == 7.0
    assert run.attempts[1].claimed_at == pytest.approx(7.0, abs=1.0)  # within a poll
    assert run.job.status == "succeeded" and run.job.attempts == 2


async def test_a_lost_lease_stops_the_handler_at_the_fence(autojump_clock: object) -> None:
    """V=30, H=10: the renewal at 20 is the last one through, so the fence is at 50."""
    run = await run_handler(steps, faults=[lose_lease(at=25)])
    [attempt] = run.attempts
    assert attempt.outcome == "unavailable" and attempt.cancelled_at == 50.0
    assert attempt.message == "lease expired without renewal"
    assert [e.detail for e in run.of("lease_lost")] == ["lease_expired"]
    # The attempt wrote nothing; its row's lease lapsed, and on its final attempt the next
    # claim failed it.
    assert run.job.status == "failed" and run.job.last_error is not None
    assert run.job.last_error.startswith("lease expired on the final attempt")


async def test_a_lost_lease_with_attempts_left_is_run_again(autojump_clock: object) -> None:
    run = await run_handler(steps, max_attempts=2, faults=[lose_lease(at=25)])
    assert [a.outcome for a in run.attempts] == ["unavailable", "succeeded"]
    assert run.attempts[1].claimed_at == 50.0  # the row's lease ended with the fence
    assert run.job.status == "succeeded" and run.job.attempts == 2


async def test_a_reclaimed_row_stops_the_handler_at_the_next_renewal(
    autojump_clock: object,
) -> None:
    run = await run_handler(steps, max_attempts=3, faults=[lose_lease(25, reclaimed=True)])
    first = run.attempts[0]
    assert first.outcome == "unavailable" and first.cancelled_at == 30.0
    assert first.message == "reclaimed by another worker"
    # Attempt 2 was the other worker's; it never finished, so its lease ran out (at
    # 25 + V) and this pool ran attempt 3.
    assert [a.number for a in run.attempts] == [1, 3]
    assert run.attempts[1].claimed_at == pytest.approx(55.0, abs=1.0)
    assert run.job.status == "succeeded"


async def test_a_cancel_stops_the_handler_and_fails_the_job(autojump_clock: object) -> None:
    run = await run_handler(steps, max_attempts=5, faults=[cancel_job(at=25)])
    [attempt] = run.attempts  # a cancelled job is never retried
    assert attempt.outcome == "cancelled" and attempt.cancelled_at == 25.0
    assert run.job.status == "failed" and run.job.last_error is not None
    assert run.job.last_error.startswith("cancelled")
    assert kinds(run) == ["claimed", "started", "fault", "handler_cancelled", "cancelled"]


async def test_max_job_duration_is_a_charged_failure(autojump_clock: object) -> None:
    run = await run_handler(steps, max_job_duration=35, max_attempts=2, backoff=lambda a: 1.0)
    assert [a.outcome for a in run.attempts] == ["retried", "failed"]
    assert [a.cancelled_at for a in run.attempts] == [35.0, pytest.approx(71.0, abs=1.0)]
    assert run.job.status == "failed" and run.job.attempts == 2
    assert run.job.last_error == "claim hooks and handler ran past max_job_duration of 35s"


@pytest.mark.parametrize("interruptible", [False, True])
async def test_stuck_renewals_end_at_the_fence(autojump_clock: object, interruptible: bool) -> None:
    run = await run_handler(steps, faults=[stuck_renewals(25, interruptible=interruptible)])
    [attempt] = run.attempts
    assert attempt.outcome == "unavailable" and attempt.cancelled_at == 50.0
    assert [e.detail for e in run.of("lease_lost")] == ["lease_expired"]
    assert [e.at for e in run.of("renewal") if e.at > 20] == [50.0]  # the stuck one


async def test_a_fault_lasts_only_as_long_as_its_attempt(autojump_clock: object) -> None:
    run = await run_handler(steps, max_attempts=2, faults=[stuck_renewals(25)])
    assert [a.outcome for a in run.attempts] == ["unavailable", "succeeded"]
    assert run.of("lease_lost")[0].attempt == 1  # attempt 2 renewed as usual


async def test_a_hung_handler_is_given_up_on(autojump_clock: object) -> None:
    async def hangs(payload: Any, ctx: Any) -> None:
        await trio.sleep_forever()

    run = await run_handler(hangs, give_up_after=120)
    assert not run.finished
    assert run.attempts[0].cancelled_at == 120.0  # the harness stopped the pool
    # Released uncharged, as a pool's shutdown releases what still runs.
    assert run.job.status == "ready" and run.job.attempts == 0
    assert run.of("unavailable")[0].detail == "released at worker shutdown"


def test_run_handler_sync_runs_an_async_handler_on_a_mock_clock() -> None:
    run = run_handler_sync(steps, faults=[lose_lease(25)])
    assert run.attempts[0].cancelled_at == 50.0  # no real time: 50 s on the mock clock


def test_run_handler_sync_runs_a_sync_handler_in_a_thread() -> None:
    def handler(payload: Any, ctx: Any) -> int:
        ctx.report_progress(0.5)
        return int(payload["n"]) * 2

    run = run_handler_sync(handler, {"n": 21})
    assert run.outcome == "succeeded" and run.job.result == 42
    assert [value for _, value in run.progress] == [0.5]
    assert kinds(run) == ["claimed", "started", "returned", "succeeded"]


def test_a_raising_sync_handler_is_recorded() -> None:
    def handler(payload: Any, ctx: Any) -> None:
        raise ValueError("no")

    run = run_handler_sync(handler)
    assert run.outcome == "failed"
    assert isinstance(run.error, ValueError)
    assert kinds(run) == ["claimed", "started", "raised", "failed"]


async def test_a_sync_handler_under_an_autojump_clock_is_refused(autojump_clock: object) -> None:
    def handler(payload: Any, ctx: Any) -> None:
        pass

    with pytest.raises(RuntimeError, match="run_handler_sync"):
        await run_handler(handler)


async def test_bad_settings_are_refused_as_a_pool_refuses_them(autojump_clock: object) -> None:
    with pytest.raises(trioqueue.ConfigError) as caught:
        await run_handler(steps, visibility_timeout=10, heartbeat_interval=10)
    assert "heartbeat_interval (10s) must be less than visibility_timeout (10s)" in str(
        caught.value
    )
    with pytest.raises(trioqueue.ConfigError, match="handler must be callable"):
        await run_handler("not a handler")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"faults": [hang()]}, TypeError, "lose_lease"),
        ({"faults": 3}, TypeError, "list of scenarios"),
        ({"give_up_after": 0}, ValueError, "give_up_after"),
        ({"give_up_after": "1"}, TypeError, "give_up_after"),
        ({"max_attempts": 0}, ValueError, "max_attempts"),
    ],
)
async def test_bad_arguments_are_refused(
    autojump_clock: object, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        await run_handler(steps, **options)


@pytest.mark.parametrize("at", [-1, math.inf, math.nan, True, "5"])
def test_a_scenario_time_must_be_a_finite_number(at: Any) -> None:
    for make in (lose_lease, cancel_job, stuck_renewals):
        with pytest.raises((TypeError, ValueError), match="at must be"):
            make(at)


async def test_a_single_scenario_needs_no_list(autojump_clock: object) -> None:
    run = await run_handler(steps, faults=cancel_job(at=5))
    assert run.outcome == "cancelled"


async def test_each_snoozed_run_is_an_attempt_of_its_own(autojump_clock: object) -> None:
    """A snooze gives its attempt number back (docs/protocol.rst §17): the harness keeps
    every run, in order, each ended by its own outcome (no hook follows a snooze)."""

    calls = []

    async def waits_twice(payload: Any, ctx: Any) -> str:
        calls.append(ctx.attempt)
        ctx.report_progress(0.5)
        if len(calls) <= 2:
            raise trioqueue.Snooze(60)
        return "ready at last"

    run = await run_handler(waits_twice)
    assert run.finished and run.outcome == "succeeded"
    assert calls == [1, 1, 1]
    assert (run.job.attempts, run.job.snoozes, run.job.result) == (1, 2, "ready at last")
    assert [(a.number, a.outcome) for a in run.attempts] == [
        (1, "snoozed"),
        (1, "snoozed"),
        (1, "succeeded"),
    ]
    first, second, last = run.attempts
    assert first.ended_at is not None and second.claimed_at >= first.ended_at + 60
    assert [len(a.progress) for a in run.attempts] == [1, 1, 1]
    assert isinstance(first.error, trioqueue.Snooze)
    assert last.result == "ready at last" and last.error is None
    assert kinds(run) == [
        *["claimed", "started", "raised", "snoozed"] * 2,
        *["claimed", "started", "returned", "succeeded"],
    ]


def test_a_sync_handler_may_snooze_too() -> None:
    calls = []

    def once(payload: Any, ctx: Any) -> trioqueue.Snooze | str:
        calls.append(ctx.attempt)
        return trioqueue.Snooze(0.01) if len(calls) == 1 else "done"

    run = run_handler_sync(once)
    assert [(a.number, a.outcome) for a in run.attempts] == [(1, "snoozed"), (1, "succeeded")]
    assert isinstance(run.attempts[0].result, trioqueue.Snooze)
    assert run.job.snoozes == 1
