"""``trioqueue tables``: the store's tables and indexes (size, live and dead rows, the last
autovacuum and autoanalyze) and its oldest running and ready jobs, so that an operator sees
bloat before it hurts (docs/dashboard.rst, "Table health")."""

from __future__ import annotations

import argparse
import datetime

import trioqueue
from trioqueue.cli._commands.common import Subparsers, run_on_database, subcommand
from trioqueue.cli._escape import say
from trioqueue.cli._terminal import format_age, format_table


def add(commands: Subparsers) -> None:
    subcommand(
        commands,
        "tables",
        _run_tables,
        "show the tables' and indexes' sizes, dead rows, last vacuum, and the oldest work",
    )


def _run_tables(args: argparse.Namespace) -> int:
    health = run_on_database(args, table_health)
    say(*health_report(health, datetime.datetime.now(datetime.UTC)))
    return 0


async def table_health(dsn: str, schema: str) -> trioqueue.TableHealth:
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.table_health()


def health_report(health: trioqueue.TableHealth, now: datetime.datetime) -> list[str]:
    """The tables, a blank line, the indexes, a blank line, and the oldest work."""
    tables = format_table(
        (
            "TABLE",
            "SIZE",
            "LIVE ROWS",
            "DEAD ROWS",
            "DEAD %",
            "LAST AUTOVACUUM",
            "LAST AUTOANALYZE",
        ),
        [
            [
                size.name,
                format_bytes(size.total_bytes),
                _count(size.live_rows),
                _count(size.dead_rows),
                _dead_share(size),
                _when(size.last_autovacuum, now),
                _when(size.last_autoanalyze, now),
            ]
            for size in health.tables
        ],
    )
    indexes = format_table(
        ("INDEX", "SIZE"), [[size.name, format_bytes(size.total_bytes)] for size in health.indexes]
    )
    return [*tables, "", *indexes, "", *oldest_lines(health, now)]


def oldest_lines(health: trioqueue.TableHealth, now: datetime.datetime) -> list[str]:
    """The longest-running job and the job ready the longest, with how long."""
    lines = []
    for what, since, job_id in (
        ("running", health.oldest_running_since, health.oldest_running_id),
        ("ready", health.oldest_ready_since, health.oldest_ready_id),
    ):
        if since is None or job_id is None:
            lines.append(f"oldest {what}: none")
        else:
            lines.append(f"oldest {what}: job {job_id}, for {_age(since, now)}")
    return lines


def format_bytes(count: int) -> str:
    """``8.0 KiB``, ``1.5 MiB``: binary units, as PostgreSQL's ``pg_size_pretty``."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def _count(rows: int | None) -> str:
    return "-" if rows is None else str(rows)


def _dead_share(size: trioqueue.TableSize) -> str:
    """Dead rows as a share of all rows: what autovacuum's scale factor is measured on."""
    live, dead = size.live_rows or 0, size.dead_rows or 0
    return "-" if live + dead == 0 else f"{dead / (live + dead):.0%}"


def _age(since: datetime.datetime, now: datetime.datetime) -> str:
    return format_age(max(0.0, (now - since).total_seconds()))


def _when(at: datetime.datetime | None, now: datetime.datetime) -> str:
    return "never" if at is None else f"{_age(at, now)} ago"
