"""Schedules: set, replace, list and delete them; each tick enqueued once (docs/scheduling.rst)."""

from __future__ import annotations

import zoneinfo
from typing import Any

import pytest
import trio

from trioqueue import PostgresBackend
from trioqueue._backends.interface import Backend
from trioqueue._types import NoticeKind
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["ScheduleConformance"]

#: A schedule that comes due within a minute (the tests that enqueue use it).
EVERY_MINUTE = "* * * * *"

#: Arguments no backend may accept: ``(overrides, exception type, text the error names)``.
BAD_SCHEDULES = [
    pytest.param({"cron": "* * * *"}, ValueError, "5 fields", id="four-fields"),
    pytest.param({"cron": "0 * * * * *"}, ValueError, "5 fields", id="six-fields"),
    pytest.param({"cron": "@daily"}, ValueError, "5 fields", id="nickname"),
    pytest.param({"cron": "61 * * * *"}, ValueError, "minute", id="bad-minute"),
    pytest.param({"cron": "0 0 30 2 *"}, ValueError, "day-of-month", id="february-30"),
    pytest.param({"cron": 5}, TypeError, "cron", id="int-cron"),
    pytest.param({"timezone": "Mars/Olympus"}, ValueError, "timezone", id="unknown-zone"),
    pytest.param({"timezone": "../etc/passwd"}, ValueError, "timezone", id="path-zone"),
    pytest.param({"timezone": ""}, ValueError, "timezone", id="empty-zone"),
    pytest.param({"timezone": None}, TypeError, "timezone", id="none-zone"),
    pytest.param({"name": ""}, ValueError, "name", id="empty-name"),
    pytest.param({"name": "n\x00"}, ValueError, "name", id="nul-name"),
    pytest.param({"name": "x" * 129}, ValueError, "name", id="long-name"),
    pytest.param({"queue": ""}, ValueError, "queue", id="empty-queue"),
    pytest.param({"payload": {1, 2}}, TypeError, "payload", id="set-payload"),
    pytest.param({"priority": "1"}, TypeError, "priority", id="str-priority"),
    pytest.param({"priority": 2**31}, ValueError, "priority", id="priority-past-int32"),
    pytest.param({"max_attempts": 0}, ValueError, "max_attempts", id="zero-max-attempts"),
]


class ScheduleConformance(ConformanceBase):
    """Schedules: their storage, their validation, and the scheduling pass
    (``enqueue_due``) that every worker pool runs."""

    async def _pass_next_tick(self, backend: Backend, name: str, *, missed: int = 0) -> None:
        """Let the next tick of the once-a-minute schedule ``name`` pass, then ``missed``
        more of its ticks (none enqueued meanwhile).

        On PostgreSQL (a real clock) the schedule's ``next_run_at`` is moved back instead of
        waiting for minutes: just past, plus ``missed`` minutes. Any other backend waits on
        trio's clock (instant under a ``MockClock``); one on a real clock should override
        this as the PostgreSQL case does.
        """
        if isinstance(backend, PostgresBackend):
            await _move_back(backend, name, missed)
        else:
            await trio.sleep(60.0 * (1 + missed))

    # -- storing them --------------------------------------------------------------------

    async def test_set_schedule_stores_it_with_its_next_tick(
        self, backend: Backend, clock: object
    ) -> None:
        info = await backend.set_schedule(
            "nightly",
            Q,
            "30  2 * * *",
            {"report": "daily"},
            timezone="Europe/Berlin",
            priority=3,
            max_attempts=2,
        )
        [listed] = await backend.list_schedules()
        assert listed == info
        assert (info.name, info.queue, info.cron, info.timezone) == (
            "nightly",
            Q,
            "30 2 * * *",  # whitespace normalised
            "Europe/Berlin",
        )
        assert (info.payload, info.priority, info.max_attempts) == ({"report": "daily"}, 3, 2)
        assert info.last_run_at is None
        local = info.next_run_at.astimezone(zoneinfo.ZoneInfo("Europe/Berlin"))
        # 02:30 local, or 03:00 on a spring-forward night (that 02:30 does not exist).
        assert (local.hour, local.minute) in ((2, 30), (3, 0))
        assert info.next_run_at.utcoffset() is not None

    async def test_defaults_are_utc_priority_0_and_enqueues_max_attempts(
        self, backend: Backend, clock: object
    ) -> None:
        info = await backend.set_schedule("hourly", Q, "0 * * * *")
        assert (info.timezone, info.priority, info.max_attempts, info.payload) == (
            "UTC",
            0,
            10,
            None,
        )
        assert (info.next_run_at.minute, info.next_run_at.second) == (0, 0)

    async def test_set_schedule_replaces_one_of_the_same_name(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_schedule("s", Q, "0 * * * *", "old")
        await backend.set_schedule("other", Q, "0 0 * * *")
        new = await backend.set_schedule("s", "elsewhere", "15 * * * *", "new", priority=-1)
        assert [s.name for s in await backend.list_schedules()] == ["other", "s"]
        assert (new.queue, new.cron, new.payload, new.priority) == (
            "elsewhere",
            "15 * * * *",
            "new",
            -1,
        )
        assert new.next_run_at.minute == 15

    async def test_delete_schedule(self, backend: Backend, clock: object) -> None:
        await backend.set_schedule("s", Q, EVERY_MINUTE)
        assert await backend.delete_schedule("s") is True
        assert await backend.delete_schedule("s") is False
        assert await backend.delete_schedule("never") is False
        assert await backend.list_schedules() == []

    @pytest.mark.parametrize(("overrides", "exc_type", "names"), BAD_SCHEDULES)
    async def test_bad_schedules_are_refused_and_nothing_is_written(
        self,
        backend: Backend,
        clock: object,
        overrides: dict[str, Any],
        exc_type: type[Exception],
        names: str,
    ) -> None:
        arguments: dict[str, Any] = {"name": "s", "queue": Q, "cron": EVERY_MINUTE}
        arguments.update(overrides)
        with pytest.raises(exc_type, match=names):
            await backend.set_schedule(**arguments)
        assert await backend.list_schedules() == []

    async def test_every_bad_argument_is_listed_at_once(
        self, backend: Backend, clock: object
    ) -> None:
        with pytest.raises(ValueError, match=r"(?s)cron.*timezone") as caught:
            await backend.set_schedule("s", Q, "99 * * * *", timezone="Nowhere/Land")
        assert len(str(caught.value).splitlines()) == 2
        with pytest.raises(TypeError, match="name must be a str"):
            await backend.delete_schedule(7)  # type: ignore[arg-type]

    # -- enqueueing their ticks --------------------------------------------------------

    async def test_nothing_is_enqueued_before_the_tick(
        self, backend: Backend, clock: object
    ) -> None:
        assert await backend.enqueue_due() == []
        await backend.set_schedule("s", Q, "0 0 1 1 *")  # next new year
        assert await backend.enqueue_due() == []
        assert await backend.list_jobs() == []

    async def test_a_due_tick_enqueues_one_job_and_advances(
        self, backend: Backend, clock: object
    ) -> None:
        before = await backend.set_schedule(
            "s", Q, EVERY_MINUTE, {"n": 1}, priority=4, max_attempts=3
        )
        await self._pass_next_tick(backend, "s")
        [job_id] = await backend.enqueue_due()
        assert await backend.enqueue_due() == []  # the tick is taken
        job = await backend.get_job(job_id)
        assert (job.queue, job.payload, job.priority, job.max_attempts, job.status) == (
            Q,
            {"n": 1},
            4,
            3,
            "ready",
        )
        [after] = await backend.list_schedules()
        assert after.next_run_at >= before.next_run_at  # moved past the pass (not back)
        assert after.last_run_at is not None
        assert after.next_run_at > after.last_run_at  # the next tick is after the pass

    async def test_a_run_of_missed_ticks_enqueues_one_job(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_schedule("s", Q, EVERY_MINUTE)
        await self._pass_next_tick(backend, "s", missed=5)
        assert len(await backend.enqueue_due()) == 1
        assert await backend.enqueue_due() == []
        assert len(await backend.list_jobs()) == 1

    async def test_concurrent_passes_enqueue_each_tick_once(
        self, backend: Backend, clock: object
    ) -> None:
        for name in ("a", "b", "c"):
            await backend.set_schedule(name, Q, EVERY_MINUTE, name)
        for name in ("a", "b", "c"):
            await self._pass_next_tick(backend, name)
        enqueued: list[int] = []

        async def one_pass() -> None:
            enqueued.extend(await backend.enqueue_due())

        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(one_pass)
        jobs = await backend.list_jobs()
        assert sorted(enqueued) == sorted(job.id for job in jobs)
        assert sorted(job.payload for job in jobs) == ["a", "b", "c"]

    async def test_a_scheduled_job_wakes_its_queue(self, backend: Backend, clock: object) -> None:
        await backend.set_schedule("s", Q, EVERY_MINUTE)
        await self._pass_next_tick(backend, "s")
        async with backend.listen(Q, "w") as notices:
            assert len(await backend.enqueue_due()) == 1
            notice = await self._next_notice(notices, NoticeKind.AVAILABLE)
        assert notice.queue == Q

    async def test_deleting_a_schedule_keeps_its_jobs_and_ends_its_ticks(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_schedule("s", Q, EVERY_MINUTE)
        await self._pass_next_tick(backend, "s")
        [job_id] = await backend.enqueue_due()
        assert await backend.delete_schedule("s") is True
        assert (await backend.get_job(job_id)).status == "ready"
        assert await backend.enqueue_due() == []

    async def test_schedule_calls_are_counted(self, backend: Backend, clock: object) -> None:
        await backend.set_schedule("s", Q, EVERY_MINUTE)
        await backend.list_schedules()
        await backend.enqueue_due()
        await backend.delete_schedule("s")
        calls = backend.statistics()["calls"]
        for op in ("set_schedule", "list_schedules", "enqueue_due", "delete_schedule"):
            assert calls[op] == 1, op


async def _move_back(backend: PostgresBackend, name: str, missed: int) -> None:
    """Move a schedule's next run just into the past, ``missed`` minutes further back."""
    async with backend.acquire() as connection:
        moved = await connection.fetchval(
            f'UPDATE "{backend.schema}".schedules '
            "SET next_run_at = now() - make_interval(secs => 0.001 + 60 * $2::integer) "
            "WHERE name = $1 RETURNING 1",
            name,
            missed,
        )
    assert moved == 1, f"no schedule named {name!r}"
