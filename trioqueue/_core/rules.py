"""The protocol's decisions as data: what a verdict does, and what a stop comes to.

Two tables carry the rules that the guard and the outcome logic apply
(docs/protocol.rst §2, §4 and §5). The code reads them; the docs build renders them into
docs/protocol.rst, so the specification and the implementation cannot drift apart
(h11 does the same for its state machine). A port can copy the tables as they are.

- :data:`VERDICT_RULES`: for each verdict of a renewal, whether it renews the row's lease,
  whether it ends the job's attempt (and as which stop), whether it carries a cancel
  directive, and how many consecutive renewals must say it before it is believed.
- :data:`STOP_OUTCOMES`: for each reason a handler was stopped, the outcome its attempt
  comes to. ``RETRY`` there means a *charged* failure: retried while attempts remain, else
  ``FAILED``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from trioqueue._core.wire import Verdict

__all__ = ["STOP_OUTCOMES", "VERDICT_RULES", "OutcomeKind", "StopReason", "VerdictRule"]


class StopReason(enum.Enum):
    """Why a job's handler (or a whole batch) was stopped before it finished."""

    LEASE_EXPIRED = "lease expired without renewal"
    DURATION = "max_job_duration exceeded"
    SHUTDOWN = "released at worker shutdown"
    CANCELLED = "cancelled"
    RECLAIMED = "reclaimed by another worker"
    GONE = "job row is gone (finished or deleted elsewhere)"


class OutcomeKind(enum.Enum):
    """The one write an attempt is allowed to make (invariant I8)."""

    SUCCEEDED = "succeeded"  # fenced ack
    RETRY = "retry"  # fenced failure, back to the queue after a backoff
    FAILED = "failed"  # fenced failure, final
    RELEASE = "release"  # fenced release (shutdown, no connection): the attempt is not charged
    SNOOZE = "snooze"  # fenced snooze: back after a delay, the attempt not charged (§17)
    UNAVAILABLE = "unavailable"  # the attempt lost its lease: nothing is written


@dataclass(frozen=True, slots=True)
class VerdictRule:
    """What one verdict of a renewal does to the job it is about."""

    #: The row's lease was extended: the batch's fence may advance (when every job says so).
    renews: bool
    #: The job's attempt is over, as this stop: it is renewed no more, nothing is written.
    stops: StopReason | None = None
    #: A cancel directive for the handler (unless an earlier stop already cancelled it).
    cancels: bool = False
    #: Consecutive renewals that must say it before it is believed (the first ``gone`` may
    #: be this worker's own ack racing the renewal); the confirming renewal follows soon.
    believed_after: int = 1


#: The verdict → action table (docs/protocol.rst §2, §5).
VERDICT_RULES: Mapping[Verdict, VerdictRule] = MappingProxyType(
    {
        Verdict.EXTENDED: VerdictRule(renews=True),
        # A cancel also extends the row, so a job winding down keeps its lease (§4).
        Verdict.CANCEL_REQUESTED: VerdictRule(renews=True, cancels=True),
        Verdict.RECLAIMED: VerdictRule(renews=False, stops=StopReason.RECLAIMED),
        Verdict.GONE: VerdictRule(renews=False, stops=StopReason.GONE, believed_after=2),
        # Locked by someone else and skipped: not renewed, retried sooner (§2).
        Verdict.UNCHANGED: VerdictRule(renews=False),
    }
)

#: The stop → outcome table (docs/protocol.rst §3, §4, §5). When several stops apply, the
#: job's own (a cancel, reclaimed, gone) wins over its batch's, and the batch's is the
#: first deadline that passed.
STOP_OUTCOMES: Mapping[StopReason, OutcomeKind] = MappingProxyType(
    {
        StopReason.CANCELLED: OutcomeKind.FAILED,  # final, never retried
        StopReason.LEASE_EXPIRED: OutcomeKind.UNAVAILABLE,
        StopReason.RECLAIMED: OutcomeKind.UNAVAILABLE,
        StopReason.GONE: OutcomeKind.UNAVAILABLE,
        StopReason.SHUTDOWN: OutcomeKind.RELEASE,  # the attempt is given back
        StopReason.DURATION: OutcomeKind.RETRY,  # charged: FAILED on the last attempt
    }
)
