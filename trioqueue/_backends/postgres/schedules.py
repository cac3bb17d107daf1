"""The PostgreSQL backend's schedules and scheduling passes (docs/scheduling.rst).

Next ticks are computed in Python (``_core/schedule.py``) from the database's now(), read on
the same connection in the same crossing; a pass enqueues and advances its due schedules in
one compare-and-set statement, so concurrent passes never enqueue a tick twice.
"""

from __future__ import annotations

import logging
from typing import Any

from trioqueue._backends.operator_checks import check_enabled
from trioqueue._backends.postgres import operator
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.rows import schedule_info
from trioqueue._backends.postgres.statements import fetch, fetchval
from trioqueue._backends.validation import ScheduleRequest, check_schedule, check_schedule_name
from trioqueue._core.schedule import Due, next_tick, plan_advances
from trioqueue._types import ScheduleInfo

log = logging.getLogger("trioqueue.postgres")


#: Schedules one scheduling pass enqueues at most (the rest wait for the next pass).
SCHEDULES_PER_PASS = 1000


class ScheduleCalls(BackendBase):
    """Schedules: set, delete, list, enable, run now, and the scheduling pass."""

    async def set_schedule(
        self,
        name: str,
        queue: str,
        cron: str,
        payload: Any = None,
        *,
        timezone: str = "UTC",
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> ScheduleInfo:
        """Create or replace a schedule; its next run is the first tick after the
        database's now() (read on the same connection, in the same crossing).

        Raises:
            TypeError, ValueError: listing every bad argument; nothing is written.
        """
        request = check_schedule(
            name,
            queue,
            cron,
            payload,
            timezone=timezone,
            priority=priority,
            max_attempts=max_attempts,
        )
        return await self._driver.run("set_schedule", self._aio_set_schedule, request)

    async def _aio_set_schedule(self, connection: Any, request: ScheduleRequest) -> ScheduleInfo:
        now = await connection.fetchval(self._sql["database_now"])
        next_run_at = next_tick(request.cron, request.timezone, now)
        await connection.execute(
            self._sql["set_schedule"],
            request.name,
            request.queue,
            request.cron,
            request.timezone,
            request.payload,
            request.priority,
            request.max_attempts,
            next_run_at.isoformat(),
        )
        row = await connection.fetchrow(self._sql["get_schedule"], request.name)
        return schedule_info(row)

    async def delete_schedule(self, name: str) -> bool:
        """Delete a schedule; False when there is none. Its jobs stay."""
        name = check_schedule_name(name)
        deleted = await self._driver.run(
            "delete_schedule", fetchval, self._sql["delete_schedule"], name
        )
        return deleted is not None

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by name."""
        rows = await self._reads.run("list_schedules", fetch, self._sql["list_schedules"])
        return [schedule_info(row) for row in rows]

    async def set_schedule_enabled(self, name: str, enabled: bool) -> bool:
        """Enable or disable a schedule; False when there is none. Enabled again, its next
        run is the first tick after the database's now()."""
        name = check_schedule_name(name)
        return await operator.set_schedule_enabled(
            self._driver, self._sql, name, check_enabled(enabled)
        )

    async def run_schedule_now(self, name: str) -> int | None:
        """Enqueue one job of a schedule now, its next run unmoved; the job's id, or None
        when there is no such schedule."""
        name = check_schedule_name(name)
        return await operator.run_schedule_now(self._driver, self._sql, name)

    async def enqueue_due(self) -> list[int]:
        """A scheduling pass, in one crossing: read the due schedules (one round trip, all
        of it when none is due), compute each one's next tick after the database's now(),
        then enqueue and advance them in one compare-and-set statement. Returns the new
        jobs' ids."""
        ids: list[int] = await self._driver.run("enqueue_due", self._aio_enqueue_due)
        return ids

    async def _aio_enqueue_due(self, connection: Any) -> list[int]:
        rows = await connection.fetch(self._sql["due_schedules"], SCHEDULES_PER_PASS)
        if not rows:
            return []
        due = [Due(r["name"], r["cron"], r["timezone"], r["next_run_at"]) for r in rows]
        advances, problems = plan_advances(due, rows[0]["now"])
        for problem in problems:
            log.warning("%s", problem)
        if not advances:
            return []
        inserted = await connection.fetch(
            self._sql["advance_schedules"],
            [a.name for a in advances],
            [a.expected.isoformat() for a in advances],
            [a.next.isoformat() for a in advances],
        )
        return [row["id"] for row in inserted]
