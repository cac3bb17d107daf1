"""Dead letters on PostgreSQL (docs/protocol.rst §19): the jobs that failed for good, a
page of them and a bounded summary. The SQL is ``dead_letters.sql``'s, one statement per
call, read where the operators' reads go (a read replica when there is one). A redrive is
``retry_matching`` with the dead-letter filters (``controls.py``, ``operator.sql``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from trioqueue._backends.dead_letter_checks import (
    DEFAULT_SAMPLE,
    MAX_DEAD_ERROR,
    DeadFilter,
    check_dead_page,
    check_dead_sample,
    summary_of,
)
from trioqueue._backends.postgres.arguments import like_pattern
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.statements import fetch
from trioqueue._operator_types import DeadLetter, DeadLetterSummary

__all__ = ["DeadLetterCalls"]


class DeadLetterCalls(BackendBase):
    """The PostgresBackend's dead-letter reads."""

    async def list_dead_letters(
        self,
        queue: str | None = None,
        *,
        error: str | None = None,
        error_type: str | None = None,
        failed_since: datetime | None = None,
        failed_before: datetime | None = None,
        cancelled: bool | None = None,
        limit: int = 100,
        after: int | None = None,
    ) -> list[DeadLetter]:
        """The dead letters matching the filters, newest (highest id) first; ``after``:
        the last id of the page before.

        Raises:
            TypeError, ValueError: naming every bad argument.
        """
        given = (queue, error, error_type, failed_since, failed_before, cancelled)
        found, size, cursor = check_dead_page(given, limit, after)
        args = (*_filter_arguments(found), cursor, size, MAX_DEAD_ERROR)
        rows = await self._reads.run(
            "list_dead_letters", fetch, self._sql["list_dead_letters"], *args
        )
        return [_dead_letter(row) for row in rows]

    async def dead_letter_summary(
        self,
        queue: str | None = None,
        *,
        error: str | None = None,
        error_type: str | None = None,
        failed_since: datetime | None = None,
        failed_before: datetime | None = None,
        cancelled: bool | None = None,
        sample: int | None = DEFAULT_SAMPLE,
    ) -> DeadLetterSummary:
        """How many dead letters match, per queue and per error type, counted among the
        newest ``sample`` that match (None: all, exactly).

        Raises:
            TypeError, ValueError: naming every bad argument.
        """
        given = (queue, error, error_type, failed_since, failed_before, cancelled)
        found, size = check_dead_sample(given, sample)
        args = (*_filter_arguments(found), size)
        rows = await self._reads.run(
            "dead_letter_summary", fetch, self._sql["dead_letter_summary"], *args
        )
        return summary_of([(row["kind"], row["name"], row["n"]) for row in rows], size)


def _filter_arguments(found: DeadFilter) -> tuple[Any, ...]:
    """$1..$6 of both statements."""
    return (
        found.queue,
        like_pattern(found.error),
        found.error_type,
        found.failed_since,
        found.failed_before,
        found.cancelled,
    )


def _dead_letter(row: Any) -> DeadLetter:
    return DeadLetter(
        id=row["id"],
        queue=row["queue"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        priority=row["priority"],
        last_error=row["last_error"],
        error_type=row["error_type"],
        cancelled=row["cancelled"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
    )
