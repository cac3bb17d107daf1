"""The per-job answer of a renewal statement (docs/protocol.rst §2)."""

from __future__ import annotations

import enum


class Verdict(enum.Enum):
    """What one renewal said about one job.

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

    @property
    def renews(self) -> bool:
        """True when the row's lease was extended by the renewal."""
        return self in (Verdict.EXTENDED, Verdict.CANCEL_REQUESTED)
