"""``trioqueue schedule set|delete|list|enable|disable|run``: periodic jobs (docs/cli.rst, docs/scheduling.rst).

The arguments and the database work live here; ``_commands/schedule.py`` declares the
subcommand and runs these functions on the database with its usual error handling (bad input exits 2, a
database failure or an unknown schedule 1).
"""

from __future__ import annotations

import argparse
import datetime
import json
import zoneinfo
from typing import Any

import trioqueue
from trioqueue._backends.validation import check_schedule
from trioqueue.cli._escape import visible
from trioqueue.cli._terminal import format_age, format_table

__all__ = [
    "ACTIONS",
    "add_arguments",
    "checked_options",
    "delete_schedule",
    "enable_schedule",
    "list_schedules",
    "parse_payload",
    "run_schedule_now",
    "schedule_report",
    "schedules_table",
    "set_schedule",
]

HELP = "create, replace, delete, list, enable, disable or run schedules (periodic jobs)"
DESCRIPTION = (
    "Schedules enqueue a job at each tick of a five-field cron expression, read in a time "
    "zone; every running worker pool takes part, and each tick gives one job "
    "(docs/scheduling.rst)."
)

#: The actions of ``trioqueue schedule`` and their help.
ACTIONS = {
    "set": "create or replace a schedule; prints its next run",
    "delete": "delete a schedule (its jobs stay); exit 1 when there is none",
    "list": "list the schedules with their next and last runs",
    "enable": "enable a schedule again: its next run is the first tick from now on",
    "disable": "disable a schedule: it enqueues nothing until enabled (its ticks are dropped)",
    "run": "enqueue a schedule's job now, beside its ticks; prints the job's id",
}


def add_arguments(
    parser: argparse.ArgumentParser, common: argparse.ArgumentParser
) -> dict[str, argparse.ArgumentParser]:
    """The actions as subcommands of ``parser``, each with the ``common`` options; returns
    them by name."""
    actions = parser.add_subparsers(title="actions", dest="action", metavar="ACTION", required=True)
    made = {
        name: actions.add_parser(name, parents=[common], help=help, description=help)
        for name, help in ACTIONS.items()
    }
    add = made["set"]
    add.add_argument("name", metavar="NAME", help="the schedule's name (set replaces one)")
    add.add_argument("queue", metavar="QUEUE", help="the queue its jobs go to")
    add.add_argument(
        "cron",
        metavar="CRON",
        help="five fields: minute hour day-of-month month day-of-week, e.g. '30 2 * * *' "
        "(quote it)",
    )
    add.add_argument(
        "--payload", default="null", metavar="JSON", help="each job's payload (default: null)"
    )
    add.add_argument(
        "--timezone",
        default="UTC",
        metavar="TZ",
        help="the IANA time zone CRON is read in, e.g. Europe/Berlin (default: UTC)",
    )
    add.add_argument("--priority", type=int, default=0, help="each job's priority (default: 0)")
    add.add_argument(
        "--max-attempts", type=int, metavar="N", help="each job's attempts (default: 10)"
    )
    for name in ("delete", "enable", "disable", "run"):
        made[name].add_argument("name", metavar="NAME")
    return made


def parse_payload(text: str) -> Any:
    """``--payload``'s JSON text as a value.

    Raises:
        ValueError: not JSON (the command line reports it, exit 2).
    """
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"--payload is not valid JSON: {exc}") from None


def checked_options(
    name: str,
    queue: str,
    cron: str,
    *,
    payload: str,
    timezone: str,
    priority: int,
    max_attempts: int | None,
) -> dict[str, Any]:
    """``set_schedule``'s options (the payload parsed), after the checks it makes, made
    before connecting so that nothing is written.

    Raises:
        ValueError: every problem at once, one per line (a payload that is not JSON among
            them: it is checked beside the others, not before them), then
            ``nothing was written``.
    """
    problems: list[str] = []
    try:
        value = parse_payload(payload)
    except ValueError as exc:
        problems.append(str(exc))
        value = None  # stands in for the payload, so that the other checks still run
    options = {
        "payload": value,
        "timezone": timezone,
        "priority": priority,
        "max_attempts": max_attempts,
    }
    try:
        check_schedule(name, queue, cron, **options)
    except (TypeError, ValueError) as exc:
        problems.extend(str(exc).splitlines())
    if problems:
        raise ValueError("\n".join([*problems, "nothing was written"]))
    return options


async def set_schedule(
    dsn: str, schema: str, name: str, queue: str, cron: str, options: dict[str, Any]
) -> trioqueue.ScheduleInfo:
    """Create or replace a schedule; the schedule as stored."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.set_schedule(name, queue, cron, **options)


async def delete_schedule(dsn: str, schema: str, name: str) -> bool:
    """Delete a schedule; False when there is none."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.delete_schedule(name)


async def list_schedules(dsn: str, schema: str) -> list[trioqueue.ScheduleInfo]:
    """Every schedule, by name."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.list_schedules()


async def enable_schedule(dsn: str, schema: str, name: str, enabled: bool) -> bool:
    """Enable (``enabled``) or disable a schedule; False when there is none."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.set_schedule_enabled(name, enabled)


async def run_schedule_now(dsn: str, schema: str, name: str) -> int | None:
    """Enqueue the schedule's job now; its id, or None when there is no such schedule."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.run_schedule_now(name)


def schedule_report(info: trioqueue.ScheduleInfo) -> str:
    """What ``schedule set`` prints: the schedule and its next run, in its own time zone."""
    return visible(
        f"schedule {info.name!r}: {info.cron!r} in {info.timezone} on queue {info.queue!r}; "
        f"next run {_local(info.next_run_at, info.timezone)}"
    )


def schedules_table(schedules: list[trioqueue.ScheduleInfo], now: datetime.datetime) -> list[str]:
    """A row per schedule: name, queue, cron and time zone, the next run (in the schedule's
    time zone, and how far off by this machine's clock; ``disabled`` for a disabled one)
    and the last."""
    headers = ("NAME", "QUEUE", "CRON", "TIMEZONE", "NEXT RUN", "IN", "LAST RUN")
    rows = [
        [
            info.name,
            info.queue,
            info.cron,
            info.timezone,
            _local(info.next_run_at, info.timezone) if info.enabled else "disabled",
            format_age(max(0.0, (info.next_run_at - now).total_seconds())) if info.enabled else "-",
            "never" if info.last_run_at is None else _local(info.last_run_at, info.timezone),
        ]
        for info in schedules
    ]
    return format_table(headers, rows)


def _local(at: datetime.datetime, timezone: str) -> str:
    """``at`` as local time in ``timezone``, with its UTC offset."""
    try:
        zone: datetime.tzinfo = zoneinfo.ZoneInfo(timezone)
    except (KeyError, ValueError, OSError):
        zone = datetime.UTC  # a zone this host does not know: show UTC
    return at.astimezone(zone).strftime("%Y-%m-%d %H:%M %z")
