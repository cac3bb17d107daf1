"""What one job attempt comes to: exactly one outcome (invariant I8).

The runtime collects the facts (why the job or its batch was stopped, whether the handler
raised) and this module turns them into the single write the attempt is allowed to make.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trioqueue._core.rules import STOP_OUTCOMES, OutcomeKind, StopReason


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: OutcomeKind
    #: ``last_error`` for RETRY and FAILED, the reason for UNAVAILABLE and RELEASE.
    message: str | None = None


#: The outcome of every attempt that succeeded (outcomes are immutable: one will do).
SUCCEEDED = Outcome(OutcomeKind.SUCCEEDED)


def duration_message(max_job_duration: float | None) -> str:
    return f"claim hooks and handler ran past max_job_duration of {max_job_duration:g}s"


#: The outcome's message for work cut short by its pool going down (docs/protocol.rst §4.1).
EXITING = "released uncharged: the worker pool is going down on an exception raised elsewhere"


def snoozed_message(seconds: float) -> str:
    """The outcome's message for a handler that answered ``Snooze`` (docs/protocol.rst §17)."""
    return f"snoozed for {seconds:g}s, the attempt not charged"


def no_connection_message(error: str) -> str:
    return f"released uncharged: no database connection for the handler ({error})"


def decide(
    *,
    job_stop: StopReason | None,
    batch_stop: StopReason | None,
    error: str | None,
    attempt: int,
    max_attempts: int,
    max_job_duration: float | None,
    no_connection: str | None = None,
    exiting: bool = False,
    snooze: float | None = None,
) -> Outcome:
    """The one outcome of an attempt: the stop's row of :data:`STOP_OUTCOMES`, else the
    handler's own result (an error is a charged failure, retried while attempts remain;
    ``snooze``, the seconds of a ``Snooze`` it answered, takes the place of a success).

    A job-level stop wins over a batch-level one. The guard records a cancel only while the
    batch is still live, so it happened first (and stands when the lease is lost later:
    the first stop wins). Reclaimed or gone means the row is no longer this attempt's,
    whatever stopped it, so nothing may be written. ``no_connection`` says why the handler
    never got its database connection: infrastructure trouble, not the handler's failure,
    so the job is released uncharged, even when max_job_duration passed meanwhile
    (docs/protocol.rst §4). A cancel or a lost lease still decides as usual.

    ``exiting`` says the work was cancelled from outside its batch: the pool is going down
    on an exception raised elsewhere (another job's ``SystemExit``, say). Such work did
    nothing wrong, so it is released uncharged, unless a stop of its own came first (the
    first stop wins, I8) (docs/protocol.rst §4.1).
    """
    stop = job_stop or batch_stop
    kind = STOP_OUTCOMES[stop] if stop is not None else None
    if no_connection is not None and kind in (None, OutcomeKind.RETRY):
        return Outcome(OutcomeKind.RELEASE, no_connection_message(no_connection))
    if stop is StopReason.CANCELLED:
        detail = f" ({error})" if error else ""
        return Outcome(OutcomeKind.FAILED, f"cancelled: cancel requested{detail}")
    if stop is StopReason.DURATION:
        error = duration_message(max_job_duration)
    elif kind is not None:
        return Outcome(kind, stop.value if stop is not None else None)
    elif exiting:
        return Outcome(OutcomeKind.RELEASE, EXITING)
    return handler_result(error, attempt, max_attempts, snooze)


def handler_result(
    error: str | None, attempt: int, max_attempts: int, snooze: float | None = None
) -> Outcome:
    """The outcome of work that nothing stopped: success, or the handler's error as a
    charged failure, retried while attempts remain. A snooze (its seconds) is the handler's
    answer in place of a success; an error beside it wins (docs/protocol.rst §17)."""
    if error is None:
        return SUCCEEDED if snooze is None else Outcome(OutcomeKind.SNOOZE, snoozed_message(snooze))
    return Outcome(OutcomeKind.FAILED if attempt >= max_attempts else OutcomeKind.RETRY, error)


def decide_attempt(
    *,
    job_stop: StopReason | None,
    scope_fired: bool,
    batch_stop: Callable[[], StopReason | None],
    error: str | None,
    attempt: int,
    max_attempts: int,
    max_job_duration: float | None,
    no_connection: str | None = None,
    exiting: bool = False,
    snooze: float | None = None,
) -> tuple[Outcome, StopReason | None]:
    """The outcome of an attempt whose work just ended, and the stop that decided it.

    ``scope_fired`` says the batch's cancel scope was stopped. Without a job-level stop
    (which a batch of one delivers through that very scope), the scope only fires by its
    deadline, which mirrors the core's: ``batch_stop()`` says which one, and is asked only
    then, since asking freezes the batch's stop. Should the two ever disagree, writing
    nothing (a lost lease) is the safe reading.
    """
    if job_stop is None and not scope_fired and no_connection is None and not exiting:
        # Nothing stopped the work, as for nearly every attempt: the handler's result
        # decides, as ``decide`` would say, without its dispatch on stops.
        return handler_result(error, attempt, max_attempts, snooze), None
    stop = job_stop
    if scope_fired and job_stop is None:
        stop = batch_stop() or StopReason.LEASE_EXPIRED
    outcome = decide(
        job_stop=job_stop,
        batch_stop=None if stop is job_stop else stop,
        error=error,
        attempt=attempt,
        max_attempts=max_attempts,
        max_job_duration=max_job_duration,
        no_connection=no_connection,
        exiting=exiting,
        snooze=snooze,
    )
    return outcome, stop
