"""Argument checks of the operator's controls (bulk retry and delete, the audit log, schedules
switched on and off): both backends run them before any statement, so bad input gets one
clear error and nothing is written (docs/api.rst)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trioqueue._backends.validation import (
    MAX_LIST_LIMIT,
    check_filters,
    check_int,
)
from trioqueue._types import JobStatus

if TYPE_CHECKING:
    from trioqueue._backends.dead_letter_checks import DeadFilter

__all__ = [
    "MAX_AUDIT_ACTION",
    "MAX_AUDIT_DETAIL_BYTES",
    "MAX_AUDIT_TARGET",
    "MAX_BATCH_SIZE",
    "AuditRecord",
    "Matching",
    "check_audit",
    "check_enabled",
    "check_list_audit",
    "check_matching",
    "read_detail",
]

#: The most jobs one statement of a bulk retry or delete touches.
MAX_BATCH_SIZE = 10_000
MAX_AUDIT_ACTION = 100
#: A target names a job, a queue, a schedule or a filter: a filter's text may be long.
MAX_AUDIT_TARGET = 2000
MAX_AUDIT_SESSION = 100
#: An entry's detail (its JSON text): counts and ids, never a payload.
MAX_AUDIT_DETAIL_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Matching:
    """The checked filters of a bulk retry or delete, and its batch size."""

    queue: str | None
    status: JobStatus | None
    search: str | None
    cancelled: bool | None
    batch_size: int
    #: A bulk retry's dead-letter filters (docs/protocol.rst §19): error text, error type,
    #: failure times; None for none (and for every bulk delete).
    dead: DeadFilter | None = None


def check_matching(
    queue: object,
    status: object,
    search: object,
    cancelled: object,
    batch_size: object,
    *,
    retry: bool,
) -> Matching:
    """The filters of ``retry_matching`` (``retry=True``) or ``delete_matching``.

    Raises:
        TypeError, ValueError: a filter ``list_jobs`` would refuse, a ``cancelled`` that
            is not None or a bool, a retry of a status other than ``"failed"`` (only failed
            jobs can be retried), or ``batch_size`` outside 1..10000.
    """
    checked_queue, checked_status, checked_search = check_filters(queue, status, search)
    if retry and checked_status not in (None, "failed"):
        raise ValueError(
            f"only failed jobs can be retried: status must be 'failed' or None, not {status!r}"
        )
    if cancelled is not None and not isinstance(cancelled, bool):
        raise TypeError(f"cancelled must be None or a bool, not {type(cancelled).__name__}")
    size = check_int("batch_size", batch_size, minimum=1, maximum=MAX_BATCH_SIZE)
    return Matching(checked_queue, checked_status, checked_search, cancelled, size)


def check_enabled(enabled: object) -> bool:
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool, not {type(enabled).__name__}")
    return enabled


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """A checked audit entry: ``detail`` as its JSON text."""

    action: str
    target: str
    session: str
    detail: str


def check_audit(action: object, target: object, session: object, detail: object) -> AuditRecord:
    """An audit entry a database can store.

    Raises:
        TypeError: a field of the wrong type, or a detail that is not JSON data.
        ValueError: an empty action or session, a field too long, or text a database
            cannot hold (a NUL, a lone surrogate).
    """
    checked_action = _audit_text("action", action, MAX_AUDIT_ACTION, empty=False)
    checked_target = _audit_text("target", target, MAX_AUDIT_TARGET, empty=True)
    checked_session = _audit_text("session", session, MAX_AUDIT_SESSION, empty=False)
    if not isinstance(detail, Mapping):
        raise TypeError(f"detail must be a mapping, not {type(detail).__name__}")
    try:
        text = json.dumps(dict(detail), allow_nan=False, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"detail must be JSON data (str keys, finite numbers): {exc}") from None
    # jsonb refuses the escape of a NUL, and asyncpg text a lone surrogate.
    _storable("detail", text)
    if "\\u0000" in text:
        raise ValueError("detail must not contain a NUL character")
    if len(text.encode("utf-8")) > MAX_AUDIT_DETAIL_BYTES:
        raise ValueError(f"detail must be at most {MAX_AUDIT_DETAIL_BYTES} bytes of JSON")
    return AuditRecord(checked_action, checked_target, checked_session, text)


def check_list_audit(limit: object, offset: object, action: object) -> tuple[int, int, str | None]:
    """``list_audit``'s arguments: ``(limit, offset, action)``."""
    checked_limit = check_int("limit", limit, minimum=1, maximum=MAX_LIST_LIMIT)
    checked_offset = check_int("offset", offset, minimum=0)
    if action is None:
        return checked_limit, checked_offset, None
    return (
        checked_limit,
        checked_offset,
        _audit_text("action", action, MAX_AUDIT_ACTION, empty=False),
    )


def _audit_text(name: str, value: object, maximum: int, *, empty: bool) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not value and not empty:
        raise ValueError(f"{name} must not be empty")
    if len(value) > maximum:
        raise ValueError(f"{name} must be at most {maximum} characters, not {len(value)}")
    return _storable(name, value)


def _storable(name: str, text: str) -> str:
    if "\x00" in text:
        raise ValueError(f"{name} must not contain a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} must not contain a lone surrogate (not valid Unicode)") from None
    return text


def read_detail(text: str) -> dict[str, Any]:
    """A stored detail's JSON text, decoded (an entry's detail is always an object)."""
    value = json.loads(text)
    return value if isinstance(value, dict) else {"value": value}
