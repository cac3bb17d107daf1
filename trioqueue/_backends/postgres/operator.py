"""The PostgreSQL backend's operator controls (docs/dashboard.rst, "Controls", "Audit log",
"Table health"): bulk retry and delete in bounded batches, schedules switched off and run by
hand, the audit log and the store's sizes. The SQL is ``operator.sql``'s; the backend's
methods check their arguments and call these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trioqueue._backends.operator_checks import AuditRecord, Matching, read_detail
from trioqueue._backends.postgres.arguments import like_pattern
from trioqueue._backends.postgres.driver import Driver
from trioqueue._backends.postgres.replica import ReadRoute
from trioqueue._core.schedule import next_tick
from trioqueue._operator_types import AuditEntry, TableHealth, TableSize

__all__ = [
    "list_audit",
    "record_audit",
    "run_matching",
    "run_schedule_now",
    "set_schedule_enabled",
    "table_health",
]

#: How often enabling a schedule reads it again when it was replaced between its read and
#: its write (each try is two statements; a schedule replaced that often is a bug).
ENABLE_TRIES = 5


async def run_matching(
    driver: Driver, sql: Mapping[str, str], op: str, matching: Matching, pattern: str | None
) -> int:
    """Retry (``op="retry_matching"``) or delete every matching job, one batch per
    statement, the cursor moving on by id; how many were done.

    Each batch is its own statement on a connection taken for it and given back after, so
    a long run holds neither a connection nor row locks for longer than one batch. The run
    ends with the first batch that picks fewer rows than it may (the rest of the table,
    after the cursor, holds no matching unlocked row).
    """
    cursor, done = 0, 0
    while True:
        row = await driver.run(
            op,
            _fetchrow,
            sql[op],
            cursor,
            matching.queue,
            matching.status,
            pattern,
            matching.batch_size,
            matching.cancelled,
            *_dead_arguments(op, matching),
        )
        done += int(row["done"])
        if row["picked"] < matching.batch_size:
            return done
        cursor = row["last_id"]


def _dead_arguments(op: str, matching: Matching) -> tuple[Any, ...]:
    """A bulk retry's dead-letter parameters ($7..$10: error pattern, error type, failed
    since, failed before); a bulk delete's statement has none."""
    if op != "retry_matching":
        return ()
    dead = matching.dead
    if dead is None:
        return (None, None, None, None)
    return (like_pattern(dead.error), dead.error_type, dead.failed_since, dead.failed_before)


async def set_schedule_enabled(
    driver: Driver, sql: Mapping[str, str], name: str, enabled: bool
) -> bool:
    """Enable or disable a schedule; False when there is none."""
    for _ in range(ENABLE_TRIES):
        updated = await driver.run("set_schedule_enabled", _set_enabled, sql, name, enabled)
        if updated is not None:
            return updated
    raise RuntimeError(f"schedule {name!r} was replaced {ENABLE_TRIES} times while enabling it")


async def _set_enabled(
    connection: Any, sql: Mapping[str, str], name: str, enabled: bool
) -> bool | None:
    """One try: read the schedule and the database's now(), then write with a
    compare-and-set on its cron and time zone. None: replaced in between, try again."""
    row = await connection.fetchrow(sql["schedule_clock"], name)
    if row is None:
        return False
    next_run_at = next_tick(row["cron"], row["timezone"], row["now"])
    written = await connection.fetchval(
        sql["set_schedule_enabled"],
        name,
        enabled,
        next_run_at.isoformat(),
        row["cron"],
        row["timezone"],
    )
    return None if written is None else True


async def run_schedule_now(driver: Driver, sql: Mapping[str, str], name: str) -> int | None:
    job_id: int | None = await driver.run(
        "run_schedule_now", _fetchval, sql["run_schedule_now"], name
    )
    return job_id


async def record_audit(driver: Driver, sql: Mapping[str, str], record: AuditRecord) -> int:
    entry_id: int = await driver.run(
        "record_audit",
        _fetchval,
        sql["record_audit"],
        record.action,
        record.target,
        record.session,
        record.detail,
    )
    return entry_id


async def list_audit(
    driver: Driver | ReadRoute, sql: Mapping[str, str], limit: int, offset: int, action: str | None
) -> list[AuditEntry]:
    rows = await driver.run("list_audit", _fetch, sql["list_audit"], limit, offset, action)
    return [
        AuditEntry(
            id=row["id"],
            at=row["at"],
            action=row["action"],
            target=row["target"],
            session=row["session"],
            detail=read_detail(row["detail"]),
        )
        for row in rows
    ]


async def table_health(driver: Driver, sql: Mapping[str, str], schema: str) -> TableHealth:
    """The schema's tables and indexes from the catalogs, and its oldest work: two
    statements on one connection (one crossing)."""
    return await driver.run("table_health", _table_health, sql, schema)


async def _table_health(connection: Any, sql: Mapping[str, str], schema: str) -> TableHealth:
    sizes = await connection.fetch(sql["table_sizes"], schema)
    oldest = await connection.fetchrow(sql["oldest_work"])
    tables = tuple(_size(row) for row in sizes if not row["is_index"])
    indexes = tuple(_size(row) for row in sizes if row["is_index"])
    return TableHealth(
        tables=tables,
        indexes=indexes,
        oldest_running_since=oldest["running_since"],
        oldest_running_id=oldest["running_id"],
        oldest_ready_since=oldest["ready_since"],
        oldest_ready_id=oldest["ready_id"],
    )


def _size(row: Any) -> TableSize:
    index = row["is_index"]
    return TableSize(
        name=row["name"],
        total_bytes=row["total_bytes"],
        live_rows=None if index else row["live_rows"] or 0,
        dead_rows=None if index else row["dead_rows"] or 0,
        last_autovacuum=row["last_autovacuum"],
        last_autoanalyze=row["last_autoanalyze"],
    )


async def _fetch(connection: Any, query: str, *args: Any) -> list[Any]:
    rows: list[Any] = await connection.fetch(query, *args)
    return rows


async def _fetchrow(connection: Any, query: str, *args: Any) -> Any:
    return await connection.fetchrow(query, *args)


async def _fetchval(connection: Any, query: str, *args: Any) -> Any:
    return await connection.fetchval(query, *args)
