"""Clock skew between a worker and its database: the bound, the thresholds, the verdict.

Theory of operation (docs/protocol.rst §8). The worker reads its wall clock just before it
sends a request (``sent``) and just after the answer arrives (``received``); the answer
carries the database's clock reading (``database``), taken at some instant in between. So
the offset (worker wall clock minus database clock) lies in
``[sent - database, received - database]``, whatever the network did: a slow round trip
only widens the bound. Nothing here reads a clock or does I/O.

A verdict moves only on proof: up when the bound's lower end is past a threshold, down
when its upper end is back under it. A bound straddling a threshold keeps the verdict. A
worker behind the database (a negative offset) is harmless to the fence and never moves
it.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

#: The warning threshold's ceiling: a synchronised clock is off by milliseconds, so an
#: offset proven past a second means the synchronisation is broken.
WARN_CEILING = 1.0


class ClockVerdict(enum.IntEnum):
    """Ordered: each verdict is the one above the previous threshold."""

    IN_SYNC = 0
    AHEAD = 1  # warn: proven ahead by more than the margin
    STOPPED = 2  # stop claiming: proven ahead by more than V - H

    @property
    def label(self) -> str:
        """The name the registry, the logs and the dashboard use."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class SkewBound:
    """The offset (worker wall clock minus database clock) lies in ``[low, high]``."""

    low: float
    high: float

    @property
    def estimate(self) -> float:
        """The middle of the bound: off by at most half the round trip."""
        return (self.low + self.high) / 2.0


@dataclass(frozen=True, slots=True)
class SkewLimits:
    """The two thresholds of a pool, in seconds of worker-ahead offset."""

    warn_at: float
    stop_at: float


def limits_for(visibility_timeout: float, heartbeat_interval: float) -> SkewLimits:
    """Warn past ``min(1 s, (V - H) / 2)``, stop claiming past ``V - H``.

    Past ``V - H`` every batch registers with a fence shorter than ``H`` (``V - offset``):
    the lease no longer outlives one missed heartbeat (docs/protocol.rst §7), and from
    ``V`` on every batch is refused on arrival.
    """
    stop_at = visibility_timeout - heartbeat_interval
    return SkewLimits(warn_at=min(WARN_CEILING, stop_at / 2.0), stop_at=stop_at)


def measure(sent: float, database: float, received: float) -> SkewBound | None:
    """The bound one request's readings prove; None when they prove nothing (a reading
    that is not finite, or a wall clock that stepped back between send and receive)."""
    if not all(math.isfinite(x) for x in (sent, database, received)) or received < sent:
        return None
    return SkewBound(low=sent - database, high=received - database)


def judge(previous: ClockVerdict, bound: SkewBound, limits: SkewLimits) -> ClockVerdict:
    """The verdict after ``bound``: at least what its lower end proves, at most what its
    upper end allows, else unchanged."""
    proven = _level(bound.low, limits)
    possible = _level(bound.high, limits)
    return max(proven, min(previous, possible))


def _level(offset: float, limits: SkewLimits) -> ClockVerdict:
    """The verdict an offset known exactly would have."""
    if offset > limits.stop_at:
        return ClockVerdict.STOPPED
    if offset > limits.warn_at:
        return ClockVerdict.AHEAD
    return ClockVerdict.IN_SYNC
