"""The sans-IO core of the trioqueue lease protocol.

Nothing in this package imports trio, asyncpg or any other I/O library, and no function
reads a clock: every decision takes ``now`` (the worker's monotonic time, in seconds) as an
argument. The trio runtime (``trioqueue._runtime``: the guard, the batches, the pool) only
executes the decisions made here, which is what lets the protocol be property-tested with a
float clock and ported to other languages line by line.
"""

from trioqueue._core.backoff import ExponentialBackoff
from trioqueue._core.fence import advanced_deadline, initial_deadline, local_row_deadline
from trioqueue._core.guard_rules import Effects, GuardCore, Renewal
from trioqueue._core.outcome import Outcome, decide
from trioqueue._core.progress import valid_progress
from trioqueue._core.rules import (
    STOP_OUTCOMES,
    VERDICT_RULES,
    OutcomeKind,
    StopReason,
    VerdictRule,
)
from trioqueue._core.timing import (
    GRACE,
    MIN_RETRY,
    Timing,
    renewal_timeout,
    retry_delay,
)
from trioqueue._core.wire import RenewItem, Verdict

__all__ = [
    "GRACE",
    "MIN_RETRY",
    "STOP_OUTCOMES",
    "VERDICT_RULES",
    "Effects",
    "ExponentialBackoff",
    "GuardCore",
    "Outcome",
    "OutcomeKind",
    "RenewItem",
    "Renewal",
    "StopReason",
    "Timing",
    "Verdict",
    "VerdictRule",
    "advanced_deadline",
    "decide",
    "initial_deadline",
    "local_row_deadline",
    "renewal_timeout",
    "retry_delay",
    "valid_progress",
]
