"""Gathering argument problems so one error names them all (docs/api.rst):
each check runs through :func:`collect`, which keeps its error instead of raising it, and
:func:`raise_problems` raises one error for every problem gathered, before anything is
read or written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["Problems", "collect", "raise_problems"]

T = TypeVar("T")
Problems = list[TypeError | ValueError]


def collect(problems: Problems, check: Callable[[], T]) -> T | None:
    """``check()``'s value, or None with its error added to ``problems``."""
    try:
        return check()
    except (TypeError, ValueError) as exc:
        problems.append(exc)
        return None


def raise_problems(problems: Problems) -> None:
    """One error naming every problem: a lone problem as it is, several as one
    ValueError (a TypeError when each of them is one)."""
    if not problems:
        return
    if len(problems) == 1:
        raise problems[0]
    kind = TypeError if all(isinstance(p, TypeError) for p in problems) else ValueError
    raise kind("; ".join(str(p) for p in problems))
