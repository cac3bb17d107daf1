"""What crosses the backend boundary: a renewal's items going out, its verdicts coming back.

Every backend and the guard speak these two types, so they live apart from both
(docs/protocol.rst §2): a port implements them first.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RenewItem:
    """One job in a renewal statement: fenced by ``claim_seq``, carrying its progress and,
    when the database does not hold it yet, its latest checkpoint's JSON text (§16)."""

    job_id: int
    claim_seq: int
    progress: float | None
    checkpoint: str | None = None


class Verdict(enum.Enum):
    """What one renewal said about one job.

    What each one does is a table of the lease protocol (docs/protocol.rst, rendered there
    from the code).
    ``EXTENDED`` and ``CANCEL_REQUESTED`` both mean the row's lease was renewed; the second
    also carries a cancel directive. ``RECLAIMED`` means the row's ``claim_seq`` moved on (our
    attempt is over), ``GONE`` that the row is missing or finished, and ``UNCHANGED`` that the
    row was locked by someone else and skipped (the renewal never waits on a row lock).
    """

    EXTENDED = "extended"
    CANCEL_REQUESTED = "cancel_requested"
    RECLAIMED = "reclaimed"
    GONE = "gone"
    UNCHANGED = "unchanged"
