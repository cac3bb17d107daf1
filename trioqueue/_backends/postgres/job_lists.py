"""The statements of ``list_jobs`` and of its counts, built from fixed fragments.

Theory of operation
-------------------
One statement with every filter written as ``($1 IS NULL OR j.queue = $1)`` is planned for
the general case: the planner cannot drop the filters a call leaves out, nor use the
partial index a state filter would allow, so on a big table every list read every row.
Here the statement holds only the filters a call gives, each a fixed fragment of this
module with its value as a parameter (no caller text is ever spliced), so that:

- a state filter becomes ``job_state``'s definition on the columns, whose ``status``
  tests are the predicates the claim path's partial indexes are built on: a list or count
  of live jobs reads the live rows only, however many finished rows the table keeps.
- a finished state adds ``finished_at IS NOT NULL``, which ``jobs_finished_idx`` is built
  on: the ``finished_at`` orders of finished jobs walk that index.
- a cursor (``after``/``before``, trioqueue/_backends/cursors.py) becomes a row comparison
  on the sort's key and id, so a page starts where the last one ended (an index range scan
  for the id and ``finished_at`` orders).
- a search looks at the ``search_window`` newest jobs only, when given: a substring of a
  payload's text has no index, so an unbounded search reads every row.

The ``finished_at`` orders put unfinished jobs last: their statement is the union of the
finished part (in ``jobs_finished_idx`` order) and the unfinished part (the live rows, by
id), each cut to the page, so neither sorts the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trioqueue._backends.cursors import Cursor
from trioqueue._types import JobSort, JobStatus

__all__ = ["JobFilter", "count_statement", "list_statement"]

#: The columns of a listed job (rows.job_info reads them); $1 is the preview cut.
_COLUMNS = """j.id, j.queue, j.group_key,
       {schema}.job_state(j.status, j.not_visible_until, now()) AS state,
       j.attempts, j.max_attempts, j.priority, j.progress,
       j.created_at, j.finished_at, j.not_visible_until, j.last_renewed_at,
       j.cancel_requested_at, j.cancel_acknowledged_at, j.worker_id, j.cancelled, j.snoozes,
       CASE WHEN $1::int IS NULL THEN j.payload::text ELSE left(j.payload::text, $1::int)
           END AS payload,
       CASE WHEN $1::int IS NOT NULL THEN length(j.payload::text) END AS payload_length,
       CASE WHEN $1::int IS NULL THEN j.result::text ELSE left(j.result::text, $1::int)
           END AS result,
       CASE WHEN $1::int IS NOT NULL THEN length(j.result::text) END AS result_length,
       CASE WHEN $1::int IS NULL THEN j.last_error ELSE left(j.last_error, $1::int)
           END AS last_error,
       CASE WHEN $1::int IS NOT NULL THEN length(j.last_error) END AS last_error_length"""

#: Per state, its rows: job_state's definition (migration 0002), written on the columns
#: so that the planner estimates it from the columns' statistics (it knows nothing of a
#: function's result) and can read the partial index each status has. A finished state
#: adds finished_at, which every finished row has and jobs_finished_idx is built on.
_STATE_ROWS: dict[str, str] = {
    "succeeded": "j.status = 'succeeded' AND j.finished_at IS NOT NULL",
    "failed": "j.status = 'failed' AND j.finished_at IS NOT NULL",
    "running": "j.status = 'running' AND j.not_visible_until > now()",
    "scheduled": "j.status = 'queued' AND j.not_visible_until > now()",
    "ready": "(j.status = 'queued' OR j.status = 'running') AND j.not_visible_until <= now()",
}
_LIVE = "(j.status = 'queued' OR j.status = 'running')"
_FINISHED = "j.finished_at IS NOT NULL"
_COLUMN = {"id": "j.id", "priority": "j.priority", "created_at": "j.created_at"}
_CAST = {"id": "bigint", "priority": "integer", "created_at": "timestamptz"}


@dataclass(frozen=True)
class JobFilter:
    """The checked filters of one ``list_jobs`` or count call."""

    queue: str | None = None
    status: JobStatus | None = None
    pattern: str | None = None  # an ILIKE pattern, its wildcards escaped
    cancelled: bool | None = None
    search_window: int | None = None


@dataclass
class _Statement:
    """Fragments and their parameters, numbered in the order they are added."""

    args: list[Any] = field(default_factory=list)

    def param(self, value: Any, cast: str) -> str:
        self.args.append(value)
        return f"${len(self.args)}::{cast}"


def _filters(where: JobFilter, st: _Statement) -> list[str]:
    parts = []
    if where.queue is not None:
        parts.append(f"j.queue = {st.param(where.queue, 'text')}")
    if where.status is not None:
        parts.append(_STATE_ROWS[where.status])
    if where.cancelled is not None:
        parts.append(f"j.cancelled = {st.param(where.cancelled, 'boolean')}")
    if where.pattern is not None:
        like = st.param(where.pattern, "text")
        parts.append(
            f"(j.payload::text ILIKE {like} ESCAPE '\\' OR j.last_error ILIKE {like} ESCAPE '\\')"
        )
        if where.search_window is not None:
            window = st.param(where.search_window, "bigint")
            parts.append(
                f"j.id > (SELECT coalesce(max(m.id), 0) FROM {{schema}}.jobs AS m) - {window}"
            )
    return parts


def count_statement(where: JobFilter, limit: int | None) -> tuple[str, list[Any]]:
    """The matching jobs counted, at most ``limit`` of them (None: all)."""
    st = _Statement()
    condition = " AND ".join(_filters(where, st)) or "true"
    inner = f"SELECT 1 FROM {{schema}}.jobs AS j WHERE {condition}"
    if limit is not None:
        inner += f" LIMIT {st.param(limit, 'bigint')}"
    return f"SELECT count(*) FROM ({inner}) AS matching", st.args


def estimate_statement(where: JobFilter) -> tuple[str, list[Any]]:
    """The planner's plan (JSON) of the matching rows: its row estimate is the count's."""
    st = _Statement()
    condition = " AND ".join(_filters(where, st)) or "true"
    return f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {{schema}}.jobs AS j WHERE {condition}", st.args


def list_statement(
    where: JobFilter,
    sort: JobSort,
    limit: int,
    offset: int,
    preview: int | None,
    after: Cursor | None = None,
    before: Cursor | None = None,
) -> tuple[str, list[Any], bool]:
    """The page's statement, its parameters, and whether its rows come in reverse (a
    ``before`` page is read backwards from its cursor, then turned round)."""
    st = _Statement([preview])
    descending = sort.startswith("-") != (before is not None)
    cursor = after or before
    column = sort.lstrip("-")
    base = _filters(where, st)
    if column != "finished_at":
        parts = [*base]
        if cursor is not None:
            parts.append(
                _past(_COLUMN[column], _CAST[column], cursor.key, cursor.id, descending, st)
            )
        order = _order(_COLUMN[column], descending)
        sql = _select(parts, order, st.param(limit, "bigint"), st.param(offset, "bigint"))
        return sql, st.args, before is not None
    sql = _finished_order(where, base, cursor, descending, before is not None, limit, offset, st)
    return sql, st.args, before is not None


def _finished_order(
    where: JobFilter,
    base: list[str],
    cursor: Cursor | None,
    descending: bool,
    backwards: bool,
    limit: int,
    offset: int,
    st: _Statement,
) -> str:
    """A ``finished_at`` order: finished rows (by finished_at, id), then unfinished ones
    (by id), in the listing's order; read backwards the unfinished part comes first."""
    finished_state = where.status in ("succeeded", "failed")
    live_state = where.status is not None and not finished_state
    parts: list[tuple[int, str]] = []  # (rank in the listing order, branch)
    end = st.param(limit + offset, "bigint")
    if not live_state and (cursor is None or cursor.key is not None or backwards):
        conds = [*base, _FINISHED]
        if cursor is not None and cursor.key is not None:
            conds.append(
                _past("j.finished_at", "timestamptz", cursor.key, cursor.id, descending, st)
            )
        parts.append((0, _branch(conds, _order("j.finished_at", descending), end, 0)))
    if not finished_state and (cursor is None or cursor.key is None or not backwards):
        conds = [*base, _LIVE]
        if cursor is not None and cursor.key is None:
            conds.append(_past("j.id", "bigint", cursor.id, cursor.id, descending, st))
        parts.append((1, _branch(conds, _order("j.id", descending), end, 1)))
    if not parts:
        return _select(["false"], "j.id", st.param(limit, "bigint"), st.param(offset, "bigint"))
    union = " UNION ALL ".join(f"({branch})" for _, branch in parts)
    part_order = "DESC" if backwards else "ASC"
    direction = "DESC" if descending else "ASC"
    return (
        f"SELECT * FROM ({union}) AS info "
        f"ORDER BY info.part {part_order}, info.finished_at {direction}, info.id {direction} "
        f"LIMIT {st.param(limit, 'bigint')} OFFSET {st.param(offset, 'bigint')}"
    )


def _branch(conds: list[str], order: str, end: str, part: int) -> str:
    return (
        f"SELECT {_COLUMNS}, {part} AS part FROM {{schema}}.jobs AS j "
        f"WHERE {' AND '.join(conds)} ORDER BY {order} LIMIT {end}"
    )


def _past(column: str, cast: str, key: Any, job_id: int, descending: bool, st: _Statement) -> str:
    """Rows after (``column``, id) = (key, job_id) in the query's direction."""
    op = "<" if descending else ">"
    if column == "j.id":
        return f"j.id {op} {st.param(job_id, 'bigint')}"
    return f"({column}, j.id) {op} ({st.param(key, cast)}, {st.param(job_id, 'bigint')})"


def _order(column: str, descending: bool) -> str:
    direction = "DESC" if descending else "ASC"
    if column == "j.id":
        return f"j.id {direction}"
    return f"{column} {direction}, j.id {direction}"


def _select(parts: list[str], order: str, limit: str, offset: str) -> str:
    condition = " AND ".join(parts) or "true"
    return (
        f"SELECT {_COLUMNS} FROM {{schema}}.jobs AS j WHERE {condition} "
        f"ORDER BY {order} LIMIT {limit} OFFSET {offset}"
    )
