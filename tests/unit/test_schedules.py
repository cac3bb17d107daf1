"""Schedules: the sans-IO tick computation, and whole pools scheduling on trio's MockClock.

The tick rules (docs/scheduling.rst, "Time zones and DST") are pinned on explicit dates in
zones with DST changes; a property test checks that ``next_tick`` is the first tick after
any instant. Then pools on the memory backend, its clock anchored just before a DST change
(``open_memory(now=...)``), run through the change: every tick gives one job however many
pools take part, a tick missed while no pool ran gives one job at startup, and a failing
pass is logged and tried again. Last, a state machine over the reference model's schedule
statements, with passes racing from the same read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import trioqueue
from trioqueue._backends.memory import MemoryBackend
from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.validation import check_schedule
from trioqueue._core.schedule import (
    check_cron,
    check_timezone,
    next_tick,
    plan_advances,
    to_instant,
)
from trioqueue._runtime import scheduler
from trioqueue.testing import error

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def ticks(cron: str, zone: str, start: datetime, end: datetime) -> Iterator[datetime]:
    """The ticks after ``start`` up to ``end``, in ``zone``'s local time."""
    tick = next_tick(cron, zone, start)
    while tick <= end:
        yield tick.astimezone(ZoneInfo(zone))
        tick = next_tick(cron, zone, tick)


def local(
    zone: ZoneInfo, year: int, month: int, day: int, hour: int, minute: int, fold: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=zone, fold=fold)


def shown(times: Iterator[datetime]) -> list[str]:
    return [t.strftime("%m-%d %H:%M%z") for t in times]


# -- the tick rules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        # A skipped local time runs once, at the end of the gap (03:00 CEST).
        ("30 2 * * *", ["03-29 03:00+0200", "03-30 02:30+0200"]),
        # Several skipped times, and the regular tick at the gap's end: one run.
        ("*/30 2 * * *", ["03-29 03:00+0200", "03-30 02:00+0200", "03-30 02:30+0200"]),
        ("0 2,3 * * *", ["03-29 03:00+0200", "03-30 02:00+0200", "03-30 03:00+0200"]),
        # An hourly schedule goes on past the gap; 02:30 becomes 03:00, then 03:30 as usual.
        ("30 * * * *", ["03-29 01:30+0100", "03-29 03:00+0200", "03-29 03:30+0200"]),
        ("0 1-4 * * *", ["03-29 01:00+0100", "03-29 03:00+0200", "03-29 04:00+0200"]),
    ],
)
def test_berlin_spring_forward(cron: str, expected: list[str]) -> None:
    start = local(BERLIN, 2026, 3, 29, 0, 45)
    assert shown(ticks(cron, "Europe/Berlin", start, start + timedelta(hours=30)))[:3] == expected


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        # A repeated local time runs once, at its first occurrence (CEST).
        ("30 2 * * *", ["10-25 02:30+0200", "10-26 02:30+0100"]),
        ("*/30 2 * * *", ["10-25 02:00+0200", "10-25 02:30+0200", "10-26 02:00+0100"]),
        # Hourly: 02:00 once (the first), then 03:00 CET two real hours later.
        ("0 * * * *", ["10-25 01:00+0200", "10-25 02:00+0200", "10-25 03:00+0100"]),
    ],
)
def test_berlin_fall_back(cron: str, expected: list[str]) -> None:
    start = local(BERLIN, 2026, 10, 25, 0, 45)
    assert shown(ticks(cron, "Europe/Berlin", start, start + timedelta(hours=30)))[:3] == expected


def test_new_york_both_changes() -> None:
    spring = local(NEW_YORK, 2026, 3, 8, 0, 0)
    assert shown(ticks("30 2 * * *", "America/New_York", spring, spring + timedelta(days=1))) == [
        "03-08 03:00-0400"
    ]
    fall = local(NEW_YORK, 2026, 11, 1, 0, 0)
    assert shown(ticks("*/20 1 * * *", "America/New_York", fall, fall + timedelta(days=1))) == [
        "11-01 01:00-0400",
        "11-01 01:20-0400",
        "11-01 01:40-0400",
    ]


def test_inside_the_repeated_hour_the_first_pass_ticks_are_not_repeated() -> None:
    second_pass = local(BERLIN, 2026, 10, 25, 2, 10, fold=1)  # 02:10 CET, after 02:10 CEST
    assert next_tick("*/15 * * * *", "Europe/Berlin", second_pass) == local(
        BERLIN, 2026, 10, 25, 3, 0
    )


def test_a_day_skipped_entirely_runs_its_ticks_once_after() -> None:
    # Samoa skipped 2011-12-30 altogether: its ticks collapse into midnight of the 31st.
    start = datetime(2011, 12, 29, 12, tzinfo=ZoneInfo("Pacific/Apia"))
    assert shown(ticks("0 9,12 * * *", "Pacific/Apia", start, start + timedelta(days=2))) == [
        "12-31 00:00+1400",
        "12-31 09:00+1400",
        "12-31 12:00+1400",
    ]


def test_gap_end_is_the_first_instant_after_the_gap() -> None:
    assert to_instant(datetime(2026, 3, 29, 2, 30), BERLIN) == datetime(2026, 3, 29, 1, tzinfo=UTC)
    assert to_instant(datetime(2026, 10, 25, 2, 30), BERLIN) == datetime(
        2026, 10, 25, 0, 30, tzinfo=UTC
    )


ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # 30-minute changes
    "Europe/Dublin",  # negative DST in tzdata
    "Asia/Kolkata",
]
CRONS = ["* * * * *", "*/7 * * * *", "30 2 * * *", "0 */3 * * 1-5", "15 1,2,3 * * *", "0 0 1 * *"]


@settings(max_examples=300, deadline=None)
@given(
    cron=st.sampled_from(CRONS),
    zone=st.sampled_from(ZONES),
    after=st.datetimes(
        min_value=datetime(2025, 1, 1), max_value=datetime(2027, 12, 31), timezones=st.just(UTC)
    ),
)
def test_next_tick_is_the_first_tick_after(cron: str, zone: str, after: datetime) -> None:
    tick = next_tick(cron, zone, after)
    assert tick > after
    assert tick.tzinfo is UTC
    # Nothing ticks in between: from any instant before it, the next tick is this one.
    for between in (after + (tick - after) / 2, tick - timedelta(microseconds=1)):
        if between >= after:
            assert next_tick(cron, zone, between) == tick
    # A tick is a local time the expression matches, or the end of a gap it fell into.
    local_tick = tick.astimezone(ZoneInfo(zone))
    assert local_tick.second == 0


@pytest.mark.parametrize(
    ("cron", "problem"),
    [
        ("* * * *", "5 fields"),
        ("* * * * * *", "5 fields"),
        ("@hourly", "5 fields"),
        ("60 * * * *", "minute"),
        ("* 24 * * *", "hour"),
        ("0 0 31 2 *", "day-of-month"),
        ("* * * 13 *", "month"),
        ("* * * * 8", "day-of-week"),
    ],
)
def test_check_cron_says_what_is_wrong(cron: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_cron(cron)


def test_check_timezone() -> None:
    assert check_timezone("Europe/Berlin") == "Europe/Berlin"
    for bad in (
        "Europe/Atlantis",
        "/etc/localtime",
        "",
        "x" * 65,
        "a\x00b",
        "localtime",
        "right/UTC",
    ):
        with pytest.raises(ValueError, match="timezone"):
            check_timezone(bad)
    with pytest.raises(TypeError):
        check_timezone(1)


# -- pools scheduling on the MockClock -----------------------------------------------------


async def _noop(payload: object, ctx: trioqueue.JobContext) -> None:
    pass


def pool_config(queue: str, **overrides: object) -> trioqueue.WorkerConfig:
    options: dict[str, object] = {
        "queue": queue,
        "schedule_interval": 20,
        "poll_interval": 60,
        "visibility_timeout": 120,
        "heartbeat_interval": 60,
        "max_job_duration": 60,
    }
    options.update(overrides)
    return trioqueue.WorkerConfig(handler=_noop, **options)  # type: ignore[arg-type]


async def run_pools(
    backend: MemoryBackend, queues: list[str], seconds: float, **overrides: object
) -> None:
    """Run one pool per entry of ``queues`` (a queue may repeat) for ``seconds``."""
    async with trio.open_nursery() as nursery:
        for queue in queues:
            await nursery.start(trioqueue.run_worker_pool, backend, pool_config(queue, **overrides))
        await trio.sleep(seconds)
        nursery.cancel_scope.cancel()


async def job_times(backend: MemoryBackend, zone: ZoneInfo) -> dict[str, list[str]]:
    """Per schedule (its payload), the local times its jobs were enqueued."""
    times: dict[str, list[str]] = {}
    for job in await backend.list_jobs(limit=10_000):
        times.setdefault(job.payload, []).append(
            job.created_at.astimezone(zone).strftime("%H:%M%z")
        )
    return times


@pytest.fixture(params=[True, False], ids=["shared-passes", "every-pool-passes"])
def share_passes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Pools of one process share their passes, or (off) every pool races for every tick."""
    monkeypatch.setattr(scheduler, "SHARE_PASSES", request.param)
    return bool(request.param)


async def test_many_pools_through_berlin_spring_forward(
    autojump_clock: trio.abc.Clock, share_passes: bool
) -> None:
    start = local(BERLIN, 2026, 3, 29, 0, 50)
    async with trioqueue.open_memory(now=start) as backend:
        for name, cron in [
            ("daily", "30 2 * * *"),
            ("quarter", "*/15 2 * * *"),
            ("hourly", "0 * * * *"),
        ]:
            await backend.set_schedule(name, "reports", cron, name, timezone="Europe/Berlin")
        await run_pools(backend, ["reports", "reports", "other", "other", "third"], 4 * 3600)
        times = await job_times(backend, BERLIN)
    assert times == {
        "daily": ["03:00+0200"],
        "quarter": ["03:00+0200"],
        # Four real hours from 00:50 CET end at 05:50 CEST: one hour was skipped.
        "hourly": ["01:00+0100", "03:00+0200", "04:00+0200", "05:00+0200"],
    }


async def test_many_pools_through_berlin_fall_back(
    autojump_clock: trio.abc.Clock, share_passes: bool
) -> None:
    start = local(BERLIN, 2026, 10, 25, 0, 50)
    async with trioqueue.open_memory(now=start) as backend:
        for name, cron in [
            ("daily", "30 2 * * *"),
            ("half", "*/30 2 * * *"),
            ("hourly", "0 * * * *"),
        ]:
            await backend.set_schedule(name, "reports", cron, name, timezone="Europe/Berlin")
        await run_pools(backend, ["reports", "reports", "other", "other"], 5 * 3600)
        times = await job_times(backend, BERLIN)
    assert times == {
        "daily": ["02:30+0200"],
        "half": ["02:00+0200", "02:30+0200"],
        "hourly": ["01:00+0200", "02:00+0200", "03:00+0100", "04:00+0100"],
    }


async def test_many_pools_through_new_york_spring_forward(
    autojump_clock: trio.abc.Clock, share_passes: bool
) -> None:
    start = local(NEW_YORK, 2026, 3, 8, 1, 50)
    async with trioqueue.open_memory(now=start) as backend:
        await backend.set_schedule("s", "q", "*/20 2 * * *", "s", timezone="America/New_York")
        await backend.set_schedule("t", "q", "59 1 * * *", "t", timezone="America/New_York")
        await run_pools(backend, ["q", "q", "q"], 2 * 3600)
        times = await job_times(backend, NEW_YORK)
    assert times == {"s": ["03:00-0400"], "t": ["01:59-0500"]}


async def test_ticks_missed_while_no_pool_ran_give_one_job_at_startup(
    autojump_clock: trio.abc.Clock,
) -> None:
    start = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
    async with trioqueue.open_memory(now=start) as backend:
        await backend.set_schedule("s", "q", "* * * * *", "s")
        await trio.sleep(3 * 3600)  # 180 ticks pass with no pool running
        assert await backend.list_jobs() == []
        await run_pools(backend, ["q", "q"], 1)  # the startup pass
        jobs = await backend.list_jobs()
        [schedule] = await backend.list_schedules()
    assert len(jobs) == 1
    assert jobs[0].created_at == start + timedelta(hours=3)
    assert schedule.next_run_at == datetime(2026, 6, 1, 15, 1, tzinfo=UTC)


async def test_a_failing_pass_is_logged_and_tried_again(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    start = datetime(2026, 6, 1, 12, 0, 50, tzinfo=UTC)
    caplog.set_level(logging.INFO, "trioqueue.schedule")
    async with trioqueue.open_memory(now=start) as backend:
        await backend.set_schedule("s", "q", "* * * * *", "s")
        backend.inject("enqueue_due", error(times=3))
        await run_pools(backend, ["q"], 75, schedule_interval=20)
        jobs = await backend.list_jobs()
    # Passes at 0, 20, 40 s fail; the one at 60 s enqueues the tick of 12:01 (10 s late).
    assert [job.created_at for job in jobs] == [start + timedelta(seconds=60)]
    events = [getattr(r, "event", None) for r in caplog.records]
    assert events.count("schedule_failed") == 2  # the 1st and 2nd failures of the run
    assert "scheduling" in events and "scheduled" in events


async def test_a_pool_with_scheduling_off_makes_no_pass(autojump_clock: trio.abc.Clock) -> None:
    async with trioqueue.open_memory() as backend:
        await backend.set_schedule("s", "q", "* * * * *")
        await run_pools(backend, ["q"], 300, schedule_interval=None)
        assert backend.statistics()["calls"]["enqueue_due"] == 0
        assert await backend.list_jobs() == []


async def test_pools_of_one_process_share_their_passes(autojump_clock: trio.abc.Clock) -> None:
    async with trioqueue.open_memory() as backend:
        await run_pools(backend, ["a", "b", "c", "d"], 100, schedule_interval=20)
        # Passes at 0, 20, ..., 100 s at most: one per interval, not one per pool.
        assert backend.statistics()["calls"]["enqueue_due"] <= 6


async def test_schedule_interval_is_checked() -> None:
    async with trioqueue.open_memory() as backend:
        for bad in (0, -1, float("nan"), "5"):
            config = trioqueue.WorkerConfig(handler=_noop, schedule_interval=bad)  # type: ignore[arg-type]
            with pytest.raises(trioqueue.ConfigError, match="schedule_interval"):
                await trioqueue.run_worker_pool(backend, config)


# -- the model's schedule statements, as a state machine -----------------------------------


class ScheduleModelMachine(RuleBasedStateMachine):
    """The reference model's schedule queries on a float clock: set, delete, let time pass,
    and scheduling passes, also two racing from the same read (both planned before either
    writes, as two pools' passes can). Each tick gives at most one job, a due schedule one
    job per pass that won it, and every next run is a tick after the last pass."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.model = MemoryModel(anchor=0.0, anchor_datetime=datetime(2026, 3, 28, 23, tzinfo=UTC))
        self.expected_jobs: dict[str, int] = {}  # jobs each schedule's passes enqueued

    def at(self) -> datetime:
        return self.model.to_datetime(self.now)

    @rule(
        name=st.sampled_from(["a", "b", "c"]),
        cron=st.sampled_from(["* * * * *", "*/15 2 * * *", "30 2 * * *", "0 * * * *"]),
        zone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
    )
    def set_schedule(self, name: str, cron: str, zone: str) -> None:
        request = check_schedule(
            name, "q", cron, name, timezone=zone, priority=0, max_attempts=None
        )
        info = self.model.set_schedule(self.now, request)
        assert info.next_run_at > self.at()
        self.expected_jobs.setdefault(name, 0)

    @rule(name=st.sampled_from(["a", "b", "c"]))
    def delete_schedule(self, name: str) -> None:
        self.model.delete_schedule(self.now, name)

    @rule(seconds=st.sampled_from([1.0, 30.0, 60.0, 900.0, 3600.0, 5 * 3600.0]))
    def advance(self, seconds: float) -> None:
        self.now += seconds

    @rule(racing=st.integers(min_value=1, max_value=3))
    def passes(self, racing: int) -> None:
        """``racing`` passes read the due schedules, then each advances what it read."""
        plans = []
        for _ in range(racing):
            due, at = self.model.due_schedules(self.now, 1000)
            advances, problems = plan_advances(due, at)
            assert problems == []
            plans.append(advances)
        winners = {a.name for a in plans[0]}
        enqueued = [self.model.advance_schedules(self.now, advances) for advances in plans]
        assert len(enqueued[0]) == len(winners)  # the first to write wins every one
        assert all(ids == [] for ids in enqueued[1:])  # the others lose every race
        for name in winners:
            self.expected_jobs[name] += 1
        for info in self.model.list_schedules(self.now):
            assert info.next_run_at > self.at()

    @invariant()
    def one_job_per_tick(self) -> None:
        keys = [row.schedule_key for row in self.model.rows() if row.schedule_key]
        assert len(keys) == len(set(keys))
        per_schedule: dict[str, int] = {}
        for name, _ in keys:
            per_schedule[name] = per_schedule.get(name, 0) + 1
        assert per_schedule == {n: c for n, c in self.expected_jobs.items() if c}

    @invariant()
    def every_next_run_is_a_tick(self) -> None:
        for info in self.model.list_schedules(self.now):
            just_before = info.next_run_at - timedelta(microseconds=1)
            assert next_tick(info.cron, info.timezone, just_before) == info.next_run_at


TestScheduleModel = ScheduleModelMachine.TestCase
TestScheduleModel.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
