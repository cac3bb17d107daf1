"""Timing rules of the guard: cadence, retry pacing and statement timeouts.

All durations are seconds. ``V`` is the visibility timeout (the lease length), ``H`` the
heartbeat interval, ``D`` the optional maximum job duration.

These functions, like the fence's, use only arithmetic, ``min``, ``max`` and comparisons
on their times, never ``math.isnan`` or ``float()``: the z3 proofs (proofs/timing.py) call
these very functions with symbolic times, so what they prove is this code.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Shortest pause between two renewal attempts, and the shortest renewal timeout: a lease
#: about to run out is retried often, but never in a busy loop.
MIN_RETRY = 0.25

#: How long past its give-up time a renewal call may take to come back before the guard
#: abandons it and frees its slot for a renewal on another connection.
GRACE = 0.25


@dataclass(frozen=True, slots=True)
class Timing:
    """The validated timings one guard works with."""

    visibility_timeout: float
    heartbeat_interval: float
    max_job_duration: float | None = None


def auto_heartbeat(visibility_timeout: float) -> float:
    """The cadence ``heartbeat_interval="auto"`` stands for: ``max(10 s, V / 3)``."""
    return max(10.0, visibility_timeout / 3.0)


def retry_delay(heartbeat_interval: float, remaining: float) -> float:
    """Pause before retrying a failed renewal: faster as the lease runs down.

    ``min(H, max(0.25 s, remaining / 2))``, where ``remaining`` is the time left on the
    batch's local lease.
    """
    return min(heartbeat_interval, max(MIN_RETRY, remaining / 2.0))


def renewal_timeout(visibility_timeout: float, earliest_remaining: float) -> float:
    """How long a renewal statement may run: ``max(0.25 s, min(V, earliest remaining))``.

    A renewal that answers after the earliest lease it carries has expired is of no use to
    that batch, so waiting longer only delays the retry.
    """
    # NaN is the one value unequal to itself (``math.isnan`` would need a float).
    if earliest_remaining != earliest_remaining:
        earliest_remaining = visibility_timeout
    return max(MIN_RETRY, min(visibility_timeout, earliest_remaining))


def write_retries_spent(first_failure: float, now: float, visibility_timeout: float) -> bool:
    """Whether an outcome write that first failed at ``first_failure``, and failed again
    ``now``, is given up: once one lease ``V`` has passed since (docs/protocol.rst §4.2).

    While the write is retried the job's lease is still renewed, so without this bound a
    write that fails for ever would hold its job for the life of the process.
    """
    return now - first_failure >= visibility_timeout
