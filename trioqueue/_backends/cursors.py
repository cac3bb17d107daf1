"""Keyset cursors of ``list_jobs`` (docs/api.rst, "Paging through jobs").

Theory of operation
-------------------
An ``offset`` page makes the database walk past every row before it: page 50,000 of a
table of 10 million finished jobs reads a million rows. A cursor names the last row a page
showed instead, by the values its sort orders on (the sort key and the id that breaks
ties), and the next page starts right after that row: an index range scan from that point,
whatever the depth. Rows inserted or deleted meanwhile shift no page: a row is shown on the
page its key falls in, once.

A cursor is opaque text (URL-safe base64 of a small JSON array): the sort it was made for,
the key, and the id. The key of the ``finished_at`` sorts may be None (an unfinished job:
those come last in both orders). Both backends decode it here, and reject a cursor of
another sort, or one that does not decode, with ``ValueError``.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import TypeGuard

from trioqueue._types import JOB_SORTS, JobInfo, JobSort

__all__ = ["Cursor", "job_cursor", "read_cursor"]

#: A cursor longer than this is not one of ours (a timestamp key makes them ~80 chars).
MAX_CURSOR = 200

Key = int | datetime | None


@dataclass(frozen=True)
class Cursor:
    """A decoded cursor: the row (``key``, ``id``) in ``sort`` order."""

    sort: JobSort
    key: Key
    id: int

    @property
    def column(self) -> str:
        return self.sort.lstrip("-")

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")


def sort_key(info: JobInfo, sort: JobSort) -> Key:
    """The value ``sort`` orders ``info`` by (before the id that breaks ties)."""
    column = sort.lstrip("-")
    if column == "id":
        return info.id
    if column == "priority":
        return info.priority
    if column == "created_at":
        return info.created_at
    return info.finished_at


def job_cursor(info: JobInfo, sort: JobSort) -> str:
    """The cursor of ``info`` in ``sort`` order: pass it as ``after`` for the page after
    it, as ``before`` for the page before it."""
    key = sort_key(info, sort)
    shown = key.isoformat() if isinstance(key, datetime) else key
    text = json.dumps([sort, shown, info.id], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def read_cursor(cursor: object, sort: JobSort) -> Cursor:
    """Decode a cursor made for ``sort``.

    Raises:
        TypeError: ``cursor`` is not a str.
        ValueError: it does not decode, or was made for another sort.
    """
    if not isinstance(cursor, str):
        raise TypeError(f"cursor must be a str, not {type(cursor).__name__}")
    parts = _parts(cursor)
    made_for, key, job_id = parts
    if made_for != sort:
        raise ValueError(f"the cursor was made for sort {made_for!r}, not {sort!r}")
    return Cursor(sort, _key(sort, key), job_id)


def _parts(cursor: str) -> tuple[JobSort, object, int]:
    bad = ValueError("cursor is not one that list_jobs gave")
    if not cursor or len(cursor) > MAX_CURSOR:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = json.loads(raw)
    except (binascii.Error, ValueError):
        raise bad from None
    if not (isinstance(parts, list) and len(parts) == 3):
        raise bad
    sort, key, job_id = parts
    known = next((s for s in JOB_SORTS if s == sort), None)
    if known is None or not _is_int(job_id) or not 1 <= job_id < 2**63:
        raise bad
    return known, key, job_id


def _key(sort: JobSort, key: object) -> Key:
    column = sort.lstrip("-")
    bad = ValueError(f"cursor's key does not fit sort {sort!r}")
    if column in ("id", "priority"):
        if not _is_int(key) or not -(2**63) <= key < 2**63:
            raise bad
        return key
    if key is None and column == "finished_at":
        return None
    if not isinstance(key, str):
        raise bad
    try:
        moment = datetime.fromisoformat(key)
    except ValueError:
        raise bad from None
    if moment.tzinfo is None:
        raise bad
    return moment


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
