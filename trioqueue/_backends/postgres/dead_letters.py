"""Dead letters on PostgreSQL (docs/protocol.rst §19): the jobs that failed for good, a
page of them and a bounded summary. The SQL is ``dead_letters.sql``'s, one statement per
call, read where the operators' reads go (a read replica when there is one). A redrive is
``retry_matching`` with the dead-letter filters (here too; ``operator.sql``).
"""

from __future__ import annotations

from typing import Any

from trioqueue._backends.dead_letter_checks import (
    MAX_DEAD_ERROR,
    DeadFilter,
    DeadLetterCalls,
    DeadRows,
)
from trioqueue._backends.operator_checks import Matching
from trioqueue._backends.postgres import operator
from trioqueue._backends.postgres.arguments import like_pattern
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.statements import fetch
from trioqueue._operator_types import DeadLetter

__all__ = ["DeadLetterStatements"]


class DeadLetterStatements(BackendBase, DeadLetterCalls):
    """The PostgresBackend's dead-letter statements, and the redrive's (the calls and
    their checks: :class:`~trioqueue._backends.dead_letter_checks.DeadLetterCalls`)."""

    async def _read_dead_page(
        self, found: DeadFilter, size: int, cursor: int | None
    ) -> list[DeadLetter]:
        args = (*_filter_arguments(found), cursor, size, MAX_DEAD_ERROR)
        rows = await self._reads.run(
            "list_dead_letters", fetch, self._sql["list_dead_letters"], *args
        )
        return [_dead_letter(row) for row in rows]

    async def _count_dead(self, found: DeadFilter, size: int | None) -> DeadRows:
        args = (*_filter_arguments(found), size)
        rows = await self._reads.run(
            "dead_letter_summary", fetch, self._sql["dead_letter_summary"], *args
        )
        return [(row["kind"], row["name"], row["n"]) for row in rows]

    async def _retry_batches(self, matching: Matching) -> int:
        pattern = like_pattern(matching.search)
        return await operator.run_matching(
            self._driver, self._sql, "retry_matching", matching, pattern
        )


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
