"""A job's attempts as the job page's timeline (docs/dashboard.rst, "Job page").

Each attempt row (docs/protocol.rst §14) holds when it was claimed, when its handler started
and when its outcome was written, and how long the job had waited, visible, for the claim:
so the moment it became visible is ``claimed_at - wait_seconds``. The page shows those
moments in order for each attempt, with who ran it and how it ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise

import trioqueue

__all__ = ["OUTCOME_LABELS", "Step", "error_attempt", "steps"]

#: How each outcome reads on the page (``retry`` and ``lost`` need words to make sense).
OUTCOME_LABELS = {
    "succeeded": "succeeded",
    "retry": "failed, retried",
    "failed": "failed",
    "cancelled": "cancelled",
    "released": "released, not charged",
    "snoozed": "snoozed, not charged",
    "awaiting": "waiting for its children, not charged",
    "lost": "lease lost, taken over",
}


@dataclass(frozen=True, slots=True)
class Step:
    """One moment of an attempt: ``visible``, ``claimed``, ``started`` or ``finished``."""

    name: str
    at: datetime
    #: Seconds since the step before (None for the first): the page's times are to the
    #: second, and an attempt's moments are often closer than that.
    after: float | None = None


def steps(attempt: trioqueue.AttemptInfo) -> list[Step]:
    """The moments of one attempt the row knows, oldest first."""
    moments = []
    if attempt.wait_seconds is not None:
        visible = attempt.claimed_at - timedelta(seconds=attempt.wait_seconds)
        moments.append(("visible", visible))
    moments.append(("claimed", attempt.claimed_at))
    if attempt.started_at is not None:
        moments.append(("started", attempt.started_at))
    moments.append(("lost" if attempt.outcome == "lost" else "finished", attempt.finished_at))
    out = [Step(*moments[0])]
    for (_, before), (name, at) in pairwise(moments):
        out.append(Step(name, at, max(0.0, (at - before).total_seconds())))
    return out


def error_attempt(last_error: str | None, attempts: Sequence[trioqueue.AttemptInfo]) -> int | None:
    """Which attempt the job's ``last_error`` is from: the latest one with an error (a
    later success keeps the error of the attempt before). None when there is no error,
    or no recorded attempt has one (an error written before attempts were recorded)."""
    if not last_error:
        return None
    with_error = [a.attempt for a in attempts if a.error is not None]
    return with_error[-1] if with_error else None
