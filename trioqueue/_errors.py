"""The exceptions trioqueue raises."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


class TrioqueueError(Exception):
    """Base class of every error trioqueue raises on its own account."""


class ConfigError(TrioqueueError, ValueError):
    """A worker configuration is invalid. ``problems`` lists every violation found."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        listing = "\n".join(f"  - {problem}" for problem in self.problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"invalid worker configuration ({count} {noun}):\n{listing}")


class BackendError(TrioqueueError):
    """A backend operation failed (a lost connection, a server error, an injected fault).

    Attributes:
        transient: whether trying again may succeed. True (the default) for trouble that
            passes by itself: a lost connection, a timeout, a serialization failure, too
            many connections, a server shutting down or starting up. False when only
            someone's action helps: a missing table or schema, a missing permission, a
            value the database refuses. A worker pool retries claims that fail transiently
            and stops on any other failure (docs/usage.rst).
        hint: what to do about it, when the backend knows (for a schema that was never
            migrated, say), else None. Not part of ``str(exc)``.
    """

    def __init__(self, *args: object, transient: bool = True, hint: str | None = None) -> None:
        super().__init__(*args)
        self.transient = transient
        self.hint = hint


class UnknownJobError(TrioqueueError, LookupError):
    """No job has the given id."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"no job with id {job_id}")


class UnknownDependencyError(TrioqueueError, LookupError):
    """An enqueue named dependencies (``depends_on``) that no job has; nothing was written.

    ``job_ids`` lists every such id, ascending (docs/protocol.rst §21).
    """

    def __init__(self, job_ids: Iterable[int]) -> None:
        self.job_ids: tuple[int, ...] = tuple(sorted(job_ids))
        listed = ", ".join(str(job_id) for job_id in self.job_ids)
        noun = "id" if len(self.job_ids) == 1 else "ids"
        super().__init__(f"depends_on names no job with {noun} {listed}")


def is_transient(exc: BaseException) -> bool:
    """Whether an operation that raised ``exc`` may succeed when tried again.

    The backend says so for a :class:`BackendError`. A ``TypeError`` or ``ValueError`` is an
    argument check refusing a value (``trioqueue._backends.validation``): the same call is refused
    every time. Anything else is taken as passing trouble, as it always was.
    """
    if isinstance(exc, BackendError):
        return exc.transient
    return not isinstance(exc, TypeError | ValueError | UnknownDependencyError)


def leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    """The exceptions inside ``group`` and its nested groups (trio wraps a task's error in
    one group per nursery it crosses)."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from leaves(exc)
        else:
            yield exc


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then each exception it was raised from (``raise ... from``), once each."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__


def exit_request(exc: BaseException) -> SystemExit | KeyboardInterrupt | None:
    """The ``SystemExit`` or ``KeyboardInterrupt`` that ``exc`` is or holds (trio delivers a
    task's exception inside one group per nursery it crosses), the first if several: an
    exception that asks the process to exit. None if it holds neither."""
    found = leaves(exc) if isinstance(exc, BaseExceptionGroup) else iter((exc,))
    for leaf in found:
        if isinstance(leaf, SystemExit | KeyboardInterrupt):
            return leaf
    return None
