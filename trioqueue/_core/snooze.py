"""Snooze: a handler's answer "run me again after a delay", uncharged (docs/protocol.rst §17).

A handler raises or returns :class:`Snooze`; the runtime writes the fenced ``snooze``
outcome instead of an ack. The bound on how often a job may snooze is applied by the
statement itself, on the row's count (``jobs.snoozes``), so this module only checks the
answer and words the bound's failure; both are pure.
"""

from __future__ import annotations

import math
from typing import final

__all__ = [
    "DEFAULT_MAX_SNOOZES",
    "MAX_SNOOZE_SECONDS",
    "Snooze",
    "first_snooze",
    "snooze_limit_message",
]

#: ``WorkerConfig.max_snoozes`` unless told otherwise.
DEFAULT_MAX_SNOOZES = 100
#: The longest snooze, in seconds: about a century, what a backend stores (as the longest
#: retry delay, ``batch_outcome.MAX_SNOOZE_SECONDS``).
MAX_SNOOZE_SECONDS = 100 * 365.25 * 86400


@final
class Snooze(Exception):
    """Run this job again after ``seconds``, without charging an attempt.

    A handler (or a claim hook) may ``raise Snooze(30)`` or ``return Snooze(30)``; both
    mean the same. A batch handler may answer it as one job's outcome (docs/protocol.rst
    §20). The job goes back to its queue and can be claimed once ``seconds``
    have passed on the database's clock; its attempt count is given back and its
    ``snoozes`` count goes up by one. A job that has snoozed ``WorkerConfig.max_snoozes``
    times and snoozes again fails for good instead (docs/protocol.rst §17).

    Args:
        seconds: how long to wait, a finite number ``>= 0`` (at most about a century).

    Raises:
        TypeError: ``seconds`` is not a number (a ``bool`` is not one).
        ValueError: ``seconds`` is negative, not finite, or over about a century.
    """

    seconds: float

    def __init__(self, seconds: float) -> None:
        value: object = seconds
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise TypeError(f"Snooze(seconds) must be a number of seconds, not {value!r}")
        if not (math.isfinite(value) and 0 <= value <= MAX_SNOOZE_SECONDS):
            raise ValueError(
                f"Snooze(seconds) must be a number >= 0 and <= {MAX_SNOOZE_SECONDS:.0f}, not {value!r}"
            )
        super().__init__(seconds)
        self.seconds = float(value)

    def __str__(self) -> str:
        return f"snooze for {self.seconds:g}s"

    def __repr__(self) -> str:
        return f"Snooze({self.seconds!r})"


def first_snooze(group: BaseExceptionGroup[Snooze]) -> Snooze:
    """The ``Snooze`` that counts in a group of them (``except* Snooze``): the first."""
    found: BaseException = group
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    assert isinstance(found, Snooze)
    return found


def snooze_limit_message(max_snoozes: int) -> str:
    """``last_error`` of a job that snoozed ``max_snoozes`` times and snoozed again."""
    return (
        f"SnoozeLimitExceeded: the job snoozed max_snoozes={max_snoozes} times "
        "and asked to snooze again"
    )
