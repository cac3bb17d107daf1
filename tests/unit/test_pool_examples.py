"""Whole worker pools on the memory backend, driven by trio's MockClock.

Each test names the docs/protocol.rst invariant it pins. Times are exact: the autojump clock makes
the fake time advance only when every task is blocked, so a claim at t=0 happens at t=0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
import trio
import trio.testing

import trioqueue
from tests._pool_harness import Recorder, config
from trioqueue._core.wire import RenewItem
from trioqueue._types import PoolBeat
from trioqueue.testing import delay, error, hang, omit


async def _enqueue(
    backend: trioqueue.MemoryBackend, *payloads: object, **options: object
) -> list[int]:
    return [await backend.enqueue("q", p, **options) for p in payloads]  # type: ignore[arg-type]


async def test_I3_every_renewal_refused_stops_handler_within_lease(autojump_clock: object) -> None:
    """V=2, H=1, every renewal refused: a 10 s handler stops in [2, 2.25] s after its claim."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("renew", error())
        [job_id] = await _enqueue(backend, {"sleep": 10})
        cfg = config(rec, visibility_timeout=2, heartbeat_interval=1)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        unavailable = await rec.wait_for("unavailable", job_id)
        nursery.cancel_scope.cancel()
    claimed = rec.of("claimed", job_id)[0].at
    stopped = rec.of("stopped", job_id)[0].at
    assert 2.0 <= stopped - claimed <= 2.25
    assert "lease expired" in unavailable.detail
    assert rec.of("retry") == [] and rec.of("failed") == []  # not retried by the worker
    assert backend.statistics()["calls"].get("fail", 0) == 0
    assert backend.statistics()["calls"].get("ack", 0) == 0


async def test_I5_stuck_renewal_is_abandoned_and_a_later_batch_renews_elsewhere(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("renew", hang(interruptible=False, times=1))  # the first renewal wedges
        [first] = await _enqueue(backend, {"sleep": 100})
        cfg = config(rec, concurrency=2, visibility_timeout=10, heartbeat_interval=2)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await trio.sleep(1)
        [second] = await _enqueue(backend, {"sleep": 100})
        await trio.sleep(20)
        # The first batch lost its lease at its fence (t=10); the second was renewed on
        # another connection once the stuck call was abandoned (t=10.25) and runs on.
        assert rec.of("stopped", first)[0].at == pytest.approx(10.0)
        assert rec.of("stopped", second) == []
        assert backend.statistics()["calls"]["renew"] >= 3
        nursery.cancel_scope.cancel()
        backend.inject("renew", None)  # release the wedged call so the pool can exit


async def test_I5_no_third_renewal_while_two_are_stuck(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("renew", hang(interruptible=False))  # every renewal wedges
        [first] = await _enqueue(backend, {"sleep": 1000})
        cfg = config(rec, concurrency=2, visibility_timeout=10, heartbeat_interval=2)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await trio.sleep(1)
        [second] = await _enqueue(backend, {"sleep": 1000})
        peak_renewals = 0
        for _ in range(120):  # two minutes, checked every second
            await trio.sleep(1)
            stats = backend.statistics()
            peak_renewals = max(peak_renewals, stats["calls"]["renew"])
        assert peak_renewals == 2  # the abandoned one and the one that may not be abandoned
        # Both batches were fenced at their own leases meanwhile.
        assert rec.of("stopped", first) and rec.of("stopped", second)
        backend.inject("renew", None)  # the wedge lifts: renewals flow again
        await trio.sleep(1)
        nursery.cancel_scope.cancel()


async def test_I6_abandoned_renewal_answering_extended_changes_nothing(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        # The first renewal takes effect, but its "extended" answer arrives 20 s late.
        backend.inject("renew", hang(seconds=20, interruptible=False, after=True, times=1))
        [job_id] = await _enqueue(backend, {"sleep": 100}, max_attempts=1)
        cfg = config(rec, visibility_timeout=5, heartbeat_interval=2)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await rec.wait_for("unavailable", job_id)
        before = list(rec.events)
        await trio.sleep(30)  # the late answer arrives at t=20
        assert rec.events == before
        nursery.cancel_scope.cancel()
    assert rec.of("stopped", job_id)[0].at == pytest.approx(5.0)
    assert rec.kinds(job_id) == ["claimed", "started", "stopped", "unavailable"]


async def test_I7_claim_answer_after_lease_expiry_never_runs_handler(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("claim", delay(11, after=True, times=1))  # V=10: the answer is late
        [job_id] = await _enqueue(backend, {"sleep": 1}, max_attempts=1)
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        await rec.wait_for("unavailable", job_id)
        nursery.cancel_scope.cancel()
    assert rec.kinds(job_id) == ["claimed", "unavailable"]
    assert "expired" in rec.of("unavailable", job_id)[0].detail


async def test_claim_that_stalled_before_taking_its_rows_leases_them_from_then(
    autojump_clock: object,
) -> None:
    """Issue 7 item 2: a claim held up for longer than V before it took its rows (a table
    lock, in PostgreSQL) delivers live leases, counted from when the rows were taken."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("claim", delay(11, times=1))  # V=10: the claim takes its rows at t=11
        [job_id] = await _enqueue(backend, {"sleep": 1}, max_attempts=1)
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        with trio.move_on_after(60):
            await rec.wait_for("succeeded", job_id)
        nursery.cancel_scope.cancel()
    assert rec.kinds(job_id) == ["claimed", "started", "returned", "succeeded"]
    assert rec.of("started", job_id)[0].at == pytest.approx(11.0)


async def test_I4_blocked_claim_hook_stops_at_max_job_duration(autojump_clock: object) -> None:
    rec = Recorder()
    hook_stopped: list[float] = []

    async def blocking_claim_hook(job: trioqueue.Job) -> None:
        try:
            await trio.sleep_forever()
        finally:
            hook_stopped.append(trio.current_time())

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {"sleep": 0}, max_attempts=1)
        cfg = config(rec, max_job_duration=1, on_job_claimed=blocking_claim_hook)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        failed = await rec.wait_for("failed", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert hook_stopped == [pytest.approx(1.0)]
    assert rec.of("started", job_id) == []  # the handler never ran
    assert info.status == "failed"
    assert info.last_error == "claim hooks and handler ran past max_job_duration of 1s"
    assert failed.detail == info.last_error


async def test_I4_duration_is_retryable(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {"sleep": 5}, max_attempts=2)
        cfg = config(rec, max_job_duration=1, backoff=lambda attempt: 3.0)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await rec.wait_for("failed", job_id)
        nursery.cancel_scope.cancel()
    assert [e.detail for e in rec.of("retry", job_id)] == [3.0]
    starts = [e.at for e in rec.of("started", job_id)]
    stops = [e.at for e in rec.of("stopped", job_id)]
    assert [b - a for a, b in zip(starts, stops, strict=True)] == [1.0, 1.0]


async def test_I10_fifty_long_batches_cost_one_renewal_per_beat(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory(connections=60) as backend, trio.open_nursery() as nursery:
        await _enqueue(backend, *[{"sleep": 1000}] * 50)
        cfg = config(rec, concurrency=50, visibility_timeout=10, heartbeat_interval=2)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await rec.wait_for("started", count=50)
        await trio.sleep(5)  # past every batch's first beat
        before = backend.statistics()["calls"]["renew"]
        await trio.sleep(20)  # ten beats
        after = backend.statistics()["calls"]["renew"]
        assert rec.of("stopped") == []  # nobody lost a lease meanwhile
        nursery.cancel_scope.cancel()
    assert after - before == 10


async def test_free_slots_are_filled_by_one_claim_each_batch_on_its_own(
    autojump_clock: object,
) -> None:
    """Three free slots, batch 2: one claim statement takes six rows as three batches, whose
    first beats share one renewal statement."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = await _enqueue(backend, *[{"sleep": 1}] * 6)
        cfg = config(rec, concurrency=3, batch_size=2, heartbeat_interval=5)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await trio.sleep(0.5)  # virtual time: the handlers sleep until t=1
        started = backend.statistics()["calls"]
        with trio.fail_after(30):
            for job_id in ids:
                await rec.wait_for("succeeded", job_id)
        finished = backend.statistics()["calls"]
        nursery.cancel_scope.cancel()
    assert [e.at for e in rec.of("started")] == [0] * 6
    assert (started["claim"], started["renew"]) == (1, 1)  # one claim, first beats together
    assert finished["ack"] == 1  # all six finished together


async def test_one_claim_for_several_slots_still_makes_batch_size_batches(
    autojump_clock: object,
) -> None:
    """Renewals never answer for the first job: only its own batch (itself and the job
    claimed with it) stops at the lease; the other batches of the same claim go on."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = await _enqueue(backend, *[{"sleep": 10}] * 6)
        backend.inject("renew", omit([ids[0]]))
        # (Quarantine off: the first two jobs' leases lapse again and again, and would end
        # up run alone, docs/protocol.rst §13; this test is about batches.)
        cfg = config(
            rec,
            concurrency=3,
            batch_size=2,
            visibility_timeout=4,
            heartbeat_interval=1,
            quarantine_after=None,
        )
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        with trio.fail_after(60):
            for job_id in ids[2:]:
                await rec.wait_for("succeeded", job_id)
        nursery.cancel_scope.cancel()
    for job_id in ids[:2]:
        assert "lease expired" in rec.of("unavailable", job_id)[0].detail
        assert rec.of("unavailable", job_id)[0].at <= 4.25
    assert [e.at for e in rec.of("succeeded")][-4:] == [10] * 4


async def test_I10_first_beat_is_immediate(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await _enqueue(backend, {"sleep": 100})
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        await rec.wait_for("started")
        await trio.sleep(0.001)
        assert backend.statistics()["calls"]["renew"] == 1
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("batch_size", [1, 3])
async def test_I10_jobs_done_within_their_first_steps_are_owed_no_first_beat(
    autojump_clock: object, batch_size: int
) -> None:
    """A handler that returns without a checkpoint has ended before its batch's first beat
    would go out (the guard lets a new batch take its first steps first): no renewal
    statement is sent for it (docs/protocol.rst §10), and the job still succeeds."""

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        return None

    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ids = await _enqueue(backend, {}, {}, {})
        cfg = config(rec, handler=handler, batch_size=batch_size)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        for job_id in ids:
            await rec.wait_for("succeeded", job_id)
        calls = backend.statistics()["calls"]
        nursery.cancel_scope.cancel()
    assert calls.get("renew", 0) == 0
    assert calls["ack"] >= 1


async def test_I10_a_batch_with_one_job_still_running_gets_its_first_beat_at_once(
    autojump_clock: object,
) -> None:
    """In a batch where one job returns at once and another sleeps, the first beat goes out
    at the claim's instant and carries both (the ended one is still renewed until its
    outcome is written)."""
    carried: list[tuple[float, set[int]]] = []

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        renew = backend.renew

        async def recording_renew(
            items: Sequence[RenewItem],
            *,
            visibility_timeout: float,
            beat: PoolBeat | None = None,
        ) -> Mapping[int, trioqueue.Verdict]:
            carried.append((trio.current_time(), {item.job_id for item in items}))
            return await renew(items, visibility_timeout=visibility_timeout, beat=beat)

        backend.renew = recording_renew  # type: ignore[method-assign]
        _, slow = await _enqueue(backend, {}, {"sleep": 5})
        rec = Recorder()
        cfg = config(rec, batch_size=2)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await rec.wait_for("started", slow)
        await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    first_at, first_jobs = carried[0]
    assert first_at == rec.of("started", slow)[0].at
    assert slow in first_jobs


async def test_I11_progress_rides_on_the_heartbeat(autojump_clock: object) -> None:
    seen: list[float | None] = []

    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        for value in (0.25, float("nan"), 2.0, -1, 0.5):
            ctx.report_progress(value)
        await trio.sleep(3)  # a beat at t=2 carries the latest valid value
        info = await backend.get_job(ctx.job_id)
        seen.append(info.progress)
        ctx.report_progress(0.9)

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {})
        cfg = config(Recorder(), handler=handler)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        while (await backend.get_job(job_id)).status != "succeeded":
            await trio.sleep(1)
        final = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert seen == [0.5]
    assert final.progress == 0.9  # the ack carries the last value


async def test_I11_no_progress_until_a_valid_value(autojump_clock: object) -> None:
    async def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        ctx.report_progress(float("inf"))
        await trio.sleep(5)

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {})
        await nursery.start(trioqueue.run_worker_pool, backend, config(Recorder(), handler=handler))
        await trio.sleep(3)
        assert (await backend.get_job(job_id)).progress is None
        nursery.cancel_scope.cancel()


async def test_I12_cancel_reaches_running_handler_at_once(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {"sleep": 100})
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        await rec.wait_for("started", job_id)
        await trio.sleep(0.5)
        cancelled_at = trio.current_time()
        assert await backend.cancel(job_id) is True
        failed = await rec.wait_for("failed", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert rec.of("stopped", job_id)[0].at == cancelled_at  # the notice renews at once
    assert info.status == "failed" and info.last_error is not None
    assert info.last_error.startswith("cancelled")
    assert failed.detail == info.last_error
    assert rec.of("retry", job_id) == [] and len(rec.of("started", job_id)) == 1


async def test_I12_cancel_without_notice_arrives_with_next_heartbeat(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {"sleep": 100})
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec, heartbeat_interval=2))
        await rec.wait_for("started", job_id)
        backend.drop_notices = True  # as if NOTIFY were lost
        await trio.sleep(0.5)
        cancelled_at = trio.current_time()
        await backend.cancel(job_id)
        await rec.wait_for("failed", job_id)
        nursery.cancel_scope.cancel()
    assert 0 < rec.of("stopped", job_id)[0].at - cancelled_at <= 2


async def test_I12_failure_after_an_unseen_cancel_is_reported_final_not_retried(
    autojump_clock: object,
) -> None:
    """The handler raises before the worker hears of a cancel: the backend refuses the retry,
    and the hooks say so (on_job_failed, never on_job_retry)."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {"sleep": 1, "fail_attempts": 1}, max_attempts=3)
        cfg = config(rec, heartbeat_interval=5, visibility_timeout=20)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await rec.wait_for("started", job_id)
        backend.drop_notices = True  # the worker will not hear of the cancel before t=5
        await trio.sleep(0.5)  # after the first beat (t=0), before the raise (t=1)
        await backend.cancel(job_id)
        with trio.fail_after(30):  # virtual seconds: a retry instead would never say failed
            failed = await rec.wait_for("failed", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert rec.of("raised", job_id) and rec.of("retry") == []
    assert (
        failed.detail == "cancelled: cancel requested (RuntimeError: planned failure on attempt 1)"
    )
    assert (info.status, info.last_error) == ("failed", failed.detail)


async def test_I12_cancel_before_start_fails_at_once() -> None:
    async with trioqueue.open_memory() as backend:
        [job_id] = await _enqueue(backend, {"sleep": 1})
        assert await backend.cancel(job_id) is True
        info = await backend.get_job(job_id)
        assert info.status == "failed" and (info.last_error or "").startswith("cancelled")
        assert await backend.cancel(job_id) is False


async def test_I8_handler_swallowing_cancel_gets_one_outcome(autojump_clock: object) -> None:
    rec = Recorder()
    cancels_seen: list[float] = []

    async def stubborn(payload: object, ctx: trioqueue.JobContext) -> None:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            cancels_seen.append(trio.current_time())
        # Swallowed: trio cancels it again at its next checkpoint while the scope is cancelled.
        with pytest.raises(trio.Cancelled):
            await trio.sleep(1)
        cancels_seen.append(trio.current_time())

    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        # Lease (V=4, renewals refused) and duration (D=4) deadlines fall together.
        backend.inject("renew", error())
        [job_id] = await _enqueue(backend, {}, max_attempts=1)
        cfg = config(rec, handler=stubborn, visibility_timeout=4, heartbeat_interval=1,
                     max_job_duration=4)  # fmt: skip
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await rec.wait_for("unavailable", job_id)
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert cancels_seen == [4.0, 4.0]
    outcomes = [e for e in rec.events if e.kind in ("succeeded", "failed", "retry", "unavailable")]
    assert [(e.kind, e.job_id) for e in outcomes] == [("unavailable", job_id)]


async def test_I13_failing_job_retries_then_succeeds(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {"fail_attempts": 2})
        cfg = config(rec, backoff=trioqueue.ExponentialBackoff(initial=1, jitter=0))
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await rec.wait_for("succeeded", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert [e.detail for e in rec.of("retry", job_id)] == [1.0, 2.0]
    assert info.status == "succeeded" and info.attempts == 3
    assert info.last_error is not None and "planned failure on attempt 2" in info.last_error


async def test_I13_dead_after_max_attempts(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {"fail_attempts": 99}, max_attempts=3)
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        await rec.wait_for("failed", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert len(rec.of("started", job_id)) == 3 and len(rec.of("retry", job_id)) == 2
    assert info.status == "failed" and info.attempts == 3


async def test_I13_outcome_unwritable_until_the_lease_ends_says_why(autojump_clock: object) -> None:
    """Every ack fails (the database is down, say): retried while the lease holds, then the
    job is reported unavailable with the write failure as its reason, and runs again."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {"sleep": 0.5})
        cfg = config(rec, visibility_timeout=4, heartbeat_interval=1)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await rec.wait_for("started", job_id)
        for op in ("renew", "ack"):  # the database goes away after the first beat
            backend.inject(op, error(OSError("connection refused")))
        with trio.fail_after(30):
            unavailable = await rec.wait_for("unavailable", job_id)
        for op in ("renew", "ack"):
            backend.inject(op, None)
        with trio.fail_after(30):
            await rec.wait_for("succeeded", job_id)
        nursery.cancel_scope.cancel()
    assert unavailable.detail.startswith("outcome (succeeded) not recorded: writing it failed")
    assert "connection refused" in unavailable.detail
    assert backend.statistics()["calls"]["ack"] > 2  # retried meanwhile
    assert [e.attempt for e in rec.of("started", job_id)] == [1, 2]


async def test_graceful_shutdown_lets_short_jobs_finish_and_releases_the_rest(
    autojump_clock: object,
) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend:
        short, long = await _enqueue(backend, {"sleep": 3}, {"sleep": 100})
        async with trio.open_nursery() as nursery:
            cfg = config(rec, concurrency=2, shutdown_grace=5)
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            await rec.wait_for("started", count=2)
            nursery.cancel_scope.cancel()  # shutdown begins at t=0
        assert trio.current_time() == pytest.approx(5.0)
        assert (await backend.get_job(short)).status == "succeeded"
        released = await backend.get_job(long)
        assert released.status == "ready" and released.attempts == 0  # not charged
        assert rec.of("unavailable", long)[0].detail == "released at worker shutdown"


async def test_shutdown_never_extends_a_deadline(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend:
        [job_id] = await _enqueue(backend, {"sleep": 100}, max_attempts=1)
        async with trio.open_nursery() as nursery:
            cfg = config(rec, max_job_duration=2, shutdown_grace=30)
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            await rec.wait_for("started")
            nursery.cancel_scope.cancel()
        assert trio.current_time() == pytest.approx(2.0)
        assert (await backend.get_job(job_id)).status == "failed"


async def test_I1_bad_config_raises_before_touching_backend() -> None:
    async with trioqueue.open_memory() as backend:
        cfg = trioqueue.WorkerConfig(
            handler=lambda p, c: None, visibility_timeout=5, heartbeat_interval=5, concurrency=0
        )
        with pytest.raises(trioqueue.ConfigError) as info:
            await trioqueue.run_worker_pool(backend, cfg)
        assert len(info.value.problems) == 2
        assert sum(backend.statistics()["calls"].values()) == 0


async def test_batch_jobs_have_independent_outcomes(autojump_clock: object) -> None:
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        ok, bad = await _enqueue(backend, {"sleep": 1}, {"sleep": 1, "fail_attempts": 9})
        await backend.enqueue("q", {}, max_attempts=1)
        cfg = config(rec, batch_size=3)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await rec.wait_for("retry", bad)
        await rec.wait_for("succeeded", ok)
        nursery.cancel_scope.cancel()
    assert backend.statistics()["calls"]["claim"] >= 1
    assert (rec.of("claimed", ok)[0].at, rec.of("claimed", bad)[0].at) == (0.0, 0.0)


def test_sync_handler_runs_in_a_thread_and_sees_cancel() -> None:
    """Sync handlers need a real clock: while a thread runs, trio counts the waiting task as
    blocked, so an autojump clock would jump ahead."""
    import threading
    import time

    result: dict[str, object] = {}
    release = threading.Event()

    def handler(payload: object, ctx: trioqueue.JobContext) -> None:
        result["thread"] = threading.current_thread() is not threading.main_thread()
        release.set()
        while not ctx.cancel_requested:  # the cancel directive is visible from the thread
            time.sleep(0.005)
        result["saw_cancel"] = True

    async def main() -> None:
        rec = Recorder()
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            [job_id] = await _enqueue(backend, {})
            await nursery.start(trioqueue.run_worker_pool, backend, config(rec, handler=handler))
            await trio.to_thread.run_sync(release.wait)
            await backend.cancel(job_id)
            await rec.wait_for("failed", job_id)
            result["status"] = (await backend.get_job(job_id)).status
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert result == {"thread": True, "saw_cancel": True, "status": "failed"}


@pytest.mark.parametrize("batch_size", [1, 3])
def test_blocking_async_handler_is_logged_with_its_job(
    caplog: pytest.LogCaptureFixture, batch_size: int
) -> None:
    """In a batch of one the handler runs in the batch task; in a batch of several, in a
    job task of its own: either way the monitor names the job that blocks."""
    import time

    async def blocking(payload: dict[str, bool], ctx: trioqueue.JobContext) -> None:
        if payload["block"]:
            time.sleep(0.3)  # noqa: ASYNC251 - the behaviour under test: it blocks the loop

    async def main() -> int:
        rec = Recorder()
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            flags = [False] * (batch_size - 1) + [True]
            *others, job_id = await _enqueue(backend, *({"block": flag} for flag in flags))
            cfg = config(rec, handler=blocking, blocking_threshold=0.1, batch_size=batch_size)
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            for done in [*others, job_id]:
                await rec.wait_for("succeeded", done)
            nursery.cancel_scope.cancel()
            return job_id

    with caplog.at_level("WARNING", logger="trioqueue.blocking"):
        job_id = trio.run(main)
    messages = [r.getMessage() for r in caplog.records if r.name == "trioqueue.blocking"]
    assert len(messages) == 1 and f"job {job_id} blocked the event loop" in messages[0]


def test_startup_warns_without_max_job_duration(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config(Recorder()))
            nursery.cancel_scope.cancel()

    with caplog.at_level("WARNING", logger="trioqueue"):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert any("a hung handler holds its job" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("broken", [float("nan"), -1.0, 1e12, "soon"])
async def test_a_broken_custom_backoff_still_records_the_retry(
    autojump_clock: object, broken: object, caplog: pytest.LogCaptureFixture
) -> None:
    """A custom backoff answering what no backend stores is logged and the default policy
    stands in: the failure is recorded as a retry at once, not refused until the lease ends."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        [job_id] = await _enqueue(backend, {"fail_attempts": 1}, max_attempts=3)
        cfg = config(rec, backoff=lambda attempt: broken)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        with trio.fail_after(60):  # virtual seconds: without the fix no retry is recorded
            retry = await rec.wait_for("retry", job_id)
        info = await backend.get_job(job_id)
        nursery.cancel_scope.cancel()
    assert retry.at == pytest.approx(rec.of("raised", job_id)[0].at)  # at once, no lease wait
    assert 0 <= retry.detail <= 60  # the default policy's delay for a first retry
    assert info.status == "scheduled" and info.last_error is not None
    assert any("gave no usable delay" in r.getMessage() for r in caplog.records)


async def test_an_outcome_write_refused_for_good_gives_the_attempt_up(
    autojump_clock: object,
) -> None:
    """An ack that fails in a way retrying cannot fix is not retried for ever (the job's
    lease is still renewed while its outcome is unwritten): the attempt is given up at once,
    its lease lapses, and the job runs again."""
    rec = Recorder()
    refused = trioqueue.BackendError("permission denied for table jobs", transient=False)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.inject("ack", error(refused))
        [job_id] = await _enqueue(backend, {})
        await nursery.start(trioqueue.run_worker_pool, backend, config(rec))
        try:
            with trio.fail_after(5):
                given_up = await rec.wait_for("unavailable", job_id)
        finally:
            backend.inject("ack", None)  # lets a spinning write end, so the test can too
        with trio.fail_after(60):
            await rec.wait_for("succeeded", job_id)
        nursery.cancel_scope.cancel()
    assert "retrying cannot fix" in given_up.detail
    assert given_up.at == rec.of("returned", job_id)[0].at
    assert [e.attempt for e in rec.of("started", job_id)] == [1, 2]
