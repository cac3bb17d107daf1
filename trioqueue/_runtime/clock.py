"""One pool's watch on its clock's offset from the database's (docs/protocol.rst §8).

Every claim's answer carries the database's clock; the pool reads its own wall clock (the
backend's ``wall_time``, the clock the fence's row term uses) just before sending the claim
and just after the answer, and hands the three readings here. The rule that turns them into
a bound and a verdict is sans-IO (``trioqueue._core.clock_skew``); this module logs each
crossing once, and, while the verdict is ``stopped``, probes the database's clock at the
poll interval instead of claiming, until a probe proves the offset back under ``V - H``.
"""

from __future__ import annotations

import logging

import trio

from trioqueue._backends.interface import Backend
from trioqueue._core.clock_skew import ClockVerdict, SkewBound, judge, limits_for, measure
from trioqueue._core.timing import Timing
from trioqueue._runtime.logfields import pool_fields
from trioqueue._types import Claimed, Claims

log = logging.getLogger("trioqueue.pool")


class ClockWatch:
    """The clock verdict of one pool, and the latest bound that moved or kept it."""

    def __init__(self, backend: Backend, timing: Timing, queue: str, poll_interval: float) -> None:
        self._backend = backend
        self._queue = queue
        self._poll_interval = poll_interval
        self.limits = limits_for(timing.visibility_timeout, timing.heartbeat_interval)
        self.verdict = ClockVerdict.IN_SYNC
        self.bound: SkewBound | None = None  # None: nothing measured yet
        self._probe_failing = False

    @property
    def skew(self) -> float | None:
        """The offset's best estimate (seconds the worker's clock is ahead), if measured."""
        return None if self.bound is None else self.bound.estimate

    @property
    def stopped(self) -> bool:
        return self.verdict is ClockVerdict.STOPPED

    def observe_claim(self, sent: float, claimed: list[Claimed], received: float) -> None:
        """Judge a claim's answer (an answer without a clock reading changes nothing)."""
        database = claimed.database_clock if isinstance(claimed, Claims) else None
        if database is not None:
            self.observe(sent, database, received)

    def observe(self, sent: float, database: float, received: float) -> None:
        """Judge one request's readings; log once when the verdict changes."""
        bound = measure(sent, database, received)
        if bound is None:
            return  # the wall clock stepped back meanwhile: no evidence either way
        self.bound = bound
        verdict = judge(self.verdict, bound, self.limits)
        if verdict is not self.verdict:
            self._log_crossing(self.verdict, verdict, bound)
            self.verdict = verdict

    async def wait_until_claiming(self) -> None:
        """Return at once unless stopped; else probe the database's clock once per poll
        interval until a probe proves the offset back under ``V - H``."""
        while self.stopped:
            await trio.sleep(self._poll_interval)
            await self._probe()

    async def _probe(self) -> None:
        sent = self._backend.wall_time()
        try:
            database = await self._backend.database_clock()
        except Exception as exc:  # the claim loop's own errors will say more once it claims
            if not self._probe_failing:
                log.warning(
                    "probing the database's clock failed: %r",
                    exc,
                    extra=pool_fields(self._queue, "clock_probe_failed"),
                )
            self._probe_failing = True
            return
        self._probe_failing = False
        self.observe(sent, database, self._backend.wall_time())

    def _log_crossing(self, old: ClockVerdict, new: ClockVerdict, bound: SkewBound) -> None:
        offset = (
            f"the worker's clock is ahead of the database's by {bound.estimate:.3f}s "
            f"(between {bound.low:.3f}s and {bound.high:.3f}s)"
        )
        limits = self.limits
        fields = pool_fields(self._queue, f"clock_{new.label}")
        if new is ClockVerdict.STOPPED:
            log.error(
                "claims stopped: %s, past V - H = %gs, where every claimed job would lose its "
                "attempt; synchronise the clocks (NTP); probing every %gs to resume",
                offset, limits.stop_at, self._poll_interval, extra=fields,
            )  # fmt: skip
        elif new is ClockVerdict.AHEAD and old is ClockVerdict.IN_SYNC:
            log.warning(
                "clock skew: %s, past the %gs margin (claims stop past V - H = %gs); "
                "synchronise the clocks (NTP)",
                offset, limits.warn_at, limits.stop_at, extra=fields,
            )  # fmt: skip
        elif new is ClockVerdict.AHEAD:
            log.warning(
                "claims resumed: %s, back under V - H = %gs but past the %gs margin",
                offset, limits.stop_at, limits.warn_at, extra=fields,
            )  # fmt: skip
        else:
            log.info(
                "clock back in sync: %s, under the %gs margin%s",
                offset, limits.warn_at,
                "; claims resumed" if old is ClockVerdict.STOPPED else "",
                extra=fields,
            )  # fmt: skip
