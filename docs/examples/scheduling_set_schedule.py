"""Set, list and delete a schedule (docs/scheduling.rst, "Setting a schedule")."""

import datetime
import sys
import zoneinfo

import trio

import trioqueue


async def main(dsn: str, schema: str = "trioqueue") -> None:
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()

    # [start schedule]
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        info = await backend.set_schedule(
            "nightly-report",  # its name: set again to replace it
            "reports",  # the queue its jobs go to
            "30 2 * * *",  # minute hour day-of-month month day-of-week
            {"kind": "daily"},  # each job's payload (default: None)
            timezone="Europe/Berlin",  # the IANA time zone of the cron (default: UTC)
            priority=0,
            max_attempts=None,  # None: enqueue's default, 10
        )
        print(info.next_run_at)  # the next tick, an aware UTC datetime

        await backend.delete_schedule("nightly-report")  # False when there is none
        for schedule in await backend.list_schedules():  # by name
            print(schedule.name, schedule.next_run_at, schedule.last_run_at)
        # [end schedule]

        assert info.next_run_at.utcoffset() == datetime.timedelta(0)
        berlin = info.next_run_at.astimezone(zoneinfo.ZoneInfo("Europe/Berlin"))
        assert (berlin.hour, berlin.minute) == (2, 30)
        assert info.max_attempts == 10
        assert info.payload == {"kind": "daily"}
        assert await backend.list_schedules() == []
        assert await backend.delete_schedule("nightly-report") is False


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
