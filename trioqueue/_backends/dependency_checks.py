"""Argument checks of an enqueue's dependencies (docs/protocol.rst §21): ``depends_on``
and ``on_dependency_failure``, with what they exclude. Both backends run them before any
statement, so bad input gets one error naming every problem, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trioqueue._types import ON_DEPENDENCY_FAILURE, OnDependencyFailure

__all__ = ["MAX_DEPENDENCIES", "Dependencies", "check_dependencies"]

#: The most dependencies one enqueue may name (each is a row lock and an edge per job).
MAX_DEPENDENCIES = 10_000


@dataclass(frozen=True, slots=True)
class Dependencies:
    """A checked ``depends_on``: distinct ids, ascending (the order rows are locked in)."""

    ids: tuple[int, ...]
    policy: OnDependencyFailure


def check_dependencies(
    depends_on: object, on_dependency_failure: object, *, dedup_key: object, delay: object
) -> Dependencies | None:
    """None for no dependencies (``depends_on`` None or empty, with the default policy).

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
    if ids:
        if dedup_key is not None:
            problems.append(ValueError("depends_on cannot be combined with a dedup_key"))
        if delay is not None and delay != 0:
            problems.append(ValueError("depends_on cannot be combined with a delay"))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ValueError("; ".join(str(exc) for exc in problems))
    if not ids:
        return None
    return Dependencies(ids, on_dependency_failure)  # type: ignore[arg-type]  # checked above


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
