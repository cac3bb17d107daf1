"""Argument checks of retention and the maintainer lease (docs/protocol.rst §15): both
backends run them before any statement, so bad input gets one error naming every
violation and nothing is written."""

from __future__ import annotations

from dataclasses import dataclass

from trioqueue._backends.problems import Problems, collect, raise_problems
from trioqueue._backends.validation import (
    check_age,
    check_int,
    check_queue,
    check_timeout,
    check_worker_id,
)

__all__ = [
    "MAX_PRUNE_LIMIT",
    "PolicyRequest",
    "check_audit_retention",
    "check_clear_retention",
    "check_lease",
    "check_preview_age",
    "check_prune_limit",
    "check_retention",
    "check_seq",
]

#: The most jobs (and, apart, audit entries) one retention batch deletes.
MAX_PRUNE_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """A checked ``set_retention``: seconds to keep each kind of finished job, or None."""

    queue: str | None
    succeeded: float | None
    failed: float | None


def check_retention(queue: object, succeeded: object, failed: object) -> PolicyRequest:
    """``set_retention``'s arguments: a queue name or None (the default), and each
    keep-time None (for ever) or a number of seconds > 0.

    Raises:
        TypeError, ValueError: naming every argument that is wrong (one TypeError or
            ValueError as it is when only one is).
    """
    problems: Problems = []
    name = collect(problems, lambda: None if queue is None else check_queue(queue))
    keep_succeeded = collect(problems, lambda: _keep("succeeded", succeeded))
    keep_failed = collect(problems, lambda: _keep("failed", failed))
    raise_problems(problems)
    return PolicyRequest(name, keep_succeeded, keep_failed)


def check_clear_retention(queue: object) -> str:
    """``clear_retention``'s queue: a queue name (the default policy cannot be cleared,
    only set)."""
    if queue is None:
        raise TypeError("queue must be a str: the default policy is set, never cleared")
    return check_queue(queue)


def check_audit_retention(seconds: object) -> float | None:
    """How long audit entries are kept: None (for ever) or seconds > 0."""
    return _keep("seconds", seconds)


def check_lease(holder: object, lease: object) -> tuple[str, float]:
    """A maintainer claim's or renewal's holder (a worker id) and lease length (> 0).

    Raises:
        TypeError, ValueError: naming every argument that is wrong.
    """
    problems: Problems = []
    name = collect(problems, lambda: check_worker_id(holder))
    seconds = collect(problems, lambda: check_timeout("lease", lease))
    raise_problems(problems)
    assert name is not None  # raise_problems raised otherwise
    assert seconds is not None
    return name, seconds


def check_seq(seq: object) -> int:
    """A maintainer lease's fence: an int >= 0 (the store's bigint)."""
    return check_int("seq", seq, minimum=0, maximum=2**63 - 1)


def check_prune_limit(limit: object) -> int:
    return check_int("limit", limit, minimum=1, maximum=MAX_PRUNE_LIMIT)


def check_preview_age(older_than: object) -> float | None:
    """``retention_preview``'s age: None (by the policies), else seconds >= 0."""
    return None if older_than is None else check_age("older_than", older_than)


def _keep(name: str, value: object) -> float | None:
    """A keep-time: None (for ever), else a finite number of seconds > 0."""
    if value is None:
        return None
    return check_timeout(name, value)
