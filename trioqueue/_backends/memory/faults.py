"""Fault descriptions for the memory backend's fault injection (``backend.inject``).

A fault is plain, frozen data: *what* should go wrong with an operation. The memory
backend interprets it (``trioqueue._backends.memory``), so a fault can be built, compared and
printed without a running trio loop. The public constructors are re-exported by
:mod:`trioqueue.testing`.

Every fault has ``times``: it applies to the next ``times`` calls of the operation it is
injected into and then clears itself; ``None`` means every call until it is cleared.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias, final

from trioqueue._backends.validation import _show, check_int

__all__ = [
    "DelayFault",
    "ErrorFault",
    "Fault",
    "HangFault",
    "OmitFault",
    "delay",
    "error",
    "hang",
    "omit",
]


@final
@dataclass(frozen=True, slots=True)
class HangFault:
    """The call stalls for ``seconds`` (or until the fault is cleared)."""

    seconds: float
    interruptible: bool
    after: bool
    times: int | None


@final
@dataclass(frozen=True, slots=True)
class DelayFault:
    """The call is slow: an interruptible stall of ``seconds``."""

    seconds: float
    after: bool
    times: int | None


@final
@dataclass(frozen=True, slots=True)
class ErrorFault:
    """The call raises ``exc`` (``None``: a :class:`~trioqueue.BackendError`)."""

    exc: BaseException | None
    after: bool
    times: int | None


@final
@dataclass(frozen=True, slots=True)
class OmitFault:
    """A renewal leaves ``job_ids`` untouched and out of its answer."""

    job_ids: frozenset[int]
    times: int | None


Fault: TypeAlias = HangFault | DelayFault | ErrorFault | OmitFault


def hang(
    seconds: float = math.inf,
    *,
    interruptible: bool = True,
    after: bool = False,
    times: int | None = None,
) -> HangFault:
    """A call that stalls while holding its connection.

    Args:
        seconds: how long the call stalls; it also ends as soon as the fault is cleared
            with ``backend.inject(op, None)``.
        interruptible: ``False`` makes the stall ignore cancellation (it runs shielded),
            like a wedged driver call: only ``seconds`` passing or clearing the fault ends it.
        after: ``False``: the stall comes before the operation takes effect. ``True``: the
            operation takes effect, then its answer is held back (a late response).
        times: apply to the next ``times`` calls only; ``None``: every call until cleared.

    Raises:
        ValueError: ``seconds`` is negative or NaN, or ``times`` is not positive.
    """
    return HangFault(_seconds(seconds), bool(interruptible), bool(after), _times(times))


def delay(seconds: float, *, after: bool = False, times: int | None = None) -> DelayFault:
    """A slow call: an interruptible stall of ``seconds`` while holding its connection.

    Args:
        seconds: the extra latency.
        after: ``False``: slow before the operation takes effect; ``True``: the operation
            takes effect, then its answer is late.
        times: apply to the next ``times`` calls only; ``None``: every call until cleared.

    Raises:
        ValueError: ``seconds`` is negative or NaN, or ``times`` is not positive.
    """
    return DelayFault(_seconds(seconds), bool(after), _times(times))


def error(
    exc: BaseException | None = None, *, after: bool = False, times: int | None = None
) -> ErrorFault:
    """A failing call.

    Args:
        exc: the exception instance to raise; ``None`` raises
            ``BackendError("injected error in <op>")``, a transient one (a pool retries
            its claims). ``BackendError("...", transient=False)`` is trouble that retrying
            cannot fix, such as a missing table: a pool whose claim meets it stops.
        after: ``False`` (the usual case): the call fails before the operation takes effect.
            ``True``: the operation takes effect and the caller still gets the error (the
            connection dropped after the commit).
        times: apply to the next ``times`` calls only; ``None``: every call until cleared.

    Raises:
        TypeError: ``exc`` is not an exception instance.
        ValueError: ``times`` is not positive.
    """
    if exc is not None and not isinstance(exc, BaseException):
        raise TypeError(f"exc must be an exception instance or None, not {exc!r}")
    return ErrorFault(exc, bool(after), _times(times))


def omit(job_ids: Iterable[int], *, times: int | None = None) -> OmitFault:
    """A renewal that skips some jobs: they are neither renewed nor in its answer.

    Only valid for the ``"renew"`` operation. The guard counts a missing job as
    ``UNCHANGED``, so this exercises its retry path without touching the other jobs.

    Args:
        job_ids: the jobs to leave out.
        times: apply to the next ``times`` renewals only; ``None``: every one until cleared.

    Raises:
        TypeError: a job id is not an int.
        ValueError: ``times`` is not positive.
    """
    ids = frozenset(job_ids)
    for job_id in ids:
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            raise TypeError(f"job ids must be ints, not {job_id!r}")
    return OmitFault(ids, _times(times))


def _seconds(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"seconds must be a number, not {seconds!r}")
    if seconds < 0 or (isinstance(seconds, float) and math.isnan(seconds)):
        raise ValueError(f"seconds must be >= 0, not {_show(seconds)}")
    try:
        return float(seconds)
    except OverflowError:  # an int beyond the float range: as long as math.inf
        return math.inf


def _times(times: int | None) -> int | None:
    return None if times is None else check_int("times", times, minimum=1)
