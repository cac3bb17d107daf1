"""The clock-skew rule of docs/protocol.rst §8: the bound, the thresholds, the verdicts."""

from __future__ import annotations

import logging
import re

import pytest
import trio
import trio.testing
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import trioqueue
from tests._pool_harness import Recorder, config, log_records
from tests._web_harness import client
from trioqueue._core.clock_skew import (
    ClockVerdict,
    SkewBound,
    SkewLimits,
    judge,
    limits_for,
    measure,
)
from trioqueue._types import PoolBeat, PoolRegistration
from trioqueue.web import create_app

LIMITS = limits_for(visibility_timeout=30.0, heartbeat_interval=10.0)
VERDICTS = st.sampled_from(list(ClockVerdict))
SECONDS = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
DELAYS = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)


def test_limits_warn_at_one_second_and_stop_at_v_minus_h() -> None:
    assert limits_for(30.0, 10.0) == SkewLimits(warn_at=1.0, stop_at=20.0)


def test_limits_warn_at_half_of_v_minus_h_for_short_leases() -> None:
    assert limits_for(1.0, 0.5) == SkewLimits(warn_at=0.25, stop_at=0.5)


def test_measure_bounds_the_offset_by_send_and_receive() -> None:
    assert measure(sent=100.0, database=40.0, received=100.5) == SkewBound(60.0, 60.5)


def test_measure_refuses_a_clock_that_stepped_back() -> None:
    assert measure(sent=100.0, database=40.0, received=99.0) is None


def test_measure_refuses_readings_that_are_not_finite() -> None:
    assert measure(sent=100.0, database=float("nan"), received=101.0) is None
    assert measure(sent=float("-inf"), database=1.0, received=101.0) is None


def test_plus_60_seconds_stops_and_minus_60_is_in_sync() -> None:
    ahead = measure(sent=1060.0, database=1000.0, received=1060.01)
    behind = measure(sent=940.0, database=1000.0, received=940.01)
    assert ahead is not None and behind is not None
    assert judge(ClockVerdict.IN_SYNC, ahead, LIMITS) is ClockVerdict.STOPPED
    assert judge(ClockVerdict.IN_SYNC, behind, LIMITS) is ClockVerdict.IN_SYNC
    assert judge(ClockVerdict.STOPPED, behind, LIMITS) is ClockVerdict.IN_SYNC


def test_a_bound_straddling_the_stop_keeps_the_verdict() -> None:
    straddling = SkewBound(low=19.0, high=21.0)  # ahead by more than 1 s, maybe past 20 s
    assert judge(ClockVerdict.STOPPED, straddling, LIMITS) is ClockVerdict.STOPPED
    assert judge(ClockVerdict.IN_SYNC, straddling, LIMITS) is ClockVerdict.AHEAD


def test_stop_is_left_only_on_proof_of_under_v_minus_h() -> None:
    assert judge(ClockVerdict.STOPPED, SkewBound(5.0, 20.0), LIMITS) is ClockVerdict.AHEAD
    assert judge(ClockVerdict.STOPPED, SkewBound(0.0, 0.01), LIMITS) is ClockVerdict.IN_SYNC


def test_verdict_labels() -> None:
    assert [v.label for v in ClockVerdict] == ["in_sync", "ahead", "stopped"]


@given(offset=SECONDS, database=SECONDS, out=DELAYS, back=DELAYS)
def test_the_bound_contains_the_true_offset(
    offset: float, database: float, out: float, back: float
) -> None:
    """The database reads its clock ``out`` after the send and ``back`` before the answer."""
    sent = database + offset - out
    received = database + offset + back
    bound = measure(sent, database, received)
    assert bound is not None
    slack = 1e-6 * max(1.0, abs(database), abs(offset))  # float rounding of the sums
    assert bound.low - slack <= offset <= bound.high + slack
    assert bound.low <= bound.estimate <= bound.high


@given(previous=VERDICTS, low=SECONDS, width=DELAYS)
def test_verdicts_move_only_on_proof(previous: ClockVerdict, low: float, width: float) -> None:
    bound = SkewBound(low, low + width)
    verdict = judge(previous, bound, LIMITS)
    if verdict > previous:  # up: the lower end proves the new level's threshold passed
        threshold = LIMITS.stop_at if verdict is ClockVerdict.STOPPED else LIMITS.warn_at
        assert bound.low > threshold
    if verdict < previous:  # down: the upper end proves the old level's threshold unmet
        threshold = LIMITS.stop_at if previous is ClockVerdict.STOPPED else LIMITS.warn_at
        assert bound.high <= threshold
    if verdict is ClockVerdict.STOPPED:
        assert previous is ClockVerdict.STOPPED or bound.low > LIMITS.stop_at


@given(previous=VERDICTS, low=SECONDS, width=DELAYS)
def test_judging_the_same_bound_twice_changes_nothing(
    previous: ClockVerdict, low: float, width: float
) -> None:
    bound = SkewBound(low, low + width)
    once = judge(previous, bound, LIMITS)
    assert judge(once, bound, LIMITS) is once


@given(previous=VERDICTS, behind=st.floats(min_value=0.0, max_value=1e6), width=DELAYS)
def test_a_worker_behind_never_leaves_in_sync(
    previous: ClockVerdict, behind: float, width: float
) -> None:
    """A bound wholly behind the database (upper end at most 0) is always in sync."""
    bound = SkewBound(-behind - width, -behind)
    assert judge(previous, bound, LIMITS) is ClockVerdict.IN_SYNC


@given(
    v=st.floats(min_value=0.01, max_value=1e5),
    h_share=st.floats(min_value=0.01, max_value=0.99),
)
def test_the_warning_always_comes_before_the_stop(v: float, h_share: float) -> None:
    limits = limits_for(v, v * h_share)
    assert 0 < limits.warn_at < limits.stop_at


# -- whole pools on the memory backend, its worker's wall clock offset, on a MockClock ------

V, H = 10.0, 2.0  # stop past V - H = 8 s, warn past 1 s


async def run_skewed(
    skew: float, payloads: list[object], *, seconds: float, max_attempts: int = 10
) -> tuple[trioqueue.MemoryBackend, Recorder, list[trioqueue.JobInfo], list[trioqueue.WorkerInfo]]:
    """Run one pool whose wall clock is ``skew`` seconds ahead of the rows' for ``seconds``
    of mock time; answer the jobs and the registry as they stood just before shutdown."""
    rec = Recorder()
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.wall_clock = lambda: trio.current_time() + skew
        ids = await backend.enqueue_many("q", payloads, max_attempts=max_attempts)
        cfg = config(rec, visibility_timeout=V, heartbeat_interval=H)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await trio.sleep(seconds)
        jobs = [await backend.get_job(job_id) for job_id in ids]
        workers = await backend.list_workers()
        nursery.cancel_scope.cancel()
    return backend, rec, jobs, workers


async def test_a_worker_60s_ahead_stops_claiming_and_burns_no_attempt(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """Before the rule, every job was claimed, refused on arrival and failed on its tenth
    attempt ("lease expired on the final attempt"). Now the first claim proves the skew,
    gives its rows back uncharged, and the pool only probes the clock."""
    caplog.set_level(logging.INFO, "trioqueue")
    backend, rec, jobs, workers = await run_skewed(60.0, [{}, {}, {}], seconds=300)
    assert rec.of("started") == [] and rec.of("unavailable") == []
    assert [(j.status, j.attempts) for j in jobs] == [("ready", 0)] * 3
    calls = backend.statistics().calls
    assert calls["claim"] == 1
    assert calls["clock"] == 300  # one probe per poll interval (1 s)
    [stopped] = log_records(caplog, "clock_stopped")
    assert stopped.levelno == logging.ERROR
    assert "claims stopped" in stopped.getMessage() and "by 60.000s" in stopped.getMessage()
    [worker] = workers
    assert (worker.clock_verdict, worker.clock_skew) == ("stopped", 60.0)


async def test_a_worker_60s_behind_runs_its_jobs_and_says_nothing(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "trioqueue")
    backend, _, jobs, workers = await run_skewed(-60.0, [{}, {}, {}], seconds=30)
    assert [(j.status, j.attempts) for j in jobs] == [("succeeded", 1)] * 3
    assert [r for r in caplog.records if str(getattr(r, "event", "")).startswith("clock")] == []
    [worker] = workers
    assert (worker.clock_verdict, worker.clock_skew) == ("in_sync", -60.0)
    assert backend.statistics().calls["clock"] == 0


async def test_a_worker_ahead_by_more_than_the_margin_warns_once_and_runs(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """5 s ahead (past 1 s, under V - H = 8 s): every claim measures it, one warning says so,
    and the jobs run (their fences start 5 s short; the first beat re-leases them)."""
    caplog.set_level(logging.INFO, "trioqueue")
    backend, _, jobs, workers = await run_skewed(5.0, [{"sleep": 3}] * 4, seconds=60)
    assert [(j.status, j.attempts) for j in jobs] == [("succeeded", 1)] * 4
    assert backend.statistics().calls["claim"] > 4
    [warned] = log_records(caplog, "clock_ahead")
    assert warned.levelno == logging.WARNING and "past the 1s margin" in warned.getMessage()
    [worker] = workers
    assert (worker.clock_verdict, worker.clock_skew) == ("ahead", 5.0)


async def test_claims_resume_once_a_probe_proves_the_clock_back_in_sync(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "trioqueue")
    rec = Recorder()
    skew = [60.0]
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        backend.wall_clock = lambda: trio.current_time() + skew[0]
        [job_id] = await backend.enqueue_many("q", [{}])
        cfg = config(rec, visibility_timeout=V, heartbeat_interval=H)
        await nursery.start(trioqueue.run_worker_pool, backend, cfg)
        await trio.sleep(10)
        assert (await backend.get_job(job_id)).status == "ready"
        skew[0] = 0.0  # the operator fixed NTP
        await rec.wait_for("succeeded", job_id)
        await trio.sleep(H)  # the next beat reports the verdict
        [worker] = await backend.list_workers()
        nursery.cancel_scope.cancel()
    assert [e.attempt for e in rec.of("started")] == [1]
    [back] = log_records(caplog, "clock_in_sync")
    assert "claims resumed" in back.getMessage()
    assert worker.clock_verdict == "in_sync"


class EventNames(logging.Handler):
    """The ``event`` field of every record, in order (a pool test inside ``trio.run``)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(str(getattr(record, "event", "")))


@settings(max_examples=40, deadline=None)
@given(
    skew=st.floats(min_value=-120.0, max_value=120.0),
    v=st.floats(min_value=2.0, max_value=60.0),
    h_share=st.floats(min_value=0.1, max_value=0.9),
)
def test_a_pool_spends_attempts_exactly_when_its_skew_is_under_v_minus_h(
    skew: float, v: float, h_share: float
) -> None:
    """Whatever the offset and timings: past V - H the pool uses no attempt and its row says
    stopped; under it, every job runs once and succeeds; a warning iff past the margin."""
    h = v * h_share
    limits = limits_for(v, h)
    # At a bound itself the verdict is the float rounding's: the pool measures the offset
    # as a difference of two clock readings, which can land a hair past it either way.
    assume(min(abs(skew - limits.warn_at), abs(skew - limits.stop_at)) > 1e-9)
    events = EventNames()
    logging.getLogger("trioqueue").addHandler(events)

    async def main() -> tuple[list[trioqueue.JobInfo], list[trioqueue.WorkerInfo]]:
        rec = Recorder()
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            backend.wall_clock = lambda: trio.current_time() + skew
            ids = await backend.enqueue_many("q", [{}, {}], max_attempts=3)
            cfg = config(rec, visibility_timeout=v, heartbeat_interval=h, concurrency=2)
            await nursery.start(trioqueue.run_worker_pool, backend, cfg)
            await trio.sleep(3 * v)
            jobs = [await backend.get_job(job_id) for job_id in ids]
            workers = await backend.list_workers()
            nursery.cancel_scope.cancel()
        return jobs, workers

    try:
        jobs, [worker] = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        logging.getLogger("trioqueue").removeHandler(events)
    if skew > limits.stop_at:
        assert [(j.status, j.attempts) for j in jobs] == [("ready", 0)] * 2
        assert worker.clock_verdict == "stopped"
        assert events.seen.count("clock_stopped") == 1
    else:
        assert [(j.status, j.attempts) for j in jobs] == [("succeeded", 1)] * 2
        assert worker.clock_verdict == ("ahead" if skew > limits.warn_at else "in_sync")
        assert events.seen.count("clock_ahead") == (1 if skew > limits.warn_at else 0)
        assert "clock_stopped" not in events.seen


# -- the dashboard's workers page ----------------------------------------------------------


async def test_the_workers_page_shows_each_pools_clock(backend: trioqueue.MemoryBackend) -> None:
    def pool(worker_id: str) -> PoolRegistration:
        return PoolRegistration(worker_id, "host-1", 1, "q", 1, 1.0)

    beats = {
        "w-never": PoolBeat(pool("w-never"), 0, 0),
        "w-sync": PoolBeat(pool("w-sync"), 0, 0, -0.0042, "in_sync"),
        "w-ahead": PoolBeat(pool("w-ahead"), 0, 0, 5.25, "ahead"),
        "w-stopped": PoolBeat(pool("w-stopped"), 0, 0, 60.0, "stopped"),
    }
    for beat in beats.values():
        await backend.renew([], visibility_timeout=10, beat=beat)
    async with client(create_app(backend)) as c:
        page = (await c.get("/workers")).text
    cells = dict(
        re.findall(
            r'data-worker-id="([^"]+)".*?data-testid="worker-clock"[^>]*>(.*?)</td>', page, re.S
        )
    )
    text = {w: " ".join(re.sub(r"<[^>]+>", " ", cell).split()) for w, cell in cells.items()}
    assert text == {
        "w-never": "not measured",
        "w-sync": "-0.004s",
        "w-ahead": "+5.250s ahead",
        "w-stopped": "+60.000s claims stopped",
    }
