"""Argument checks of the dead-letter calls (docs/protocol.rst §19): the filters that
``list_dead_letters``, ``dead_letter_summary`` and ``retry_matching`` share, a page and a
sample. Both backends run them before any statement, so bad input gets one error naming
every bad argument, and nothing is read or written. Also the summary both backends build
from their counts (:func:`summary_of`), and the public reads themselves
(:class:`DeadLetterCalls`): each backend supplies only its statements.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from trioqueue._backends.operator_checks import Matching, check_matching
from trioqueue._backends.problems import Problems, collect, raise_problems
from trioqueue._backends.validation import (
    MAX_LIST_LIMIT,
    check_int,
    check_queue_filter,
    check_search,
)
from trioqueue._operator_types import DeadLetter, DeadLetterSummary
from trioqueue._types import JobStatus

__all__ = [
    "DEFAULT_SAMPLE",
    "MAX_DEAD_ERROR",
    "MAX_ERROR_TYPE",
    "NO_DEAD_FILTER",
    "DeadFilter",
    "DeadLetterCalls",
    "DeadRows",
    "check_dead_filter",
    "check_dead_page",
    "check_dead_sample",
    "check_retry_matching",
    "summary_of",
]

#: How many of the newest matching dead letters a summary counts by default.
DEFAULT_SAMPLE = 10_000
#: How many characters of ``last_error`` a dead letter carries (``get_job`` reads it all).
MAX_DEAD_ERROR = 1000
#: The longest error type a filter names (a qualified class name).
MAX_ERROR_TYPE = 300

#: A summary statement's rows: ``(kind, name, n)`` (:func:`summary_of`).
DeadRows = list[tuple[str, str | None, int]]


@dataclass(frozen=True, slots=True)
class DeadFilter:
    """The checked filters of a dead-letter read or redrive; None: no filter."""

    queue: str | None = None
    error: str | None = None  # text anywhere in last_error, any case
    error_type: str | None = None  # the last attempt's error type, exactly ("": none)
    failed_since: datetime | None = None  # finished_at >= this
    failed_before: datetime | None = None  # finished_at < this
    cancelled: bool | None = None

    @property
    def empty(self) -> bool:
        return self == NO_DEAD_FILTER


NO_DEAD_FILTER = DeadFilter()


def check_dead_filter(
    queue: object,
    error: object,
    error_type: object,
    failed_since: object,
    failed_before: object,
    cancelled: object,
) -> DeadFilter:
    """The filters, checked all together.

    Raises:
        TypeError, ValueError: naming every bad filter (one TypeError or ValueError as it
            is when only one is): a queue or text ``list_jobs`` would refuse, an error type
            that is not a str of at most 300 characters, a time that is not a timezone-aware datetime, a
            ``failed_since`` after ``failed_before``, a ``cancelled`` not None or a bool.
    """
    problems: Problems = []
    checked = _filter(problems, (queue, error, error_type, failed_since, failed_before, cancelled))
    raise_problems(problems)
    return checked


def _filter(problems: Problems, given: tuple[object, ...]) -> DeadFilter:
    """The filters of ``given`` (as :func:`check_dead_filter` takes them), each bad one's
    problem added to ``problems`` (and None in its place)."""
    queue, error, error_type, failed_since, failed_before, cancelled = given
    checked = DeadFilter(
        queue=collect(problems, lambda: None if queue is None else check_queue_filter(queue)),
        error=collect(problems, lambda: _error_text(error)),
        error_type=collect(problems, lambda: _error_type(error_type)),
        failed_since=collect(problems, lambda: _moment("failed_since", failed_since)),
        failed_before=collect(problems, lambda: _moment("failed_before", failed_before)),
        cancelled=collect(problems, lambda: _cancelled(cancelled)),
    )
    since, before = checked.failed_since, checked.failed_before
    if since is not None and before is not None and since > before:
        problems.append(ValueError("failed_since must not be after failed_before"))
    return checked


def check_retry_matching(
    queue: object,
    status: object,
    search: object,
    cancelled: object,
    batch_size: object,
    dead: tuple[object, object, object, object],
) -> Matching:
    """``retry_matching``'s arguments: the filters of ``check_matching`` and ``dead``,
    the dead-letter filters ``(error, error_type, failed_since, failed_before)``, checked
    all together.

    Raises:
        TypeError, ValueError: naming every bad argument.
    """
    problems: Problems = []
    matching = collect(
        problems,
        lambda: check_matching(queue, status, search, cancelled, batch_size, retry=True),
    )
    error, error_type, since, before = dead
    checked = collect(
        problems, lambda: check_dead_filter(None, error, error_type, since, before, None)
    )
    raise_problems(problems)
    assert matching is not None  # a problem was raised otherwise
    assert checked is not None
    return replace(matching, dead=None if checked.empty else checked)


def check_dead_page(
    given: tuple[object, ...], limit: object, after: object
) -> tuple[DeadFilter, int, int | None]:
    """A page's filters ``given`` (as :func:`check_dead_filter` takes them), its
    ``limit`` (1..10000) and ``after``, None or the last id of the page before (the next
    page holds lower ids), checked all together."""
    problems: Problems = []
    checked = _filter(problems, given)
    size = collect(problems, lambda: check_int("limit", limit, minimum=1, maximum=MAX_LIST_LIMIT))
    cursor = collect(
        problems, lambda: None if after is None else check_int("after", after, minimum=1)
    )
    raise_problems(problems)
    assert size is not None  # a problem was raised otherwise
    return checked, size, cursor


def check_dead_sample(given: tuple[object, ...], sample: object) -> tuple[DeadFilter, int | None]:
    """A summary's filters ``given`` and its ``sample``: how many of the newest matching
    dead letters to count (1..10,000,000), or None: every one (an exact count, which reads
    them all); checked all together."""
    problems: Problems = []
    checked = _filter(problems, given)
    size = collect(
        problems,
        lambda: None if sample is None else check_int("sample", sample, minimum=1, maximum=10**7),
    )
    raise_problems(problems)
    return checked, size


class DeadLetterCalls(ABC):
    """``list_dead_letters``, ``dead_letter_summary`` and ``retry_matching`` (the redrive)
    as both backends offer them: the arguments checked here, once, before any statement; a
    backend runs the statements (:meth:`_read_dead_page`, :meth:`_count_dead`,
    :meth:`_retry_batches`) with the checked values."""

    async def retry_matching(
        self,
        queue: str | None = None,
        status: JobStatus | None = "failed",
        *,
        search: str | None = None,
        cancelled: bool | None = None,
        batch_size: int = 500,
        error: str | None = None,
        error_type: str | None = None,
        failed_since: datetime | None = None,
        failed_before: datetime | None = None,
    ) -> int:
        """Retry every failed job matching the filters, ``batch_size`` per statement (the
        cursor moving on by id); how many were retried.

        Raises:
            ValueError: a bad filter, a status other than ``"failed"`` or None, or
                ``batch_size`` outside 1..10000.
        """
        dead = (error, error_type, failed_since, failed_before)
        matching = check_retry_matching(queue, status, search, cancelled, batch_size, dead)
        return await self._retry_batches(matching)

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
        return await self._read_dead_page(found, size, cursor)

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
        return summary_of(await self._count_dead(found, size), size)

    @abstractmethod
    async def _read_dead_page(
        self, found: DeadFilter, size: int, cursor: int | None
    ) -> list[DeadLetter]:
        """``list_dead_letters``: at most ``size`` matches below id ``cursor``, each
        ``last_error`` cut to :data:`MAX_DEAD_ERROR` characters."""

    @abstractmethod
    async def _count_dead(self, found: DeadFilter, size: int | None) -> DeadRows:
        """``dead_letter_summary``: the counts of the newest ``size`` matches."""

    @abstractmethod
    async def _retry_batches(self, matching: Matching) -> int:
        """``retry_matching``: one statement per batch of ``matching.batch_size`` (each
        ``FOR UPDATE SKIP LOCKED`` on PostgreSQL), the cursor moving on by id."""


def summary_of(rows: DeadRows, sample: int | None) -> DeadLetterSummary:
    """The summary from its statement's rows ``(kind, name, n)``: one ``total`` row (the
    sample's matches plus at most one more), then the counts per queue and error type."""
    picked = next(n for kind, _, n in rows if kind == "total")
    capped = sample is not None and picked > sample
    return DeadLetterSummary(
        total=sample if capped and sample is not None else picked,
        capped=capped,
        by_queue=_ranked((name or "", n) for kind, name, n in rows if kind == "queue"),
        by_error_type=_ranked((name, n) for kind, name, n in rows if kind == "error_type"),
    )


def _ranked(counts: Any) -> tuple[Any, ...]:
    """Most first, then by name (None, no error type, first among equals)."""
    return tuple(sorted(counts, key=lambda pair: (-pair[1], pair[0] is not None, pair[0] or "")))


def _error_text(error: object) -> str | None:
    return None if error is None else _text("error", error)


def _error_type(error_type: object) -> str | None:
    """An error type, exactly; ``""`` selects the dead letters with none recorded."""
    if error_type is None:
        return None
    text = _text("error_type", error_type)
    if len(text) > MAX_ERROR_TYPE:
        raise ValueError(f"error_type must be at most {MAX_ERROR_TYPE} characters")
    return text


def _text(name: str, value: object) -> str:
    """A filter's text, checked as ``list_jobs`` checks a search, its error naming it."""
    try:
        checked = check_search(value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("search", name, 1)) from None
    assert checked is not None  # value is not None
    return checked


def _moment(name: str, value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime or None, not {type(value).__name__}")
    if value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware (a naive datetime names no moment)")
    return value


def _cancelled(cancelled: object) -> bool | None:
    if cancelled is not None and not isinstance(cancelled, bool):
        raise TypeError(f"cancelled must be None or a bool, not {type(cancelled).__name__}")
    return cancelled
