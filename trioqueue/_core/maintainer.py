"""The maintainer's timing decisions: when to claim, renew and prune (docs/protocol.rst §15).

Theory of operation
-------------------
Every worker pool with a ``maintenance_interval`` is a *candidate*: it asks for the store's
maintainer lease every ``H`` (its heartbeat interval) until it gets it. The holder renews
the lease every ``H`` and makes a retention pass every ``maintenance_interval`` while it
holds it. Only one pool per database holds the lease, so only one prunes.

Holding is judged on the local clock alone, as a batch's lease is (docs/protocol.rst §3):
the *fence* is the send time of the latest successful claim or renewal plus ``V``, read
before the statement went out, so it can only end before the store's own lease does. No
database answer is needed to stop: once the fence has passed, the pool is not the
maintainer, whatever is in flight. A fired fence is final: an answer that arrives at or
after the fence (a slow renewal, a slow claim) does not revive it; the pool claims anew.

A failed call (an error, a timeout) changes nothing by itself: the fence keeps running and
the call is tried again, sooner as the fence draws near. A renewal the store refuses
(``False``: the lease ran out there, or was taken over) ends the holding at once.

Everything here takes ``now`` (seconds on a monotonic clock) and does no I/O: the runtime
(``trioqueue._runtime.maintainer``) only carries these decisions out.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from trioqueue._core.timing import renewal_timeout, retry_delay

__all__ = ["Change", "LeaseCall", "MaintainerCore"]


class Change(enum.Enum):
    """What an event did to the holding, for the log lines and the gauge."""

    NONE = "none"  # nothing: still holding, or still not
    BECAME = "became"  # this pool holds the lease now
    LOST = "lost"  # the fence passed, or the store refused the lease
    RELEASED = "released"  # given up on purpose (a graceful stop)


@dataclass(frozen=True, slots=True)
class LeaseCall:
    """One claim or renewal as sent: ``seq`` None for a claim, the lease's fence to renew."""

    sent: float  # local time read before the statement went out
    seq: int | None
    timeout: float  # how long its answer is worth waiting for

    @property
    def is_claim(self) -> bool:
        return self.seq is None


class MaintainerCore:
    """The lease and pass timings of one candidate pool.

    Args:
        lease: ``V``, the lease's length (the pool's visibility timeout).
        cadence: ``H``, how often a candidate claims and the holder renews (< ``V``).
        interval: how often the holder makes a pass.
    """

    def __init__(self, lease: float, cadence: float, interval: float) -> None:
        self.lease = lease
        self.cadence = cadence
        self.interval = interval
        self.seq: int | None = None  # the lease's fence while held
        self.fence = -math.inf  # local time the holding ends unless renewed
        self._next_call = -math.inf  # the next claim or renewal is due then
        self._next_pass = -math.inf  # the next pass is due then (while holding)
        self._in_flight: LeaseCall | None = None

    # -- the lease ------------------------------------------------------------------------

    def holding(self, now: float) -> bool:
        """Whether this pool is the maintainer at ``now``: it holds a seq, fence not passed."""
        return self.seq is not None and now < self.fence

    def wake_at(self) -> float:
        """When the lease loop next has something to do: a call is due, or the fence passes
        (so the loss is noticed on time, with nothing in flight to report it)."""
        if self._in_flight is not None:
            return self.fence if self.seq is not None else math.inf
        if self.seq is not None:
            return min(self._next_call, self.fence)
        return self._next_call

    def tick(self, now: float) -> Change:
        """Notice the fence passing. Idempotent."""
        if self.seq is not None and now >= self.fence:
            self._drop(now)
            return Change.LOST
        return Change.NONE

    def call(self, now: float) -> LeaseCall | None:
        """The claim or renewal to send now, or None (one is in flight, or none is due)."""
        if self._in_flight is not None or now < self._next_call:
            return None
        if self.seq is not None:
            timeout = renewal_timeout(self.lease, self.fence - now)
        else:
            timeout = self.lease  # an answer later than V could not be used anyway
        self._in_flight = LeaseCall(now, self.seq, timeout)
        return self._in_flight

    def claimed(self, call: LeaseCall, seq: int | None, now: float) -> Change:
        """A claim's answer: the new fence ``seq``, or None (another holder's lease is live)."""
        self._answered(call)
        self._next_call = call.sent + self.cadence
        if seq is None or now >= call.sent + self.lease:
            # Refused, or too late to use: the store's lease runs out by itself.
            return self.tick(now)
        became = self.seq is None
        self.seq = seq
        self.fence = call.sent + self.lease
        return Change.BECAME if became else Change.NONE

    def renewed(self, call: LeaseCall, extended: bool, now: float) -> Change:
        """A renewal's answer: True, extended; False, refused by the store."""
        self._answered(call)
        if self.seq != call.seq:
            return self.tick(now)  # the answer of a lease already given up
        if not extended or now >= self.fence:
            self._drop(now)  # a fired fence stays fired, whatever the answer says
            return Change.LOST
        self.fence = max(self.fence, call.sent + self.lease)
        self._next_call = call.sent + self.cadence
        return Change.NONE

    def failed(self, call: LeaseCall, now: float) -> Change:
        """A call raised or timed out. A renewal is tried again while the fence runs,
        sooner as it draws near; a claim at the next cadence."""
        self._answered(call)
        if call.seq is not None and call.seq == self.seq and now < self.fence:
            self._next_call = now + retry_delay(self.cadence, self.fence - now)
            return Change.NONE
        change = self.tick(now)
        self._next_call = max(self._next_call, call.sent + self.cadence)
        return change

    def refused(self, now: float) -> Change:
        """The store said the lease is not ours (a pass's batch was fenced out)."""
        if self.seq is None:
            return Change.NONE
        self._drop(now)
        return Change.LOST

    def released(self) -> Change:
        """The lease was given up on purpose; nothing more is sent."""
        held = self.seq is not None
        self.seq = None
        self.fence = -math.inf
        self._next_call = math.inf
        return Change.RELEASED if held else Change.NONE

    def _answered(self, call: LeaseCall) -> None:
        if self._in_flight is call:
            self._in_flight = None

    def _drop(self, now: float) -> None:
        """Stop holding; claim again after one cadence (the store's lease is someone
        else's, or runs out by itself meanwhile)."""
        self.seq = None
        self.fence = -math.inf
        self._next_call = now + self.cadence

    # -- the passes -----------------------------------------------------------------------

    def pass_due(self, now: float) -> float | None:
        """When the next pass is due (now or later), or None while not holding."""
        if not self.holding(now):
            return None
        return max(now, self._next_pass)

    def pass_started(self, now: float) -> None:
        """A pass began: the next is due one interval after this one's start, however
        this one ends (done, cut by the fence, failed)."""
        self._next_pass = now + self.interval
