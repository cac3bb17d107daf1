"""Rows of the PostgreSQL backend's reads as the protocol's types (JobInfo, ScheduleInfo).

A stored payload or result that Python's json refuses comes back marked
(:class:`~trioqueue.UndecodablePayload`), and a text the query cut for a preview as
:class:`~trioqueue.TruncatedText`, so one odd row never fails a whole read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from trioqueue._backends.validation import decode_payload
from trioqueue._types import JobInfo, ScheduleInfo, TruncatedText, UndecodablePayload


def read_payload(text: str) -> Any:
    """A stored payload, decoded; or, when Python's json refuses the text (more digits than
    ``int()`` takes, nesting deeper than the recursion limit), the text itself, marked."""
    try:
        return decode_payload(text)
    except (ValueError, RecursionError) as exc:
        return UndecodablePayload(text, f"{type(exc).__name__}: {exc}")


def job_info(row: Any) -> JobInfo:
    state = row["state"]
    running = state == "running"
    # Only get_job's row has it (docs/protocol.rst §21); None for a job that waits for none.
    waiting_on = tuple(row.get("waiting_on") or ())
    return JobInfo(
        id=row["id"],
        queue=row["queue"],
        payload=_read_cut(row, "payload"),
        status=row["state"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        priority=row["priority"],
        progress=row["progress"],
        last_error=_cut(row, "last_error"),
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        lease_expires_at=row["not_visible_until"] if running else None,
        last_renewed_at=row["last_renewed_at"],
        cancel_requested_at=row["cancel_requested_at"],
        cancel_acknowledged_at=row["cancel_acknowledged_at"],
        worker_id=row["worker_id"] if running else None,
        result=None if row["result"] is None else _read_cut(row, "result"),
        group=row["group_key"],
        cancelled=row["cancelled"],
        snoozes=row["snoozes"],
        # A waiting dependent is scheduled at 'infinity' (asyncpg reads it as the naive
        # datetime.max, in every read): it has no next attempt time (§21).
        next_attempt_at=(
            row["not_visible_until"]
            if state == "scheduled" and row["not_visible_until"] != datetime.max
            else None
        ),
        # The pool that ran the last attempt: the row keeps worker_id until a retry.
        finished_by=row["worker_id"] if state in ("succeeded", "failed") else None,
        # Only get_job's and await_job's rows have these (docs/protocol.rst §16).
        checkpoint=_read_checkpoint(row.get("checkpoint")),
        checkpointed_at=row.get("checkpointed_at"),
        waiting_on=waiting_on,
        parent_id=row.get("parent_id"),  # get_job's row alone (docs/protocol.rst §22)
    )


def _read_checkpoint(text: str | None) -> Any:
    return None if text is None else read_payload(text)


def _cut(row: Any, column: str) -> Any:
    """A text column of a list read with a preview: a :class:`TruncatedText` when the
    query cut it (its ``<column>_length`` is longer than what came); else the text."""
    text = row[column]
    length = row.get(f"{column}_length")  # absent from get_job's row
    if text is not None and length is not None and length > len(text):
        return TruncatedText(text, length)
    return text


def _read_cut(row: Any, column: str) -> Any:
    """A payload or result: decoded, unless the query cut it (:func:`_cut`)."""
    text = _cut(row, column)
    return text if isinstance(text, TruncatedText) else read_payload(text)


def schedule_info(row: Any) -> ScheduleInfo:
    return ScheduleInfo(
        name=row["name"],
        queue=row["queue"],
        cron=row["cron"],
        timezone=row["timezone"],
        payload=read_payload(row["payload"]),
        priority=row["priority"],
        max_attempts=row["max_attempts"],
        next_run_at=row["next_run_at"],
        last_run_at=row["last_run_at"],
        enabled=row["enabled"],
    )
