"""Argument checks of an enqueue's dependencies (docs/protocol.rst §21): ``depends_on``
and ``on_dependency_failure``, with what they exclude. Both backends run them before any
statement, so bad input gets one error naming every problem, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trioqueue._errors import UnknownJobError
from trioqueue._types import ON_DEPENDENCY_FAILURE, OnDependencyFailure

__all__ = ["MAX_DEPENDENCIES", "Dependencies", "check_dependencies", "parent_refused"]

#: The most dependencies one enqueue may name (each is a row lock and an edge per job).
MAX_DEPENDENCIES = 10_000


@dataclass(frozen=True, slots=True)
class Dependencies:
    """A checked ``depends_on``: distinct ids, ascending (the order rows are locked in),
    and the ``parent_id`` the jobs go under (docs/protocol.rst §22), None for none."""

    ids: tuple[int, ...]
    policy: OnDependencyFailure
    parent_id: int | None = None


def check_dependencies(
    depends_on: object,
    on_dependency_failure: object,
    *,
    dedup_key: object,
    delay: object,
    parent_id: object = None,
) -> Dependencies | None:
    """None for no dependencies and no parent (``depends_on`` None or empty, and
    ``parent_id`` None).

    Raises:
        TypeError, ValueError: naming every problem, in one error (a ``TypeError`` only when
            that is the one problem).
    """
    problems: list[TypeError | ValueError] = []
    ids = _ids(depends_on, problems)
    if on_dependency_failure not in ON_DEPENDENCY_FAILURE:
        choices = ", ".join(repr(choice) for choice in ON_DEPENDENCY_FAILURE)
        problems.append(
            ValueError(
                f"on_dependency_failure must be one of {choices}, not {on_dependency_failure!r}"
            )
        )
    parent = _parent(parent_id, ids, problems)
    for name, given in (("depends_on", bool(ids)), ("parent_id", parent is not None)):
        if given and dedup_key is not None:
            problems.append(ValueError(f"{name} cannot be combined with a dedup_key"))
        if given and delay is not None and delay != 0:
            problems.append(ValueError(f"{name} cannot be combined with a delay"))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ValueError("; ".join(str(exc) for exc in problems))
    if not ids and parent is None:
        return None
    return Dependencies(ids, on_dependency_failure, parent)  # type: ignore[arg-type]  # checked


def parent_refused(parent_id: int, missing: bool) -> Exception:
    """What an enqueue under ``parent_id`` raises when the statement refused the parent
    (docs/protocol.rst §22): no such job, or one that has finished. Nothing was written."""
    if missing:
        return UnknownJobError(parent_id)
    return ValueError(f"parent {parent_id} has finished: a child needs an unfinished parent")


def _parent(
    parent_id: object, ids: tuple[int, ...], problems: list[TypeError | ValueError]
) -> int | None:
    if parent_id is None:
        return None
    if isinstance(parent_id, bool) or not isinstance(parent_id, int):
        problems.append(TypeError(f"parent_id must be a job id (an int), not {parent_id!r}"))
        return None
    if not 1 <= parent_id < 2**63:
        problems.append(ValueError(f"parent_id names an id no job can have: {parent_id!r}"))
    if parent_id in ids:
        problems.append(
            ValueError(f"parent_id {parent_id} is in depends_on: the job would wait for its parent")
        )
    return parent_id


def _ids(depends_on: object, problems: list[TypeError | ValueError]) -> tuple[int, ...]:
    if depends_on is None:
        return ()
    if isinstance(depends_on, str | bytes | bytearray) or not isinstance(depends_on, Sequence):
        kind = type(depends_on).__name__
        problems.append(TypeError(f"depends_on must be a sequence of job ids, not {kind}"))
        return ()
    bad = [repr(v) for v in depends_on if isinstance(v, bool) or not isinstance(v, int)]
    if bad:
        shown = ", ".join(bad[:5]) + (", ..." if len(bad) > 5 else "")
        problems.append(TypeError(f"depends_on must hold job ids (ints), not {shown}"))
        return ()
    ids = tuple(sorted(set(depends_on)))
    if len(ids) > MAX_DEPENDENCIES:
        problems.append(
            ValueError(f"depends_on may name at most {MAX_DEPENDENCIES} jobs, not {len(ids)}")
        )
    out_of_range = [i for i in ids if not 1 <= i < 2**63]
    if out_of_range:
        problems.append(ValueError(f"depends_on names ids no job can have: {out_of_range[:5]!r}"))
    return ids
